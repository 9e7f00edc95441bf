//! PreCompact hooks: run before the history is compacted, with Claude Code's input
//! (`hook_event_name: "PreCompact"`, `trigger`, `custom_instructions`). A hook may veto the
//! compaction (exit 2, `"decision": "block"`, `"continue": false`) or add text for the
//! compacted history (`hookSpecificOutput.additionalContext`, or plain stdout).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    Hook, HookAnswer, HookConfinement, HookEvent, HookRun, OnError, STDERR_CHARS, truncate_middle,
};
use crate::base::AbortSignal;
use crate::exec::{self, ChildEnv, Ending, ExecRequest, Stdin};

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
pub struct CompactVerdict {
    pub veto: Option<String>,
    pub added: Vec<String>,
    pub runs: Vec<HookRun>,
}

/// Runs each PreCompact hook whose matcher covers the trigger, one after another, each
/// confined by `confinement` when given (as tool hooks are).
pub async fn run_pre_compact(
    hooks: &[Hook],
    input: &CompactInput<'_>,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
) -> CompactVerdict {
    let stdin = json!({
        "session_id": input.session_id,
        "transcript_path": input.transcript_path.to_string_lossy(),
        "cwd": input.cwd.to_string_lossy(),
        "permission_mode": input.permission_mode,
        "hook_event_name": HookEvent::PreCompact.as_str(),
        "trigger": input.trigger,
        "custom_instructions": "",
    })
    .to_string();
    let mut verdict = CompactVerdict::default();
    for hook in hooks
        .iter()
        .filter(|hook| hook.spec.applies_to(HookEvent::PreCompact, input.trigger))
    {
        let (run, said) =
            run_one(hook, input.cwd, &stdin, env, abort, confinement.as_deref()).await;
        match said {
            Said::Veto(reason) => {
                verdict.veto.get_or_insert(reason);
            }
            Said::Text(text) if !text.trim().is_empty() => verdict.added.push(text),
            Said::Text(_) => {}
        }
        verdict.runs.push(run);
    }
    verdict
}

enum Said {
    Veto(String),
    Text(String),
}

async fn run_one(
    hook: &Hook,
    cwd: &Path,
    stdin: &str,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<&dyn HookConfinement>,
) -> (HookRun, Said) {
    let started = Instant::now();
    let timeout = hook.spec.timeout_secs();
    let env = env.with("TOLLGATE_HOOK_EVENT", HookEvent::PreCompact.as_str());
    let mut request = ExecRequest::bash(
        &hook.spec.command,
        cwd.to_path_buf(),
        env.clone(),
        Duration::from_secs(timeout),
    );
    request.stdin = Stdin::Bytes(stdin.as_bytes().to_vec());
    request.capture.max_bytes = super::HOOK_CAPTURE_BYTES;
    let confined = confinement
        .map(|confinement| confinement.prepare(&env))
        .transpose();
    let process = match confined {
        // A hook that cannot be confined does not run.
        Err(err) => Err(err),
        Ok(confined) => {
            if let Some((env, step)) = confined {
                request.env = env;
                request.pre_exec = Some(step);
            }
            exec::run(request, async {
                abort.aborted().await;
            })
            .await
            .map_err(|err| err.to_string())
        }
    };
    let mut note = confinement.and_then(HookConfinement::after);
    let (exit_code, stderr, result) = match process {
        Err(err) => (
            None,
            String::new(),
            Err(format!("could not be started: {err}")),
        ),
        Ok(process) => {
            let mut stderr = process.stderr.text.trim().to_string();
            if let Some(note) = note.take() {
                stderr.push_str(&format!("\n[{note}]"));
            }
            let result = match process.ending {
                Ending::Exited(0) => Ok(answer(&process.stdout.text)),
                Ending::Exited(2) => Ok(Said::Veto(if stderr.is_empty() {
                    "exited with code 2".to_string()
                } else {
                    stderr.clone()
                })),
                Ending::Exited(code) => Err(format!("exited with code {code}")),
                Ending::TimedOut => Err(format!("timed out after {timeout} s")),
                Ending::Signalled(signal) => Err(format!("was killed by signal {signal}")),
                Ending::Cancelled => Err("was stopped because the run was aborted".to_string()),
            };
            let code = match process.ending {
                Ending::Exited(code) => Some(code),
                Ending::Signalled(_) | Ending::TimedOut | Ending::Cancelled => None,
            };
            (code, stderr, result)
        }
    };
    // A failed hook fails closed, as every hook does: no compaction it could not look at.
    let (said, error) = match result {
        Ok(said) => (said, None),
        Err(err) => match hook.spec.on_error {
            OnError::Deny => (
                Said::Veto(format!("the hook {err} (on_error: deny)")),
                Some(err),
            ),
            OnError::Ignore => (Said::Text(String::new()), Some(err)),
        },
    };
    let answer = match &said {
        Said::Veto(reason) => HookAnswer::Deny {
            reason: Some(reason.clone()),
        },
        Said::Text(_) => HookAnswer::NoOpinion {
            updated_input: None,
        },
    };
    let run = HookRun {
        event: HookEvent::PreCompact,
        command: hook.spec.command.clone(),
        source: hook.source.clone(),
        exit_code,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        answer,
        error,
        stderr: truncate_middle(&stderr, STDERR_CHARS),
    };
    (run, said)
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
