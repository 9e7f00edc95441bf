//! An exclusive `flock` on a lock file, waited for with a bound. The lock lives on its own
//! file, not the ledger's, because the ledger is replaced by rename: a lock on the old inode
//! would not exclude a run that opened the new one.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// Held until dropped (closing the file releases the lock).
#[derive(Debug)]
pub(super) struct LockFile {
    _held: File,
}

impl LockFile {
    /// The lock, or `None` when another holder kept it for `wait`.
    pub(super) fn acquire(path: &Path, wait: Duration) -> std::io::Result<Option<LockFile>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            // SAFETY: the descriptor is the open file's own for this call's duration.
            let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if result == 0 {
                return Ok(Some(LockFile { _held: file }));
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}
