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
pub use queue::{InputLineError, MessageQueue, QueuedArrivals, parse_input_line};
pub use turn::{TurnEnd, run_turn};
