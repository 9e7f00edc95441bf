//! End-to-end suites: each runs the real `tollgate` binary.

mod action;
mod check_cli;
mod gate_cli;
mod redaction;
mod reports;
mod run_cli;
