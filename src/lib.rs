//! tollgate: a headless runner for LLM coding agents. A task drives a model through the
//! tool-calling loop; every tool call passes the permission gate; the run leaves a transcript,
//! reports and an exit code that says what happened.
//!
//! This crate is the command line (`cli`) over `tollgate-core`, whose modules it re-exports,
//! so `tollgate::session`, `tollgate::policy` and the rest name what they always did.

pub use tollgate_core::*;

pub mod cli;
