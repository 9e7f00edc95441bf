//! What the mode says about an ask, headless: auto's fast path and the final deny. Pure
//! pieces; the approval stage (`call::approval`) orders them around hooks and the classifier.

use super::decision::{Ask, Decision, Grounds, Layer, PermissionDecision, Step, ToolCheck};
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
    let reason = if AUTO_SAFE_TOOLS.contains(name) && call.is_read_only() {
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

/// A decision that is an ask only the mode refused (steps 1c and 3, no rule, guardrail or
/// interaction behind it): what the classifier would be asked about. `check --mode auto` reads
/// its route from the headless decision with this; the approval stage asks the ask itself.
pub fn awaits_classifier(decision: &PermissionDecision, mode: PermissionMode) -> bool {
    mode == PermissionMode::Auto
        && decision.decision == Decision::Deny
        && decision.asked
        && decision.layer == Layer::Mode
        && matches!(decision.step, Step::ToolCheck | Step::Passthrough)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SourceLocation;
    use crate::policy::RuleRef;

    fn decision(step: Step, layer: Layer, asked: bool) -> PermissionDecision {
        PermissionDecision {
            decision: Decision::Deny,
            step,
            layer,
            rule: None,
            reason: "r".into(),
            updated_input: None,
            asked,
        }
    }

    #[test]
    fn only_asks_the_mode_alone_refused_reach_the_classifier() {
        let auto = PermissionMode::Auto;
        assert!(awaits_classifier(
            &decision(Step::Passthrough, Layer::Mode, true),
            auto
        ));
        assert!(awaits_classifier(
            &decision(Step::ToolCheck, Layer::Mode, true),
            auto
        ));
        let cases = [
            (
                decision(Step::Passthrough, Layer::Mode, true),
                PermissionMode::DontAsk,
            ),
            (decision(Step::ToolDeny, Layer::Tool, false), auto),
            (decision(Step::WholeToolDeny, Layer::Rule, false), auto),
            (decision(Step::Guardrail, Layer::Guardrail, true), auto),
            (decision(Step::ContentAsk, Layer::Rule, true), auto),
            (
                decision(Step::RequiresInteraction, Layer::Interaction, true),
                auto,
            ),
            (decision(Step::Passthrough, Layer::Hook, true), auto),
            (decision(Step::Passthrough, Layer::Mode, false), auto),
        ];
        for (decision, mode) in cases {
            assert!(!awaits_classifier(&decision, mode), "{decision:?} {mode}");
        }
        let mut with_rule = decision(Step::ToolCheck, Layer::Mode, true);
        with_rule.decision = Decision::Allow;
        with_rule.rule = Some(RuleRef {
            rule: "Edit".into(),
            source: SourceLocation {
                file: "p".into(),
                line: 1,
            },
        });
        assert!(
            !awaits_classifier(&with_rule, auto),
            "an allow is not an ask"
        );
    }
}
