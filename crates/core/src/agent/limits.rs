//! The run's refusal and turn limits, as the loop checks them: a model that keeps hitting
//! the gate is going nowhere, and every further turn only burns budget.

use super::Loop;
use super::auto;
use crate::transcript::Outcome;

pub(super) fn run_turns_used_up(max_turns: u32) -> String {
    format!("stopped after max_turns = {max_turns} (the run's model turns, sub-agents' included)")
}

/// Whether the run's refusals have reached a limit: a model that keeps hitting the gate is
/// going nowhere, and every further turn only burns budget.
pub(super) fn denial_limit(run: &Loop<'_>) -> Option<auto::Stop> {
    denial_limit_reason(run).map(|why| auto::Stop {
        outcome: Outcome::DenialLimit,
        why,
    })
}

fn denial_limit_reason(run: &Loop<'_>) -> Option<String> {
    let limits = &run.spec.limits;
    if let Some(max) = limits.max_denials.filter(|max| run.counts.denials >= *max) {
        return Some(format!(
            "stopped after {} refused calls (limits.max_denials = {max})",
            run.counts.denials
        ));
    }
    if let Some(max) = limits
        .max_consecutive_denials
        .filter(|max| run.consecutive_denials >= *max)
    {
        return Some(format!(
            "stopped after {} refused calls in a row (limits.max_consecutive_denials = {max})",
            run.consecutive_denials
        ));
    }
    None
}

/// The defaults of the denial limits the task left unset, checked before a request: a model
/// that keeps retrying refused calls stops here, while one response's batch of refused calls
/// was answered whole.
pub(super) fn default_denial_limit(run: &Loop<'_>) -> Option<String> {
    let limits = &run.spec.limits;
    if limits.max_denials.is_none() && run.counts.denials >= crate::task::DEFAULT_MAX_DENIALS {
        return Some(format!(
            "stopped after {} refused calls (limits.max_denials defaults to {})",
            run.counts.denials,
            crate::task::DEFAULT_MAX_DENIALS
        ));
    }
    if limits.max_consecutive_denials.is_none()
        && run.consecutive_denials >= crate::task::DEFAULT_MAX_CONSECUTIVE_DENIALS
    {
        return Some(format!(
            "stopped after {} refused calls in a row (limits.max_consecutive_denials defaults to {})",
            run.consecutive_denials,
            crate::task::DEFAULT_MAX_CONSECUTIVE_DENIALS
        ));
    }
    None
}
