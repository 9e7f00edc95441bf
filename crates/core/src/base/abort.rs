//! The run's abort signal (SIGINT/SIGTERM/SIGHUP): sent once, observed by the loop, the tools, the
//! hooks and the checks.

use tokio::sync::watch;

/// Why a run was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortReason {
    /// SIGINT.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP: the session that started the run went away (a closed terminal, a CI runner
    /// ending the step). Ended as SIGTERM ends it.
    Hangup,
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
