//! The Anthropic Messages API over SSE: the request body (with prompt-cache breakpoints) and
//! the event stream assembled into one response. HTTP, retries and timeouts are `http.rs`'s.

use std::collections::BTreeMap;

use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::cloud::Platform;
use super::cloud::aws::SigV4;
use super::cloud::bearer::BearerAuth;
use super::http::{Failure, HttpSettings, HttpTransport, SseParser};
use super::retry::FailureCategory;
use super::{
    ContentBlock, EventSink, MalformedInput, ModelRequest, ModelResponse, ProviderError,
    ReportedUsage, StopReason, Usage,
};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub struct AnthropicModel {
    transport: HttpTransport,
    pub(super) model: String,
    thinking_budget: Option<u32>,
    /// Where the Messages API is served: Anthropic's own API, or a cloud platform.
    on: Served,
    /// Vertex AI's project and region, which its path names.
    vertex: Option<(String, String)>,
}

/// The Messages API's home, which decides the URL, the body's version field and auth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    Anthropic,
    /// Bedrock's non-streaming `invoke`: the model in the path, `anthropic_version` in the
    /// body, one JSON message back (its event-stream variant is not spoken).
    Bedrock,
    /// Vertex AI's `streamRawPredict`: the model, project and region in the path,
    /// `anthropic_version` in the body, the Messages API's event stream back.
    Vertex,
}

/// The `anthropic_version` Bedrock's body must carry.
pub const BEDROCK_VERSION: &str = "bedrock-2023-05-31";
/// The `anthropic_version` Vertex AI's body must carry.
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";

impl AnthropicModel {
    pub fn new(
        settings: HttpSettings,
        model: String,
        thinking_budget: Option<u32>,
        platform: Option<Platform>,
    ) -> Result<AnthropicModel, ProviderError> {
        let Some(platform) = platform else {
            let mut headers = HeaderMap::new();
            headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
            let auth = settings.api_key.as_ref().map(|key| {
                (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_string(),
                )
            });
            return Ok(AnthropicModel {
                transport: HttpTransport::new("anthropic", settings, headers, auth)?,
                model,
                thinking_budget,
                on: Served::Anthropic,
                vertex: None,
            });
        };
        match platform {
            Platform::Bedrock {
                region,
                source,
                secrets,
            } => {
                let signer = SigV4::new(&region, "bedrock", source, secrets);
                let transport = HttpTransport::new("bedrock", settings, HeaderMap::new(), None)?
                    .with_request_auth(signer)
                    .with_header(ACCEPT, HeaderValue::from_static("application/json"));
                Ok(AnthropicModel {
                    transport,
                    model,
                    thinking_budget,
                    on: Served::Bedrock,
                    vertex: None,
                })
            }
            Platform::Vertex {
                region,
                project,
                source,
                secrets,
            } => {
                let auth = BearerAuth::new(source, secrets);
                let transport = HttpTransport::new("vertex", settings, HeaderMap::new(), None)?
                    .with_request_auth(auth);
                Ok(AnthropicModel {
                    transport,
                    model,
                    thinking_budget,
                    on: Served::Vertex,
                    vertex: Some((project, region)),
                })
            }
            // Foundry speaks Anthropic's own API; only the credential differs.
            Platform::Azure { source, secrets } => {
                let mut headers = HeaderMap::new();
                headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
                let auth = BearerAuth::new(source, secrets);
                Ok(AnthropicModel {
                    transport: HttpTransport::new("foundry", settings, headers, None)?
                        .with_request_auth(auth),
                    model,
                    thinking_budget,
                    on: Served::Anthropic,
                    vertex: None,
                })
            }
        }
    }

    pub async fn complete(
        &mut self,
        request: &ModelRequest<'_>,
        events: &EventSink,
    ) -> Result<ModelResponse, ProviderError> {
        match self.on {
            Served::Anthropic => {
                let body = request_body(&self.model, request, self.thinking_budget);
                let url = self.transport.url("/v1/messages");
                self.transport
                    .stream(&url, body, AnthropicStream::default, events)
                    .await
            }
            Served::Bedrock => {
                let body = platform_body(
                    None,
                    request,
                    self.thinking_budget,
                    Some(BEDROCK_VERSION),
                    false,
                );
                let url = self.transport.url(&format!(
                    "/model/{}/invoke",
                    super::cloud::oidc::form_encode(&self.model)
                ));
                self.transport
                    .stream(&url, body, AnthropicStream::whole_message, events)
                    .await
            }
            Served::Vertex => {
                let body = platform_body(
                    None,
                    request,
                    self.thinking_budget,
                    Some(VERTEX_VERSION),
                    true,
                );
                let (project, region) = self
                    .vertex
                    .as_ref()
                    .map_or(("", ""), |(p, r)| (p.as_str(), r.as_str()));
                let encode = path_segment;
                let url = self.transport.url(&format!(
                    "/v1/projects/{}/locations/{}/publishers/anthropic/models/{}:streamRawPredict",
                    encode(project),
                    encode(region),
                    encode(&self.model)
                ));
                self.transport
                    .stream(&url, body, AnthropicStream::default, events)
                    .await
            }
        }
    }
}

/// `value` as one path segment: escaped as a form value, but `@` kept, as Vertex's model
/// versions (`claude-sonnet-4-5@20250929`) are written in its documented URLs.
fn path_segment(value: &str) -> String {
    super::cloud::oidc::form_encode(value).replace("%40", "@")
}

const CACHE: fn() -> Value = || json!({"type": "ephemeral"});

/// Three of the four allowed cache breakpoints: after the system prompt, after the tools
/// (both fixed for the run), and on the newest message, so each request reads the previous
/// one's prefix from the cache and writes its own.
///
/// The body is the JSON object `{model, max_tokens, stream, system, messages, tools?,
/// thinking?}`, written as bytes: every message but the newest is its encoding from the
/// history, made once per message for the whole run.
pub fn request_body(model: &str, request: &ModelRequest<'_>, thinking: Option<u32>) -> Vec<u8> {
    platform_body(Some(model), request, thinking, None, true)
}

/// The body as a platform wants it: Bedrock and Vertex name the model in the URL (no
/// `model`) and the API version in the body (`anthropic_version`); Bedrock's `invoke` does
/// not stream (no `stream`).
pub fn platform_body(
    model: Option<&str>,
    request: &ModelRequest<'_>,
    thinking: Option<u32>,
    version: Option<&str>,
    stream: bool,
) -> Vec<u8> {
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        })
        .collect();
    if let Some(Value::Object(last)) = tools.last_mut() {
        last.insert("cache_control".into(), CACHE());
    }
    let mut body = json!({
        "max_tokens": request.max_tokens,
        "system": [{"type": "text", "text": request.system, "cache_control": CACHE()}],
        "messages": [],
    });
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    if stream {
        body["stream"] = json!(true);
    }
    if let Some(version) = version {
        body["anthropic_version"] = json!(version);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(budget) = thinking.and_then(|budget| fitted_budget(budget, request.max_tokens)) {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    let history = request.messages;
    with_messages(&body, |out| {
        let newest = history.len().checked_sub(1);
        for index in 0..newest.unwrap_or(0) {
            out.extend_from_slice(history.value_bytes(index));
            out.push(b',');
        }
        if let Some(newest) = newest {
            write_json(out, &marked(&history[newest]));
        }
    })
}

/// The API's least thinking budget.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The thinking budget a request with `max_tokens` may carry: the API refuses a budget not
/// below `max_tokens`, and a run's output limit may lower `max_tokens` near its end, so the
/// budget shrinks with it; under the API's floor the request goes without thinking.
fn fitted_budget(budget: u32, max_tokens: u32) -> Option<u32> {
    Some(budget.min(max_tokens.saturating_sub(1))).filter(|fit| *fit >= MIN_THINKING_BUDGET)
}

/// The newest message with the moving breakpoint on its last block.
fn marked(message: &super::Message) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Some(Value::Object(block)) = value
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.last_mut())
    {
        block.insert("cache_control".into(), CACHE());
    }
    value
}

/// `body` (an object) encoded as `serde_json::to_vec` would, its field order kept, with the
/// items of its `messages` array written by `messages` instead of from the value.
pub(super) fn with_messages(body: &Value, messages: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(fields) = body else {
        write_json(&mut out, body);
        return out;
    };
    let mut messages = Some(messages);
    out.push(b'{');
    for (index, (key, value)) in fields.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_json(&mut out, &Value::String(key.clone()));
        out.push(b':');
        if key == "messages" {
            out.push(b'[');
            let start = out.len();
            if let Value::Array(fixed) = value {
                for item in fixed {
                    write_json(&mut out, item);
                    out.push(b',');
                }
            }
            if let Some(messages) = messages.take() {
                messages(&mut out);
            }
            if out.len() > start && out.last() == Some(&b',') {
                out.pop();
            }
            out.push(b']');
        } else {
            write_json(&mut out, value);
        }
    }
    out.push(b'}');
    out
}

/// A `Value` holds strings and numbers only, so writing it to memory cannot fail.
pub(super) fn write_json(out: &mut Vec<u8>, value: &Value) {
    let _ = serde_json::to_writer(&mut *out, value);
}

#[derive(Debug)]
enum PartialBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking(String),
    /// A block type this tollgate does not send back (server tools are never enabled).
    Ignored,
}

/// The Messages stream's state: blocks by index, usage, stop reason.
#[derive(Debug, Default)]
pub struct AnthropicStream {
    /// Keyed by index, so a delta finds its block in log time however many there are (a
    /// list searched per delta made 160k blocks cost half a minute).
    blocks: BTreeMap<u64, PartialBlock>,
    /// `None` until an event carries a `usage` object: a gateway may send none at all.
    usage: Option<Usage>,
    stop_reason: Option<StopReason>,
    /// The answer is one JSON message (Bedrock's `invoke`), not an event stream.
    whole: bool,
}

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl AnthropicStream {
    /// A parser for a non-streaming endpoint's whole message.
    pub fn whole_message() -> AnthropicStream {
        AnthropicStream {
            whole: true,
            ..AnthropicStream::default()
        }
    }

    fn block(&mut self, index: u64) -> Option<&mut PartialBlock> {
        self.blocks.get_mut(&index)
    }

    fn start_block(&mut self, index: u64, block: &Value) -> Result<(), Failure> {
        if self.blocks.contains_key(&index) {
            return Err(malformed(format!("block {index} started twice")));
        }
        let partial = match block.get("type").and_then(Value::as_str) {
            Some("text") => PartialBlock::Text(text_of(block, "text")),
            Some("tool_use") => PartialBlock::ToolUse {
                id: text_of(block, "id"),
                name: text_of(block, "name"),
                json: String::new(),
            },
            Some("thinking") => PartialBlock::Thinking {
                thinking: text_of(block, "thinking"),
                signature: text_of(block, "signature"),
            },
            Some("redacted_thinking") => PartialBlock::RedactedThinking(text_of(block, "data")),
            _ => PartialBlock::Ignored,
        };
        self.blocks.insert(index, partial);
        Ok(())
    }

    fn delta(&mut self, index: u64, delta: &Value) -> Result<(), Failure> {
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(block) = self.block(index) else {
            return Err(malformed(format!(
                "a delta for block {index}, never started"
            )));
        };
        match (block, kind) {
            (PartialBlock::Text(text), "text_delta") => text.push_str(&text_of(delta, "text")),
            (PartialBlock::ToolUse { json, .. }, "input_json_delta") => {
                json.push_str(&text_of(delta, "partial_json"))
            }
            (PartialBlock::Thinking { thinking, .. }, "thinking_delta") => {
                thinking.push_str(&text_of(delta, "thinking"))
            }
            (PartialBlock::Thinking { signature, .. }, "signature_delta") => {
                signature.push_str(&text_of(delta, "signature"))
            }
            (PartialBlock::Ignored, _) => {}
            (_, kind) => {
                return Err(malformed(format!(
                    "a {kind} delta for block {index} of another type"
                )));
            }
        }
        Ok(())
    }

    /// Usage arrives in `message_start` and (cumulatively) in `message_delta`; a field a later
    /// event carries replaces the earlier count.
    fn usage(&mut self, usage: &Value) {
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        let counts = [
            field("input_tokens"),
            field("output_tokens"),
            field("cache_creation_input_tokens"),
            field("cache_read_input_tokens"),
        ];
        if counts.iter().all(Option::is_none) {
            return;
        }
        let known = self.usage.get_or_insert_with(Usage::default);
        let [input, output, cache_write, cache_read] = counts;
        if let Some(n) = input {
            known.input_tokens = n;
        }
        if let Some(n) = output {
            known.output_tokens = n;
        }
        if let Some(n) = cache_write {
            known.cache_creation_input_tokens = n;
        }
        if let Some(n) = cache_read {
            known.cache_read_input_tokens = n;
        }
    }

    fn finish(&mut self) -> ModelResponse {
        let blocks = std::mem::take(&mut self.blocks);
        let mut content = Vec::new();
        let mut malformed = Vec::new();
        for (_, block) in blocks {
            match block {
                PartialBlock::Text(text) if text.is_empty() => {}
                PartialBlock::Text(text) => content.push(ContentBlock::Text { text }),
                PartialBlock::ToolUse { id, name, json } => {
                    let input = match tool_input(&json) {
                        Ok(input) => input,
                        Err(problem) => {
                            malformed.push(MalformedInput {
                                id: id.clone(),
                                message: problem,
                            });
                            Value::Object(Default::default())
                        }
                    };
                    content.push(ContentBlock::ToolUse { id, name, input });
                }
                PartialBlock::Thinking {
                    thinking,
                    signature,
                } => content.push(ContentBlock::Thinking {
                    thinking,
                    signature,
                }),
                PartialBlock::RedactedThinking(data) => {
                    content.push(ContentBlock::RedactedThinking { data })
                }
                PartialBlock::Ignored => {}
            }
        }
        let has_tool_use = content
            .iter()
            .any(|block| matches!(block, ContentBlock::ToolUse { .. }));
        let stop_reason = self.stop_reason.unwrap_or(if has_tool_use {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        ModelResponse {
            content,
            stop_reason,
            usage: self
                .usage
                .map_or(ReportedUsage::Missing, ReportedUsage::Reported),
            malformed_inputs: malformed,
        }
    }
}

/// A tool's input: the assembled `input_json_delta`s must make one JSON object. When they do
/// not, the reason (with the text as received) goes back to the model as an error result.
pub fn tool_input(json: &str) -> Result<Value, String> {
    if json.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(json) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "The tool input must be a JSON object, got: {}",
            crate::base::truncate_middle(&other.to_string(), 2000)
        )),
        Err(err) => Err(format!(
            "The tool input is not valid JSON ({err}); it was: {}",
            crate::base::truncate_middle(json, 2000)
        )),
    }
}

fn malformed(message: String) -> Failure {
    Failure::new(
        FailureCategory::StreamCut,
        format!("malformed stream: {message}"),
    )
}

pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

impl SseParser for AnthropicStream {
    fn event(&mut self, data: &str) -> Result<Option<ModelResponse>, Failure> {
        let event: Value = serde_json::from_str(data)
            .map_err(|err| malformed(format!("an event that is not JSON ({err})")))?;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        // Dispatch on the data's `type` rather than the SSE `event:` line, which some
        // proxies drop; unknown types are skipped as the API's versioning policy asks.
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.usage(usage);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                self.start_block(index, block)?;
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                self.delta(index, delta)?;
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = event.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => return Ok(Some(self.finish())),
            "error" => {
                let error = event.get("error").cloned().unwrap_or(Value::Null);
                let kind = text_of(&error, "type");
                let message = text_of(&error, "message");
                return Err(Failure::new(
                    FailureCategory::from_error_event(&kind, &message),
                    format!("{kind}: {message}"),
                ));
            }
            _ => {}
        }
        Ok(None)
    }

    fn end(self) -> Result<ModelResponse, Failure> {
        Err(Failure::new(
            FailureCategory::StreamCut,
            "the stream ended before message_stop",
        ))
    }

    fn takes_whole(&self) -> bool {
        self.whole
    }

    /// The Messages API's non-streaming answer, `{type: "message", content, stop_reason,
    /// usage}`, read through the same blocks the stream builds.
    fn whole(&mut self, body: &str) -> Result<ModelResponse, Failure> {
        let message: Value = serde_json::from_str(body)
            .map_err(|err| malformed(format!("an answer that is not JSON ({err})")))?;
        if message.get("type").and_then(Value::as_str) != Some("message") {
            return Err(Failure::new(
                FailureCategory::NotEventStream,
                format!(
                    "HTTP 200 without a message; the body began: {}",
                    crate::base::truncate_middle(body.trim(), 500)
                ),
            ));
        }
        let blocks = message.get("content").and_then(Value::as_array);
        for (index, block) in blocks.into_iter().flatten().enumerate() {
            let index = u64::try_from(index).unwrap_or(u64::MAX);
            self.start_block(index, block)?;
            if let Some(PartialBlock::ToolUse { json, .. }) = self.blocks.get_mut(&index) {
                *json = block.get("input").map(Value::to_string).unwrap_or_default();
            }
        }
        if let Some(reason) = message.get("stop_reason").and_then(Value::as_str) {
            self.stop_reason = Some(stop_reason(reason));
        }
        if let Some(usage) = message.get("usage") {
            self.usage(usage);
        }
        Ok(self.finish())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::model::{History, Message, Role, ToolSpec};

    fn feed(events: &[Value]) -> Result<Option<ModelResponse>, Failure> {
        let mut stream = AnthropicStream::default();
        let mut last = None;
        for event in events {
            last = stream.event(&event.to_string())?;
        }
        Ok(last)
    }

    #[test]
    fn assembles_text_tool_input_thinking_and_usage() {
        let response = feed(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"look."}}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"path\": \"a.rs\"}"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}),
            json!({"type":"message_stop"}),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            response,
            ModelResponse {
                content: vec![
                    ContentBlock::Thinking {
                        thinking: "hmm".into(),
                        signature: "sig".into()
                    },
                    ContentBlock::Text {
                        text: "Let me look.".into()
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "Read".into(),
                        input: json!({"file_path": "a.rs"})
                    },
                ],
                stop_reason: StopReason::ToolUse,
                usage: ReportedUsage::Reported(Usage {
                    input_tokens: 10,
                    output_tokens: 42,
                    cache_creation_input_tokens: 5,
                    cache_read_input_tokens: 100,
                }),
                malformed_inputs: vec![],
            }
        );
    }

    #[test]
    fn invalid_tool_json_is_kept_as_a_malformed_input() {
        let response = feed(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"max_tokens"}}),
            json!({"type":"message_stop"}),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(response.stop_reason, StopReason::MaxTokens);
        assert_eq!(response.malformed_inputs.len(), 1);
        assert_eq!(response.malformed_inputs[0].id, "t1");
        assert!(
            response.malformed_inputs[0]
                .message
                .contains("not valid JSON")
        );
        assert!(
            matches!(&response.content[0], ContentBlock::ToolUse { input, .. } if input == &json!({}))
        );
    }

    /// Deltas find their block by index wherever it is, blocks come out in index order
    /// whatever order they started in, and a stream without usage says so.
    #[test]
    fn many_blocks_in_any_order_and_no_usage() {
        let mut events = vec![json!({"type":"message_start","message":{}})];
        for index in (0..2000u64).rev() {
            events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}));
        }
        for index in 0..2000u64 {
            events.push(json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":format!("b{index}")}}));
        }
        events.push(json!({"type":"message_stop"}));
        let response = feed(&events).unwrap().unwrap();
        assert_eq!(response.content.len(), 2000);
        assert_eq!(
            response.content[1999],
            ContentBlock::Text {
                text: "b1999".into()
            }
        );
        assert_eq!(response.usage, ReportedUsage::Missing);
        let twice = feed(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ]);
        assert_eq!(twice.unwrap_err().category, FailureCategory::StreamCut);
    }

    #[test]
    fn errors_and_cuts_are_failures() {
        let err = feed(&[
            json!({"type":"message_start","message":{"usage":{}}}),
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        ])
        .unwrap_err();
        assert_eq!(err.category, FailureCategory::Overloaded);
        let mut stream = AnthropicStream::default();
        stream
            .event(&json!({"type":"message_start","message":{}}).to_string())
            .unwrap();
        assert_eq!(
            stream.end().unwrap_err().category,
            FailureCategory::StreamCut
        );
    }

    #[test]
    fn the_body_carries_cache_breakpoints() {
        let messages = History::new(vec![
            Message::user_text("go"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text { text: "ok".into() }],
            },
            Message::user_text("more"),
        ]);
        let tools = vec![
            ToolSpec {
                name: "Read".into(),
                description: "reads".into(),
                input_schema: json!({"type": "object"}),
            },
            ToolSpec {
                name: "Bash".into(),
                description: "runs".into(),
                input_schema: json!({"type": "object"}),
            },
        ];
        let body: Value = serde_json::from_slice(&request_body(
            "claude-x",
            &ModelRequest {
                system: "sys",
                messages: &messages,
                tools: &tools,
                max_tokens: 4096,
            },
            Some(2048),
        ))
        .unwrap();
        assert_eq!(body["system"][0]["cache_control"], CACHE());
        assert_eq!(body["tools"][1]["cache_control"], CACHE());
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["messages"][2]["content"][0]["cache_control"], CACHE());
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_none()
        );
        assert_eq!(body["thinking"]["budget_tokens"], 2048);
        assert_eq!(body["stream"], true);
    }

    /// The body as it was built before the history kept its encodings: one `Value` for the
    /// whole request. The bytes sent must not change, or the cached prefix would.
    fn whole_value_body(model: &str, request: &ModelRequest<'_>, thinking: Option<u32>) -> Vec<u8> {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), CACHE());
        }
        let mut messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| serde_json::to_value(message).unwrap())
            .collect();
        if let Some(Value::Object(block)) = messages
            .last_mut()
            .and_then(|message| message.get_mut("content"))
            .and_then(Value::as_array_mut)
            .and_then(|blocks| blocks.last_mut())
        {
            block.insert("cache_control".into(), CACHE());
        }
        let mut body = json!({
            "model": model,
            "max_tokens": request.max_tokens,
            "stream": true,
            "system": [{"type": "text", "text": request.system, "cache_control": CACHE()}],
            "messages": messages,
        });
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        if let Some(budget) = thinking {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        serde_json::to_vec(&body).unwrap()
    }

    /// Every kind of block, in every position, with and without tools and thinking, and the
    /// history grown turn by turn (so earlier messages' kept bytes are reused).
    #[test]
    fn the_body_is_byte_for_byte_the_whole_value_encoding() {
        let tools = vec![ToolSpec {
            name: "Read".into(),
            description: "reads \"files\"\n".into(),
            input_schema: json!({"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}),
        }];
        let turns = [
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Thinking {
                        thinking: "hm".into(),
                        signature: "sig".into(),
                    },
                    ContentBlock::Text {
                        text: "Let me\tlook ü".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "Read".into(),
                        input: json!({"z": 1, "a": [1.5, null, {"y": "</x>"}]}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: "line\n\u{1}".into(),
                        is_error: true,
                    },
                    ContentBlock::Text {
                        text: "<system-reminder>x</system-reminder>".into(),
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::RedactedThinking { data: "d".into() }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "toolu_2".into(),
                    content: String::new(),
                    is_error: false,
                }],
            },
            Message {
                role: Role::User,
                content: vec![],
            },
        ];
        for (tools, thinking) in [(&tools[..], Some(1024)), (&[][..], None)] {
            let mut history = History::new(vec![Message::user_text("go \"now\"")]);
            for turn in turns.iter().cloned() {
                let request = ModelRequest {
                    system: "sys\n",
                    messages: &history,
                    tools,
                    max_tokens: 3000,
                };
                assert_eq!(
                    String::from_utf8(request_body("claude-x", &request, thinking)).unwrap(),
                    String::from_utf8(whole_value_body("claude-x", &request, thinking)).unwrap()
                );
                history.push(turn);
            }
        }
        let empty = History::default();
        let request = ModelRequest {
            system: "",
            messages: &empty,
            tools: &tools,
            max_tokens: 1,
        };
        assert_eq!(
            request_body("m", &request, None),
            whole_value_body("m", &request, None)
        );
    }

    #[test]
    fn the_thinking_budget_stays_below_max_tokens_or_is_left_out() {
        let history = History::new(vec![Message::user_text("go")]);
        let thinking = |max_tokens: u32| {
            let request = ModelRequest {
                system: "",
                messages: &history,
                tools: &[],
                max_tokens,
            };
            let body: Value =
                serde_json::from_slice(&request_body("m", &request, Some(10_000))).unwrap();
            body.get("thinking").cloned()
        };
        assert_eq!(
            thinking(20_000),
            Some(json!({"type": "enabled", "budget_tokens": 10_000}))
        );
        // An output limit lowered max_tokens: the budget shrinks below it.
        assert_eq!(
            thinking(5_000),
            Some(json!({"type": "enabled", "budget_tokens": 4_999}))
        );
        assert_eq!(
            thinking(1_025),
            Some(json!({"type": "enabled", "budget_tokens": 1_024}))
        );
        // Below the API's floor there is no room to think.
        assert_eq!(thinking(1_024), None);
    }
}
