//! The run's transcript: one tagged JSON event a line, flushed as it happens, enough to
//! replay the run. The event types are the schema.

mod event;
pub mod final_outcome;
mod run;
mod stream;
mod writer;

pub use event::{
    AbortCause, CheckOutcome, ClassifierCounts, CompactionOutcome, CompactionTokens,
    CompactionTrigger, DenialSummary, Disposition, EffectTotals, Event, ModelSummary, Outcome,
    PluginSummary, PolicySummary, ProgressUpdate, QueryEnd, ReminderKind, ReplacedResult,
    ResultStatus, RunCounts, TaskSummary, UsageSource,
};
pub use run::{CheckRecord, Denial, EffectExcess, EffectReport, RunReport};
pub use stream::{StreamFormat, StreamOutput, stream_type};
pub use writer::{BackgroundSends, Observer, Observers, RecordedLine, Transcript, TranscriptLine};
