//! The run's output folder: one run at a time (an exclusive lock held for the run's life),
//! and files written whole or not at all (a temp file renamed into place). It never decides
//! what goes into a file, only that a reader never sees half of one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name; it holds the pid of the run that owns the folder.
pub const LOCK_FILE: &str = "tollgate.lock";

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
    // Not truncated on open: until the lock is ours, the file holds the owner's pid.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))
        .map_err(lock_error)?;
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

/// Writes `bytes` to `path` through a temp file in the same folder and a rename, so `path`
/// is either its old self or complete — never the 0-byte or half file a full disk leaves.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let fail = |source| OutputError {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = File::create(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(fail(source));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
