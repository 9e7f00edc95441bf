//! After a turn's calls landed, before their results go back: the sandbox proxy's
//! connections recorded, the run ended for a parked call, the per-message result budget (S8)
//! applied once, queued user messages drained into the next message and a reminder added;
//! then the results sent back, and the run ended if the turn stopped it.

use super::ending::{Ending, hard_stop};
use super::turn::Played;
use super::{AgentError, Loop, Next, Scope, push_user};
use crate::base::{AbortReason, AbortSignal};
use crate::model::{ContentBlock, History, Message, Role};
use crate::scheduler::{QueuedInput, TurnEnd};
use crate::transcript::{AbortCause, Disposition, Event, Outcome, QueryEnd};

/// Closes the model's turn `turn` once its calls landed: their results (and what joins
/// them) become the next user message, unless the turn ended the run.
pub(super) fn close(
    run: &mut Loop<'_>,
    abort: &AbortSignal,
    messages: &mut History,
    scope: &Scope,
    turn: u32,
    played: Played,
) -> Result<Next, AgentError> {
    let Played {
        end,
        stopped,
        exempt,
        mut results,
        parked,
        prompt,
    } = played;
    record_network(run)?;
    // A parked call has no result until a person answers it, and the model cannot be asked
    // again before every call has one: the run ends here, the turn's other results
    // recorded, and `--resume` goes on inside this turn (Claude Code's `tool_deferred`).
    // Only the run's own conversation parks (see `call::Decider`).
    if !parked.is_empty() {
        let ids: Vec<&str> = parked.iter().map(|call| call.id.as_str()).collect();
        let why = format!(
            "{} call(s) await a person's approval: {} (see {}; `tollgate approve`, then `tollgate run --resume`)",
            parked.len(),
            ids.join(", "),
            crate::approval::PENDING_FILE
        );
        run.parked = parked;
        return Ok(Next::End(Ending::stopped(Outcome::Parked, why)));
    }
    fit_message_budget(run, turn, &mut results, &exempt)?;
    match end {
        TurnEnd::Complete if scope.subagent.is_none() => {
            results.extend(drain_queue(run, Disposition::Drained)?);
        }
        TurnEnd::Complete => {}
        // Completed results are kept; the queued message follows them and gives the
        // context, so no "[Request interrupted]" is added (seed §5.2 E).
        TurnEnd::Interrupted => {
            run.emit(Event::QueryAborted {
                reason: QueryEnd::AbortedTools,
                by: AbortCause::Interrupt,
                message: None,
            })?;
            results.extend(drain_queue(run, Disposition::Interrupt)?);
        }
        TurnEnd::HardStopped => {}
    }
    let todos = run.ctx.state.todos.snapshot();
    if let Some((kind, content)) = run.reminders.next(&todos) {
        run.emit(Event::Reminder {
            turn,
            kind,
            content: content.clone(),
        })?;
        results.push(ContentBlock::Text { text: content });
    }
    // A resume's new words join the results of the turn it went on inside.
    if let Some(prompt) = prompt {
        results.push(ContentBlock::Text { text: prompt });
    }
    push_user(
        run,
        messages,
        Message {
            role: Role::User,
            content: results,
        },
    )?;
    if end == TurnEnd::HardStopped {
        let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
        return hard_stop(run, messages, reason, QueryEnd::AbortedTools).map(Next::End);
    }
    Ok(match stopped {
        Some(stop) => Next::End(Ending::stopped(stop.outcome, stop.why)),
        None => Next::Again,
    })
}

/// The connections the sandbox's proxy saw during the batch, as transcript events; refused
/// ones are kept for SARIF.
fn record_network(run: &mut Loop<'_>) -> Result<(), AgentError> {
    let Some(sandbox) = run.ctx.sandbox.clone() else {
        return Ok(());
    };
    for connection in sandbox.take_proxy_log() {
        if !connection.allowed {
            run.network_refusals.push(connection.clone());
        }
        run.emit(Event::NetworkConnection { connection })?;
    }
    Ok(())
}

/// The queued messages as text blocks for the next user message, each recorded with where
/// it went.
pub(super) fn drain_queue(
    run: &mut Loop<'_>,
    disposition: Disposition,
) -> Result<Vec<ContentBlock>, AgentError> {
    let Some(queue) = &run.spec.queue else {
        return Ok(Vec::new());
    };
    let mut blocks = Vec::new();
    for entry in queue.drain() {
        let content = match entry {
            QueuedInput::Message(content) => content,
            QueuedInput::Skipped { line, reason } => {
                run.emit(Event::InputSkipped {
                    line,
                    reason: reason.to_string(),
                })?;
                continue;
            }
        };
        run.emit(Event::QueuedMessage {
            content: content.clone(),
            disposition,
        })?;
        blocks.push(ContentBlock::Text { text: content });
    }
    Ok(blocks)
}

/// The per-message budget (S8): when the results of this turn exceed
/// `limits.message_result_chars`, the largest are offloaded and replaced by previews. Runs
/// once, before the message is first sent; it is never revisited, so every later request
/// repeats this message byte for byte.
fn fit_message_budget(
    run: &mut Loop<'_>,
    turn: u32,
    results: &mut [ContentBlock],
    exempt: &std::collections::HashSet<String>,
) -> Result<(), AgentError> {
    let sizes: Vec<Option<usize>> = results
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } if !exempt.contains(tool_use_id) => Some(content.chars().count()),
            _ => None,
        })
        .collect();
    let replace = crate::results::over_budget(&sizes, run.spec.limits.message_result_chars);
    if replace.is_empty() {
        return Ok(());
    }
    let chars_before: usize = sizes.iter().flatten().sum();
    let mut replaced = Vec::new();
    for index in replace {
        if let Some(ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        }) = results.get_mut(index)
        {
            let chars = content.chars().count();
            let fitted = run
                .results
                .offload(tool_use_id, content, crate::results::KEPT_CHARS);
            *content = run.keep(fitted);
            replaced.push(crate::transcript::ReplacedResult {
                id: tool_use_id.clone(),
                chars,
                content: content.clone(),
            });
        }
    }
    let chars_after = results
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } if !exempt.contains(tool_use_id) => content.chars().count(),
            _ => 0,
        })
        .sum();
    run.emit(Event::MessageBudget {
        turn,
        replaced,
        chars_before,
        chars_after,
    })
}
