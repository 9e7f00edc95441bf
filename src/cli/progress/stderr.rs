//! stderr as the progress and the log lines share it: while a live line is drawn, a line
//! written below it would be overdrawn at the next tick, so every write goes above it.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use indicatif::ProgressBar;

/// A handle on stderr; clones share the live line, if one is drawn.
#[derive(Clone, Default)]
pub struct Stderr {
    live: Arc<Mutex<Option<ProgressBar>>>,
}

impl Stderr {
    /// Writes `bytes` as they are, above the live line if there is one.
    pub fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let write = || {
            let mut stderr = std::io::stderr().lock();
            stderr.write_all(bytes).and_then(|()| stderr.flush())
        };
        match self.live() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// One line; a stderr that went away loses it, and the run goes on.
    pub fn write_line(&self, line: &str) {
        let _ = self.write(format!("{line}\n").as_bytes());
    }

    pub(super) fn attach(&self, bar: ProgressBar) {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar);
    }

    pub(super) fn detach(&self) {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Cloned out, so the lock is not held while writing.
    fn live(&self) -> Option<ProgressBar> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
