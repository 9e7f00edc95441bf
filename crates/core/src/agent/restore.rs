//! Going on from a resume: the loop's state restored from what `resume` read back, the
//! `run_resumed` event recorded, and the turn the run stopped inside handed to the loop to
//! go on with.

use super::turn;
use super::{AgentError, Loop, PendingTurn, Resume, push_user};
use crate::model::{ContentBlock, History, Message, Provider, Role};
use crate::policy::ToolName;
use crate::transcript::Event;

/// A resumed run: its state restored from the transcript, `run_resumed` recorded, and the
/// conversation to go on from (a call the run never answered gets its result first).
pub(super) fn resumed(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    mut resume: Resume,
) -> Result<History, AgentError> {
    let mut answers = std::mem::take(&mut resume.answers);
    let spec = run.spec;
    run.counts = resume.counts;
    run.requests = resume.requests;
    run.budget.restore(resume.counts.usage, resume.cost_usd);
    run.calls_by_tool = resume.calls_by_tool;
    run.denials = resume.denials;
    run.effects.measured = resume.effects.measured;
    run.effects.changed = resume.effects.changed;
    run.effects.exceeded = resume.effects.exceeded;
    run.compactions = resume.compactions;
    for (tool, input, decision) in &resume.refused {
        run.refusals.remember(None, tool, input, decision);
    }
    if !resume.todos.is_empty() {
        let snapshot = run.ctx.state.todos.replace(resume.todos.clone());
        run.reminders.shown(snapshot.version);
    }
    let deferred: Vec<ToolName> = run
        .ctx
        .state
        .deferred
        .catalogue()
        .into_iter()
        .map(|definition| definition.name)
        .filter(|name| resume.offered_tools.contains(&name.to_string()))
        .collect();
    // In the order the last request offered them, so the tools array is the same again.
    let mut loaded: Vec<ToolName> = resume
        .offered_tools
        .iter()
        .filter_map(|name| {
            deferred
                .iter()
                .find(|tool| tool.to_string() == *name)
                .cloned()
        })
        .collect();
    loaded.dedup();
    run.ctx.state.deferred.load(&loaded);
    // The transcript only says the run had switched; the model switched to is the
    // operator's fallback (this invocation's), never a name the transcript gives.
    if let Some(to) = &resume.fallback_to
        && let Some(fallback) = run.fallback.take_if(|fallback| fallback.name == *to)
    {
        provider.switch_model(&fallback.name);
        run.budget.reprice(fallback.pricing);
        run.answering = fallback.name;
    }
    // The scripted model answers from the turn after the last one recorded.
    provider.resume_script(resume.responses);
    let mut messages = History::new(resume.messages);
    let mut prompt = spec.resume_prompt.clone();
    let after_turn = resume.interrupted.and_then(|stopped| {
        let calls = !stopped.calls.is_empty();
        // A final answer the run never concluded is superseded by new words.
        if !calls && prompt.is_some() {
            messages.push(stopped.message);
            return None;
        }
        let settled = stopped
            .calls
            .into_iter()
            .filter_map(|(id, state)| {
                let answer = answers.remove(&id);
                turn::Settled::of(state, answer).map(|settled| (id, settled))
            })
            .collect();
        Some(PendingTurn {
            message: stopped.message,
            stop_reason: stopped.stop_reason,
            resumed: turn::Resumed {
                settled,
                prompt: if calls { prompt.take() } else { None },
            },
        })
    });
    if resume.torn {
        tracing::warn!(
            "the transcript's last line was cut short (a run killed while writing it): its {} bytes are dropped and the run goes on after the line before it",
            resume.torn_bytes
        );
    }
    run.emit(Event::RunResumed {
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        after_seq: resume.last_seq,
        mode: spec.mode,
        policy: Box::new(spec.policy_summary.clone()),
        model: spec.model.clone(),
        messages: messages.len(),
        prompt: spec.resume_prompt.clone(),
        requests: run.requests,
        cost_usd: run.budget.total_cost_usd(),
        loaded_tools: loaded.iter().map(ToString::to_string).collect(),
        todos: resume.todos,
        dropped_torn_bytes: resume.torn_bytes,
        turns: resume.counts.turns,
    })?;
    run.pending = after_turn;
    if let Some(prompt) = prompt {
        let text = ContentBlock::Text { text: prompt };
        match messages.last_mut() {
            // Roles alternate: the new words join the last user message.
            Some(last) if last.role == Role::User => {
                last.content.push(text.clone());
                run.emit(Event::UserMessage {
                    content: vec![text],
                    extends: true,
                    replaces: None,
                })?;
            }
            _ => push_user(
                run,
                &mut messages,
                Message {
                    role: Role::User,
                    content: vec![text],
                },
            )?,
        }
    }
    Ok(messages)
}
