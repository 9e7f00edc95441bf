//! A fake model server on 127.0.0.1 speaking real HTTP + SSE for the Anthropic Messages and
//! OpenAI Chat Completions APIs: it replays scripted replies (turns or faults), records every
//! request, and rejects what the real APIs reject (an unanswered tool_use, wrong roles).
//! Chat Completions with `stream: false` get the whole `chat.completion` body. As
//! [`FakeModel::llama_cpp_python`] it is that server instead: it replays the recorded
//! exchange in tests/fixtures/providers/ and refuses what that server refuses.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAi,
}

/// One block of a scripted assistant turn.
#[derive(Debug, Clone)]
pub enum Block {
    Text(String),
    Tool {
        name: String,
        input: Value,
    },
    /// A tool call whose input text is sent as is (to send invalid JSON).
    RawTool {
        name: String,
        json: String,
    },
}

pub fn text(text: &str) -> Block {
    Block::Text(text.into())
}

pub fn tool(name: &str, input: Value) -> Block {
    Block::Tool {
        name: name.into(),
        input,
    }
}

/// Token counts as the Anthropic API reports them; the OpenAI side reports
/// `prompt_tokens = input + cache_read` with `cached_tokens = cache_read`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

#[derive(Debug, Clone)]
pub struct Turn {
    pub blocks: Vec<Block>,
    pub tokens: Tokens,
    /// Anthropic's stop reason (mapped to a finish_reason for OpenAI); by default
    /// `tool_use` when the turn calls a tool, else `end_turn`.
    pub stop: Option<&'static str>,
}

pub fn turn(blocks: Vec<Block>, tokens: Tokens) -> Turn {
    Turn {
        blocks,
        tokens,
        stop: None,
    }
}

/// A reply of `blocks` with 100 tokens in and 10 out: a turn whose usage does not matter.
pub fn reply(blocks: Vec<Block>) -> Reply {
    Reply::Turn(turn(
        blocks,
        Tokens {
            input: 100,
            output: 10,
            ..Tokens::default()
        },
    ))
}

#[derive(Debug, Clone)]
pub enum Reply {
    Turn(Turn),
    /// An HTTP error with these headers; the body is the API's error shape.
    Status {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        kind: &'static str,
        message: String,
    },
    /// The turn's first `events` events, then the connection breaks.
    CutAfter {
        turn: Turn,
        events: usize,
    },
    /// The turn's first `events` events, then silence until the client gives up.
    StallAfter {
        turn: Turn,
        events: usize,
    },
    /// Anthropic: `message_start`, then an `overloaded_error` event.
    OverloadedEvent,
    /// A 401 whose message quotes the key it was sent, as a careless gateway might.
    EchoKey,
    /// HTTP 200 with this content type and body, sent as they are (a proxy's HTML page, an
    /// error body where a stream belongs, a hand-built stream).
    Raw {
        content_type: &'static str,
        body: String,
    },
    /// The turn with every tool call given the id of its first one.
    SameIds(Turn),
    /// `reply` after `delay` (a slow first byte; a model's think time in benchmarks).
    Delayed {
        delay: Duration,
        reply: Box<Reply>,
    },
    /// The turn with no usage anywhere in the stream, as some gateways and proxies send it.
    NoUsage(Turn),
    /// An HTTP error with this JSON body sent as it is (a gateway's own error shape).
    StatusBody {
        status: u16,
        body: Value,
    },
    /// This status with a body that never ends (`x` after `x`), as a broken gateway's.
    EndlessBody {
        status: u16,
    },
    /// The first `events` events of `turn`, then `chunk` every `every` until the client gives
    /// up: a `: keepalive` comment, or a byte of a line that never ends.
    Drip {
        turn: Turn,
        events: usize,
        chunk: &'static str,
        every: Duration,
    },
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub api: Api,
    /// The request's path (and query).
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Debug, Default)]
struct Log {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    /// The answer to every compaction's summary request, outside the scripted order.
    summary: Option<Turn>,
    /// Or a reply of any kind (a failure, a stall) to each summary request.
    summary_reply: Option<Reply>,
    /// Recorded exchanges answered so far (llama-cpp-python).
    replayed: usize,
}

/// Words of tollgate's fixed compaction instruction, by which its summary requests are known.
pub const SUMMARY_REQUEST: &str = "is about to be compacted";

#[derive(Clone)]
struct Shared {
    log: Arc<Mutex<Log>>,
    key: String,
    /// `Some`: the server behaves as llama-cpp-python's, replaying this recorded exchange.
    llama: Option<Arc<Value>>,
    /// The key is a bearer token on both APIs (a cloud platform's), and any path is served:
    /// Vertex AI's `…/models/{model}:streamRawPredict`, Foundry's `/anthropic/v1/messages`,
    /// Azure OpenAI's `/openai/v1/chat/completions`.
    bearer: bool,
}

/// llama-cpp-python's exchange, reconstructed from its source (see the file's `how`).
pub const LLAMA_CPP_PYTHON: &str =
    include_str!("../../../tests/fixtures/providers/llama-cpp-python.json");

pub struct FakeModel {
    addr: SocketAddr,
    key: String,
    log: Arc<Mutex<Log>>,
    server: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    /// Serves `replies` in order to requests carrying `key`.
    pub async fn start(key: &str, replies: Vec<Reply>) -> FakeModel {
        FakeModel::serve(key, replies, None, false).await
    }

    /// A cloud platform's endpoint: serves `replies` to requests carrying `Authorization:
    /// Bearer {token}` (and no `x-api-key`) at any path. At a Vertex AI `:streamRawPredict`
    /// path the body must be as Vertex wants it: `anthropic_version: vertex-2023-10-16`, no
    /// `model` (which the path names).
    pub async fn start_bearer(token: &str, replies: Vec<Reply>) -> FakeModel {
        FakeModel::serve(token, replies, None, true).await
    }

    /// llama-cpp-python's server with `--chat_format chatml-function-calling`, as recorded in
    /// [`LLAMA_CPP_PYTHON`]: its exchanges answered in order, its refusals enforced — tools
    /// without `tool_choice` are not shown to the model (its turn comes back as text only, and
    /// a violation is noted), `stream: true` with `tool_choice: "auto"` is an HTTP 200 whose
    /// connection closes before the body, and an assistant `content: null` is its HTTP 500.
    pub async fn llama_cpp_python(key: &str) -> FakeModel {
        let recorded: Value = serde_json::from_str(LLAMA_CPP_PYTHON).unwrap();
        FakeModel::serve(key, Vec::new(), Some(Arc::new(recorded)), false).await
    }

    async fn serve(
        key: &str,
        replies: Vec<Reply>,
        llama: Option<Arc<Value>>,
        bearer: bool,
    ) -> FakeModel {
        let log = Arc::new(Mutex::new(Log {
            replies: replies.into(),
            ..Log::default()
        }));
        let shared = Shared {
            log: log.clone(),
            key: key.to_string(),
            llama,
            bearer,
        };
        let mut app = Router::new()
            .route("/v1/messages", post(handle))
            .route("/v1/chat/completions", post(handle));
        if bearer {
            app = app.fallback(handle);
        }
        let app = app.with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeModel {
            addr,
            key: key.to_string(),
            log,
            server,
        }
    }

    /// The key a request must carry.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// A task's `model:` block for this server, the key in `TEST_MODEL_KEY`, with `extra`
    /// (more of the block's fields) at its end.
    pub fn model_block(&self, api: Api, extra: &str) -> String {
        let (provider, name) = match api {
            Api::Anthropic => ("anthropic", "claude-sonnet-4-5"),
            Api::OpenAi => ("openai", "gpt-4.1"),
        };
        format!(
            "model:\n  provider: {provider}\n  name: {name}\n  max_tokens: 1000\n  base_url: {}\n  api_key_env: TEST_MODEL_KEY\n{extra}",
            self.base_url(api)
        )
    }

    /// The `base_url` a task sets: Anthropic's has no `/v1`, OpenAI's does, as in the SDKs.
    pub fn base_url(&self, api: Api) -> String {
        match api {
            Api::Anthropic => format!("http://{}", self.addr),
            Api::OpenAi => format!("http://{}/v1", self.addr),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap().requests.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.log.lock().unwrap().violations.clone()
    }

    /// Answers each summary request (its last message holds [`SUMMARY_REQUEST`]) with
    /// `turn`, as a model would whenever asked, leaving the scripted replies to the turns.
    pub fn answer_summaries(&self, turn: Turn) {
        self.log.lock().unwrap().summary = Some(turn);
    }

    /// Answers each summary request with `reply` (a failure, a stall), outside the scripted
    /// order.
    pub fn answer_summaries_with(&self, reply: Reply) {
        self.log.lock().unwrap().summary_reply = Some(reply);
    }

    pub fn replies_left(&self) -> usize {
        self.log.lock().unwrap().replies.len()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn handle(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let vertex = uri.path().ends_with(":streamRawPredict");
    let api = if uri.path().ends_with("/messages") || vertex {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri
        .path_and_query()
        .map_or(uri.path().to_string(), |p| p.to_string());
    if let Some(recorded) = &shared.llama {
        return llama_cpp_python(&shared, recorded, &headers, body).await;
    }
    let whole = api == Api::OpenAi && body["stream"] == json!(false);
    let (reply, number) = {
        let mut log = shared.log.lock().unwrap();
        log.requests.push(Recorded {
            api,
            path: path.clone(),
            headers: headers.clone(),
            body: body.clone(),
        });
        let number = log.requests.len();
        let authenticated = if shared.bearer {
            authenticate_bearer(api, vertex, &path, &headers, &shared.key)
        } else {
            authenticate(api, &headers, &shared.key)
        };
        let problem = authenticated.err().or_else(|| {
            match api {
                Api::Anthropic if vertex => check_vertex(&body),
                Api::Anthropic => check_anthropic(&body),
                Api::OpenAi => check_openai(&body),
            }
            .err()
        });
        if shared.bearer && problem.as_deref().is_some_and(|p| p.starts_with("401 ")) {
            let problem = problem.unwrap_or_default();
            log.violations.push(format!("request {number}: {problem}"));
            return error_response(api, 401, &[], "authentication_error", &problem);
        }
        if let Some(problem) = problem {
            log.violations.push(format!("request {number}: {problem}"));
            return error_response(api, 400, &[], "invalid_request_error", &problem);
        }
        let asks_summary = body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .is_some_and(|last| last.to_string().contains(SUMMARY_REQUEST));
        if let Some(summary) = log.summary.clone().filter(|_| asks_summary) {
            return sse(events(api, &summary, number), Ending::Clean);
        }
        let summary_reply = log.summary_reply.clone().filter(|_| asks_summary);
        match summary_reply.or_else(|| log.replies.pop_front()) {
            Some(reply) => (reply, number),
            None => {
                let problem = format!("request {number}: no scripted reply left");
                log.violations.push(problem.clone());
                return error_response(api, 400, &[], "invalid_request_error", &problem);
            }
        }
    };
    let reply = match reply {
        Reply::Delayed { delay, reply } => {
            tokio::time::sleep(delay).await;
            *reply
        }
        reply => reply,
    };
    match reply {
        Reply::Turn(turn) if whole => json_response(200, &openai_whole(&turn, number)),
        Reply::Turn(turn) => sse(events(api, &turn, number), Ending::Clean),
        Reply::CutAfter { turn, events: n } => sse(
            events(api, &turn, number).into_iter().take(n).collect(),
            Ending::Break,
        ),
        Reply::StallAfter { turn, events: n } => sse(
            events(api, &turn, number).into_iter().take(n).collect(),
            Ending::Stall,
        ),
        Reply::OverloadedEvent => sse(
            vec![
                anthropic_event(
                    "message_start",
                    json!({"type": "message_start", "message": message_shell(number, Tokens::default())}),
                ),
                anthropic_event(
                    "error",
                    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                ),
            ],
            Ending::Clean,
        ),
        Reply::Status {
            status,
            headers,
            kind,
            message,
        } => error_response(api, status, &headers, kind, &message),
        Reply::EchoKey => {
            let sent = match api {
                Api::Anthropic => headers.get("x-api-key"),
                Api::OpenAi => headers.get("authorization"),
            }
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
            error_response(
                api,
                401,
                &[],
                "authentication_error",
                &format!("invalid x-api-key: {sent}"),
            )
        }
        Reply::StatusBody { status, body } => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        Reply::Raw { content_type, body } => Response::builder()
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        Reply::SameIds(turn) => {
            let first = format!("_{number:02}_0\"");
            let events = events(api, &turn, number)
                .into_iter()
                .map(|event| {
                    (1..turn.blocks.len()).fold(event, |event, index| {
                        event.replace(&format!("_{number:02}_{index}\""), &first)
                    })
                })
                .collect();
            sse(events, Ending::Clean)
        }
        Reply::Delayed { .. } => error_response(api, 500, &[], "api_error", "nested delay"),
        Reply::NoUsage(turn) => sse(without_usage(api, &turn, number), Ending::Clean),
        Reply::EndlessBody { status } => {
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let body = stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "text/html")
                .body(Body::from_stream(body))
                .unwrap()
        }
        Reply::Drip {
            turn,
            events: n,
            chunk,
            every,
        } => {
            let head = events(api, &turn, number).into_iter().take(n);
            let head = stream::iter(head.map(Ok::<_, std::io::Error>));
            let drip = stream::unfold((), move |()| async move {
                tokio::time::sleep(every).await;
                Some((Ok(chunk.to_string()), ()))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(head.chain(drip)))
                .unwrap()
        }
    }
}

fn json_response(status: u16, body: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A turn as one `chat.completion` body (`stream: false`).
fn openai_whole(turn: &Turn, number: usize) -> Value {
    let text: String = turn
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = turn
        .blocks
        .iter()
        .filter_map(tool_json)
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({"id": format!("call_{number:02}_{index}"), "type": "function",
                "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    let finish = match turn.stop {
        Some("max_tokens") => "length",
        Some("refusal") => "content_filter",
        _ if !calls.is_empty() => "tool_calls",
        _ => "stop",
    };
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": format!("chatcmpl-{number}"), "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": turn.tokens.input + turn.tokens.cache_read,
            "completion_tokens": turn.tokens.output,
            "total_tokens": turn.tokens.input + turn.tokens.cache_read + turn.tokens.output,
            "prompt_tokens_details": {"cached_tokens": turn.tokens.cache_read},
        },
    })
}

/// One request to the llama-cpp-python server: its refusals first, then the next recorded
/// exchange, whose `request` fields must all be the request's.
async fn llama_cpp_python(
    shared: &Shared,
    recorded: &Value,
    headers: &HeaderMap,
    body: Value,
) -> Response {
    let mut log = shared.log.lock().unwrap();
    log.requests.push(Recorded {
        api: Api::OpenAi,
        path: "/v1/chat/completions".into(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let number = log.requests.len();
    if let Err(problem) = authenticate(Api::OpenAi, headers, &shared.key) {
        log.violations.push(format!("request {number}: {problem}"));
        // Its `--api_key` check: FastAPI's HTTPException, passed through as 401.
        return json_response(401, &json!({"detail": "Invalid API key"}));
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let null_content = messages.iter().position(|message| {
        message["role"] == "assistant"
            && message
                .get("content")
                .is_some_and(|content| !content.is_string())
    });
    if let Some(index) = null_content {
        log.violations.push(format!(
            "request {number}: messages.{index}: assistant content is not a string"
        ));
        let refusal = &recorded["null_content_response"];
        return json_response(500, &refusal["body"]);
    }
    let has_tools = body["tools"]
        .as_array()
        .is_some_and(|tools| !tools.is_empty());
    let choice = body.get("tool_choice").filter(|choice| !choice.is_null());
    let shows_tools = has_tools && choice.is_some_and(|choice| choice != "none");
    if has_tools && !shows_tools {
        log.violations.push(format!(
            "request {number}: tools without tool_choice are not rendered into the prompt"
        ));
    }
    // The next recorded exchange of the same `stream`; the ones before it were not asked
    // for (a run that never streams skips the streamed one). The rest of a recording's
    // `request` is what tollgate sent; the refusals above judge it.
    let exchanges = recorded["exchanges"].as_array().unwrap();
    let matches = |exchange: &Value| exchange["request"]["stream"] == body["stream"];
    let Some(found) = (log.replayed..exchanges.len()).find(|&at| matches(&exchanges[at])) else {
        log.violations.push(format!(
            "request {number}: no recorded exchange left for stream={} tool_choice={}",
            body["stream"], body["tool_choice"]
        ));
        return json_response(
            400,
            &json!({"error": {"message": "no recorded exchange left", "type": "invalid_request_error"}}),
        );
    };
    let exchange = exchanges[found].clone();
    log.replayed = found + 1;
    let response = exchange["response"].clone();
    drop(log);
    if response["reset_before_body"] == json!(true) {
        return Response::builder()
            .header("content-type", response["content_type"].as_str().unwrap())
            .body(Body::from_stream(stream::once(async {
                tokio::task::yield_now().await;
                Err::<Bytes, _>(std::io::Error::other("connection closed by the server"))
            })))
            .unwrap();
    }
    let mut answer = response["body"].clone();
    if !shows_tools {
        // The model never saw the tools: whatever it says is text.
        if let Some(message) = answer.pointer_mut("/choices/0/message") {
            message.as_object_mut().unwrap().remove("tool_calls");
            message.as_object_mut().unwrap().remove("function_call");
            message["content"] = json!("I cannot read files.");
        }
        answer["choices"][0]["finish_reason"] = json!("stop");
    }
    json_response(response["status"].as_u64().unwrap() as u16, &answer)
}

/// The turn's events with every usage field taken out (and OpenAI's usage chunk left out).
fn without_usage(api: Api, turn: &Turn, number: usize) -> Vec<String> {
    events(api, turn, number)
        .into_iter()
        .filter(|event| !event.contains("\"choices\":[]"))
        .map(|event| {
            let Some(data) = event
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .filter(|data| data.starts_with('{'))
            else {
                return event;
            };
            let mut value: Value = serde_json::from_str(data).unwrap();
            if let Some(object) = value.as_object_mut() {
                object.remove("usage");
            }
            if let Some(message) = value.get_mut("message").and_then(Value::as_object_mut) {
                message.remove("usage");
            }
            event.replace(data, &value.to_string())
        })
        .collect()
}

/// A cloud platform's bearer token, where its endpoint is. A wrong or missing token is
/// `401 …`, as the platforms answer it.
fn authenticate_bearer(
    api: Api,
    vertex: bool,
    path: &str,
    headers: &HeaderMap,
    token: &str,
) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let known = vertex
        || path.ends_with("/v1/messages")
        || path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/chat/completions"));
    if !known {
        return Err(format!("no endpoint at {path}"));
    }
    if header("authorization") != format!("Bearer {token}") {
        return Err("401 wrong or missing bearer token".into());
    }
    if headers.contains_key("x-api-key") {
        return Err("an x-api-key beside the bearer token".into());
    }
    if api == Api::Anthropic && !vertex && header("anthropic-version").is_empty() {
        return Err("missing anthropic-version header".into());
    }
    Ok(())
}

/// Vertex AI's body: the Messages API's, its version in the body, no model (the path has it).
fn check_vertex(body: &Value) -> Result<(), String> {
    if body["anthropic_version"] != json!("vertex-2023-10-16") {
        return Err("anthropic_version must be vertex-2023-10-16".into());
    }
    if body.get("model").is_some() {
        return Err("model is not permitted in the body (the path names it)".into());
    }
    let mut named = body.clone();
    named["model"] = json!("from-the-path");
    check_anthropic(&named)
}

fn authenticate(api: Api, headers: &HeaderMap, key: &str) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    match api {
        Api::Anthropic => {
            if header("anthropic-version").is_empty() {
                return Err("missing anthropic-version header".into());
            }
            if header("x-api-key") != key {
                return Err("wrong or missing x-api-key".into());
            }
        }
        Api::OpenAi => {
            if header("authorization") != format!("Bearer {key}") {
                return Err("wrong or missing authorization".into());
            }
        }
    }
    Ok(())
}

fn error_response(
    api: Api,
    status: u16,
    headers: &[(&str, &str)],
    kind: &str,
    message: &str,
) -> Response {
    let body = match api {
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Api::OpenAi => json!({"error": {"message": message, "type": kind, "code": null}}),
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json");
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Body::from(body.to_string())).unwrap()
}

enum Ending {
    Clean,
    Break,
    Stall,
}

fn sse(events: Vec<String>, ending: Ending) -> Response {
    let head = stream::iter(events.into_iter().map(Ok::<_, std::io::Error>));
    let body = match ending {
        Ending::Clean => Body::from_stream(head),
        // An error from the body stream makes the server drop the connection mid-response.
        // Yielding first lets hyper flush what was sent, so the client has half a message.
        Ending::Break => Body::from_stream(head.chain(stream::once(async {
            tokio::task::yield_now().await;
            Err(std::io::Error::other("connection reset"))
        }))),
        Ending::Stall => Body::from_stream(head.chain(stream::pending())),
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}

/// Splits a string in two, so deltas really arrive in pieces.
fn halves(text: &str) -> Vec<String> {
    let mid = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(text.len(), |(i, _)| i);
    [&text[..mid], &text[mid..]]
        .into_iter()
        .filter(|piece| !piece.is_empty())
        .map(str::to_string)
        .collect()
}

fn tool_json(block: &Block) -> Option<(String, String)> {
    match block {
        Block::Text(_) => None,
        Block::Tool { name, input } => Some((name.clone(), input.to_string())),
        Block::RawTool { name, json } => Some((name.clone(), json.clone())),
    }
}

fn events(api: Api, turn: &Turn, number: usize) -> Vec<String> {
    match api {
        Api::Anthropic => anthropic_events(turn, number),
        Api::OpenAi => openai_events(turn, number),
    }
}

fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_shell(number: usize, tokens: Tokens) -> Value {
    json!({
        "id": format!("msg_{number:04}"), "type": "message", "role": "assistant",
        "model": "fake", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": tokens.input,
            "cache_creation_input_tokens": tokens.cache_write,
            "cache_read_input_tokens": tokens.cache_read,
            "output_tokens": 1,
        },
    })
}

fn anthropic_events(turn: &Turn, number: usize) -> Vec<String> {
    let mut out = vec![anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": message_shell(number, turn.tokens)}),
    )];
    let mut has_tool = false;
    for (index, block) in turn.blocks.iter().enumerate() {
        let (start, deltas) = match tool_json(block) {
            None => {
                let Block::Text(text) = block else {
                    unreachable!()
                };
                let deltas = halves(text)
                    .into_iter()
                    .map(|piece| json!({"type": "text_delta", "text": piece}))
                    .collect::<Vec<_>>();
                (json!({"type": "text", "text": ""}), deltas)
            }
            Some((name, json_text)) => {
                has_tool = true;
                let deltas = halves(&json_text)
                    .into_iter()
                    .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
                    .collect::<Vec<_>>();
                (
                    json!({"type": "tool_use", "id": format!("toolu_{number:02}_{index}"), "name": name, "input": {}}),
                    deltas,
                )
            }
        };
        out.push(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            out.push(anthropic_event("ping", json!({"type": "ping"})));
        }
        for delta in deltas {
            out.push(anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop = turn
        .stop
        .unwrap_or(if has_tool { "tool_use" } else { "end_turn" });
    out.push(anthropic_event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": turn.tokens.output}}),
    ));
    out.push(anthropic_event(
        "message_stop",
        json!({"type": "message_stop"}),
    ));
    out
}

fn openai_chunk(number: usize, delta: Value, finish: Value) -> String {
    let chunk = json!({
        "id": format!("chatcmpl-{number}"), "object": "chat.completion.chunk", "created": 0, "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

fn openai_events(turn: &Turn, number: usize) -> Vec<String> {
    let mut out = vec![openai_chunk(
        number,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut call = 0;
    for block in &turn.blocks {
        match tool_json(block) {
            None => {
                let Block::Text(text) = block else {
                    unreachable!()
                };
                for piece in halves(text) {
                    out.push(openai_chunk(number, json!({"content": piece}), Value::Null));
                }
            }
            Some((name, arguments)) => {
                out.push(openai_chunk(
                    number,
                    json!({"tool_calls": [{"index": call, "id": format!("call_{number:02}_{call}"), "type": "function", "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for piece in halves(&arguments) {
                    out.push(openai_chunk(
                        number,
                        json!({"tool_calls": [{"index": call, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
                call += 1;
            }
        }
    }
    let finish = match turn.stop {
        Some("max_tokens") => "length",
        Some("refusal") => "content_filter",
        _ if call > 0 => "tool_calls",
        _ => "stop",
    };
    out.push(openai_chunk(number, json!({}), json!(finish)));
    let usage = json!({
        "id": format!("chatcmpl-{number}"), "object": "chat.completion.chunk", "created": 0, "model": "fake",
        "choices": [],
        "usage": {
            "prompt_tokens": turn.tokens.input + turn.tokens.cache_read,
            "completion_tokens": turn.tokens.output,
            "total_tokens": turn.tokens.input + turn.tokens.cache_read + turn.tokens.output,
            "prompt_tokens_details": {"cached_tokens": turn.tokens.cache_read},
        },
    });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// What the Messages API rejects with a 400.
fn check_anthropic(body: &Value) -> Result<(), String> {
    check_thinking(body)?;
    if body["stream"] != json!(true) {
        return Err("stream must be true".into());
    }
    if !body["max_tokens"].is_u64() || body["model"].as_str().is_none_or(str::is_empty) {
        return Err("model and max_tokens are required".into());
    }
    let messages = body["messages"]
        .as_array()
        .ok_or("messages must be a list")?;
    let mut expected_role = "user";
    let mut pending: HashSet<String> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != expected_role {
            return Err(format!(
                "messages.{index}: expected role {expected_role}, got {role:?}"
            ));
        }
        let blocks = message["content"]
            .as_array()
            .ok_or(format!("messages.{index}: content must be a list"))?;
        if blocks.is_empty() && index + 1 < messages.len() {
            return Err(format!("messages.{index}: content must be non-empty"));
        }
        let mut answered = HashSet::new();
        let mut seen_other = false;
        for block in blocks {
            match (role, block["type"].as_str().unwrap_or_default()) {
                (_, "text") if block["text"].as_str().is_none_or(str::is_empty) => {
                    return Err(format!(
                        "messages.{index}: text content blocks must be non-empty"
                    ));
                }
                (_, "text") => seen_other = true,
                ("assistant", "tool_use") => {
                    if !block["input"].is_object() {
                        return Err(format!(
                            "messages.{index}: tool_use.input must be an object"
                        ));
                    }
                    pending.insert(block["id"].as_str().unwrap_or_default().to_string());
                }
                ("assistant", "thinking" | "redacted_thinking") => {}
                ("user", "tool_result") => {
                    if seen_other {
                        return Err(format!(
                            "messages.{index}: tool_result blocks must come first"
                        ));
                    }
                    let id = block["tool_use_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if !pending.remove(&id) || !answered.insert(id.clone()) {
                        return Err(format!(
                            "messages.{index}: unexpected tool_use_id {id} in tool_result"
                        ));
                    }
                }
                (role, kind) => {
                    return Err(format!(
                        "messages.{index}: a {role} message cannot hold {kind}"
                    ));
                }
            }
        }
        if role == "user" && !pending.is_empty() {
            return Err(format!(
                "messages.{index}: tool_use ids were found without tool_result blocks immediately after: {pending:?}"
            ));
        }
        expected_role = if role == "user" { "assistant" } else { "user" };
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err("the last assistant message has unanswered tool_use blocks".into())
    }
}

/// What Chat Completions rejects with a 400.
fn check_openai(body: &Value) -> Result<(), String> {
    check_reasoning_effort(body)?;
    match body["stream"].as_bool() {
        Some(true) if body["stream_options"]["include_usage"] == json!(true) => {}
        // OpenAI refuses stream_options without a stream.
        Some(false) if body.get("stream_options").is_none() => {}
        _ => {
            return Err(
                "stream must be true with stream_options.include_usage, or false without stream_options"
                    .into(),
            );
        }
    }
    if let Some(choice) = body.get("tool_choice") {
        let tools = body["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty());
        if !tools
            || !["auto", "none", "required"]
                .iter()
                .any(|word| choice == word)
        {
            return Err(format!("tool_choice {choice} is only allowed with tools"));
        }
    }
    let messages = body["messages"]
        .as_array()
        .ok_or("messages must be a list")?;
    let mut pending: HashSet<String> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool" && !pending.is_empty() {
            return Err(format!(
                "messages.{index}: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing {pending:?}"
            ));
        }
        match role {
            "system" if index == 0 => {}
            "user" => {
                // A string, or (as the API also takes, and gateways send) a list of parts.
                let text = match &message["content"] {
                    Value::String(text) => !text.is_empty(),
                    Value::Array(parts) => {
                        !parts.is_empty()
                            && parts.iter().all(|part| {
                                part["type"] == "text"
                                    && part["text"].as_str().is_some_and(|text| !text.is_empty())
                            })
                    }
                    _ => false,
                };
                if !text {
                    return Err(format!(
                        "messages.{index}: user content must be a non-empty string or list of text parts"
                    ));
                }
            }
            "assistant" => {
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let arguments = call["function"]["arguments"]
                        .as_str()
                        .ok_or(format!("messages.{index}: arguments must be a string"))?;
                    if serde_json::from_str::<Value>(arguments).is_err() {
                        return Err(format!("messages.{index}: arguments are not JSON"));
                    }
                    pending.insert(call["id"].as_str().unwrap_or_default().to_string());
                }
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                if !pending.remove(id) {
                    return Err(format!(
                        "messages.{index}: messages with role 'tool' must be a response to a preceding message with 'tool_calls' ({id})"
                    ));
                }
            }
            other => return Err(format!("messages.{index}: invalid role {other:?}")),
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!("tool_calls without responses: {pending:?}"))
    }
}

/// The Messages API's rules for `thinking`: enabled with a budget of at least 1024 tokens
/// and below `max_tokens`.
fn check_thinking(body: &Value) -> Result<(), String> {
    let Some(thinking) = body.get("thinking") else {
        return Ok(());
    };
    let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
    let max_tokens = body["max_tokens"].as_u64().unwrap_or(0);
    if thinking["type"] != json!("enabled") {
        return Err(format!(
            "thinking.type: expected 'enabled', got {}",
            thinking["type"]
        ));
    }
    if budget < 1024 {
        return Err("thinking.enabled.budget_tokens: must be at least 1024".into());
    }
    if budget >= max_tokens {
        return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
    }
    Ok(())
}

/// Chat Completions' `reasoning_effort`: one of the API's words.
fn check_reasoning_effort(body: &Value) -> Result<(), String> {
    match body.get("reasoning_effort") {
        None => Ok(()),
        Some(Value::String(word))
            if ["none", "minimal", "low", "medium", "high", "xhigh"].contains(&word.as_str()) =>
        {
            Ok(())
        }
        Some(other) => Err(format!("Invalid value for 'reasoning_effort': {other}")),
    }
}
