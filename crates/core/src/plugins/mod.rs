//! Plugins (S9): local folders in Claude Code's layout bundling skills, agents, hooks and MCP
//! servers, enabled by `--plugin-dir`, a task's or a policy's `plugins:`, or a settings file's
//! `enabledPlugins` entry found in a local marketplace of `extraKnownMarketplaces`. Owns which
//! plugins a run uses and where their parts go; it adds no power of its own: each part joins
//! the source that enabled the plugin, so hooks and servers need the approvals that source's
//! own would, skills and agents are text, and every call passes the same gate. Nothing is
//! fetched: a marketplace or plugin on the network is refused with the reason.

mod folder;
mod marketplace;

use std::path::{Path, PathBuf};

pub use folder::{MANIFEST, PluginParts, read};

use crate::config::ConfigError;
use crate::policy::{Policy, PolicySource, SourceKind};
use crate::settings::{HeldBack, Hook, McpServerSpec, held_plugin};

/// A plugin the run was asked to use, and who asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRequest {
    pub dir: PathBuf,
    pub enabled_by: SourceKind,
    /// Where it was asked for (a file, or `--plugin-dir`), for messages.
    pub via: String,
}

/// The plugins a run uses, and what their folders said that is not used.
#[derive(Debug, Default)]
pub struct Loaded {
    pub plugins: Vec<(PluginParts, SourceKind)>,
    /// One line per plugin not loaded (and why) and per part left aside.
    pub notices: Vec<String>,
    /// The plugins not loaded because the managed policy alone enables plugins, each with
    /// the line that would load it.
    pub held_back: Vec<HeldBack>,
}

impl Loaded {
    pub fn skill_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.plugins.iter().flat_map(|(parts, _)| &parts.skills)
    }

    pub fn agent_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.plugins.iter().flat_map(|(parts, _)| &parts.agents)
    }
}

/// Whether the managed policy keeps every other source from enabling plugins: its
/// `managed_only`, `managed_hooks_only` or `managed_mcp_only` — a plugin carries rules'
/// neighbours (hooks, servers), and a restriction on any of them is one on plugins.
fn managed_plugins_only(sources: &[PolicySource]) -> Option<&Path> {
    sources
        .iter()
        .find(|source| {
            source.kind == SourceKind::Managed
                && (source.policy.managed_only
                    || source.policy.managed_hooks_only
                    || source.policy.mcp.managed_only)
        })
        .map(|source| source.policy.file.as_path())
}

/// Every plugin asked for: the command line's folders, the task's, each policy file's
/// `plugins:` and its `enabledPlugins` entries (resolved in the local marketplaces the
/// sources declare). An entry that cannot be resolved locally is a notice, not a plugin.
pub fn requests(
    command_line: &[PathBuf],
    task: &[PathBuf],
    task_file: &Path,
    sources: &[PolicySource],
) -> (Vec<PluginRequest>, Vec<String>) {
    let mut requests: Vec<PluginRequest> = command_line
        .iter()
        .map(|dir| PluginRequest {
            dir: dir.clone(),
            enabled_by: SourceKind::CommandLine,
            via: "--plugin-dir".into(),
        })
        .collect();
    requests.extend(task.iter().map(|dir| PluginRequest {
        dir: dir.clone(),
        enabled_by: SourceKind::Task,
        via: task_file.display().to_string(),
    }));
    let mut notices = Vec::new();
    for (at, source) in sources.iter().enumerate() {
        requests.extend(source.policy.plugin_dirs.iter().map(|dir| PluginRequest {
            dir: dir.clone(),
            enabled_by: source.kind,
            via: source.policy.file.display().to_string(),
        }));
        for (plugin, market) in source.policy.plugins.enabled.enabled() {
            let key = match market {
                Some(market) => format!("{plugin}@{market}"),
                None => plugin.to_string(),
            };
            // A source of higher precedence that switches the entry off keeps it off.
            if let Some(higher) = sources[..at]
                .iter()
                .find(|higher| higher.policy.plugins.enabled.0.get(&key) == Some(&false))
            {
                notices.push(format!(
                    "plugin {key} ({}) not loaded: {} switches it off",
                    source.policy.file.display(),
                    higher.policy.file.display()
                ));
                continue;
            }
            match marketplace::resolve(plugin, market, source, sources) {
                Ok(dir) => requests.push(PluginRequest {
                    dir,
                    enabled_by: source.kind,
                    via: source.policy.file.display().to_string(),
                }),
                Err(why) => notices.push(format!(
                    "plugin {plugin}{} ({}) not loaded: {why}",
                    market.map(|m| format!("@{m}")).unwrap_or_default(),
                    source.policy.file.display()
                )),
            }
        }
    }
    (requests, notices)
}

/// Reads every requested plugin. Under the managed policy's restrictions only the plugins it
/// enables load; the others are notices. A folder that is not a well-formed plugin is an
/// error naming it: an operator who enabled it must not run without it unseen.
pub fn load(requests: &[PluginRequest], sources: &[PolicySource]) -> Result<Loaded, ConfigError> {
    let restricted = managed_plugins_only(sources);
    let mut loaded = Loaded::default();
    for request in requests {
        if let Some(managed) = restricted
            && request.enabled_by != SourceKind::Managed
        {
            // The managed policy enables this very folder itself: it loads, as its.
            if requests.iter().any(|other| {
                other.enabled_by == SourceKind::Managed && same_folder(&other.dir, &request.dir)
            }) {
                continue;
            }
            loaded.notices.push(format!(
                "plugin {} ({}) not loaded: the managed policy {} restricts rules, hooks or servers to its own, so only it enables plugins",
                request.dir.display(),
                request.via,
                managed.display()
            ));
            // The line names the folder absolutely: it goes in another file than the request.
            let dir = std::path::absolute(&request.dir).unwrap_or_else(|_| request.dir.clone());
            loaded.held_back.push(held_plugin(
                &dir,
                request.via.clone(),
                request.enabled_by,
                managed,
            ));
            continue;
        }
        let parts = read(&request.dir)?;
        if let Some((first, _)) = loaded
            .plugins
            .iter()
            .find(|(seen, _)| seen.name == parts.name)
        {
            if first.root == parts.root {
                continue;
            }
            return Err(ConfigError::whole_file(
                &request.dir,
                format!(
                    "a second plugin named `{}` (the first is {})",
                    parts.name,
                    first.root.display()
                ),
            ));
        }
        loaded.notices.extend(
            parts
                .ignored
                .iter()
                .map(|what| format!("plugin {}: {what} ignored", parts.name)),
        );
        loaded.plugins.push((parts, request.enabled_by));
    }
    Ok(loaded)
}

/// Whether two requests name one folder (as the file system resolves them, else as written).
fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Puts each plugin's hooks and servers where the source that enabled it keeps its own, so
/// they pass the same approvals (`hooks_in_force`, `mcp::plan`): a task's plugin is the
/// repository's, a `--plugin-dir` one the operator's. The task's servers go to
/// `task_servers`; a source kind with no file loaded gets an empty one to hold them.
pub fn apply(
    loaded: &Loaded,
    sources: &mut Vec<PolicySource>,
    task_servers: &mut Vec<McpServerSpec>,
    workdir: &Path,
) -> Result<(), ConfigError> {
    for (parts, kind) in &loaded.plugins {
        // Each server says which plugin brought it: the task names the plugin, not them.
        let servers = parts.mcp_servers.iter().map(|server| McpServerSpec {
            plugin: Some(parts.name.clone()),
            ..server.clone()
        });
        if *kind == SourceKind::Task {
            task_servers.extend(servers.clone());
        }
        if parts.hooks.is_empty() && (*kind == SourceKind::Task || parts.mcp_servers.is_empty()) {
            continue;
        }
        let at = match sources.iter().position(|source| source.kind == *kind) {
            Some(at) => at,
            None => {
                let mut policy = Policy::from_flags(&[], &[], &[], workdir)
                    .map_err(|err| ConfigError::whole_file(&parts.root, err.to_string()))?;
                policy.file = parts.root.join(MANIFEST);
                // Precedence is the order of the sources: insert where its kind belongs.
                let index = sources
                    .iter()
                    .position(|source| source.kind > *kind)
                    .unwrap_or(sources.len());
                sources.insert(
                    index,
                    PolicySource {
                        kind: *kind,
                        policy,
                    },
                );
                index
            }
        };
        let policy = &mut sources[at].policy;
        policy
            .hooks
            .extend(parts.hooks.iter().map(|(spec, file)| Hook {
                spec: spec.clone(),
                source: file.clone(),
            }));
        if *kind != SourceKind::Task {
            policy.mcp.servers.extend(servers);
        }
    }
    Ok(())
}
