//! End-to-end suites: each runs the real `tollgate` binary.

mod check_cli;
mod gate_cli;
mod hooks_cli;
mod providers;
mod run_cli;
