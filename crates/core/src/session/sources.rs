//! Loading what a run or a check needs from disk: task, policy sources, workdir, home, and
//! what of them is in force. Every failure here is a configuration error (exit 2) and
//! happens before any model call.

use std::path::{Path, PathBuf};

use crate::config::ConfigError;
use crate::hooks::{Hook, merge_hooks};
use crate::mcp::{McpPlan, parse_project_file, plan, project_file_approved};
use crate::policy::{
    PermissionContext, PermissionMode, Policy, PolicyOrigin, PolicySource, Rule, RuleSet,
    SourceKind, ToolName, Workspace, danger, reach,
};
use crate::sandbox::{ReadOnlyCommands, SandboxConfig};
use crate::settings::{
    ConfigOrigin, Held, HeldBack, HeldKind, Power, Standing, approval, counts, moots_classifier,
    refuse_disabled, refuse_managed_keys_below, repository_directories_approved,
    repository_hooks_approved, standing,
};
use crate::task::Task;

use super::SessionError;

type Result<T> = std::result::Result<T, SessionError>;

/// Where the managed policy lives when `--policy` is not given; `TOLLGATE_MANAGED_DIR`
/// moves it (for images that keep configuration elsewhere, and for tests).
const MANAGED_DIR: &str = "/etc/tollgate";

/// A configuration file the operator (or the repository) names: a regular file within
/// [`crate::input_file::CONFIG_CAP`], else a configuration error naming it.
pub fn read_text(path: &Path, what: &'static str) -> Result<String> {
    Ok(crate::input_file::read_text(
        path,
        crate::input_file::Input::config(what),
    )?)
}

/// Shows the offending line of an error found after its file was parsed (a `workdir:` that
/// does not exist, a managed-only key in a lower file): the file is read again for it.
pub fn with_snippet(err: SessionError) -> SessionError {
    match err {
        SessionError::Config(config) => SessionError::Config(snippet_from_file(config)),
        SessionError::Authority(crate::settings::AuthorityError::ManagedKeyInLowerSource(
            config,
        )) => SessionError::Authority(crate::settings::AuthorityError::ManagedKeyInLowerSource(
            snippet_from_file(config),
        )),
        other => other,
    }
}

/// The most of a file read again only to show one of its lines.
const MAX_SNIPPET_FILE_BYTES: u64 = 4 << 20;

fn snippet_from_file(err: ConfigError) -> ConfigError {
    if err.snippet.is_some() || err.line == 0 {
        return err;
    }
    // Only a regular file: reading a FIFO or a device again could block or differ.
    let readable = std::fs::metadata(&err.file)
        .is_ok_and(|meta| meta.is_file() && meta.len() <= MAX_SNIPPET_FILE_BYTES);
    match readable
        .then(|| std::fs::read_to_string(&err.file).ok())
        .flatten()
    {
        Some(text) => {
            let file = err.file.clone();
            err.with_source(&file, &text)
        }
        None => err,
    }
}

pub fn load_task(path: &Path, home: Option<&Path>) -> Result<Task> {
    let text = read_text(path, "task file")?;
    let dir = absolute_parent(path)?;
    Ok(Task::parse(&text, path, &dir, home)?)
}

pub fn load_policy(path: &Path, home: Option<&Path>) -> Result<Policy> {
    let dir = absolute_parent(path)?;
    load_policy_anchored(path, &dir, home)
}

/// A policy file whose `/x` path rules and relative additional directories are anchored at
/// `dir` rather than at the file's own folder.
fn load_policy_anchored(path: &Path, dir: &Path, home: Option<&Path>) -> Result<Policy> {
    let text = read_text(path, "policy file")?;
    Ok(Policy::parse(
        &text,
        PolicyOrigin {
            file: path,
            dir,
            home,
        },
    )?)
}

/// Claude Code's project settings in the workdir, in Claude Code's precedence: the local file
/// (a developer's own, usually left uncommitted) above the shared one. Both come with the
/// checkout, so both are the repository's (a project source), whoever wrote them.
pub const CLAUDE_PROJECT_SETTINGS: [&str; 2] =
    [".claude/settings.local.json", ".claude/settings.json"];

/// Whether something is at `path` (a link followed): a policy file that is there is read,
/// and refused if it is no regular file, rather than taken for absent.
/// Whether a policy file is there. Only "no such file" is absence: a file that cannot be
/// looked at (a folder on its way that this account may not search, under `--run-as`) is
/// there, and loading it fails with the reason, rather than its rules silently not applying.
fn present(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(_) => true,
        Err(err) => !matches!(
            err.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ),
    }
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
    /// The policy's warnings are errors (`--strict`).
    pub strict: bool,
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
        Self::load_checked(flags, workdir, mode).map_err(with_snippet)
    }

    fn load_checked(
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
        let mut warnings = dangerous_allow_rules(&rules);
        warnings.extend(unknown_tool_rules(&rules));
        log_warnings(&warnings);
        refuse_warnings(&rules, flags.strict)?;
        let workspace = Workspace::new(workdir, additional_directories(&sources).dirs, home)
            .with_state_folder(crate::state::guarded_folder());
        Ok(PolicyInForce {
            sources,
            rules,
            mode,
            workspace,
        })
    }

    pub fn context(&self) -> PermissionContext<'_> {
        PermissionContext {
            disk: None,
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
    if present(&project) {
        add(SourceKind::Project, load_policy(&project, home)?);
    }
    // Claude Code reads a project's paths (`/src/**`, `additionalDirectories`) from the
    // project's root, not from `.claude/`.
    for name in CLAUDE_PROJECT_SETTINGS {
        let path = workdir.join(name);
        if present(&path) {
            add(
                SourceKind::Project,
                load_policy_anchored(&path, workdir, home)?,
            );
        }
    }
    if let Some(user) = user_policy_file(home).filter(|path| present(path)) {
        add(SourceKind::User, load_policy(&user, home)?);
    }
    refuse_managed_keys_below(&sources)?;
    log_ignored_keys(&sources);
    Ok(sources)
}

/// Claude Code keys a file carries that tollgate loads and does not use: one warning per file
/// naming them (the transcript's `run_started.policy.ignored_keys` has each with its reason),
/// so a reader never believes them applied.
fn log_ignored_keys(sources: &[PolicySource]) {
    for source in sources {
        let keys = &source.policy.ignored_keys;
        if keys.is_empty() {
            continue;
        }
        let names: Vec<&str> = keys.iter().map(|key| key.key.as_str()).collect();
        let warning = format!(
            "{}: Claude Code keys tollgate does not use, ignored: {}",
            source.policy.file.display(),
            names.join(", ")
        );
        tracing::warn!("{}", crate::neutral::log_line(&warning));
    }
}

/// `/etc/tollgate/policy.yaml`, then `/etc/tollgate/policy.d/*.yaml` in name order.
fn managed_files() -> Result<Vec<PathBuf>> {
    let dir = std::env::var_os("TOLLGATE_MANAGED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(MANAGED_DIR));
    let mut files = Vec::new();
    let main = dir.join("policy.yaml");
    // Whatever is there is read (a FIFO or a folder in its place is an error, not an absent
    // managed policy: the operator's rules must not vanish silently).
    if present(&main) {
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

/// The user's policy file, as this process's environment places it.
pub fn user_policy_path() -> Option<PathBuf> {
    user_policy_file(home_dir().as_deref())
}

fn user_policy_file(home: Option<&Path>) -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| home.join(".config")))?;
    Some(config.join("tollgate/policy.yaml"))
}

/// The run's mode (see `crate::settings::resolve_mode`); a lower `default_mode` the managed policy
/// does not allow is left aside with a warning.
pub fn resolve_mode(
    flag: Option<PermissionMode>,
    task: Option<PermissionMode>,
    sources: &[PolicySource],
) -> Result<PermissionMode> {
    let (mode, warnings) = crate::settings::resolve_mode(flag, task, sources)?;
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
    /// Left aside: a lower source's under a `managed_only` policy that does not grant them,
    /// and the repository's (task file, project files) without an operator's
    /// `allow_project_directories: true`.
    pub ignored: Vec<PathBuf>,
    /// The same, each with the lines that would let it in.
    pub held_back: Vec<HeldBack>,
    /// Entries that do not exist: a warning each, as Claude Code's settings may name a
    /// folder of another machine.
    pub warnings: Vec<String>,
}

/// The additional directories that count, by the authority table: the operator's as
/// written (under `managed_only`, the managed policy's and what it grants), the repository's
/// only once an operator's file approves them — a repository's directory would widen what
/// tools read and write and the sandbox's write roots (`cat /etc/shadow` judged read-only
/// inside a workspace of `/`).
pub fn additional_directories(sources: &[PolicySource]) -> AdditionalDirectories {
    let approved = repository_directories_approved(sources);
    let mut found = AdditionalDirectories::default();
    for source in sources {
        let origin = ConfigOrigin::of(source.kind);
        let in_force = counts(sources, Power::AdditionalDirectories, origin, || approved);
        for dir in &source.policy.additional_directories {
            if !in_force {
                found.ignored.push(dir.clone());
                if let Some(approval) =
                    approval(sources, Held::AdditionalDirectories, origin, approved)
                {
                    let (name, from) = (dir.display().to_string(), source.policy.file.display());
                    let kind = HeldKind::AdditionalDirectory;
                    found.held_back.push(HeldBack::new(
                        kind,
                        name,
                        from.to_string(),
                        origin,
                        approval,
                    ));
                }
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
            let why = danger(rule).or_else(|| reach(rule))?;
            Some(format!(
                "allow rule {} at {}: {why}",
                rule.text, rule.source
            ))
        })
        .collect()
}

/// `--strict`: the first rule a load warning is about, as a configuration error at its line.
pub fn refuse_warnings(rules: &RuleSet, strict: bool) -> Result<()> {
    if !strict {
        return Ok(());
    }
    let warned = rules.rules().iter().find_map(|rule| {
        let why = match danger(rule).or_else(|| reach(rule)) {
            Some(why) => why.to_string(),
            None if matches!(rule.tool, ToolName::Other(_)) => {
                format!("it never matches: tollgate has no {} tool", rule.tool)
            }
            None => return None,
        };
        Some((rule, why))
    });
    match warned {
        None => Ok(()),
        Some((rule, why)) => Err(SessionError::from(ConfigError::new(
            &rule.source.file,
            rule.source.line,
            0,
            format!(
                "{} rule {}: {why} (--strict makes the policy's warnings errors)",
                rule.kind, rule.text
            ),
        ))),
    }
}

/// Rules that name no tool tollgate has: they load (a Claude Code settings file may name
/// Claude Code's own tools) but never match, which hides a slip such as `Raed(src/**)`.
/// Every kind counts: a deny rule that never matches denies nothing.
pub fn unknown_tool_rules(rules: &RuleSet) -> Vec<String> {
    rules
        .rules()
        .iter()
        .filter(|rule| matches!(rule.tool, ToolName::Other(_)))
        .map(|rule| {
            let close = rule
                .tool
                .close_builtin()
                .map(|close| format!("; did you mean `{close}`?"))
                .unwrap_or_default();
            format!(
                "{} rule {} at {} never matches: tollgate has no {} tool{close}",
                rule.kind, rule.text, rule.source, rule.tool
            )
        })
        .collect()
}

/// Logs each of `warnings` once, inert on a runner's log (rule text may come from a
/// repository's file).
pub fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        tracing::warn!("{}", crate::neutral::log_line(warning));
    }
}

/// The hooks that run, managed policies' first, and the lower ones left aside.
pub struct HooksInForce {
    pub in_force: Vec<Hook>,
    pub ignored: Vec<Hook>,
    /// The ignored hooks that wait on an operator's approval (not those `disableAllHooks`
    /// turned off), each with the lines that would let it run.
    pub held_back: Vec<HeldBack>,
}

/// Lower sources' hooks run beside the managed ones as `policy::authority`'s table says: the
/// user's and the command line's as written, the repository's (task file,
/// `.tollgate/policy.yaml`) once the managed or the user's policy says `allow_project_hooks`,
/// none when a managed policy says `managed_hooks_only` or is `managed_only` without granting
/// `hooks` — a hook that answers allow would widen what the managed policy allows.
/// `disableAllHooks` (Claude Code's key) turns hooks off as far as its file's authority goes:
/// in a managed policy every hook; in the user's file every hook but the managed ones; in a
/// repository's file the repository's own hooks, never the operator's guards.
pub fn hooks_in_force(sources: &[PolicySource]) -> HooksInForce {
    let managed_hooks_only = sources
        .iter()
        .any(|source| source.kind == SourceKind::Managed && source.policy.managed_hooks_only);
    let disabled_by = |kind: SourceKind| {
        sources.iter().any(|source| {
            source.policy.disable_all_hooks
                && match source.kind {
                    SourceKind::Managed => true,
                    SourceKind::User | SourceKind::CommandLine => kind != SourceKind::Managed,
                    SourceKind::Task | SourceKind::Project => {
                        !ConfigOrigin::of(kind).is_operators()
                    }
                }
        })
    };
    let repository_approved = repository_hooks_approved(sources);
    let mut managed = Vec::new();
    let mut lower = Vec::new();
    let mut ignored = Vec::new();
    let mut held_back = Vec::new();
    for source in sources {
        let origin = ConfigOrigin::of(source.kind);
        let held = approval(sources, Held::Hooks, origin, repository_approved);
        let runs = !disabled_by(source.kind)
            && (source.kind == SourceKind::Managed
                || (!managed_hooks_only
                    && counts(sources, Power::Hooks, origin, || repository_approved)));
        if let Some(held) = held.filter(|_| !disabled_by(source.kind)) {
            held_back.extend(source.policy.hooks.iter().map(|hook| {
                let name = format!("{} {}", hook.spec.event, hook.spec.command);
                let from = hook.source.display().to_string();
                HeldBack::new(HeldKind::Hook, name, from, origin, held.clone())
            }));
        }
        let into = match (runs, source.kind) {
            (false, _) => &mut ignored,
            (true, SourceKind::Managed) => &mut managed,
            (true, _) => &mut lower,
        };
        into.extend(source.policy.hooks.iter().cloned());
    }
    HooksInForce {
        in_force: merge_hooks(&managed, false, &lower),
        ignored,
        held_back,
    }
}

/// The sandbox in force (`policy::authority`'s table): the highest-precedence operator's
/// policy (managed, command line, user) with a `sandbox:` block; a repository's block (task,
/// project) only when none of those has one, so it may turn a sandbox on but never replace or
/// turn off the operator's; under `managed_only` only the managed policy's.
pub fn sandbox_in_force(sources: &[PolicySource]) -> Option<SandboxConfig> {
    deciding_sandbox_block(sources)
        .and_then(|source| source.policy.sandbox.as_ref())
        .filter(|config| config.enabled)
        .cloned()
}

/// `sandbox.read_only_commands` of the block that decides the sandbox, read even when that
/// block turns the sandbox off (`enabled: false`); without any block, enforce. Only an
/// operator's policy may turn it off: a repository's block (the fallback) cannot lower it.
pub fn read_only_commands_in_force(sources: &[PolicySource]) -> ReadOnlyCommands {
    match deciding_sandbox_block(sources) {
        Some(source)
            if standing(sources, Power::Sandbox, ConfigOrigin::of(source.kind))
                != Standing::Fallback =>
        {
            source
                .policy
                .sandbox
                .as_ref()
                .map_or(ReadOnlyCommands::Enforce, |config| {
                    config.read_only_commands
                })
        }
        _ => ReadOnlyCommands::Enforce,
    }
}

/// The policy whose `sandbox:` block decides (see [`sandbox_in_force`]), enabled or not.
fn deciding_sandbox_block(sources: &[PolicySource]) -> Option<&PolicySource> {
    let mut ordered: Vec<&PolicySource> = sources
        .iter()
        .filter(|source| {
            standing(sources, Power::Sandbox, ConfigOrigin::of(source.kind)) != Standing::Ignored
        })
        .collect();
    ordered.sort_by_key(|source| {
        let standing = standing(sources, Power::Sandbox, ConfigOrigin::of(source.kind));
        (standing == Standing::Fallback, source.kind)
    });
    ordered
        .into_iter()
        .find(|source| source.policy.sandbox.is_some())
}

/// The MCP servers a run starts: the policies' and the task's, and the workdir's `.mcp.json`
/// when a trusted policy approves it (a malformed one is then a configuration error).
/// Unapproved, the file is read only to name its servers as held back: a file that cannot
/// be read as one is held back whole, without its text (it may be a link to anything).
pub fn mcp_in_force(sources: &[PolicySource], task: &Task, workdir: &Path) -> Result<McpPlan> {
    let path = workdir.join(".mcp.json");
    let mut unreadable = None;
    let (project, skipped) = match (project_file_approved(sources), path.is_file()) {
        (_, false) => Default::default(),
        (true, true) => parse_project_file(&read_text(&path, "project MCP file")?, &path)?,
        (false, true) => unapproved_project_file(&path).unwrap_or_else(|| {
            unreadable = held_whole_file(sources, &path);
            Default::default()
        }),
    };
    let mut planned = plan(sources, &task.mcp_servers, &project);
    planned.skipped.extend(skipped);
    planned.held_back.extend(unreadable);
    Ok(planned)
}

/// An unapproved `.mcp.json` whose servers cannot be named: the file is held back whole, and
/// approving all of it (then it is read, and a malformed file is an error) is the line.
fn held_whole_file(sources: &[PolicySource], path: &Path) -> Option<HeldBack> {
    let mut approval = approval(sources, Held::McpServer("*"), ConfigOrigin::McpJson, false)?;
    for line in &mut approval.lines {
        if line.starts_with("enabledMcpjsonServers") {
            *line = "allow_project_mcp: true".into();
        }
    }
    let name = "every server of .mcp.json (not a JSON file tollgate reads)".to_string();
    let from = path.display().to_string();
    let kind = HeldKind::McpServer;
    Some(HeldBack::new(
        kind,
        name,
        from,
        ConfigOrigin::McpJson,
        approval,
    ))
}

/// The most of an unapproved `.mcp.json` read to name its servers.
const MAX_UNAPPROVED_MCP_JSON: u64 = 1 << 20;

/// An unapproved `.mcp.json`'s servers, or `None` when it is not a readable file of JSON
/// within the bound (nothing of it is shown then).
fn unapproved_project_file(
    path: &Path,
) -> Option<(
    Vec<crate::settings::McpServerSpec>,
    Vec<crate::mcp::SkippedServer>,
)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_UNAPPROVED_MCP_JSON {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    parse_project_file(&text, path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_source as source;

    fn hook(name: &str) -> String {
        format!("hooks:\n  - {{event: PreToolUse, command: {name}}}\n")
    }

    /// The hooks that run, by their command.
    fn running(sources: &[PolicySource]) -> Vec<String> {
        hooks_in_force(sources)
            .in_force
            .into_iter()
            .map(|hook| hook.spec.command)
            .collect()
    }

    #[test]
    fn the_repositorys_hooks_run_only_when_an_operator_approves_them() {
        use SourceKind::*;
        let repo = |kind| source(kind, &hook(&format!("{kind:?}")));
        // (sources, the hooks that run)
        let cases: Vec<(Vec<PolicySource>, Vec<&str>)> = vec![
            (vec![repo(Task), repo(Project)], vec![]),
            (vec![repo(Project), repo(User)], vec!["User"]),
            (
                vec![
                    repo(Project),
                    source(
                        User,
                        &format!("allow_project_hooks: true\n{}", hook("User")),
                    ),
                ],
                vec!["Project", "User"],
            ),
            (
                vec![source(Managed, "allow_project_hooks: true\n"), repo(Task)],
                vec!["Task"],
            ),
            // The repository cannot approve itself.
            (
                vec![source(
                    Project,
                    &format!("allow_project_hooks: true\n{}", hook("Project")),
                )],
                vec![],
            ),
            // managed_only: the user's approval is a lower source's word too.
            (
                vec![
                    source(
                        Managed,
                        &format!(
                            "managed_only: true\nlower_sources_may_add: [hooks]\n{}",
                            hook("Managed")
                        ),
                    ),
                    repo(Project),
                    source(
                        User,
                        &format!("allow_project_hooks: true\n{}", hook("User")),
                    ),
                ],
                vec!["Managed", "User"],
            ),
            (
                vec![
                    source(Managed, &format!("managed_only: true\n{}", hook("Managed"))),
                    repo(User),
                ],
                vec!["Managed"],
            ),
        ];
        for (index, (sources, expected)) in cases.into_iter().enumerate() {
            assert_eq!(running(&sources), expected, "case {index}");
        }
    }

    /// Claude Code's `disableAllHooks` and `allowManagedHooksOnly`: a file turns hooks off
    /// as far as its authority goes; managed hooks only stop for the managed policy.
    #[test]
    fn disable_all_hooks_reaches_as_far_as_its_files_authority() {
        use SourceKind::*;
        let approve = "allow_project_hooks: true\n";
        let managed =
            |extra: &str| source(Managed, &format!("{approve}{extra}{}", hook("Managed")));
        let user = |extra: &str| source(User, &format!("{extra}{}", hook("User")));
        let project = |extra: &str| source(Project, &format!("{extra}{}", hook("Project")));
        let off = "disableAllHooks: true\n";
        let cases: Vec<(Vec<PolicySource>, Vec<&str>)> = vec![
            (
                vec![managed(""), project(""), user("")],
                vec!["Managed", "Project", "User"],
            ),
            (vec![managed(off), project(""), user("")], vec![]),
            (vec![managed(""), project(""), user(off)], vec!["Managed"]),
            (
                vec![managed(""), project(off), user("")],
                vec!["Managed", "User"],
            ),
            (vec![managed(""), user(off)], vec!["Managed"]),
            (vec![user(off)], vec![]),
            (
                vec![
                    managed("allowManagedHooksOnly: true\n"),
                    project(""),
                    user(""),
                ],
                vec!["Managed"],
            ),
            (
                vec![
                    managed("disable_all_hooks: true\n"),
                    source(User, &format!("{approve}{}", hook("User"))),
                ],
                vec![],
            ),
        ];
        for (index, (sources, expected)) in cases.into_iter().enumerate() {
            assert_eq!(running(&sources), expected, "case {index}");
        }
        let ignored = hooks_in_force(&[managed(""), user(off)]).ignored;
        assert_eq!(ignored.len(), 1);
    }

    #[test]
    fn the_repositorys_sandbox_turns_one_on_but_never_replaces_the_operators() {
        use SourceKind::*;
        let on = "sandbox: {enabled: true, network: {mode: none}}\n";
        let off = "sandbox: {enabled: false}\n";
        let cases: Vec<(Vec<PolicySource>, bool)> = vec![
            (vec![source(User, on), source(Project, off)], true),
            (vec![source(User, on), source(Task, off)], true),
            (vec![source(Project, on)], true),
            (vec![source(Task, on), source(Project, off)], true),
            (vec![source(User, off), source(Project, on)], false),
            (vec![source(Managed, on), source(Task, off)], true),
            (
                vec![source(Managed, "managed_only: true\n"), source(Project, on)],
                false,
            ),
        ];
        for (index, (sources, enabled)) in cases.into_iter().enumerate() {
            assert_eq!(
                sandbox_in_force(&sources).is_some(),
                enabled,
                "case {index}"
            );
        }
    }
}
