//! Resuming a run (`tollgate run --resume`): its transcript read back into what the loop
//! needs to go on — the conversation as it was sent, the todo list, the deferred tools
//! ToolSearch loaded, what was spent and counted, the refused calls and the fallback taken —
//! and, for a run that stopped inside a turn, how each of that turn's calls stood: its
//! result recorded, started with its result lost, refused, or never started.
//! A transcript is conversation data: it is read only when every line carries the integrity
//! tag the operator's key made (`crate::state::seal`), and nothing in it configures the run
//! (task, policy, mode, workdir, model and base URL are the operator's invocation's).
//! Decides nothing about what the run may do now.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::{ContentBlock, Message, Role, Usage};
use crate::policy::{Decision, PermissionDecision, PermissionMode, ToolName};
use crate::tools::Todo;
use crate::transcript::{
    CompactionTokens, Denial, Event, Outcome, RecordedLine, ResultStatus, RunCounts,
};

/// What the model is told of a call that started before the run was killed and whose result
/// was never recorded: the command may have run whole, in part, or not at all.
pub const LOST: &str = "[started, its result was lost: the run was killed while this call ran, so it may have taken effect; check before running it again]";

/// How one call of the interrupted turn stood when the run stopped, as the record says.
#[derive(Debug, Clone, PartialEq)]
pub enum CallState {
    /// Its result was recorded: the model gets it as it was.
    Recorded {
        content: String,
        status: ResultStatus,
    },
    /// It started and its result was lost.
    Lost,
    /// It was refused (the decision is on record, its result is not).
    Refused { reason: String },
    /// It was parked for a person (`decision` says who asked and why): a resume goes on
    /// only with a person's answer to it.
    Parked { decision: PermissionDecision },
    /// It never started: it is judged and run now, as if the run had not stopped.
    NotStarted {
        /// Its `tool_call` is on record already (not counted twice).
        announced: bool,
    },
}

/// The run's last model turn, when the run stopped before the next request: its calls still
/// to be answered (or none, for a final answer the run never concluded).
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptedTurn {
    pub message: Message,
    pub stop_reason: crate::model::StopReason,
    /// Each tool_use of `message` by id, in order, with how it stood.
    pub calls: Vec<(String, CallState)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("cannot read the transcript {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the transcript {path}:{line} does not parse: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("the transcript {0} has no run_started: it is not a run's record")]
    NotARun(PathBuf),
    #[error("the transcript {path} is not trusted: {source}")]
    Untrusted {
        path: PathBuf,
        source: crate::state::VerifyError,
    },
}

/// A run as its transcript left it.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub run_id: String,
    pub task_file: PathBuf,
    pub workdir: PathBuf,
    pub mode: Option<PermissionMode>,
    /// The run's own conversation, as it was last sent (or about to be), without the
    /// interrupted turn.
    pub messages: Vec<Message>,
    /// The model's last turn, when nothing followed it: the run goes on from inside it.
    pub interrupted: Option<InterruptedTurn>,
    /// Provider responses recorded (every conversation's turns and the summaries): the
    /// scripted model answers from its next turn.
    pub responses: usize,
    pub todos: Vec<Todo>,
    /// Deferred tools the last request offered, in their order.
    pub offered_tools: Vec<String>,
    pub counts: RunCounts,
    /// Model requests of the whole run, sub-agents' included.
    pub requests: u32,
    pub cost_usd: Option<f64>,
    pub denials: Vec<Denial>,
    /// What the effect ledger measured before (its calls that exceeded their decisions).
    pub effects: crate::transcript::EffectReport,
    /// The run's own refused calls (tool, input, decision), for verbatim repeats.
    pub refused: Vec<(ToolName, Value, PermissionDecision)>,
    pub calls_by_tool: Vec<(ToolName, u32)>,
    /// The model the run had switched to, if it fell back.
    pub fallback_to: Option<String>,
    pub compactions: Vec<CompactionTokens>,
    /// How the run ended, when it said so.
    pub finished: Option<Outcome>,
    /// The last line's sequence number.
    pub last_seq: u64,
    /// The bytes of whole, verified lines: a torn last line past them is dropped.
    pub verified_len: u64,
    /// The last line's integrity tag, the chain goes on from it.
    pub last_tag: [u8; 32],
    /// The last line was cut short (a run killed while writing it) and is left out.
    pub torn: bool,
    /// That line's bytes.
    pub torn_bytes: u64,
    /// A person's answer to each parked call of the interrupted turn, by id (checked by the
    /// session against `approvals.jsonl` before the run goes on).
    pub answers: HashMap<String, crate::approval::PersonAnswer>,
}

impl Resume {
    /// The interrupted turn's parked calls, with the tool and input the record holds.
    pub fn parked(&self) -> Vec<crate::approval::ParkedOnRecord> {
        let Some(turn) = &self.interrupted else {
            return Vec::new();
        };
        turn.calls
            .iter()
            .filter(|(_, state)| matches!(state, CallState::Parked { .. }))
            .filter_map(|(id, _)| {
                turn.message.content.iter().find_map(|block| match block {
                    ContentBlock::ToolUse {
                        id: used,
                        name,
                        input,
                    } if used == id => Some(crate::approval::ParkedOnRecord {
                        id: id.clone(),
                        tool: name.clone(),
                        input: input.clone(),
                    }),
                    _ => None,
                })
            })
            .collect()
    }
}

impl Resume {
    /// Reads `transcript` whole (never through a symbolic link) and checks every line's
    /// tag with `key`: a line that fails refuses the resume; a last line cut short is left
    /// out. A tagged line that does not parse refuses it too.
    pub fn read(
        transcript: &Path,
        key: Option<&crate::state::TranscriptKey>,
    ) -> Result<Resume, ResumeError> {
        let read_error = |source| ResumeError::Read {
            path: transcript.to_path_buf(),
            source,
        };
        let mut text = String::new();
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(transcript)
            .and_then(|mut file| std::io::Read::read_to_string(&mut file, &mut text))
            .map_err(read_error)?;
        let verified =
            crate::state::verify(key, &text).map_err(|source| ResumeError::Untrusted {
                path: transcript.to_path_buf(),
                source,
            })?;
        let mut state = Resume {
            verified_len: verified.text.len() as u64,
            last_tag: verified.last,
            torn: verified.torn,
            torn_bytes: (text.len() - verified.text.len()) as u64,
            ..Resume::default()
        };
        let mut builder = Builder::default();
        let mut started = false;
        for (index, line) in verified.text.lines().enumerate() {
            let recorded: RecordedLine =
                serde_json::from_str(line).map_err(|err| ResumeError::Parse {
                    path: transcript.to_path_buf(),
                    line: index + 1,
                    message: err.to_string(),
                })?;
            started |= matches!(recorded.event, Event::RunStarted { .. });
            state.last_seq = recorded.seq;
            builder.read(&mut state, recorded);
        }
        if !started {
            return Err(ResumeError::NotARun(transcript.to_path_buf()));
        }
        state.interrupted = builder.interrupted(&mut state.messages);
        Ok(state)
    }
}

/// What only the reading needs: calls' inputs by id, the cost's known-ness, and how the
/// calls stood (started, refused, answered) for the interrupted turn.
#[derive(Default)]
struct Builder {
    inputs: HashMap<String, (ToolName, Value)>,
    priced: bool,
    started: HashSet<String>,
    refused: HashMap<String, String>,
    parked: HashMap<String, PermissionDecision>,
    results: HashMap<String, (String, ResultStatus)>,
    /// The stop reason of the run's own last model turn.
    stop_reason: Option<crate::model::StopReason>,
}

impl Builder {
    fn read(&mut self, state: &mut Resume, line: RecordedLine) {
        let main = line.agent_id.is_none();
        match line.event {
            Event::RunStarted {
                run_id,
                task,
                mode,
                workdir,
                ..
            } => {
                state.run_id = run_id;
                state.task_file = task.file;
                state.workdir = workdir;
                state.mode = Some(mode);
                self.priced = true;
                state.cost_usd = Some(0.0);
            }
            Event::RunResumed { mode, .. } => {
                state.mode = Some(mode);
                // The run went on: an earlier ending is not this one's.
                state.finished = None;
            }
            Event::ModelRequest { tools, .. } => {
                state.requests += 1;
                if main {
                    state.counts.turns += 1;
                    state.offered_tools = tools;
                }
            }
            Event::AssistantMessage {
                content,
                usage,
                cost_usd,
                usage_source,
                stop_reason,
                ..
            } => {
                self.spend(state, &usage, cost_usd);
                state.responses += 1;
                if !usage_source.is_reported() {
                    state.counts.estimated_requests += 1;
                }
                if main {
                    self.stop_reason = Some(stop_reason);
                    state.messages.push(Message {
                        role: Role::Assistant,
                        content,
                    });
                }
            }
            Event::Compaction {
                usage,
                cost_usd,
                outcome,
                tokens,
                responses,
                ..
            } => {
                self.spend(state, &usage, cost_usd);
                state.responses += responses as usize;
                if outcome == crate::transcript::CompactionOutcome::Compacted {
                    state.compactions.push(tokens);
                }
            }
            Event::UserMessage {
                content,
                extends,
                replaces,
            } if main => add_user(&mut state.messages, content, extends, replaces),
            // A call judged again on resume is announced again: counted once.
            Event::ToolCall { id, .. } if self.inputs.contains_key(&id) => {}
            Event::ToolCall { id, tool, input } => {
                let name = ToolName::from_model(&tool);
                state.counts.tool_calls += 1;
                match state
                    .calls_by_tool
                    .iter_mut()
                    .find(|(seen, _)| *seen == name)
                {
                    Some((_, count)) => *count += 1,
                    None => state.calls_by_tool.push((name.clone(), 1)),
                }
                self.inputs.insert(id, (name, input));
            }
            Event::PermissionDecision { id, decision, .. } => {
                self.decided(state, id, decision, main);
            }
            Event::ToolStarted { id, .. } => {
                self.started.insert(id);
            }
            Event::ToolResult {
                id,
                tool,
                status,
                effects,
                content,
                ..
            } => {
                self.results.insert(id.clone(), (content, status));
                if status == ResultStatus::Error {
                    state.counts.tool_errors += 1;
                }
                if let (Some(effects), Some((name, input))) = (&effects, self.inputs.get(&id)) {
                    state.effects.tally(&id, name, input, effects);
                }
                // The list is the last one TodoWrite accepted in the run's own conversation.
                if main
                    && tool == ToolName::TodoWrite.to_string()
                    && status == ResultStatus::Success
                    && let Some((_, input)) = self.inputs.get(&id)
                    && let Ok(todos) = serde_json::from_value::<Vec<Todo>>(input["todos"].clone())
                {
                    state.todos = todos;
                }
            }
            Event::ModelFallback { to, .. } => state.fallback_to = Some(to),
            Event::RunFinished { outcome, .. } => state.finished = Some(outcome),
            // Each of these is in the history through a user or assistant message already
            // (queued messages, reminders, replaced results, check feedback), or is not part of
            // it at all; a sub-agent's messages are its own conversation's.
            Event::UserMessage { .. }
            | Event::McpNotification { .. }
            | Event::McpTools { .. }
            | Event::ApiRetry { .. }
            | Event::StreamingOff { .. }
            | Event::ClassifierCall { .. }
            | Event::HookRun { .. }
            | Event::ToolProgress { .. }
            | Event::QueuedMessage { .. }
            | Event::InputSkipped { .. }
            | Event::QueryAborted { .. }
            | Event::NetworkConnection { .. }
            | Event::CheckResult { .. }
            | Event::CheckFeedback { .. }
            | Event::SubagentStarted { .. }
            | Event::SubagentFinished { .. }
            | Event::Reminder { .. }
            | Event::MessageBudget { .. }
            | Event::StructuredOutputRejected { .. }
            | Event::EventHooks { .. } => {}
        }
    }

    fn spend(&mut self, state: &mut Resume, usage: &Usage, cost_usd: Option<f64>) {
        state.counts.usage.add(usage);
        match (cost_usd, &mut state.cost_usd) {
            (Some(cost), Some(total)) if self.priced => *total += cost,
            _ => {
                self.priced = false;
                state.cost_usd = None;
            }
        }
    }

    fn decided(
        &mut self,
        state: &mut Resume,
        id: String,
        decision: PermissionDecision,
        main: bool,
    ) {
        match decision.decision {
            Decision::Allow => return,
            // Not a refusal: it waits for a person.
            Decision::Defer => {
                self.parked.insert(id, decision);
                return;
            }
            Decision::Deny | Decision::Ask => {}
        }
        self.refused.insert(
            id.clone(),
            format!("Permission denied: {}", decision.reason),
        );
        state.counts.denials += 1;
        state.counts.denials_by_layer.count(decision.layer);
        let (tool, input) = self
            .inputs
            .get(&id)
            .cloned()
            .unwrap_or((ToolName::from_model(""), Value::Null));
        if main {
            state
                .refused
                .push((tool.clone(), input.clone(), decision.clone()));
        }
        state.denials.push(Denial {
            id,
            tool,
            input,
            decision,
        });
    }
}

fn add_user(
    messages: &mut Vec<Message>,
    content: Vec<ContentBlock>,
    extends: bool,
    replaces: Option<usize>,
) {
    match (extends, replaces, messages.last_mut()) {
        (true, _, Some(last)) if last.role == Role::User => last.content.extend(content),
        (_, Some(dropped), _) => {
            let kept = messages.split_off(dropped.min(messages.len()));
            *messages = std::iter::once(Message {
                role: Role::User,
                content,
            })
            .chain(kept)
            .collect();
        }
        _ => messages.push(Message {
            role: Role::User,
            content,
        }),
    }
}

impl Builder {
    /// The run's last model turn, taken off `messages`, when nothing followed it: a run
    /// killed while its calls ran (or before it concluded a final answer). Each call is
    /// placed by the record: its result, started and lost, refused, or never started.
    fn interrupted(&self, messages: &mut Vec<Message>) -> Option<InterruptedTurn> {
        if messages.last()?.role != Role::Assistant {
            return None;
        }
        let message = messages.pop()?;
        let calls = message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .map(|id| {
                let state = if let Some((content, status)) = self.results.get(&id) {
                    CallState::Recorded {
                        content: content.clone(),
                        status: *status,
                    }
                } else if self.started.contains(&id) {
                    CallState::Lost
                } else if let Some(reason) = self.refused.get(&id) {
                    CallState::Refused {
                        reason: reason.clone(),
                    }
                } else if let Some(decision) = self.parked.get(&id) {
                    CallState::Parked {
                        decision: decision.clone(),
                    }
                } else {
                    CallState::NotStarted {
                        announced: self.inputs.contains_key(&id),
                    }
                };
                (id, state)
            })
            .collect();
        Some(InterruptedTurn {
            message,
            stop_reason: self
                .stop_reason
                .unwrap_or(crate::model::StopReason::EndTurn),
            calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_replaces_the_head_and_an_interruption_extends_the_last_message() {
        let text = |t: &str| vec![ContentBlock::Text { text: t.into() }];
        let mut messages = Vec::new();
        add_user(&mut messages, text("task"), false, None);
        messages.push(Message {
            role: Role::Assistant,
            content: text("a1"),
        });
        add_user(&mut messages, text("r1"), false, None);
        messages.push(Message {
            role: Role::Assistant,
            content: text("a2"),
        });
        add_user(&mut messages, text("r2"), false, None);
        add_user(&mut messages, text("summary"), false, Some(3));
        let texts: Vec<String> = messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["summary", "a2", "r2"]);
        add_user(&mut messages, text("[interrupted]"), true, None);
        assert_eq!(messages.last().unwrap().text(), "r2\n[interrupted]");
    }

    #[test]
    fn each_call_of_the_interrupted_turn_is_placed_by_the_record() {
        let call = |id: &str| ContentBlock::ToolUse {
            id: id.into(),
            name: "Bash".into(),
            input: serde_json::json!({"command": "true"}),
        };
        let mut messages = vec![
            Message::user_text("task"),
            Message {
                role: Role::Assistant,
                content: vec![call("done"), call("lost"), call("refused"), call("pending")],
            },
        ];
        let mut builder = Builder::default();
        builder
            .results
            .insert("done".into(), ("ok".into(), ResultStatus::Success));
        builder.started.insert("done".into());
        builder.started.insert("lost".into());
        builder
            .refused
            .insert("refused".into(), "Permission denied: no".into());
        builder
            .inputs
            .insert("pending".into(), (ToolName::Bash, serde_json::json!({})));
        let turn = builder.interrupted(&mut messages).unwrap();
        assert_eq!(messages.len(), 1, "the turn is taken off the history");
        let states: Vec<&CallState> = turn.calls.iter().map(|(_, state)| state).collect();
        assert_eq!(
            states,
            [
                &CallState::Recorded {
                    content: "ok".into(),
                    status: ResultStatus::Success
                },
                &CallState::Lost,
                &CallState::Refused {
                    reason: "Permission denied: no".into()
                },
                &CallState::NotStarted { announced: true },
            ]
        );
        // A history that ends with the user's message has no interrupted turn.
        assert_eq!(builder.interrupted(&mut messages), None);
    }
}
