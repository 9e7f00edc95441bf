//! Hooks for the moments of a run rather than a call (SessionStart, UserPromptSubmit, Stop,
//! SubagentStop, SessionEnd, PermissionDenied): Claude Code's answers read as proceed (with
//! context for the model), block, or stop the run; a hook that fails under `on_error: deny`
//! stops the run. Which moment may be blocked, and what blocking means there, is the loop's.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::answer::parse_json;
use super::runner::{Occasion, Ran, Reader, run_matching};
use super::{Hook, HookConfinement, HookError, HookEvent, OnError};
use crate::base::AbortSignal;
use crate::exec::{ChildEnv, Ending, ExecOutcome};

/// How many times Stop (or SubagentStop) hooks may send the model back to work in one
/// conversation; past it the run ends as `hook_stopped`, since the hook still says the work
/// is not done.
pub const MAX_STOP_CONTINUATIONS: u32 = 8;

/// What one hook said about a moment of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum EventAnswer {
    /// Go on; `context` is text for the model (SessionStart, UserPromptSubmit,
    /// PermissionDenied).
    Proceed {
        #[serde(skip_serializing_if = "Option::is_none")]
        context: Option<String>,
    },
    /// `decision: "block"` or exit 2: the prompt is refused (UserPromptSubmit), or the model
    /// must go on (Stop, SubagentStop), for `reason`.
    Block { reason: String },
    /// `continue: false`, or a failure under `on_error: deny`: the run ends.
    Stop { reason: String },
}

impl EventAnswer {
    fn severity(&self) -> u8 {
        match self {
            EventAnswer::Proceed { .. } => 0,
            EventAnswer::Block { .. } => 1,
            EventAnswer::Stop { .. } => 2,
        }
    }
}

/// One hook's run for a moment, for the transcript: the shared runner's run, as it is.
pub type EventRun = Ran<EventAnswer>;

/// All hooks' answer for a moment: stop > block > proceed; among equals the first in policy
/// order speaks. Contexts are kept from every hook that proceeded, in policy order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum EventRuling {
    Proceed { context: Vec<String> },
    Block { reason: String },
    Stop { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventReport {
    #[serde(flatten)]
    pub ruling: EventRuling,
    pub runs: Vec<EventRun>,
}

/// A moment of the run: its event, what a matcher selects on (SessionStart's source, a
/// tool's name), and the JSON the hooks get on stdin.
#[derive(Debug, Clone, Copy)]
pub struct Moment<'a> {
    pub event: HookEvent,
    pub subject: &'a str,
    pub input: &'a Value,
}

/// Runs every hook for the moment's event that applies to its subject, all at once, each
/// with its input on stdin, and folds their answers.
pub async fn run_event(
    hooks: &[Hook],
    moment: Moment<'_>,
    cwd: PathBuf,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
) -> EventReport {
    let Moment {
        event,
        subject,
        input,
    } = moment;
    let occasion = Occasion {
        event,
        subject,
        cwd: &cwd,
    };
    let stdin = || input.to_string().into_bytes();
    let reader = Reader {
        read: interpret,
        on_error,
    };
    let runs = run_matching(hooks, occasion, stdin, env, abort, confinement, reader).await;
    EventReport {
        ruling: aggregate(event, &runs),
        runs,
    }
}

/// A failed hook stops the run unless its author said its failures do not matter; an
/// ambiguous answer always does.
fn on_error(policy: OnError, err: &HookError) -> EventAnswer {
    match (policy, err) {
        (_, HookError::Ambiguous(_)) | (OnError::Deny, _) => EventAnswer::Stop {
            reason: format!("the hook {err} (on_error: deny)"),
        },
        (OnError::Ignore, _) => EventAnswer::Proceed { context: None },
    }
}

fn aggregate(event: HookEvent, runs: &[EventRun]) -> EventRuling {
    let decided = runs
        .iter()
        .enumerate()
        .filter(|(_, run)| run.answer.severity() > 0)
        .max_by_key(|(index, run)| (run.answer.severity(), std::cmp::Reverse(*index)));
    let name = |run: &EventRun, reason: &str| {
        format!(
            "{event} hook `{}` ({}): {reason}",
            super::short_command(&run.command),
            run.source.display()
        )
    };
    match decided {
        Some((_, run)) => match &run.answer {
            EventAnswer::Stop { reason } => EventRuling::Stop {
                reason: name(run, reason),
            },
            EventAnswer::Block { reason } => EventRuling::Block {
                reason: name(run, reason),
            },
            EventAnswer::Proceed { .. } => EventRuling::Proceed {
                context: Vec::new(),
            },
        },
        None => EventRuling::Proceed {
            context: runs
                .iter()
                .filter_map(|run| match &run.answer {
                    EventAnswer::Proceed { context } => context.clone(),
                    _ => None,
                })
                .collect(),
        },
    }
}

/// Claude Code's output for these events; unknown fields (`suppressOutput`, `systemMessage`)
/// are ignored.
#[derive(Debug, Default, Deserialize)]
struct Output {
    #[serde(rename = "continue")]
    keep_going: Option<bool>,
    #[serde(rename = "stopReason")]
    stop_reason: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    #[serde(rename = "hookSpecificOutput")]
    specific: Option<Specific>,
}

#[derive(Debug, Default, Deserialize)]
struct Specific {
    #[serde(rename = "hookEventName")]
    hook_event_name: Option<String>,
    #[serde(rename = "additionalContext")]
    additional_context: Option<String>,
}

/// Whether `decision: "block"` (or exit 2) blocks at this moment; elsewhere Claude Code
/// only shows it, and so it is a proceed.
fn blocks(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::UserPromptSubmit | HookEvent::Stop | HookEvent::SubagentStop
    )
}

/// Whether plain text on stdout is context for the model (Claude Code's rule).
fn plain_text_is_context(event: HookEvent) -> bool {
    matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit)
}

fn interpret(
    run: &ExecOutcome,
    event: HookEvent,
    timeout_secs: u64,
) -> Result<EventAnswer, HookError> {
    match run.ending {
        Ending::Exited(0) => parse_stdout(run, event),
        Ending::Exited(2) if blocks(event) => {
            let stderr = run.stderr.text.trim();
            Ok(EventAnswer::Block {
                reason: if stderr.is_empty() {
                    "exited with code 2 and no message on stderr".to_string()
                } else {
                    stderr.to_string()
                },
            })
        }
        Ending::Exited(2) => Ok(EventAnswer::Proceed { context: None }),
        _ => Err(HookError::ended(run, timeout_secs)),
    }
}

fn parse_stdout(run: &ExecOutcome, event: HookEvent) -> Result<EventAnswer, HookError> {
    if !run.stdout.complete {
        return Err(HookError::IncompleteOutput);
    }
    let text = run.stdout.text.trim();
    if text.is_empty() {
        return Ok(EventAnswer::Proceed { context: None });
    }
    if !text.starts_with('{') {
        let context = plain_text_is_context(event).then(|| text.to_string());
        return Ok(EventAnswer::Proceed { context });
    }
    let value = parse_json(text)?;
    let output: Output =
        serde_json::from_value(value).map_err(|err| HookError::BadOutput(err.to_string()))?;
    let specific = output.specific.unwrap_or_default();
    if let Some(name) = &specific.hook_event_name
        && name != event.as_str()
    {
        return Err(HookError::BadOutput(format!(
            "hookSpecificOutput is for {name}, but this is a {event} hook"
        )));
    }
    if output.keep_going == Some(false) {
        let reason = output
            .stop_reason
            .or(output.reason)
            .unwrap_or_else(|| "the hook asked to stop (continue: false)".to_string());
        return Ok(EventAnswer::Stop { reason });
    }
    match output.decision.as_deref() {
        Some("block") if blocks(event) => Ok(EventAnswer::Block {
            reason: output
                .reason
                .unwrap_or_else(|| "blocked by the hook (no reason given)".to_string()),
        }),
        Some("block" | "approve") | None => Ok(EventAnswer::Proceed {
            context: specific.additional_context,
        }),
        Some(other) => Err(HookError::BadOutput(format!(
            "decision must be \"block\", not {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Captured;
    use pretty_assertions::assert_eq;

    fn exited(code: i32, stdout: &str, stderr: &str) -> ExecOutcome {
        let captured = |text: &str| Captured {
            text: text.into(),
            complete: true,
            dropped_bytes: 0,
        };
        ExecOutcome {
            ending: Ending::Exited(code),
            stdout: captured(stdout),
            stderr: captured(stderr),
        }
    }

    #[test]
    fn answers_by_event() {
        use EventAnswer::{Block, Proceed, Stop};
        let context = |text: &str| Proceed {
            context: Some(text.into()),
        };
        let block = |text: &str| Block {
            reason: text.into(),
        };
        type Case<'a> = (
            HookEvent,
            i32,
            &'a str,
            &'a str,
            Result<EventAnswer, HookError>,
        );
        let cases: Vec<Case> = vec![
            (
                HookEvent::SessionStart,
                0,
                "branch main\n",
                "",
                Ok(context("branch main")),
            ),
            (
                HookEvent::Stop,
                0,
                "notes",
                "",
                Ok(Proceed { context: None }),
            ),
            (
                HookEvent::SessionStart,
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"ctx"}}"#,
                "",
                Ok(context("ctx")),
            ),
            (
                HookEvent::UserPromptSubmit,
                0,
                r#"{"decision":"block","reason":"no secrets in prompts"}"#,
                "",
                Ok(block("no secrets in prompts")),
            ),
            (
                HookEvent::UserPromptSubmit,
                2,
                "",
                "bad prompt\n",
                Ok(block("bad prompt")),
            ),
            (
                HookEvent::Stop,
                0,
                r#"{"decision":"block","reason":"tests fail"}"#,
                "",
                Ok(block("tests fail")),
            ),
            (HookEvent::SubagentStop, 2, "", "more", Ok(block("more"))),
            (
                HookEvent::SessionStart,
                2,
                "",
                "x",
                Ok(Proceed { context: None }),
            ),
            (
                HookEvent::SessionEnd,
                0,
                r#"{"decision":"block","reason":"x"}"#,
                "",
                Ok(Proceed { context: None }),
            ),
            (
                HookEvent::Stop,
                0,
                r#"{"continue":false,"stopReason":"budget"}"#,
                "",
                Ok(Stop {
                    reason: "budget".into(),
                }),
            ),
            (
                HookEvent::Stop,
                1,
                "",
                "boom",
                Err(HookError::Exit {
                    code: 1,
                    stderr: "boom".into(),
                }),
            ),
        ];
        for (event, code, stdout, stderr, expected) in cases {
            assert_eq!(
                interpret(&exited(code, stdout, stderr), event, 60),
                expected,
                "{event} {code} {stdout:?}"
            );
        }
        for (event, stdout) in [
            (HookEvent::Stop, r#"{"decision":"maybe"}"#),
            (
                HookEvent::Stop,
                r#"{"hookSpecificOutput":{"hookEventName":"SessionStart"}}"#,
            ),
            (HookEvent::Stop, "{not json"),
        ] {
            assert!(
                matches!(
                    interpret(&exited(0, stdout, ""), event, 60),
                    Err(HookError::BadOutput(_))
                ),
                "{stdout}"
            );
        }
        assert!(matches!(
            interpret(
                &exited(0, r#"{"decision":"block","decision":"approve"}"#, ""),
                HookEvent::Stop,
                60
            ),
            Err(HookError::Ambiguous(_))
        ));
    }

    #[test]
    fn failures_stop_the_run_unless_ignored() {
        let err = HookError::TimedOut(5);
        assert!(matches!(
            on_error(OnError::Deny, &err),
            EventAnswer::Stop { .. }
        ));
        assert_eq!(
            on_error(OnError::Ignore, &err),
            EventAnswer::Proceed { context: None }
        );
        assert!(matches!(
            on_error(OnError::Ignore, &HookError::Ambiguous("x".into())),
            EventAnswer::Stop { .. }
        ));
    }
}
