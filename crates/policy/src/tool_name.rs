//! Tool names as the gate knows them: built-ins, MCP tools and names tollgate does not have.

use std::fmt;

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolName {
    Bash,
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    WebFetch,
    TodoWrite,
    ToolSearch,
    Agent,
    Skill,
    /// `mcp__server__tool`; a rule may name a whole server (`tool: None`).
    Mcp {
        server: String,
        tool: Option<String>,
    },
    /// A syntactically valid name that is no tool of tollgate's (a Claude Code settings file may
    /// name `WebSearch` or `NotebookEdit`). A rule for it loads but can never match.
    Other(String),
}

/// The providers' limit on a tool name (OpenAI's is the tighter, 64): an MCP tool's name is
/// cut to it.
pub const MAX_TOOL_NAME: usize = 64;

impl ToolName {
    /// The built-in tools; the order is the order they are offered to the model.
    pub const BUILTINS: [ToolName; 11] = [
        ToolName::Read,
        ToolName::Write,
        ToolName::Edit,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::Bash,
        ToolName::WebFetch,
        ToolName::TodoWrite,
        ToolName::ToolSearch,
        ToolName::Agent,
        ToolName::Skill,
    ];

    /// Parses a tool name; `None` when it is not a plausible name at all.
    pub fn parse(name: &str) -> Option<ToolName> {
        let plain = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        let without_server_wildcard = name.strip_suffix("__*").unwrap_or(name);
        if !plain(without_server_wildcard) {
            return None;
        }
        if let Some(rest) = name.strip_prefix("mcp__") {
            let (server, tool) = match rest.split_once("__") {
                Some((server, "*")) => (server, None),
                Some((server, tool)) => (server, Some(tool.to_string())),
                None => (rest, None),
            };
            if server.is_empty() || tool.as_deref() == Some("") {
                return None;
            }
            return Some(ToolName::Mcp {
                server: server.to_string(),
                tool,
            });
        }
        // `Task` is Claude Code's older name for Agent: its settings files still say
        // `Task(Explore)`.
        if name == "Task" {
            return Some(ToolName::Agent);
        }
        Some(
            ToolName::BUILTINS
                .into_iter()
                .find(|builtin| builtin.builtin_name() == Some(name))
                .unwrap_or_else(|| ToolName::Other(name.to_string())),
        )
    }

    /// For a name that is no tool of tollgate's, the built-in it is likely a slip for
    /// (`Raed` → `Read`, `bash` → `Bash`).
    pub fn close_builtin(&self) -> Option<ToolName> {
        let ToolName::Other(name) = self else {
            return None;
        };
        let names: Vec<String> = Self::BUILTINS.iter().map(ToString::to_string).collect();
        let close = crate::config::did_you_mean(name, names.iter().map(String::as_str))?;
        ToolName::parse(close)
    }

    /// A tool whose `file_path` names the one file it touches (Claude Code's NotebookEdit too).
    pub fn is_file_tool(&self) -> bool {
        match self {
            ToolName::Read | ToolName::Write | ToolName::Edit => true,
            ToolName::Other(name) => name == "NotebookEdit",
            _ => false,
        }
    }

    /// The name of a model's tool call: what it names, or `Other` with the text as sent when
    /// it names no tool (a call must keep the name the model used, whatever it is).
    pub fn from_model(name: &str) -> ToolName {
        match ToolName::parse(name) {
            Some(parsed) if parsed.to_string() == name => parsed,
            _ => ToolName::Other(name.to_string()),
        }
    }

    /// Whether a rule naming `self` covers a call of `tool` (`mcp__server` covers all of the
    /// server's tools).
    pub fn covers(&self, tool: &ToolName) -> bool {
        match (self, tool) {
            (
                ToolName::Mcp {
                    server: rule_server,
                    tool: None,
                },
                ToolName::Mcp { server, .. },
            ) => rule_server == server,
            _ => self == tool,
        }
    }

    /// [`covers`](Self::covers) with MCP server and tool names compared in any case (the
    /// built-ins' names have one spelling).
    pub fn covers_in_any_case(&self, tool: &ToolName) -> bool {
        match (self, tool) {
            (
                ToolName::Mcp {
                    server: rule_server,
                    tool: rule_tool,
                },
                ToolName::Mcp { server, tool },
            ) => {
                rule_server.eq_ignore_ascii_case(server)
                    && match (rule_tool, tool) {
                        (None, _) => true,
                        (Some(rule_tool), Some(tool)) => {
                            rule_tool.eq_ignore_ascii_case(tool)
                                || cut_from(rule_tool, tool, self.to_string().len())
                        }
                        (Some(_), None) => false,
                    }
            }
            _ => self == tool,
        }
    }

    /// File tools whose path rules follow Claude Code: Edit rules cover every writing tool,
    /// Read rules every reading one.
    pub fn is_file_writer(&self) -> bool {
        matches!(self, ToolName::Write | ToolName::Edit)
    }

    pub fn is_file_reader(&self) -> bool {
        matches!(self, ToolName::Read | ToolName::Glob | ToolName::Grep)
    }
}

/// Whether an MCP tool's name, cut to [`MAX_TOOL_NAME`] as the APIs require, is the cut of
/// the name a rule spells in full (`rule_len` long): a deny rule written with the server's
/// own long name must still match the tool.
fn cut_from(rule_tool: &str, tool: &str, rule_len: usize) -> bool {
    let cut_len = rule_len - rule_tool.len() + tool.len();
    rule_len > MAX_TOOL_NAME
        && cut_len == MAX_TOOL_NAME
        && rule_tool
            .get(..tool.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(tool))
}

impl ToolName {
    /// A built-in's name, without formatting (every call the gate decides parses one).
    fn builtin_name(&self) -> Option<&'static str> {
        Some(match self {
            ToolName::Bash => "Bash",
            ToolName::Read => "Read",
            ToolName::Write => "Write",
            ToolName::Edit => "Edit",
            ToolName::Glob => "Glob",
            ToolName::Grep => "Grep",
            ToolName::WebFetch => "WebFetch",
            ToolName::TodoWrite => "TodoWrite",
            ToolName::ToolSearch => "ToolSearch",
            ToolName::Agent => "Agent",
            ToolName::Skill => "Skill",
            ToolName::Mcp { .. } | ToolName::Other(_) => return None,
        })
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolName::Mcp { server, tool } => match tool {
                Some(tool) => write!(f, "mcp__{server}__{tool}"),
                None => write!(f, "mcp__{server}"),
            },
            ToolName::Other(name) => f.write_str(name),
            builtin => f.write_str(builtin.builtin_name().unwrap_or_default()),
        }
    }
}

impl Serialize for ToolName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_builtins_mcp_and_others() {
        assert_eq!(ToolName::parse("Bash"), Some(ToolName::Bash));
        assert_eq!(
            ToolName::parse("mcp__github__create_issue"),
            Some(ToolName::Mcp {
                server: "github".into(),
                tool: Some("create_issue".into())
            })
        );
        let server = ToolName::parse("mcp__github__*").unwrap();
        assert_eq!(server, ToolName::parse("mcp__github").unwrap());
        assert!(server.covers(&ToolName::parse("mcp__github__x").unwrap()));
        assert!(!server.covers(&ToolName::parse("mcp__gitlab__x").unwrap()));
        // Deny and ask rules compare MCP names in any case; allow rules exactly.
        let named = |name: &str| ToolName::parse(name).unwrap();
        let cases = [
            ("mcp__github", "mcp__GitHub__x", false, true),
            ("mcp__github__*", "mcp__GITHUB__x", false, true),
            ("mcp__github__Delete", "mcp__github__delete", false, true),
            ("mcp__github__delete", "mcp__GitHub__DELETE", false, true),
            ("mcp__github__delete", "mcp__github__deletes", false, false),
            ("mcp__github", "mcp__github_x__y", false, false),
            ("Bash", "Bash", true, true),
        ];
        let long = format!("mcp__srv__{}", "d".repeat(70));
        let cut = &long[..MAX_TOOL_NAME];
        assert!(named(&long).covers_in_any_case(&named(cut)));
        assert!(
            named(&long.to_uppercase().replacen("MCP", "mcp", 1)).covers_in_any_case(&named(cut))
        );
        assert!(!named(&long).covers(&named(cut)));
        assert!(!named(&long).covers_in_any_case(&named(&cut[..MAX_TOOL_NAME - 1])));
        assert!(
            !named(&format!("mcp__srv__{}", "d".repeat(40)))
                .covers_in_any_case(&named(&format!("mcp__srv__{}", "d".repeat(30))))
        );
        for (rule, call, exact, any_case) in cases {
            assert_eq!(named(rule).covers(&named(call)), exact, "{rule} {call}");
            assert_eq!(
                named(rule).covers_in_any_case(&named(call)),
                any_case,
                "{rule} {call}"
            );
        }
        assert_eq!(
            ToolName::parse("WebSearch"),
            Some(ToolName::Other("WebSearch".into()))
        );
        assert_eq!(ToolName::parse("Task"), Some(ToolName::Agent));
        // A model's call named `Task` is no call of Agent's.
        assert_eq!(ToolName::from_model("Task"), ToolName::Other("Task".into()));
        assert_eq!(ToolName::parse("Bash x"), None);
        assert_eq!(ToolName::parse(""), None);
        assert_eq!(ToolName::parse("mcp__"), None);
    }
}
