//! Command hooks (S9): which hooks run for a call or a moment of the run, running them with
//! Claude Code's JSON on stdin (one runner for every event: `runner`), and folding their answers into one ruling that names the hook
//! behind it (a call's: deny > ask > allow; a moment's: see `lifecycle`; PreCompact's:
//! `compact`). Decides nothing about rules: the gate combines the two.

mod answer;
mod compact;
mod lifecycle;
mod runner;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use answer::{HookAnswer, HookError};
pub use compact::{CompactInput, CompactRuling, run_pre_compact};
pub use lifecycle::{
    EventAnswer, EventReport, EventRuling, EventRun, MAX_STOP_CONTINUATIONS, Moment, run_event,
};
// Hooks as a policy file writes them are the policy's data; this module runs them.
pub use crate::settings::{
    DEFAULT_TIMEOUT_SECS, Hook, HookEvent, HookList, HookSpec, MAX_TIMEOUT_SECS, MatcherError,
    OnError, ToolMatcher, merge_hooks,
};

use crate::base::AbortSignal;
use crate::exec::{ChildEnv, PreExecStep};
use runner::{Occasion, Ran, Reader};

/// How each hook process is confined; the run implements it with its OS sandbox.
pub trait HookConfinement: Send + Sync {
    /// The environment and the child's pre-exec step for one hook process given `env`;
    /// `Err` when it cannot be confined (the hook then does not run).
    fn prepare(&self, env: &ChildEnv) -> Result<(ChildEnv, PreExecStep), String>;
    /// Called after each hook process ended: a note for its stderr (what it changed that it
    /// must not have), if any.
    fn after(&self) -> Option<String>;
}

/// What every hook for one call is told (serialised to its stdin).
#[derive(Debug, Clone, Copy)]
pub struct HookInput<'a> {
    pub session_id: &'a str,
    pub transcript_path: &'a Path,
    pub cwd: &'a Path,
    pub permission_mode: &'a str,
    pub tool_name: &'a str,
    pub tool_input: &'a Value,
    pub tool_use_id: &'a str,
    /// The tool's result; sent to PostToolUse hooks only.
    pub tool_response: Option<&'a Value>,
    /// Why the call was asked; sent to PermissionRequest hooks only.
    pub asked_because: Option<&'a str>,
}

impl HookInput<'_> {
    /// The stdin JSON, with Claude Code's field names so its hook scripts read it unchanged.
    pub fn to_json(&self, event: HookEvent) -> Value {
        let mut value = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript_path.to_string_lossy(),
            "cwd": self.cwd.to_string_lossy(),
            "permission_mode": self.permission_mode,
            "hook_event_name": event.as_str(),
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "tool_use_id": self.tool_use_id,
        });
        if let Some(object) = value.as_object_mut() {
            match event {
                HookEvent::PostToolUse => {
                    object.insert(
                        "tool_response".to_string(),
                        self.tool_response.cloned().unwrap_or(Value::Null),
                    );
                }
                HookEvent::PermissionRequest => {
                    object.insert("reason".to_string(), json!(self.asked_because));
                }
                _ => {}
            }
        }
        value
    }
}

/// All hooks' answer for one call. Reasons name the hook (event, command, policy file) that
/// decided, so the model and the transcript can tell a hook's deny from a rule's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum HookRuling {
    Allow {
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
    },
    Ask {
        reason: String,
    },
    /// Park the call for a person (a PreToolUse hook's `defer`).
    Defer {
        reason: String,
    },
    Deny {
        reason: String,
    },
    /// No hook matched, or none expressed a decision (one may still have rewritten the input).
    NoOpinion {
        #[serde(skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
    },
}

/// One hook's run, for the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRun {
    pub event: HookEvent,
    pub command: String,
    pub source: PathBuf,
    /// `None` when it was not started, timed out, was aborted or was killed by a signal.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// What the hook counts as: its own answer, or what `on_error` made of its failure.
    pub answer: HookAnswer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it printed on stderr, shortened; kept for debugging hooks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookReport {
    /// Serialized as `verdict`, the transcript's name for it.
    #[serde(rename = "verdict")]
    pub ruling: HookRuling,
    /// One per hook that matched, in policy order (not completion order).
    pub runs: Vec<HookRun>,
    /// Index into `runs` of the hook whose answer became the ruling.
    pub decided_by: Option<usize>,
}

/// Runs every hook for `event` whose matcher covers `input.tool_name`, all at once (a slow
/// hook then costs its own time, not the sum), and folds their answers: deny > ask > allow >
/// no opinion; among equals the first in policy order speaks. Each hook sees the original
/// input, not another hook's rewrite; the ruling's `updated_input` is the last (in policy
/// order) one given by a hook that allowed or had no opinion, and is dropped on ask or deny.
pub async fn run_hooks(
    hooks: &[Hook],
    event: HookEvent,
    input: &HookInput<'_>,
    env: &ChildEnv,
    abort: &AbortSignal,
) -> HookReport {
    run_hooks_in(hooks, event, input, env, abort, None).await
}

/// [`run_hooks`], each hook process confined by `confinement` when given.
pub async fn run_hooks_in(
    hooks: &[Hook],
    event: HookEvent,
    input: &HookInput<'_>,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
) -> HookReport {
    let occasion = Occasion {
        event,
        subject: input.tool_name,
        cwd: input.cwd,
    };
    let stdin = || input.to_json(event).to_string().into_bytes();
    let reader = Reader {
        read: answer::interpret,
        on_error,
    };
    let runs: Vec<HookRun> =
        runner::run_matching(hooks, occasion, stdin, env, abort, confinement, reader)
            .await
            .into_iter()
            .map(|ran| HookRun::new(event, ran))
            .collect();
    let (ruling, decided_by) = aggregate(&runs);
    HookReport {
        ruling,
        runs,
        decided_by,
    }
}

impl HookRun {
    fn new(event: HookEvent, ran: Ran<HookAnswer>) -> HookRun {
        HookRun {
            event,
            command: ran.command,
            source: ran.source,
            exit_code: ran.exit_code,
            duration_ms: ran.duration_ms,
            answer: ran.answer,
            error: ran.error,
            stderr: ran.stderr,
        }
    }
}

/// Fail closed unless the policy author said this hook's failures do not matter; an
/// ambiguous answer is not a failure to ignore but a possible forgery, and denies.
fn on_error(policy: OnError, err: &HookError) -> HookAnswer {
    if matches!(err, HookError::Ambiguous(_)) {
        return HookAnswer::Deny {
            reason: Some(format!("the hook {err}")),
        };
    }
    match policy {
        OnError::Deny => HookAnswer::Deny {
            reason: Some(format!("the hook {err} (on_error: deny)")),
        },
        OnError::Ignore => HookAnswer::NoOpinion {
            updated_input: None,
        },
    }
}

/// Folds the runs' answers (see [`run_hooks`]). Pure, so the precedence is testable alone.
fn aggregate(runs: &[HookRun]) -> (HookRuling, Option<usize>) {
    let mut decided_by: Option<usize> = None;
    for (index, run) in runs.iter().enumerate() {
        let outranks =
            decided_by.is_none_or(|best| run.answer.severity() > runs[best].answer.severity());
        if run.answer.severity() > 0 && outranks {
            decided_by = Some(index);
        }
    }
    let updated_input = || {
        runs.iter().rev().find_map(|run| match &run.answer {
            HookAnswer::Allow { updated_input, .. } | HookAnswer::NoOpinion { updated_input } => {
                updated_input.clone()
            }
            HookAnswer::Deny { .. } | HookAnswer::Ask { .. } | HookAnswer::Defer { .. } => None,
        })
    };
    let Some(index) = decided_by else {
        return (
            HookRuling::NoOpinion {
                updated_input: updated_input(),
            },
            None,
        );
    };
    let run = &runs[index];
    let ruling = match &run.answer {
        HookAnswer::Deny { reason } => HookRuling::Deny {
            reason: explain(run, "denied", reason.as_deref()),
        },
        HookAnswer::Ask { reason } => HookRuling::Ask {
            reason: explain(run, "asks", reason.as_deref()),
        },
        HookAnswer::Defer { reason } => HookRuling::Defer {
            reason: explain(run, "deferred it to a person", reason.as_deref()),
        },
        HookAnswer::Allow { reason, .. } => HookRuling::Allow {
            reason: Some(explain(run, "allowed", reason.as_deref())),
            updated_input: updated_input(),
        },
        HookAnswer::NoOpinion { .. } => HookRuling::NoOpinion {
            updated_input: updated_input(),
        },
    };
    (ruling, Some(index))
}

/// "PreToolUse hook `./check.sh` (policies/ci.yaml) denied: rm is not allowed".
fn explain(run: &HookRun, verb: &str, reason: Option<&str>) -> String {
    let head = format!(
        "{} hook `{}` ({}) {verb}",
        run.event,
        short_command(&run.command),
        run.source.display()
    );
    match reason.map(str::trim).filter(|reason| !reason.is_empty()) {
        Some(reason) => format!("{head}: {reason}"),
        None => head,
    }
}

/// A command as messages quote it: its first line, at most 80 characters.
fn short_command(command: &str) -> String {
    const MAX: usize = 80;
    let line = command.trim().lines().next().unwrap_or_default();
    let multiline = command.trim().lines().nth(1).is_some();
    match line.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None if multiline => format!("{line} …"),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests;
