//! End-to-end suites: each runs the real `tollgate` binary.

mod bash_corpus;
mod bash_props;
mod bash_sweep;
mod check_cli;
mod gate_cli;
mod hooks_cli;
mod run_cli;
