//! The answers a call gets before the gate sees it: no tool of that name in the pool, or a
//! line or input that is not a call the tool can take. One wording and one set of grounds
//! (step `pool`, layer `tool`) for the loop and for `check`, so a model told "no such tool"
//! in a run sees what `check` says of the same call.

use crate::policy::{Grounds, Layer, PermissionDecision, Step};

/// A refusal at the pool, for `reason`.
pub fn refused_at_pool(reason: String) -> PermissionDecision {
    PermissionDecision::deny(
        Grounds {
            step: Step::Pool,
            layer: Layer::Tool,
            rule: None,
            reason,
        },
        false,
    )
}

/// No tool named `name`; `more` (what the run offers, how to load a deferred tool) follows
/// the sentence when the caller knows it.
pub fn no_such_tool(name: &str, more: &str) -> PermissionDecision {
    refused_at_pool(format!("No such tool available: {name}{more}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_refusal_names_the_tool_and_what_follows() {
        let decision = no_such_tool("Fly", ". Available tools: Read, Bash");
        assert_eq!(
            decision.reason,
            "No such tool available: Fly. Available tools: Read, Bash"
        );
        assert_eq!(
            (decision.step, decision.layer, decision.rule),
            (Step::Pool, Layer::Tool, None)
        );
        assert!(!decision.asked);
    }
}
