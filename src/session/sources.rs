//! Loading what a run or a check needs from disk: task, policy sources, workdir, home, and
//! what of them is in force. Every failure here is a configuration error (exit 2) and
//! happens before any model call.

use std::path::{Path, PathBuf};

use crate::hooks::{Hook, merge_hooks};
use crate::mcp::{McpPlan, parse_project_file, plan, project_file_approved};
use crate::policy::{
    self, LowerGrant, PermissionContext, PermissionMode, Policy, PolicyOrigin, PolicySource, Rule,
    RuleSet, SourceKind, Workspace, danger, lower_may_add, moots_classifier, refuse_disabled,
    refuse_managed_keys_below,
};
use crate::sandbox::{ReadOnlyCommands, SandboxConfig};
use crate::task::Task;

use super::SessionError;

type Result<T> = std::result::Result<T, SessionError>;

/// Where the managed policy lives when `--policy` is not given; `TOLLGATE_MANAGED_DIR`
/// moves it (for images that keep configuration elsewhere, and for tests).
const MANAGED_DIR: &str = "/etc/tollgate";

pub fn read_text(path: &Path, what: &'static str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| SessionError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

pub fn load_task(path: &Path, home: Option<&Path>) -> Result<Task> {
    let text = read_text(path, "task file")?;
    let dir = absolute_parent(path)?;
    Ok(Task::parse(&text, path, &dir, home)?)
}

pub fn load_policy(path: &Path, home: Option<&Path>) -> Result<Policy> {
    let text = read_text(path, "policy file")?;
    let dir = absolute_parent(path)?;
    Ok(Policy::parse(
        &text,
        PolicyOrigin {
            file: path,
            dir: &dir,
            home,
        },
    )?)
}

fn absolute_parent(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).map_err(|source| SessionError::Read {
        what: "path",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/")))
}

/// The folder must exist; symlinks are resolved so confinement checks compare real paths.
pub fn canonical_dir(path: &Path, what: &'static str) -> Result<PathBuf> {
    let real = path.canonicalize().map_err(|_| SessionError::NoFolder {
        what,
        path: path.to_path_buf(),
    })?;
    if !real.is_dir() {
        return Err(SessionError::NoFolder {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(real)
}

pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.canonicalize().unwrap_or(home))
}

/// The rule flags and `--policy` shared by `run` and `check`.
#[derive(Debug, Clone, Copy)]
pub struct SourceFlags<'a> {
    pub policy: Option<&'a Path>,
    pub allow: &'a [String],
    pub deny: &'a [String],
    pub ask: &'a [String],
}

/// What deciding a call outside a run needs (`check`, `replay`): every source in force,
/// their merged rules, the mode and the workspace. (The gate itself is `policy::decide`.)
pub struct PolicyInForce {
    pub sources: Vec<PolicySource>,
    pub rules: RuleSet,
    pub mode: PermissionMode,
    pub workspace: Workspace,
}

impl PolicyInForce {
    pub fn load(
        flags: SourceFlags,
        workdir: PathBuf,
        mode: Option<PermissionMode>,
    ) -> Result<PolicyInForce> {
        let home = home_dir();
        let sources = load_sources(flags, None, &workdir, home.as_deref())?;
        // `check --mode` asks how a call would be decided in that mode; it grants nothing,
        // so only a disabled mode is refused, not one the managed policy keeps from runs.
        let mode = match mode {
            Some(mode) => {
                refuse_disabled(mode, &sources)?;
                mode
            }
            None => resolve_mode(None, None, &sources)?,
        };
        let (rules, _) = rules_for_mode(RuleSet::from_sources(&sources), mode);
        let workspace = Workspace::new(workdir, additional_directories(&sources).dirs, home);
        Ok(PolicyInForce {
            sources,
            rules,
            mode,
            workspace,
        })
    }

    pub fn context(&self) -> PermissionContext<'_> {
        PermissionContext {
            auto_allow_bash: false,
            mode: self.mode,
            rules: &self.rules,
            workspace: &self.workspace,
        }
    }
}

/// Every policy source in force, in precedence order: managed, command line, task,
/// project, user. Missing optional files (project, user, /etc) are simply absent.
pub fn load_sources(
    flags: SourceFlags,
    task: Option<&Task>,
    workdir: &Path,
    home: Option<&Path>,
) -> Result<Vec<PolicySource>> {
    let mut sources = Vec::new();
    let mut add = |kind, policy| sources.push(PolicySource { kind, policy });
    match flags.policy {
        Some(path) => add(SourceKind::Managed, load_policy(path, home)?),
        None => {
            for path in managed_files()? {
                add(SourceKind::Managed, load_policy(&path, home)?);
            }
        }
    }
    if !(flags.allow.is_empty() && flags.deny.is_empty() && flags.ask.is_empty()) {
        let policy = Policy::from_flags(flags.allow, flags.deny, flags.ask, workdir)?;
        add(SourceKind::CommandLine, policy);
    }
    if let Some(task) = task {
        if let Some(path) = &task.policy {
            add(SourceKind::Task, load_policy(path, home)?);
        }
        if let Some(permissions) = &task.permissions {
            add(SourceKind::Task, permissions.clone());
        }
    }
    let project = workdir.join(".tollgate/policy.yaml");
    if project.is_file() {
        add(SourceKind::Project, load_policy(&project, home)?);
    }
    if let Some(user) = user_policy_file(home).filter(|path| path.is_file()) {
        add(SourceKind::User, load_policy(&user, home)?);
    }
    refuse_managed_keys_below(&sources)?;
    Ok(sources)
}

/// `/etc/tollgate/policy.yaml`, then `/etc/tollgate/policy.d/*.yaml` in name order.
fn managed_files() -> Result<Vec<PathBuf>> {
    let dir = std::env::var_os("TOLLGATE_MANAGED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(MANAGED_DIR));
    let mut files = Vec::new();
    let main = dir.join("policy.yaml");
    if main.is_file() {
        files.push(main);
    }
    let drop_in = dir.join("policy.d");
    if drop_in.is_dir() {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(&drop_in)
            .map_err(|source| SessionError::Read {
                what: "managed policy folder",
                path: drop_in.clone(),
                source,
            })?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json")
            })
            .collect();
        parts.sort();
        files.extend(parts);
    }
    Ok(files)
}

fn user_policy_file(home: Option<&Path>) -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| home.join(".config")))?;
    Some(config.join("tollgate/policy.yaml"))
}

/// The run's mode (see `policy::resolve_mode`); a lower `default_mode` the managed policy
/// does not allow is left aside with a warning.
pub fn resolve_mode(
    flag: Option<PermissionMode>,
    task: Option<PermissionMode>,
    sources: &[PolicySource],
) -> Result<PermissionMode> {
    let (mode, warnings) = policy::resolve_mode(flag, task, sources)?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok(mode)
}

/// The rules a run in `mode` obeys, and those it dropped: entering auto drops allow rules
/// that would make the classifier moot (every command, shells, interpreters, package
/// runners, the whole Agent tool), so those calls reach the judge instead of passing unseen.
pub fn rules_for_mode(rules: RuleSet, mode: PermissionMode) -> (RuleSet, Vec<Rule>) {
    if mode == PermissionMode::Auto {
        rules.without(moots_classifier)
    } else {
        (rules, Vec::new())
    }
}

/// The additional directories in force, and those left aside.
#[derive(Debug, Default)]
pub struct AdditionalDirectories {
    /// Canonical.
    pub dirs: Vec<PathBuf>,
    /// From lower sources under a `managed_only` policy that does not grant them.
    pub ignored: Vec<PathBuf>,
    /// Entries that do not exist: a warning each, as Claude Code's settings may name a
    /// folder of another machine.
    pub warnings: Vec<String>,
}

pub fn additional_directories(sources: &[PolicySource]) -> AdditionalDirectories {
    let lower_allowed = lower_may_add(sources, LowerGrant::AdditionalDirectories);
    let mut found = AdditionalDirectories::default();
    for source in sources {
        for dir in &source.policy.additional_directories {
            if source.kind != SourceKind::Managed && !lower_allowed {
                found.ignored.push(dir.clone());
                continue;
            }
            match canonical_dir(dir, "additional directory") {
                Ok(real) => found.dirs.push(real),
                Err(err) => found.warnings.push(format!(
                    "{err} (from {}); ignored",
                    source.policy.file.display()
                )),
            }
        }
    }
    for warning in &found.warnings {
        tracing::warn!("{warning}");
    }
    found
}

/// Allow rules that hand out more than they seem to, in words a reviewer can act on.
pub fn dangerous_allow_rules(rules: &RuleSet) -> Vec<String> {
    rules
        .rules()
        .iter()
        .filter_map(|rule| {
            let why = danger(rule)?;
            Some(format!(
                "allow rule {} at {}: {why}",
                rule.text, rule.source
            ))
        })
        .collect()
}

/// The hooks that run, managed policies' first, and the lower ones left aside.
pub struct HooksInForce {
    pub in_force: Vec<Hook>,
    pub ignored: Vec<Hook>,
}

/// Lower sources' hooks run beside the managed ones unless a managed policy says
/// `managed_hooks_only`, or is `managed_only` without granting `hooks`: a hook that answers
/// allow would widen what the managed policy allows.
pub fn hooks_in_force(sources: &[PolicySource]) -> HooksInForce {
    let (managed, others): (Vec<&PolicySource>, Vec<&PolicySource>) = sources
        .iter()
        .partition(|source| source.kind == SourceKind::Managed);
    let managed_only = managed
        .iter()
        .any(|source| source.policy.managed_hooks_only)
        || !lower_may_add(sources, LowerGrant::Hooks);
    let collect = |list: &[&PolicySource]| -> Vec<Hook> {
        list.iter()
            .flat_map(|source| source.policy.hooks.iter().cloned())
            .collect()
    };
    let lower = collect(&others);
    HooksInForce {
        in_force: merge_hooks(&collect(&managed), managed_only, &lower),
        ignored: if managed_only { lower } else { Vec::new() },
    }
}

/// The sandbox of the highest-precedence policy that has a `sandbox:` block (only the managed
/// policy's under `managed_only`), so a task or project file cannot turn off the managed one.
pub fn sandbox_in_force(sources: &[PolicySource]) -> Option<SandboxConfig> {
    deciding_sandbox_block(sources)
        .filter(|config| config.enabled)
        .cloned()
}

/// `sandbox.read_only_commands` of the block that decides the sandbox, read even when that
/// block turns the sandbox off (`enabled: false`); without any block, enforce.
pub fn read_only_commands_in_force(sources: &[PolicySource]) -> ReadOnlyCommands {
    deciding_sandbox_block(sources).map_or(ReadOnlyCommands::Enforce, |config| {
        config.read_only_commands
    })
}

/// The `sandbox:` block of the highest-precedence policy that has one (under `managed_only`,
/// only the managed policy's).
fn deciding_sandbox_block(sources: &[PolicySource]) -> Option<&SandboxConfig> {
    let managed_only = sources
        .iter()
        .any(|source| source.kind == SourceKind::Managed && source.policy.managed_only);
    let mut ordered: Vec<&PolicySource> = sources
        .iter()
        .filter(|source| !managed_only || source.kind == SourceKind::Managed)
        .collect();
    ordered.sort_by_key(|source| source.kind);
    ordered
        .into_iter()
        .find_map(|source| source.policy.sandbox.as_ref())
}

/// The MCP servers a run starts: the policies' and the task's, and the workdir's `.mcp.json`
/// when a trusted policy approves it (a malformed one is then a configuration error).
pub fn mcp_in_force(sources: &[PolicySource], task: &Task, workdir: &Path) -> Result<McpPlan> {
    let path = workdir.join(".mcp.json");
    let (project, skipped) = if project_file_approved(sources) && path.is_file() {
        parse_project_file(&read_text(&path, "project MCP file")?, &path)?
    } else {
        Default::default()
    };
    let mut planned = plan(sources, &task.mcp_servers, &project);
    planned.skipped.extend(skipped);
    Ok(planned)
}
