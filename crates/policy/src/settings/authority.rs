//! Who may set what: with a managed policy in force, no lower source (command line, task,
//! project, user) widens the run's authority by any key — the mode, hooks, additional
//! directories, or the managed-only switches themselves; and whatever the repository brings
//! (the task file, `.tollgate/policy.yaml`, `.mcp.json`) cannot start a process, pick the
//! judge or read a secret on its own ([`standing`], the one table every loader consults).
//! Pure: takes the loaded sources, returns what is in force and what was ignored.

use std::path::PathBuf;

use thiserror::Error;

use crate::config::ConfigError;
use crate::file::LowerGrant;
use crate::mode::PermissionMode;
use crate::rule_set::{PolicySource, SourceKind};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthorityError {
    #[error(
        "{mode} mode ({requested_by}) is not allowed by the managed policy {}; it allows: {}",
        managed.display(),
        list(allowed)
    )]
    ModeNotAllowed {
        mode: PermissionMode,
        requested_by: &'static str,
        managed: PathBuf,
        allowed: Vec<PermissionMode>,
    },
    #[error("{mode} mode is disabled by {}", by.display())]
    ModeDisabled { mode: PermissionMode, by: PathBuf },
    #[error(transparent)]
    ManagedKeyInLowerSource(#[from] ConfigError),
}

fn list(modes: &[PermissionMode]) -> String {
    modes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A managed-only key (`managed_only`, `managed_hooks_only`, `allowed_modes`,
/// `lower_sources_may_add`) written in a lower file is an error at its location: left in
/// place, a reader would believe it in force.
pub fn refuse_managed_keys_below(sources: &[PolicySource]) -> Result<(), ConfigError> {
    for source in sources.iter().filter(|s| s.kind != SourceKind::Managed) {
        if let Some(key) = source.policy.managed_keys.first() {
            return Err(ConfigError::new(
                &source.policy.file,
                key.line,
                key.column,
                format!(
                    "`{}` only takes effect in the managed policy (--policy or /etc/tollgate); a {} source cannot set it",
                    key.key,
                    crate::config::serde_name(&source.kind)
                ),
            ));
        }
    }
    Ok(())
}

/// Where a piece of configuration was written, as far as authority goes. The task file, the
/// workdir's `.tollgate/policy.yaml` and its `.mcp.json` come with the repository (a pull
/// request can change them); the managed policy, the user's own file and the command line
/// are the operator's. The order is precedence (MCP servers of the same name: the first wins).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ConfigOrigin {
    Managed,
    CommandLine,
    Task,
    Project,
    /// The workdir's `.mcp.json`.
    McpJson,
    User,
}

impl ConfigOrigin {
    pub fn of(kind: SourceKind) -> ConfigOrigin {
        match kind {
            SourceKind::Managed => ConfigOrigin::Managed,
            SourceKind::CommandLine => ConfigOrigin::CommandLine,
            SourceKind::Task => ConfigOrigin::Task,
            SourceKind::Project => ConfigOrigin::Project,
            SourceKind::User => ConfigOrigin::User,
        }
    }

    /// The operator's, not the repository's.
    pub fn is_operators(self) -> bool {
        matches!(
            self,
            ConfigOrigin::Managed | ConfigOrigin::CommandLine | ConfigOrigin::User
        )
    }

    /// How far what this origin wrote is trusted: the managed policy most, then the rest of
    /// the operator's (command line, user), then the repository's. What one source relies on
    /// (a plugin's marketplace) must come from a source trusted at least as much.
    pub fn trust(self) -> u8 {
        match self {
            ConfigOrigin::Managed => 2,
            ConfigOrigin::CommandLine | ConfigOrigin::User => 1,
            ConfigOrigin::Task | ConfigOrigin::Project | ConfigOrigin::McpJson => 0,
        }
    }
}

/// What a key can do beyond rules: start a process, choose the judge, confine or free the
/// commands, read the runner's secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Power {
    /// `mcp_servers:` and `.mcp.json`'s `mcpServers`: each entry starts a process.
    McpServers,
    /// `hooks:`: each runs a command, and its allow lifts the mode's refusal.
    Hooks,
    /// `classifier:`: auto mode's judge (its provider, model, URL and key variable).
    Classifier,
    /// `auto_mode:`'s `allow` and `environment` prose: tells the judge what is fine.
    /// (`soft_deny` and `hard_deny` only narrow; any source may add them.)
    JudgeLeniency,
    /// `sandbox:`.
    Sandbox,
    /// `${NAME}` in an MCP server's `env`: the runner's variable NAME, secrets included.
    EnvExpansion,
    /// `additional_directories`: widens what tools read and write and the sandbox's write
    /// roots.
    AdditionalDirectories,
}

/// How an entry of some power counts when a given origin wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// As written.
    InForce,
    /// Once an operator's file approves it: `allow_project_mcp` (Claude Code's
    /// `enableAllProjectMcpServers`) or `enabledMcpjsonServers` naming a server,
    /// `allow_project_hooks` for hooks — the approval `.mcp.json` always needed.
    NeedsApproval,
    /// Only when no operator's source sets it: a repository's `sandbox:` may turn a sandbox
    /// on, never replace or turn off the operator's.
    Fallback,
    /// Never.
    Ignored,
}

/// The table: which origin may set which power, before `managed_only` (see [`standing`]).
pub const fn table(power: Power, origin: ConfigOrigin) -> Standing {
    use ConfigOrigin::*;
    use Power::*;
    match (origin, power) {
        (Managed | CommandLine | User, _) => Standing::InForce,
        (Task | Project | McpJson, McpServers) => Standing::NeedsApproval,
        (Task | Project, Hooks) => Standing::NeedsApproval,
        (Task | Project, AdditionalDirectories) => Standing::NeedsApproval,
        (McpJson, AdditionalDirectories) => Standing::Ignored,
        (Task | Project, Sandbox) => Standing::Fallback,
        // `.mcp.json` carries servers only.
        (McpJson, Hooks | Sandbox) => Standing::Ignored,
        (Task | Project | McpJson, Classifier | JudgeLeniency | EnvExpansion) => Standing::Ignored,
    }
}

/// How `power` written by `origin` counts with these sources: under a `managed_only` policy
/// only the managed policy's entries count (but for what `lower_sources_may_add` grants,
/// which then still stand as [`table`] says); otherwise [`table`].
pub fn standing(sources: &[PolicySource], power: Power, origin: ConfigOrigin) -> Standing {
    if origin == ConfigOrigin::Managed {
        return Standing::InForce;
    }
    let grant = match power {
        Power::McpServers => Some(LowerGrant::McpServers),
        Power::Hooks => Some(LowerGrant::Hooks),
        Power::AdditionalDirectories => Some(LowerGrant::AdditionalDirectories),
        Power::Classifier | Power::JudgeLeniency | Power::Sandbox | Power::EnvExpansion => None,
    };
    let managed_only = managed(sources).any(|s| s.policy.managed_only);
    if managed_only && !grant.is_some_and(|grant| lower_may_add(sources, grant)) {
        return Standing::Ignored;
    }
    table(power, origin)
}

/// The files whose approvals count: the managed policies, and the user's unless a managed
/// policy is `managed_only` (then the user's file is a lower source like any other).
pub fn approvers(sources: &[PolicySource]) -> impl Iterator<Item = &PolicySource> {
    let managed_only = managed(sources).any(|s| s.policy.managed_only);
    sources.iter().filter(move |source| match source.kind {
        SourceKind::Managed => true,
        SourceKind::User => !managed_only,
        _ => false,
    })
}

/// Whether an operator's file approves the repository's hooks (`allow_project_hooks`).
pub fn repository_hooks_approved(sources: &[PolicySource]) -> bool {
    approvers(sources).any(|source| source.policy.allow_project_hooks)
}

/// Whether an operator's file approves the repository's additional directories
/// (`allow_project_directories`).
pub fn repository_directories_approved(sources: &[PolicySource]) -> bool {
    approvers(sources).any(|source| source.policy.allow_project_directories)
}

/// Whether `power` from `origin` is in force here, an approval it needs given by `approved`.
pub fn counts(
    sources: &[PolicySource],
    power: Power,
    origin: ConfigOrigin,
    approved: impl FnOnce() -> bool,
) -> bool {
    match standing(sources, power, origin) {
        Standing::InForce => true,
        Standing::NeedsApproval => approved(),
        // The caller orders by precedence and asks only when no operator's source set it.
        Standing::Fallback => true,
        Standing::Ignored => false,
    }
}

fn managed(sources: &[PolicySource]) -> impl Iterator<Item = &PolicySource> {
    sources.iter().filter(|s| s.kind == SourceKind::Managed)
}

/// True when lower sources may add `grant`: no managed policy is `managed_only`, or one
/// that is grants it.
pub fn lower_may_add(sources: &[PolicySource], grant: LowerGrant) -> bool {
    let managed_only = managed(sources).any(|s| s.policy.managed_only);
    !managed_only || managed(sources).any(|s| s.policy.lower_may_add.contains(&grant))
}

/// The modes a lower source may choose under the managed policies, or `None` when there is
/// no managed policy. Default: the managed `default_mode` plus the stricter `plan` and
/// `dontAsk`; an explicit `allowed_modes` replaces that (several managed files: only the
/// modes all of them allow). `bypassPermissions` is thus only ever allowed explicitly.
fn allowed_modes(sources: &[PolicySource]) -> Option<(Vec<PermissionMode>, PathBuf)> {
    let first = managed(sources).next()?;
    let default = managed(sources).find_map(|s| s.policy.default_mode);
    let mut allowed: Option<Vec<PermissionMode>> = None;
    for source in managed(sources) {
        if let Some(listed) = &source.policy.allowed_modes {
            allowed = Some(match allowed {
                None => listed.clone(),
                Some(so_far) => so_far.into_iter().filter(|m| listed.contains(m)).collect(),
            });
        }
    }
    let mut allowed =
        allowed.unwrap_or_else(|| vec![PermissionMode::Plan, PermissionMode::DontAsk]);
    if let Some(default) = default
        && !allowed.contains(&default)
    {
        allowed.push(default);
    }
    Some((allowed, first.policy.file.clone()))
}

/// The run's mode and the warnings about lower `default_mode`s left aside. `--mode`, else
/// the task's `mode`, else the first `default_mode` by precedence, else dontAsk. Under a
/// managed policy an explicit choice (flag, task) it does not allow is an error, a lower
/// file's `default_mode` it does not allow is skipped with a warning. A mode any source
/// disables is refused.
pub fn resolve_mode(
    flag: Option<PermissionMode>,
    task: Option<PermissionMode>,
    sources: &[PolicySource],
) -> Result<(PermissionMode, Vec<String>), AuthorityError> {
    let allowed = allowed_modes(sources);
    let permits = |mode: PermissionMode| {
        allowed
            .as_ref()
            .is_none_or(|(modes, _)| modes.contains(&mode))
    };
    for (mode, requested_by) in [(flag, "--mode"), (task, "the task's mode")] {
        if let Some(mode) = mode {
            refuse_disabled(mode, sources)?;
            if !permits(mode)
                && let Some((modes, managed)) = &allowed
            {
                return Err(AuthorityError::ModeNotAllowed {
                    mode,
                    requested_by,
                    managed: managed.clone(),
                    allowed: modes.clone(),
                });
            }
        }
    }
    let mut by_precedence: Vec<&PolicySource> = sources.iter().collect();
    by_precedence.sort_by_key(|source| source.kind);
    let mut warnings = Vec::new();
    let from_files = by_precedence.iter().find_map(|source| {
        let mode = source.policy.default_mode?;
        if permits(mode) {
            return Some(mode);
        }
        warnings.push(format!(
            "default_mode {mode} of {} is ignored: the managed policy does not allow it",
            source.policy.file.display()
        ));
        None
    });
    let mode = flag
        .or(task)
        .or(from_files)
        .unwrap_or(PermissionMode::DontAsk);
    refuse_disabled(mode, sources)?;
    Ok((mode, warnings))
}

/// A mode any source disables (`disable_bypass_mode`, `disable_auto_mode`, Claude Code's
/// `disableBypassPermissionsMode`) is refused, whoever asked for it: these only narrow.
pub fn refuse_disabled(
    mode: PermissionMode,
    sources: &[PolicySource],
) -> Result<(), AuthorityError> {
    let mut by_precedence: Vec<&PolicySource> = sources.iter().collect();
    by_precedence.sort_by_key(|source| source.kind);
    let forbidding = by_precedence.iter().find(|source| match mode {
        PermissionMode::BypassPermissions => source.policy.disable_bypass,
        PermissionMode::Auto => source.policy.disable_auto,
        _ => false,
    });
    match forbidding {
        Some(source) => Err(AuthorityError::ModeDisabled {
            mode,
            by: source.policy.file.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_source as source;

    use PermissionMode::*;
    use SourceKind::*;

    /// (sources, --mode, task mode) → the mode in force, or the error's start.
    type Case<'a> = (
        Vec<(SourceKind, &'a str)>,
        Option<PermissionMode>,
        Option<PermissionMode>,
        Result<PermissionMode, &'a str>,
    );

    #[test]
    fn the_managed_policy_decides_which_modes_lower_sources_may_choose() {
        let managed = "managed_only: true\npermissions: {default_mode: dontAsk}\n";
        let bypass_ok = "allowed_modes: [bypassPermissions, acceptEdits]\n";
        let project_accept = "permissions: {default_mode: acceptEdits}\n";
        let cases: Vec<Case> = vec![
            // No managed policy: anything goes, as before.
            (vec![(Project, project_accept)], None, None, Ok(AcceptEdits)),
            (vec![], None, Some(BypassPermissions), Ok(BypassPermissions)),
            // A task's bypass or acceptEdits does not defeat the managed policy.
            (
                vec![(Managed, managed)],
                None,
                Some(BypassPermissions),
                Err("bypassPermissions mode (the task's mode) is not allowed"),
            ),
            (
                vec![(Managed, managed)],
                Some(AcceptEdits),
                None,
                Err("acceptEdits mode (--mode) is not allowed"),
            ),
            // Stricter modes are always fine.
            (vec![(Managed, managed)], Some(Plan), None, Ok(Plan)),
            (
                vec![(Managed, "permissions: {default_mode: acceptEdits}\n")],
                None,
                Some(DontAsk),
                Ok(DontAsk),
            ),
            (
                vec![(Managed, "permissions: {default_mode: acceptEdits}\n")],
                None,
                Some(AcceptEdits),
                Ok(AcceptEdits),
            ),
            // A project's default_mode is skipped; the managed one stands.
            (
                vec![(Managed, managed), (Project, project_accept)],
                None,
                None,
                Ok(DontAsk),
            ),
            (
                vec![(Managed, "{}\n"), (Project, project_accept)],
                None,
                None,
                Ok(DontAsk),
            ),
            // Bypass only with explicit consent.
            (
                vec![(Managed, bypass_ok)],
                None,
                Some(BypassPermissions),
                Ok(BypassPermissions),
            ),
            (
                vec![
                    (Managed, bypass_ok),
                    (Managed, "allowed_modes: [acceptEdits]\n"),
                ],
                None,
                Some(BypassPermissions),
                Err("bypassPermissions mode (the task's mode) is not allowed"),
            ),
            // A lower file can still narrow: disable_bypass_mode holds.
            (
                vec![
                    (Managed, bypass_ok),
                    (Project, "disable_bypass_mode: true\n"),
                ],
                Some(BypassPermissions),
                None,
                Err("bypassPermissions mode is disabled"),
            ),
        ];
        for (index, (sources, flag, task, expected)) in cases.into_iter().enumerate() {
            let sources: Vec<PolicySource> = sources
                .into_iter()
                .map(|(kind, yaml)| source(kind, yaml))
                .collect();
            let got = resolve_mode(flag, task, &sources)
                .map(|(mode, _)| mode)
                .map_err(|err| err.to_string());
            match (&got, &expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected, "case {index}"),
                (Err(got), Err(start)) => assert!(got.starts_with(start), "case {index}: {got}"),
                _ => panic!("case {index}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn a_skipped_default_mode_is_a_warning() {
        let sources = [
            source(Managed, "managed_only: true\n"),
            source(User, "permissions: {default_mode: bypassPermissions}\n"),
        ];
        let (mode, warnings) = resolve_mode(None, None, &sources).unwrap();
        assert_eq!(mode, DontAsk);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("User.yaml"), "{warnings:?}");
    }

    #[test]
    fn managed_keys_in_a_lower_file_are_refused_where_written() {
        for key in [
            "managed_only: true",
            "managed_hooks_only: false",
            "allowed_modes: [plan]",
            "lower_sources_may_add: [hooks]",
            "managed_mcp_only: true",
        ] {
            let text = format!("permissions:\n  allow: [Read]\n{key}\n");
            let sources = [source(Managed, "{}\n"), source(Project, &text)];
            let err = refuse_managed_keys_below(&sources).unwrap_err();
            assert_eq!(err.line, 3, "{key}: {err}");
            assert!(
                err.to_string()
                    .contains("only takes effect in the managed policy"),
                "{err}"
            );
            assert!(refuse_managed_keys_below(&[source(Managed, &text)]).is_ok());
        }
    }

    #[test]
    fn under_managed_only_lower_additions_need_a_grant() {
        let plain = [source(Managed, "{}\n")];
        let only = [source(Managed, "managed_only: true\n")];
        let granted = [source(
            Managed,
            "managed_only: true\nlower_sources_may_add: [hooks]\n",
        )];
        assert!(lower_may_add(&plain, LowerGrant::Hooks));
        assert!(lower_may_add(&[], LowerGrant::AdditionalDirectories));
        assert!(!lower_may_add(&only, LowerGrant::Hooks));
        assert!(!lower_may_add(&only, LowerGrant::AdditionalDirectories));
        assert!(lower_may_add(&granted, LowerGrant::Hooks));
        assert!(!lower_may_add(&granted, LowerGrant::AdditionalDirectories));
    }

    /// Every power from every origin, under no managed policy, a plain one, a managed_only
    /// one and one that grants mcp_servers and hooks back.
    #[test]
    fn the_authority_table_across_every_layer() {
        use ConfigOrigin as O;
        use Power::*;
        use Standing::*;
        let plain = vec![source(Managed, "{}\n")];
        let only = vec![source(Managed, "managed_only: true\n")];
        let granted = vec![source(
            Managed,
            "managed_only: true\nlower_sources_may_add: [mcp_servers, hooks, additional_directories]\n",
        )];
        let origins = [
            O::Managed,
            O::CommandLine,
            O::User,
            O::Task,
            O::Project,
            O::McpJson,
        ];
        let powers = [
            McpServers,
            Hooks,
            Classifier,
            JudgeLeniency,
            Sandbox,
            EnvExpansion,
            AdditionalDirectories,
        ];
        for origin in origins {
            for power in powers {
                let open = match (origin, power) {
                    (O::Managed | O::CommandLine | O::User, _) => InForce,
                    (_, McpServers) => NeedsApproval,
                    (O::Task | O::Project, Hooks | AdditionalDirectories) => NeedsApproval,
                    (O::Task | O::Project, Sandbox) => Fallback,
                    _ => Ignored,
                };
                assert_eq!(standing(&[], power, origin), open, "{origin:?} {power:?}");
                assert_eq!(
                    standing(&plain, power, origin),
                    open,
                    "{origin:?} {power:?}"
                );
                let closed = if origin == O::Managed {
                    InForce
                } else {
                    Ignored
                };
                assert_eq!(
                    standing(&only, power, origin),
                    closed,
                    "{origin:?} {power:?}"
                );
                let regranted = match power {
                    McpServers | Hooks | AdditionalDirectories => open,
                    _ => closed,
                };
                assert_eq!(
                    standing(&granted, power, origin),
                    regranted,
                    "{origin:?} {power:?}"
                );
            }
        }
    }

    #[test]
    fn only_the_operators_files_approve_and_managed_only_silences_the_user() {
        let dirs = "allow_project_directories: true\n";
        assert!(repository_directories_approved(&[source(User, dirs)]));
        assert!(repository_directories_approved(&[source(Managed, dirs)]));
        assert!(!repository_directories_approved(&[source(Project, dirs)]));
        assert!(!repository_directories_approved(&[source(Task, dirs)]));
        assert!(!repository_directories_approved(&[
            source(Managed, "managed_only: true\n"),
            source(User, dirs)
        ]));
        let hooks = "allow_project_hooks: true\n";
        assert!(repository_hooks_approved(&[source(User, hooks)]));
        assert!(repository_hooks_approved(&[source(Managed, hooks)]));
        assert!(!repository_hooks_approved(&[source(Project, hooks)]));
        assert!(!repository_hooks_approved(&[source(Task, hooks)]));
        assert!(!repository_hooks_approved(&[
            source(
                Managed,
                "managed_only: true\nlower_sources_may_add: [hooks]\n"
            ),
            source(User, hooks),
        ]));
    }
}
