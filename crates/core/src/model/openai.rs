//! OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, OpenRouter, LiteLLM, llama.cpp):
//! the conversation mapped to chat messages, streamed tool-call deltas assembled by index,
//! and the fall-back to whole (non-streamed) responses for a server that cannot stream
//! tool calls.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use super::anthropic::{tool_input, with_messages, write_json};
use super::effort::Effort;
use super::http::{Failure, HttpSettings, HttpTransport, Reading, Sent, SseParser};
use super::retry::FailureCategory;
use super::{
    ContentBlock, EventSink, MalformedInput, Message, ModelRequest, ModelResponse, ProviderError,
    ProviderEvent, ReportedUsage, Role, StopReason, Usage,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// `model.stream`: whether responses are streamed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Streaming {
    /// Streamed until the server shows it cannot stream a request with tools, then whole
    /// for the rest of the run.
    #[default]
    Auto,
    /// Always streamed; a server that cannot is an error.
    Always,
    /// Never streamed: every response is read whole (`stream: false`).
    Never,
}

/// Words of the errors servers give when they cannot stream a request with tools, lower
/// case. Each is the server's own text:
/// - llama-cpp-python's `chatml-function-calling` (`llama_chat_format.py`), raised once the
///   stream has begun, so the client mostly sees an empty HTTP 200 instead; a gateway in
///   front may pass the text on.
/// - llama.cpp's server before it streamed tool calls (`utils.hpp`, until spring 2025).
const CANNOT_STREAM_TOOLS: &[&str] = &[
    "streaming tool choice is not supported",
    "cannot use tools with stream",
];

/// Whether `failure` says the server cannot stream a request that offers tools: an HTTP 200
/// that ended before its first byte, or one of the known errors.
pub fn cannot_stream_tools(failure: &Failure) -> bool {
    let message = failure.message.to_ascii_lowercase();
    failure.empty_200
        || CANNOT_STREAM_TOOLS
            .iter()
            .any(|words| message.contains(words))
}

#[derive(Debug)]
pub struct OpenAiModel {
    transport: HttpTransport,
    pub(super) model: String,
    max_tokens_field: &'static str,
    streaming: Streaming,
    /// `Auto` found the server cannot stream tool calls: every later request is whole.
    fell_back: bool,
    /// `reasoning_effort`, sent when the run sets an effort.
    effort: Option<Effort>,
}

impl OpenAiModel {
    pub fn new(
        settings: HttpSettings,
        model: String,
        streaming: Streaming,
        effort: Option<Effort>,
        platform: Option<super::cloud::Platform>,
    ) -> Result<OpenAiModel, ProviderError> {
        // OpenAI's own reasoning models refuse `max_tokens`; most compatible servers only
        // know `max_tokens`.
        let max_tokens_field = if settings.base_url.starts_with("https://api.openai.com") {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let auth = settings
            .api_key
            .as_ref()
            .map(|key| (AUTHORIZATION, format!("Bearer {}", key.expose())));
        let mut transport = HttpTransport::new("openai", settings, HeaderMap::new(), auth)?;
        match platform {
            None => {}
            // Azure OpenAI's v1 API is OpenAI's shape; the bearer is an Entra token.
            Some(super::cloud::Platform::Azure { source, secrets }) => {
                transport = transport
                    .with_request_auth(super::cloud::bearer::BearerAuth::new(source, secrets));
            }
            Some(other) => {
                return Err(ProviderError::Setup(format!(
                    "the openai provider is not served on {other:?}"
                )));
            }
        }
        Ok(OpenAiModel {
            transport,
            model,
            max_tokens_field,
            streaming,
            fell_back: false,
            effort,
        })
    }

    pub async fn complete(
        &mut self,
        request: &ModelRequest<'_>,
        events: &EventSink,
    ) -> Result<ModelResponse, ProviderError> {
        let url = self.transport.url("/chat/completions");
        let stream = match self.streaming {
            Streaming::Never => false,
            Streaming::Always => true,
            Streaming::Auto => !self.fell_back,
        };
        if stream {
            // Only a request with tools may show that the server cannot stream them; any
            // other failure is the request's own.
            let watch = self.streaming == Streaming::Auto && !request.tools.is_empty();
            let body = request_body(
                &self.model,
                request,
                self.max_tokens_field,
                true,
                self.effort,
            );
            let refused = |failure: &Failure| watch && cannot_stream_tools(failure);
            let reading = Reading::Events(&OpenAiStream::default);
            match self
                .transport
                .send(&url, body, reading, events, &refused)
                .await?
            {
                Sent::Response(response) => return Ok(response),
                Sent::Refused(failure) => {
                    self.fell_back = true;
                    // The receiver may be gone if the loop stopped listening.
                    let _ = events.send(ProviderEvent::StreamingOff {
                        reason: failure.message,
                    });
                }
            }
        }
        let body = request_body(
            &self.model,
            request,
            self.max_tokens_field,
            false,
            self.effort,
        );
        let reading: Reading<'_, OpenAiStream> = Reading::Whole(whole_response);
        match self
            .transport
            .send(&url, body, reading, events, &|_| false)
            .await?
        {
            Sent::Response(response) => Ok(response),
            Sent::Refused(failure) => Err(ProviderError::Protocol(failure.message)),
        }
    }
}

/// Each message's chat messages come from the history, encoded once per message for the
/// whole run; the rest of the body is built as a `Value` each request. `stream: false` asks
/// for the whole response as one JSON body.
pub fn request_body(
    model: &str,
    request: &ModelRequest<'_>,
    max_tokens_field: &str,
    stream: bool,
    effort: Option<Effort>,
) -> Vec<u8> {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "system", "content": request.system}],
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body[max_tokens_field] = json!(request.max_tokens);
    if let Some(effort) = effort {
        body["reasoning_effort"] = json!(effort.as_str());
    }
    if !request.tools.is_empty() {
        // The API's default when tools are given, yet servers that follow the chat template
        // literally (llama-cpp-python's `chatml-function-calling`) render no tools without it.
        body["tool_choice"] = json!("auto");
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                }})
            })
            .collect();
    }
    let history = request.messages;
    with_messages(&body, |out| {
        for index in 0..history.len() {
            let chat = history.chat(index, encode_chat);
            if !chat.is_empty() {
                out.extend_from_slice(chat);
                out.push(b',');
            }
        }
    })
}

/// One message's chat messages, comma-separated.
fn encode_chat(message: &Message) -> Vec<u8> {
    let mut chat = Vec::new();
    chat_messages(message, &mut chat);
    let mut bytes = Vec::new();
    for (index, value) in chat.iter().enumerate() {
        if index > 0 {
            bytes.push(b',');
        }
        write_json(&mut bytes, value);
    }
    bytes
}

/// One conversation message as chat messages: tool results become `tool` messages, which must
/// come straight after the assistant's `tool_calls`, so a user's text follows them. Thinking
/// blocks are Anthropic's and are not sent.
fn chat_messages(message: &Message, out: &mut Vec<Value>) {
    let text = message.text();
    match message.role {
        Role::Assistant => {
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::ToolUse { id, name, input } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": input.to_string()},
                    })),
                    _ => None,
                })
                .collect();
            // An empty string, never `null`, beside tool calls: llama-cpp-python's schema
            // takes only a string (a null is its HTTP 500), and its chat templates read the
            // field, so it cannot be left out either; OpenAI, vLLM, Ollama and llama.cpp take
            // "" as no text.
            let mut chat = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                chat["tool_calls"] = Value::Array(calls);
            }
            out.push(chat);
        }
        Role::User => {
            for block in &message.content {
                if let ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = block
                {
                    // Chat Completions has no error flag; the model reads it from the text.
                    let content = if *is_error {
                        format!("Error: {content}")
                    } else {
                        content.clone()
                    };
                    out.push(
                        json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}),
                    );
                }
            }
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The chat stream's state: text, tool calls by index, finish reason, usage.
#[derive(Debug, Default)]
pub struct OpenAiStream {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

fn string_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

impl OpenAiStream {
    fn chunk(&mut self, chunk: &Value) {
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
            let prompt = count("/prompt_tokens").unwrap_or(0);
            // Cached prompt tokens are part of prompt_tokens; they are billed apart.
            let cached = count("/prompt_tokens_details/cached_tokens").unwrap_or(0);
            self.usage = Some(Usage {
                input_tokens: prompt.saturating_sub(cached),
                output_tokens: count("/completion_tokens").unwrap_or(0),
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: cached,
            });
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return;
        };
        if let Some(text) = string_at(choice, "/delta/content") {
            self.text.push_str(text);
        }
        for call in choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let partial = self.calls.entry(index).or_default();
            if let Some(id) = string_at(call, "/id").filter(|id| !id.is_empty()) {
                partial.id = id.to_string();
            }
            if let Some(name) = string_at(call, "/function/name") {
                partial.name.push_str(name);
            }
            if let Some(arguments) = string_at(call, "/function/arguments") {
                partial.arguments.push_str(arguments);
            }
        }
        if let Some(reason) = string_at(choice, "/finish_reason") {
            self.finish_reason = Some(reason.to_string());
        }
    }

    fn finish(&mut self) -> ModelResponse {
        let mut content = Vec::new();
        let text = std::mem::take(&mut self.text);
        if !text.is_empty() {
            content.push(ContentBlock::Text { text });
        }
        let mut malformed = Vec::new();
        for (index, call) in std::mem::take(&mut self.calls) {
            // Some local servers leave ids out; every tool_use needs one to be answered.
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            let input = match tool_input(&call.arguments) {
                Ok(input) => input,
                Err(message) => {
                    malformed.push(MalformedInput {
                        id: id.clone(),
                        message,
                    });
                    Value::Object(Default::default())
                }
            };
            content.push(ContentBlock::ToolUse {
                id,
                name: call.name,
                input,
            });
        }
        let has_calls = content
            .iter()
            .any(|block| matches!(block, ContentBlock::ToolUse { .. }));
        let stop_reason = match self.finish_reason.as_deref() {
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ if has_calls => StopReason::ToolUse,
            _ => StopReason::EndTurn,
        };
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

/// A whole (non-streamed) `chat.completion` body, read through the stream's own state: its
/// message is one delta holding everything, its tool calls indexed by position.
pub fn whole_response(body: &str) -> Result<ModelResponse, Failure> {
    let value: Value = serde_json::from_str(body).map_err(|err| {
        Failure::new(
            FailureCategory::StreamCut,
            format!(
                "the response is not whole JSON ({err}); it began: {}",
                crate::base::truncate_middle(body.trim(), 200)
            ),
        )
    })?;
    if let Some(failure) = error_failure(&value) {
        return Err(failure);
    }
    let Some(choice) = value.pointer("/choices/0") else {
        return Err(Failure::new(
            FailureCategory::Protocol,
            "the response has no choices",
        ));
    };
    let mut message = choice.get("message").cloned().unwrap_or(Value::Null);
    if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (index, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(index);
        }
    }
    let mut stream = OpenAiStream::default();
    stream.chunk(&json!({
        "choices": [{"index": 0, "delta": message, "finish_reason": choice.get("finish_reason")}],
        "usage": value.get("usage"),
    }));
    Ok(stream.finish())
}

/// The failure an `{"error": …}` body or chunk stands for.
fn error_failure(value: &Value) -> Option<Failure> {
    let error = value.get("error")?;
    let kind = string_at(error, "/type")
        .or_else(|| string_at(error, "/code"))
        .unwrap_or_default();
    let message = string_at(error, "/message").unwrap_or_default();
    Some(Failure::new(
        FailureCategory::from_error_event(kind, message),
        format!("{kind}: {message}"),
    ))
}

impl SseParser for OpenAiStream {
    fn event(&mut self, data: &str) -> Result<Option<ModelResponse>, Failure> {
        if data.trim() == "[DONE]" {
            return Ok(Some(self.finish()));
        }
        let chunk: Value = serde_json::from_str(data).map_err(|err| {
            Failure::new(
                FailureCategory::StreamCut,
                format!("malformed stream: a chunk that is not JSON ({err})"),
            )
        })?;
        if let Some(failure) = error_failure(&chunk) {
            return Err(failure);
        }
        self.chunk(&chunk);
        Ok(None)
    }

    /// Servers that omit `[DONE]` are accepted once the finish reason and the usage are in;
    /// before that the message may be incomplete and its cost unknown.
    fn end(mut self) -> Result<ModelResponse, Failure> {
        if self.finish_reason.is_some() && self.usage.is_some() {
            Ok(self.finish())
        } else {
            Err(Failure::new(
                FailureCategory::StreamCut,
                "the stream ended before the final chunk",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::model::History;

    #[test]
    fn assembles_tool_calls_by_index_and_reads_usage() {
        let mut stream = OpenAiStream::default();
        let chunks = [
            json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"Checking"}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"Read","arguments":""}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"Glob","arguments":"{\"pattern\":"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file_path\":\"a\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"*.rs\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":100}}}),
        ];
        for chunk in chunks {
            assert_eq!(stream.event(&chunk.to_string()).unwrap(), None);
        }
        let response = stream.event("[DONE]").unwrap().unwrap();
        assert_eq!(
            response,
            ModelResponse {
                content: vec![
                    ContentBlock::Text {
                        text: "Checking".into()
                    },
                    ContentBlock::ToolUse {
                        id: "call_a".into(),
                        name: "Read".into(),
                        input: json!({"file_path": "a"})
                    },
                    ContentBlock::ToolUse {
                        id: "call_b".into(),
                        name: "Glob".into(),
                        input: json!({"pattern": "*.rs"})
                    },
                ],
                stop_reason: StopReason::ToolUse,
                usage: ReportedUsage::Reported(Usage {
                    input_tokens: 20,
                    output_tokens: 30,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 100
                }),
                malformed_inputs: vec![],
            }
        );
    }

    #[test]
    fn a_cut_stream_is_a_failure() {
        let mut stream = OpenAiStream::default();
        stream
            .event(&json!({"choices":[{"index":0,"delta":{"content":"hi"}}]}).to_string())
            .unwrap();
        assert_eq!(
            stream.end().unwrap_err().category,
            FailureCategory::StreamCut
        );
    }

    #[test]
    fn results_follow_their_calls_and_text_follows_results() {
        let messages = History::new(vec![
            Message::user_text("go"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "c1".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "a"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "c1".into(),
                        content: "nope".into(),
                        is_error: true,
                    },
                    ContentBlock::Text {
                        text: "continue".into(),
                    },
                ],
            },
        ]);
        let body: Value = serde_json::from_slice(&request_body(
            "m",
            &ModelRequest {
                system: "sys",
                messages: &messages,
                tools: &[],
                max_tokens: 7,
            },
            "max_tokens",
            true,
            None,
        ))
        .unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"a\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error: nope"},
                {"role": "user", "content": "continue"},
            ])
        );
        assert_eq!(body["max_tokens"], 7);
        assert!(body.get("tools").is_none());
    }

    /// The body as it was built before the history kept its encodings: one `Value` for the
    /// whole request, which the bytes sent must still equal.
    fn whole_value_body(
        model: &str,
        request: &ModelRequest<'_>,
        field: &str,
        stream: bool,
    ) -> Vec<u8> {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for message in request.messages.iter() {
            chat_messages(message, &mut messages);
        }
        let mut body = json!({
            "model": model,
            "messages": messages,
            "stream": stream,
        });
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        body[field] = json!(request.max_tokens);
        if !request.tools.is_empty() {
            body["tool_choice"] = json!("auto");
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    }})
                })
                .collect();
        }
        serde_json::to_vec(&body).unwrap()
    }

    #[test]
    fn the_body_is_byte_for_byte_the_whole_value_encoding() {
        let tools = [crate::model::ToolSpec {
            name: "Grep".into(),
            description: "searches \"text\"".into(),
            input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        }];
        let turns = [
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Thinking {
                        thinking: "t".into(),
                        signature: "s".into(),
                    },
                    ContentBlock::Text {
                        text: "Looking ü\n".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "c1".into(),
                        name: "Grep".into(),
                        input: json!({"pattern": "a\"b", "z": [1, 2.5]}),
                    },
                    ContentBlock::ToolUse {
                        id: "c2".into(),
                        name: "Read".into(),
                        input: json!({}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "c1".into(),
                        content: "x".into(),
                        is_error: false,
                    },
                    ContentBlock::ToolResult {
                        tool_use_id: "c2".into(),
                        content: "denied".into(),
                        is_error: true,
                    },
                    ContentBlock::Text {
                        text: "reminder".into(),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text {
                    text: "done".into(),
                }],
            },
        ];
        for (tools, field, stream) in [
            (&tools[..], "max_completion_tokens", true),
            (&[][..], "max_tokens", true),
            (&tools[..], "max_tokens", false),
        ] {
            let mut history = History::new(vec![Message::user_text("go")]);
            for turn in turns.iter().cloned() {
                let request = ModelRequest {
                    system: "sys \"x\"",
                    messages: &history,
                    tools,
                    max_tokens: 9,
                };
                assert_eq!(
                    String::from_utf8(request_body("m", &request, field, stream, None)).unwrap(),
                    String::from_utf8(whole_value_body("m", &request, field, stream)).unwrap()
                );
                history.push(turn);
            }
        }
        let empty = History::default();
        let request = ModelRequest {
            system: "",
            messages: &empty,
            tools: &[],
            max_tokens: 1,
        };
        assert_eq!(
            request_body("m", &request, "max_tokens", true, None),
            whole_value_body("m", &request, "max_tokens", true)
        );
    }

    #[test]
    fn tools_come_with_tool_choice_and_a_whole_request_asks_for_no_stream() {
        let history = History::new(vec![Message::user_text("go")]);
        let tools = [crate::model::ToolSpec {
            name: "Read".into(),
            description: "reads".into(),
            input_schema: json!({"type": "object"}),
        }];
        let body = |tools: &[crate::model::ToolSpec], stream: bool| -> Value {
            let request = ModelRequest {
                system: "s",
                messages: &history,
                tools,
                max_tokens: 5,
            };
            serde_json::from_slice(&request_body("m", &request, "max_tokens", stream, None))
                .unwrap()
        };
        let streamed = body(&tools, true);
        assert_eq!(streamed["tool_choice"], "auto");
        assert_eq!(streamed["stream"], true);
        assert_eq!(streamed["stream_options"], json!({"include_usage": true}));
        let whole = body(&tools, false);
        assert_eq!(whole["tool_choice"], "auto");
        assert_eq!(whole["stream"], false);
        // OpenAI refuses stream_options without a stream.
        assert!(whole.get("stream_options").is_none());
        assert!(body(&[], true).get("tool_choice").is_none());
    }

    #[test]
    fn a_whole_response_reads_as_the_stream_would() {
        // llama-cpp-python's shape: content null, a legacy function_call beside tool_calls.
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null, "message": {
                "role": "assistant", "content": null,
                "function_call": {"name": "Read", "arguments": "{\"file_path\": \"a\"}"},
                "tool_calls": [
                    {"id": "call__0_Read_cmpl-1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\": \"a\"}"}},
                    {"id": "call__1_Glob_cmpl-1", "type": "function", "function": {"name": "Glob", "arguments": "not json"}}
                ]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
        });
        let response = whole_response(&body.to_string()).unwrap();
        assert_eq!(
            response.content,
            vec![
                ContentBlock::ToolUse {
                    id: "call__0_Read_cmpl-1".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "a"}),
                },
                ContentBlock::ToolUse {
                    id: "call__1_Glob_cmpl-1".into(),
                    name: "Glob".into(),
                    input: json!({}),
                },
            ]
        );
        assert_eq!(response.malformed_inputs.len(), 1);
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            ReportedUsage::Reported(Usage {
                input_tokens: 50,
                output_tokens: 7,
                ..Usage::default()
            })
        );
        let text = json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "done"}}]});
        let response = whole_response(&text.to_string()).unwrap();
        assert_eq!(
            response.content,
            vec![ContentBlock::Text {
                text: "done".into()
            }]
        );
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert_eq!(response.usage, ReportedUsage::Missing);
        let error =
            whole_response(r#"{"error": {"message": "bad", "type": "invalid_request_error"}}"#)
                .unwrap_err();
        assert_eq!(error.category, FailureCategory::InvalidRequest);
        assert_eq!(
            whole_response("{\"choices\": [").unwrap_err().category,
            FailureCategory::StreamCut
        );
    }

    #[test]
    fn a_server_that_cannot_stream_tools_is_known_by_its_answer() {
        let mut empty = Failure::new(
            FailureCategory::NotEventStream,
            "HTTP 200 with an empty body",
        );
        assert!(!cannot_stream_tools(&empty));
        empty.empty_200 = true;
        assert!(cannot_stream_tools(&empty));
        for message in [
            "internal_server_error: Automatic streaming tool choice is not supported",
            "Cannot use tools with stream",
        ] {
            assert!(cannot_stream_tools(&Failure::new(
                FailureCategory::ServerError,
                message
            )));
        }
        assert!(!cannot_stream_tools(&Failure::new(
            FailureCategory::ServerError,
            "internal_server_error: out of memory"
        )));
    }
}
