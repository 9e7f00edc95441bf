//! tollgate's core: a task drives a model through the tool-calling loop; every tool call
//! passes the permission gate; the run leaves a transcript, reports and an exit code that
//! says what happened. Everything but the command line (the `tollgate` crate's `cli`): the
//! loop, one call's path, the tools, providers, hooks, MCP, sessions, reports and fleets,
//! with the crates below it re-exported under the names the code uses.

pub mod agent;
pub mod agents;
pub mod approval;
pub mod attest;
pub mod base;
/// The Bash analyser (S5), its own crate: pure, symlink resolution injected.
pub use tollgate_bash as bash;
pub mod call;
pub mod classifier;
/// Reading YAML settings with file, line and column: the policy crate's.
pub use tollgate_policy::config;
/// The one process runner: the sandbox crate's.
pub use tollgate_sandbox::exec;
pub mod exit;
pub mod fleet;
pub mod hooks;
pub mod identity;
pub mod input_file;
pub mod ledger;
pub mod mcp;
pub mod memory;
pub mod model;
/// Where tollgate's own connections may go: the sandbox crate's.
pub use tollgate_sandbox::net;
pub mod neutral;
pub mod out_dir;
pub mod plugins;
/// The permission layer (S4), its own crate: pure, values in and decisions out.
pub use tollgate_policy as policy;
pub mod redact;
pub mod reference;
pub mod report;
pub mod results;
/// The OS sandbox, with the process runner and the proxy, its own crate: it carries out
/// decisions, never makes them.
pub use tollgate_sandbox as sandbox;
pub mod scheduler;
/// The settings file's parts that are not permission rules (hooks, sandbox, MCP, plugins,
/// auto mode, authority): the policy crate's `settings`.
pub use tollgate_policy::settings;
pub mod session;
pub mod shared_budget;
pub mod skills;
pub mod state;
pub mod task;
pub mod telemetry;
pub mod template;
pub mod tools;
pub mod transcript;
pub mod trigger;
