//! A run's verifiable record: an in-toto statement (`statement.json`) of what produced the
//! run's changes — the commit it started from, the task, policy and model digests, the
//! decisions, the parked and the person-answered calls, and the transcript's digest — for a
//! workflow to sign with the platform's attestation step; and [`verify`], which checks a run
//! folder's transcript against it and says what differs. Reads nothing itself: the run and
//! `tollgate verify` hand it the texts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::{Decision, Layer};
use crate::state::{TranscriptKey, seal::hex};
use crate::transcript::{Event, Outcome, RecordedLine};

/// The run folder's statement, rewritten whenever the run ends (a resume's too).
pub const STATEMENT_FILE: &str = "statement.json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate's type: under the repository Cargo.toml names, so it moves with it.
pub const PREDICATE_TYPE: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/attestation/run/v1");

/// An in-toto v1 statement about one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The transcript: what a signature over this statement vouches for.
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: RunPredicate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub name: String,
    pub digest: BTreeMap<String, String>,
}

/// What the run was given and what it decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPredicate {
    pub run_id: String,
    pub outcome: Outcome,
    /// The workdir's `HEAD` when the run ended, read from `.git` (no git is run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub task: Digested,
    /// Every policy source in force, highest precedence first.
    pub policy: Vec<Digested>,
    pub model: Model,
    /// Read from the transcript: what `verify` recomputes.
    pub record: Record,
}

/// A file by its path and SHA-256 (`None` when it could not be read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digested {
    pub path: PathBuf,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub provider: String,
    pub name: String,
}

/// The transcript's own facts: its digest and size, the decisions and the calls a person
/// answered. A pure function of the transcript's text ([`record`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub transcript_sha256: String,
    pub lines: usize,
    pub decisions: Decisions,
    /// Each call parked for a person: id, tool, and the hash of its input.
    pub parked: Vec<Call>,
    /// Each call a person approved (`tollgate approve`): id and who, as recorded.
    pub approved: Vec<Answered>,
    /// Each call a person denied.
    pub denied: Vec<Answered>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    pub allowed: u32,
    pub denied: u32,
    pub parked: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    pub id: String,
    pub reason: String,
}

/// What the run hands over beside its transcript.
pub struct RunFacts<'a> {
    pub run_id: &'a str,
    pub outcome: Outcome,
    pub commit: Option<String>,
    pub task: Digested,
    pub policy: Vec<Digested>,
    pub model: Model,
}

/// The statement for a run whose transcript is `transcript`.
pub fn statement(facts: RunFacts<'_>, transcript: &str) -> Statement {
    let record = record(transcript);
    Statement {
        statement_type: STATEMENT_TYPE.to_string(),
        subject: vec![Subject {
            name: crate::out_dir::TRANSCRIPT_FILE.to_string(),
            digest: BTreeMap::from([("sha256".to_string(), record.transcript_sha256.clone())]),
        }],
        predicate_type: PREDICATE_TYPE.to_string(),
        predicate: RunPredicate {
            run_id: facts.run_id.to_string(),
            outcome: facts.outcome,
            commit: facts.commit,
            task: facts.task,
            policy: facts.policy,
            model: facts.model,
            record,
        },
    }
}

pub fn sha256(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// The transcript's facts. A line that does not parse counts toward the digest and the
/// lines only (`verify` says so when a tag or a digest is off).
pub fn record(transcript: &str) -> Record {
    let mut record = Record {
        transcript_sha256: sha256(transcript.as_bytes()),
        lines: transcript.lines().count(),
        ..Record::default()
    };
    let mut tools: BTreeMap<String, (String, serde_json::Value)> = BTreeMap::new();
    for line in transcript.lines() {
        let Ok(recorded) = serde_json::from_str::<RecordedLine>(line) else {
            continue;
        };
        match recorded.event {
            Event::ToolCall { id, tool, input } => {
                tools.insert(id, (tool, input));
            }
            Event::PermissionDecision { id, decision, .. } => {
                let answered = || Answered {
                    id: id.clone(),
                    reason: decision.reason.clone(),
                };
                match (decision.decision, decision.layer) {
                    (Decision::Allow, Layer::Person) => record.approved.push(answered()),
                    (Decision::Deny, Layer::Person) => record.denied.push(answered()),
                    _ => {}
                }
                match decision.decision {
                    Decision::Allow => record.decisions.allowed += 1,
                    Decision::Deny | Decision::Ask => record.decisions.denied += 1,
                    Decision::Defer => {
                        record.decisions.parked += 1;
                        let (tool, input) = tools.get(&id).cloned().unwrap_or_default();
                        record.parked.push(Call {
                            hash: crate::approval::call_hash(&tool, &input),
                            id,
                            tool,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    record
}

/// What differs between `statement` and the run folder's `transcript`, empty when nothing
/// does. With the operator's `key`, every line's tag is checked too, naming the first line
/// changed since tollgate wrote it.
pub fn verify(statement: &Statement, transcript: &str, key: Option<&TranscriptKey>) -> Vec<String> {
    let mut differs = Vec::new();
    if statement.statement_type != STATEMENT_TYPE || statement.predicate_type != PREDICATE_TYPE {
        differs.push(format!(
            "the statement is not a tollgate run's ({} / {})",
            statement.statement_type, statement.predicate_type
        ));
    }
    if let Some(key) = key {
        match crate::state::verify(Some(key), transcript) {
            Ok(verified) if verified.torn => {
                differs.push("the transcript's last line is cut short".to_string());
            }
            Ok(_) => {}
            Err(err) => differs.push(format!("transcript: {err}")),
        }
    }
    let now = record(transcript);
    let said = &statement.predicate.record;
    let subject = statement
        .subject
        .iter()
        .find(|subject| subject.name == crate::out_dir::TRANSCRIPT_FILE)
        .and_then(|subject| subject.digest.get("sha256"));
    if subject != Some(&said.transcript_sha256) {
        differs.push("the statement's subject is not the transcript its record names".into());
    }
    let mut compare = |what: &str, stated: String, found: String| {
        if stated != found {
            differs.push(format!(
                "{what}: the statement says {stated}, the transcript has {found}"
            ));
        }
    };
    compare(
        "the transcript's SHA-256",
        said.transcript_sha256.clone(),
        now.transcript_sha256.clone(),
    );
    compare("lines", said.lines.to_string(), now.lines.to_string());
    compare("decisions", json(&said.decisions), json(&now.decisions));
    compare("parked calls", json(&said.parked), json(&now.parked));
    compare("approved calls", json(&said.approved), json(&now.approved));
    compare(
        "calls a person denied",
        json(&said.denied),
        json(&now.denied),
    );
    differs
}

/// What `verify` compares, in one line for its messages.
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The commit `HEAD` names in `workdir`'s `.git` (a folder; a worktree's `.git` file is not
/// followed), read as files: running git would run what the repository's config says.
pub fn head_commit(workdir: &Path) -> Option<String> {
    let git = workdir.join(".git");
    let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    let is_commit = |text: &str| text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if is_commit(head) {
        return Some(head.to_string());
    }
    let name = head.strip_prefix("ref: ")?;
    if name.split('/').any(|part| part == ".." || part.is_empty()) {
        return None;
    }
    if let Ok(text) = std::fs::read_to_string(git.join(name)) {
        return Some(text.trim().to_string()).filter(|text| is_commit(text));
    }
    let packed = std::fs::read_to_string(git.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (commit, reference) = line.split_once(' ')?;
        (reference == name && is_commit(commit)).then(|| commit.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn sealed(key: &TranscriptKey, lines: &[String]) -> String {
        let mut chain = crate::state::Chain::start(Arc::new(key.clone()));
        lines
            .iter()
            .map(|line| format!("{}\n", chain.seal(line)))
            .collect()
    }

    fn facts() -> RunFacts<'static> {
        RunFacts {
            run_id: "r1",
            outcome: Outcome::Success,
            commit: None,
            task: Digested {
                path: "task.yaml".into(),
                sha256: Some(sha256(b"task")),
            },
            policy: Vec::new(),
            model: Model {
                provider: "anthropic".into(),
                name: "m".into(),
            },
        }
    }

    #[test]
    fn verify_names_what_changed_since_the_statement() {
        let key = TranscriptKey::new(b"0123456789abcdef0123456789abcdef");
        let decision = |seq: u32, id: &str, decision: &str, layer: &str| {
            format!(
                r#"{{"seq":{seq},"time":"t","type":"permission_decision","id":"{id}","tool":"Bash","decision":"{decision}","step":"1f","layer":"{layer}","reason":"r {id}"}}"#
            )
        };
        let lines = vec![
            r#"{"seq":1,"time":"t","type":"tool_call","id":"a","tool":"Bash","input":{"command":"git push"}}"#.to_string(),
            decision(2, "a", "defer", "rule"),
            decision(3, "a", "allow", "person"),
            decision(4, "b", "deny", "rule"),
        ];
        let text = sealed(&key, &lines);
        let statement = statement(facts(), &text);
        let record = &statement.predicate.record;
        assert_eq!(
            record.decisions,
            Decisions {
                allowed: 1,
                denied: 1,
                parked: 1
            }
        );
        assert_eq!(
            record.parked,
            [Call {
                id: "a".into(),
                tool: "Bash".into(),
                hash: crate::approval::call_hash(
                    "Bash",
                    &serde_json::json!({"command": "git push"})
                ),
            }]
        );
        assert_eq!(record.approved[0].id, "a");
        assert_eq!(verify(&statement, &text, Some(&key)), Vec::<String>::new());

        // One word of one line changed: its tag and the digest say so, and the record too.
        let changed = text.replacen(r#""decision":"deny""#, r#""decision":"allow""#, 1);
        let differs = verify(&statement, &changed, Some(&key));
        assert!(
            differs[0].contains("line 4 does not match its integrity tag"),
            "{differs:?}"
        );
        assert!(
            differs
                .iter()
                .any(|d| d.starts_with("the transcript's SHA-256")),
            "{differs:?}"
        );
        assert!(
            differs.iter().any(|d| d.starts_with("decisions")),
            "{differs:?}"
        );
        // Without the key, the digest still tells.
        assert!(!verify(&statement, &changed, None).is_empty());
    }

    #[test]
    fn head_is_read_from_the_git_folder() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(head_commit(dir.path()), None);
        std::fs::write(
            git.join("packed-refs"),
            format!("{commit} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(head_commit(dir.path()).as_deref(), Some(commit));
        std::fs::write(git.join("refs/heads/main"), format!("{commit}\n")).unwrap();
        assert_eq!(head_commit(dir.path()).as_deref(), Some(commit));
        std::fs::write(git.join("HEAD"), "ref: refs/../../x\n").unwrap();
        assert_eq!(head_commit(dir.path()), None);
    }
}
