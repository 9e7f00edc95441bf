//! Auto mode in the loop: the classifier in the call decision's seam. An ask that the
//! PreToolUse hooks and the fast path left open is judged here, and the headless contract
//! holds — a judge that keeps saying no ends the run with exit 3, one that cannot be reached
//! with exit 4, never a stall.

use super::{AgentError, Loop};
use crate::base::AbortSignal;
use crate::call::{Classifier as Seam, ClassifierFuture, ClassifierRuling, PreparedCall};
use crate::classifier::{Action, Classifier, Judged, Judgement, ProposedRule, record};
use crate::config::serde_name;
use crate::policy::{Ask, PermissionContext};
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

/// Auto mode's classifier in the decision's seam for one call. The decision holds the
/// loop's hooks while it is made, so what the reviews produced (their model calls, a stop) is
/// kept here and recorded by the loop once the decision is made.
pub(super) struct Judge<'r> {
    auto: &'r mut AutoState,
    intent: &'r str,
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
    pub fn new(
        auto: &'r mut AutoState,
        intent: &'r str,
        limits: &'r Limits,
        abort: AbortSignal,
    ) -> Self {
        Judge {
            auto,
            intent,
            limits,
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

    async fn review(
        &mut self,
        call: &PreparedCall,
        ctx: &PermissionContext<'_>,
    ) -> ClassifierRuling {
        let action = action(call);
        let abort = self.abort.clone();
        // A signal must not wait for the judge: the call is refused and the loop's abort
        // handling ends the run.
        let judged = tokio::select! {
            judged = self.auto.classifier.judge(self.intent, &action) => judged,
            _ = abort.aborted() => {
                return ClassifierRuling::Deny {
                    reason: "the run was interrupted while the classifier was judging the call"
                        .to_string(),
                };
            }
        };
        let model = self.auto.classifier.model().to_string();
        // A denial proposes rules from the analysis the gate read, not a new one.
        let proposal = || call.proposed_rules(ctx);
        let (ruling, stop) = self.auto.settle(
            judged.judgement.clone(),
            &action,
            &model,
            proposal,
            self.limits,
        );
        self.reviews.push(judged);
        // The first stop is the one that ended the run.
        self.stop = self.stop.take().or(stop);
        ruling
    }
}

impl Seam for Judge<'_> {
    fn classify<'a>(
        &'a mut self,
        call: &'a PreparedCall,
        _ask: &'a Ask,
        ctx: &'a PermissionContext<'a>,
    ) -> ClassifierFuture<'a> {
        Box::pin(self.review(call, ctx))
    }
}

fn action(call: &PreparedCall) -> Action {
    Action {
        tool: call.name().to_string(),
        input: call.raw_input().clone(),
    }
}

/// After the decision: the reviews' model calls as `classifier_call` events and in the
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
    /// The classifier's judgement as the call's ruling, its proposals recorded and its
    /// limits counted.
    fn settle(
        &mut self,
        judgement: Judgement,
        action: &Action,
        model: &str,
        proposal: impl FnOnce() -> Vec<String>,
        limits: &Limits,
    ) -> (ClassifierRuling, Option<Stop>) {
        match judgement {
            Judgement::Allow { reason, risk } => {
                self.consecutive_denials = 0;
                let reason = format!(
                    "auto mode: the classifier ({model}) allowed it: {reason} (risk: {})",
                    serde_name(&risk)
                );
                (ClassifierRuling::Allow { reason }, None)
            }
            Judgement::Deny { reason, risk } => {
                self.consecutive_denials += 1;
                self.denials += 1;
                let rules = proposal();
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
                (ClassifierRuling::Deny { reason }, stop)
            }
            Judgement::Unavailable { reason } => (
                ClassifierRuling::Deny {
                    reason: format!(
                        "auto mode: nothing could judge this call, so it is denied: {reason}"
                    ),
                },
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::base::AbortHandle;
    use crate::call::{Answerer, Decider, NoHooks, Resolution};
    use crate::classifier::ClassifierSetup;
    use crate::model::{Pricing, Provider, ScriptedBlock, ScriptedModel, ScriptedTurns};
    use crate::policy::{PermissionMode, Policy, PolicyOrigin, RuleSet, Workspace};
    use crate::settings::AutoModeProse;
    use crate::tools::{BashTool, Tool};

    const DENY: &str = r#"{"decision": "deny", "reason": "not the task", "risk": "high"}"#;

    fn classifier(answers: usize) -> Classifier {
        Classifier::new(ClassifierSetup {
            provider: Provider::Scripted(ScriptedModel::new(ScriptedTurns(
                (0..answers)
                    .map(|_| vec![ScriptedBlock::Text(DENY.to_string())])
                    .collect(),
            ))),
            provider_name: "scripted".into(),
            model: "scripted".into(),
            pricing: Some(Pricing::FREE),
            max_tokens: 100,
            two_stage: false,
            max_cost_usd: None,
            prose: AutoModeProse::default(),
            cache_dir: None,
        })
    }

    fn limits() -> Limits {
        Limits {
            max_turns: 10,
            max_cost_usd: None,
            max_input_tokens: None,
            max_output_tokens: None,
            timeout: None,
            tool_timeout: None,
            max_denials: None,
            max_consecutive_denials: None,
            max_parallel_tools: 4,
            max_classifier_denials: 100,
            max_consecutive_classifier_denials: 100,
            message_result_chars: 200_000,
        }
    }

    /// The loop's classifier, judging a Bash call and proposing rules for its denial, reads
    /// the analysis the gate made: one analysis under the rules per call (scheduling
    /// included), in auto mode as in every other.
    #[tokio::test(flavor = "current_thread")]
    async fn the_classifier_proposes_from_the_gates_analysis() {
        let origin = PolicyOrigin {
            file: std::path::Path::new("p.yaml"),
            dir: std::path::Path::new("/"),
            home: None,
        };
        let policy =
            Policy::parse("permissions:\n  allow: ['Bash(npm test:*)']\n", origin).unwrap();
        let rules = RuleSet::from_policy(&policy);
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path().canonicalize().unwrap(), vec![], None);
        let ctx = PermissionContext {
            disk: None,
            auto_allow_bash: false,
            mode: PermissionMode::Auto,
            rules: &rules,
            workspace: &workspace,
        };
        let commands = [
            "make lint",
            "npm test && curl https://example.com",
            "bash -c 'make; ls'",
        ];
        let mut auto = AutoState::new(classifier(commands.len()));
        let limits = limits();
        let (_handle, abort) = AbortHandle::new();
        for command in commands {
            let before = crate::bash::analyses_on_this_thread();
            let tool: Arc<dyn Tool> = Arc::new(BashTool);
            let call = PreparedCall::prepare(tool, json!({ "command": command })).unwrap();
            let _ = call.scheduling(&ctx);
            let mut judge = Judge::new(&mut auto, "run the tests", &limits, abort.clone());
            let resolution = Decider {
                classifier: Some(&mut judge),
                ..Decider::headless(ctx)
            }
            .decide(call, &mut NoHooks)
            .await;
            let Ok(Resolution::Refused { by, .. }) = resolution else {
                panic!("`{command}`: the classifier denies");
            };
            assert_eq!(by, Answerer::Classifier, "`{command}`");
            assert_eq!(judge.finish().judged.len(), 1);
            assert_eq!(
                crate::bash::analyses_on_this_thread() - before,
                1,
                "analyses of `{command}`"
            );
        }
        let proposed: Vec<&str> = auto.proposals.iter().map(|p| p.rule.as_str()).collect();
        // The command the policy allows needs no rule of its own.
        assert_eq!(
            proposed,
            [
                "Bash(make lint:*)",
                "Bash(curl https://example.com)",
                "Bash(make)",
                "Bash(bash -c 'make; ls')"
            ]
        );
    }
}
