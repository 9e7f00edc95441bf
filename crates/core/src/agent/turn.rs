//! The loop's side of one turn's calls (S6): prepares each call once, admits it by its one
//! decision (`call::Decider`) or the answer `call::Unreached` gives a call that never gets
//! that far, and lands each result (PostToolUse, offload, tool_result) in call order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::auto::{self, Judge, Reviews, Stop};
use super::limits::denial_limit;
use super::subagent;
use super::{AgentError, Loop, Scope, hooks, millis};
use crate::call::{
    Classifier, Decider, EarlyAnswer, PreparedCall, Resolution, Scheduling, SubagentCap, Unreached,
};
use crate::hooks::{EventRuling, HookEvent};
use crate::ledger::{Allowance, CallEffects};
use crate::model::{ContentBlock, MalformedInput, Provider};
use crate::policy::{self, Decision, Layer, PermissionContext, PermissionDecision};
use crate::scheduler::{Admission, Call, CallDeadline, Landing, TurnEnd, TurnHost, run_turn};
use crate::tools::{Subagent, ToolRegistry};
use crate::transcript::{Event, Outcome, ProgressUpdate, ResultStatus};

/// A call of this turn as preparation left it.
enum Prepared {
    Ready(PreparedCall),
    /// Taken by its admission.
    Admitted,
    /// Never reaches the gate: no such tool, or an input that is garbled or rejected.
    Unreached(Unreached),
}

/// A call of a resumed run's interrupted turn that is answered without being judged again.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Settled {
    /// Its result is on record: sent as it was, not recorded again.
    Recorded {
        content: String,
        status: ResultStatus,
    },
    /// Answered now (started and lost, or refused): recorded as a `tool_result`.
    Answer {
        content: String,
        status: ResultStatus,
    },
    /// Never started, but announced before: judged and run now, not counted again.
    Announced,
    /// Parked, and a person approved it: run exactly as asked unless a deny stands now.
    Approved { reason: String },
    /// Parked, and a person denied it: recorded with this decision.
    Denied { decision: PermissionDecision },
}

impl Settled {
    /// What a call's state on record makes of it; `None`: judged and run as a new call. A
    /// parked call has the answer a person gave it (the resume refused to start without one).
    pub fn of(
        state: super::resume::CallState,
        answer: Option<crate::approval::PersonAnswer>,
    ) -> Option<Settled> {
        use super::resume::{CallState, LOST};
        use crate::approval::PersonAnswer;
        match state {
            CallState::Parked { decision } => Some(match answer {
                Some(PersonAnswer::Approved { reason }) => Settled::Approved { reason },
                Some(PersonAnswer::Denied { reason }) => Settled::Denied {
                    decision: PermissionDecision {
                        decision: Decision::Deny,
                        layer: Layer::Person,
                        reason,
                        updated_input: None,
                        ..decision
                    },
                },
                // Fail closed: unreachable past the resume's check, a deny all the same.
                None => Settled::Denied {
                    decision: PermissionDecision {
                        decision: Decision::Deny,
                        reason: format!("{}; nobody answered it", decision.reason),
                        ..decision
                    },
                },
            }),
            CallState::Recorded { content, status } => Some(Settled::Recorded { content, status }),
            CallState::Lost => Some(Settled::Answer {
                content: LOST.to_string(),
                status: ResultStatus::Lost,
            }),
            CallState::Refused { reason } => Some(Settled::Answer {
                content: reason,
                status: ResultStatus::Denied,
            }),
            CallState::NotStarted { announced: true } => Some(Settled::Announced),
            CallState::NotStarted { announced: false } => None,
        }
    }
}

/// What a resumed run brings to the turn it goes on inside.
pub(super) struct Resumed {
    /// The calls with an answer already, by id (the others are judged and run).
    pub(super) settled: HashMap<String, Settled>,
    /// The resume's new words, added after the turn's results.
    pub(super) prompt: Option<String>,
}

/// What one turn's calls left, for closing the turn.
pub(super) struct Played {
    pub(super) end: TurnEnd,
    /// Why the rest of the turn's calls were not run, when the run ends after the turn.
    pub(super) stopped: Option<Stop>,
    /// tool_use ids of results the per-message budget must not offload (Read's).
    pub(super) exempt: HashSet<String>,
    /// The tool_result blocks, in call order.
    pub(super) results: Vec<ContentBlock>,
    /// Calls parked for a person: they get no result, and the run ends with the turn.
    pub(super) parked: Vec<crate::approval::ParkedCall>,
    /// A resume's new words, added after the turn's results.
    pub(super) prompt: Option<String>,
}

/// Gates and runs the turn's calls in `scope`'s conversation: each prepared once, admitted
/// by its one decision or its early answer, run by the scheduler and landed in call order.
pub(super) async fn play(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    scope: &Scope,
    registry: &ToolRegistry,
    calls: &[Call],
    malformed: &[MalformedInput],
    resumed: Option<Resumed>,
) -> Result<Played, AgentError> {
    let spec = run.spec;
    let ctx = run.ctx.clone();
    // Queued messages are the run's: a sub-agent's turn leaves them for its parent.
    let queue = spec.queue.as_ref().filter(|_| scope.subagent.is_none());
    let mut host = LoopHost::new(
        run,
        provider,
        scope.subagent.clone(),
        registry,
        calls,
        malformed,
    );
    let prompt = resumed.and_then(|Resumed { settled, prompt }| {
        host.settled = settled;
        prompt
    });
    let end = run_turn(
        &mut host,
        calls,
        &ctx,
        spec.limits.max_parallel_tools,
        queue,
    )
    .await?;
    Ok(Played {
        end,
        stopped: host.stopped,
        exempt: host.exempt,
        results: host.results,
        parked: host.parked,
        prompt,
    })
}

struct LoopHost<'r, 'a> {
    run: &'r mut Loop<'a>,
    /// For the sub-agents an Agent call starts.
    provider: &'r mut Provider,
    /// The sub-agent whose turn this is; `None` for the run's own conversation.
    subagent: Option<Subagent>,
    registry: &'r ToolRegistry,
    prepared: Vec<Prepared>,
    /// Why the rest of the turn's calls are not run (a denial limit was reached, or the
    /// classifier ended the run).
    stopped: Option<Stop>,
    /// When each call was admitted, for its duration.
    admitted_at: HashMap<usize, Instant>,
    /// The tool_result blocks, in call order.
    results: Vec<ContentBlock>,
    /// tool_use ids of results the per-message budget must not offload (Read's).
    exempt: HashSet<String>,
    /// Sub-agents this turn's calls asked for so far (Agent, agent-mode Skill).
    subagents: SubagentCap,
    /// What each call admitted to run may change (the effect ledger's bound).
    allowances: HashMap<usize, Allowance>,
    /// What each call that ran changed, until it lands.
    effects: HashMap<usize, CallEffects>,
    /// A resumed turn's calls answered by the record, by id.
    settled: HashMap<String, Settled>,
    /// Calls parked for a person this turn: they get no result, and the run ends once the
    /// turn's other calls landed.
    parked: Vec<crate::approval::ParkedCall>,
}

impl<'r, 'a> LoopHost<'r, 'a> {
    /// Prepares every call of the turn once: parsing, validation and what scheduling needs.
    fn new(
        run: &'r mut Loop<'a>,
        provider: &'r mut Provider,
        subagent: Option<Subagent>,
        registry: &'r ToolRegistry,
        calls: &[Call],
        malformed: &[MalformedInput],
    ) -> Self {
        let prepared = calls
            .iter()
            .map(|call| {
                let garbled = malformed
                    .iter()
                    .find(|bad| bad.id == call.id)
                    .map(|bad| bad.message.as_str());
                let tool = registry.get(&call.name).cloned();
                match crate::call::prepare(
                    &call.name.to_string(),
                    tool,
                    call.input.clone(),
                    garbled,
                ) {
                    Ok(prepared) => Prepared::Ready(prepared),
                    Err(unreached) => Prepared::Unreached(unreached),
                }
            })
            .collect();
        let subagents = SubagentCap::new(run.spec.subagent_max_per_turn);
        LoopHost {
            run,
            provider,
            subagent,
            registry,
            prepared,
            stopped: None,
            admitted_at: HashMap::new(),
            results: Vec::new(),
            exempt: HashSet::new(),
            subagents,
            allowances: HashMap::new(),
            effects: HashMap::new(),
            settled: HashMap::new(),
            parked: Vec::new(),
        }
    }

    fn started(&mut self, call: &Call) -> Result<(), AgentError> {
        self.run.emit(Event::ToolStarted {
            id: call.id.clone(),
            tool: call.name.to_string(),
        })
    }

    fn announce(&mut self, call: &Call) -> Result<(), AgentError> {
        self.run.emit(Event::ToolCall {
            id: call.id.clone(),
            tool: call.name.to_string(),
            input: call.input.clone(),
        })
    }

    fn answered(content: String, status: ResultStatus) -> Admission {
        Admission::Answered { content, status }
    }

    /// The call's decision; the call and its bounds if it is allowed.
    async fn gate(
        &mut self,
        index: usize,
        call: &Call,
        prepared: PreparedCall,
        approved: Option<String>,
    ) -> Result<Admission, AgentError> {
        if let Some(over) = self.subagents.over(&prepared) {
            return self.early(call, over);
        }
        // A person's approval answers the call itself, never an earlier refusal of it.
        if approved.is_none()
            && let Some(repeat) =
                self.run
                    .refusals
                    .repeat(self.subagent.as_ref(), &call.name, &call.input)
        {
            return self.early(call, repeat);
        }
        let ctx = permission_context(self.run);
        let run = &mut *self.run;
        let spec = run.spec;
        // Out of the loop while the hooks hold it; put back before anything can return.
        let mut auto_state = run.auto.take();
        let mut judge = auto_state
            .as_mut()
            .map(|auto| Judge::new(auto, &spec.prompt, &spec.limits, run.ctx.abort.clone()));
        let mut decider = Decider {
            ctx,
            // An explore sub-agent's limit is structural: the decision's first step, so no
            // rule, mode or hook can allow a call that is not proven read-only.
            // A custom agent's narrower pool needs no step here: a tool outside it is no
            // tool of its registry, so its call never reaches a decision.
            scope: self.subagent.as_ref().map(|agent| agent.kind),
            classifier: judge.as_mut().map(|judge| judge as &mut dyn Classifier),
            trace: None,
            headless: spec.headless,
        };
        let mut hooks = hooks::PreToolUseHooks { run, id: &call.id };
        let resolution = match approved {
            Some(reason) => decider.decide_approved(prepared, &mut hooks, reason).await,
            None => decider.decide(prepared, &mut hooks).await,
        };
        let reviews = judge.map(Judge::finish).unwrap_or_default();
        run.auto = auto_state;
        let resolution = resolution?;
        if let Some(judged) = resolution.call() {
            auto::record_reviews(run, &call.id, judged, &reviews)?;
        }
        let input = resolution
            .call()
            .map_or_else(|| call.input.clone(), |judged| judged.raw_input().clone());
        record_decision(
            self.run,
            &call.id,
            &call.name,
            &input,
            resolution.decision().clone(),
        )?;
        let (prepared, basis) = match resolution {
            Resolution::Refused { decision, .. } => {
                self.run.refusals.remember(
                    self.subagent.as_ref(),
                    &call.name,
                    &call.input,
                    &decision,
                );
                let Reviews { stop, .. } = reviews;
                self.stopped = stop.or_else(|| denial_limit(self.run));
                let mut content = format!("Permission denied: {}", decision.reason);
                let fields = serde_json::json!({
                    "tool_name": call.name.to_string(),
                    "tool_input": input,
                    "tool_use_id": call.id,
                    "reason": decision.reason,
                });
                let name = call.name.to_string();
                // Told of the denial, a hook may add context for the model or stop the run;
                // it can never undo the denial.
                match hooks::moment(self.run, HookEvent::PermissionDenied, &name, fields).await? {
                    EventRuling::Proceed { context } => {
                        for text in context {
                            content.push_str(&format!("\n{text}"));
                        }
                    }
                    EventRuling::Block { .. } => {}
                    EventRuling::Stop { reason } => {
                        if self.stopped.is_none() {
                            self.stopped = Some(Stop {
                                outcome: Outcome::HookStopped,
                                why: reason,
                            });
                        }
                    }
                }
                return Ok(Self::answered(content, ResultStatus::Denied));
            }
            Resolution::Allowed { run, basis, by, .. } => {
                self.allowances
                    .insert(index, run.allowed_effects(by, basis, &ctx));
                (run, basis)
            }
            Resolution::Parked {
                decision,
                call: asked,
                ..
            } => {
                let tool = call.name.to_string();
                // The input as the record keeps it (secrets replaced), so its hash is the
                // one `approve` and the resume compute from `pending.json` and the transcript.
                let recorded = self.run.spec.redactor.redact(&call.input.to_string());
                let input = serde_json::from_str(&recorded).unwrap_or_else(|_| call.input.clone());
                self.parked.push(crate::approval::ParkedCall {
                    id: call.id.clone(),
                    hash: crate::approval::call_hash(&tool, &input),
                    tool,
                    input,
                    step: decision.step,
                    layer: decision.layer,
                    rule: decision.rule,
                    reason: decision.reason,
                    would: asked.would(&ctx),
                });
                // Never sent: a parked call's result is the one its person's answer makes.
                return Ok(Self::answered(String::new(), ResultStatus::Denied));
            }
        };
        if let Some(delegation) = prepared.delegation().cloned() {
            self.started(call)?;
            let ran = subagent::run(self.run, self.provider, &call.id, &delegation).await?;
            if let Some(stop) = ran.stop {
                self.stopped = Some(stop);
            }
            return Ok(Admission::Finished {
                call: Arc::new(prepared),
                result: ran.result,
            });
        }
        Ok(Admission::Run {
            // A hook may have rewritten the input into one with other properties.
            scheduling: prepared.scheduling(&ctx),
            call: Arc::new(prepared),
            deadline: deadline(self.run),
            basis,
        })
    }

    /// A call answered before the gate, as `call::Unreached` says: a refusal is recorded and
    /// counted like the gate's (a repeat with the earlier refusal, no hook, rule or
    /// classifier asked again); anything else is an error result the model can correct.
    fn early(&mut self, call: &Call, unreached: Unreached) -> Result<Admission, AgentError> {
        match unreached.answer() {
            EarlyAnswer::Refused { decision, content } => {
                record_decision(self.run, &call.id, &call.name, &call.input, decision)?;
                self.stopped = denial_limit(self.run);
                Ok(Self::answered(content, ResultStatus::Denied))
            }
            EarlyAnswer::NotRun(content) => Ok(Self::answered(content, ResultStatus::Error)),
        }
    }

    /// No tool of that name this turn, told with what there is.
    fn no_such_tool(&self, call: &Call) -> Unreached {
        Unreached::NoSuchTool {
            name: call.name.to_string(),
            more: format!(
                ". Available tools: {}{}",
                self.registry.names(),
                deferred_hint(self.run, &call.name)
            ),
        }
    }
}

/// A deferred tool called before ToolSearch loaded it: say how to load it (S7). A tool of a
/// server the run has not, or ToolSearch while such a server left nothing to search: say
/// which server is missing and why, rather than leave the model guessing.
fn deferred_hint(run: &Loop<'_>, name: &policy::ToolName) -> String {
    let deferred = run.ctx.state.deferred.catalogue();
    if deferred.iter().any(|definition| definition.name == *name) {
        return format!(
            ". {name} is deferred: load it with ToolSearch (query \"select:{name}\") first"
        );
    }
    let unavailable = super::mcp::unavailable_servers(run.spec, &run.mcp);
    let said = |(server, why): &(&str, &str)| format!("{server} ({why})");
    match name {
        policy::ToolName::Mcp { server, .. } => unavailable
            .iter()
            .find(|(missing, _)| missing.eq_ignore_ascii_case(server))
            .map(|missing| format!(". The MCP server {} is not running", said(missing)))
            .unwrap_or_default(),
        policy::ToolName::ToolSearch if !unavailable.is_empty() => {
            let listed: Vec<String> = unavailable.iter().map(said).collect();
            format!(
                ". ToolSearch is offered only while there are deferred tools to load; the MCP servers not running: {}",
                listed.join(", ")
            )
        }
        _ => String::new(),
    }
}

/// The call is bounded by `limits.tool_timeout` and by what is left of the run's wall clock.
fn deadline(run: &Loop<'_>) -> Option<CallDeadline> {
    let limits = run.spec.limits;
    let tool_deadline = limits
        .tool_timeout
        .map(|limit| crate::base::deadline(Instant::now(), limit));
    let (at, why, limit) = match (tool_deadline, run.deadline) {
        (Some(tool), Some(whole)) if whole < tool => {
            (Some(whole), "the run's limits.timeout", limits.timeout)
        }
        (Some(tool), _) => (Some(tool), "limits.tool_timeout", limits.tool_timeout),
        (None, whole) => (whole, "the run's limits.timeout", limits.timeout),
    };
    at.map(|at| CallDeadline {
        at,
        message: format!(
            "The tool call was stopped: {why} = {}s ran out",
            limit.map_or(0.0, |limit: Duration| limit.as_secs_f64())
        ),
    })
}

/// What the run's calls are judged under: the same rules and workspace for scheduling and
/// the decision, so a Bash command's one analysis answers both.
fn permission_context<'s>(run: &Loop<'s>) -> PermissionContext<'s> {
    let spec = run.spec;
    PermissionContext {
        disk: None,
        auto_allow_bash: run
            .ctx
            .sandbox
            .as_ref()
            .is_some_and(|sandbox| sandbox.auto_allow_bash()),
        mode: spec.mode,
        rules: &spec.rules,
        workspace: &spec.workspace,
    }
}

impl TurnHost for LoopHost<'_, '_> {
    type Error = AgentError;

    fn scheduling(&self, index: usize, _call: &Call) -> Option<Scheduling> {
        match self.prepared.get(index)? {
            Prepared::Ready(call) => Some(call.scheduling(&permission_context(self.run))),
            Prepared::Admitted | Prepared::Unreached(_) => None,
        }
    }

    /// Always yields exactly one answer or a call to run.
    async fn admit(&mut self, index: usize, call: &Call) -> Result<Admission, AgentError> {
        let settled = self.settled.get(&call.id).cloned();
        let mut approved = None;
        match settled {
            Some(Settled::Recorded { content, status } | Settled::Answer { content, status }) => {
                return Ok(Self::answered(content, status));
            }
            Some(Settled::Denied { decision }) => {
                let content = format!("Permission denied: {}", decision.reason);
                record_decision(self.run, &call.id, &call.name, &call.input, decision)?;
                self.admitted_at.insert(index, Instant::now());
                return Ok(Self::answered(content, ResultStatus::Denied));
            }
            Some(Settled::Approved { ref reason }) => approved = Some(reason.clone()),
            Some(Settled::Announced) | None => {}
        }
        self.announce(call)?;
        self.admitted_at.insert(index, Instant::now());
        if let Some(stop) = &self.stopped {
            // The run is over, but every tool_use still gets its one result.
            return Ok(Self::answered(
                format!("[not run: {}]", stop.why),
                ResultStatus::Cancelled,
            ));
        }
        let run = &mut *self.run;
        // A call the stopped run announced was counted then.
        if settled.is_none() {
            run.counts.tool_calls += 1;
            match run
                .calls_by_tool
                .iter_mut()
                .find(|(tool, _)| *tool == call.name)
            {
                Some((_, count)) => *count += 1,
                None => run.calls_by_tool.push((call.name.clone(), 1)),
            }
        }
        let slot = self
            .prepared
            .get_mut(index)
            .map(|slot| std::mem::replace(slot, Prepared::Admitted));
        match slot {
            Some(Prepared::Ready(prepared)) => self.gate(index, call, prepared, approved).await,
            Some(Prepared::Unreached(Unreached::NoSuchTool { .. }) | Prepared::Admitted) | None => {
                let unknown = self.no_such_tool(call);
                self.early(call, unknown)
            }
            Some(Prepared::Unreached(unreached)) => self.early(call, unreached),
        }
    }

    /// PostToolUse, offload, the tool_result event and block.
    async fn land(
        &mut self,
        index: usize,
        call: &Call,
        landing: Landing,
    ) -> Result<(), AgentError> {
        if self.parked.iter().any(|parked| parked.id == call.id) {
            return Ok(());
        }
        let mut command = None;
        let mut effects = self.effects.remove(&index);
        let (status, content) = match landing {
            Landing::Answered { content, status } => (status, content),
            Landing::Ran {
                call: prepared,
                result,
            } => {
                // The model's text is written here, from the typed result.
                let (status, content) = match result {
                    Ok(output) => {
                        command = output.command;
                        (ResultStatus::Success, output.content)
                    }
                    Err(err) => {
                        command = err.command().cloned();
                        (ResultStatus::Error, err.to_string())
                    }
                };
                if let (Some(effects), Some(outcome)) = (effects.as_mut(), command.as_ref()) {
                    effects.add_restored(&outcome.protected);
                }
                let (status, content) =
                    hooks::post_tool_use(self.run, &call.id, &prepared, status, content).await?;
                let threshold = self.run.result_threshold(&prepared);
                if threshold == usize::MAX {
                    self.exempt.insert(call.id.clone());
                }
                let fitted = self.run.results.fit(&call.id, content, threshold);
                let content = self.run.keep(fitted);
                (status, content)
            }
            Landing::Cancelled {
                why,
                admitted,
                started,
            } => {
                if !admitted {
                    self.announce(call)?;
                }
                (ResultStatus::Cancelled, why.content(started))
            }
        };
        // What the model reads has its secrets replaced, encoded forms and credential
        // headers included, as the record does: a token a command or a file printed (a
        // checkout's `extraheader`) never reaches the model.
        let content = self.run.spec.redactor.redact(&content);
        let is_error = status != ResultStatus::Success;
        if let Some(Settled::Recorded { .. }) = self.settled.get(&call.id) {
            // On record already, and counted: the model gets it as the run had it.
            self.results.push(ContentBlock::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error,
            });
            return Ok(());
        }
        if status == ResultStatus::Error {
            self.run.counts.tool_errors += 1;
        }
        let duration_ms = self
            .admitted_at
            .get(&index)
            .map_or(0, |at| millis(at.into_std()));
        if let Some(effects) = &effects {
            self.run
                .effects
                .tally(&call.id, &call.name, &call.input, effects);
        }
        self.run.emit(Event::ToolResult {
            id: call.id.clone(),
            tool: call.name.to_string(),
            status,
            is_error,
            content: content.clone(),
            duration_ms,
            command,
            effects,
        })?;
        self.results.push(ContentBlock::ToolResult {
            tool_use_id: call.id.clone(),
            content,
            is_error,
        });
        Ok(())
    }

    fn progress(&mut self, call: &Call, update: ProgressUpdate) -> Result<(), AgentError> {
        self.run.emit(Event::ToolProgress {
            id: call.id.clone(),
            tool: call.name.to_string(),
            update,
        })
    }

    fn call_started(&mut self, _index: usize, call: &Call) -> Result<(), AgentError> {
        self.started(call)
    }

    async fn calls_starting(&mut self) -> Result<(), AgentError> {
        if let Some(ledger) = self.run.ledger.as_mut() {
            ledger.open().await;
        }
        Ok(())
    }

    /// The calls that ran together get what they changed together, judged against what
    /// their decisions allowed together.
    async fn calls_stopped(&mut self, ran: &[(usize, &Call)]) -> Result<(), AgentError> {
        let Some(ledger) = self.run.ledger.as_mut() else {
            return Ok(());
        };
        let allowed = ran
            .iter()
            .filter_map(|(index, _)| self.allowances.get(index))
            .fold(None, |together: Option<Allowance>, allowed| {
                Some(match together {
                    None => allowed.clone(),
                    Some(together) => together.union(allowed),
                })
            })
            .unwrap_or_default();
        let batch = ran.iter().map(|(_, call)| call.id.clone()).collect();
        let effects = ledger.close(allowed, batch).await;
        for (index, _) in ran {
            self.effects.insert(*index, effects.clone());
        }
        Ok(())
    }
}

/// The decision's counts and the `permission_decision` event; the input recorded is the one
/// the call was judged with.
fn record_decision(
    run: &mut Loop<'_>,
    id: &str,
    name: &policy::ToolName,
    input: &serde_json::Value,
    decision: PermissionDecision,
) -> Result<(), AgentError> {
    count_denial(run, id, name, input, &decision);
    tracing::info!(
        id,
        tool = %name,
        decision = %crate::config::serde_name(&decision.decision),
        step = %crate::config::serde_name(&decision.step),
        layer = %crate::config::serde_name(&decision.layer),
        rule = decision.rule.as_ref().map(|rule| rule.rule.as_str()),
        reason = %decision.reason,
        "gate decision"
    );
    run.emit(Event::PermissionDecision {
        id: id.to_string(),
        tool: name.to_string(),
        decision,
    })
}

fn count_denial(
    run: &mut Loop<'_>,
    id: &str,
    name: &policy::ToolName,
    input: &serde_json::Value,
    decision: &PermissionDecision,
) {
    match decision.decision {
        Decision::Allow => {
            run.consecutive_denials = 0;
            return;
        }
        // Parked is no refusal: a person may still allow it.
        Decision::Defer => return,
        Decision::Deny | Decision::Ask => {}
    }
    run.consecutive_denials += 1;
    run.counts.denials += 1;
    run.counts.denials_by_layer.count(decision.layer);
    run.denials.push(crate::transcript::Denial {
        id: id.to_string(),
        tool: name.clone(),
        input: input.clone(),
        decision: decision.clone(),
    });
}
