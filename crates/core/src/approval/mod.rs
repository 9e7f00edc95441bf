//! Parked calls and a person's answers to them: what `pending.json` lists of each call a run
//! parked, the hash that binds a call's tool to its exact input, and `approvals.jsonl`, where
//! `tollgate approve` records each answer bound to the run, that hash and who gave it, every
//! line tagged with the operator's key as the transcript's are. Decides nothing about what a
//! run may do: it says which answers hold, and a resumed run runs or refuses exactly those.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::{Layer, RuleRef, Step};
use crate::state::{APPROVALS_GENESIS, Chain, TranscriptKey, VerifyError, verify_record};

/// The run folder's list of parked calls, written when a run ends `parked`.
pub const PENDING_FILE: &str = "pending.json";
/// The run folder's answers, one tagged line each, appended by `tollgate approve`.
pub const APPROVALS_FILE: &str = "approvals.jsonl";
/// How long an approval holds unless `--valid-for` says otherwise.
pub const DEFAULT_VALID_HOURS: u32 = 24;

/// One parked call as `pending.json` shows it to the person who answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedCall {
    /// The model's tool_use id.
    pub id: String,
    pub tool: String,
    /// Exactly as asked (and as the transcript recorded it).
    pub input: Value,
    /// [`call_hash`] of `tool` and `input`: what an approval binds.
    pub hash: String,
    /// The pipeline step and layer that asked, and the rule it cites.
    pub step: Step,
    pub layer: Layer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    pub reason: String,
    /// What it would do if run.
    pub would: Would,
}

/// What a parked call would touch: a Bash command's analysed writes and reads, a file
/// tool's path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Would {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<PathBuf>,
    /// Things the analysis could not name (a command whose writes are unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
}

/// `pending.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub run_id: String,
    pub calls: Vec<ParkedCall>,
}

/// SHA-256 over the tool's name, a NUL and the input as serde_json writes it (object keys
/// in order), in hex: the same call hashes the same from the transcript or `pending.json`.
pub fn call_hash(tool: &str, input: &Value) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(tool.as_bytes());
    context.update(&[0]);
    context.update(input.to_string().as_bytes());
    crate::state::seal::hex(context.finish().as_ref())
}

/// A person's answer to one parked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    Approve,
    Deny,
}

/// Who answered: in GitHub Actions the actor and the run and job it approved in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_job: Option<String>,
}

impl Approver {
    /// From the environment: `GITHUB_ACTOR` (with `GITHUB_RUN_ID`, `GITHUB_JOB`) in
    /// GitHub Actions, else the login name. `None` when neither names anyone.
    pub fn from_env() -> Option<Approver> {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        if std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true") {
            return var("GITHUB_ACTOR").map(|name| Approver {
                name,
                github_run_id: var("GITHUB_RUN_ID"),
                github_job: var("GITHUB_JOB"),
            });
        }
        var("USER").or_else(|| var("LOGNAME")).map(|name| Approver {
            name,
            github_run_id: None,
            github_job: None,
        })
    }
}

impl std::fmt::Display for Approver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        match (&self.github_run_id, &self.github_job) {
            (Some(run), Some(job)) => write!(f, " (GitHub Actions run {run}, job {job})"),
            (Some(run), None) => write!(f, " (GitHub Actions run {run})"),
            _ => Ok(()),
        }
    }
}

/// One line of `approvals.jsonl` (its tag aside).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub run_id: String,
    /// The parked call's tool_use id.
    pub id: String,
    pub tool: String,
    pub hash: String,
    /// Serialized as `verdict`: the approvals file is sealed and older files must read.
    #[serde(rename = "verdict")]
    pub ruling: Ruling,
    pub approver: Approver,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Random, once: a resume records it as used in the operator's state folder.
    pub nonce: String,
}

impl Approval {
    /// What the model and the record read of this answer.
    fn reason(&self) -> String {
        let verb = match self.ruling {
            Ruling::Approve => "approved",
            Ruling::Deny => "denied",
        };
        let note = self
            .note
            .as_deref()
            .map(|note| format!(": {note}"))
            .unwrap_or_default();
        format!(
            "{verb} by {} at {}{note}",
            self.approver,
            self.at.format("%Y-%m-%dT%H:%M:%SZ")
        )
    }
}

/// What a resumed run does with a parked call: the answer that holds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersonAnswer {
    /// Run it exactly as asked; `reason` names who approved it.
    Approved { reason: String },
    /// Refuse it; the model reads `reason`.
    Denied { reason: String },
}

/// A parked call as the verified transcript holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedOnRecord {
    pub id: String,
    pub tool: String,
    pub input: Value,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApprovalError {
    #[error("{APPROVALS_FILE} is not trusted: {0}")]
    Untrusted(VerifyError),
    #[error("{APPROVALS_FILE} line {line} does not parse: {message}")]
    Parse { line: usize, message: String },
    #[error(
        "{APPROVALS_FILE} line {line} answers a call of another run ({other}), not of {run_id}"
    )]
    OtherRun {
        line: usize,
        other: String,
        run_id: String,
    },
    #[error(
        "{APPROVALS_FILE} line {line} answers the call {id} for another input than the one parked (the approval's hash {approved}, the call's {parked}): approve the call as it was asked"
    )]
    ChangedInput {
        line: usize,
        id: String,
        approved: String,
        parked: String,
    },
    #[error(
        "{APPROVALS_FILE} line {line}: the answer to {id} expired at {expires_at}; approve it again"
    )]
    Expired {
        line: usize,
        id: String,
        expires_at: String,
    },
    #[error(
        "{APPROVALS_FILE} line {line}: the answer to {id} was used by an earlier resume; each approval runs its call once"
    )]
    Used { line: usize, id: String },
    #[error("the parked call {0} has no answer: `tollgate approve RUN {0}` or `--deny {0}` first")]
    Unanswered(String),
    #[error("cannot record the answers: {0}")]
    Write(String),
}

/// The answer that holds for each call in `parked`, from `text` (the run folder's
/// `approvals.jsonl`, empty when there is none). Every line must carry the operator's tag
/// and name this run; an answer to a parked call must bind its exact input, hold at `now`
/// and be unused (`used`); the last answer to a call counts. Every parked call needs one.
pub fn answers(
    text: &str,
    key: Option<&TranscriptKey>,
    run_id: &str,
    parked: &[ParkedOnRecord],
    now: DateTime<Utc>,
    used: &dyn Fn(&str) -> bool,
) -> Result<HashMap<String, (PersonAnswer, String)>, ApprovalError> {
    let verified = verify_record(key, APPROVALS_GENESIS, text).map_err(ApprovalError::Untrusted)?;
    if verified.torn {
        // `approve` writes whole lines; a part of one is not the operator's answer.
        return Err(ApprovalError::Untrusted(VerifyError::Untagged(
            verified.text.lines().count() + 1,
        )));
    }
    let mut held: HashMap<String, (PersonAnswer, String)> = HashMap::new();
    for (index, line) in verified.text.lines().enumerate() {
        let line_no = index + 1;
        let approval: Approval =
            serde_json::from_str(line).map_err(|err| ApprovalError::Parse {
                line: line_no,
                message: err.to_string(),
            })?;
        if approval.run_id != run_id {
            return Err(ApprovalError::OtherRun {
                line: line_no,
                other: approval.run_id,
                run_id: run_id.to_string(),
            });
        }
        // An answer to a call that is no longer parked was used by the resume that ran it.
        let Some(call) = parked.iter().find(|call| call.id == approval.id) else {
            continue;
        };
        let hash = call_hash(&call.tool, &call.input);
        if approval.hash != hash || approval.tool != call.tool {
            return Err(ApprovalError::ChangedInput {
                line: line_no,
                id: approval.id,
                approved: approval.hash,
                parked: hash,
            });
        }
        if approval.expires_at <= now {
            return Err(ApprovalError::Expired {
                line: line_no,
                id: approval.id,
                expires_at: approval.expires_at.to_rfc3339(),
            });
        }
        if used(&approval.nonce) {
            return Err(ApprovalError::Used {
                line: line_no,
                id: approval.id,
            });
        }
        let answer = match approval.ruling {
            Ruling::Approve => PersonAnswer::Approved {
                reason: approval.reason(),
            },
            Ruling::Deny => PersonAnswer::Denied {
                reason: approval.reason(),
            },
        };
        held.insert(approval.id.clone(), (answer, approval.nonce));
    }
    if let Some(call) = parked.iter().find(|call| !held.contains_key(&call.id)) {
        return Err(ApprovalError::Unanswered(call.id.clone()));
    }
    Ok(held)
}

/// `text` (the current `approvals.jsonl`, verified) with `new` appended, each line tagged on
/// from the last one.
pub fn append(
    text: &str,
    key: Arc<TranscriptKey>,
    new: &[Approval],
) -> Result<String, ApprovalError> {
    let verified =
        verify_record(Some(&key), APPROVALS_GENESIS, text).map_err(ApprovalError::Untrusted)?;
    if verified.torn {
        return Err(ApprovalError::Untrusted(VerifyError::Untagged(
            verified.text.lines().count() + 1,
        )));
    }
    let mut chain = if verified.text.is_empty() {
        Chain::start_record(key, APPROVALS_GENESIS)
    } else {
        Chain::resume(key, verified.last)
    };
    let mut out = verified.text.to_string();
    for approval in new {
        let json =
            serde_json::to_string(approval).map_err(|err| ApprovalError::Write(err.to_string()))?;
        out.push_str(&chain.seal(&json));
        out.push('\n');
    }
    Ok(out)
}

/// 32 random hex digits.
pub fn nonce() -> Result<String, ApprovalError> {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| ApprovalError::Write("the system's random source failed".into()))?;
    Ok(crate::state::seal::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn key() -> Arc<TranscriptKey> {
        Arc::new(TranscriptKey::new(b"0123456789abcdef0123456789abcdef"))
    }

    fn at(hours: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + hours * 3600, 0).unwrap()
    }

    fn approval(id: &str, input: &Value, ruling: Ruling, nonce: &str) -> Approval {
        Approval {
            run_id: "run-1".into(),
            id: id.into(),
            tool: "Bash".into(),
            hash: call_hash("Bash", input),
            ruling,
            approver: Approver {
                name: "octocat".into(),
                github_run_id: Some("42".into()),
                github_job: Some("approve".into()),
            },
            note: Some("ok".into()),
            at: at(0),
            expires_at: at(24),
            nonce: nonce.into(),
        }
    }

    fn parked(id: &str, input: &Value) -> ParkedOnRecord {
        ParkedOnRecord {
            id: id.into(),
            tool: "Bash".into(),
            input: input.clone(),
        }
    }

    #[test]
    fn the_hash_binds_tool_and_exact_input() {
        let input = json!({"command": "git push", "description": "push"});
        let same = json!({"description": "push", "command": "git push"});
        assert_eq!(call_hash("Bash", &input), call_hash("Bash", &same));
        assert_ne!(call_hash("Bash", &input), call_hash("Read", &input));
        assert_ne!(
            call_hash("Bash", &input),
            call_hash("Bash", &json!({"command": "git push --force"}))
        );
        assert_eq!(call_hash("Bash", &input).len(), 64);
    }

    #[test]
    fn answers_hold_only_for_this_run_this_input_in_time_and_once() {
        let push = json!({"command": "git push"});
        let tag = json!({"command": "git tag v1"});
        let calls = [parked("a", &push), parked("b", &tag)];
        let n1 = "0".repeat(32);
        let n2 = "1".repeat(32);
        let good = append(
            "",
            key(),
            &[
                approval("a", &push, Ruling::Approve, &n1),
                approval("b", &tag, Ruling::Deny, &n2),
            ],
        )
        .unwrap();
        let never = |_: &str| false;
        let held = answers(&good, Some(&key()), "run-1", &calls, at(1), &never).unwrap();
        assert_eq!(
            held["a"].0,
            PersonAnswer::Approved {
                reason: "approved by octocat (GitHub Actions run 42, job approve) at 2027-01-15T08:00:00Z: ok".into()
            }
        );
        assert!(matches!(held["b"].0, PersonAnswer::Denied { .. }));

        let check = |text: &str, now, used: &dyn Fn(&str) -> bool| {
            answers(text, Some(&key()), "run-1", &calls, now, used).unwrap_err()
        };
        // A changed line breaks its tag.
        let tampered = good.replacen("\"deny\"", "\"approve\"", 1);
        assert_eq!(
            check(&tampered, at(1), &never),
            ApprovalError::Untrusted(VerifyError::Tampered(2))
        );
        // Another run's answers, tagged by the same operator, do not answer this run.
        let other = append(
            "",
            key(),
            &[Approval {
                run_id: "run-2".into(),
                ..approval("a", &push, Ruling::Approve, &n1)
            }],
        )
        .unwrap();
        assert!(matches!(
            check(&other, at(1), &never),
            ApprovalError::OtherRun { line: 1, .. }
        ));
        // An approval of another input than the one parked.
        let changed = append(
            "",
            key(),
            &[approval(
                "a",
                &json!({"command": "git push --force"}),
                Ruling::Approve,
                &n1,
            )],
        )
        .unwrap();
        assert!(matches!(
            check(&changed, at(1), &never),
            ApprovalError::ChangedInput { line: 1, .. }
        ));
        assert!(matches!(
            check(&good, at(25), &never),
            ApprovalError::Expired { line: 1, .. }
        ));
        let first_used = |nonce: &str| nonce == n1;
        assert!(matches!(
            check(&good, at(1), &first_used),
            ApprovalError::Used { line: 1, .. }
        ));
        let only_a = append("", key(), &[approval("a", &push, Ruling::Approve, &n1)]).unwrap();
        assert_eq!(
            check(&only_a, at(1), &never),
            ApprovalError::Unanswered("b".into())
        );
        // An answer to a call no longer parked is passed over; the later answer counts.
        let later = append(
            &only_a,
            key(),
            &[
                approval("b", &tag, Ruling::Approve, &n2),
                approval("b", &tag, Ruling::Deny, &n2),
            ],
        )
        .unwrap();
        let held = answers(&later, Some(&key()), "run-1", &calls[1..], at(1), &never).unwrap();
        assert!(matches!(held["b"].0, PersonAnswer::Denied { .. }));
    }
}
