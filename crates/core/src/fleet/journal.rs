//! The per-repository journal: the last finished phase, what the run reported and the cache
//! key, written atomically (temp file, rename) after every phase so a batch killed at any
//! point restarts each repository where it stood; flushed to disk (fsync) only where a write
//! lost to a power cut would cost something. It never decides what to redo.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What to do about a journal that cannot be used, said in every message.
const START_OVER: &str = "remove that file to run the repository again from the start, or give --rerun all to run every repository again";

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot read the journal {}: {source}; {START_OVER}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the journal {}:{line}:{column} does not parse (at byte {byte}): {message}; tollgate does not guess where the repository stood: {START_OVER}",
        path.display()
    )]
    Parse {
        path: PathBuf,
        byte: usize,
        line: usize,
        column: usize,
        message: String,
    },
}

/// The 1-based byte of the file at serde_json's 1-based `line` and `column` (bytes into
/// the line): the last byte read when parsing broke, so a file cut short names its length.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let line_start: usize = bytes
        .split_inclusive(|&b| b == b'\n')
        .take(line.saturating_sub(1))
        .map(<[u8]>::len)
        .sum();
    (line_start + column).min(bytes.len())
}

/// How far a journal write reaches before it returns. Both are atomic: a killed batch finds
/// the old journal or the new one, never half of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// In the kernel's cache (rename, no flush): enough where a write lost to a power cut
    /// only makes the next batch redo a step that is found done (a commit, an outcome) or
    /// costs nothing (a fresh working copy).
    Process,
    /// Flushed to disk (the file, then its folder's rename) before it returns: a run's spend
    /// and result, whose loss would run it again unpaid-for in the budget; a push and a pull
    /// request, which reach beyond the machine; a journal that replaces an earlier one.
    Disk,
}

/// Phases in the order a repository goes through them; each is recorded once finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Cloned,
    Ran,
    Checked,
    Committed,
    Pushed,
    PrOpened,
}

/// How a repository ended, once it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoOutcome {
    /// The run succeeded and its change is committed on the branch.
    Changed,
    /// The run succeeded without changing a file: no branch commit, no patch.
    Unchanged,
    /// Working copy, run, check or commit failed; `reason` says which.
    Failed,
    /// Not started: the batch's cost limit was reached first.
    Skipped,
}

/// What the merged reports need of a finished run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's id: a repository that ran again has a new one, so its cost is new spend.
    #[serde(default)]
    pub run_id: String,
    pub outcome: String,
    pub exit_code: u8,
    pub checks_passed: u32,
    pub checks_failed: u32,
    pub denials: u32,
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    /// The failed checks' names and the run's error, for the testcase's message.
    pub failures: Vec<String>,
    /// The first refused call (tool, what it was, the reason), for the report's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial: Option<String>,
    /// The provider did not report some request's usage: the cost is an estimate's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_estimated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub repo: String,
    pub phase: Phase,
    pub outcome: Option<RepoOutcome>,
    pub reason: Option<String>,
    pub cache_key: Option<String>,
    pub head: Option<String>,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub patch: Option<PathBuf>,
    pub pr_url: Option<String>,
    pub run: Option<RunSummary>,
    /// What the run's policy said of pushing the branch; `None` when the run was not asked
    /// (nothing was to be published then), which later counts as a refusal.
    #[serde(default)]
    pub push: Option<PushPermission>,
}

/// The run's gate on `git push REMOTE BRANCH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PushPermission {
    Allowed,
    /// With the gate's reason.
    Refused(String),
}

impl Journal {
    pub fn new(repo: &str) -> Journal {
        Journal {
            repo: repo.to_string(),
            phase: Phase::Pending,
            outcome: None,
            reason: None,
            cache_key: None,
            head: None,
            branch: None,
            commit: None,
            patch: None,
            pr_url: None,
            run: None,
            push: None,
        }
    }

    /// The journal at `path`; `None` when there is none yet. One that cannot be read or
    /// parsed is an error, never "no journal": taking it for one would run a finished
    /// repository again, overwrite its run and drop its cost from the batch's budget.
    pub fn read(path: &Path) -> Result<Option<Journal>, JournalError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(JournalError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| JournalError::Parse {
                path: path.to_path_buf(),
                byte: byte_offset(&bytes, err.line(), err.column()),
                line: err.line(),
                column: err.column(),
                message: err.to_string(),
            })
    }

    /// Replaces the journal in one step: a reader sees the old or the new one, never half,
    /// whenever the process is killed. `durability` says whether it must also survive the
    /// machine losing power.
    pub fn write(&self, path: &Path, durability: Durability) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        if durability == Durability::Disk {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durability == Durability::Disk
            && let Some(dir) = path.parent()
            && let Ok(dir) = std::fs::File::open(dir)
        {
            // The rename itself survives a power loss only once the folder is synced.
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// Whether the repository reached an end of its own (a skipped one has not).
    pub fn finished(&self) -> bool {
        matches!(
            self.outcome,
            Some(RepoOutcome::Changed | RepoOutcome::Unchanged | RepoOutcome::Failed)
        )
    }
}

/// 64-bit FNV-1a: stable across runs, platforms and Rust versions (std's hasher is not),
/// which cache keys and shard assignment both need.
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_journal_reads_back_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        let mut journal = Journal::new("api");
        journal.phase = Phase::Committed;
        journal.commit = Some("abc".into());
        journal.write(&path, Durability::Process).unwrap();
        assert_eq!(Journal::read(&path).unwrap(), Some(journal.clone()));
        journal.phase = Phase::Pushed;
        journal.write(&path, Durability::Disk).unwrap();
        assert_eq!(Journal::read(&path).unwrap(), Some(journal));
        assert_eq!(Journal::read(&dir.path().join("none.json")).unwrap(), None);
        assert!(!dir.path().join("journal.json.tmp").exists());
    }

    #[test]
    fn a_journal_that_does_not_parse_names_the_byte_where_it_broke() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        for (text, byte) in [
            (
                "{\n  \"repo\": \"api\",\n  \"phase\": \"ran\",\n  \"outco",
                45,
            ),
            ("", 0),
            ("{\"repo\": \"api\", \"phase\": \"flying\"}", 33),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = Journal::read(&path).unwrap_err();
            let JournalError::Parse { byte: at, .. } = &err else {
                panic!("{err}")
            };
            assert_eq!(*at, byte, "{text:?}: {err}");
            let message = err.to_string();
            assert!(
                message.contains("journal.json:") && message.contains("--rerun all"),
                "{message}"
            );
        }
    }

    #[test]
    fn the_hash_separates_parts() {
        assert_ne!(stable_hash(&[b"ab", b"c"]), stable_hash(&[b"a", b"bc"]));
        assert_eq!(stable_hash(&[b"api"]), stable_hash(&[b"api"]));
    }
}
