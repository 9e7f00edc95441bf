//! Small things every layer may use: the `tollgate-base` crate (bounded text, lexical paths,
//! path resolution, the disk view, stack depth, secret names, strict JSON) and, here, what
//! needs the async runtime — the abort signal and capped deadlines — and shared defaults.
//! Imports nothing else of tollgate's.

mod abort;
mod bounds;

pub use tollgate_base::*;

pub use abort::{AbortHandle, AbortReason, AbortSignal};
pub use bounds::{FAR_FUTURE, deadline, deadline_std};

/// Concurrency-safe calls of one model response that may run at once, unless the task says
/// otherwise (`limits.max_parallel_tools`); the task parser and the scheduler both read it.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 10;
