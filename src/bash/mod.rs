//! Bash command analysis for the gate: rule patterns over a command's words, and the proof
//! that a command string is nothing but plain words. Pure: no I/O.

mod pattern;
mod plain;

pub use pattern::{CommandPattern, PatternError};
pub use plain::plain_words;
