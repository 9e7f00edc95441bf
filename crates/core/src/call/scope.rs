//! A sub-agent's scope: what an explore sub-agent may not do, whatever the rules, the mode
//! and the hooks say. The first step of a call's decision, and the last for a rewritten one.

use super::PreparedCall;
use crate::policy::{GatedCall, PermissionContext, PermissionDecision};
use crate::tools::SubagentKind;

/// The refusal of a call an explore sub-agent may not make: a tool outside its pool (a
/// forged call), or a call not proven read-only (Bash's analyser decides for a command).
/// The sub-agent is read-only by construction. `replay` applies it again to the calls a
/// transcript records under an explore sub-agent.
pub(super) fn refusal(
    kind: SubagentKind,
    call: &PreparedCall,
    ctx: &PermissionContext,
) -> Option<PermissionDecision> {
    if !kind.read_only() {
        return None;
    }
    let tool = call.name();
    let reason = if !kind.may_use(tool) {
        format!("the {kind} sub-agent has no {tool} tool: it only reads")
    } else if !call.is_read_only(ctx) {
        format!("the {kind} sub-agent only reads, and this {tool} call is not proven read-only")
    } else {
        return None;
    };
    Some(super::refused_at_pool(reason))
}
