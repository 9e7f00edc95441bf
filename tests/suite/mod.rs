//! End-to-end suites: each runs the real `tollgate` binary (the Bash analyser's suites call
//! the library directly).

mod action;
mod authority;
mod auto_mode;
mod bash_bindings;
mod bash_corpus;
mod bash_effects;
mod bash_expand;
mod bash_options;
mod bash_oracle;
mod bash_props;
mod bash_sweep;
mod batch;
mod batch_browser;
mod check_cli;
mod config_errors;
mod distribution;
mod economy;
mod faults;
mod gate_cli;
mod gate_reach;
mod hooks_cli;
mod installer;
mod layers;
mod mcp;
mod planted_repo;
mod providers;
mod redaction;
mod reports;
mod run_cli;
mod runner;
mod sandbox;
mod scheduling;
mod subagents;
mod toolchains;
