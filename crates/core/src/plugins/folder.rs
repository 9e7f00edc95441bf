//! One local plugin folder in Claude Code's layout: `.claude-plugin/plugin.json` (its name and
//! any custom component paths), `skills/`, `agents/`, `hooks/hooks.json` and `.mcp.json`, with
//! `${CLAUDE_PLUGIN_ROOT}` in hook commands and server entries meaning the folder. Reads files
//! only; what its parts may do is decided where each part lands (the gate, the hooks' and the
//! servers' approvals). `commands/` and other interactive parts are listed as ignored.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::config::{ConfigError, json_error};
use crate::mcp::parse_project_file;
use crate::settings::{HookList, HookSpec, McpServerSpec, McpTransport};
use crate::skills::read_bounded;

/// The manifest's place in a plugin folder.
pub const MANIFEST: &str = ".claude-plugin/plugin.json";

/// A plugin's parts, read from its folder.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginParts {
    pub name: String,
    pub root: PathBuf,
    /// Skill roots (the Skill tool's discovery reads them).
    pub skills: Vec<PathBuf>,
    /// Agent-file roots (folders of `*.md`, or files).
    pub agents: Vec<PathBuf>,
    /// Its hooks, with the file each came from.
    pub hooks: Vec<(HookSpec, PathBuf)>,
    pub mcp_servers: Vec<McpServerSpec>,
    /// What it has that a headless run does not use, and server entries left aside.
    pub ignored: Vec<String>,
}

/// `.claude-plugin/plugin.json`: the keys read; every other one is listed as ignored.
#[derive(Debug, Deserialize)]
struct Manifest {
    name: String,
    #[serde(default)]
    skills: Option<Paths>,
    #[serde(default)]
    agents: Option<Paths>,
    #[serde(default)]
    hooks: Option<Inline>,
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<Inline>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// A custom component path, or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Paths {
    One(String),
    Many(Vec<String>),
}

impl Paths {
    fn list(&self) -> Vec<&str> {
        match self {
            Paths::One(one) => vec![one.as_str()],
            Paths::Many(many) => many.iter().map(String::as_str).collect(),
        }
    }
}

/// A path to a JSON file, or the JSON itself.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Inline {
    Path(String),
    Object(serde_json::Map<String, Value>),
}

/// Keys of a manifest that describe the plugin and change nothing.
const DESCRIPTIVE: [&str; 8] = [
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "$schema",
];

/// Reads the plugin folder `dir` (its parts are named by its absolute, resolved path, so a
/// hook's `${CLAUDE_PLUGIN_ROOT}` means the same folder wherever the hook runs).
pub fn read(dir: &Path) -> Result<PluginParts, ConfigError> {
    let root = &std::fs::canonicalize(dir).map_err(|err| {
        ConfigError::whole_file(dir, format!("cannot read the plugin folder: {err}"))
    })?;
    let manifest_file = root.join(MANIFEST);
    if !manifest_file.is_file() {
        return Err(ConfigError::whole_file(
            root,
            format!("not a plugin folder: there is no {MANIFEST}"),
        ));
    }
    let text = read_bounded(&manifest_file)?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|err| json_error(&err, &manifest_file).with_source(&manifest_file, &text))?;
    let name = manifest.name.trim().to_string();
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !plain {
        return Err(ConfigError::whole_file(
            &manifest_file,
            format!("plugin name `{name}` must be 1–64 characters of a-z, 0-9 and -"),
        ));
    }
    let inside = |entry: &str, key: &str| within(root, entry, &manifest_file, key);
    let mut parts = PluginParts {
        name,
        root: root.to_path_buf(),
        skills: vec![root.join("skills")],
        agents: vec![root.join("agents")],
        hooks: Vec::new(),
        mcp_servers: Vec::new(),
        ignored: Vec::new(),
    };
    for entry in manifest.skills.iter().flat_map(Paths::list) {
        parts.skills.push(inside(entry, "skills")?);
    }
    for entry in manifest.agents.iter().flat_map(Paths::list) {
        parts.agents.push(inside(entry, "agents")?);
    }
    // The default hooks file, and the manifest's (a path or the object itself).
    let default_hooks = root.join("hooks/hooks.json");
    if default_hooks.is_file() {
        let text = read_bounded(&default_hooks)?;
        parts.hooks.extend(hooks(&text, &default_hooks, root)?);
    }
    match manifest.hooks {
        None => {}
        Some(Inline::Path(entry)) => {
            let file = inside(&entry, "hooks")?;
            if file != default_hooks {
                let text = read_bounded(&file)?;
                parts.hooks.extend(hooks(&text, &file, root)?);
            }
        }
        Some(Inline::Object(object)) => {
            let text = Value::Object(object).to_string();
            parts.hooks.extend(hooks(&text, &manifest_file, root)?);
        }
    }
    let default_servers = root.join(".mcp.json");
    if default_servers.is_file() {
        let text = read_bounded(&default_servers)?;
        servers(&text, &default_servers, root, &mut parts)?;
    }
    match manifest.mcp_servers {
        None => {}
        Some(Inline::Path(entry)) => {
            let file = inside(&entry, "mcpServers")?;
            if file != default_servers {
                let text = read_bounded(&file)?;
                servers(&text, &file, root, &mut parts)?;
            }
        }
        Some(Inline::Object(object)) => {
            // The manifest writes the servers map itself, without `.mcp.json`'s wrapper.
            let text = serde_json::json!({ "mcpServers": object }).to_string();
            servers(&text, &manifest_file, root, &mut parts)?;
        }
    }
    if root.join("commands").is_dir() || manifest.other.contains_key("commands") {
        parts.ignored.push(
            "commands (slash commands are typed by a person; a headless run has none)".into(),
        );
    }
    for key in manifest.other.keys() {
        if key != "commands" && !DESCRIPTIVE.contains(&key.as_str()) {
            parts.ignored.push(format!("{key} (not used by tollgate)"));
        }
    }
    Ok(parts)
}

/// `entry`, a path the manifest gives, inside `root`: relative, without `..`.
fn within(root: &Path, entry: &str, manifest: &Path, key: &str) -> Result<PathBuf, ConfigError> {
    let path = Path::new(entry);
    let confined = path.is_relative()
        && path
            .components()
            .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    if !confined {
        return Err(ConfigError::whole_file(
            manifest,
            format!("{key}: `{entry}` must be a path inside the plugin folder (relative, no `..`)"),
        ));
    }
    Ok(root.join(path))
}

/// A hooks file: `{"hooks": {<event>: [matcher groups]}}` (Claude Code's), with
/// `${CLAUDE_PLUGIN_ROOT}` in each command meaning the plugin folder. An event or a hook kind
/// tollgate does not run is an error, as in a policy file: nobody may believe a guard runs
/// when it does not.
fn hooks(text: &str, file: &Path, root: &Path) -> Result<Vec<(HookSpec, PathBuf)>, ConfigError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct HooksFile {
        #[serde(default)]
        #[expect(dead_code, reason = "read so a described hooks file loads")]
        description: Option<Value>,
        hooks: HookList,
    }
    let parsed: HooksFile =
        serde_json::from_str(text).map_err(|err| json_error(&err, file).with_source(file, text))?;
    let uses_root = parsed
        .hooks
        .specs
        .iter()
        .any(|spec| spec.command.contains(ROOT_VARIABLE));
    // A hook command is shell text: the folder's path goes into it as it is, so a path the
    // shell would split or expand is refused rather than quoted (the author may have quoted
    // it already, and quoting twice would break the command).
    let plain = root.to_str().is_some_and(|path| {
        path.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+@%,:=".contains(c))
    });
    if uses_root && !plain {
        return Err(ConfigError::whole_file(
            file,
            format!(
                "{ROOT_VARIABLE} is {}, a path a hook command cannot carry as shell text (spaces or shell characters); move the plugin folder",
                root.display()
            ),
        ));
    }
    Ok(parsed
        .hooks
        .specs
        .into_iter()
        .map(|mut spec| {
            spec.command = with_root(&spec.command, root);
            (spec, file.to_path_buf())
        })
        .collect())
}

/// A plugin's `.mcp.json`-shaped file: its servers, `${CLAUDE_PLUGIN_ROOT}` expanded; entries
/// of a transport tollgate does not speak are listed as ignored.
fn servers(
    text: &str,
    file: &Path,
    root: &Path,
    parts: &mut PluginParts,
) -> Result<(), ConfigError> {
    let (servers, skipped) = parse_project_file(text, file)?;
    for mut server in servers {
        match &mut server.transport {
            McpTransport::Stdio { command, args, env } => {
                *command = with_root(command, root);
                for arg in args.iter_mut() {
                    *arg = with_root(arg, root);
                }
                for value in env.values_mut() {
                    *value = with_root(value, root);
                }
            }
            McpTransport::Http { url, .. } => *url = with_root(url, root),
        }
        parts.mcp_servers.push(server);
    }
    parts.ignored.extend(
        skipped
            .into_iter()
            .map(|skipped| format!("MCP server {}: {}", skipped.name, skipped.reason)),
    );
    Ok(())
}

/// Claude Code's name for the plugin folder in its files.
const ROOT_VARIABLE: &str = "${CLAUDE_PLUGIN_ROOT}";

/// `${CLAUDE_PLUGIN_ROOT}` is the plugin folder; nothing else is expanded.
fn with_root(text: &str, root: &Path) -> String {
    text.replace(ROOT_VARIABLE, &root.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_plugin_folder_gives_its_parts_with_its_root_expanded() {
        let dir = plugin(&[
            (
                MANIFEST,
                r#"{"name": "kit", "agents": ["./more-agents"], "mcpServers": {"db": {"command": "${CLAUDE_PLUGIN_ROOT}/db", "args": ["--root=${CLAUDE_PLUGIN_ROOT}"]}}, "lspServers": {}}"#,
            ),
            (
                "hooks/hooks.json",
                r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/guard.sh"}]}]}}"#,
            ),
            (
                ".mcp.json",
                r#"{"mcpServers": {"web": {"type": "sse", "url": "https://x/sse"}}}"#,
            ),
        ]);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let parts = read(dir.path()).unwrap();
        assert_eq!(parts.name, "kit");
        assert_eq!(
            parts.agents,
            [root.join("agents"), root.join("./more-agents")]
        );
        assert_eq!(parts.hooks.len(), 1);
        assert_eq!(
            parts.hooks[0].0.command,
            format!("{}/guard.sh", root.display())
        );
        assert_eq!(parts.mcp_servers.len(), 1);
        assert_eq!(
            parts.mcp_servers[0].transport,
            McpTransport::Stdio {
                command: format!("{}/db", root.display()),
                args: vec![format!("--root={}", root.display())],
                env: Default::default(),
            }
        );
        assert_eq!(parts.ignored.len(), 2, "{:?}", parts.ignored);
        assert!(
            parts.ignored[0].contains("legacy HTTP+SSE"),
            "{:?}",
            parts.ignored
        );
        assert!(
            parts.ignored[1].starts_with("lspServers"),
            "{:?}",
            parts.ignored
        );
    }

    #[test]
    fn a_folder_that_is_not_a_well_formed_plugin_is_an_error() {
        let hook = |event: &str| {
            format!(
                r#"{{"hooks": {{"{event}": [{{"hooks": [{{"type": "command", "command": "x"}}]}}]}}}}"#
            )
        };
        let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
            (vec![], "there is no .claude-plugin/plugin.json"),
            (
                vec![(MANIFEST, r#"{"name": "Team Kit"}"#.into())],
                "a-z, 0-9",
            ),
            (vec![(MANIFEST, r#"{"version": "1"}"#.into())], "name"),
            (
                vec![(
                    MANIFEST,
                    r#"{"name": "k", "agents": "../elsewhere"}"#.into(),
                )],
                "inside the plugin folder",
            ),
            (
                vec![(MANIFEST, r#"{"name": "k", "skills": ["/etc"]}"#.into())],
                "inside the plugin folder",
            ),
            (
                vec![
                    (MANIFEST, r#"{"name": "k"}"#.into()),
                    ("hooks/hooks.json", hook("Bogus")),
                ],
                "Bogus",
            ),
        ];
        for (files, part) in cases {
            let files: Vec<(&str, &str)> = files
                .iter()
                .map(|(name, text)| (*name, text.as_str()))
                .collect();
            let dir = plugin(&files);
            let err = read(dir.path()).unwrap_err().to_string();
            assert!(err.contains(part), "{files:?}: {err}");
        }
        // A hook that names the folder, in a folder whose path the shell would split.
        let dir = plugin(&[
            ("a b/.claude-plugin/plugin.json", r#"{"name": "k"}"#),
            (
                "a b/hooks/hooks.json",
                r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/g.sh"}]}]}}"#,
            ),
        ]);
        let err = read(&dir.path().join("a b")).unwrap_err().to_string();
        assert!(err.contains("cannot carry as shell text"), "{err}");
    }
}
