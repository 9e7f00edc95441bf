//! The run's MCP servers: stdio ones started together through the one process runner (in the
//! sandbox when the policy turns it on), HTTP ones connected once the domain rules admit them
//! (`http`), each bounded by its start-up timeout; their tools, refreshed
//! when a server says its list changed; and their end — every server and whatever it started
//! is terminated when the run ends, however it ends (the handles kill on drop too).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::McpError;
use super::connection::{Connection, EXIT_NOTICE, Link, McpNotice, NoticeBoard};
use super::http::HttpTarget;
use super::selection::{McpPlan, PlannedServer};
use super::tool::McpTool;
use crate::exec::{ChildEnv, PreExecStep, ServiceRequest, spawn_service};
use crate::policy::{RuleKind, RuleSet, ToolName};
use crate::sandbox::{LimitWatch, Sandbox};
use crate::settings::ConfigOrigin;
use crate::settings::{McpServerSpec, McpTransport};
use crate::tools::Tool;

/// How long a server has to exit after its stdin closes before its group is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Where a server stands, for `run_started` / `init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpState {
    Started,
    Failed,
    /// Not started: the policy left it out (`error` says why).
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    pub origin: ConfigOrigin,
    pub status: McpState,
    /// Tools it offers (after whole-tool deny rules).
    pub tools: usize,
    pub deferred: bool,
    /// The server's process (and process group) id, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its entry says `optional: true`: the run goes on when it does not start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// What starting a server needs of the run.
pub struct McpLaunch<'a> {
    pub workdir: &'a Path,
    /// The environment a server starts from (no secrets); its entry's `env` is added.
    pub env: &'a ChildEnv,
    pub sandbox: Option<&'a Sandbox>,
    /// Whole-tool deny rules take a server's tools out of the pool (S1); `WebFetch(domain:…)`
    /// rules say which HTTP servers may be reached.
    pub rules: &'a RuleSet,
    /// How an HTTP server's host becomes the addresses that are checked and connected to.
    pub resolver: &'a crate::net::Resolver,
}

struct Running {
    spec: McpServerSpec,
    connection: Connection,
    link: Link,
    tools: Vec<Arc<dyn Tool>>,
    /// A `tools/list_changed` arrived: list again before the next request.
    stale: bool,
    /// The sandbox's pids cgroup of the server, kept while it runs.
    _limits: Option<LimitWatch>,
}

/// The run's servers.
#[derive(Default)]
pub struct McpHub {
    running: Vec<Running>,
    statuses: Vec<McpServerStatus>,
    board: NoticeBoard,
}

impl McpHub {
    /// Starts every planned server at once; each that fails (or outlives its start-up
    /// timeout) is recorded and left out, it never stops the others.
    pub async fn start(plan: &McpPlan, launch: McpLaunch<'_>) -> McpHub {
        let board = NoticeBoard::default();
        let started = join_all(
            plan.servers
                .iter()
                .map(|server| start_one(server, &launch, board.clone())),
        )
        .await;
        let mut hub = McpHub {
            board,
            ..McpHub::default()
        };
        for (server, result) in plan.servers.iter().zip(started) {
            let mut status = McpServerStatus {
                name: server.spec.name.clone(),
                origin: server.origin,
                status: McpState::Started,
                tools: 0,
                deferred: server.spec.defer,
                pid: None,
                error: None,
                optional: server.spec.optional,
            };
            match result {
                Ok(running) => {
                    tracing::info!(
                        server = %status.name,
                        pid = running.connection.pid(),
                        tools = running.tools.len(),
                        "MCP server started"
                    );
                    status.tools = running.tools.len();
                    status.pid = running.connection.pid();
                    hub.running.push(running);
                }
                Err(err) => {
                    tracing::info!(server = %status.name, "MCP server did not start: {err}");
                    status.status = McpState::Failed;
                    status.error = Some(err.to_string());
                }
            }
            hub.statuses.push(status);
        }
        hub.statuses
            .extend(plan.skipped.iter().map(|skipped| McpServerStatus {
                name: skipped.name.clone(),
                origin: skipped.origin,
                status: McpState::Skipped,
                tools: 0,
                deferred: true,
                pid: None,
                error: Some(skipped.reason.clone()),
                optional: skipped.optional,
            }));
        hub
    }

    pub fn statuses(&self) -> &[McpServerStatus] {
        &self.statuses
    }

    /// Servers that were meant to start and did not (`fail_on: [mcp_start]` stops the run
    /// for those not `optional`).
    pub fn failed(&self) -> impl Iterator<Item = &McpServerStatus> {
        self.statuses
            .iter()
            .filter(|status| status.status == McpState::Failed)
    }

    /// Every server tool of the pool, with whether it is deferred (S7).
    pub fn tools(&self) -> impl Iterator<Item = (&Arc<dyn Tool>, bool)> {
        self.running.iter().flat_map(|running| {
            running
                .tools
                .iter()
                .map(move |tool| (tool, running.spec.defer))
        })
    }

    /// Whether `name` is a deferred server tool.
    pub fn is_deferred(&self, name: &ToolName) -> bool {
        self.tools()
            .any(|(tool, deferred)| deferred && tool.name() == *name)
    }

    /// The notices the servers sent since the last call; a `tools/list_changed` marks its
    /// server for [`McpHub::refresh`].
    pub fn notices(&mut self) -> Vec<(String, McpNotice)> {
        let notices = self.board.take();
        for (server, notice) in &notices {
            if *notice == McpNotice::ToolsChanged
                && let Some(running) = self.running.iter_mut().find(|r| r.spec.name == *server)
            {
                running.stale = true;
            }
        }
        notices
    }

    /// Lists the tools of servers whose list changed again; returns each refreshed server
    /// with its tool names, or the error that left its old list in place.
    pub async fn refresh(
        &mut self,
        rules: &RuleSet,
    ) -> Vec<(String, Result<Vec<String>, McpError>)> {
        let mut refreshed = Vec::new();
        for running in self.running.iter_mut().filter(|r| r.stale) {
            running.stale = false;
            let listed = tokio::time::timeout(running.spec.call_timeout, running.link.list_tools())
                .await
                .unwrap_or_else(|_| Err(McpError::Protocol("tools/list timed out".into())));
            let result = listed.map(|listed| {
                running.tools = pool(&running.link, &running.spec, listed, rules);
                running.tools.iter().map(|t| t.name().to_string()).collect()
            });
            tracing::info!(
                server = %running.spec.name,
                listed = ?result,
                "MCP tools listed again"
            );
            refreshed.push((running.spec.name.clone(), result));
        }
        refreshed
    }

    /// Ends every server and what it started, at once; bounded by the grace and the reaping.
    pub async fn shutdown(mut self) {
        if !self.running.is_empty() {
            tracing::info!(servers = self.running.len(), "MCP servers shutting down");
        }
        join_all(
            self.running
                .drain(..)
                .map(|running| running.connection.close(SHUTDOWN_GRACE)),
        )
        .await;
    }
}

/// Starts one server and lists its tools, within its start-up timeout.
async fn start_one(
    server: &PlannedServer,
    launch: &McpLaunch<'_>,
    board: NoticeBoard,
) -> Result<Running, McpError> {
    let spec = &server.spec;
    tracing::info!(server = %spec.name, target = %spec.target(), "MCP server starting");
    match &spec.transport {
        McpTransport::Stdio { command, args, env } => {
            let process = Process { command, args, env };
            start_stdio(server, &process, launch, board).await
        }
        McpTransport::Http { url, headers } => {
            let target = HttpTarget {
                url,
                headers,
                expand_env: server.expand_env,
            };
            start_http(server, &target, launch, board).await
        }
    }
}

/// Connects to an HTTP server the rules admit and lists its tools, within its start-up
/// timeout (the gate and the address checks come first, inside it too).
async fn start_http(
    server: &PlannedServer,
    target: &HttpTarget<'_>,
    launch: &McpLaunch<'_>,
    board: NoticeBoard,
) -> Result<Running, McpError> {
    let spec = &server.spec;
    let starting = async {
        let transport = super::http::transport(target, launch.rules, launch.resolver).await?;
        let connection = Connection::open_http(&spec.name, target.url, transport, board).await?;
        let link = connection.link(&spec.name, spec.call_timeout);
        let listed = link.list_tools().await?;
        Ok::<_, McpError>((connection, link, listed))
    };
    let (connection, link, listed) = tokio::time::timeout(spec.startup_timeout, starting)
        .await
        .map_err(|_| McpError::StartTimeout {
            seconds: spec.startup_timeout.as_secs_f64(),
        })??;
    let tools = pool(&link, spec, listed, launch.rules);
    Ok(Running {
        spec: spec.clone(),
        connection,
        link,
        tools,
        stale: false,
        _limits: None,
    })
}

/// A stdio server's program, arguments and `env` entries.
struct Process<'a> {
    command: &'a str,
    args: &'a [String],
    env: &'a BTreeMap<String, String>,
}

/// Starts a stdio server and lists its tools, within its start-up timeout; a server that
/// exits while starting says so with the end of its stderr.
async fn start_stdio(
    server: &PlannedServer,
    process: &Process<'_>,
    launch: &McpLaunch<'_>,
    board: NoticeBoard,
) -> Result<Running, McpError> {
    let spec = &server.spec;
    let (request, limits) = request(process, server.expand_env, launch)?;
    let child = spawn_service(request)
        .map_err(|err| McpError::Start(format!("cannot start `{}`: {err}", process.command)))?;
    let watch = child.watch();
    let starting = async {
        let connection = Connection::open(&spec.name, child, board).await?;
        let link = connection.link(&spec.name, spec.call_timeout);
        let listed = link.list_tools().await?;
        Ok::<_, McpError>((connection, link, listed))
    };
    let exited = watch.ended();
    let (connection, link, listed) = tokio::select! {
        started = tokio::time::timeout(spec.startup_timeout, starting) => match started {
            Ok(Ok(started)) => started,
            // A broken pipe is how an exiting server usually shows first: say how it ended.
            Ok(Err(err)) => {
                return Err(match tokio::time::timeout(EXIT_NOTICE, watch.ended()).await {
                    Ok(exit) => exited_at_start(exit, &watch),
                    Err(_) => err,
                });
            }
            // The server was dropped with the future: its group is killed.
            Err(_) => {
                return Err(McpError::StartTimeout {
                    seconds: spec.startup_timeout.as_secs_f64(),
                });
            }
        },
        exit = exited => return Err(exited_at_start(exit, &watch)),
    };
    let tools = pool(&link, spec, listed, launch.rules);
    Ok(Running {
        spec: spec.clone(),
        connection,
        link,
        tools,
        stale: false,
        _limits: limits,
    })
}

/// The server's tools less those a whole-tool deny rule names; the first of a name wins when
/// two names meet after normalising.
fn pool(
    link: &Link,
    spec: &McpServerSpec,
    listed: Vec<super::connection::ListedTool>,
    rules: &RuleSet,
) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for listed in listed {
        let tool = McpTool::new(link.clone(), listed, spec.trust_read_only_hint);
        let name = tool.name();
        if rules.whole_tool(RuleKind::Deny, &name).is_some()
            || tools.iter().any(|seen| seen.name() == name)
        {
            continue;
        }
        tools.push(Arc::new(tool));
    }
    tools
}

/// The process request: the entry's command in the workdir, with the run's environment for
/// servers (or the sandbox's) and the entry's `env` (`${NAME}` is tollgate's NAME when
/// `expand_env` — an operator's entry; a repository's text must not pull a secret of the
/// runner's into a process of its choosing).
fn request(
    process: &Process<'_>,
    expand_env: bool,
    launch: &McpLaunch<'_>,
) -> Result<(ServiceRequest, Option<LimitWatch>), McpError> {
    let mut env = launch.env.clone();
    let mut pre_exec: Option<PreExecStep> = None;
    let mut limits = None;
    if let Some(sandbox) = launch.sandbox {
        let confined = sandbox
            .prepare()
            .map_err(|err| McpError::Start(format!("cannot prepare the sandbox: {err}")))?;
        env = ChildEnv::from_vars(confined.env);
        let setup = Arc::new(confined.child);
        pre_exec = Some(Arc::new(move || setup.apply()));
        limits = Some(confined.watch);
    }
    for (name, value) in process.env {
        let value = if expand_env {
            expand(value)?
        } else {
            value.clone()
        };
        env = env.with(name, value);
    }
    let argv: Vec<OsString> = std::iter::once(process.command)
        .chain(process.args.iter().map(String::as_str))
        .map(OsString::from)
        .collect();
    Ok((
        ServiceRequest {
            argv,
            cwd: launch.workdir.to_path_buf(),
            env,
            pre_exec,
        },
        limits,
    ))
}

/// `${NAME}` (the whole value) is tollgate's variable NAME; anything else is literal.
fn expand(value: &str) -> Result<String, McpError> {
    match value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
    {
        Some(name) => {
            std::env::var(name).map_err(|_| McpError::Start(format!("env: ${{{name}}} is not set")))
        }
        None => Ok(value.to_string()),
    }
}

fn exited_at_start(exit: crate::exec::ServiceExit, watch: &crate::exec::ServiceWatch) -> McpError {
    McpError::Start(format!(
        "the server {exit} while starting{}",
        stderr_note(&watch.stderr_tail())
    ))
}

fn stderr_note(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with: {}", lines.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_json_env_values_stay_literal() {
        // SAFETY: a name no other test uses.
        unsafe { std::env::set_var("TOLLGATE_MCP_LITERAL_TEST", "secret") };
        let spec = crate::settings::mcp_servers(
            crate::config::parse(
                "s:\n  command: x\n  env: {A: '${TOLLGATE_MCP_LITERAL_TEST}'}\n",
                Path::new("p.yaml"),
            )
            .unwrap(),
            Path::new("p.yaml"),
        )
        .unwrap()
        .remove(0);
        let rules = RuleSet::default();
        let base = ChildEnv::default();
        let resolver = crate::net::Resolver::default();
        let launch = McpLaunch {
            workdir: Path::new("/"),
            env: &base,
            sandbox: None,
            rules: &rules,
            resolver: &resolver,
        };
        let McpTransport::Stdio { command, args, env } = &spec.transport else {
            panic!("{:?}", spec.transport)
        };
        let process = Process { command, args, env };
        let value = |expand_env| {
            let (request, _) = request(&process, expand_env, &launch).unwrap();
            request.env.get("A").unwrap().to_string_lossy().into_owned()
        };
        assert_eq!(value(true), "secret");
        assert_eq!(value(false), "${TOLLGATE_MCP_LITERAL_TEST}");
    }

    #[test]
    fn env_values_expand_whole_variables_only() {
        // SAFETY: a name no other test uses.
        unsafe { std::env::set_var("TOLLGATE_MCP_EXPAND_TEST", "v") };
        assert_eq!(expand("${TOLLGATE_MCP_EXPAND_TEST}").unwrap(), "v");
        assert_eq!(
            expand("a${TOLLGATE_MCP_EXPAND_TEST}").unwrap(),
            "a${TOLLGATE_MCP_EXPAND_TEST}"
        );
        assert!(
            expand("${TOLLGATE_MCP_EXPAND_UNSET}")
                .unwrap_err()
                .to_string()
                .contains("is not set")
        );
    }
}
