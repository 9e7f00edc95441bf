//! The model side of the loop: the conversation's message types, tool specs, and the
//! providers that turn a request into an assistant response.

mod anthropic;
pub mod cloud;
mod effort;
mod history;
mod http;
mod openai;
pub mod overflow;
pub mod pricing;
mod retry;
mod scripted;
pub mod sse;
pub mod window;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use anthropic::{AnthropicModel, AnthropicStream};
pub use effort::{Effort, EffortApi};
pub use history::History;
pub use http::{ApiKey, Failure, HttpSettings, SseParser, Timeouts, install_crypto_provider};
pub use openai::{OpenAiModel, OpenAiStream, Streaming};
pub use pricing::Pricing;

pub use retry::{FailureCategory, RetryPolicy};
pub use scripted::{ScriptedBlock, ScriptedModel, ScriptedTurns};

/// Default base URLs, used when neither the task nor the environment names one.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = anthropic::DEFAULT_BASE_URL;
pub const OPENAI_DEFAULT_BASE_URL: &str = openai::DEFAULT_BASE_URL;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One block of a message, in the Anthropic Messages shape (the richest of the APIs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Extended thinking; the Messages API needs it sent back unchanged with its signature.
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The text blocks joined, for summaries and reports.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    pub system: &'a str,
    pub messages: &'a History,
    pub tools: &'a [ToolSpec],
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Saturating: a server's counts are input, and no input may overflow a total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
    }
}

impl Usage {
    /// Every prompt token, cached or not.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }
}

/// What a response says of its tokens. An OpenAI-compatible gateway or a proxy may send no
/// usage at all; then the count is estimated, never taken as a known zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportedUsage {
    /// Counted by the API.
    Reported(Usage),
    /// The API sent none: estimated from the request's and the response's bytes
    /// ([`estimate_usage`]).
    Estimated(Usage),
    /// The stream carried none; the transport turns this into `Estimated` before a response
    /// leaves it, so the loop never sees it.
    Missing,
}

impl ReportedUsage {
    /// The tokens to count and charge (an estimate's too).
    pub fn tokens(&self) -> Usage {
        match self {
            ReportedUsage::Reported(usage) | ReportedUsage::Estimated(usage) => *usage,
            ReportedUsage::Missing => Usage::default(),
        }
    }

    pub fn is_estimated(&self) -> bool {
        match self {
            ReportedUsage::Reported(_) => false,
            ReportedUsage::Estimated(_) | ReportedUsage::Missing => true,
        }
    }
}

/// Whether a request's usage was counted by the API or estimated by tollgate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    #[default]
    Reported,
    Estimated,
}

impl UsageSource {
    pub fn of(usage: &ReportedUsage) -> UsageSource {
        if usage.is_estimated() {
            UsageSource::Estimated
        } else {
            UsageSource::Reported
        }
    }

    pub fn is_reported(&self) -> bool {
        *self == UsageSource::Reported
    }
}

/// Bytes counted as one token when a response carries no usage. The vendors' tokenizers
/// yield about 3.5–4 bytes a token for English and 2.5–3.5 for code and JSON; three errs
/// high for most text, so a budget charged by the estimate stops early rather than late.
pub const ESTIMATE_BYTES_PER_TOKEN: usize = 3;

/// The usage of a response the API did not count: the request body as sent (system prompt,
/// tools, history — all of it is prompt) and the response's content as JSON, each at
/// [`ESTIMATE_BYTES_PER_TOKEN`].
pub fn estimate_usage(request_bytes: usize, content: &[ContentBlock]) -> Usage {
    let tokens =
        |bytes: usize| u64::try_from(bytes.div_ceil(ESTIMATE_BYTES_PER_TOKEN)).unwrap_or(u64::MAX);
    let output = serde_json::to_vec(content).map_or(0, |bytes| bytes.len());
    Usage {
        input_tokens: tokens(request_bytes),
        output_tokens: tokens(output),
        ..Usage::default()
    }
}

/// A tool_use whose input the model garbled (not JSON, not an object). The block keeps an
/// empty input so the history stays valid; the loop answers it with this message as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedInput {
    pub id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: ReportedUsage,
    pub malformed_inputs: Vec<MalformedInput>,
}

impl ModelResponse {
    /// The first tool_use id used twice in this response. Results are paired with calls by
    /// id, so a repeat would make two results indistinguishable (the real API refuses them).
    pub fn repeated_tool_id(&self) -> Option<&str> {
        let mut seen = std::collections::HashSet::new();
        self.content.iter().find_map(|block| match block {
            ContentBlock::ToolUse { id, .. } if !seen.insert(id.as_str()) => Some(id.as_str()),
            _ => None,
        })
    }
}

/// A retry the provider is about to make, for the transcript's `api_retry` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryNotice {
    /// 1 for the first retry.
    pub attempt: u32,
    pub max: u32,
    pub delay_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub category: FailureCategory,
    pub message: String,
}

/// What a provider tells the loop while a request is in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEvent {
    Retry(RetryNotice),
    /// The server cannot stream a request with tools (`reason` is how it showed it): this
    /// request and every later one are sent whole. Said once a run.
    StreamingOff {
        reason: String,
    },
}

pub type EventSink = tokio::sync::mpsc::UnboundedSender<ProviderEvent>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The request failed for good: a non-retryable answer, or the retries ran out. The
    /// message is the API's own, with the API key scrubbed from it.
    #[error("{provider} request failed after {attempts} attempt(s): {}{message}", status.map(|s| format!("HTTP {s}: ")).unwrap_or_default())]
    Failed {
        provider: &'static str,
        attempts: u32,
        category: FailureCategory,
        status: Option<u16>,
        message: String,
    },
    /// The provider could not be set up (HTTP client, header values).
    #[error("{0}")]
    Setup(String),
    /// The request broke the protocol the API enforces (a real API would answer 400).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The scripted model has no turn left for this request.
    #[error(
        "the scripted model has no turn {0}: the script ended while the loop expected another response"
    )]
    ScriptExhausted(usize),
}

impl ProviderError {
    /// The request was refused for its size (`overflow::SHAPES`: Anthropic's, OpenAI's and
    /// the gateways' forms): a shorter history may still be answered.
    pub fn is_context_overflow(&self) -> bool {
        match self {
            ProviderError::Failed {
                category, message, ..
            } => overflow::is_overflow(*category, message),
            ProviderError::Setup(_)
            | ProviderError::Protocol(_)
            | ProviderError::ScriptExhausted(_) => false,
        }
    }

    /// The model is overloaded or unavailable (HTTP 529 or 503, an `overloaded_error`) after
    /// the retries: another model may still answer.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ProviderError::Failed {
                category, status, ..
            } => *category == FailureCategory::Overloaded || *status == Some(503),
            ProviderError::Setup(_)
            | ProviderError::Protocol(_)
            | ProviderError::ScriptExhausted(_) => false,
        }
    }
}

/// The providers tollgate speaks to. An enum, not a trait object: the set is closed and
/// each request is one `match`.
#[derive(Debug)]
pub enum Provider {
    Scripted(ScriptedModel),
    Anthropic(AnthropicModel),
    OpenAi(OpenAiModel),
}

/// A provider's resolved settings: what `Provider::new` builds from (the key already read
/// from the environment, the base URL chosen).
#[derive(Debug, Clone)]
pub enum ProviderConfig {
    /// The replies, in order: tests and offline demos.
    Scripted(ScriptedTurns),
    Anthropic {
        http: HttpSettings,
        name: String,
        thinking_budget: Option<u32>,
        /// A cloud platform serving the model; `None`: Anthropic's API.
        platform: Option<cloud::Platform>,
    },
    OpenAi {
        http: HttpSettings,
        name: String,
        streaming: Streaming,
        /// Sent as `reasoning_effort`.
        effort: Option<Effort>,
        /// Azure OpenAI with Entra tokens; `None`: the key, if any, as a bearer token.
        platform: Option<cloud::Platform>,
    },
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Result<Provider, ProviderError> {
        Ok(match config {
            ProviderConfig::Scripted(script) => Provider::Scripted(ScriptedModel::new(script)),
            ProviderConfig::Anthropic {
                http,
                name,
                thinking_budget,
                platform,
            } => Provider::Anthropic(AnthropicModel::new(http, name, thinking_budget, platform)?),
            ProviderConfig::OpenAi {
                http,
                name,
                streaming,
                effort,
                platform,
            } => Provider::OpenAi(OpenAiModel::new(http, name, streaming, effort, platform)?),
        })
    }

    /// One request. Retries happen inside and are announced on `events` as they start.
    pub async fn complete(
        &mut self,
        request: &ModelRequest<'_>,
        events: &EventSink,
    ) -> Result<ModelResponse, ProviderError> {
        let started = std::time::Instant::now();
        let provider = self.kind();
        tracing::info!(
            provider,
            messages = request.messages.len(),
            tools = request.tools.len(),
            max_tokens = request.max_tokens,
            "provider request"
        );
        let result = match self {
            Provider::Scripted(model) => model.complete(request),
            Provider::Anthropic(model) => model.complete(request, events).await,
            Provider::OpenAi(model) => model.complete(request, events).await,
        };
        let elapsed_ms = started.elapsed().as_millis();
        match &result {
            Ok(response) => tracing::info!(
                provider,
                elapsed_ms,
                stop_reason = %crate::config::serde_name(&response.stop_reason),
                input_tokens = response.usage.tokens().input_tokens,
                output_tokens = response.usage.tokens().output_tokens,
                estimated = response.usage.is_estimated(),
                "provider response"
            ),
            Err(err) => tracing::info!(provider, elapsed_ms, "provider request failed: {err}"),
        }
        result
    }

    /// A resumed run: the scripted model answers from its turn after the `responses` it
    /// gave before (recorded in the transcript); real models need no such place.
    pub fn resume_script(&mut self, responses: usize) {
        if let Provider::Scripted(model) = self {
            model.skip(responses);
        }
    }

    /// Sends every later request to model `name` of the same provider (a fallback). The
    /// scripted model has no models to switch between.
    pub fn switch_model(&mut self, name: &str) {
        match self {
            Provider::Scripted(_) => {}
            Provider::Anthropic(model) => model.model = name.to_string(),
            Provider::OpenAi(model) => model.model = name.to_string(),
        }
    }

    /// The provider's name, for log lines.
    fn kind(&self) -> &'static str {
        match self {
            Provider::Scripted(_) => "scripted",
            Provider::Anthropic(_) => "anthropic",
            Provider::OpenAi(_) => "openai",
        }
    }
}
