//! Auto mode in the loop: an ask that the gate's fast path and the PreToolUse hooks left
//! refused goes to the classifier, and the headless contract holds — a judge that keeps
//! saying no ends the run with exit 3, one that cannot be reached with exit 4, never a stall.

use serde_json::Value;

use super::{AgentError, Loop};
use crate::classifier::{
    Action, Classifier, Judged, Judgement, ProposedRule, narrowest_rules, record,
};
use crate::config::serde_name;
use crate::policy::{Decision, Layer, PermissionDecision, Workspace, awaits_classifier};
use crate::task::Limits;
use crate::transcript::{Event, Outcome};

/// Why the rest of a batch is not run, and how the run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stop {
    pub outcome: Outcome,
    pub why: String,
}

/// The classifier and what it has done in this run.
pub(super) struct AutoState {
    classifier: Classifier,
    consecutive_denials: u32,
    denials: u32,
    pub proposals: Vec<ProposedRule>,
    /// `None` once a call's price was unknown.
    pub cost_usd: Option<f64>,
}

impl AutoState {
    pub fn new(classifier: Classifier) -> Self {
        AutoState {
            classifier,
            consecutive_denials: 0,
            denials: 0,
            proposals: Vec::new(),
            cost_usd: Some(0.0),
        }
    }
}

/// The decision after the classifier, and a stop when a classifier limit or an unreachable
/// classifier ends the run. Every gated call is remembered as context for later reviews.
pub(super) async fn resolve(
    run: &mut Loop<'_>,
    id: &str,
    tool: &str,
    input: &Value,
    decision: PermissionDecision,
) -> Result<(PermissionDecision, Option<Stop>), AgentError> {
    let mode = run.spec.mode;
    let Some(auto) = run.auto.as_mut() else {
        return Ok((decision, None));
    };
    let action = Action {
        tool: tool.to_string(),
        input: input.clone(),
    };
    if !awaits_classifier(&decision, mode) {
        auto.classifier.remember(action);
        return Ok((decision, None));
    }
    let abort = run.ctx.abort.clone();
    // A signal must not wait for the judge: the call is refused and the loop's abort
    // handling ends the run.
    let judged = tokio::select! {
        judged = auto.classifier.judge(&run.spec.task.prompt, &action) => judged,
        _ = abort.aborted() => {
            let reason = "the run was interrupted while the classifier was judging the call";
            return Ok((
                PermissionDecision {
                    reason: reason.to_string(),
                    layer: Layer::Classifier,
                    ..decision
                },
                None,
            ));
        }
    };
    auto.classifier.remember(action.clone());
    let model = auto.classifier.model().to_string();
    account(run, &judged);
    for call in &judged.calls {
        run.emit(Event::ClassifierCall {
            id: id.to_string(),
            tool: tool.to_string(),
            input: input.clone(),
            call: call.clone(),
        })?;
    }
    let workspace = run.spec.workspace.clone();
    let limits = run.spec.task.limits;
    // Borrowed again: the events above needed the whole loop.
    let Some(auto) = run.auto.as_mut() else {
        return Ok((decision, None));
    };
    Ok(auto.settle(
        judged.judgement,
        decision,
        &action,
        &model,
        &workspace,
        &limits,
    ))
}

impl AutoState {
    /// The classifier's judgement as the call's decision, its proposals recorded and its
    /// limits counted.
    fn settle(
        &mut self,
        judgement: Judgement,
        decision: PermissionDecision,
        action: &Action,
        model: &str,
        workspace: &Workspace,
        limits: &Limits,
    ) -> (PermissionDecision, Option<Stop>) {
        let judged_by = |reason: String, verdict| PermissionDecision {
            decision: verdict,
            layer: Layer::Classifier,
            reason,
            rule: None,
            updated_input: None,
            ..decision.clone()
        };
        match judgement {
            Judgement::Allow { reason, risk } => {
                self.consecutive_denials = 0;
                let reason = format!(
                    "auto mode: the classifier ({model}) allowed it: {reason} (risk: {})",
                    serde_name(&risk)
                );
                (judged_by(reason, Decision::Allow), None)
            }
            Judgement::Deny { reason, risk } => {
                self.consecutive_denials += 1;
                self.denials += 1;
                let rules = narrowest_rules(action, workspace);
                record(&mut self.proposals, &rules, action, &reason);
                let risk = risk.map_or_else(String::new, |risk| {
                    format!(" (risk: {})", serde_name(&risk))
                });
                let reason = format!(
                    "auto mode: the classifier ({model}) denied it: {reason}{risk}. An allow rule that would permit it: {}",
                    rules.join(", ")
                );
                let stop = self.limit_reached(limits).map(|why| Stop {
                    outcome: Outcome::ClassifierDenials,
                    why,
                });
                (judged_by(reason, Decision::Deny), stop)
            }
            Judgement::Unavailable { reason } => (
                judged_by(
                    format!("auto mode: nothing could judge this call, so it is denied: {reason}"),
                    Decision::Deny,
                ),
                Some(Stop {
                    outcome: Outcome::ClassifierUnavailable,
                    why: reason,
                }),
            ),
        }
    }

    fn limit_reached(&self, limits: &Limits) -> Option<String> {
        if self.consecutive_denials >= limits.max_consecutive_classifier_denials {
            Some(format!(
                "stopped after {} classifier denials in a row (limits.max_consecutive_classifier_denials = {})",
                self.consecutive_denials, limits.max_consecutive_classifier_denials
            ))
        } else if self.denials >= limits.max_classifier_denials {
            Some(format!(
                "stopped after {} classifier denials (limits.max_classifier_denials = {})",
                self.denials, limits.max_classifier_denials
            ))
        } else {
            None
        }
    }
}

/// The review's calls, tokens and cost, kept apart from the agent's.
fn account(run: &mut Loop<'_>, judged: &Judged) {
    let counts = &mut run.counts.classifier;
    counts.reviews += 1;
    for call in &judged.calls {
        if call.cache_hit {
            counts.cache_hits += 1;
        } else {
            counts.calls += 1;
        }
    }
    counts.usage.add(&judged.usage());
    match &judged.judgement {
        Judgement::Allow { .. } => counts.allows += 1,
        Judgement::Deny { risk: Some(_), .. } => counts.denies += 1,
        Judgement::Deny { risk: None, .. } | Judgement::Unavailable { .. } => counts.errors += 1,
    }
    if let Some(auto) = run.auto.as_mut() {
        auto.cost_usd = match (auto.cost_usd, judged.cost_usd()) {
            (Some(sum), Some(cost)) => Some(sum + cost),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SourceLocation;
    use crate::policy::{PermissionMode, RuleRef, Step};

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
