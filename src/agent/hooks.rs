//! Where hooks meet the loop: the PreToolUse hooks a call's decision consults (it decides
//! what their verdict may do), and PostToolUse after the call.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{AgentError, Loop};
use crate::call::{PreToolUse, PreparedCall};
use crate::exec::{ChildEnv, PreExecStep};
use crate::hooks::{HookConfinement, HookEvent, HookInput, HookReport, HookVerdict, run_hooks_in};
use crate::sandbox::Sandbox;
use crate::tools::trusted_git_env;
use crate::transcript::{Event, ResultStatus};

/// The run's PreToolUse hooks for one call; each run of them is recorded.
pub(super) struct PreToolUseHooks<'r, 'a> {
    pub run: &'r mut Loop<'a>,
    pub id: &'r str,
}

impl PreToolUse for PreToolUseHooks<'_, '_> {
    type Error = AgentError;

    async fn verdict(&mut self, call: &PreparedCall) -> Result<Option<HookVerdict>, AgentError> {
        if self.run.spec.hooks.is_empty() {
            return Ok(None);
        }
        let name = call.name().to_string();
        let report = hooks(
            self.run,
            HookEvent::PreToolUse,
            self.id,
            &name,
            call.raw_input(),
            None,
        )
        .await?;
        Ok(Some(report.verdict))
    }
}

/// The call's result after PostToolUse hooks: a deny withholds the output from the model.
pub(super) async fn post_tool_use(
    run: &mut Loop<'_>,
    id: &str,
    call: &PreparedCall,
    status: ResultStatus,
    content: String,
) -> Result<(ResultStatus, String), AgentError> {
    if run.spec.hooks.is_empty() {
        return Ok((status, content));
    }
    let response = json!({"content": content, "is_error": status != ResultStatus::Success});
    let name = call.name().to_string();
    let report = hooks(
        run,
        HookEvent::PostToolUse,
        id,
        &name,
        call.raw_input(),
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
    let sandbox = run.ctx.sandbox.clone();
    let confined = sandbox
        .clone()
        .filter(|sandbox| sandbox.confines_hooks())
        .map(|sandbox| Arc::new(InSandbox(sandbox)) as Arc<dyn HookConfinement>);
    if let Some(sandbox) = sandbox.filter(|sandbox| !sandbox.confines_hooks())
        && run
            .spec
            .hooks
            .iter()
            .any(|hook| hook.spec.applies_to(event, name))
    {
        // A hook outside the sandbox finds the protected files as the run did.
        sandbox.restore_protected();
    }
    let report = run_hooks_in(
        &run.spec.hooks,
        event,
        &hook_input,
        &trusted_git_env(&run.spec.env.hooks),
        &run.ctx.abort,
        confined,
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

/// Hooks in the run's OS sandbox: its environment (with the hook's own variables and git on
/// the trusted side's config), its child step, and the protected files put back after.
pub(super) struct InSandbox(pub(super) Arc<Sandbox>);

impl HookConfinement for InSandbox {
    fn prepare(&self, env: &ChildEnv) -> Result<(ChildEnv, PreExecStep), String> {
        let confined = self.0.prepare().map_err(|err| err.to_string())?;
        let mut sandboxed = ChildEnv::from_vars(confined.env);
        for (name, value) in env.vars() {
            if name
                .to_str()
                .is_some_and(|name| name.starts_with("TOLLGATE_HOOK"))
            {
                sandboxed = sandboxed.with(name, value);
            }
        }
        let step: PreExecStep = Arc::new(confined.child);
        Ok((trusted_git_env(&sandboxed), step))
    }

    fn after(&self) -> Option<String> {
        let violations = self.0.restore_protected();
        (!violations.is_empty()).then(|| crate::sandbox::describe_violations(&violations))
    }
}
