//! Loading what a run or a check needs from disk: task, policy sources, workdir, home. Every
//! failure here is a configuration error (exit 2) and happens before any model call.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::policy::{
    PermissionContext, PermissionMode, Policy, PolicyOrigin, PolicySource, RuleSet, SourceKind,
    Workspace, danger,
};
use crate::task::Task;

/// Where the managed policy lives when `--policy` is not given; `TOLLGATE_MANAGED_DIR`
/// moves it (for images that keep configuration elsewhere, and for tests).
const MANAGED_DIR: &str = "/etc/tollgate";

pub fn read_text(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {what} {}", path.display()))
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
    let absolute =
        std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))?;
    Ok(absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/")))
}

/// The folder must exist; symlinks are resolved so confinement checks compare real paths.
pub fn canonical_dir(path: &Path, what: &str) -> Result<PathBuf> {
    let real = path
        .canonicalize()
        .with_context(|| format!("{what} {} does not exist", path.display()))?;
    if !real.is_dir() {
        return Err(anyhow!("{what} {} is not a folder", path.display()));
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
/// their merged rules, the mode and the workspace.
pub struct Gate {
    pub sources: Vec<PolicySource>,
    pub rules: RuleSet,
    pub mode: PermissionMode,
    pub workspace: Workspace,
}

impl Gate {
    pub fn load(
        flags: SourceFlags,
        workdir: PathBuf,
        mode: Option<PermissionMode>,
    ) -> Result<Gate> {
        let home = home_dir();
        let sources = load_sources(flags, None, &workdir, home.as_deref())?;
        let rules = RuleSet::from_sources(&sources);
        let mode = resolve_mode(mode, None, &sources)?;
        let workspace = Workspace::new(workdir, additional_directories(&sources)?, home);
        Ok(Gate {
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
        let policy = Policy::from_flags(flags.allow, flags.deny, flags.ask, workdir)
            .map_err(|err| anyhow!("{err}"))?;
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
            .with_context(|| format!("cannot list {}", drop_in.display()))?
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

/// The run's mode: `--mode`, else the task's, else the first `default_mode` by precedence,
/// else dontAsk. A mode any source disables is refused.
pub fn resolve_mode(
    flag: Option<PermissionMode>,
    task: Option<PermissionMode>,
    sources: &[PolicySource],
) -> Result<PermissionMode> {
    let mut by_precedence: Vec<&PolicySource> = sources.iter().collect();
    by_precedence.sort_by_key(|source| source.kind);
    let mode = flag
        .or(task)
        .or_else(|| {
            by_precedence
                .iter()
                .find_map(|source| source.policy.default_mode)
        })
        .unwrap_or(PermissionMode::DontAsk);
    let forbidding = by_precedence.iter().find(|source| match mode {
        PermissionMode::BypassPermissions => source.policy.disable_bypass,
        PermissionMode::Auto => source.policy.disable_auto,
        _ => false,
    });
    match forbidding {
        Some(source) => Err(anyhow!(
            "{mode} mode is disabled by {}",
            source.policy.file.display()
        )),
        None => Ok(mode),
    }
}

/// Additional directories from every source, canonical; a missing one is an error naming
/// the policy that asked for it.
pub fn additional_directories(sources: &[PolicySource]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for source in sources {
        for dir in &source.policy.additional_directories {
            let what = format!(
                "additional directory (from {})",
                source.policy.file.display()
            );
            dirs.push(canonical_dir(dir, &what)?);
        }
    }
    Ok(dirs)
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
