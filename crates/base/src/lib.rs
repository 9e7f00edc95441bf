//! Small things every layer may use, without I/O dependencies: bounded text, lexical paths,
//! where a path leads for a process, the links below a folder, one view of the disk for a
//! stream of decisions, how much stack a thread has left, which variable names are secret,
//! JSON read with unique keys, text for a URL. Imports nothing of tollgate's; the main crate's `base` module
//! re-exports it beside what needs the async runtime (the abort signal, deadlines).

mod beneath;
mod disk;
mod json;
mod links_below;
mod path;
mod resolve;
mod secret;
mod stack;
mod text;

pub use beneath::{BeneathError, OpenFor, Root, WALK_ENV as BENEATH_WALK_ENV};
pub use disk::{DiskView, Seen, look_now};
pub use json::{from_str_unique_keys, parse_unique_keys};
pub use links_below::{LinkWalkError, MAX_WALK_DEPTH, MAX_WALKED_ENTRIES, links_below};
pub use path::{
    has_prefix, is_normal_absolute, normalize_lexically, parent_and_name, strip_prefix,
};
pub use resolve::{Frame, MAX_LINKS, Reached, Stream, Unresolvable, resolve, resolve_without_disk};
pub use secret::is_secret_env_name;
pub use stack::{STACK_MARGIN, stack_is_low};
pub use text::{counted, percent_encode, plural, truncate_middle, wildcard_match};
