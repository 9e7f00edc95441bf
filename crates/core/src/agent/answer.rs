//! A model turn without tool calls, one phase of the loop: a refusal ends the run, a pause
//! or an answer cut off at `max_tokens` goes on, and an answer is the end unless a queued
//! message, the Stop hooks or the output schema send the model back to work.

use super::after_turn::drain_queue;
use super::ending::Ending;
use super::{AgentError, Loop, Next, Scope, hooks, push_user, structured};
use crate::hooks::{EventRuling, HookEvent, MAX_STOP_CONTINUATIONS};
use crate::model::{History, Message, Role, StopReason};
use crate::transcript::{Disposition, Event, Outcome};

/// What the loop does after the model's turn `turn`, which made no call: `text` is its words.
pub(super) async fn without_calls(
    run: &mut Loop<'_>,
    messages: &mut History,
    scope: &mut Scope,
    stop_reason: StopReason,
    text: String,
    turn: u32,
) -> Result<Next, AgentError> {
    match stop_reason {
        StopReason::Refusal => Ok(Next::End(Ending::new(
            Outcome::Refusal,
            Some(text),
            Some("the model declined the task (stop reason: refusal)".into()),
        ))),
        // A server-side pause: sending the turn back as it is lets the model go on.
        StopReason::PauseTurn => Ok(Next::Again),
        StopReason::MaxTokens => {
            push_user(run, messages, Message::user_text(CUT_OFF))?;
            Ok(Next::Again)
        }
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => {
            // A message queued meanwhile starts a new query on this history; it is the
            // run's, so a sub-agent leaves it for its parent.
            let queued = match scope.subagent {
                None => drain_queue(run, Disposition::NewQuery)?,
                Some(_) => Vec::new(),
            };
            if !queued.is_empty() {
                let message = Message {
                    role: Role::User,
                    content: queued,
                };
                push_user(run, messages, message)?;
                return Ok(Next::Again);
            }
            match stop_hooks(run, scope).await? {
                StopHooks::End => {}
                StopHooks::Continue(reason) => {
                    let back = Message::user_text(format!(
                        "A Stop hook says the work is not done: {reason}"
                    ));
                    push_user(run, messages, back)?;
                    return Ok(Next::Again);
                }
                StopHooks::Stopped(why) => {
                    return Ok(Next::End(Ending::new(
                        Outcome::HookStopped,
                        Some(text),
                        Some(why),
                    )));
                }
            }
            structured_answer(run, messages, scope, text, turn)
        }
    }
}

/// The Stop hooks let the answer end the conversation: it is checked against the output
/// schema, if any, and a rejected one sent back with what was wrong while attempts remain.
fn structured_answer(
    run: &mut Loop<'_>,
    messages: &mut History,
    scope: &Scope,
    text: String,
    turn: u32,
) -> Result<Next, AgentError> {
    let spec = run.spec;
    let schema = spec
        .output_schema
        .as_ref()
        .filter(|_| scope.subagent.is_none());
    let Some(schema) = schema else {
        return Ok(Next::End(Ending::answered(Outcome::Success, text)));
    };
    run.structured_answers += 1;
    let attempt = run.structured_answers;
    match structured::check(&schema.schema, &text) {
        Ok(value) => {
            run.structured_output = Some(value);
            Ok(Next::End(Ending::answered(Outcome::Success, text)))
        }
        Err(errors) => {
            // A later answer supersedes an earlier valid one (after a check's feedback):
            // only the last answer counts.
            run.structured_output = None;
            let max = spec.output_schema_attempts;
            run.emit(Event::StructuredOutputRejected {
                turn,
                attempt,
                max_attempts: max,
                errors: errors.clone(),
            })?;
            if attempt >= max {
                return Ok(Next::End(Ending::new(
                    Outcome::StructuredOutputInvalid,
                    Some(text),
                    Some(format!(
                        "the final answer was not valid against the output schema after {max} answers: {}",
                        errors.first().map_or("", String::as_str)
                    )),
                )));
            }
            let feedback = structured::feedback(&errors, attempt, max);
            push_user(run, messages, Message::user_text(feedback))?;
            Ok(Next::Again)
        }
    }
}

/// What the Stop (or SubagentStop) hooks make of the model ending its turn.
enum StopHooks {
    /// The conversation ends.
    End,
    /// Back to work, told why.
    Continue(String),
    /// The run ends as `hook_stopped`.
    Stopped(String),
}

async fn stop_hooks(run: &mut Loop<'_>, scope: &mut Scope) -> Result<StopHooks, AgentError> {
    let active = scope.stop_continuations > 0;
    let (event, fields) = match &scope.subagent {
        None => (
            HookEvent::Stop,
            serde_json::json!({"stop_hook_active": active}),
        ),
        Some(kind) => (
            HookEvent::SubagentStop,
            serde_json::json!({"stop_hook_active": active, "agent_type": kind.to_string()}),
        ),
    };
    Ok(match hooks::moment(run, event, "", fields).await? {
        EventRuling::Proceed { .. } => StopHooks::End,
        EventRuling::Stop { reason } => StopHooks::Stopped(reason),
        EventRuling::Block { reason } if scope.stop_continuations >= MAX_STOP_CONTINUATIONS => {
            StopHooks::Stopped(format!(
                "{reason} (still blocking after {MAX_STOP_CONTINUATIONS} continuations)"
            ))
        }
        EventRuling::Block { reason } => {
            scope.stop_continuations += 1;
            StopHooks::Continue(reason)
        }
    })
}

/// What the model is told when its answer hit `max_tokens` with no tool call in it.
const CUT_OFF: &str = "Your last response was cut off at the max_tokens limit. \
Continue where it stopped; keep each response and tool input short.";
