//! The `mcp_servers:` block (in policy and task files, the shape of `.mcp.json`'s
//! `mcpServers` plus tollgate's own keys) and the policy keys that say which servers may start,
//! parsed into typed values with file:line:column errors. Plain data: nothing here starts a
//! process or reads `.mcp.json` (`mcp/` does); it lives with the policy that carries it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::{ConfigError, SourceLocation};

pub const DEFAULT_MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MCP_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest server name: `mcp__<server>__<tool>` must stay within the 64 characters the
/// providers accept for a tool name, with room for the tool.
pub const MAX_MCP_SERVER_NAME: usize = 32;

/// One `mcp_servers:` entry as a tollgate file writes it: unknown keys are errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerFile {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Only `stdio` (the default) is spoken.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Deferred (listed for ToolSearch only) unless `false`.
    defer: Option<bool>,
    /// Seconds.
    startup_timeout: Option<f64>,
    /// Seconds.
    call_timeout: Option<f64>,
    /// Believe the server's `readOnlyHint` annotation (honoured in policy files only).
    #[serde(default)]
    trust_read_only_hint: bool,
}

/// One server to start: a validated entry and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerSpec {
    /// Letters, digits, `_` and `-`, no `__`: it is the middle part of `mcp__<server>__<tool>`.
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Added to the server's environment; a value `${NAME}` is tollgate's variable NAME.
    pub env: BTreeMap<String, String>,
    pub defer: bool,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
    pub trust_read_only_hint: bool,
    pub source: SourceLocation,
}

/// `allowedMcpServers` / `deniedMcpServers` entries (Claude Code's managed settings): by name
/// or by exact command line. A URL entry names no stdio server and matches nothing here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerMatcher {
    pub server_name: Option<String>,
    pub server_command: Option<Vec<String>>,
    pub server_url: Option<String>,
}

impl McpServerMatcher {
    /// Whether this entry names `server` exactly (an allow list grants only what it spells).
    pub fn matches(&self, server: &McpServerSpec) -> bool {
        self.matches_by(server, |listed, name| listed == name)
    }

    /// Whether this entry names `server` in any case: a deny list must not miss a
    /// `.mcp.json` (the repository's) server spelled `GitHub` for `github`.
    pub fn matches_any_case(&self, server: &McpServerSpec) -> bool {
        self.matches_by(server, |listed, name| listed.eq_ignore_ascii_case(name))
    }

    fn matches_by(&self, server: &McpServerSpec, same: impl Fn(&str, &str) -> bool) -> bool {
        let by_name = self
            .server_name
            .as_deref()
            .is_some_and(|listed| same(listed, &server.name));
        let by_command = self.server_command.as_ref().is_some_and(|argv| {
            argv.first() == Some(&server.command) && argv[1..] == server.args[..]
        });
        by_name || by_command
    }
}

/// What one policy file says about MCP servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpPolicy {
    pub servers: Vec<McpServerSpec>,
    /// `allow_project_mcp` or Claude Code's `enableAllProjectMcpServers`: the workdir's
    /// `.mcp.json` is read.
    pub allow_project: bool,
    /// Claude Code's `enabledMcpjsonServers`: these `.mcp.json` servers are read.
    pub enabled_project: Vec<String>,
    /// Claude Code's `disabledMcpjsonServers`: these `.mcp.json` servers never start.
    pub disabled_project: Vec<String>,
    /// `allowedMcpServers`: when any policy has one, only matching servers start.
    pub allowed: Option<Vec<McpServerMatcher>>,
    /// `deniedMcpServers`: matching servers never start.
    pub denied: Vec<McpServerMatcher>,
    /// Only the managed policy's servers start (managed-only key).
    pub managed_only: bool,
}

/// The raw `mcp_servers:` map of a file.
pub type McpServersBlock = BTreeMap<String, Spanned<McpServerFile>>;

/// Validates a file's `mcp_servers:`.
pub fn mcp_servers(block: McpServersBlock, file: &Path) -> Result<Vec<McpServerSpec>, ConfigError> {
    block
        .into_iter()
        .map(|(name, spanned)| {
            let at = spanned.referenced;
            let error = |message: String| ConfigError::new(file, at.line(), at.column(), message);
            let entry = spanned.value;
            check_server_name(&name).map_err(&error)?;
            if let Some(kind) = entry.kind.as_deref().filter(|kind| *kind != "stdio") {
                return Err(error(format!(
                    "mcp_servers.{name}: type `{kind}` is not supported; tollgate starts stdio servers only"
                )));
            }
            if entry.command.trim().is_empty() {
                return Err(error(format!("mcp_servers.{name}: command is empty")));
            }
            let seconds = |value: Option<f64>, key: &str, default: Duration| match value {
                None => Ok(default),
                Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
                    Ok(Duration::from_secs_f64(secs))
                }
                Some(secs) => Err(error(format!(
                    "mcp_servers.{name}.{key} must be a number of seconds above 0 (at most a day), not {secs}"
                ))),
            };
            Ok(McpServerSpec {
                startup_timeout: seconds(
                    entry.startup_timeout,
                    "startup_timeout",
                    DEFAULT_MCP_STARTUP_TIMEOUT,
                )?,
                call_timeout: seconds(
                    entry.call_timeout,
                    "call_timeout",
                    DEFAULT_MCP_CALL_TIMEOUT,
                )?,
                name,
                command: entry.command,
                args: entry.args,
                env: entry.env,
                defer: entry.defer.unwrap_or(true),
                trust_read_only_hint: entry.trust_read_only_hint,
                source: SourceLocation {
                    file: file.to_path_buf(),
                    line: at.line(),
                },
            })
        })
        .collect()
}

/// A server name must read back as the server of `mcp__<server>__<tool>`.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_');
    if !plain {
        return Err(format!(
            "MCP server name `{name}`: use letters, digits, `-` and single `_` (it becomes mcp__{name}__<tool>)"
        ));
    }
    if name.len() > MAX_MCP_SERVER_NAME {
        return Err(format!(
            "MCP server name `{name}` is longer than {MAX_MCP_SERVER_NAME} characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Vec<McpServerSpec>, ConfigError> {
        let block: McpServersBlock = crate::config::parse(yaml, Path::new("p.yaml"))?;
        mcp_servers(block, Path::new("p.yaml"))
    }

    #[test]
    fn entries_get_defaults_and_keep_their_line() {
        let servers = parse(
            "docs:\n  command: node\n  args: [server.js]\n  env: {A: b}\ntracker:\n  command: tr\n  defer: false\n  startup_timeout: 2.5\n  call_timeout: 9\n  type: stdio\n",
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "docs");
        assert!(servers[0].defer);
        assert_eq!(servers[0].startup_timeout, DEFAULT_MCP_STARTUP_TIMEOUT);
        assert_eq!(servers[0].env["A"], "b");
        assert_eq!(servers[0].source.line, 2);
        assert!(!servers[1].defer);
        assert_eq!(servers[1].startup_timeout, Duration::from_millis(2500));
        assert_eq!(servers[1].call_timeout, Duration::from_secs(9));
    }

    #[test]
    fn bad_entries_are_located_errors() {
        // (yaml, line, message part)
        let table = [
            ("x:\n  command: a\n  bogus: 1\n", 3, "unknown field `bogus`"),
            ("x:\n  args: [a]\n", 2, "missing field `command`"),
            ("x__y:\n  command: a\n", 2, "use letters, digits"),
            ("x:\n  command: a\n  type: http\n", 2, "stdio servers only"),
            ("x:\n  command: a\n  call_timeout: 0\n", 2, "above 0"),
            ("x:\n  command: ' '\n", 2, "command is empty"),
        ];
        for (yaml, line, part) in table {
            let err = parse(yaml).unwrap_err();
            assert!(err.to_string().contains(part), "{yaml}: {err}");
            assert_eq!(err.line, line, "{yaml}: {err}");
        }
    }

    #[test]
    fn matchers_take_a_name_or_the_exact_command() {
        let server = &parse("gh:\n  command: npx\n  args: [-y, gh-mcp]\n").unwrap()[0];
        let by = |json: &str| serde_json::from_str::<McpServerMatcher>(json).unwrap();
        assert!(by(r#"{"serverName": "gh"}"#).matches(server));
        assert!(!by(r#"{"serverName": "gl"}"#).matches(server));
        assert!(!by(r#"{"serverName": "GH"}"#).matches(server));
        assert!(by(r#"{"serverName": "GH"}"#).matches_any_case(server));
        assert!(by(r#"{"serverCommand": ["npx", "-y", "gh-mcp"]}"#).matches(server));
        assert!(!by(r#"{"serverCommand": ["npx", "gh-mcp"]}"#).matches(server));
        assert!(!by(r#"{"serverUrl": "https://x"}"#).matches(server));
    }
}
