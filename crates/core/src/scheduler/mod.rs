//! S6 scheduling: runs the calls of one model response that the gate allowed — safe ones
//! together, unsafe ones alone — and lands every result in call order. Decides nothing.

mod cancel;
mod host;
mod progress;
mod queue;
#[cfg(test)]
mod tests;
mod turn;

pub use cancel::Cancellation;
pub use host::{Admission, Call, CallDeadline, Landing, TurnHost};
pub use progress::{PROGRESS_INTERVAL, PROGRESS_MAX_LINES};
pub use queue::{
    InputLineError, MAX_INPUT_LINE_BYTES, MessageQueue, QUEUE_CAPACITY, QueuedArrivals,
    QueuedInput, parse_input_line, read_input,
};
pub use turn::{TurnEnd, run_turn};
