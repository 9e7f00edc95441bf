//! Small things every layer may use: the abort signal, capped deadlines, bounded text,
//! lexical paths, one view of the disk for a stream of decisions, which variable names are
//! secret, JSON read with unique keys, shared defaults. Imports nothing else of tollgate's.

mod abort;
mod bounds;
mod disk;
mod json;
mod path;
mod secret;
mod text;

pub use abort::{AbortHandle, AbortReason, AbortSignal};
pub use bounds::{FAR_FUTURE, deadline, deadline_std};
pub use disk::{DiskView, Seen, look_now};
pub use json::{from_str_unique_keys, parse_unique_keys};
pub use path::{
    has_prefix, is_normal_absolute, normalize_lexically, parent_and_name, strip_prefix,
};
pub use secret::is_secret_env_name;
pub use text::{counted, plural, truncate_middle, wildcard_match};

/// Concurrency-safe calls of one model response that may run at once, unless the task says
/// otherwise (`limits.max_parallel_tools`); the task parser and the scheduler both read it.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 10;
