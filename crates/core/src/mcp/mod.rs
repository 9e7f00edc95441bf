//! MCP servers over stdio and streamable HTTP (S9): which servers a run starts
//! (`selection`), one server's SDK session over a process or HTTP (`connection`), the gated
//! HTTP client (`http`), its tools as tollgate tools (`tool`), and the run's servers with
//! their watchdogs (`supervisor`). Stdio servers run through the one process runner; every
//! server's tools reach the model deferred by default and pass the gate like any other.

mod connection;
mod http;
mod line_cap;
mod selection;
mod supervisor;
mod tool;

pub use connection::McpNotice;
pub use http::header_variables;
pub use selection::{
    McpPlan, PlannedServer, SkippedServer, parse_project_file, plan, project_file_approved,
};
pub use supervisor::{McpHub, McpLaunch, McpServerStatus, McpState};
pub use tool::{MAX_TOOL_NAME, stand_in, tool_name};

/// Why a server did not start, or a call to it failed. The text is what the model or the
/// run's report reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Start(String),
    #[error("did not finish starting within its startup_timeout of {seconds}s")]
    StartTimeout { seconds: f64 },
    #[error("MCP protocol error: {0}")]
    Protocol(String),
    #[error("MCP server `{server}` sent a line longer than {max} bytes; its session was closed")]
    LineTooLong { server: String, max: usize },
    #[error("MCP server `{server}` did not answer within its call_timeout of {seconds}s")]
    CallTimeout { server: String, seconds: f64 },
    #[error(
        "MCP server `{server}` {exit} {when}{}",
        if stderr.is_empty() { String::new() } else { format!("; its stderr ended with: {}", stderr.join(" | ")) }
    )]
    Died {
        server: String,
        when: String,
        exit: String,
        stderr: Vec<String>,
    },
}
