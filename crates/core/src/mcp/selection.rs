//! Which MCP servers a run starts: the policies', the task's and (when a policy approves it)
//! the workdir's `.mcp.json`, by precedence, narrowed by `managed_only`/`managed_mcp_only`,
//! Claude Code's `allowedMcpServers`/`deniedMcpServers` and the approvals every server the
//! repository brings needs (the task's, `.tollgate/policy.yaml`'s, `.mcp.json`'s; the table
//! is `policy::authority`'s). Pure: the caller reads `.mcp.json` only when
//! [`project_file_approved`] says so.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::{ConfigError, SourceLocation};
use crate::policy::{PolicySource, SourceKind};
use crate::settings::{
    Approval, ConfigOrigin, DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT, Held, HeldBack,
    HeldKind, McpServerSpec, Power, Standing, approval, approvers, check_server_name,
    mcp_transport, server_approved, standing,
};

/// A server the run will start.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedServer {
    pub spec: McpServerSpec,
    pub origin: ConfigOrigin,
    /// Whether `${NAME}` in its `env` is the runner's variable NAME; literal text otherwise
    /// (the repository's entries must not pull a secret into a process of their choosing).
    pub expand_env: bool,
}

/// A server entry that will not start, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedServer {
    pub name: String,
    pub origin: ConfigOrigin,
    pub reason: String,
    /// Its entry says `optional: true`.
    pub optional: bool,
    /// The task names it (its own `mcp_servers:` or its `policy:` file, not a plugin's) and no
    /// server of its name runs: the model is told, and unless it is optional, `fail_on:
    /// [mcp_start]` stops the run before the first model request.
    pub missing: bool,
}

impl SkippedServer {
    /// The run cannot go on as the task asked without it (`fail_on: [mcp_start]`).
    pub fn required(&self) -> bool {
        self.missing && !self.optional
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpPlan {
    pub servers: Vec<PlannedServer>,
    pub skipped: Vec<SkippedServer>,
    /// The skipped servers that wait on an operator's approval, with the lines that give it.
    pub held_back: Vec<HeldBack>,
}

fn managed_only(sources: &[PolicySource]) -> bool {
    sources
        .iter()
        .any(|source| source.kind == SourceKind::Managed && source.policy.mcp.managed_only)
}

/// Whether the workdir's `.mcp.json` may start servers: the managed or the user's policy says
/// `allow_project_mcp` (`enableAllProjectMcpServers`) or names servers in
/// `enabledMcpjsonServers`, and no managed policy is `managed_mcp_only` (or `managed_only`
/// without granting `mcp_servers`). A project's or a task's own file cannot approve it: both
/// may come with the pull request. (Unapproved, the file is read only to name its servers as
/// held back.)
pub fn project_file_approved(sources: &[PolicySource]) -> bool {
    !managed_only(sources)
        && standing(sources, Power::McpServers, ConfigOrigin::McpJson) != Standing::Ignored
        && approvers(sources).any(|source| {
            source.policy.mcp.allow_project || !source.policy.mcp.enabled_project.is_empty()
        })
}

/// The servers to start. `project` is the parsed `.mcp.json`, when it was read.
pub fn plan(
    sources: &[PolicySource],
    task: &[McpServerSpec],
    project: &[McpServerSpec],
) -> McpPlan {
    // Precedence is `ConfigOrigin`'s order; the sort is stable, so a file's own order stays.
    let mut candidates: Vec<(ConfigOrigin, &McpServerSpec)> = sources
        .iter()
        .flat_map(|source| {
            let origin = ConfigOrigin::of(source.kind);
            source
                .policy
                .mcp
                .servers
                .iter()
                .map(move |spec| (origin, spec))
        })
        .chain(task.iter().map(|spec| (ConfigOrigin::Task, spec)))
        .chain(project.iter().map(|spec| (ConfigOrigin::McpJson, spec)))
        .collect();
    candidates.sort_by_key(|(origin, _)| *origin);
    let mut plan = McpPlan::default();
    for (origin, spec) in candidates {
        match refusal(sources, &plan, origin, spec) {
            Some(Refusal::Held(approval)) => {
                let held = HeldBack::new(
                    HeldKind::McpServer,
                    spec.name.clone(),
                    spec.source.file.display().to_string(),
                    origin,
                    approval,
                );
                let reason = format!("held back: {}; {}", held.reason, held.remedy());
                plan.skipped.push(skipped(spec, origin, reason));
                plan.held_back.push(held);
            }
            Some(Refusal::Other(reason)) => plan.skipped.push(skipped(spec, origin, reason)),
            None => {
                let mut spec = spec.clone();
                spec.trust_read_only_hint &= origin.is_operators();
                let expand_env =
                    standing(sources, Power::EnvExpansion, origin) == Standing::InForce;
                plan.servers.push(PlannedServer {
                    spec,
                    origin,
                    expand_env,
                });
            }
        }
    }
    // Missing: a task's entry that did not start while no server of its name runs (the
    // operator's `github` before the task's `github` serves what the task asked for).
    let McpPlan {
        servers,
        skipped,
        held_back,
    } = &mut plan;
    for entry in skipped.iter_mut().filter(|entry| entry.missing) {
        entry.missing = !servers
            .iter()
            .any(|server| server.spec.name.eq_ignore_ascii_case(&entry.name));
        if let Some(held) = held_back
            .iter_mut()
            .find(|held| held.origin == entry.origin && held.name == entry.name)
        {
            held.required = entry.required();
        }
    }
    plan
}

fn skipped(spec: &McpServerSpec, origin: ConfigOrigin, reason: String) -> SkippedServer {
    SkippedServer {
        name: spec.name.clone(),
        origin,
        reason,
        optional: spec.optional,
        // Until a server of its name is found running (`plan`).
        missing: origin == ConfigOrigin::Task && spec.plugin.is_none(),
    }
}

/// Why a server does not start: it waits on an operator's approval, or something else keeps
/// it off (a name that comes first, the operator's lists).
enum Refusal {
    Held(Approval),
    Other(String),
}

/// Why `spec` does not start, if it does not.
fn refusal(
    sources: &[PolicySource],
    plan: &McpPlan,
    origin: ConfigOrigin,
    spec: &McpServerSpec,
) -> Option<Refusal> {
    let approved = server_approved(sources, &spec.name);
    if let Some(held) = approval(sources, Held::McpServer(&spec.name), origin, approved) {
        return Some(Refusal::Held(held));
    }
    other_refusal(sources, plan, origin, spec).map(Refusal::Other)
}

/// Why an entry no approval is missing for does not start, if it does not.
fn other_refusal(
    sources: &[PolicySource],
    plan: &McpPlan,
    origin: ConfigOrigin,
    spec: &McpServerSpec,
) -> Option<String> {
    // Names differing in case are one name: a repository's `.mcp.json` cannot add a
    // `Tracker` beside the managed `tracker` for rules and lists to tell apart.
    if let Some(first) = plan
        .servers
        .iter()
        .find(|s| s.spec.name.eq_ignore_ascii_case(&spec.name))
    {
        return Some(format!(
            "a server of this name comes first from {}",
            first.spec.source
        ));
    }
    if !origin.is_operators() {
        let disabled = sources.iter().any(|source| {
            source
                .policy
                .mcp
                .disabled_project
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&spec.name))
        });
        if disabled {
            return Some("disabledMcpjsonServers names it".into());
        }
    }
    if let Some(source) = sources.iter().find(|source| {
        source
            .policy
            .mcp
            .denied
            .iter()
            .any(|m| m.matches_any_case(spec))
    }) {
        return Some(format!(
            "deniedMcpServers in {} matches it",
            source.policy.file.display()
        ));
    }
    let allowlists: Vec<&PolicySource> = sources
        .iter()
        .filter(|source| source.policy.mcp.allowed.is_some())
        .collect();
    if let Some(source) = allowlists.iter().find(|source| {
        !source
            .policy
            .mcp
            .allowed
            .iter()
            .flatten()
            .any(|m| m.matches(spec))
    }) {
        return Some(format!(
            "allowedMcpServers in {} does not list it",
            source.policy.file.display()
        ));
    }
    None
}

/// `.mcp.json` as Claude Code writes it. Keys tollgate does not use are left alone (the file
/// is Claude Code's); an entry of a transport tollgate does not speak is skipped by
/// [`parse_project_file`].
#[derive(Debug, Deserialize)]
struct ProjectFile {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: BTreeMap<String, ProjectEntry>,
}

#[derive(Debug, Deserialize)]
struct ProjectEntry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The stdio and HTTP servers of a `.mcp.json`, and the entries left aside with why.
pub fn parse_project_file(
    text: &str,
    file: &Path,
) -> Result<(Vec<McpServerSpec>, Vec<SkippedServer>), ConfigError> {
    let parsed: ProjectFile = serde_json::from_str(text)
        .map_err(|err| crate::config::json_error(&err, file).with_source(file, text))?;
    let mut servers = Vec::new();
    let mut skipped = Vec::new();
    for (name, entry) in parsed.mcp_servers {
        let skip = |reason: String| SkippedServer {
            name: name.clone(),
            origin: ConfigOrigin::McpJson,
            reason,
            optional: false,
            missing: false,
        };
        if let Err(reason) = check_server_name(&name) {
            skipped.push(skip(reason));
            continue;
        }
        let transport = match mcp_transport(
            entry.kind.as_deref(),
            entry.command,
            entry.args,
            entry.env,
            entry.url,
            entry.headers,
        ) {
            Ok(transport) => transport,
            Err(reason) => {
                skipped.push(skip(reason));
                continue;
            }
        };
        servers.push(McpServerSpec {
            name,
            transport,
            defer: true,
            startup_timeout: DEFAULT_MCP_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_MCP_CALL_TIMEOUT,
            trust_read_only_hint: false,
            optional: false,
            plugin: None,
            source: SourceLocation {
                file: file.to_path_buf(),
                line: 0,
            },
        });
    }
    Ok((servers, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, PolicyOrigin};

    fn source(kind: SourceKind, yaml: &str) -> PolicySource {
        let policy = Policy::parse(
            yaml,
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/p"),
                home: None,
            },
        )
        .unwrap();
        PolicySource { kind, policy }
    }

    fn project() -> Vec<McpServerSpec> {
        let text = r#"{"mcpServers": {
            "docs": {"command": "node", "args": ["docs.js"]},
            "web": {"type": "sse", "url": "https://x/sse"},
            "extra": {"command": "extra", "unknownKey": 1}
        }}"#;
        let (servers, skipped) = parse_project_file(text, Path::new(".mcp.json")).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].reason.contains("legacy HTTP+SSE"));
        servers
    }

    fn started(plan: &McpPlan) -> Vec<(String, ConfigOrigin)> {
        plan.servers
            .iter()
            .map(|s| (s.spec.name.clone(), s.origin))
            .collect()
    }

    #[test]
    fn the_project_file_needs_a_trusted_approval() {
        use ConfigOrigin::*;
        use SourceKind as K;
        // (sources, approved, started)
        type Case = (Vec<PolicySource>, bool, Vec<(&'static str, ConfigOrigin)>);
        let table: Vec<Case> = vec![
            (vec![], false, vec![]),
            // A project policy cannot approve its own workdir's file.
            (
                vec![source(K::Project, "allow_project_mcp: true\n")],
                false,
                vec![],
            ),
            (
                vec![source(K::Managed, "allow_project_mcp: true\n")],
                true,
                vec![("docs", McpJson), ("extra", McpJson)],
            ),
            (
                vec![source(K::User, "enabledMcpjsonServers: [docs]\n")],
                true,
                vec![("docs", McpJson)],
            ),
            (
                vec![source(
                    K::Managed,
                    "enableAllProjectMcpServers: true\ndisabledMcpjsonServers: [extra]\n",
                )],
                true,
                vec![("docs", McpJson)],
            ),
            (
                vec![source(
                    K::Managed,
                    "allow_project_mcp: true\nmanaged_mcp_only: true\n",
                )],
                false,
                vec![],
            ),
        ];
        for (sources, approved, expected) in table {
            assert_eq!(project_file_approved(&sources), approved);
            // Read either way: unapproved, its servers are named as held back.
            let plan = plan(&sources, &[], &project());
            let expected: Vec<(String, ConfigOrigin)> = expected
                .into_iter()
                .map(|(name, origin)| (name.to_string(), origin))
                .collect();
            assert_eq!(started(&plan), expected);
            // What does not start for want of an approval is held back with its line; the
            // repository's own server is never what the run needs.
            for held in &plan.held_back {
                assert!(
                    held.approve
                        .iter()
                        .any(|line| line.contains(&held.name)
                            || line.starts_with("managed_mcp_only")),
                    "{held:?}"
                );
                assert!(!held.required);
            }
            assert!(plan.skipped.iter().all(|s| !s.missing));
        }
        let unapproved = plan(&[], &[], &project());
        let held: Vec<&str> = unapproved
            .held_back
            .iter()
            .map(|h| h.approve[0].as_str())
            .collect();
        assert_eq!(
            held,
            [
                "enabledMcpjsonServers: [docs]",
                "enabledMcpjsonServers: [extra]"
            ]
        );
    }

    /// A task's server that does not start is missing (the model is told; unless optional,
    /// the run stops under `fail_on: [mcp_start]`) — not when a server of its name runs, nor
    /// when a plugin brought it.
    #[test]
    fn a_task_server_held_back_is_missing_unless_optional_or_served() {
        use SourceKind as K;
        let task = crate::settings::mcp_servers(
            crate::config::parse(
                "need:\n  command: n\nnice:\n  command: o\n  optional: true\nshared:\n  command: s\n",
                Path::new("task.yaml"),
            )
            .unwrap(),
            Path::new("task.yaml"),
        )
        .unwrap();
        let mut from_plugin = task[0].clone();
        from_plugin.name = "kit".into();
        from_plugin.plugin = Some("team-kit".into());
        let mut servers = task.clone();
        servers.push(from_plugin);
        let managed = source(K::Managed, "mcp_servers:\n  shared:\n    command: m\n");
        let plan = plan(&[managed], &servers, &[]);
        assert_eq!(
            started(&plan),
            [("shared".to_string(), ConfigOrigin::Managed)]
        );
        let by = |name: &str| plan.skipped.iter().find(|s| s.name == name).unwrap();
        assert!(by("need").required());
        assert!(by("nice").missing && !by("nice").required());
        assert!(!by("shared").missing);
        assert!(!by("kit").missing);
        let required: Vec<&str> = plan
            .held_back
            .iter()
            .filter(|held| held.required)
            .map(|held| held.name.as_str())
            .collect();
        assert_eq!(required, ["need"]);
        assert_eq!(plan.held_back.len(), 4, "{:?}", plan.held_back);
    }

    #[test]
    fn precedence_managed_only_and_server_lists() {
        use SourceKind as K;
        let task = crate::settings::mcp_servers(
            crate::config::parse(
                "tracker:\n  command: t\ndocs:\n  command: task-docs\n  trust_read_only_hint: true\n",
                Path::new("task.yaml"),
            )
            .unwrap(),
            Path::new("task.yaml"),
        )
        .unwrap();
        // The task's servers come with the repository: they start once approved.
        let managed = source(
            K::Managed,
            "allow_project_mcp: true\nmcp_servers:\n  docs:\n    command: managed-docs\n    trust_read_only_hint: true\n",
        );
        let plan1 = plan(std::slice::from_ref(&managed), &task, &[]);
        assert_eq!(
            started(&plan1),
            [
                ("docs".to_string(), ConfigOrigin::Managed),
                ("tracker".to_string(), ConfigOrigin::Task)
            ]
        );
        assert_eq!(plan1.servers[0].spec.target(), "managed-docs");
        assert!(plan1.servers[0].spec.trust_read_only_hint);
        assert!(
            plan1.skipped[0]
                .reason
                .contains("comes first from p.yaml:4")
        );
        // The task cannot vouch for its own server's hints.
        assert!(plan(&[], &task, &[]).servers.is_empty());
        let approving = source(K::User, "enabledMcpjsonServers: [docs]\n");
        let only_task = plan(std::slice::from_ref(&approving), &task, &[]);
        assert_eq!(
            started(&only_task),
            [("docs".to_string(), ConfigOrigin::Task)]
        );
        assert!(
            only_task.skipped[0]
                .reason
                .contains("enabledMcpjsonServers: [tracker]"),
            "{:?}",
            only_task.skipped
        );
        assert!(
            only_task
                .servers
                .iter()
                .all(|s| !s.spec.trust_read_only_hint)
        );
        // managed_mcp_only: the task's servers stay off.
        let strict = source(
            K::Managed,
            "managed_mcp_only: true\nmcp_servers:\n  docs:\n    command: d\n",
        );
        let plan2 = plan(&[strict], &task, &[]);
        assert_eq!(
            started(&plan2),
            [("docs".to_string(), ConfigOrigin::Managed)]
        );
        assert!(
            plan2
                .skipped
                .iter()
                .all(|s| s.reason.contains("managed_mcp_only"))
        );
        // Claude Code's allow and deny lists narrow every source.
        let lists = source(
            K::User,
            "allow_project_mcp: true\nallowedMcpServers: [{serverName: tracker}, {serverName: docs}]\ndeniedMcpServers: [{serverCommand: [task-docs]}]\n",
        );
        let plan3 = plan(&[lists], &task, &[]);
        assert_eq!(
            started(&plan3),
            [("tracker".to_string(), ConfigOrigin::Task)]
        );
        assert!(plan3.skipped[0].reason.contains("deniedMcpServers"));
        let allow = source(
            K::Managed,
            "allow_project_mcp: true\nallowedMcpServers: [{serverName: other}]\n",
        );
        let plan4 = plan(&[allow], &task, &[]);
        assert!(plan4.servers.is_empty());
        assert!(plan4.skipped[0].reason.contains("does not list it"));
    }

    /// A `.mcp.json` server spelled in another case is the same server to every list that
    /// keeps servers off, and cannot sit beside a trusted server of that name.
    #[test]
    fn a_project_server_in_another_case_is_still_the_named_one() {
        use SourceKind as K;
        let text = r#"{"mcpServers": {
            "GitHub": {"command": "evil"},
            "DOCS": {"command": "evil-docs"}
        }}"#;
        let (read, _) = parse_project_file(text, Path::new(".mcp.json")).unwrap();
        // (the policy, what starts)
        let cases: [(&str, Vec<&str>); 4] = [
            (
                "allow_project_mcp: true
",
                vec!["DOCS", "GitHub"],
            ),
            (
                "allow_project_mcp: true
deniedMcpServers: [{serverName: github}]
",
                vec!["DOCS"],
            ),
            (
                "allow_project_mcp: true
disabledMcpjsonServers: [github, docs]
",
                vec![],
            ),
            (
                "allow_project_mcp: true
mcp_servers:
  docs:
    command: managed-docs
",
                vec!["GitHub", "docs"],
            ),
        ];
        for (policy, expected) in cases {
            let managed = source(K::Managed, policy);
            let plan = plan(std::slice::from_ref(&managed), &[], &read);
            let mut names: Vec<String> = started(&plan).into_iter().map(|(n, _)| n).collect();
            names.sort();
            assert_eq!(names, expected, "{policy}");
        }
    }
}
