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
    /// A stdio server's program.
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// A streamable-HTTP server's endpoint.
    url: Option<String>,
    /// Sent with every request to an HTTP server; `${env:NAME}` in a value is the runner's
    /// variable NAME (in an operator's file only).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `stdio` (the default with `command`) or `http` (the default with `url`).
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
    /// The run does not need it: when it does not start (failed, or held back for an
    /// operator's approval) the run goes on without it, whatever `fail_on` says.
    #[serde(default)]
    optional: bool,
}

/// How tollgate reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A process tollgate starts, spoken to over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the server's environment; a value `${NAME}` is tollgate's variable NAME.
        env: BTreeMap<String, String>,
    },
    /// A server already running, spoken to over streamable HTTP at `url`.
    Http {
        url: String,
        /// Header name to value; `${env:NAME}` (or `${NAME}`) in a value is expanded when
        /// the entry is an operator's.
        headers: BTreeMap<String, String>,
    },
}

/// One server to start: a validated entry and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerSpec {
    /// Letters, digits, `_` and `-`, no `__`: it is the middle part of `mcp__<server>__<tool>`.
    pub name: String,
    pub transport: McpTransport,
    pub defer: bool,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
    pub trust_read_only_hint: bool,
    /// `optional: true`: the run goes on when it does not start.
    pub optional: bool,
    /// The plugin that brought it, by name: the task names the plugin, not its servers.
    pub plugin: Option<String>,
    pub source: SourceLocation,
}

impl McpServerSpec {
    /// What the server is, for logs and messages: its program, or its URL.
    pub fn target(&self) -> &str {
        match &self.transport {
            McpTransport::Stdio { command, .. } => command,
            McpTransport::Http { url, .. } => url,
        }
    }
}

/// Why a transport `type` is not spoken, or `None` for `stdio` and `http`.
pub fn unsupported_transport(kind: &str) -> Option<String> {
    match kind {
        "stdio" | "http" | "streamable-http" | "streamableHttp" => None,
        "sse" => Some(
            "type `sse`: the legacy HTTP+SSE transport is not spoken (the MCP SDK tollgate uses has no client for it); use the server's streamable HTTP endpoint with type: http".into(),
        ),
        "ws" | "websocket" => Some(format!(
            "type `{kind}`: WebSocket servers are not spoken; use stdio or http"
        )),
        other => Some(format!(
            "type `{other}` is not an MCP transport tollgate speaks: use stdio or http"
        )),
    }
}

/// The transport an entry asks for, from its `type`, `command` and `url`.
pub fn mcp_transport(
    kind: Option<&str>,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    url: Option<String>,
    headers: BTreeMap<String, String>,
) -> Result<McpTransport, String> {
    if let Some(reason) = kind.and_then(unsupported_transport) {
        return Err(reason);
    }
    let http = match kind {
        Some("stdio") => false,
        Some(_) => true,
        None => url.is_some() && command.is_none(),
    };
    if http {
        if command.is_some() || !args.is_empty() || !env.is_empty() {
            return Err("an HTTP server takes url and headers, not command, args or env".into());
        }
        let url = url.ok_or("an HTTP server needs a url")?;
        check_url(&url)?;
        return Ok(McpTransport::Http { url, headers });
    }
    if url.is_some() || !headers.is_empty() {
        return Err("a stdio server takes command, args and env, not url or headers".into());
    }
    match command {
        Some(command) if !command.trim().is_empty() => {
            Ok(McpTransport::Stdio { command, args, env })
        }
        Some(_) => Err("command is empty".into()),
        None => Err("needs a command (a stdio server) or a url (an HTTP server)".into()),
    }
}

/// An HTTP server's URL must be `http` or `https` with a host and no credentials in it (a
/// secret belongs in a header taken from the environment, where it is redacted).
fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|err| format!("url `{url}`: {err}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("url `{url}`: only http and https are spoken"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("url `{url}` has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "url `{url}` carries credentials; put them in a header from the environment"
        ));
    }
    Ok(())
}

/// `allowedMcpServers` / `deniedMcpServers` entries (Claude Code's managed settings): by name
/// by exact command line (a stdio server) or by URL, `*` matching any run of characters (an
/// HTTP server).
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
        self.matches_by(server, false)
    }

    /// Whether this entry names `server` in any case: a deny list must not miss a
    /// `.mcp.json` (the repository's) server spelled `GitHub` for `github`.
    pub fn matches_any_case(&self, server: &McpServerSpec) -> bool {
        self.matches_by(server, true)
    }

    fn matches_by(&self, server: &McpServerSpec, any_case: bool) -> bool {
        let fold = |text: &str| {
            if any_case {
                text.to_ascii_lowercase()
            } else {
                text.to_string()
            }
        };
        let by_name = self
            .server_name
            .as_deref()
            .is_some_and(|listed| fold(listed) == fold(&server.name));
        match &server.transport {
            McpTransport::Stdio { command, args, .. } => {
                by_name
                    || self
                        .server_command
                        .as_ref()
                        .is_some_and(|argv| argv.first() == Some(command) && argv[1..] == args[..])
            }
            McpTransport::Http { url, .. } => {
                by_name
                    || self.server_url.as_deref().is_some_and(|pattern| {
                        tollgate_base::wildcard_match(&fold(pattern), &fold(url))
                    })
            }
        }
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
            let transport = mcp_transport(
                entry.kind.as_deref(),
                entry.command,
                entry.args,
                entry.env,
                entry.url,
                entry.headers,
            )
            .map_err(|reason| error(format!("mcp_servers.{name}: {reason}")))?;
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
                transport,
                defer: entry.defer.unwrap_or(true),
                trust_read_only_hint: entry.trust_read_only_hint,
                optional: entry.optional,
                plugin: None,
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
        let McpTransport::Stdio { env, .. } = &servers[0].transport else {
            panic!("{:?}", servers[0].transport)
        };
        assert_eq!(env["A"], "b");
        assert_eq!(servers[0].source.line, 2);
        assert!(!servers[1].defer);
        assert_eq!(servers[1].startup_timeout, Duration::from_millis(2500));
        assert_eq!(servers[1].call_timeout, Duration::from_secs(9));
        assert!(!servers[0].optional && servers[0].plugin.is_none());
        let optional = parse("notes:\n  command: n\n  optional: true\n").unwrap();
        assert!(optional[0].optional);
    }

    #[test]
    fn bad_entries_are_located_errors() {
        // (yaml, line, message part)
        let table = [
            ("x:\n  command: a\n  bogus: 1\n", 3, "unknown field `bogus`"),
            ("x:\n  args: [a]\n", 2, "needs a command"),
            ("x__y:\n  command: a\n", 2, "use letters, digits"),
            (
                "x:\n  command: a\n  type: http\n",
                2,
                "not command, args or env",
            ),
            (
                "x:\n  url: http://h/mcp\n  type: sse\n",
                2,
                "legacy HTTP+SSE",
            ),
            ("x:\n  url: ftp://h/mcp\n", 2, "only http and https"),
            ("x:\n  url: 'https://u:p@h/mcp'\n", 2, "carries credentials"),
            (
                "x:\n  url: http://h/\n  env: {A: b}\n",
                2,
                "not command, args or env",
            ),
            (
                "x:\n  command: a\n  headers: {A: b}\n",
                2,
                "not url or headers",
            ),
            ("x:\n  url: http://h/\n  type: ws\n", 2, "WebSocket"),
            ("x:\n  command: a\n  call_timeout: 0\n", 2, "above 0"),
            ("x:\n  command: ' '\n", 2, "command is empty"),
            ("x:\n  command: a\n  optional: maybe\n", 3, "optional"),
            ("x:\n  command: a\n  optional: [true]\n", 3, "optional"),
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
        assert!(!by(r#"{"serverUrl": "*"}"#).matches(server));
    }

    #[test]
    fn http_entries_take_a_url_and_headers_and_match_by_url() {
        let servers = parse(
            "hosted:\n  url: https://mcp.example.com/mcp\n  headers: {Authorization: 'Bearer ${env:TOKEN}'}\nlocal:\n  type: http\n  url: http://127.0.0.1:9/mcp\n",
        )
        .unwrap();
        assert_eq!(
            servers[0].transport,
            McpTransport::Http {
                url: "https://mcp.example.com/mcp".into(),
                headers: [(
                    "Authorization".to_string(),
                    "Bearer ${env:TOKEN}".to_string()
                )]
                .into_iter()
                .collect(),
            }
        );
        assert_eq!(servers[1].target(), "http://127.0.0.1:9/mcp");
        let by = |json: &str| serde_json::from_str::<McpServerMatcher>(json).unwrap();
        let hosted = &servers[0];
        assert!(by(r#"{"serverUrl": "https://*.example.com/*"}"#).matches(hosted));
        assert!(!by(r#"{"serverUrl": "https://*.example.org/*"}"#).matches(hosted));
        assert!(!by(r#"{"serverUrl": "https://MCP.example.com/*"}"#).matches(hosted));
        assert!(by(r#"{"serverUrl": "https://MCP.example.com/*"}"#).matches_any_case(hosted));
        assert!(!by(r#"{"serverCommand": ["https://mcp.example.com/mcp"]}"#).matches(hosted));
    }
}
