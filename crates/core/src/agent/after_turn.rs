//! After a turn's calls landed, before their results go back: the sandbox proxy's
//! connections recorded, queued user messages drained into the next message, and the
//! per-message result budget (S8) applied once.

use super::{AgentError, Loop};
use crate::model::ContentBlock;
use crate::scheduler::QueuedInput;
use crate::transcript::{Disposition, Event};

/// The connections the sandbox's proxy saw during the batch, as transcript events; refused
/// ones are kept for SARIF.
pub(super) fn record_network(run: &mut Loop<'_>) -> Result<(), AgentError> {
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
pub(super) fn fit_message_budget(
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
