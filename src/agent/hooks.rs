//! Where hooks meet the loop: PreToolUse answers after the gate's rules (a hook can stop any
//! call, and allow only what the mode alone refused), PostToolUse after the call.

use serde_json::{Value, json};

use super::{AgentError, Loop};
use crate::hooks::{HookEvent, HookInput, HookReport, HookVerdict, run_hooks};
use crate::policy::{self, PermissionContext, PermissionDecision};
use crate::tools::Tool;
use crate::transcript::{Event, ResultStatus};

/// The gate's decision with the PreToolUse hooks folded in, and the input the call will
/// run with. A rewritten input goes through validation and the gate again, so a hook can
/// never rewrite a call past a rule.
pub(super) async fn pre_tool_use(
    run: &mut Loop<'_>,
    id: &str,
    tool: &dyn Tool,
    input: Value,
    decision: PermissionDecision,
) -> Result<(PermissionDecision, Value), AgentError> {
    let refused_by_rules = !decision.is_allow() && !decision.asked;
    if run.spec.hooks.is_empty() || refused_by_rules {
        return Ok((decision, input));
    }
    let name = tool.name().to_string();
    let report = hooks(run, HookEvent::PreToolUse, id, &name, &input, None).await?;
    let mut decision = policy::apply_hook_verdict(decision, &report.verdict);
    let Some(rewritten) = decision
        .updated_input
        .take()
        .filter(|_| decision.is_allow())
    else {
        return Ok((decision, input));
    };
    if let Err(err) = tool.validate_input(&rewritten) {
        let reason = format!("a PreToolUse hook rewrote the input into one {name} rejects: {err}");
        return Ok((refusal(decision, reason), input));
    }
    let ctx = PermissionContext {
        auto_allow_bash: run
            .ctx
            .sandbox
            .as_ref()
            .is_some_and(|s| s.auto_allow_bash()),
        mode: run.spec.mode,
        rules: &run.spec.rules,
        workspace: &run.spec.workspace,
    };
    let kept_verdict = match &report.verdict {
        HookVerdict::Allow { reason, .. } => HookVerdict::Allow {
            reason: reason.clone(),
            updated_input: None,
        },
        _ => HookVerdict::NoOpinion {
            updated_input: None,
        },
    };
    let recheck = policy::apply_hook_verdict(policy::decide(tool, &rewritten, &ctx), &kept_verdict);
    if recheck.is_allow() {
        Ok((decision, rewritten))
    } else {
        let reason = format!(
            "the input a PreToolUse hook rewrote is refused: {}",
            recheck.reason
        );
        Ok((PermissionDecision { reason, ..recheck }, input))
    }
}

/// The call's result after PostToolUse hooks: a deny withholds the output from the model.
pub(super) async fn post_tool_use(
    run: &mut Loop<'_>,
    id: &str,
    name: &str,
    input: &Value,
    status: ResultStatus,
    content: String,
) -> Result<(ResultStatus, String), AgentError> {
    if run.spec.hooks.is_empty() {
        return Ok((status, content));
    }
    let response = json!({"content": content, "is_error": status != ResultStatus::Success});
    let report = hooks(
        run,
        HookEvent::PostToolUse,
        id,
        name,
        input,
        Some(&response),
    )
    .await?;
    match report.verdict {
        HookVerdict::Deny { reason } | HookVerdict::Ask { reason } => Ok((
            ResultStatus::Error,
            format!("[the result was withheld: {reason}]"),
        )),
        _ => Ok((status, content)),
    }
}

async fn hooks(
    run: &mut Loop<'_>,
    event: HookEvent,
    id: &str,
    name: &str,
    input: &Value,
    response: Option<&Value>,
) -> Result<HookReport, AgentError> {
    let mode = run.spec.mode.to_string();
    let hook_input = HookInput {
        session_id: &run.spec.run_id,
        transcript_path: run.transcript.path(),
        cwd: &run.spec.workspace.workdir,
        permission_mode: &mode,
        tool_name: name,
        tool_input: input,
        tool_use_id: id,
        tool_response: response,
    };
    let report = run_hooks(
        &run.spec.hooks,
        event,
        &hook_input,
        &run.spec.env.hooks,
        &run.ctx.abort,
    )
    .await;
    if !report.runs.is_empty() {
        run.emit(Event::HookRun {
            id: id.to_string(),
            tool: name.to_string(),
            event,
            report: report.clone(),
        })?;
    }
    Ok(report)
}

fn refusal(decision: PermissionDecision, reason: String) -> PermissionDecision {
    PermissionDecision {
        decision: policy::Decision::Deny,
        layer: policy::Layer::Hook,
        reason,
        updated_input: None,
        ..decision
    }
}
