//! S6 scheduling: runs the calls of one model response that the gate allowed — safe ones
//! together, unsafe ones alone — and lands every result in call order. Decides nothing.

mod batch;
mod cancel;
mod host;
mod progress;
mod queue;
#[cfg(test)]
mod tests;

pub use batch::{BatchEnd, run_batch};
pub use cancel::Cancellation;
pub use host::{Admission, BatchHost, Call, CallDeadline, Landing};
pub use progress::{PROGRESS_INTERVAL, PROGRESS_MAX_LINES, ProgressUpdate};
pub use queue::{
    InputLineError, MAX_INPUT_LINE_BYTES, MessageQueue, QUEUE_CAPACITY, QueuedArrivals,
    QueuedInput, parse_input_line, read_input,
};

/// Concurrency-safe calls of one batch that may run at once, unless the task says otherwise
/// (`limits.max_parallel_tools`).
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 10;
