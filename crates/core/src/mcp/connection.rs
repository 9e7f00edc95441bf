//! One MCP server session: the official SDK (`rmcp`, client role) speaking JSON-RPC over a
//! stdio child's stdin and stdout (the process started by the one process runner, `exec`) or
//! over streamable HTTP (`http` builds the gated client). rmcp's own child-process transport
//! is not used: it would spawn the server itself, outside tollgate's process groups,
//! PDEATHSIG, guardian, scrubbed environment and sandbox.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::McpError;
use super::line_cap::{LineCapped, MAX_LINE_BYTES};
use crate::exec::{ServiceChild, ServiceExit, ServiceWatch};

/// How long a failed request waits to learn whether the server exited (and how).
pub const EXIT_NOTICE: Duration = Duration::from_millis(500);

/// Notices kept between two turns; past it the oldest are dropped and counted.
const MAX_NOTICES: usize = 256;

/// Something a server told the run on its own (an MCP notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McpNotice {
    /// `notifications/tools/list_changed`: the pool is refreshed before the next request.
    ToolsChanged,
    /// `notifications/message`.
    Log {
        level: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        data: Value,
    },
    /// Notices dropped because the run did not collect them in time.
    Dropped { count: u64 },
}

/// The notices of every server, collected by the loop at each turn.
#[derive(Debug, Clone, Default)]
pub struct NoticeBoard(Arc<Mutex<Notices>>);

#[derive(Debug, Default)]
struct Notices {
    queue: VecDeque<(String, McpNotice)>,
    dropped: u64,
}

impl NoticeBoard {
    fn post(&self, server: &str, notice: McpNotice) {
        let mut notices = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if notices.queue.len() >= MAX_NOTICES {
            notices.queue.pop_front();
            notices.dropped += 1;
        }
        notices.queue.push_back((server.to_string(), notice));
    }

    /// Everything posted since the last call, oldest first, by server.
    pub fn take(&self) -> Vec<(String, McpNotice)> {
        let mut notices = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut taken: Vec<_> = notices.queue.drain(..).collect();
        if notices.dropped > 0 {
            taken.push((
                String::new(),
                McpNotice::Dropped {
                    count: notices.dropped,
                },
            ));
            notices.dropped = 0;
        }
        taken
    }
}

/// The client side rmcp calls back: server notifications go to the board; requests from the
/// server (sampling, elicitation, roots) get rmcp's refusals, since nobody is there to answer.
struct Listener {
    server: String,
    board: NoticeBoard,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.board.post(&self.server, McpNotice::ToolsChanged);
    }

    // The SDK deprecates logging (SEP-2577), but servers of the protocol versions we speak
    // still send `notifications/message`, and the transcript should keep them.
    #[expect(deprecated, reason = "servers still send notifications/message")]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|level| level.as_str().map(str::to_string))
            .unwrap_or_default();
        self.board.post(
            &self.server,
            McpNotice::Log {
                level,
                logger: params.logger,
                data: params.data,
            },
        );
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("tollgate", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server's `readOnlyHint` annotation (a hint: believed only when a policy says so).
    pub read_only_hint: bool,
}

/// What a finished `tools/call` returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub text: String,
    pub is_error: bool,
}

/// A live connection: the SDK's session and, for a stdio server, the process under it.
pub struct Connection {
    session: RunningService<RoleClient, Listener>,
    child: Option<ServiceChild>,
    /// Set when the server sent a line past `MAX_LINE_BYTES` and its session was closed.
    overflowed: Arc<AtomicBool>,
}

/// What tool calls need of a connection; cheap to clone, outlives nothing it points at.
#[derive(Clone)]
pub struct Link {
    pub server: String,
    peer: rmcp::Peer<RoleClient>,
    /// The stdio server's process; an HTTP server has none to watch.
    watch: Option<ServiceWatch>,
    overflowed: Arc<AtomicBool>,
    pub call_timeout: Duration,
}

impl Connection {
    /// Initializes the session over `child`'s pipes. Not bounded here: the supervisor races it
    /// against the server's start-up timeout and its exit.
    pub async fn open(
        server: &str,
        mut child: ServiceChild,
        board: NoticeBoard,
    ) -> Result<Connection, McpError> {
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(McpError::Start("the server's pipes are missing".into()));
        };
        let listener = Listener {
            server: server.to_string(),
            board,
        };
        let stdout = LineCapped::new(stdout, MAX_LINE_BYTES);
        let overflowed = stdout.overflow_flag();
        let session = rmcp::serve_client(listener, (stdout, stdin))
            .await
            .map_err(|err| McpError::Start(err.to_string()))?;
        Ok(Connection {
            session,
            child: Some(child),
            overflowed,
        })
    }

    /// Initializes a session over streamable HTTP (`transport` is already gated and pinned
    /// to checked addresses). Not bounded here, as [`Connection::open`].
    pub async fn open_http(
        server: &str,
        url: &str,
        transport: super::http::HttpTransport,
        board: NoticeBoard,
    ) -> Result<Connection, McpError> {
        let listener = Listener {
            server: server.to_string(),
            board,
        };
        let session = rmcp::serve_client(listener, transport)
            .await
            .map_err(|err| McpError::Start(super::http::start_failure(url, &err)))?;
        Ok(Connection {
            session,
            child: None,
            // The transport bounds every response body itself (`max_json_response_size`).
            overflowed: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn link(&self, server: &str, call_timeout: Duration) -> Link {
        Link {
            server: server.to_string(),
            peer: self.session.peer().clone(),
            watch: self.child.as_ref().map(ServiceChild::watch),
            overflowed: Arc::clone(&self.overflowed),
            call_timeout,
        }
    }

    /// The stdio server's process (and process group) id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|child| child.pid)
    }

    /// Ends the session and, for a stdio server, the process group (stdin closed, then
    /// killed after `grace`). An HTTP session's cancel ends its stream and sends the
    /// session's DELETE.
    pub async fn close(self, grace: Duration) -> Option<ServiceExit> {
        // Cancelling the session closes its end of the pipes; the child gets EOF on stdin.
        let _ = tokio::time::timeout(grace, self.session.cancel()).await;
        match self.child {
            Some(mut child) => Some(child.terminate(grace).await),
            None => None,
        }
    }
}

impl Link {
    /// Every tool the server lists (all pages).
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, McpError> {
        // The SDK's own "all pages" loop has no end of its own; a server that always hands
        // back a cursor would be listed until its start-up timeout.
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let page = self
                .peer
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(|err| McpError::Protocol(err.to_string()))?;
            tools.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() || tools.len() >= MAX_TOOLS_PER_SERVER {
                break;
            }
        }
        Ok(tools
            .into_iter()
            .take(MAX_TOOLS_PER_SERVER)
            .map(|tool| ListedTool {
                name: tool.name.to_string(),
                description: bounded_description(tool.description.as_deref().unwrap_or_default()),
                input_schema: Value::Object((*tool.input_schema).clone()),
                read_only_hint: tool
                    .annotations
                    .and_then(|annotations| annotations.read_only_hint)
                    .unwrap_or(false),
            })
            .collect())
    }

    /// How the server ended, if it has.
    pub fn exit(&self) -> Option<ServiceExit> {
        self.watch.as_ref().and_then(ServiceWatch::exit)
    }

    /// Resolves when the stdio server's process ends; never for an HTTP server.
    fn ended(&self) -> impl std::future::Future<Output = ServiceExit> + Send + 'static {
        let watch = self.watch.clone();
        async move {
            match watch {
                Some(watch) => watch.ended().await,
                None => std::future::pending().await,
            }
        }
    }

    /// One `tools/call`, bounded by the call timeout and the server's life: a server that
    /// dies mid-call, a call that outlives its timeout or an error of the protocol is an
    /// `Err` saying which. Dropping the future cancels the request (`notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<CallOutcome, McpError> {
        if self.overflowed.load(Ordering::SeqCst) {
            return Err(McpError::LineTooLong {
                server: self.server.clone(),
                max: MAX_LINE_BYTES,
            });
        }
        if let Some(exit) = self.exit() {
            return Err(self.died(exit, "before the call"));
        }
        tracing::debug!(server = %self.server, tool, "MCP tools/call");
        let request = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let call = self.peer.call_tool(request);
        let ended = self.ended();
        let result = tokio::select! {
            result = call => result,
            exit = ended => return Err(self.died(exit, "mid-call")),
            () = tokio::time::sleep(self.call_timeout) => {
                return Err(McpError::CallTimeout {
                    server: self.server.clone(),
                    seconds: self.call_timeout.as_secs_f64(),
                });
            }
        };
        match result {
            Ok(result) => Ok(CallOutcome {
                text: render_content(&result.content, result.structured_content.as_ref()),
                is_error: result.is_error.unwrap_or(false),
            }),
            Err(_) if self.overflowed.load(Ordering::SeqCst) => Err(self.line_too_long()),
            // A closed transport is usually the first sign of a server going: wait a moment
            // to say how it ended, with its stderr.
            Err(err) if self.watch.is_none() => Err(McpError::Protocol(err.to_string())),
            Err(err) => match tokio::time::timeout(EXIT_NOTICE, self.ended()).await {
                Ok(exit) => Err(self.died(exit, "mid-call")),
                Err(_) => Err(McpError::Protocol(err.to_string())),
            },
        }
    }

    fn line_too_long(&self) -> McpError {
        McpError::LineTooLong {
            server: self.server.clone(),
            max: MAX_LINE_BYTES,
        }
    }

    /// How the server ended; a server that ends because its oversized line closed the
    /// session is reported for the line, the cause, not the exit that followed.
    fn died(&self, exit: ServiceExit, when: &str) -> McpError {
        if self.overflowed.load(Ordering::SeqCst) {
            return self.line_too_long();
        }
        tracing::info!(server = %self.server, when, %exit, "MCP server died");
        McpError::Died {
            server: self.server.clone(),
            when: when.to_string(),
            exit: exit.to_string(),
            stderr: self
                .watch
                .as_ref()
                .map(ServiceWatch::stderr_tail)
                .unwrap_or_default(),
        }
    }
}

/// Bounds on what one server's listing may put before the model (every description is
/// read in ToolSearch, the first sentence in the system prompt): more tools than this are
/// not offered, and a longer description is cut.
pub const MAX_TOOLS_PER_SERVER: usize = 512;
const MAX_LIST_PAGES: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 2048;

fn bounded_description(description: &str) -> String {
    match description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("{}… [description cut by tollgate]", &description[..cut]),
        None => description.to_string(),
    }
}

/// The model reads text: text blocks as they are, anything else (images, resources) as a
/// line naming what it is, and structured content as JSON when there is no text.
fn render_content<T: Serialize>(blocks: &[T], structured: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        let Ok(value) = serde_json::to_value(block) else {
            continue;
        };
        match value.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(
                value
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            Some("resource") => parts.push(
                value
                    .pointer("/resource/text")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.to_string(), str::to_string),
            ),
            Some(kind) => {
                let mime = value.get("mimeType").and_then(Value::as_str).unwrap_or("?");
                parts.push(format!("[{kind} content, {mime}, not shown]"));
            }
            None => parts.push(value.to_string()),
        }
    }
    if parts.is_empty()
        && let Some(structured) = structured
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_reads_as_text() {
        let blocks = [
            json!({"type": "text", "text": "one"}),
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
            json!({"type": "resource", "resource": {"uri": "x://a", "text": "inside"}}),
        ];
        assert_eq!(
            render_content(&blocks, None),
            "one\n[image content, image/png, not shown]\ninside"
        );
        assert_eq!(
            render_content::<Value>(&[], Some(&json!({"n": 1}))),
            "{\"n\":1}"
        );
    }

    #[test]
    fn the_board_keeps_the_newest_and_counts_the_rest() {
        let board = NoticeBoard::default();
        for _ in 0..MAX_NOTICES + 2 {
            board.post("s", McpNotice::ToolsChanged);
        }
        let taken = board.take();
        assert_eq!(taken.len(), MAX_NOTICES + 1);
        assert_eq!(taken.last().unwrap().1, McpNotice::Dropped { count: 2 });
        assert!(board.take().is_empty());
    }
}
