//! One agent file (Claude Code's format): YAML front matter between `---` lines — `name`,
//! `description`, `tools`, `disallowedTools`, `model`, `maxTurns` — then the agent's
//! instructions. Pure: takes the text and its path, returns the profile and what was left
//! aside, or an error at file:line:column. Keys that would grant something (`permissionMode`,
//! `hooks`, `mcpServers`, …) are left aside and said so: an agent file grants nothing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::config::{self, ConfigError};
use crate::policy::ToolName;
use crate::skills::split_front_matter;
use crate::tools::{AgentProfile, SubagentKind};

/// Longest name and description accepted: the list of agents is in the Agent tool's
/// description, in every request.
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;

#[derive(Debug, Deserialize)]
struct FrontMatter {
    name: Spanned<String>,
    description: Spanned<String>,
    tools: Option<Spanned<ToolList>>,
    #[serde(rename = "disallowedTools")]
    disallowed_tools: Option<Spanned<ToolList>>,
    model: Option<String>,
    #[serde(rename = "maxTurns")]
    max_turns: Option<Spanned<u32>>,
    /// Every other key: read so Claude Code's agent files load, listed as left aside.
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

/// `tools: Read, Grep` (Claude Code's usual spelling) or a YAML list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    Text(String),
    List(Vec<String>),
}

impl ToolList {
    fn names(&self) -> Vec<String> {
        let names: Vec<&str> = match self {
            ToolList::Text(text) => text.split(',').collect(),
            ToolList::List(list) => list.iter().map(String::as_str).collect(),
        };
        names
            .into_iter()
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// A parsed agent file: the profile, and notices of what it said that is not applied.
#[derive(Debug)]
pub struct Parsed {
    pub profile: AgentProfile,
    pub notices: Vec<String>,
}

/// Parses `text`, the content of `file`.
pub fn parse(text: &str, file: &Path) -> Result<Parsed, ConfigError> {
    parse_text(text, file).map_err(|err| err.with_source(file, text))
}

fn parse_text(text: &str, file: &Path) -> Result<Parsed, ConfigError> {
    let at = |line: u64, column: u64, message: &str| ConfigError::new(file, line, column, message);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| {
            at(
                1,
                1,
                "an agent file starts with a `---` line, then YAML front matter (name, description), then `---`",
            )
        })?;
    let (yaml, body) = split_front_matter(rest).ok_or_else(|| {
        at(
            1,
            1,
            "the front matter is not closed: add a `---` line after it",
        )
    })?;
    // Lines in the front matter are one below the YAML's own count (the opening `---`).
    let raw: FrontMatter = config::parse(yaml, file).map_err(|err| ConfigError {
        line: if err.line == 0 { 0 } else { err.line + 1 },
        ..err
    })?;
    let located = |referenced: serde_saphyr::Location, message: String| {
        at(referenced.line() + 1, referenced.column(), &message)
    };
    let name = raw.name.value.trim();
    let well_formed = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(located(
            raw.name.referenced,
            format!(
                "agent name `{}` must be 1–{MAX_NAME_CHARS} characters of a-z, 0-9 and -",
                raw.name.value
            ),
        ));
    }
    if SubagentKind::parse(name).is_some() {
        return Err(located(
            raw.name.referenced,
            format!("agent name `{name}` is a built-in sub-agent's; choose another"),
        ));
    }
    let description = raw.description.value.trim();
    if description.is_empty() || description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(located(
            raw.description.referenced,
            format!("description must be 1–{MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let mut notices = Vec::new();
    let tools = raw
        .tools
        .as_ref()
        .map(|list| tool_names(list, "tools", &located, &mut notices))
        .transpose()?;
    let disallowed = raw
        .disallowed_tools
        .as_ref()
        .map(|list| tool_names(list, "disallowedTools", &located, &mut notices))
        .transpose()?
        .unwrap_or_default();
    let max_turns = match raw.max_turns {
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                spanned.referenced,
                "maxTurns must be at least 1".into(),
            ));
        }
        other => other.map(|spanned| spanned.value),
    };
    if let Some(model) = raw.model.as_deref().map(str::trim)
        && !model.is_empty()
        && model != "inherit"
    {
        notices.push(format!(
            "model `{model}` is not applied: a sub-agent runs on the run's model, under its budget"
        ));
    }
    if !raw.other.is_empty() {
        let keys: Vec<&str> = raw.other.keys().map(String::as_str).collect();
        notices.push(format!(
            "{} left aside: an agent file is instructions, it grants no permission, mode, hook or server",
            keys.join(", ")
        ));
    }
    let prompt = body.trim().to_string();
    if prompt.is_empty() {
        return Err(at(
            0,
            0,
            "the agent has no instructions after its front matter",
        ));
    }
    Ok(Parsed {
        profile: AgentProfile {
            name: name.to_string(),
            description: description.to_string(),
            tools,
            disallowed,
            prompt,
            max_turns,
            file: file.to_path_buf(),
        },
        notices,
    })
}

/// The tool names of `tools:` / `disallowedTools:`. A rule (`Bash(git diff:*)`) is an error:
/// rules belong to the policy, and dropping its content would widen what the author meant.
/// A name tollgate lacks (`WebSearch`, `NotebookEdit`) names nothing to keep, and says so.
fn tool_names(
    list: &Spanned<ToolList>,
    key: &str,
    located: &impl Fn(serde_saphyr::Location, String) -> ConfigError,
    notices: &mut Vec<String>,
) -> Result<Vec<ToolName>, ConfigError> {
    let mut names = Vec::new();
    for text in list.value.names() {
        if text.contains('(') {
            return Err(located(
                list.referenced,
                format!(
                    "{key}: `{text}` is a rule; an agent's tools are tool names (rules belong in the policy)"
                ),
            ));
        }
        match ToolName::parse(&text) {
            Some(ToolName::Other(other)) => {
                notices.push(format!("{key}: `{other}` is no tool of tollgate's"));
            }
            Some(name) => names.push(name),
            None => {
                return Err(located(
                    list.referenced,
                    format!("{key}: `{text}` is not a tool name"),
                ));
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Parsed, String> {
        parse(text, Path::new(".claude/agents/x.md")).map_err(|err| err.to_string())
    }

    #[test]
    fn an_agent_file_has_its_name_tools_and_instructions() {
        let parsed = parse_text(
            "---\nname: code-reviewer\ndescription: Reviews code.\ntools: Read, Grep, Glob, mcp__gh, WebSearch\nmodel: sonnet\ncolor: blue\npermissionMode: bypassPermissions\nhooks: {PreToolUse: []}\n---\n\nReview the diff.\n",
        )
        .unwrap();
        let profile = &parsed.profile;
        assert_eq!(profile.name, "code-reviewer");
        assert_eq!(profile.prompt, "Review the diff.");
        assert_eq!(
            profile.tools.as_ref().unwrap(),
            &[
                ToolName::Read,
                ToolName::Grep,
                ToolName::Glob,
                ToolName::parse("mcp__gh").unwrap()
            ]
        );
        assert_eq!(
            parsed.notices,
            [
                "tools: `WebSearch` is no tool of tollgate's",
                "model `sonnet` is not applied: a sub-agent runs on the run's model, under its budget",
                "color, hooks, permissionMode left aside: an agent file is instructions, it grants no permission, mode, hook or server"
            ]
        );
        let listed = parse_text(
            "---\nname: a\ndescription: d\ntools: [Read]\ndisallowedTools: Bash\nmaxTurns: 3\nmodel: inherit\n---\nGo.\n",
        )
        .unwrap();
        assert_eq!(listed.profile.tools.as_deref(), Some(&[ToolName::Read][..]));
        assert_eq!(listed.profile.disallowed, [ToolName::Bash]);
        assert_eq!(listed.profile.max_turns, Some(3));
        assert!(listed.notices.is_empty());
        // No `tools:` keeps the general sub-agent's.
        assert!(
            parse_text("---\nname: a\ndescription: d\n---\nGo.\n")
                .unwrap()
                .profile
                .tools
                .is_none()
        );
    }

    #[test]
    fn bad_agent_files_are_located_errors() {
        // (text, message part)
        let table = [
            ("name: a\n", "starts with a `---` line"),
            ("---\nname: a\ndescription: d\n", "not closed"),
            (
                "---\nname: Code Reviewer\ndescription: d\n---\nx\n",
                "a-z, 0-9",
            ),
            (
                "---\nname: explore\ndescription: d\n---\nx\n",
                "built-in sub-agent",
            ),
            (
                "---\nname: a\ndescription: ' '\n---\nx\n",
                "description must be",
            ),
            ("---\nname: a\ndescription: d\n---\n\n", "no instructions"),
            (
                "---\nname: a\ndescription: d\ntools: Read, Bash(git diff:*)\n---\nx\n",
                "is a rule",
            ),
            (
                "---\nname: a\ndescription: d\ntools: 'Re ad'\n---\nx\n",
                "not a tool name",
            ),
            (
                "---\nname: a\ndescription: d\nmaxTurns: 0\n---\nx\n",
                "at least 1",
            ),
            ("---\ndescription: d\n---\nx\n", "name"),
        ];
        for (text, part) in table {
            let err = parse_text(text).unwrap_err();
            assert!(err.contains(part), "{text}: {err}");
        }
        let err = parse(
            "---\nname: a\ndescription: d\ntools: Bash(rm:*)\n---\nx\n",
            Path::new("a.md"),
        )
        .unwrap_err();
        assert_eq!((err.line, err.column), (4, 8), "{err}");
    }
}
