//! The run's output folder: one run at a time (an exclusive lock held for the run's life),
//! and files written whole or not at all (a temp file renamed into place), each beneath the
//! folder it belongs in and through no link, so a link planted in an output folder (a
//! resumed run's `results`, a `transcript.jsonl` or lock file committed to a repository)
//! is refused or replaced, never followed. It never decides what goes into a file, only that
//! a reader never sees half of one and that it lands where it was meant to.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::base::{BeneathError, OpenFor, Root};

/// The lock file's name; it holds the pid of the run that owns the folder.
pub const LOCK_FILE: &str = "tollgate.lock";
/// The transcript's name: a folder holding one holds a run's record.
pub const TRANSCRIPT_FILE: &str = "transcript.jsonl";

/// What a run does with an output folder that already holds another run's transcript.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Existing {
    /// Refuse it: a second cron run on the same `--out` must not replace the first.
    #[default]
    Refuse,
    /// Replace it (`--force`, or a batch re-running a repository its journal says to redo).
    Replace,
    /// Continue it (`--resume`): the transcript must be there.
    Resume,
}

/// The file in the output folder that holds a run's structured output (`output_schema`).
pub const STRUCTURED_OUTPUT_FILE: &str = "structured_output.json";

#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("cannot create the output folder {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the output folder {path} is in use by another tollgate run (pid {holder}); give each run its own --out"
    )]
    Busy { path: PathBuf, holder: String },
    #[error("cannot lock the output folder {path}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the output folder {path} already holds a run ({state}); give another --out, put {{run_id}} in its path, resume it with --resume, or pass --force to replace it"
    )]
    HoldsRun { path: PathBuf, state: String },
    #[error("the output folder {path} holds no run to resume (no {TRANSCRIPT_FILE})")]
    NoRun { path: PathBuf },
}

/// A file of the run's record (transcript, report, offloaded result) could not be written.
/// Its own error type so the CLI can give it its own exit code.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}")]
pub struct OutputError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The held lock on an output folder; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct OutDirLock {
    _file: File,
}

/// Creates `dir` if needed and takes its lock, refusing at once (no wait) if another run
/// holds it: two runs writing one transcript would interleave it. Returns the folder's
/// canonical path with the lock.
pub fn claim(dir: &Path) -> Result<(PathBuf, OutDirLock), OutDirError> {
    let create = |source| OutDirError::Create {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(create)?;
    let dir = dir.canonicalize().map_err(create)?;
    let lock_error = |source| OutDirError::Lock {
        path: dir.clone(),
        source,
    };
    // Not truncated on open: until the lock is ours, the file holds the owner's pid. Opened
    // beneath the folder through no link: a lock file planted as a link to another file would
    // otherwise have that file emptied below.
    let mut file = Root::open(&dir)
        .and_then(|root| root.open_file(Path::new(LOCK_FILE), OpenFor::Lock))
        .map_err(|err| lock_error(err.into_io()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "unknown".to_string(),
                pid => pid.to_string(),
            };
            return Err(OutDirError::Busy { path: dir, holder });
        }
        Err(std::fs::TryLockError::Error(source)) => return Err(lock_error(source)),
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(lock_error)?;
    Ok((dir, OutDirLock { _file: file }))
}

/// [`claim`] for a run: the folder's existing record is refused, replaced or resumed as
/// `existing` says. Checked under the lock, so no other run can write one meanwhile.
pub fn claim_run(dir: &Path, existing: Existing) -> Result<(PathBuf, OutDirLock), OutDirError> {
    let (dir, lock) = claim(dir)?;
    let transcript = dir.join(TRANSCRIPT_FILE);
    let holds_run = transcript.is_file();
    match (existing, holds_run) {
        (Existing::Refuse, true) => Err(OutDirError::HoldsRun {
            state: run_state(&transcript),
            path: dir,
        }),
        (Existing::Resume, false) => Err(OutDirError::NoRun { path: dir }),
        _ => Ok((dir, lock)),
    }
}

/// How the transcript's run ended, in words: its last line is `run_finished` or it is not.
fn run_state(transcript: &Path) -> String {
    let text = std::fs::read_to_string(transcript).unwrap_or_default();
    let last = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    match last {
        Some(event) if event["type"] == "run_finished" => format!(
            "finished: {}",
            event["outcome"].as_str().unwrap_or("unknown outcome")
        ),
        _ => "not finished".to_string(),
    }
}

/// Writes `bytes` to `path` through a temp file in the same folder and a rename, so `path`
/// is either its old self or complete — never the 0-byte or half file a full disk leaves.
/// The folder is opened as a root and the file made beneath it ([`crate::base::Root`]): a
/// link planted at `path` is replaced by the rename, never written through, and the temp
/// file is created new, never followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(OutputError {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file's path"),
        });
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    write_beneath(dir, Path::new(name), bytes)
}

/// Writes `bytes` to `rel` beneath the folder `base`, whole or not at all as
/// [`write_atomic`] does, making `rel`'s folders beneath `base` first. No link in `rel` is
/// followed: a `results` folder that is a link to elsewhere refuses the write.
pub fn write_beneath(base: &Path, rel: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let fail = |err: BeneathError| OutputError {
        path: base.join(rel),
        source: err.into_io(),
    };
    let root = Root::open(base).map_err(fail)?;
    if let Some(folder) = rel.parent()
        && !folder.as_os_str().is_empty()
    {
        root.create_dirs(folder).map_err(fail)?;
    }
    root.write_atomic(rel, bytes).map_err(fail)
}

/// Opens the run's file `name` in the folder `dir` for writing (the transcript): created or
/// emptied, or appended to, beneath the folder and never through a link.
pub fn open_record(dir: &Path, name: &str, append: bool) -> std::io::Result<File> {
    let how = if append {
        OpenFor::Append
    } else {
        OpenFor::Replace
    };
    Root::open(dir)
        .and_then(|root| root.open_file(Path::new(name), how))
        .map_err(BeneathError::into_io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Links planted in an output folder are never written through: the lock file and the
    /// transcript refuse, a report replaces the link with the file.
    #[test]
    fn links_planted_in_the_output_folder_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, out.join(LOCK_FILE)).unwrap();
        assert!(matches!(claim(&out), Err(OutDirError::Lock { .. })));
        std::fs::remove_file(out.join(LOCK_FILE)).unwrap();
        let _lock = claim(&out).unwrap();
        std::os::unix::fs::symlink(&victim, out.join(TRANSCRIPT_FILE)).unwrap();
        for append in [false, true] {
            let err = open_record(&out, TRANSCRIPT_FILE, append).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
        std::os::unix::fs::symlink(&victim, out.join("junit.xml")).unwrap();
        write_atomic(&out.join("junit.xml"), b"<testsuites/>").unwrap();
        assert!(!out.join("junit.xml").is_symlink());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn a_second_claim_names_the_holder_and_a_dropped_lock_frees_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let (path, lock) = claim(&out).unwrap();
        assert_eq!(path, out.canonicalize().unwrap());
        // A second open file description conflicts with the first even in one process.
        let Err(OutDirError::Busy { holder, .. }) = claim(&out) else {
            panic!("the folder was claimed twice")
        };
        assert_eq!(holder, std::process::id().to_string());
        drop(lock);
        assert!(claim(&out).is_ok());
    }

    #[test]
    fn a_folder_with_a_run_is_refused_unless_replaced_and_resumed_only_with_one() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        assert!(matches!(
            claim_run(&out, Existing::Resume),
            Err(OutDirError::NoRun { .. })
        ));
        drop(claim_run(&out, Existing::Refuse).unwrap());
        std::fs::write(
            out.join(TRANSCRIPT_FILE),
            "{\"type\":\"run_started\"}\n{\"type\":\"run_finished\",\"outcome\":\"success\"}\n",
        )
        .unwrap();
        let err = claim_run(&out, Existing::Refuse).unwrap_err();
        assert!(err.to_string().contains("(finished: success)"), "{err}");
        drop(claim_run(&out, Existing::Replace).unwrap());
        drop(claim_run(&out, Existing::Resume).unwrap());
        std::fs::write(out.join(TRANSCRIPT_FILE), "{\"type\":\"run_started\"}\n").unwrap();
        let err = claim_run(&out, Existing::Refuse).unwrap_err();
        assert!(err.to_string().contains("(not finished)"), "{err}");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        write_atomic(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let blocked = dir.path().join("report");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("keep"), "x").unwrap();
        let err = write_atomic(&blocked, b"second").unwrap_err();
        assert_eq!(err.path, blocked);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
