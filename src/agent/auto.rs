//! Auto mode in the loop: the classifier in the approval stage's seam. An ask that the
//! PreToolUse hooks and the fast path left open is judged here, and the headless contract
//! holds — a judge that keeps saying no ends the run with exit 3, one that cannot be reached
//! with exit 4, never a stall.

use super::{AgentError, Loop, RunSpec};
use crate::base::AbortSignal;
use crate::call::PreparedCall;
use crate::call::approval::{Classifier as Seam, ClassifierAnswer, ClassifierFuture};
use crate::classifier::{
    Action, Classifier, Judged, Judgement, ProposedRule, narrowest_rules, record,
};
use crate::config::serde_name;
use crate::policy::{Ask, Decision, Layer, PermissionDecision, Workspace};
use crate::task::Limits;
use crate::transcript::{Event, Outcome};

/// Why the rest of a turn's calls are not run, and how the run ends.
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

/// Auto mode's classifier in the approval stage's seam for one call. The approval stage
/// holds the loop's hooks while it decides, so what the reviews produced (their model calls,
/// a stop) is kept here and recorded by the loop once the decision is made.
pub(super) struct Judge<'r> {
    auto: &'r mut AutoState,
    intent: &'r str,
    workspace: &'r Workspace,
    limits: &'r Limits,
    abort: AbortSignal,
    /// Every review of this call: a hook's rewritten input is judged again.
    reviews: Vec<Judged>,
    stop: Option<Stop>,
}

/// What a call's reviews left for the loop to record.
#[derive(Default)]
pub(super) struct Reviews {
    judged: Vec<Judged>,
    pub stop: Option<Stop>,
}

impl<'r> Judge<'r> {
    pub fn new(auto: &'r mut AutoState, spec: &'r RunSpec, abort: AbortSignal) -> Self {
        Judge {
            auto,
            intent: &spec.prompt,
            workspace: &spec.workspace,
            limits: &spec.limits,
            abort,
            reviews: Vec::new(),
            stop: None,
        }
    }

    pub fn finish(self) -> Reviews {
        Reviews {
            judged: self.reviews,
            stop: self.stop,
        }
    }

    async fn review(&mut self, call: &PreparedCall, ask: &Ask) -> ClassifierAnswer {
        let action = action(call);
        // The mode's refusal: what the classifier's judgement replaces.
        let refused = PermissionDecision::deny(ask.grounds.clone(), true);
        let abort = self.abort.clone();
        // A signal must not wait for the judge: the call is refused and the loop's abort
        // handling ends the run.
        let judged = tokio::select! {
            judged = self.auto.classifier.judge(self.intent, &action) => judged,
            _ = abort.aborted() => {
                return ClassifierAnswer::Deny {
                    reason: "the run was interrupted while the classifier was judging the call"
                        .to_string(),
                };
            }
        };
        let model = self.auto.classifier.model().to_string();
        let (decision, stop) = self.auto.settle(
            judged.judgement.clone(),
            refused,
            &action,
            &model,
            self.workspace,
            self.limits,
        );
        self.reviews.push(judged);
        // The first stop is the one that ended the run.
        self.stop = self.stop.take().or(stop);
        match decision.decision {
            Decision::Allow => ClassifierAnswer::Allow {
                reason: decision.reason,
            },
            // settle never asks; anything but an allow is a deny.
            Decision::Deny | Decision::Ask => ClassifierAnswer::Deny {
                reason: decision.reason,
            },
        }
    }
}

impl Seam for Judge<'_> {
    fn classify<'a>(&'a mut self, call: &'a PreparedCall, ask: &'a Ask) -> ClassifierFuture<'a> {
        Box::pin(self.review(call, ask))
    }
}

fn action(call: &PreparedCall) -> Action {
    Action {
        tool: call.name().to_string(),
        input: call.raw_input().clone(),
    }
}

/// After the approval stage: the reviews' model calls as `classifier_call` events and in the
/// counts, and the call — whatever decided it — remembered as context for later reviews.
pub(super) fn record_reviews(
    run: &mut Loop<'_>,
    id: &str,
    call: &PreparedCall,
    reviews: &Reviews,
) -> Result<(), AgentError> {
    for judged in &reviews.judged {
        account(run, judged);
        for review_call in &judged.calls {
            run.emit(Event::ClassifierCall {
                id: id.to_string(),
                tool: call.name().to_string(),
                input: call.raw_input().clone(),
                call: review_call.clone(),
            })?;
        }
    }
    if let Some(auto) = run.auto.as_mut() {
        auto.classifier.remember(action(call));
    }
    Ok(())
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
            if !call.usage_source.is_reported() {
                counts.estimated_calls += 1;
            }
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
