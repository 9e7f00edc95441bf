//! What the mode says about an ask, headless: auto's fast path and the final deny. Pure
//! pieces; a call's decision (`call::Decider`) orders them around hooks and the classifier.

use super::decision::{Ask, Grounds, HeadlessAnswer, Layer, PermissionDecision, ToolCheck};
use super::gate::GatedCall;
use super::{PermissionContext, PermissionMode, ToolName};

/// Tools auto mode lets through without a classifier: they only read.
const AUTO_SAFE_TOOLS: [ToolName; 5] = [
    ToolName::Read,
    ToolName::Glob,
    ToolName::Grep,
    ToolName::TodoWrite,
    ToolName::ToolSearch,
];

/// Auto mode's fast path: what acceptEdits would allow, or a tool that only reads. `None`
/// outside auto mode, for an immune ask, or when the call is not on the path.
pub fn fast_path(
    call: &dyn GatedCall,
    ctx: &PermissionContext,
    ask: &Ask,
) -> Option<PermissionDecision> {
    if ctx.mode != PermissionMode::Auto || ask.immune {
        return None;
    }
    let name = call.tool_name();
    let reason = if AUTO_SAFE_TOOLS.contains(name) && call.is_read_only(ctx) {
        format!("auto mode fast path: {name} only reads")
    } else {
        let as_accept_edits = PermissionContext {
            auto_allow_bash: false,
            mode: PermissionMode::AcceptEdits,
            ..*ctx
        };
        match call.check_permissions(&as_accept_edits) {
            ToolCheck::Allow { .. } => "auto mode fast path: acceptEdits would allow it".into(),
            _ => return None,
        }
    };
    let grounds = Grounds {
        layer: Layer::Mode,
        reason,
        ..ask.grounds.clone()
    };
    Some(PermissionDecision::allow(grounds, None, true))
}

/// The last word on an ask nobody answered: headless, nobody can, so it is a deny that says
/// which mode made it.
pub fn headless_deny(ctx: &PermissionContext, ask: Ask) -> PermissionDecision {
    let Ask { grounds, immune } = ask;
    let reason = &grounds.reason;
    let reason = match ctx.mode {
        PermissionMode::DontAsk => format!("{reason}; dontAsk mode turns every ask into a deny"),
        PermissionMode::Auto if !immune => format!(
            "{reason}; auto mode: not on the fast path, so the classifier judges it (denied when none is configured or it cannot answer)"
        ),
        mode => format!("{reason}; nobody is present to approve it in a headless {mode}-mode run"),
    };
    PermissionDecision::deny(Grounds { reason, ..grounds }, true)
}

/// The last word on an ask only a person could answer: parked for one when the run
/// (`--defer-asks`) or the `defer:` rule that asked says so, else [`headless_deny`]. A
/// parked call is never allowed here: a person answers it later, and only that answer runs it.
pub fn headless_answer(
    ctx: &PermissionContext,
    ask: Ask,
    run_setting: HeadlessAnswer,
) -> PermissionDecision {
    let by_rule = ask
        .grounds
        .rule
        .as_ref()
        .is_some_and(|rule| rule.headless == HeadlessAnswer::Defer);
    if run_setting == HeadlessAnswer::Defer || by_rule {
        let grounds = ask.grounds;
        let reason = format!(
            "{}; parked for a person's approval (`tollgate approve`, then `tollgate run --resume`)",
            grounds.reason
        );
        return PermissionDecision::defer(Grounds { reason, ..grounds });
    }
    headless_deny(ctx, ask)
}
