//! PreCompact hooks: run before the history is compacted, with Claude Code's input
//! (`hook_event_name: "PreCompact"`, `trigger`, `custom_instructions`). A hook may veto the
//! compaction (exit 2, `"decision": "block"`, `"continue": false`) or add text for the
//! compacted history (`hookSpecificOutput.additionalContext`, or plain stdout).
//! They run through the shared runner like every event's hooks; only reading and folding
//! their answers is PreCompact's own.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::runner::{Occasion, Reader, run_matching};
use super::{Hook, HookAnswer, HookConfinement, HookError, HookEvent, HookRun, OnError};
use crate::base::AbortSignal;
use crate::exec::{ChildEnv, Ending, ExecOutcome};

/// What PreCompact hooks are told.
#[derive(Debug, Clone, Copy)]
pub struct CompactInput<'a> {
    pub session_id: &'a str,
    pub transcript_path: &'a Path,
    pub cwd: &'a Path,
    pub permission_mode: &'a str,
    /// `auto`: tollgate compacts on its own (there is no one to type `/compact`).
    pub trigger: &'a str,
}

/// The hooks' answer: a veto (the first, in policy order), the text they add, their runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactRuling {
    pub veto: Option<String>,
    pub added: Vec<String>,
    pub runs: Vec<HookRun>,
}

/// Runs each PreCompact hook whose matcher covers the trigger, all at once (as every event's
/// hooks run), each confined by `confinement` when given, and folds their answers in policy
/// order: the first veto stands, and every text added is kept.
pub async fn run_pre_compact(
    hooks: &[Hook],
    input: &CompactInput<'_>,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
) -> CompactRuling {
    let event = HookEvent::PreCompact;
    let occasion = Occasion {
        event,
        subject: input.trigger,
        cwd: input.cwd,
    };
    let stdin = || {
        json!({
            "session_id": input.session_id,
            "transcript_path": input.transcript_path.to_string_lossy(),
            "cwd": input.cwd.to_string_lossy(),
            "permission_mode": input.permission_mode,
            "hook_event_name": event.as_str(),
            "trigger": input.trigger,
            "custom_instructions": "",
        })
        .to_string()
        .into_bytes()
    };
    let reader = Reader { read, on_error };
    let mut ruling = CompactRuling::default();
    for ran in run_matching(hooks, occasion, stdin, env, abort, confinement, reader).await {
        let ran = ran.map(|said| match said {
            Said::Veto(reason) => {
                let answer = HookAnswer::Deny {
                    reason: Some(reason.clone()),
                };
                ruling.veto.get_or_insert(reason);
                answer
            }
            Said::Text(text) => {
                if !text.trim().is_empty() {
                    ruling.added.push(text);
                }
                HookAnswer::NoOpinion {
                    updated_input: None,
                }
            }
        });
        ruling.runs.push(HookRun::new(event, ran));
    }
    ruling
}

enum Said {
    Veto(String),
    Text(String),
}

/// Exit 0 is the hook's answer, exit 2 a veto with stderr as the reason; anything else is a
/// failure, for `on_error`.
fn read(process: &ExecOutcome, _: HookEvent, timeout_secs: u64) -> Result<Said, HookError> {
    match process.ending {
        Ending::Exited(0) => Ok(answer(&process.stdout.text)),
        Ending::Exited(2) => {
            let stderr = process.stderr.text.trim();
            Ok(Said::Veto(if stderr.is_empty() {
                "exited with code 2".to_string()
            } else {
                stderr.to_string()
            }))
        }
        _ => Err(HookError::ended(process, timeout_secs)),
    }
}

/// A failed hook fails closed, as every hook does: no compaction it could not look at.
fn on_error(policy: OnError, err: &HookError) -> Said {
    match policy {
        OnError::Deny => Said::Veto(format!("the hook {err} (on_error: deny)")),
        OnError::Ignore => Said::Text(String::new()),
    }
}

/// Exit 0: a JSON answer (Claude Code's fields), or plain text to add.
fn answer(stdout: &str) -> Said {
    let text = stdout.trim();
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else {
        return Said::Text(text.to_string());
    };
    let reason = object
        .get("reason")
        .or_else(|| object.get("stopReason"))
        .and_then(Value::as_str)
        .unwrap_or("the PreCompact hook blocked the compaction")
        .to_string();
    if object.get("decision").and_then(Value::as_str) == Some("block")
        || object.get("continue").and_then(Value::as_bool) == Some(false)
    {
        return Said::Veto(reason);
    }
    let added = object
        .get("hookSpecificOutput")
        .and_then(|specific| specific.get("additionalContext"))
        .or_else(|| object.get("additionalContext"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    Said::Text(added.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_veto_or_add_text() {
        let veto = |text: &str| matches!(answer(text), Said::Veto(_));
        let added = |text: &str| match answer(text) {
            Said::Text(text) => text,
            Said::Veto(reason) => panic!("vetoed: {reason}"),
        };
        assert!(veto(r#"{"decision":"block","reason":"not now"}"#));
        assert!(veto(r#"{"continue":false}"#));
        assert_eq!(
            added(
                r#"{"hookSpecificOutput":{"hookEventName":"PreCompact","additionalContext":"keep the API notes"}}"#
            ),
            "keep the API notes"
        );
        assert_eq!(
            added("remember the flaky test\n"),
            "remember the flaky test"
        );
        assert_eq!(added(r#"{"suppressOutput":true}"#), "");
    }
}
