//! Where hooks meet the loop: the PreToolUse hooks a call's decision consults (it decides
//! what their ruling may do), PermissionRequest on an ask nobody else answered,
//! PostToolUse after the call, and the moments of the run (`moment`); the loop decides
//! what a moment's ruling does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{AgentError, Loop};
use crate::call::{PreToolUse, PreparedCall};
use crate::exec::{ChildEnv, PreExecStep};
use crate::hooks::{
    EventRuling, HookConfinement, HookEvent, HookInput, HookReport, HookRuling, Moment, run_event,
    run_hooks_in,
};
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

    async fn ruling(&mut self, call: &PreparedCall) -> Result<Option<HookRuling>, AgentError> {
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
            Asked::Nothing,
        )
        .await?;
        Ok(Some(report.ruling))
    }

    async fn permission_request(
        &mut self,
        call: &PreparedCall,
        reason: &str,
    ) -> Result<Option<HookRuling>, AgentError> {
        let name = call.name().to_string();
        if !self
            .run
            .spec
            .hooks
            .iter()
            .any(|hook| hook.spec.applies_to(HookEvent::PermissionRequest, &name))
        {
            return Ok(None);
        }
        let report = hooks(
            self.run,
            HookEvent::PermissionRequest,
            self.id,
            &name,
            call.raw_input(),
            Asked::Because(reason),
        )
        .await?;
        Ok(Some(report.ruling))
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
        Asked::Response(&response),
    )
    .await?;
    match report.ruling {
        HookRuling::Deny { reason } | HookRuling::Ask { reason } => Ok((
            ResultStatus::Error,
            format!("[the result was withheld: {reason}]"),
        )),
        _ => Ok((status, content)),
    }
}

/// What a call's hooks are told beside the call itself.
enum Asked<'v> {
    Nothing,
    /// PostToolUse: the tool's result.
    Response(&'v Value),
    /// PermissionRequest: why the call was asked.
    Because(&'v str),
}

async fn hooks(
    run: &mut Loop<'_>,
    event: HookEvent,
    id: &str,
    name: &str,
    input: &Value,
    asked: Asked<'_>,
) -> Result<HookReport, AgentError> {
    let (response, asked_because) = match asked {
        Asked::Nothing => (None, None),
        Asked::Response(response) => (Some(response), None),
        Asked::Because(reason) => (None, Some(reason)),
    };
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
        asked_because,
    };
    let confined = confinement(run, event, name);
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

/// How the hooks for `event` on `subject` are confined: in the run's sandbox when it
/// confines hooks; outside it, the protected files are put back first, so a hook finds them
/// as the run did.
fn confinement(
    run: &Loop<'_>,
    event: HookEvent,
    subject: &str,
) -> Option<Arc<dyn HookConfinement>> {
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
            .any(|hook| hook.spec.applies_to(event, subject))
    {
        sandbox.restore_protected();
    }
    confined
}

/// The run's hooks for a moment of it rather than a call (SessionStart, Stop, …): run with
/// Claude Code's input (the common fields plus `fields`), recorded, and their ruling. No
/// hook for it: proceed, nothing recorded.
pub(super) async fn moment(
    run: &mut Loop<'_>,
    event: HookEvent,
    subject: &str,
    fields: Value,
) -> Result<EventRuling, AgentError> {
    if !run
        .spec
        .hooks
        .iter()
        .any(|hook| hook.spec.applies_to(event, subject))
    {
        return Ok(EventRuling::Proceed {
            context: Vec::new(),
        });
    }
    let mut input = json!({
        "session_id": run.spec.run_id,
        "transcript_path": run.transcript.path().to_string_lossy(),
        "cwd": run.spec.workspace.workdir.to_string_lossy(),
        "permission_mode": run.spec.mode.to_string(),
        "hook_event_name": event.as_str(),
    });
    if let (Some(input), Value::Object(fields)) = (input.as_object_mut(), fields) {
        input.extend(fields);
    }
    let confined = confinement(run, event, subject);
    let report = run_event(
        &run.spec.hooks,
        Moment {
            event,
            subject,
            input: &input,
        },
        run.spec.workspace.workdir.clone(),
        &trusted_git_env(&run.spec.env.hooks),
        &run.ctx.abort,
        confined,
    )
    .await;
    let ruling = report.ruling.clone();
    run.emit(Event::EventHooks { event, report })?;
    Ok(ruling)
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
        let setup = Arc::new(confined.child);
        let step: PreExecStep = Arc::new(move || setup.apply());
        Ok((trusted_git_env(&sandboxed), step))
    }

    fn after(&self) -> Option<String> {
        let violations = self.0.restore_protected();
        (!violations.is_empty()).then(|| crate::sandbox::describe_violations(&violations))
    }
}
