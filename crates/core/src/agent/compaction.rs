//! Compaction (S8's second mechanism, beside result offload): when the next request would
//! pass `compaction.threshold` of the model's context window — or the provider refused one as
//! too long — the older turns are summarised by the same provider under a fixed instruction
//! and replaced by that summary. The system prompt and tools stay byte-identical, the most
//! recent turns are kept as they were sent, and the task, the todo list, the offloaded result
//! files and the refused calls are restated; no decision is made again.
//!
//! Compaction is bounded: each summary request has its own clock (`SUMMARY_TIMEOUT`), a
//! summary past `summary_cap` is refused and asked for once more, a failed attempt holds
//! the threshold off for a while (`BACKOFF_TURNS` per failure so far), and after
//! `MAX_FAILURES` failed attempts the run compacts no more: a provider's overflow then ends
//! it as `context_overflow`.

use std::sync::Arc;

use super::attempt::attempt;
use super::ending::Ending;
use super::{AgentError, Loop, reminders};
use crate::base::AbortSignal;
use crate::hooks::{CompactInput, HookConfinement, run_pre_compact};
use crate::model::{ContentBlock, History, Message, ModelRequest, Provider, Role, ToolSpec};
use crate::tools::trusted_git_env;
use crate::transcript::{
    CompactionOutcome, CompactionTokens, CompactionTrigger, Event, UsageSource,
};

/// What the model is asked for: fixed and short, so the summary request is the same kind of
/// request every time and nothing in it comes from the run.
pub const INSTRUCTION: &str = "The conversation above is about to be compacted to fit your \
context window. Summarise it for your own later use: the task, what was done and found (files, \
commands, results), decisions made, what failed, and what remains to do. Keep paths, names and \
numbers exact. Write only the summary as plain text; do not call tools.";

/// What the model is asked the second time, after a summary over the cap.
pub const SHORTER: &str = "That summary was too long to keep. Write it again, much shorter: \
only what is needed to go on with the task.";

/// At most this many refused calls are restated.
const MAX_REFUSALS_LISTED: usize = 20;

/// Failed compactions a run may have; past them it compacts no more.
pub const MAX_FAILURES: u32 = 3;
/// After the n-th failure, the threshold does not trigger for n times this many turns.
pub const BACKOFF_TURNS: u32 = 5;
/// One summary request's clock, its retries included.
pub const SUMMARY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// A summary may fill at most this share of the context window.
pub const SUMMARY_WINDOW_SHARE: u64 = 4;
/// Bytes a token, for the summary's cap: generous, so a summary within the cap in the
/// model's own tokens is never refused.
const SUMMARY_BYTES_PER_TOKEN: u64 = 4;

/// How the run's compactions failed so far: the threshold backs off after a failure, and
/// the attempts stop after `MAX_FAILURES`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Backoff {
    failures: u32,
    /// The threshold is not tried before this turn.
    next_turn: u32,
}

impl Backoff {
    /// No attempt is left for the run.
    pub fn spent(&self) -> bool {
        self.failures >= MAX_FAILURES
    }

    fn failed(&mut self, turn: u32) {
        self.failures += 1;
        self.next_turn = turn.saturating_add(BACKOFF_TURNS.saturating_mul(self.failures));
    }
}

/// The most tokens a summary may have: a quarter of the window, or without a known window
/// what the summary request may answer.
fn summary_cap(window: Option<u64>, max_tokens: u32) -> u64 {
    window.map_or(u64::from(max_tokens), |window| {
        (window / SUMMARY_WINDOW_SHARE).max(1)
    })
}

/// What a compaction attempt left.
pub(super) enum Compacted {
    /// The history is shorter now.
    Yes,
    /// The history is as it was (vetoed, nothing to drop, no summary to be had).
    No,
    /// The run must stop: `None` for a signal (the caller records it), else how it ended.
    Stopped(Option<Ending>),
}

/// Whether the next request (turn `turn`), `prompt_bytes` long, would pass the threshold of
/// the window, and an attempt may be made now.
pub(super) fn due(run: &Loop<'_>, prompt_bytes: usize, turn: u32) -> bool {
    let compaction = run.spec.compaction;
    let Some(window) = run.spec.context_window else {
        return false;
    };
    compaction.enabled
        && !run.backoff.spent()
        && turn >= run.backoff.next_turn
        && run.budget.prompt_estimate(prompt_bytes) as f64 > compaction.threshold * window as f64
}

/// The request's parts that compaction never touches.
pub(super) struct Fixed<'s> {
    pub system: &'s str,
    pub tools: &'s [ToolSpec],
    /// Their size in bytes, for the estimates.
    pub bytes: usize,
}

/// Compacts `messages` (the run's own conversation) if it can, and records what happened.
pub(super) async fn compact(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut History,
    fixed: &Fixed<'_>,
    turn: u32,
    trigger: CompactionTrigger,
) -> Result<Compacted, AgentError> {
    if !run.spec.compaction.enabled || run.backoff.spent() {
        return Ok(Compacted::No);
    }
    let bytes_before = fixed.bytes + messages.encoded_len();
    let tokens_before = run.budget.prompt_estimate(bytes_before);
    let mut record = Record {
        turn,
        trigger: Some(trigger),
        tokens_before,
        ..Record::default()
    };
    let Some(cut) = split(messages, run.spec.compaction.keep_recent) else {
        record.reason = Some("too few turns to compact".into());
        return record
            .emit(run, CompactionOutcome::Failed)
            .map(|()| Compacted::No);
    };
    let ruling = pre_compact_hooks(run).await;
    record.hooks = ruling.runs;
    if let Some(veto) = ruling.veto {
        record.reason = Some(veto);
        return record
            .emit(run, CompactionOutcome::Vetoed)
            .map(|()| Compacted::No);
    }
    let window = run.spec.context_window;
    record.asked = true;
    let mut summary = String::new();
    for asked in 0..2 {
        let mut older = History::new(messages[..cut].to_vec());
        if let Some(last) = older.last_mut() {
            last.content.push(ContentBlock::Text {
                text: INSTRUCTION.to_string(),
            });
            if asked > 0 {
                last.content.push(ContentBlock::Text {
                    text: SHORTER.to_string(),
                });
            }
        }
        let summary_bytes = fixed.bytes + older.encoded_len();
        let admitted = match run.budget.admit(summary_bytes) {
            Ok(max_tokens) => max_tokens,
            Err(limit) => {
                return Ok(Compacted::Stopped(Some(Ending::stopped(
                    limit.outcome,
                    limit.reason,
                ))));
            }
        };
        let cap = summary_cap(window, admitted);
        let wanted = u32::try_from(cap).map_or(admitted, |cap| admitted.min(cap));
        let (max_tokens, lease) = match run.budget.reserve(summary_bytes, wanted) {
            Ok(granted) => granted,
            Err(limit) => {
                return Ok(Compacted::Stopped(Some(Ending::stopped(
                    limit.outcome,
                    limit.reason,
                ))));
            }
        };
        let request = ModelRequest {
            system: fixed.system,
            messages: &older,
            tools: fixed.tools,
            max_tokens,
        };
        let answered = tokio::time::timeout(
            SUMMARY_TIMEOUT,
            attempt(run, provider, &request, turn, abort),
        )
        .await;
        let response = match answered {
            Err(_) => {
                record.reason = Some(format!(
                    "the summary request took longer than {}s",
                    SUMMARY_TIMEOUT.as_secs()
                ));
                return record
                    .emit(run, CompactionOutcome::Failed)
                    .map(|()| Compacted::No);
            }
            Ok(answered) => match answered? {
                Err(stopped) => return Ok(Compacted::Stopped(stopped)),
                Ok(Err(err)) => {
                    record.reason = Some(format!("the summary request failed: {err}"));
                    return record
                        .emit(run, CompactionOutcome::Failed)
                        .map(|()| Compacted::No);
                }
                Ok(Ok(response)) => response,
            },
        };
        record.responses += 1;
        let usage = response.usage.tokens();
        run.counts.usage.add(&usage);
        if UsageSource::of(&response.usage) == UsageSource::Estimated {
            run.counts.estimated_requests += 1;
        }
        let cost = run.budget.record(&usage, summary_bytes);
        crate::shared_budget::settle(lease, cost);
        record.cost_usd = match (record.cost_usd, cost) {
            (Some(before), Some(cost)) => Some(before + cost),
            (None, cost) if record.responses == 1 => cost,
            _ => None,
        };
        record.usage.add(&usage);
        summary = Message {
            role: Role::Assistant,
            content: response.content,
        }
        .text();
        if summary.trim().is_empty() {
            record.reason = Some("the model answered without a summary".into());
            return record
                .emit(run, CompactionOutcome::Failed)
                .map(|()| Compacted::No);
        }
        let tokens = (summary.len() as u64).div_ceil(SUMMARY_BYTES_PER_TOKEN);
        if tokens <= cap {
            break;
        }
        record.reason = Some(format!(
            "the summary was too long: about {tokens} tokens, over the cap of {cap} ({})",
            match window {
                Some(_) => "a quarter of the context window",
                None => "the summary request's max_tokens",
            }
        ));
        if asked > 0 {
            return record
                .emit(run, CompactionOutcome::Failed)
                .map(|()| Compacted::No);
        }
    }
    record.reason = None;
    record.dropped_tool_uses = messages[..cut]
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let standing = restated(run, cut, &summary, &ruling.added);
    run.emit(Event::UserMessage {
        content: standing.content.clone(),
        extends: false,
        replaces: Some(cut),
    })?;
    let mut kept = vec![standing];
    kept.extend(messages[cut..].iter().cloned());
    record.dropped_messages = cut;
    record.kept_messages = messages.len() - cut;
    *messages = History::new(kept);
    let bytes_after = fixed.bytes + messages.encoded_len();
    // The tokens a byte cost before, applied to what is left: the next response counts it.
    let per_byte = tokens_before as f64 / bytes_before.max(1) as f64;
    record.tokens_after = (bytes_after as f64 * per_byte).ceil() as u64;
    run.budget.calibrate(record.tokens_after, bytes_after);
    record.summary = summary;
    record.emit(run, CompactionOutcome::Compacted)?;
    Ok(Compacted::Yes)
}

/// Where the kept turns start: the `keep_recent`-th assistant message from the end (fewer
/// when the history has fewer, one at least), so the dropped part ends with a user message
/// and every kept tool_use keeps its result. `None` when nothing could be dropped.
fn split(messages: &[Message], keep_recent: u32) -> Option<usize> {
    let assistants: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == Role::Assistant)
        .map(|(index, _)| index)
        .collect();
    if assistants.len() < 2 {
        return None;
    }
    let keep = usize::try_from(keep_recent)
        .unwrap_or(usize::MAX)
        .clamp(1, assistants.len() - 1);
    assistants.get(assistants.len() - keep).copied()
}

/// The user message that stands for the dropped turns: the task as given, the summary, the
/// offloaded files, the refused calls, the hooks' text; then the todo list in full.
fn restated(run: &Loop<'_>, dropped: usize, summary: &str, added: &[String]) -> Message {
    let mut text = format!(
        "<compacted-history>\nThe conversation was compacted to fit the context window: its first {dropped} messages were replaced by this summary. The system prompt, the tools and the most recent turns are unchanged.\n\nThe task, as first given:\n{}\n\nSummary of the earlier turns:\n{}\n",
        run.spec.prompt,
        summary.trim()
    );
    let files = offloaded_files(run);
    if !files.is_empty() {
        text.push_str("\nOffloaded tool results (whole; Read or Grep them):\n");
        for file in files {
            text.push_str(&format!("- {file}\n"));
        }
    }
    let refused = run.refusals.lines(MAX_REFUSALS_LISTED);
    if !refused.is_empty() {
        text.push_str("\nCalls refused so far (repeating one gets the same refusal):\n");
        for line in refused {
            text.push_str(&format!("- {line}\n"));
        }
    }
    for note in added {
        text.push_str(&format!("\n{}\n", note.trim()));
    }
    text.push_str("</compacted-history>");
    let mut content = vec![ContentBlock::Text { text }];
    let todos = run.ctx.state.todos.snapshot();
    if !todos.items.is_empty() {
        content.push(ContentBlock::Text {
            text: reminders::full(&todos),
        });
    }
    Message {
        role: Role::User,
        content,
    }
}

/// The files in the run's results folder, sorted.
fn offloaded_files(run: &Loop<'_>) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(run.results.dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.path().display().to_string())
        .filter(|path| !path.ends_with(".tmp"))
        .collect();
    files.sort();
    files
}

async fn pre_compact_hooks(run: &mut Loop<'_>) -> crate::hooks::CompactRuling {
    let mode = run.spec.mode.to_string();
    let input = CompactInput {
        session_id: &run.spec.run_id,
        transcript_path: run.transcript.path(),
        cwd: &run.spec.workspace.workdir,
        permission_mode: &mode,
        trigger: "auto",
    };
    let confinement = run
        .ctx
        .sandbox
        .clone()
        .filter(|sandbox| sandbox.confines_hooks())
        .map(|sandbox| Arc::new(super::hooks::InSandbox(sandbox)) as Arc<dyn HookConfinement>);
    run_pre_compact(
        &run.spec.hooks,
        &input,
        &trusted_git_env(&run.spec.env.hooks),
        &run.ctx.abort,
        confinement,
    )
    .await
}

/// The `compaction` event in the making.
#[derive(Default)]
struct Record {
    turn: u32,
    trigger: Option<CompactionTrigger>,
    tokens_before: u64,
    tokens_after: u64,
    dropped_messages: usize,
    kept_messages: usize,
    dropped_tool_uses: Vec<String>,
    summary: String,
    usage: crate::model::Usage,
    cost_usd: Option<f64>,
    reason: Option<String>,
    hooks: Vec<crate::hooks::HookRun>,
    responses: u32,
    /// A summary request was made (or its budget refused it).
    asked: bool,
}

impl Record {
    fn emit(self, run: &mut Loop<'_>, outcome: CompactionOutcome) -> Result<(), AgentError> {
        let tokens = CompactionTokens {
            turn: self.turn,
            tokens_before: self.tokens_before,
            tokens_after: match outcome {
                CompactionOutcome::Compacted => self.tokens_after,
                CompactionOutcome::Vetoed | CompactionOutcome::Failed => self.tokens_before,
            },
        };
        match outcome {
            CompactionOutcome::Compacted => run.compactions.push(tokens),
            // Only a summary asked for and not had counts: "too few turns" cost nothing.
            CompactionOutcome::Failed if self.asked => run.backoff.failed(self.turn),
            CompactionOutcome::Failed => {}
            CompactionOutcome::Vetoed => {}
        }
        run.emit(Event::Compaction {
            turn: self.turn,
            trigger: self.trigger.unwrap_or(CompactionTrigger::Threshold),
            outcome,
            dropped_messages: self.dropped_messages,
            kept_messages: self.kept_messages,
            dropped_tool_uses: self.dropped_tool_uses,
            tokens,
            summary: self.summary,
            usage: self.usage,
            cost_usd: self.cost_usd,
            reason: self.reason,
            hooks: self.hooks,
            responses: self.responses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(n: usize) -> Vec<Message> {
        let mut messages = vec![Message::user_text("task")];
        for i in 0..n {
            messages.push(Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: format!("t{i}"),
                    name: "Read".into(),
                    input: serde_json::json!({}),
                }],
            });
            messages.push(Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: format!("t{i}"),
                    content: "x".into(),
                    is_error: false,
                }],
            });
        }
        messages
    }

    #[test]
    fn the_kept_part_starts_with_an_assistant_turn_and_something_is_dropped() {
        assert_eq!(split(&exchange(1), 4), None);
        // Two turns: one is kept whatever keep_recent asks, so one can be dropped.
        assert_eq!(split(&exchange(2), 4), Some(3));
        assert_eq!(split(&exchange(10), 4), Some(13));
        assert_eq!(split(&exchange(10), 1), Some(19));
        let messages = exchange(10);
        let cut = split(&messages, 3).unwrap();
        assert_eq!(messages[cut].role, Role::Assistant);
        assert_eq!(messages[cut - 1].role, Role::User);
    }

    #[test]
    fn failures_back_off_more_each_time_and_stop_at_the_bound() {
        let mut backoff = Backoff::default();
        assert!(!backoff.spent());
        backoff.failed(3);
        assert_eq!(backoff.next_turn, 3 + BACKOFF_TURNS);
        backoff.failed(8);
        assert_eq!(backoff.next_turn, 8 + 2 * BACKOFF_TURNS);
        assert!(!backoff.spent());
        backoff.failed(18);
        assert!(backoff.spent());
    }

    #[test]
    fn a_summary_is_capped_at_a_quarter_of_the_window_else_its_max_tokens() {
        assert_eq!(summary_cap(Some(200_000), 8000), 50_000);
        assert_eq!(summary_cap(Some(2), 8000), 1);
        assert_eq!(summary_cap(None, 8000), 8000);
    }
}
