//! Sub-agents: a nested conversation the loop runs for an Agent call (or an agent-mode Skill),
//! built-in or custom (an agent file's instructions, its tools a narrowing of the parent's),
//! with its own history, tool context, turn limit and TodoWrite list, under the run's policy,
//! mode, hooks, sandbox, classifier, budget and transcript. Owns what a sub-agent is offered
//! and what its end means for its parent; the conversation itself is the loop's, and what an
//! explore sub-agent may not do is a step of each call's decision (`call::Decider`).

use std::future::Future;
use std::pin::Pin;

use super::auto::Stop;
use super::budget::PromptEstimate;
use super::ending::Ending;
use super::reminders::Reminders;
use super::{AgentError, Loop, Scope, conversation};
use crate::config::serde_name;
use crate::model::{History, Message, Provider, Usage};
use crate::tools::{
    DeferredTools, Delegation, FileStateCache, RunState, Subagent, ToolContext, ToolError,
    ToolOutput,
};
use crate::transcript::{Event, Outcome};

/// What a sub-agent's run gives its parent: the Agent call's result, and a stop when the
/// sub-agent hit a limit of the whole run (budget, wall clock, denials, the provider).
pub(super) struct Ran {
    pub result: Result<ToolOutput, ToolError>,
    pub stop: Option<Stop>,
}

/// The parent's per-conversation state, put back when the sub-agent ends.
struct Parent {
    ctx: ToolContext,
    reminders: Reminders,
    estimate: PromptEstimate,
}

/// Runs the sub-agent `delegation` asks for, started by the call `parent_id`.
pub(super) async fn run(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    parent_id: &str,
    delegation: &Delegation,
) -> Result<Ran, AgentError> {
    run.subagents += 1;
    let agent_id = format!("agent-{}", run.subagents);
    let agent = &delegation.agent;
    let spec = run.spec;
    let ctx = own_context(&run.ctx, agent);
    let tools = super::pool(spec, &run.mcp).offered(&ctx.state.deferred.loaded(), Some(agent));
    // A custom agent's own limit only narrows the run's.
    let max_turns = agent
        .custom
        .as_ref()
        .and_then(|profile| profile.max_turns)
        .map_or(spec.subagent_max_turns, |own| {
            own.min(spec.subagent_max_turns)
        });
    run.emit(Event::SubagentStarted {
        id: agent_id.clone(),
        parent_id: parent_id.to_string(),
        subagent_type: agent.kind,
        agent: agent.custom.as_ref().map(|profile| profile.name.clone()),
        description: delegation.description.clone(),
        tools: tools.tools().iter().map(|t| t.name().to_string()).collect(),
        max_turns,
    })?;
    let usage_before = run.counts.usage;
    let cost_before = run.budget.total_cost_usd();
    let parent = Parent {
        ctx: std::mem::replace(&mut run.ctx, ctx),
        reminders: std::mem::replace(
            &mut run.reminders,
            Reminders::new(spec.reminders_full_every),
        ),
        estimate: run.budget.switch_context(PromptEstimate::default()),
    };
    run.transcript.set_agent(Some(agent_id.clone()));
    let abort = parent.ctx.abort.clone();
    let first = Message::user_text(delegation.prompt.clone());
    run.emit(Event::UserMessage {
        content: first.content.clone(),
        extends: false,
        replaces: None,
    })?;
    let mut messages = History::new(vec![first]);
    let mut scope = Scope {
        subagent: Some(agent.clone()),
        max_turns,
        turns: 0,
        stop_continuations: 0,
    };
    // Boxed: the sub-agent's conversation is inside the parent's turn, a future of its own type.
    let nested: Pin<Box<dyn Future<Output = Result<Ending, AgentError>> + '_>> = Box::pin(
        conversation(run, provider, &abort, &mut messages, &mut scope),
    );
    let ended = nested.await;
    run.transcript.set_agent(None);
    run.ctx = parent.ctx;
    run.reminders = parent.reminders;
    run.budget.switch_context(parent.estimate);
    let Ending {
        outcome,
        final_message,
        reason: error,
    } = ended?;
    run.emit(Event::SubagentFinished {
        id: agent_id,
        parent_id: parent_id.to_string(),
        outcome,
        turns: scope.turns,
        usage: usage_since(&usage_before, &run.counts.usage),
        cost_usd: run
            .budget
            .total_cost_usd()
            .zip(cost_before)
            .map(|(after, before)| after - before),
        error: error.clone(),
    })?;
    // The run's own `max_turns` used up inside the sub-agent ends the parent too.
    let run_exhausted = run.requests >= spec.limits.max_turns;
    Ok(answer(agent, outcome, final_message, error, run_exhausted))
}

/// The same tools with a context of its own: its own file-state cache (a write needs its own
/// read), TodoWrite list and deferred tools, limited to what it may use.
fn own_context(parent: &ToolContext, agent: &Subagent) -> ToolContext {
    let catalogue = parent
        .state
        .deferred
        .catalogue()
        .into_iter()
        .filter(|definition| agent.may_use(&definition.name))
        .collect();
    ToolContext {
        files: FileStateCache::default(),
        progress: None,
        state: RunState {
            deferred: DeferredTools::new(catalogue),
            ..RunState::default()
        },
        ..parent.clone()
    }
}

fn usage_since(before: &Usage, after: &Usage) -> Usage {
    Usage {
        input_tokens: after.input_tokens.saturating_sub(before.input_tokens),
        output_tokens: after.output_tokens.saturating_sub(before.output_tokens),
        cache_creation_input_tokens: after
            .cache_creation_input_tokens
            .saturating_sub(before.cache_creation_input_tokens),
        cache_read_input_tokens: after
            .cache_read_input_tokens
            .saturating_sub(before.cache_read_input_tokens),
    }
}

/// The Agent call's result for how the sub-agent ended. Its own turn limit and a refusal
/// are the call's failure; a limit of the whole run (the run's `max_turns` among them) also
/// stops the parent.
fn answer(
    kind: &Subagent,
    outcome: Outcome,
    final_message: Option<String>,
    error: Option<String>,
    run_exhausted: bool,
) -> Ran {
    let why = error.unwrap_or_else(|| format!("it ended with outcome {}", serde_name(&outcome)));
    let failed = |text: String| Ran {
        result: Err(ToolError::Failed(text)),
        stop: None,
    };
    match outcome {
        Outcome::Success => Ran {
            result: Ok(ToolOutput::new(
                final_message
                    .filter(|text| !text.trim().is_empty())
                    .unwrap_or_else(|| format!("(the {kind} sub-agent ended without a message)")),
            )),
            stop: None,
        },
        Outcome::MaxTurns if run_exhausted => Ran {
            result: Err(ToolError::Failed(format!("The {kind} sub-agent stopped: {why}"))),
            stop: Some(Stop { outcome, why }),
        },
        Outcome::MaxTurns | Outcome::Refusal => {
            failed(format!("The {kind} sub-agent ended without an answer: {why}"))
        }
        // The abort reaches the parent's turn by itself, which records the hard stop.
        Outcome::Interrupted | Outcome::Terminated => Ran {
            result: Err(ToolError::Stopped(format!(
                "the {kind} sub-agent was interrupted"
            ))),
            stop: None,
        },
        Outcome::MaxBudgetUsd
        | Outcome::MaxInputTokens
        | Outcome::MaxOutputTokens
        | Outcome::Timeout
        | Outcome::DenialLimit
        | Outcome::ClassifierDenials
        | Outcome::ClassifierUnavailable
        | Outcome::ProviderError
        | Outcome::ContextOverflow
        // A result file of the run could not be written: the whole run ends there.
        | Outcome::OutputFailed
        // Checks, fail_on and the MCP start are the run's, decided around it; a
        // conversation never ends so.
        | Outcome::ChecksFailed
        | Outcome::PolicyDenied
        | Outcome::EffectsExceeded
        | Outcome::McpStartFailed
        // A SubagentStop hook stopped it: the run stops with it.
        | Outcome::HookStopped
        // The output schema is the run's final answer's, never a sub-agent's.
        | Outcome::StructuredOutputInvalid
        // The final answer is the run's, judged around it.
        | Outcome::EmptyAnswer
        // A sub-agent's asks are refused, never parked (`call::Decider`).
        | Outcome::Parked => Ran {
            result: Err(ToolError::Failed(format!("The {kind} sub-agent stopped: {why}"))),
            stop: Some(Stop { outcome, why }),
        },
    }
}
