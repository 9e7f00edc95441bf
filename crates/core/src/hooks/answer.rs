//! What one hook said: its exit code, stdout and stderr read as an answer (allow / deny / ask /
//! defer / no opinion), or as an error. Accepts tollgate's flat JSON and Claude Code's nested form;
//! an answer that names a key twice or whose forms disagree says two things, and is refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::HookEvent;
use crate::exec::{Captured, Ending, ExecOutcome};

/// One hook's own answer, before aggregation. Reasons are the hook's words, unprefixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum HookAnswer {
    Allow {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
    },
    Deny {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Ask {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Claude Code's `permissionDecision: "defer"`: park the call for a person, who answers
    /// it later (`tollgate approve`); the run ends `parked` and `--resume` goes on.
    Defer {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    NoOpinion {
        #[serde(skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
    },
}

impl HookAnswer {
    /// deny > defer > ask > allow > no opinion: the order in which answers outrank each
    /// other (Claude Code's). A defer outranks an ask: nobody can answer an ask headless, a
    /// person can answer a parked call.
    pub fn severity(&self) -> u8 {
        match self {
            HookAnswer::NoOpinion { .. } => 0,
            HookAnswer::Allow { .. } => 1,
            HookAnswer::Ask { .. } => 2,
            HookAnswer::Defer { .. } => 3,
            HookAnswer::Deny { .. } => 4,
        }
    }
}

/// Why a hook gave no usable answer; `on_error` decides what that amounts to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    #[error("could not be started: {0}")]
    Spawn(String),
    #[error("exited with code {code}{}", stderr_suffix(stderr))]
    Exit { code: i32, stderr: String },
    #[error("was killed by signal {signal}{}", stderr_suffix(stderr))]
    Signal { signal: i32, stderr: String },
    #[error("timed out after {0} s")]
    TimedOut(u64),
    #[error("was stopped because the run was aborted")]
    Aborted,
    #[error("printed output that is not a hook answer: {0}")]
    BadOutput(String),
    /// Two answers in one: a key given twice, or forms that disagree. Denies whatever
    /// `on_error` says, since one of the two may be text the hook copied from the model.
    #[error("gave an ambiguous answer: {0}")]
    Ambiguous(String),
    #[error("printed more than 1 MiB, or a background process it started kept its output open")]
    IncompleteOutput,
    /// tollgate's own task for the hook failed; the hook's answer is lost.
    #[error("was lost: {0}")]
    Internal(String),
}

impl HookError {
    /// A process that ended with nothing its event reads (every event reads exit 0 and 2
    /// alone): timed out after `timeout_secs`, aborted, killed, or another exit code.
    pub(super) fn ended(run: &ExecOutcome, timeout_secs: u64) -> HookError {
        match run.ending {
            Ending::TimedOut => HookError::TimedOut(timeout_secs),
            Ending::Cancelled => HookError::Aborted,
            Ending::Exited(code) => HookError::Exit {
                code,
                stderr: run.stderr.text.clone(),
            },
            Ending::Signalled(signal) => HookError::Signal {
                signal,
                stderr: run.stderr.text.clone(),
            },
        }
    }
}

/// The hook's stderr as the tail of an error message: enough to see why, not a log dump.
fn stderr_suffix(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return String::new();
    }
    const MAX: usize = 500;
    match stderr.char_indices().nth(MAX) {
        Some((end, _)) => format!(": {}…", &stderr[..end]),
        None => format!(": {stderr}"),
    }
}

/// Reads a finished hook process: exit 0 is its JSON (or no opinion), exit 2 a deny with
/// stderr as the reason, anything else an error.
pub(super) fn interpret(
    run: &ExecOutcome,
    event: HookEvent,
    timeout_secs: u64,
) -> Result<HookAnswer, HookError> {
    match run.ending {
        Ending::Exited(0) => parse_stdout(&run.stdout, event),
        Ending::Exited(2) => {
            let stderr = run.stderr.text.trim();
            Ok(HookAnswer::Deny {
                reason: Some(if stderr.is_empty() {
                    "exited with code 2 and no message on stderr".to_string()
                } else {
                    stderr.to_string()
                }),
            })
        }
        _ => Err(HookError::ended(run, timeout_secs)),
    }
}

/// tollgate's flat answer, with Claude Code's fields beside it. Unknown fields are ignored:
/// Claude Code hooks also print `suppressOutput`, `systemMessage` and the like.
#[derive(Debug, Default, Deserialize)]
struct Output {
    #[serde(rename = "permissionDecision")]
    permission_decision: Option<String>,
    reason: Option<String>,
    #[serde(rename = "updatedInput")]
    updated_input: Option<Value>,
    #[serde(rename = "hookSpecificOutput")]
    hook_specific: Option<SpecificOutput>,
    /// Claude Code's top-level `approve` / `block` (PostToolUse's form, and PreToolUse's
    /// deprecated one).
    decision: Option<String>,
    /// Claude Code's `continue: false` stops the agent; here it denies the call.
    #[serde(rename = "continue")]
    keep_going: Option<bool>,
    #[serde(rename = "stopReason")]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct SpecificOutput {
    #[serde(rename = "hookEventName")]
    hook_event_name: Option<String>,
    #[serde(rename = "permissionDecision")]
    permission_decision: Option<String>,
    #[serde(rename = "permissionDecisionReason")]
    permission_decision_reason: Option<String>,
    #[serde(rename = "updatedInput")]
    updated_input: Option<Value>,
    /// PermissionRequest's answer.
    decision: Option<RequestDecision>,
}

/// Claude Code's PermissionRequest answer: `{"behavior": "allow"|"deny", "message": …,
/// "updatedInput": …, "interrupt": …}`.
#[derive(Debug, Default, Deserialize)]
struct RequestDecision {
    behavior: String,
    message: Option<String>,
    #[serde(rename = "updatedInput")]
    updated_input: Option<Value>,
    /// Stop the agent: a deny here.
    interrupt: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Said {
    Allow,
    Ask,
    Defer,
    Deny,
}

impl Said {
    fn as_str(self) -> &'static str {
        match self {
            Said::Allow => "allow",
            Said::Ask => "ask",
            Said::Defer => "defer",
            Said::Deny => "deny",
        }
    }
}

fn parse_stdout(stdout: &Captured, event: HookEvent) -> Result<HookAnswer, HookError> {
    if !stdout.complete {
        return Err(HookError::IncompleteOutput);
    }
    let text = stdout.text.trim();
    if text.is_empty() {
        return Ok(HookAnswer::NoOpinion {
            updated_input: None,
        });
    }
    let value = parse_json(text)?;
    if !value.is_object() {
        return Err(HookError::BadOutput(format!(
            "expected a JSON object, got {}",
            excerpt(text)
        )));
    }
    let output: Output =
        serde_json::from_value(value).map_err(|err| HookError::BadOutput(err.to_string()))?;
    answer_from(output, event)
}

fn answer_from(output: Output, event: HookEvent) -> Result<HookAnswer, HookError> {
    let specific = output.hook_specific.unwrap_or_default();
    if let Some(name) = &specific.hook_event_name
        && name != event.as_str()
    {
        return Err(HookError::BadOutput(format!(
            "hookSpecificOutput is for {name}, but this is a {event} hook"
        )));
    }
    // Every form the hook used counts, and they must agree: `block` beside `allow` is two
    // answers, and which one the hook meant cannot be known.
    let mut said: Vec<(Said, Option<String>)> = Vec::new();
    if let Some(text) = &output.permission_decision {
        said.push((permission(text)?, output.reason.clone()));
    }
    if let Some(text) = &specific.permission_decision {
        let reason = specific
            .permission_decision_reason
            .clone()
            .or_else(|| output.reason.clone());
        said.push((permission(text)?, reason));
    }
    if let Some(request) = &specific.decision {
        let behavior = match (request.behavior.as_str(), request.interrupt) {
            (_, Some(true)) | ("deny", _) => Said::Deny,
            ("allow", _) => Said::Allow,
            (other, _) => {
                return Err(HookError::BadOutput(format!(
                    "decision.behavior must be \"allow\" or \"deny\", not {other:?}"
                )));
            }
        };
        said.push((behavior, request.message.clone()));
    }
    if let Some(text) = &output.decision {
        let decision = match text.as_str() {
            "approve" => Said::Allow,
            "block" => Said::Deny,
            other => {
                return Err(HookError::BadOutput(format!(
                    "decision must be \"approve\" or \"block\", not {other:?}"
                )));
            }
        };
        said.push((decision, output.reason.clone()));
    }
    if output.keep_going == Some(false) {
        let reason = output
            .stop_reason
            .clone()
            .or_else(|| output.reason.clone())
            .unwrap_or_else(|| "the hook asked to stop (continue: false)".to_string());
        said.push((Said::Deny, Some(reason)));
    }
    let updated_input = specific
        .updated_input
        .or(specific.decision.and_then(|request| request.updated_input))
        .or(output.updated_input);
    if let Some(input) = &updated_input
        && !input.is_object()
    {
        return Err(HookError::BadOutput(
            "updatedInput must be a JSON object (the tool's whole new input)".to_string(),
        ));
    }
    if let Some((first, _)) = said.first()
        && let Some((other, _)) = said.iter().find(|(said, _)| said != first)
    {
        return Err(HookError::Ambiguous(format!(
            "its answer says both {} and {}",
            first.as_str(),
            other.as_str()
        )));
    }
    // Only a call not yet decided can be parked: Claude Code takes `defer` from PreToolUse
    // alone, and a PostToolUse hook's call has run already.
    if event != HookEvent::PreToolUse
        && let Some((Said::Defer, _)) = said.first()
    {
        return Err(HookError::BadOutput(format!(
            "permissionDecision \"defer\" is a PreToolUse answer, not a {event} one"
        )));
    }
    // They agree; the reason is the first one given.
    let reason = said.iter().find_map(|(_, reason)| reason.clone());
    Ok(match said.first().map(|(said, _)| (*said, reason)) {
        None => HookAnswer::NoOpinion { updated_input },
        Some((Said::Allow, reason)) => HookAnswer::Allow {
            reason,
            updated_input,
        },
        Some((Said::Ask, reason)) => HookAnswer::Ask { reason },
        Some((Said::Defer, reason)) => HookAnswer::Defer { reason },
        Some((Said::Deny, reason)) => HookAnswer::Deny { reason },
    })
}

fn permission(text: &str) -> Result<Said, HookError> {
    match text {
        "allow" => Ok(Said::Allow),
        "ask" => Ok(Said::Ask),
        "defer" => Ok(Said::Defer),
        "deny" => Ok(Said::Deny),
        other => Err(HookError::BadOutput(format!(
            "permissionDecision must be \"allow\", \"deny\", \"ask\" or \"defer\", not {other:?}"
        ))),
    }
}

/// A hook's JSON answer: a key given twice is ambiguous (two readers could take either), any
/// other fault is bad output; both name an excerpt of what the hook printed.
pub(super) fn parse_json(text: &str) -> Result<Value, HookError> {
    crate::base::parse_unique_keys(text).map_err(|err| {
        let message = format!("{err} in {}", excerpt(text));
        if err.to_string().starts_with("duplicate key") {
            HookError::Ambiguous(message)
        } else {
            HookError::BadOutput(message)
        }
    })
}

pub(super) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("`{}…`", &text[..end]),
        None => format!("`{text}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn exited(code: i32, stdout: &str, stderr: &str) -> ExecOutcome {
        ExecOutcome {
            ending: Ending::Exited(code),
            stdout: Captured {
                text: stdout.into(),
                complete: true,
                dropped_bytes: 0,
            },
            stderr: Captured {
                text: stderr.into(),
                complete: true,
                dropped_bytes: 0,
            },
        }
    }

    fn pre(code: i32, stdout: &str, stderr: &str) -> Result<HookAnswer, HookError> {
        interpret(&exited(code, stdout, stderr), HookEvent::PreToolUse, 60)
    }

    #[test]
    fn exit_codes_and_output_forms() {
        let cases: Vec<(i32, &str, &str, Result<HookAnswer, HookError>)> = vec![
            (
                0,
                "",
                "",
                Ok(HookAnswer::NoOpinion {
                    updated_input: None,
                }),
            ),
            (
                0,
                "  \n",
                "noise",
                Ok(HookAnswer::NoOpinion {
                    updated_input: None,
                }),
            ),
            (
                0,
                r#"{"permissionDecision":"allow","reason":"ok","updatedInput":{"a":1}}"#,
                "",
                Ok(HookAnswer::Allow {
                    reason: Some("ok".into()),
                    updated_input: Some(json!({"a": 1})),
                }),
            ),
            (
                0,
                r#"{"permissionDecision":"ask"}"#,
                "",
                Ok(HookAnswer::Ask { reason: None }),
            ),
            (
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"defer","permissionDecisionReason":"a person decides"}}"#,
                "",
                Ok(HookAnswer::Defer {
                    reason: Some("a person decides".into()),
                }),
            ),
            (
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#,
                "",
                Ok(HookAnswer::Deny {
                    reason: Some("no".into()),
                }),
            ),
            (
                0,
                r#"{"decision":"block","reason":"lint failed"}"#,
                "",
                Ok(HookAnswer::Deny {
                    reason: Some("lint failed".into()),
                }),
            ),
            (
                0,
                r#"{"continue":false,"stopReason":"halt"}"#,
                "",
                Ok(HookAnswer::Deny {
                    reason: Some("halt".into()),
                }),
            ),
            (
                0,
                r#"{"permissionDecision":"deny","hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"look"},"decision":"block"}"#,
                "",
                Ok(HookAnswer::Deny {
                    reason: Some("look".into()),
                }),
            ),
            (
                0,
                r#"{"updatedInput":{"b":2},"systemMessage":"hi"}"#,
                "",
                Ok(HookAnswer::NoOpinion {
                    updated_input: Some(json!({"b": 2})),
                }),
            ),
            (
                2,
                "{\"permissionDecision\":\"allow\"}",
                "  rm is not allowed\n",
                Ok(HookAnswer::Deny {
                    reason: Some("rm is not allowed".into()),
                }),
            ),
            (
                1,
                "",
                "boom\n",
                Err(HookError::Exit {
                    code: 1,
                    stderr: "boom\n".into(),
                }),
            ),
        ];
        for (code, stdout, stderr, expected) in cases {
            assert_eq!(pre(code, stdout, stderr), expected, "{code} {stdout:?}");
        }
    }

    #[test]
    fn malformed_answers_are_errors() {
        for stdout in [
            "allow",
            "{\"permissionDecision\":",
            "[1]",
            r#"{"permissionDecision":"yes"}"#,
            r#"{"permissionDecision":"allow","updatedInput":"rm -rf /"}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"allow"}}"#,
            r#"{"decision":"maybe"}"#,
            r#"{"reason":5}"#,
        ] {
            let result = pre(0, stdout, "");
            assert!(
                matches!(result, Err(HookError::BadOutput(_))),
                "{stdout}: {result:?}"
            );
        }
        // Only a call not yet decided can be parked.
        let post = interpret(
            &exited(0, r#"{"permissionDecision":"defer"}"#, ""),
            HookEvent::PostToolUse,
            60,
        );
        assert!(
            matches!(&post, Err(HookError::BadOutput(text)) if text.contains("PreToolUse answer")),
            "{post:?}"
        );
        let mut cut = exited(0, "{", "");
        cut.stdout.complete = false;
        assert_eq!(
            interpret(&cut, HookEvent::PreToolUse, 60),
            Err(HookError::IncompleteOutput)
        );
    }

    /// A key given twice, or forms that disagree, is two answers: refused, whichever way
    /// round they come.
    #[test]
    fn ambiguous_answers_are_refused() {
        for stdout in [
            r#"{"permissionDecision":"deny","permissionDecision":"allow"}"#,
            r#"{"permissionDecision":"allow","permissionDecision":"allow"}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecision":"allow"}}"#,
            r#"{"decision":"block","decision":"approve"}"#,
            r#"{"reason":"x","reason":"y","permissionDecision":"deny"}"#,
            r#"{"decision":"block","permissionDecision":"allow"}"#,
            r#"{"permissionDecision":"allow","decision":"block"}"#,
            r#"{"permissionDecision":"allow","hookSpecificOutput":{"permissionDecision":"deny"}}"#,
            r#"{"permissionDecision":"deny","hookSpecificOutput":{"permissionDecision":"allow"}}"#,
            r#"{"permissionDecision":"allow","hookSpecificOutput":{"permissionDecision":"ask"}}"#,
            r#"{"permissionDecision":"defer","hookSpecificOutput":{"permissionDecision":"deny"}}"#,
            r#"{"decision":"approve","continue":false}"#,
            r#"{"hookSpecificOutput":{"permissionDecision":"allow"},"decision":"block"}"#,
        ] {
            let result = pre(0, stdout, "");
            assert!(
                matches!(result, Err(HookError::Ambiguous(_))),
                "{stdout}: {result:?}"
            );
        }
    }

    #[test]
    fn error_messages_carry_stderr_briefly() {
        let err = HookError::Exit {
            code: 1,
            stderr: format!("{}\n", "x".repeat(600)),
        };
        let text = err.to_string();
        assert!(text.starts_with("exited with code 1: xxx"), "{text}");
        assert!(text.ends_with('…') && text.chars().count() < 540, "{text}");
        assert_eq!(
            HookError::Signal {
                signal: 9,
                stderr: String::new()
            }
            .to_string(),
            "was killed by signal 9"
        );
    }
}
