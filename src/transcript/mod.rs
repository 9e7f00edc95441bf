//! The run's transcript: one tagged JSON event a line, flushed as it happens, enough to
//! replay the run. The event types are the schema.

mod event;
mod writer;

pub use event::{
    CheckOutcome, Event, ModelSummary, Outcome, PolicySummary, ResultStatus, RunCounts, TaskSummary,
};
pub use writer::{Transcript, TranscriptLine};
