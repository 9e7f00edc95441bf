//! What a run goes without until an operator's policy lets it in: an MCP server, a hook, a
//! plugin or an additional directory that a lower source asked for (the repository's task,
//! `.tollgate/policy.yaml` or `.mcp.json`; under the managed policy's lockdown, the user's or
//! the command line's too), each with the policy lines that would let it in. Owns the one
//! answer to "what is missing for this entry to count" ([`approval`]): `mcp::plan`,
//! `session`'s hooks, directories and plugins ask it, so what is held back and what is said
//! about it cannot part. Pure: takes the loaded sources.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::authority::{ConfigOrigin, Power, Standing, approvers, lower_may_add, table};
use crate::file::LowerGrant;
use crate::rule_set::{PolicySource, SourceKind};

/// What kind of thing is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldKind {
    McpServer,
    Hook,
    Plugin,
    AdditionalDirectory,
}

/// Which operator's file the approving lines go in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approver {
    /// The managed policy (`--policy FILE`, else `/etc/tollgate/policy.yaml`).
    Managed,
    /// The managed policy or the user's (`~/.config/tollgate/policy.yaml`).
    ManagedOrUser,
}

impl Approver {
    fn words(self) -> &'static str {
        match self {
            Approver::Managed => "the managed policy",
            Approver::ManagedOrUser => "the managed or the user's policy",
        }
    }
}

/// Why an entry does not count, and what would make it count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Each missing approval's reason, joined.
    pub reason: String,
    pub approve_in: Approver,
    /// One YAML line (key and value) for each missing approval.
    pub lines: Vec<String>,
}

/// Something a source asked for that this run goes without (`run_started`'s
/// `policy.held_back`, the result's `held_back`, a progress line and a summary line each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBack {
    pub kind: HeldKind,
    /// The server's name, the hook's event and command, the plugin's folder, the directory.
    pub name: String,
    /// Where it was asked for: the file, or the flag (`--plugin-dir`).
    pub from: String,
    pub origin: ConfigOrigin,
    pub reason: String,
    pub approve_in: Approver,
    /// The policy lines (YAML) that would let it in, all of them needed.
    pub approve: Vec<String>,
    /// A server the task names and does not mark `optional`, and no server of its name runs:
    /// with `mcp_start` in `fail_on` the run stops before its first model request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

impl HeldBack {
    pub fn new(
        kind: HeldKind,
        name: String,
        from: String,
        origin: ConfigOrigin,
        approval: Approval,
    ) -> HeldBack {
        HeldBack {
            kind,
            name,
            from,
            origin,
            reason: approval.reason,
            approve_in: approval.approve_in,
            approve: approval.lines,
            required: false,
        }
    }

    /// One line for a person: what, from where, why, and the lines that would let it in.
    pub fn describe(&self) -> String {
        let what = match self.kind {
            HeldKind::McpServer => format!("MCP server `{}`", self.name),
            HeldKind::Hook => format!("hook `{}`", self.name),
            HeldKind::Plugin => format!("plugin {}", self.name),
            HeldKind::AdditionalDirectory => format!("additional directory {}", self.name),
        };
        let needed = if self.required {
            " (the task needs it)"
        } else {
            ""
        };
        format!(
            "held back: {what} of {}{needed}: {}; {}",
            self.from,
            self.reason,
            self.remedy()
        )
    }

    /// `approve with `KEY: VALUE` in the managed policy`.
    pub fn remedy(&self) -> String {
        let lines: Vec<String> = self
            .approve
            .iter()
            .map(|line| format!("`{line}`"))
            .collect();
        format!(
            "approve with {} in {}",
            lines.join(" and "),
            self.approve_in.words()
        )
    }
}

/// What asks to count: each has its own lockdown switch, `lower_sources_may_add` grant and
/// approval.
#[derive(Debug, Clone, Copy)]
pub enum Held<'a> {
    /// A server, by name (`enabledMcpjsonServers` names it).
    McpServer(&'a str),
    Hooks,
    AdditionalDirectories,
}

impl Held<'_> {
    fn grant(self) -> LowerGrant {
        match self {
            Held::McpServer(_) => LowerGrant::McpServers,
            Held::Hooks => LowerGrant::Hooks,
            Held::AdditionalDirectories => LowerGrant::AdditionalDirectories,
        }
    }

    /// The managed key that keeps every lower source's entries of this kind off.
    fn lockdown(self, source: &PolicySource) -> Option<&'static str> {
        match self {
            Held::McpServer(_) if source.policy.mcp.managed_only => Some("managed_mcp_only"),
            Held::Hooks if source.policy.managed_hooks_only => Some("managed_hooks_only"),
            _ => None,
        }
    }

    /// The operator's approval a repository's entry of this kind needs ([`table`]).
    fn approval_line(self, origin: ConfigOrigin) -> Option<String> {
        let power = match self {
            Held::McpServer(_) => Power::McpServers,
            Held::Hooks => Power::Hooks,
            Held::AdditionalDirectories => Power::AdditionalDirectories,
        };
        if table(power, origin) != Standing::NeedsApproval {
            return None;
        }
        Some(match self {
            Held::McpServer(name) => format!("enabledMcpjsonServers: [{name}]"),
            Held::Hooks => "allow_project_hooks: true".to_string(),
            Held::AdditionalDirectories => "allow_project_directories: true".to_string(),
        })
    }
}

fn grant_key(grant: LowerGrant) -> &'static str {
    match grant {
        LowerGrant::Hooks => "hooks",
        LowerGrant::AdditionalDirectories => "additional_directories",
        LowerGrant::McpServers => "mcp_servers",
    }
}

/// What keeps an entry of `held` written by `origin` from counting, and the lines an operator
/// would add; `None` when it counts. `approved`: whether an operator's file already gives the
/// approval a repository's entry needs (`enabledMcpjsonServers` / `allow_project_mcp`,
/// `allow_project_hooks`). In order: the managed policy's lockdown switch (`managed_mcp_only`,
/// `managed_hooks_only`), its `managed_only` without a `lower_sources_may_add` grant, then the
/// repository's approval — which under `managed_only` only the managed policy can give.
pub fn approval(
    sources: &[PolicySource],
    held: Held<'_>,
    origin: ConfigOrigin,
    approved: bool,
) -> Option<Approval> {
    if origin == ConfigOrigin::Managed {
        return None;
    }
    let managed = |source: &&PolicySource| source.kind == SourceKind::Managed;
    let mut reasons = Vec::new();
    let mut lines = Vec::new();
    let mut approve_in = Approver::ManagedOrUser;
    if let Some((source, key)) = sources
        .iter()
        .filter(managed)
        .find_map(|source| held.lockdown(source).map(|key| (source, key)))
    {
        reasons.push(format!("{} says {key}", source.policy.file.display()));
        lines.push(format!("{key}: false"));
        approve_in = Approver::Managed;
    }
    if let Some(source) = sources
        .iter()
        .filter(managed)
        .find(|source| source.policy.managed_only)
    {
        approve_in = Approver::Managed;
        if !lower_may_add(sources, held.grant()) {
            reasons.push(format!(
                "{} says managed_only",
                source.policy.file.display()
            ));
            lines.push(format!(
                "lower_sources_may_add: [{}]",
                grant_key(held.grant())
            ));
        }
    }
    if let Some(line) = held.approval_line(origin)
        && !approved
    {
        reasons.push("it comes with the repository and no operator's policy approves it".into());
        lines.push(line);
    }
    (!lines.is_empty()).then(|| Approval {
        reason: reasons.join("; "),
        approve_in,
        lines,
    })
}

/// Whether an operator's file approves the repository's server `name`: `allow_project_mcp`
/// (all of them) or `enabledMcpjsonServers` naming it — for `.mcp.json`'s servers and for
/// those of the task file and `.tollgate/policy.yaml` alike.
pub fn server_approved(sources: &[PolicySource], name: &str) -> bool {
    approvers(sources).any(|source| {
        source.policy.mcp.allow_project
            || source
                .policy
                .mcp
                .enabled_project
                .iter()
                .any(|listed| listed == name)
    })
}

/// A plugin folder a lower source enabled, not loaded under the managed policy `managed`'s
/// restrictions: only the managed policy's own `plugins:` would load it.
pub fn plugin(dir: &Path, from: String, enabled_by: SourceKind, managed: &Path) -> HeldBack {
    HeldBack::new(
        HeldKind::Plugin,
        dir.display().to_string(),
        from,
        ConfigOrigin::of(enabled_by),
        Approval {
            reason: format!(
                "{} restricts rules, hooks or servers to its own, so only it enables plugins",
                managed.display()
            ),
            approve_in: Approver::Managed,
            lines: vec![format!("plugins: [{}]", dir.display())],
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{counts, repository_hooks_approved, standing};
    use crate::test_source as source;
    use ConfigOrigin as O;
    use SourceKind::{Managed, Project, Task, User};

    /// The managed policies a run may have, with what each is.
    fn managed_variants() -> Vec<(&'static str, Vec<PolicySource>)> {
        vec![
            ("none", vec![]),
            ("plain", vec![source(Managed, "permissions: {}\n")]),
            (
                "managed_only",
                vec![source(Managed, "managed_only: true\n")],
            ),
            (
                "managed_only granting",
                vec![source(
                    Managed,
                    "managed_only: true\nlower_sources_may_add: [hooks, mcp_servers, additional_directories]\n",
                )],
            ),
            (
                "lockdowns",
                vec![source(
                    Managed,
                    "managed_hooks_only: true\nmanaged_mcp_only: true\n",
                )],
            ),
        ]
    }

    /// The approvals an operator's file may give, from the user's or the managed policy.
    fn approvals() -> Vec<Vec<PolicySource>> {
        let both = "allow_project_hooks: true\nenabledMcpjsonServers: [srv]\n";
        vec![
            vec![],
            vec![source(User, both)],
            vec![source(Managed, both)],
            // The repository cannot approve itself.
            vec![source(Project, both), source(Task, both)],
        ]
    }

    /// For every managed policy, approval and origin: held back exactly when the loaders'
    /// own rule says the entry does not count, and then adding the lines it names to the
    /// policy it names makes the entry count.
    #[test]
    fn held_back_exactly_when_it_does_not_count_and_the_lines_let_it_in() {
        let origins = [O::CommandLine, O::Task, O::Project, O::McpJson, O::User];
        for (label, managed) in managed_variants() {
            for approving in approvals() {
                let sources: Vec<PolicySource> =
                    managed.iter().chain(&approving).cloned().collect();
                for origin in origins {
                    // Hooks (never from `.mcp.json`).
                    if origin != O::McpJson {
                        let approved = repository_hooks_approved(&sources);
                        let held = approval(&sources, Held::Hooks, origin, approved);
                        let lockdown = sources
                            .iter()
                            .any(|s| s.kind == Managed && s.policy.managed_hooks_only);
                        let runs = !lockdown && counts(&sources, Power::Hooks, origin, || approved);
                        assert_eq!(held.is_none(), runs, "{label} {origin:?} {approving:?}");
                        if let Some(held) = held {
                            let fixed = with_lines(&sources, &held);
                            let approved = repository_hooks_approved(&fixed);
                            assert!(
                                approval(&fixed, Held::Hooks, origin, approved).is_none(),
                                "{label} {origin:?}: {held:?}"
                            );
                        }
                    }
                    // A server named `srv`.
                    let approved = server_approved(&sources, "srv");
                    let held = approval(&sources, Held::McpServer("srv"), origin, approved);
                    let lockdown = sources
                        .iter()
                        .any(|s| s.kind == Managed && s.policy.mcp.managed_only);
                    let starts = !lockdown
                        && match standing(&sources, Power::McpServers, origin) {
                            Standing::InForce | Standing::Fallback => true,
                            Standing::NeedsApproval => approved,
                            Standing::Ignored => false,
                        };
                    assert_eq!(held.is_none(), starts, "{label} {origin:?} {approving:?}");
                    if let Some(held) = held {
                        let fixed = with_lines(&sources, &held);
                        let approved = server_approved(&fixed, "srv");
                        assert!(
                            approval(&fixed, Held::McpServer("srv"), origin, approved).is_none(),
                            "{label} {origin:?}: {held:?}"
                        );
                    }
                }
            }
        }
    }

    /// `sources` with `held`'s lines written where it says: into the first managed policy
    /// (one is made when there is none), or into the user's.
    fn with_lines(sources: &[PolicySource], held: &Approval) -> Vec<PolicySource> {
        let kind = match held.approve_in {
            Approver::Managed => Managed,
            Approver::ManagedOrUser => User,
        };
        let text: String = held.lines.iter().map(|line| format!("{line}\n")).collect();
        let mut fixed: Vec<PolicySource> = Vec::new();
        let mut written = false;
        for existing in sources {
            if existing.kind == kind && !written {
                // Re-parse the file with the lines in place of what they change.
                let mut yaml = original(existing);
                for line in &held.lines {
                    let key = line.split(':').next().unwrap_or_default();
                    yaml = yaml
                        .lines()
                        .filter(|old| !old.starts_with(&format!("{key}:")))
                        .map(|old| format!("{old}\n"))
                        .collect();
                }
                yaml.push_str(&text);
                fixed.push(source(kind, &yaml));
                written = true;
            } else {
                fixed.push(existing.clone());
            }
        }
        if !written {
            fixed.push(source(kind, &text));
            fixed.sort_by_key(|s| s.kind);
        }
        fixed
    }

    /// The YAML a test source was made from, rebuilt from the keys these tests use.
    fn original(existing: &PolicySource) -> String {
        let policy = &existing.policy;
        let mut yaml = String::new();
        if policy.managed_only {
            yaml.push_str("managed_only: true\n");
        }
        if policy.managed_hooks_only {
            yaml.push_str("managed_hooks_only: true\n");
        }
        if policy.mcp.managed_only {
            yaml.push_str("managed_mcp_only: true\n");
        }
        if !policy.lower_may_add.is_empty() {
            let grants: Vec<&str> = policy.lower_may_add.iter().map(|g| grant_key(*g)).collect();
            yaml.push_str(&format!("lower_sources_may_add: [{}]\n", grants.join(", ")));
        }
        if policy.allow_project_hooks {
            yaml.push_str("allow_project_hooks: true\n");
        }
        if !policy.mcp.enabled_project.is_empty() {
            yaml.push_str(&format!(
                "enabledMcpjsonServers: [{}]\n",
                policy.mcp.enabled_project.join(", ")
            ));
        }
        yaml
    }

    #[test]
    fn the_line_names_the_key_the_value_and_the_file() {
        let sources = vec![source(Managed, "managed_only: true\n")];
        let held = approval(&sources, Held::McpServer("docs"), O::Task, false).unwrap();
        assert_eq!(held.approve_in, Approver::Managed);
        assert_eq!(
            held.lines,
            [
                "lower_sources_may_add: [mcp_servers]",
                "enabledMcpjsonServers: [docs]"
            ]
        );
        let entry = HeldBack {
            required: true,
            ..HeldBack::new(
                HeldKind::McpServer,
                "docs".into(),
                "/r/task.yaml".into(),
                O::Task,
                held,
            )
        };
        assert_eq!(
            entry.describe(),
            "held back: MCP server `docs` of /r/task.yaml (the task needs it): Managed.yaml says managed_only; it comes with the repository and no operator's policy approves it; approve with `lower_sources_may_add: [mcp_servers]` and `enabledMcpjsonServers: [docs]` in the managed policy"
        );
        let plain = approval(&[], Held::Hooks, O::Project, false).unwrap();
        assert_eq!(plain.lines, ["allow_project_hooks: true"]);
        assert_eq!(plain.approve_in, Approver::ManagedOrUser);
        // The repository's additional directories wait on an operator's approval; the
        // operator's own only on managed_only.
        let repository = approval(&[], Held::AdditionalDirectories, O::Task, false).unwrap();
        assert_eq!(repository.lines, ["allow_project_directories: true"]);
        assert!(approval(&[], Held::AdditionalDirectories, O::Task, true).is_none());
        assert!(approval(&[], Held::AdditionalDirectories, O::User, false).is_none());
        let only = approval(&sources, Held::AdditionalDirectories, O::User, false).unwrap();
        assert_eq!(
            only.lines,
            ["lower_sources_may_add: [additional_directories]"]
        );
    }
}
