//! The approval stage: the gate's answer becomes the final decision here, and only here.
//! An ask is resolved in one order — a PreToolUse hook, auto's fast path, the classifier,
//! then the headless deny — and a hook that rewrites the input sends it through the gate again.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::PreparedCall;
use crate::hooks::HookVerdict;
use crate::policy::{
    self, Ask, GateDecision, GatedCall, Grounds, Layer, PermissionContext, PermissionDecision,
    PermissionMode, TraceStep, fast_path, headless_deny,
};

/// Where PreToolUse hooks plug in: the loop runs them and records their runs.
pub trait PreToolUse {
    type Error;
    /// The hooks' verdict on the call; `None` when no hook is configured.
    fn verdict(
        &mut self,
        call: &PreparedCall,
    ) -> impl Future<Output = Result<Option<HookVerdict>, Self::Error>>;
}

/// What a classifier says about an ask auto mode's fast path left open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassifierAnswer {
    Allow {
        reason: String,
    },
    Deny {
        reason: String,
    },
    /// No answer (it could not decide, or failed): the ask goes on to the headless deny.
    Abstain,
}

pub type ClassifierFuture<'a> = Pin<Box<dyn Future<Output = ClassifierAnswer> + Send + 'a>>;

/// Auto mode's classifier: asked only about a non-immune ask that neither a hook nor the fast
/// path answered. `&mut self`: a classifier keeps state across reviews (its cache, the calls
/// it has seen, its denial counts), and what a review produced beside the answer (its model
/// calls, a stop of the run) stays with the implementation for its owner to record.
pub trait Classifier: Send {
    fn classify<'a>(&'a mut self, call: &'a PreparedCall, ask: &'a Ask) -> ClassifierFuture<'a>;
}

/// The final decision, and the call to run when a hook rewrote the input into an allowed one.
pub struct Approval {
    pub decision: PermissionDecision,
    pub rewritten: Option<PreparedCall>,
}

/// Resolves gate decisions for one run.
pub struct Approver<'a> {
    pub ctx: PermissionContext<'a>,
    pub classifier: Option<&'a mut dyn Classifier>,
}

impl Approver<'_> {
    /// The gate's decision on `call` with the hooks' verdict, the fast path and the classifier
    /// folded in. A deny by the gate is final: no hook is asked about it.
    pub async fn approve<H: PreToolUse>(
        &mut self,
        call: &PreparedCall,
        gated: GateDecision,
        hooks: &mut H,
    ) -> Result<Approval, H::Error> {
        if let GateDecision::Deny(grounds) = gated {
            return Ok(Approval {
                decision: PermissionDecision::deny(grounds, false),
                rewritten: None,
            });
        }
        let verdict = hooks.verdict(call).await?;
        let mut decision = self.resolve(call, gated, verdict.as_ref()).await;
        let Some(rewritten) = decision
            .updated_input
            .take()
            .filter(|_| decision.is_allow())
        else {
            return Ok(Approval {
                decision,
                rewritten: None,
            });
        };
        Ok(self
            .recheck(call, decision, rewritten, verdict.as_ref())
            .await)
    }

    /// A rewritten input is prepared and gated like a new call, so a hook can never rewrite a
    /// call past a rule; the hook's allow (without the rewrite) still counts.
    async fn recheck(
        &mut self,
        call: &PreparedCall,
        decision: PermissionDecision,
        rewritten: Value,
        verdict: Option<&HookVerdict>,
    ) -> Approval {
        let name = call.name();
        let refused = |decision: PermissionDecision, reason: String| Approval {
            decision: PermissionDecision {
                decision: policy::Decision::Deny,
                layer: Layer::Hook,
                reason,
                updated_input: None,
                ..decision
            },
            rewritten: None,
        };
        let prepared = match PreparedCall::prepare(call.tool().clone(), rewritten) {
            Ok(prepared) => prepared,
            Err(err) => {
                let reason =
                    format!("a PreToolUse hook rewrote the input into one {name} rejects: {err}");
                return refused(decision, reason);
            }
        };
        let kept = match verdict {
            Some(HookVerdict::Allow { reason, .. }) => HookVerdict::Allow {
                reason: reason.clone(),
                updated_input: None,
            },
            _ => HookVerdict::NoOpinion {
                updated_input: None,
            },
        };
        let gated = policy::decide(&prepared, &self.ctx);
        let recheck = match gated {
            GateDecision::Deny(grounds) => PermissionDecision::deny(grounds, false),
            gated => self.resolve(&prepared, gated, Some(&kept)).await,
        };
        if recheck.is_allow() {
            return Approval {
                decision,
                rewritten: Some(prepared),
            };
        }
        let reason = format!(
            "the input a PreToolUse hook rewrote is refused: {}",
            recheck.reason
        );
        Approval {
            decision: PermissionDecision { reason, ..recheck },
            rewritten: None,
        }
    }

    /// Allow or ask, with the hooks' verdict: the one place an ask is answered.
    async fn resolve(
        &mut self,
        call: &PreparedCall,
        gated: GateDecision,
        verdict: Option<&HookVerdict>,
    ) -> PermissionDecision {
        let ask = match gated {
            GateDecision::Deny(grounds) => return PermissionDecision::deny(grounds, false),
            GateDecision::Allow {
                grounds,
                updated_input,
            } => return hook_on_allow(grounds, updated_input, verdict),
            GateDecision::Ask(ask) => ask,
        };
        let ask = match hook_on_ask(ask, verdict) {
            Ok(answered) => return answered,
            Err(open) => open,
        };
        // A hook that took no position may still have rewritten the input.
        let carried = match verdict {
            Some(HookVerdict::NoOpinion { updated_input }) => updated_input.clone(),
            _ => None,
        };
        if let Some(allowed) = fast_path(call, &self.ctx, &ask) {
            return PermissionDecision {
                updated_input: carried,
                ..allowed
            };
        }
        let classifier = self
            .classifier
            .as_deref_mut()
            .filter(|_| classifiable(&self.ctx, &ask));
        if let Some(classifier) = classifier {
            match classifier.classify(call, &ask).await {
                ClassifierAnswer::Allow { reason } => {
                    let grounds = Grounds {
                        layer: Layer::Classifier,
                        reason,
                        ..ask.grounds
                    };
                    return PermissionDecision::allow(grounds, carried, true);
                }
                ClassifierAnswer::Deny { reason } => {
                    let grounds = Grounds {
                        layer: Layer::Classifier,
                        reason,
                        ..ask.grounds
                    };
                    return PermissionDecision::deny(grounds, true);
                }
                ClassifierAnswer::Abstain => {}
            }
        }
        headless_deny(&self.ctx, ask)
    }
}

/// The classifier answers only auto mode's asks, and never an immune one.
fn classifiable(ctx: &PermissionContext, ask: &Ask) -> bool {
    ctx.mode == PermissionMode::Auto && !ask.immune
}

/// A hook can always stop an allowed call, or ask (which headless means deny); otherwise the
/// allow stands, with the input a hook rewrote.
fn hook_on_allow(
    grounds: Grounds,
    updated_input: Option<Value>,
    verdict: Option<&HookVerdict>,
) -> PermissionDecision {
    match verdict {
        Some(HookVerdict::Deny { reason }) => PermissionDecision::deny(
            Grounds {
                layer: Layer::Hook,
                reason: reason.clone(),
                ..grounds
            },
            false,
        ),
        Some(HookVerdict::Ask { reason }) => nobody_answers_hook(grounds, reason),
        Some(
            HookVerdict::Allow {
                updated_input: rewritten,
                ..
            }
            | HookVerdict::NoOpinion {
                updated_input: rewritten,
            },
        ) => PermissionDecision::allow(grounds, rewritten.clone().or(updated_input), false),
        None => PermissionDecision::allow(grounds, updated_input, false),
    }
}

/// A hook's answer to an ask. It can always deny; it can allow (or ask, which headless means
/// deny) only an ask that was not immune — never past an ask rule, an interaction requirement
/// or a guardrail. `Err` gives the ask back, still open.
fn hook_on_ask(ask: Ask, verdict: Option<&HookVerdict>) -> Result<PermissionDecision, Ask> {
    match verdict {
        Some(HookVerdict::Deny { reason }) => Ok(PermissionDecision::deny(
            Grounds {
                layer: Layer::Hook,
                reason: reason.clone(),
                ..ask.grounds
            },
            false,
        )),
        Some(HookVerdict::Ask { reason }) if !ask.immune => {
            Ok(nobody_answers_hook(ask.grounds, reason))
        }
        Some(HookVerdict::Allow {
            reason,
            updated_input,
        }) if !ask.immune => {
            let grounds = Grounds {
                layer: Layer::Hook,
                reason: reason
                    .clone()
                    .unwrap_or_else(|| "allowed by a PreToolUse hook".into()),
                ..ask.grounds
            };
            Ok(PermissionDecision::allow(
                grounds,
                updated_input.clone(),
                true,
            ))
        }
        _ => Err(ask),
    }
}

fn nobody_answers_hook(grounds: Grounds, reason: &str) -> PermissionDecision {
    let grounds = Grounds {
        layer: Layer::Hook,
        reason: format!("{reason}; nobody is present to approve it in a headless run"),
        ..grounds
    };
    PermissionDecision::deny(grounds, true)
}

/// The decision with the policy alone — no hook, no classifier — as `check` and `replay`
/// give it. With `trace`, the mode's answer to an ask is noted as `check --explain` shows it.
pub fn headless(
    call: &dyn GatedCall,
    gated: GateDecision,
    ctx: &PermissionContext,
    trace: Option<&mut Vec<TraceStep>>,
) -> PermissionDecision {
    let ask = match gated {
        GateDecision::Allow {
            grounds,
            updated_input,
        } => return PermissionDecision::allow(grounds, updated_input, false),
        GateDecision::Deny(grounds) => return PermissionDecision::deny(grounds, false),
        GateDecision::Ask(ask) => ask,
    };
    let decision = fast_path(call, ctx, &ask).unwrap_or_else(|| headless_deny(ctx, ask));
    if let Some(lines) = trace {
        lines.push(TraceStep {
            step: "mode",
            saw: format!("the ask goes to the {} mode", ctx.mode),
            outcome: if decision.is_allow() { "allow" } else { "deny" }.to_string(),
        });
    }
    decision
}
