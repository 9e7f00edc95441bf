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
use crate::policy::{
    ConfigOrigin, DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT, McpServerSpec,
    PolicySource, Power, SourceKind, Standing, approvers, check_server_name, mcp_transport,
    standing,
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
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpPlan {
    pub servers: Vec<PlannedServer>,
    pub skipped: Vec<SkippedServer>,
}

fn managed_only(sources: &[PolicySource]) -> bool {
    sources
        .iter()
        .any(|source| source.kind == SourceKind::Managed && source.policy.mcp.managed_only)
}

/// Whether the workdir's `.mcp.json` may be read: the managed or the user's policy says
/// `allow_project_mcp` (`enableAllProjectMcpServers`) or names servers in
/// `enabledMcpjsonServers`, and no managed policy is `managed_mcp_only` (or `managed_only`
/// without granting `mcp_servers`). A project's or a task's own file cannot approve it: both
/// may come with the pull request.
pub fn project_file_approved(sources: &[PolicySource]) -> bool {
    !managed_only(sources)
        && standing(sources, Power::McpServers, ConfigOrigin::McpJson) != Standing::Ignored
        && approvers(sources).any(|source| {
            source.policy.mcp.allow_project || !source.policy.mcp.enabled_project.is_empty()
        })
}

/// Whether an operator's file approves the repository's server `name`: `allow_project_mcp`
/// (all of them) or `enabledMcpjsonServers` naming it — for `.mcp.json`'s servers and for
/// those of the task file and `.tollgate/policy.yaml` alike.
fn approved(sources: &[PolicySource], name: &str) -> bool {
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
            Some(reason) => plan.skipped.push(SkippedServer {
                name: spec.name.clone(),
                origin,
                reason,
            }),
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
    plan
}

/// Why `spec` does not start, if it does not.
fn refusal(
    sources: &[PolicySource],
    plan: &McpPlan,
    origin: ConfigOrigin,
    spec: &McpServerSpec,
) -> Option<String> {
    if managed_only(sources) && origin != ConfigOrigin::Managed {
        return Some("managed_mcp_only: only the managed policy's servers start".into());
    }
    match standing(sources, Power::McpServers, origin) {
        Standing::InForce | Standing::Fallback => {}
        Standing::Ignored => {
            return Some("managed_only: only the managed policy's servers start".into());
        }
        Standing::NeedsApproval if approved(sources, &spec.name) => {}
        Standing::NeedsApproval => {
            return Some(format!(
                "not approved: it comes with the repository ({}), and no enabledMcpjsonServers entry of the managed or user policy names it, nor does one say allow_project_mcp",
                spec.source.file.display()
            ));
        }
    }
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
            let read = if approved { project() } else { Vec::new() };
            let plan = plan(&sources, &[], &read);
            let expected: Vec<(String, ConfigOrigin)> = expected
                .into_iter()
                .map(|(name, origin)| (name.to_string(), origin))
                .collect();
            assert_eq!(started(&plan), expected);
        }
    }

    #[test]
    fn precedence_managed_only_and_server_lists() {
        use SourceKind as K;
        let task = crate::policy::mcp_servers(
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
        assert!(only_task.skipped[0].reason.contains("not approved"));
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
