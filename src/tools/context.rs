//! The execution context injected into every call (S1): workspace, limits, the abort signal
//! and the file-state cache. Sub-agents get their own context for the same tools.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::progress::ProgressSink;
use crate::exec::ChildEnv;
use crate::policy::Workspace;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Wall-clock limit of one Bash command.
    pub bash_timeout: Duration,
    /// Largest file Read will load.
    pub max_read_bytes: u64,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            bash_timeout: Duration::from_secs(120),
            max_read_bytes: 256 * 1024,
        }
    }
}

/// Why a run was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortReason {
    /// SIGINT.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

/// Sends the abort. Dropping it does not abort.
#[derive(Debug, Clone)]
pub struct AbortHandle(watch::Sender<Option<AbortReason>>);

/// Observed by the loop and by running tools; cheap to clone.
#[derive(Debug, Clone)]
pub struct AbortSignal(watch::Receiver<Option<AbortReason>>);

impl AbortHandle {
    pub fn new() -> (AbortHandle, AbortSignal) {
        let (tx, rx) = watch::channel(None);
        (AbortHandle(tx), AbortSignal(rx))
    }

    /// The first reason sticks: a second signal does not rename the first.
    pub fn abort(&self, reason: AbortReason) {
        self.0.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason);
                true
            } else {
                false
            }
        });
    }
}

impl AbortSignal {
    pub fn reason(&self) -> Option<AbortReason> {
        *self.0.borrow()
    }

    pub fn is_aborted(&self) -> bool {
        self.reason().is_some()
    }

    /// Resolves once the abort is sent; never, if the handle is dropped without aborting.
    pub async fn aborted(&self) -> AbortReason {
        let mut rx = self.0.clone();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(reason) => *reason,
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }
}

/// What the run knows about files it has read or written: a write to an existing file must
/// follow a read of its current version, so the model never overwrites what it has not seen.
#[derive(Debug, Clone, Default)]
pub struct FileStateCache(Arc<Mutex<HashMap<PathBuf, Option<SystemTime>>>>);

impl FileStateCache {
    pub fn record(&self, path: &Path) {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if let Ok(mut map) = self.0.lock() {
            map.insert(path.to_path_buf(), modified);
        }
    }

    /// `Err` with the reason when `path` exists and was not read in its current version.
    pub fn check_fresh(&self, path: &Path) -> Result<(), String> {
        let Ok(metadata) = std::fs::metadata(path) else {
            return Ok(());
        };
        let current = metadata.modified().ok();
        let known = self.0.lock().ok().and_then(|map| map.get(path).cloned());
        match known {
            None => Err(format!(
                "{} exists and has not been read yet; Read it first before writing to it",
                path.display()
            )),
            Some(seen) if seen != current => Err(format!(
                "{} has changed since it was last read; Read it again before writing to it",
                path.display()
            )),
            Some(_) => Ok(()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    pub limits: ToolLimits,
    pub abort: AbortSignal,
    pub files: FileStateCache,
    /// The complete environment of the commands the model starts (no secrets).
    pub command_env: ChildEnv,
    /// Live output of this call, when someone is listening (the scheduler sets it per call).
    pub progress: Option<ProgressSink>,
    /// The OS sandbox Bash commands run in, when the policy turns it on.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
}
