//! Calling the model, one phase of the loop: the limits checked before a request, the
//! history compacted when due, the request raced against the abort and the run's deadline
//! (the provider's retries recorded as they happen, an unavailable model handing over to the
//! fallback), compacted and sent once more when the provider finds it too long, and the
//! answer recorded. Every way it cannot answer is an `Ending`. A resumed run's first turn is
//! the one on record, not asked again.

use tokio::time::Instant;

use super::attempt::attempt;
use super::ending::{Ending, hard_stop, timed_out};
use super::limits::{default_denial_limit, run_turns_used_up};
use super::turn::Resumed;
use super::{AgentError, Loop, Scope, compaction, fallback};
use crate::base::{AbortReason, AbortSignal};
use crate::model::{
    ContentBlock, History, Message, ModelRequest, ModelResponse, Provider, Role, StopReason,
    ToolSpec,
};
use crate::policy::ToolName;
use crate::scheduler::Call;
use crate::transcript::{Event, Outcome, QueryEnd, UsageSource};

/// The model's answer to the next request, as `conversation` goes on with it.
pub(super) struct Asked {
    pub(super) message: Message,
    pub(super) stop_reason: StopReason,
    pub(super) malformed_inputs: Vec<crate::model::MalformedInput>,
    pub(super) turn: u32,
    /// Set for the turn a resumed run goes on inside.
    pub(super) resumed: Option<Resumed>,
}

impl Asked {
    /// The tool calls the answer makes, in its order.
    pub(super) fn calls(&self) -> Vec<Call> {
        self.message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, input } => Some(Call {
                    id: id.clone(),
                    name: ToolName::from_model(name),
                    input: input.clone(),
                }),
                _ => None,
            })
            .collect()
    }
}

/// The turn the conversation goes on with: a resumed run's the one it stopped in (no
/// request; its calls answered as the record places them), else the model's answer to the
/// next request; or how the conversation ended instead.
pub(super) async fn next_turn(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut History,
    scope: &mut Scope,
    system: &str,
    tool_specs: &[ToolSpec],
) -> Result<Result<Asked, Ending>, AgentError> {
    let pending = match scope.subagent {
        None => run.pending.take(),
        Some(_) => None,
    };
    let Some(pending) = pending else {
        return ask(run, provider, abort, messages, scope, system, tool_specs).await;
    };
    Ok(Ok(Asked {
        message: pending.message,
        stop_reason: pending.stop_reason,
        malformed_inputs: Vec::new(),
        turn: scope.turns,
        resumed: Some(pending.resumed),
    }))
}

/// The model's next turn: the limits checked, the history compacted when due, the request
/// sent (compacted and sent once more when the provider finds it too long) and its answer
/// recorded; or how the conversation ended instead.
async fn ask(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut History,
    scope: &mut Scope,
    system: &str,
    tool_specs: &[ToolSpec],
) -> Result<Result<Asked, Ending>, AgentError> {
    let spec = run.spec;
    let fixed_bytes = system.len() + serde_json::to_vec(tool_specs).map_or(0, |b| b.len());
    if let Some(reason) = abort.reason() {
        let during = match messages.last() {
            Some(last)
                if last.role == Role::User
                    && last
                        .content
                        .iter()
                        .any(|block| matches!(block, ContentBlock::ToolResult { .. })) =>
            {
                QueryEnd::AbortedTools
            }
            _ => QueryEnd::AbortedStreaming,
        };
        return hard_stop(run, messages, reason, during).map(Err);
    }
    if run
        .deadline
        .is_some_and(|deadline| Instant::now() >= deadline)
    {
        return Ok(Err(timed_out(spec)));
    }
    if let Some(why) = default_denial_limit(run) {
        return Ok(Err(Ending::stopped(Outcome::DenialLimit, why)));
    }
    // One budget for the run: a sub-agent's turns are the run's too, so Agent calls cannot
    // multiply `max_turns`.
    if run.requests >= spec.limits.max_turns {
        return Ok(Err(Ending::stopped(
            Outcome::MaxTurns,
            run_turns_used_up(spec.limits.max_turns),
        )));
    }
    if scope.turns >= scope.max_turns {
        return Ok(Err(Ending::stopped(
            Outcome::MaxTurns,
            format!(
                "stopped after {} = {}",
                scope.max_turns_key(),
                scope.max_turns
            ),
        )));
    }
    let fixed = compaction::Fixed {
        system,
        tools: tool_specs,
        bytes: fixed_bytes,
    };
    let mut prompt_bytes = fixed_bytes + messages.encoded_len();
    // Sub-agents' conversations are short by their own turn limit; the run's own grows.
    if scope.subagent.is_none() && compaction::due(run, prompt_bytes, scope.turns + 1) {
        let trigger = crate::transcript::CompactionTrigger::Threshold;
        let turn = scope.turns + 1;
        match compaction::compact(run, provider, abort, messages, &fixed, turn, trigger).await? {
            compaction::Compacted::Stopped(None) => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            compaction::Compacted::Stopped(Some(ending)) => return Ok(Err(ending)),
            compaction::Compacted::Yes | compaction::Compacted::No => {}
        }
        prompt_bytes = fixed_bytes + messages.encoded_len();
    }
    let max_tokens = match run.budget.admit(prompt_bytes) {
        Ok(max_tokens) => max_tokens,
        Err(limit) => return Ok(Err(Ending::stopped(limit.outcome, limit.reason))),
    };
    // Held until the answer's cost settles it; any other end charges its worst case.
    let (max_tokens, lease) = match run.budget.reserve(prompt_bytes, max_tokens) {
        Ok(granted) => granted,
        Err(limit) => return Ok(Err(Ending::stopped(limit.outcome, limit.reason))),
    };
    scope.turns += 1;
    run.requests += 1;
    if scope.subagent.is_none() {
        run.counts.turns += 1;
    }
    let turn = scope.turns;
    run.emit(Event::ModelRequest {
        turn,
        messages: messages.len(),
        tools: tool_specs.iter().map(|tool| tool.name.clone()).collect(),
    })?;
    // A request the provider finds too long for its context is compacted and sent once
    // more, instead of ending the run.
    let mut overflowed = false;
    let response = loop {
        let request = ModelRequest {
            system,
            messages,
            tools: tool_specs,
            max_tokens,
        };
        let stop = match request_once(run, provider, &request, turn, abort).await? {
            Ok(response) => break response,
            Err(stop) => stop,
        };
        let message = match stop {
            Stop::Aborted => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            Stop::Ended(ending) => return Ok(Err(ending)),
            Stop::TooLong(message) => message,
        };
        let too_long = |why: &str| {
            Ok(Err(Ending::stopped(
                Outcome::ContextOverflow,
                format!("{message} ({why})"),
            )))
        };
        if scope.subagent.is_some() {
            return too_long("a sub-agent's conversation is not compacted");
        }
        if overflowed {
            return too_long("refused again after compacting");
        }
        if !spec.compaction.enabled {
            return too_long("compaction is off");
        }
        if run.backoff.spent() {
            return too_long(&format!(
                "{} compactions of this run failed already",
                compaction::MAX_FAILURES
            ));
        }
        overflowed = true;
        let trigger = crate::transcript::CompactionTrigger::ContextOverflow;
        match compaction::compact(run, provider, abort, messages, &fixed, turn, trigger).await? {
            compaction::Compacted::Yes => {}
            compaction::Compacted::No => {
                return too_long("compaction did not shorten it: see the compaction event");
            }
            compaction::Compacted::Stopped(None) => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            compaction::Compacted::Stopped(Some(ending)) => return Ok(Err(ending)),
        }
    };
    let usage = response.usage.tokens();
    run.counts.usage.add(&usage);
    if response.usage.is_estimated() {
        run.counts.estimated_requests += 1;
    }
    let cost_usd = run.budget.record(&usage, prompt_bytes);
    crate::shared_budget::settle(lease, cost_usd);
    run.emit(Event::AssistantMessage {
        turn,
        content: response.content.clone(),
        stop_reason: response.stop_reason,
        usage,
        usage_source: UsageSource::of(&response.usage),
        cost_usd,
    })?;
    let ModelResponse {
        content,
        stop_reason,
        malformed_inputs,
        ..
    } = response;
    Ok(Ok(Asked {
        message: Message {
            role: Role::Assistant,
            content,
        },
        stop_reason,
        malformed_inputs,
        turn,
        resumed: None,
    }))
}

/// Why a request got no response.
enum Stop {
    /// A signal; the caller records it.
    Aborted,
    /// The run ends so (its deadline, the provider's failure).
    Ended(Ending),
    /// The provider refused the request as too long for its context (its message).
    TooLong(String),
}

/// One model request, raced against the abort and the run's deadline; the provider's retry
/// notices become `api_retry` events as they happen, and an unavailable model hands over to
/// the fallback.
async fn request_once(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    request: &ModelRequest<'_>,
    turn: u32,
    abort: &AbortSignal,
) -> Result<Result<ModelResponse, Stop>, AgentError> {
    loop {
        let result = match attempt(run, provider, request, turn, abort).await? {
            Ok(result) => result,
            Err(None) => return Ok(Err(Stop::Aborted)),
            Err(Some(ending)) => return Ok(Err(Stop::Ended(ending))),
        };
        let err = match result {
            Ok(response) => return Ok(Ok(response)),
            Err(err) if err.is_context_overflow() => {
                return Ok(Err(Stop::TooLong(err.to_string())));
            }
            Err(err) => err,
        };
        let switched = fallback::switch(
            &mut run.fallback,
            &mut run.answering,
            provider,
            &mut run.budget,
            &err,
            turn,
        );
        match switched {
            Some(event) => run.emit(event)?,
            None => {
                return Ok(Err(Stop::Ended(Ending::stopped(
                    Outcome::ProviderError,
                    err.to_string(),
                ))));
            }
        }
    }
}
