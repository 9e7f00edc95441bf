//! An MCP server over streamable HTTP on 127.0.0.1 for the end-to-end tests, written against
//! the protocol text (POST of JSON-RPC, `Mcp-Session-Id`, 202 for notifications, 405 for the
//! optional GET stream) rather than the SDK tollgate uses, so the two sides are independent.
//! It checks the protocol as the fake model does: a request after `initialize` without the
//! session id, or with another, is refused. `tools/list` answers as JSON, `tools/call` as an
//! SSE stream, so both response forms are exercised. Tools: `echo` (the text back) and
//! `secret` (whether the request carried the `Authorization` header the test expects) and
//! `whoami` (that header said back, as a careless server would).
//! Every request's method and headers are logged for assertions.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use serde_json::{Value, json};

const SESSION: &str = "tollgate-test-session-1";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub http_method: String,
    /// The JSON-RPC method, for a POST.
    pub rpc_method: Option<String>,
    pub authorization: Option<String>,
    pub session: Option<String>,
}

#[derive(Clone)]
struct Shared {
    log: Arc<Mutex<Vec<Seen>>>,
    expected_authorization: Option<String>,
}

pub struct HttpMcpServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Seen>>>,
    // The server lives as long as its runtime.
    _runtime: tokio::runtime::Runtime,
}

impl HttpMcpServer {
    /// Serves on a free port of 127.0.0.1; `secret` says whether the `Authorization` header
    /// equals `expected_authorization`.
    pub fn start(expected_authorization: Option<&str>) -> HttpMcpServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            log: log.clone(),
            expected_authorization: expected_authorization.map(str::to_string),
        };
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/mcp", any(handle)).with_state(shared);
        runtime.spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        HttpMcpServer {
            addr,
            log,
            _runtime: runtime,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

fn status(code: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(code)
        .body(Body::from(text.to_string()))
        .unwrap()
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message: Option<Value> = serde_json::from_slice(&body).ok();
    let rpc_method = message
        .as_ref()
        .and_then(|m| m["method"].as_str())
        .map(str::to_string);
    let session = header(&headers, "mcp-session-id");
    shared.log.lock().unwrap().push(Seen {
        http_method: method.to_string(),
        rpc_method: rpc_method.clone(),
        authorization: header(&headers, "authorization"),
        session: session.clone(),
    });
    if method == Method::GET {
        return status(StatusCode::METHOD_NOT_ALLOWED, "no server-initiated stream");
    }
    if method == Method::DELETE {
        return status(StatusCode::OK, "");
    }
    if method != Method::POST {
        return status(StatusCode::METHOD_NOT_ALLOWED, "POST only");
    }
    let Some(message) = message else {
        return status(StatusCode::BAD_REQUEST, "not JSON");
    };
    let accept = header(&headers, "accept").unwrap_or_default();
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must list application/json and text/event-stream",
        );
    }
    let is_initialize = rpc_method.as_deref() == Some("initialize");
    if !is_initialize && session.as_deref() != Some(SESSION) {
        return status(StatusCode::BAD_REQUEST, "missing or unknown Mcp-Session-Id");
    }
    let Some(id) = message.get("id").cloned() else {
        // A notification (or a response): accepted, nothing to say.
        return status(StatusCode::ACCEPTED, "");
    };
    let params = &message["params"];
    match rpc_method.as_deref() {
        Some("initialize") => {
            let result = json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tollgate-http-test-server", "version": "1"}
            });
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .header("mcp-session-id", SESSION)
                .body(Body::from(
                    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
                ))
                .unwrap()
        }
        Some("tools/list") => json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "echo", "description": "Says the text back.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
            {"name": "secret", "description": "Whether the request carried the expected credentials.",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "whoami", "description": "Says the Authorization header back (a careless server).",
             "inputSchema": {"type": "object", "properties": {}}}
        ]}})),
        Some("tools/call") => {
            let text = match params["name"].as_str() {
                Some("echo") => format!(
                    "http echo: {}",
                    params["arguments"]["text"].as_str().unwrap_or_default()
                ),
                Some("secret") => {
                    let carried = header(&headers, "authorization");
                    if carried.is_some() && carried == shared.expected_authorization {
                        "authorized".to_string()
                    } else {
                        "not authorized".to_string()
                    }
                }
                Some("whoami") => format!(
                    "you sent: {}",
                    header(&headers, "authorization").unwrap_or_default()
                ),
                other => {
                    return json_reply(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": format!("no tool {other:?}")}}));
                }
            };
            let reply = json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": text}], "isError": false}});
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(Body::from(format!("event: message\ndata: {reply}\n\n")))
                .unwrap()
        }
        Some("ping") => json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
        other => json_reply(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("method {other:?} not found")}})),
    }
}

fn json_reply(value: Value) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(value.to_string()))
        .unwrap()
}
