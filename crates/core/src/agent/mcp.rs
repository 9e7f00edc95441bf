//! The run's MCP servers as the loop sees them: whether a failed start ends the run, which
//! servers the model is told it lacks, and their notifications and new tool lists between
//! turns.

use super::{AgentError, Loop, RunSpec};
use crate::mcp::McpHub;
use crate::policy::ToolName;
use crate::tools::{ToolDefinition, tool_definition};
use crate::transcript::Event;

/// Why the run stops before its first model call: `fail_on` has `mcp_start`, and a server
/// that is not `optional` failed to start, or one the task names was not started (held back
/// for an operator's approval, or kept off by the policy) while no server of its name runs.
pub(super) fn mcp_start_failure(run: &Loop<'_>) -> Option<String> {
    if !run.spec.fail_on.contains(crate::task::FailOn::McpStart) {
        return None;
    }
    let failed = run
        .mcp
        .failed()
        .filter(|status| !status.optional)
        .map(|status| {
            format!(
                "{} ({})",
                status.name,
                status.error.as_deref().unwrap_or("no reason given")
            )
        });
    let missing = run
        .spec
        .mcp
        .skipped
        .iter()
        .filter(|skipped| skipped.required())
        .map(|skipped| format!("{} ({})", skipped.name, skipped.reason));
    let stopped: Vec<String> = failed.chain(missing).collect();
    (!stopped.is_empty()).then(|| {
        format!(
            "MCP servers did not start: {}; fail_on has mcp_start",
            stopped.join("; ")
        )
    })
}

/// The servers the model was meant to have and has not, each with why in a few words: every
/// server that failed to start, and each the task names that was not started while no server
/// of its name runs. The model is told, so it does not look for their tools in vain.
pub(super) fn unavailable_servers<'a>(
    spec: &'a RunSpec,
    mcp: &'a McpHub,
) -> Vec<(&'a str, &'static str)> {
    let failed = mcp
        .failed()
        .map(|status| (status.name.as_str(), "it failed to start"));
    let missing = spec
        .mcp
        .skipped
        .iter()
        .filter(|skipped| skipped.missing)
        .map(|skipped| {
            let held = spec
                .mcp
                .held_back
                .iter()
                .any(|held| held.name == skipped.name && held.origin == skipped.origin);
            let why = if held {
                "it is held back until the operator approves it"
            } else {
                "the policy keeps it off"
            };
            (skipped.name.as_str(), why)
        });
    failed.chain(missing).collect()
}

/// The servers' notifications since the last turn, into the transcript; servers whose tool
/// list changed are listed again, so the next request offers what they offer now.
pub(super) async fn refresh_mcp(run: &mut Loop<'_>) -> Result<(), AgentError> {
    for (server, notice) in run.mcp.notices() {
        run.emit(Event::McpNotification { server, notice })?;
    }
    let refreshed = run.mcp.refresh(&run.spec.rules).await;
    for (server, result) in refreshed {
        let covered = ToolName::Mcp {
            server: server.clone(),
            tool: None,
        };
        let deferred: Vec<ToolDefinition> = run
            .mcp
            .tools()
            .filter(|(tool, deferred)| *deferred && covered.covers(&tool.name()))
            .map(|(tool, _)| tool_definition(tool))
            .collect();
        run.ctx.state.deferred.replace(&covered, deferred);
        let (tools, error) = match result {
            Ok(tools) => (tools, None),
            Err(err) => (Vec::new(), Some(err.to_string())),
        };
        run.emit(Event::McpTools {
            server,
            tools,
            error,
        })?;
    }
    Ok(())
}
