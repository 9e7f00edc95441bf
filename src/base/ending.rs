//! How a command ended: a value the runner reports and the sandbox and the tools read, kept
//! below both so neither needs the other for it.

use std::os::unix::process::ExitStatusExt;

/// How a command ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself with this code.
    Exited(i32),
    /// A signal ended it (a sandbox limit, the kernel, another process).
    Signalled(i32),
    TimedOut,
    Cancelled,
}

impl Ending {
    pub fn of(status: std::process::ExitStatus) -> Ending {
        match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            // wait(2) without WUNTRACED reports no stopped child; should it, the command did
            // not exit by itself.
            (None, None) => Ending::Signalled(status.stopped_signal().unwrap_or_default()),
        }
    }
}
