//! The progress channel of a running call: a tool hands over output lines as they appear,
//! never blocking on them. What is shown, and how often, is the scheduler's business.

use tokio::sync::mpsc;

/// One line of a call's live output, tagged with the call's place in its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    pub call: usize,
    pub line: String,
}

/// Where a tool sends its live output. Lossy by design: when the reader falls behind, lines
/// are dropped rather than stalling the command's pipes (the final output is captured apart).
#[derive(Debug, Clone)]
pub struct ProgressSink {
    call: usize,
    tx: mpsc::Sender<ProgressLine>,
}

impl ProgressSink {
    pub fn new(call: usize, tx: mpsc::Sender<ProgressLine>) -> ProgressSink {
        ProgressSink { call, tx }
    }

    pub fn line(&self, line: impl Into<String>) {
        let _ = self.tx.try_send(ProgressLine {
            call: self.call,
            line: line.into(),
        });
    }
}
