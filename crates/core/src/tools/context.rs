//! The execution context injected into every call (S1): workspace, limits, the abort signal,
//! the file-state cache, the run's shared tool state (`RunState`) and where file tools do their
//! disk work (`on_disk`: under the sandbox's Landlock domain when it runs). Sub-agents get their
//! own context for the same tools.

use std::collections::HashMap;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::progress::ProgressSink;
use super::run_state::RunState;
use crate::base::AbortSignal;
use crate::exec::ChildEnv;
use crate::policy::{RuleSet, Workspace};

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

/// A write to a file the run has not read in its current version; the text tells the model
/// what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    #[error("{} exists and has not been read yet; Read it first before writing to it", .0.display())]
    NotRead(PathBuf),
    #[error("{} has changed since it was last read; Read it again before writing to it", .0.display())]
    Changed(PathBuf),
}

/// What the run knows about files it has read or written: a write to an existing file must
/// follow a read of its current version, so the model never overwrites what it has not seen.
/// Kept by the metadata of the descriptor the tool acted on, never by looking the path up
/// again (which could name another file by then).
#[derive(Debug, Clone, Default)]
pub struct FileStateCache(Arc<Mutex<HashMap<PathBuf, Option<SystemTime>>>>);

impl FileStateCache {
    /// Remembers `path` as read or written in the version `metadata` (of the opened file).
    pub fn record(&self, path: &Path, metadata: &Metadata) {
        let modified = metadata.modified().ok();
        if let Ok(mut map) = self.0.lock() {
            map.insert(path.to_path_buf(), modified);
        }
    }

    /// `Err` when the file at `path`, opened with `current` metadata (`None`: it did not
    /// exist), was not read in its current version.
    pub fn check_fresh(&self, path: &Path, current: Option<&Metadata>) -> Result<(), Stale> {
        let Some(metadata) = current else {
            return Ok(());
        };
        let current = metadata.modified().ok();
        let known = self.0.lock().ok().and_then(|map| map.get(path).cloned());
        match known {
            None => Err(Stale::NotRead(path.to_path_buf())),
            Some(seen) if seen != current => Err(Stale::Changed(path.to_path_buf())),
            Some(_) => Ok(()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    /// The run's rules, for tools that find files themselves (Grep, Glob): a file that Read
    /// rules or the read guardrails refuse is skipped, not searched or listed.
    pub rules: Arc<RuleSet>,
    pub limits: ToolLimits,
    pub abort: AbortSignal,
    pub files: FileStateCache,
    /// The complete environment of the commands the model starts (no secrets).
    pub command_env: ChildEnv,
    /// Live output of this call, when someone is listening (the scheduler sets it per call).
    pub progress: Option<ProgressSink>,
    /// The OS sandbox Bash commands run in, when the policy turns it on.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// The kernel's read-only domain, where the kernel can hold one and the policy keeps it.
    pub read_only: Option<Arc<crate::sandbox::ReadOnlyDomain>>,
    /// What allowed this call (the scheduler sets it per call).
    pub allow_basis: crate::policy::AllowBasis,
    /// The run's TodoWrite list and deferred tools, shared by every call of the run.
    pub state: RunState,
    /// How WebFetch turns names into addresses (the system's resolver; a test's table).
    pub resolver: crate::net::Resolver,
}

impl ToolContext {
    /// Whether a file found by a walk may be shown: no Read deny or ask rule and no read
    /// guardrail names it.
    pub fn may_read(&self, tool: &crate::policy::ToolName, path: &Path) -> bool {
        crate::policy::read_refusal(&self.rules, &self.workspace, tool, path, false).is_none()
    }

    /// Runs a file tool's filesystem work off the runtime: on a fresh thread confined by the
    /// sandbox's Landlock domain when the sandbox runs (the thread ends with the call), else on
    /// the blocking pool. Work that cannot be confined does not run.
    pub async fn on_disk<T, F>(&self, work: F) -> Result<T, super::ToolError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, super::ToolError> + Send + 'static,
    {
        let failed = |err: &dyn std::fmt::Display| super::ToolError::Failed(err.to_string());
        let domain = match &self.sandbox {
            Some(sandbox) => sandbox.tool_domain().map_err(|err| failed(&err))?,
            None => None,
        };
        match domain {
            Some(ruleset) => crate::sandbox::run_confined(ruleset, work)
                .await
                .map_err(|err| failed(&err))?,
            None => tokio::task::spawn_blocking(work)
                .await
                .map_err(|err| failed(&format_args!("the file work failed: {err}")))?,
        }
    }
}

#[cfg(test)]
impl ToolContext {
    /// A context for a tool's tests: `workspace`, no rules, no sandbox, default limits. The
    /// abort handle is returned for the test to keep.
    pub(crate) fn for_tests(workspace: Workspace) -> (ToolContext, crate::base::AbortHandle) {
        let (handle, abort) = crate::base::AbortHandle::new();
        let ctx = ToolContext {
            resolver: Default::default(),
            workspace: Arc::new(workspace),
            rules: Arc::default(),
            limits: ToolLimits::default(),
            abort,
            files: FileStateCache::default(),
            command_env: crate::exec::RunEnv::new(&Default::default()).model,
            progress: None,
            sandbox: None,
            read_only: None,
            allow_basis: Default::default(),
            state: Default::default(),
        };
        (ctx, handle)
    }
}
