//! The one place a call's decision is made: an explore sub-agent's scope, the gate, then an
//! ask resolved in one order — a PreToolUse hook, auto's fast path, the classifier, the
//! headless deny. A hook that rewrites the input sends it through again. The loop, `check`,
//! `replay`, `batch` and the policy self-tests all call [`Decider::decide`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use serde_json::Value;

use super::resolution::{Answerer, Awaited, Resolution};
use super::{PreparedCall, scope};
use crate::hooks::HookRuling;
use crate::policy::{
    self, AllowBasis, Ask, Decision, GateDecision, Grounds, HeadlessAnswer, Layer,
    PermissionContext, PermissionDecision, PermissionMode, TraceStep, fast_path, headless_answer,
    headless_deny,
};
use crate::tools::SubagentKind;

/// Where PreToolUse hooks plug in: the loop runs them and records their runs.
pub trait PreToolUse {
    type Error;
    /// The hooks' ruling on the call; `None` when no hook is configured.
    fn ruling(
        &mut self,
        call: &PreparedCall,
    ) -> impl Future<Output = Result<Option<HookRuling>, Self::Error>>;

    /// PermissionRequest hooks' ruling on an ask only a person could have answered (where
    /// Claude Code shows its dialog), told why it was asked; `None` when none is configured.
    fn permission_request(
        &mut self,
        call: &PreparedCall,
        reason: &str,
    ) -> impl Future<Output = Result<Option<HookRuling>, Self::Error>> {
        let _ = (call, reason);
        std::future::ready(Ok(None))
    }
}

/// No hook: the policy alone, as `check`, `replay`, `batch` and the self-tests decide.
pub struct NoHooks;

impl PreToolUse for NoHooks {
    type Error = std::convert::Infallible;

    async fn ruling(&mut self, _call: &PreparedCall) -> Result<Option<HookRuling>, Self::Error> {
        Ok(None)
    }
}

/// What auto mode's classifier says about an ask: its ruling and the reason recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassifierRuling {
    Allow { reason: String },
    Deny { reason: String },
}

pub type ClassifierFuture<'a> = Pin<Box<dyn Future<Output = ClassifierRuling> + Send + 'a>>;

/// Auto mode's classifier: asked only about a non-immune ask that neither a hook nor the fast
/// path answered, and it always answers (one that cannot judge denies). `&mut self`: a
/// classifier keeps state across reviews (its cache, the calls it has seen, its denial
/// counts), and what a review produced beside the ruling (its model calls, a stop of the
/// run) stays with the implementation for its owner to record. `ctx` is the decision's, so
/// a proposal reads the analysis the gate made.
pub trait Classifier: Send {
    fn classify<'a>(
        &'a mut self,
        call: &'a PreparedCall,
        ask: &'a Ask,
        ctx: &'a PermissionContext<'a>,
    ) -> ClassifierFuture<'a>;
}

/// Decides calls for one run (or one `check`, `replay`, batch push or self-test).
pub struct Decider<'a> {
    pub ctx: PermissionContext<'a>,
    /// The sub-agent whose call it is; `None` for the run's own conversation.
    pub scope: Option<SubagentKind>,
    pub classifier: Option<&'a mut dyn Classifier>,
    /// `check --explain`: every step taken, with the tool's own details.
    pub trace: Option<&'a mut Vec<TraceStep>>,
    /// What an ask only a person could answer becomes: refused, or parked for one. A
    /// `defer:` rule parks its own asks whatever this says. A sub-agent's call is never
    /// parked, whatever this or a rule says (see `settle`).
    pub headless: HeadlessAnswer,
}

/// A decision on its way to a `Resolution`: who answered and what is recorded.
struct Answer {
    by: Answerer,
    decision: PermissionDecision,
}

impl<'a> Decider<'a> {
    /// The policy alone: no sub-agent scope, hook, classifier or trace.
    pub fn headless(ctx: PermissionContext<'a>) -> Decider<'a> {
        Decider {
            ctx,
            scope: None,
            classifier: None,
            trace: None,
            headless: HeadlessAnswer::Deny,
        }
    }

    /// The decision on `call`. A refusal by the scope or the gate is final: no hook is
    /// asked about it.
    pub async fn decide<H: PreToolUse>(
        &mut self,
        call: PreparedCall,
        hooks: &mut H,
    ) -> Result<Resolution, H::Error> {
        if let Some(refused) = self.out_of_scope(&call) {
            return Ok(refused.refuse(Some(call)));
        }
        let gated = self.gate(&call);
        if let GateDecision::Deny(grounds) = gated {
            return Ok(gate_deny(grounds).refuse(Some(call)));
        }
        let immune = matches!(&gated, GateDecision::Ask(ask) if ask.immune);
        let ruling = hooks.ruling(&call).await?;
        let mut answer = self.resolve(&call, gated, ruling.as_ref()).await;
        // dontAsk asks nobody, so there is no request to answer.
        if matches!(answer.by, Answerer::Mode(Awaited::Person))
            && self.ctx.mode != PermissionMode::DontAsk
            && let Some(request) = hooks
                .permission_request(&call, &answer.decision.reason)
                .await?
        {
            answer = permission_request(answer, request, immune);
        }
        let Some(rewritten) = answer
            .decision
            .updated_input
            .take()
            .filter(|_| answer.decision.is_allow())
        else {
            return Ok(self.settle(answer, call));
        };
        Ok(self.recheck(call, answer, rewritten, ruling.as_ref()).await)
    }

    /// [`Decider::decide`] without hooks, for the callers that have none: its future never
    /// waits then, so it is run here to completion on this thread.
    pub fn decide_now(&mut self, call: PreparedCall) -> Resolution {
        match block_on(self.decide(call, &mut NoHooks)) {
            Ok(resolution) => resolution,
            Err(never) => match never {},
        }
    }

    fn out_of_scope(&self, call: &PreparedCall) -> Option<Answer> {
        let decision = scope::refusal(self.scope?, call, &self.ctx)?;
        Some(Answer {
            by: Answerer::Scope,
            decision,
        })
    }

    /// The gate's answer; with a trace, each step and the tool's own details under 1c.
    fn gate(&mut self, call: &PreparedCall) -> GateDecision {
        let Some(trace) = self.trace.as_deref_mut() else {
            return policy::decide(call, &self.ctx);
        };
        let (gated, steps) = policy::explain(call, &self.ctx);
        let start = trace.len();
        trace.extend(steps);
        if let Some(index) = trace[start..].iter().position(|step| step.step == "1c") {
            let details = call.explain_permissions(&self.ctx);
            let at = start + index + 1;
            trace.splice(
                at..at,
                details.into_iter().map(|detail| TraceStep {
                    step: "",
                    saw: detail,
                    outcome: String::new(),
                }),
            );
        }
        gated
    }

    /// An allowed answer becomes the call to run (with what the allow rests on), unless the
    /// call it runs is outside the sub-agent's scope.
    fn settle(&self, answer: Answer, run: PreparedCall) -> Resolution {
        // A hook's `defer` or a `defer:` rule inside a sub-agent: its conversation cannot
        // stop and wait for a person, so the call is refused, saying why.
        if answer.decision.is_defer() && self.scope.is_some() {
            let decision = PermissionDecision {
                decision: Decision::Deny,
                reason: format!(
                    "{}; a sub-agent cannot wait for a person, so it is refused",
                    answer.decision.reason
                ),
                ..answer.decision
            };
            return Answer {
                by: answer.by,
                decision,
            }
            .refuse(Some(run));
        }
        if answer.decision.is_defer() {
            return Resolution::Parked {
                by: answer.by,
                decision: answer.decision,
                call: run,
            };
        }
        if !answer.decision.is_allow() {
            return answer.refuse(Some(run));
        }
        // A hook may have rewritten the input into one that writes.
        if let Some(refused) = self.out_of_scope(&run) {
            return refused.refuse(Some(run));
        }
        let basis = run.allow_basis(answer.by, &answer.decision, &self.ctx);
        Resolution::Allowed {
            by: answer.by,
            decision: answer.decision,
            run,
            basis,
        }
    }

    /// A rewritten input is prepared and decided like a new call, so a hook can never
    /// rewrite a call past a rule; the hook's allow (without the rewrite) still counts.
    async fn recheck(
        &mut self,
        call: PreparedCall,
        answer: Answer,
        rewritten: Value,
        ruling: Option<&HookRuling>,
    ) -> Resolution {
        let name = call.name().clone();
        let prepared = match PreparedCall::prepare(call.tool().clone(), rewritten) {
            Ok(prepared) => prepared,
            Err(err) => {
                let decision = PermissionDecision {
                    decision: Decision::Deny,
                    layer: Layer::Hook,
                    reason: format!(
                        "a PreToolUse hook rewrote the input into one {name} rejects: {err}"
                    ),
                    updated_input: None,
                    ..answer.decision
                };
                return Answer {
                    by: Answerer::Hook,
                    decision,
                }
                .refuse(Some(call));
            }
        };
        let kept = match ruling {
            Some(HookRuling::Allow { reason, .. }) => HookRuling::Allow {
                reason: reason.clone(),
                updated_input: None,
            },
            _ => HookRuling::NoOpinion {
                updated_input: None,
            },
        };
        let recheck = match policy::decide(&prepared, &self.ctx) {
            GateDecision::Deny(grounds) => gate_deny(grounds),
            gated => self.resolve(&prepared, gated, Some(&kept)).await,
        };
        if recheck.decision.is_allow() {
            return self.settle(answer, prepared);
        }
        let reason = format!(
            "the input a PreToolUse hook rewrote is refused: {}",
            recheck.decision.reason
        );
        Answer {
            by: recheck.by,
            decision: PermissionDecision {
                reason,
                ..recheck.decision
            },
        }
        .refuse(Some(call))
    }

    /// Allow or ask, with the hooks' ruling: the one place an ask is answered.
    async fn resolve(
        &mut self,
        call: &PreparedCall,
        gated: GateDecision,
        ruling: Option<&HookRuling>,
    ) -> Answer {
        let ask = match gated {
            GateDecision::Deny(grounds) => return gate_deny(grounds),
            GateDecision::Allow {
                grounds,
                updated_input,
            } => return hook_on_allow(grounds, updated_input, ruling),
            GateDecision::Ask(ask) => ask,
        };
        let ask = match hook_on_ask(ask, ruling) {
            Ok(answered) => return answered,
            Err(open) => open,
        };
        // A hook that took no position may still have rewritten the input.
        let carried = match ruling {
            Some(HookRuling::NoOpinion { updated_input }) => updated_input.clone(),
            _ => None,
        };
        if let Some(allowed) = fast_path(call, &self.ctx, &ask) {
            self.note_mode(true);
            return Answer {
                by: Answerer::FastPath,
                decision: PermissionDecision {
                    updated_input: carried,
                    ..allowed
                },
            };
        }
        let awaited = if self.ctx.mode == PermissionMode::Auto && !ask.immune {
            Awaited::Classifier
        } else {
            Awaited::Person
        };
        if let (Awaited::Classifier, Some(classifier)) = (awaited, self.classifier.as_deref_mut()) {
            let grounds = |reason| Grounds {
                layer: Layer::Classifier,
                reason,
                ..ask.grounds.clone()
            };
            let decision = match classifier.classify(call, &ask, &self.ctx).await {
                ClassifierRuling::Allow { reason } => {
                    PermissionDecision::allow(grounds(reason), carried, true)
                }
                ClassifierRuling::Deny { reason } => {
                    PermissionDecision::deny(grounds(reason), true)
                }
            };
            return Answer {
                by: Answerer::Classifier,
                decision,
            };
        }
        self.note_mode(false);
        let decision = match awaited {
            Awaited::Person => headless_answer(&self.ctx, ask, self.unanswered()),
            // Auto mode's classifier replaces the person: a missing one is a deny.
            Awaited::Classifier => headless_deny(&self.ctx, ask),
        };
        Answer {
            by: Answerer::Mode(awaited),
            decision,
        }
    }

    /// A parked call a person approved (`tollgate approve`), on resume: exactly that call,
    /// judged again under the operator's policy now. A deny stands wherever it comes from
    /// (the scope, a rule, the tool's own check, a PreToolUse hook): a person answers an
    /// ask, never a deny. Anything short of a deny is answered by the approval; a hook's
    /// rewrite is not taken, since the approval covers the input as it was asked.
    pub async fn decide_approved<H: PreToolUse>(
        &mut self,
        call: PreparedCall,
        hooks: &mut H,
        approved: String,
    ) -> Result<Resolution, H::Error> {
        if let Some(refused) = self.out_of_scope(&call) {
            return Ok(refused.refuse(Some(call)));
        }
        let grounds = match self.gate(&call) {
            GateDecision::Deny(grounds) => return Ok(gate_deny(grounds).refuse(Some(call))),
            GateDecision::Allow { grounds, .. } => grounds,
            GateDecision::Ask(ask) => ask.grounds,
        };
        if let Some(HookRuling::Deny { reason }) = hooks.ruling(&call).await? {
            let grounds = Grounds {
                layer: Layer::Hook,
                reason,
                ..grounds
            };
            return Ok(Answer {
                by: Answerer::Hook,
                decision: PermissionDecision::deny(grounds, false),
            }
            .refuse(Some(call)));
        }
        let grounds = Grounds {
            layer: Layer::Person,
            reason: approved,
            ..grounds
        };
        Ok(Resolution::Allowed {
            by: Answerer::Person,
            decision: PermissionDecision::allow(grounds, None, true),
            run: call,
            basis: AllowBasis::Granted,
        })
    }

    /// What an ask nobody answered becomes: a sub-agent's conversation cannot stop and wait
    /// for a person, so inside one it is refused.
    fn unanswered(&self) -> HeadlessAnswer {
        match self.scope {
            Some(_) => HeadlessAnswer::Deny,
            None => self.headless,
        }
    }

    /// `check --explain`'s line for an ask the mode answered.
    fn note_mode(&mut self, allowed: bool) {
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.push(TraceStep {
                step: "mode",
                saw: format!("the ask goes to the {} mode", self.ctx.mode),
                outcome: if allowed { "allow" } else { "deny" }.to_string(),
            });
        }
    }
}

impl Answer {
    fn refuse(self, judged: Option<PreparedCall>) -> Resolution {
        Resolution::Refused {
            by: self.by,
            decision: self.decision,
            judged,
        }
    }
}

fn gate_deny(grounds: Grounds) -> Answer {
    Answer {
        by: Answerer::Gate(grounds.step),
        decision: PermissionDecision::deny(grounds, false),
    }
}

/// A hook can always stop an allowed call, or ask (which headless means deny); otherwise the
/// gate's allow stands, with the input a hook rewrote.
fn hook_on_allow(
    grounds: Grounds,
    updated_input: Option<Value>,
    ruling: Option<&HookRuling>,
) -> Answer {
    let by_gate = Answerer::Gate(grounds.step);
    match ruling {
        Some(HookRuling::Deny { reason }) => Answer {
            by: Answerer::Hook,
            decision: PermissionDecision::deny(
                Grounds {
                    layer: Layer::Hook,
                    reason: reason.clone(),
                    ..grounds
                },
                false,
            ),
        },
        Some(HookRuling::Ask { reason }) => nobody_answers_hook(grounds, reason),
        Some(HookRuling::Defer { reason }) => parked_by_hook(grounds, reason),
        Some(
            HookRuling::Allow {
                updated_input: rewritten,
                ..
            }
            | HookRuling::NoOpinion {
                updated_input: rewritten,
            },
        ) => Answer {
            by: by_gate,
            decision: PermissionDecision::allow(
                grounds,
                rewritten.clone().or(updated_input),
                false,
            ),
        },
        None => Answer {
            by: by_gate,
            decision: PermissionDecision::allow(grounds, updated_input, false),
        },
    }
}

/// A hook's answer to an ask. It can always deny; it can allow (or ask, which headless means
/// deny) only an ask that was not immune — never past an ask rule, an interaction requirement
/// or a guardrail. `Err` gives the ask back, still open.
fn hook_on_ask(ask: Ask, ruling: Option<&HookRuling>) -> Result<Answer, Ask> {
    match ruling {
        Some(HookRuling::Deny { reason }) => Ok(Answer {
            by: Answerer::Hook,
            decision: PermissionDecision::deny(
                Grounds {
                    layer: Layer::Hook,
                    reason: reason.clone(),
                    ..ask.grounds
                },
                false,
            ),
        }),
        Some(HookRuling::Ask { reason }) if !ask.immune => {
            Ok(nobody_answers_hook(ask.grounds, reason))
        }
        // Parking never allows, so even an immune ask may be parked: only a person's
        // answer can run it.
        Some(HookRuling::Defer { reason }) => Ok(parked_by_hook(ask.grounds, reason)),
        Some(HookRuling::Allow {
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
            Ok(Answer {
                by: Answerer::Hook,
                decision: PermissionDecision::allow(grounds, updated_input.clone(), true),
            })
        }
        _ => Err(ask),
    }
}

/// What a PermissionRequest hook makes of the headless deny `asked`: its deny replaces the
/// reason; its allow answers the request as a person would, except for an ask no hook may
/// answer (`immune`) or one whose input it rewrote (the rewrite would not be the call the
/// gate judged).
fn permission_request(asked: Answer, ruling: HookRuling, immune: bool) -> Answer {
    let hook = |decision: Decision, reason: String| Answer {
        by: Answerer::Hook,
        decision: PermissionDecision {
            decision,
            layer: Layer::Hook,
            reason,
            updated_input: None,
            ..asked.decision.clone()
        },
    };
    match ruling {
        HookRuling::Deny { reason } => hook(Decision::Deny, reason),
        HookRuling::Allow {
            updated_input: Some(_),
            ..
        } => hook(
            Decision::Deny,
            format!(
                "{}; a PermissionRequest hook allowed it with a rewritten input, which tollgate does not run",
                asked.decision.reason
            ),
        ),
        HookRuling::Allow { reason, .. } if !immune => hook(
            Decision::Allow,
            reason.unwrap_or_else(|| "allowed by a PermissionRequest hook".into()),
        ),
        HookRuling::Allow { .. }
        | HookRuling::Ask { .. }
        | HookRuling::Defer { .. }
        | HookRuling::NoOpinion { .. } => asked,
    }
}

/// A PreToolUse hook's `defer`: the call waits for a person.
fn parked_by_hook(grounds: Grounds, reason: &str) -> Answer {
    let grounds = Grounds {
        layer: Layer::Hook,
        reason: format!(
            "{reason}; parked for a person's approval (`tollgate approve`, then `tollgate run --resume`)"
        ),
        ..grounds
    };
    Answer {
        by: Answerer::Hook,
        decision: PermissionDecision::defer(grounds),
    }
}

fn nobody_answers_hook(grounds: Grounds, reason: &str) -> Answer {
    let grounds = Grounds {
        layer: Layer::Hook,
        reason: format!("{reason}; nobody is present to approve it in a headless run"),
        ..grounds
    };
    Answer {
        by: Answerer::Hook,
        decision: PermissionDecision::deny(grounds, true),
    }
}

/// Runs `future` on this thread. A decision without hooks or a classifier is ready at its
/// first poll (a `check --calls` stream decides hundreds of thousands): that poll takes no
/// waker of its own; anything that does wait parks the thread until woken.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = std::pin::pin!(future);
    if let Poll::Ready(output) = future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        return output;
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}
