//! Task files (YAML, version 1): what to ask the model, with which model, mode, policy,
//! tools, limits and checks. Parsed and validated once; errors name file:line:column.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::base::{DEFAULT_MAX_PARALLEL_TOOLS, normalize_lexically};
use crate::config::{self, ConfigError};
use crate::ledger::{LedgerConfig, LedgerScope, MAX_MAX_ENTRIES};
use crate::model::pricing::PriceSource;
use crate::model::{Effort, EffortApi, Pricing, RetryPolicy, ScriptedTurns, Streaming, Timeouts};
use crate::policy::{PermissionMode, PermissionsBlock, Policy, PolicyOrigin, ToolName};
use crate::settings::{McpServerSpec, McpServersBlock, mcp_servers};
use crate::tools::{default_tools, implemented_builtins};
pub use fail_on::{FailOn, FailOnSet};

mod fail_on;

pub const DEFAULT_MAX_TURNS: u32 = 50;
/// A sub-agent's own turns (`subagents.max_turns`): a focused job, so fewer than the run's.
pub const DEFAULT_SUBAGENT_MAX_TURNS: u32 = 20;
/// Agent calls one model turn may make (`subagents.max_per_turn`); the calls past it get an
/// error result instead of a sub-agent, so one response cannot multiply the run's requests.
pub const DEFAULT_SUBAGENT_MAX_PER_TURN: u32 = 3;
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 600;

/// The most each knob of a task may be, checked at load (a larger value is a config error
/// with its file:line:col, not a deadline past what a clock holds). Generous on purpose:
/// each is far past any real use, so only a typo or a hostile file meets it.
pub mod maxima {
    use std::time::Duration;

    const DAY: u64 = 86_400;
    /// `model.timeouts.connect`, `first_event`, `idle` and `request`.
    pub const MODEL_TIMEOUT: Duration = Duration::from_secs(DAY);
    /// `model.retries.base_delay` and `max_delay`.
    pub const RETRY_DELAY: Duration = Duration::from_secs(3600);
    /// `model.retries.max`.
    pub const PROVIDER_RETRIES: u32 = 100;
    /// `limits.timeout`: a week of wall clock.
    pub const RUN_TIMEOUT: Duration = Duration::from_secs(7 * DAY);
    /// `limits.tool_timeout` and a check's `timeout`.
    pub const TOOL_TIMEOUT: Duration = Duration::from_secs(DAY);
    /// A check's `retry.max_attempts`.
    pub const CHECK_ATTEMPTS: u32 = 100;
    /// `limits.max_parallel_tools`.
    pub const PARALLEL_TOOLS: u64 = 1024;
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    version: Spanned<u32>,
    name: String,
    prompt: Spanned<String>,
    model: ModelFile,
    mode: Option<PermissionMode>,
    policy: Option<String>,
    permissions: Option<PermissionsBlock>,
    workdir: Option<Spanned<String>>,
    tools: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    checks: Vec<CheckFile>,
    fail_on: Option<Vec<FailOn>>,
    #[serde(default)]
    redact_env: Vec<String>,
    /// Tools offered only by name until ToolSearch loads them (S7), besides the default ones.
    deferred_tools: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    reminders: RemindersFile,
    /// MCP servers this task starts (the shape of `.mcp.json`'s `mcpServers`).
    mcp_servers: Option<McpServersBlock>,
    /// Folders of skills (or skill folders), besides the workdir's `skills/`.
    skills: Option<Vec<Spanned<String>>>,
    /// Agent files (or folders of them), besides the workdir's `.claude/agents/`.
    agents: Option<Vec<Spanned<String>>>,
    /// Local plugin folders (Claude Code's layout) whose parts the run uses.
    plugins: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    subagents: SubagentsFile,
    /// The prompt's parameters: `{{ NAME }}` placeholders, typed, with defaults.
    params: Option<std::collections::BTreeMap<String, Spanned<ParamFile>>>,
    /// A JSON Schema the final answer must satisfy: inline, or a file's path.
    output_schema: Option<Spanned<serde_json::Value>>,
    /// Answers the model may give before one is valid against `output_schema`.
    output_schema_attempts: Option<Spanned<u32>>,
    /// Text added at the end of tollgate's system prompt.
    append_system_prompt: Option<String>,
    /// `false`: AGENTS.md and CLAUDE.md are not read.
    memory: Option<bool>,
    #[serde(default)]
    compaction: CompactionFile,
    /// What the effect ledger measures around each call.
    #[serde(default)]
    effects: EffectsFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EffectsFile {
    scope: Option<LedgerScope>,
    max_entries: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactionFile {
    enabled: Option<bool>,
    /// The share of the context window past which the older turns are summarised.
    threshold: Option<Spanned<f64>>,
    /// Model turns (assistant messages) kept as they are.
    keep_recent: Option<Spanned<u32>>,
    /// Tokens; overrides the window the table knows for the model.
    context_window: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamFile {
    #[serde(rename = "type", default)]
    kind: ParamType,
    default: Option<serde_json::Value>,
    required: Option<bool>,
    #[serde(default)]
    description: Option<String>,
}

/// What a parameter's value must be; every value reaches the prompt as text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    #[default]
    String,
    Integer,
    Number,
    Boolean,
}

impl ParamType {
    /// Whether `value` is one of this type, as it would be written on the command line.
    pub fn accepts(self, value: &str) -> bool {
        match self {
            ParamType::String => true,
            ParamType::Integer => value.trim().parse::<i64>().is_ok(),
            ParamType::Number => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
            ParamType::Boolean => matches!(value.trim(), "true" | "false"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
        }
    }
}

/// A declared parameter of the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamType,
    /// The default, as text.
    pub default: Option<String>,
    /// A required parameter has no default and must be given.
    pub required: bool,
    pub description: Option<String>,
    /// Where the parameter is declared (line, column).
    pub at: (u64, u64),
}

/// The JSON Schema the final answer must satisfy, checked to compile at load.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    pub schema: serde_json::Value,
    /// `inline` or the file it came from, for the transcript.
    pub source: String,
}

impl OutputSchema {
    /// Reads and compiles a schema file (`--output-schema`).
    pub fn from_file(path: &Path) -> Result<OutputSchema, ConfigError> {
        let text =
            crate::input_file::read_text(path, crate::input_file::Input::config("output schema"))
                .map_err(|err| ConfigError::whole_file(path, err.to_string()))?;
        let schema: serde_json::Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(&text).map_err(|err| {
                ConfigError::new(
                    path,
                    err.line() as u64,
                    err.column() as u64,
                    format!("the output schema is not JSON: {err}"),
                )
                .with_source(path, &text)
            })?
        } else {
            config::parse(&text, path).map_err(|err| err.with_source(path, &text))?
        };
        Self::compiled(schema, path.display().to_string())
            .map_err(|why| ConfigError::whole_file(path, why))
    }

    /// The schema, once it is known to compile.
    pub fn compiled(schema: serde_json::Value, source: String) -> Result<OutputSchema, String> {
        if !schema.is_object() && !schema.is_boolean() {
            return Err("an output schema is a JSON Schema object".into());
        }
        jsonschema::validator_for(&schema)
            .map_err(|err| format!("the output schema is not a valid JSON Schema: {err}"))?;
        Ok(OutputSchema { schema, source })
    }
}

/// Answers the model may give before one is valid against `output_schema` (the first and
/// the retries after the validator's errors were fed back).
pub const DEFAULT_OUTPUT_SCHEMA_ATTEMPTS: u32 = 3;
/// The most `output_schema_attempts` may be.
pub const MAX_OUTPUT_SCHEMA_ATTEMPTS: u32 = 10;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubagentsFile {
    max_turns: Option<Spanned<u32>>,
    max_per_turn: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemindersFile {
    full_every: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    provider: Spanned<ProviderKind>,
    name: Option<Spanned<String>>,
    max_tokens: Option<Spanned<u32>>,
    script: Option<ScriptedTurns>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    thinking_budget: Option<Spanned<u32>>,
    /// Reasoning effort, mapped to the provider's own setting (`model::Effort`).
    effort: Option<Spanned<String>>,
    /// A cloud platform serving the provider's models, and its region.
    platform: Option<Spanned<Platform>>,
    region: Option<Spanned<String>>,
    /// Vertex AI's Google Cloud project.
    project: Option<Spanned<String>>,
    pricing: Option<Pricing>,
    timeouts: Option<TimeoutsFile>,
    retries: Option<RetriesFile>,
    /// Another model of the same provider, for the rest of the run once this one is
    /// overloaded or unavailable after its retries.
    fallback: Option<Spanned<String>>,
    /// `true`, `false` or `auto` (OpenAI-compatible servers only).
    stream: Option<Spanned<StreamFile>>,
}

/// `model.stream` as written: a boolean, or a word (only `auto` is one).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StreamFile {
    Flag(bool),
    Word(String),
}

/// Seconds; fractions allowed (tests use milliseconds).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsFile {
    connect: Option<Spanned<f64>>,
    first_event: Option<Spanned<f64>>,
    idle: Option<Spanned<f64>>,
    request: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetriesFile {
    max: Option<Spanned<u32>>,
    /// Seconds.
    base_delay: Option<Spanned<f64>>,
    /// Seconds.
    max_delay: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_turns: Option<Spanned<u32>>,
    max_cost_usd: Option<Spanned<f64>>,
    max_input_tokens: Option<Spanned<u64>>,
    max_output_tokens: Option<Spanned<u64>>,
    /// Seconds of wall clock for the whole run.
    timeout: Option<Spanned<f64>>,
    /// Seconds for one tool call.
    tool_timeout: Option<Spanned<f64>>,
    max_denials: Option<Spanned<u32>>,
    max_consecutive_denials: Option<Spanned<u32>>,
    max_parallel_tools: Option<Spanned<u64>>,
    max_classifier_denials: Option<Spanned<u32>>,
    max_consecutive_classifier_denials: Option<Spanned<u32>>,
    /// Characters of tool results one user message may carry (S8).
    message_result_chars: Option<Spanned<u64>>,
    /// Per tool: past this many characters a result is offloaded to a file (S8).
    max_result_chars: Option<std::collections::BTreeMap<String, Spanned<u64>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckFile {
    name: Spanned<String>,
    run: String,
    #[serde(default)]
    expect_exit: i32,
    /// Seconds.
    timeout: Option<Spanned<u64>>,
    retry: Option<Spanned<RetryFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryFile {
    max_attempts: u32,
    #[serde(default)]
    feed_back: bool,
}

/// A cloud platform that serves a provider's models under its own identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Amazon Bedrock (Anthropic models), SigV4 with AWS credentials.
    Bedrock,
    /// Google Vertex AI (Anthropic models), Google OAuth tokens.
    Vertex,
    /// Microsoft Foundry (Anthropic models) or Azure OpenAI, Microsoft Entra tokens.
    Azure,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Bedrock => "bedrock",
            Platform::Vertex => "vertex",
            Platform::Azure => "azure",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Scripted,
    Anthropic,
    Openai,
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProviderKind::Scripted => "scripted",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub provider: ProviderKind,
    pub name: String,
    pub max_tokens: u32,
    /// The task's base URL; the environment's (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) and
    /// the vendor's apply when it is `None`.
    pub base_url: Option<String>,
    /// The variable holding the API key, when the task names one.
    pub api_key_env: Option<String>,
    /// Anthropic extended thinking: the budget in tokens.
    pub thinking_budget: Option<u32>,
    /// `model.effort` or `--effort`, checked against the provider (see [`ModelSpec::check_effort`]).
    pub effort: Option<Effort>,
    /// `model.platform`: a cloud platform serving the model; `None`, the vendor's API.
    pub platform: Option<Platform>,
    /// `model.region`: the platform's region (else its environment's, e.g. `AWS_REGION`).
    pub region: Option<String>,
    /// `model.project`: Vertex AI's project (else `ANTHROPIC_VERTEX_PROJECT_ID`).
    pub project: Option<String>,
    /// The task's `pricing:`; see `ModelSpec::pricing`.
    pub pricing_override: Option<Pricing>,
    pub timeouts: Timeouts,
    pub retries: RetryPolicy,
    /// `model.fallback`: the model that answers once this one is overloaded (`--fallback-model`
    /// overrides it).
    pub fallback: Option<String>,
    /// `model.stream` (`--stream` overrides it); the openai provider's only.
    pub stream: Streaming,
}

impl ModelSpec {
    /// `Ok` when the provider takes the effort (or none is set); else why not. Thinking is
    /// set by one of `effort` and `thinking_budget`, never both.
    pub fn check_effort(&self) -> Result<(), String> {
        let Some(effort) = self.effort else {
            return Ok(());
        };
        match self.provider {
            ProviderKind::Scripted => {
                Err("effort is for the anthropic and openai providers, not scripted".into())
            }
            ProviderKind::Openai => effort.check(EffortApi::OpenAi),
            ProviderKind::Anthropic if self.thinking_budget.is_some() => Err(
                "effort and thinking_budget both set Anthropic's thinking: give one of them".into(),
            ),
            ProviderKind::Anthropic => effort.check(EffortApi::Anthropic),
        }
    }

    /// Anthropic's thinking budget: `thinking_budget`, else the effort's.
    pub fn thinking(&self) -> Option<u32> {
        match self.provider {
            ProviderKind::Anthropic => self
                .thinking_budget
                .or_else(|| self.effort.and_then(Effort::thinking_budget)),
            ProviderKind::Openai | ProviderKind::Scripted => None,
        }
    }

    /// The `max_tokens` a request asks for. Anthropic counts thinking inside `max_tokens`,
    /// so an effort's budget is added to the task's (which stays the answer's own room);
    /// an explicit `thinking_budget` is already below `max_tokens`.
    pub fn request_max_tokens(&self) -> u32 {
        match (self.provider, self.thinking_budget, self.effort) {
            (ProviderKind::Anthropic, None, Some(effort)) => self
                .max_tokens
                .saturating_add(effort.thinking_budget().unwrap_or(0)),
            _ => self.max_tokens,
        }
    }

    /// The task's price, else the price table's for the model's name (which `--model` may
    /// change after parsing); `None` when neither knows the model. The scripted model is free.
    pub fn pricing(&self) -> Option<Pricing> {
        self.price().0
    }

    /// [`pricing`](Self::pricing) and where it came from.
    pub fn price(&self) -> (Option<Pricing>, PriceSource) {
        match (self.provider, self.pricing_override) {
            (ProviderKind::Scripted, _) => (Some(Pricing::FREE), PriceSource::Free),
            (_, Some(pricing)) => (Some(pricing), PriceSource::Task),
            (_, None) => PriceSource::of_table(&self.name),
        }
    }

    /// The variable the API key is read from, and whether the run needs it. A local
    /// OpenAI-compatible server (a `base_url` and no `api_key_env`) may need no key.
    pub fn api_key_variable(&self) -> Option<(&str, bool)> {
        match (self.provider, self.api_key_env.as_deref()) {
            (ProviderKind::Scripted, _) => None,
            // A platform authenticates with its own credentials, not an API key.
            _ if self.platform.is_some() => None,
            (_, Some(name)) => Some((name, true)),
            (ProviderKind::Anthropic, None) => Some(("ANTHROPIC_API_KEY", true)),
            (ProviderKind::Openai, None) => Some(("OPENAI_API_KEY", self.base_url.is_none())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_turns: u32,
    pub max_cost_usd: Option<f64>,
    /// Prompt tokens over the run, cached or not.
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    /// Wall clock for the whole run.
    pub timeout: Option<Duration>,
    /// Wall clock for one tool call.
    pub tool_timeout: Option<Duration>,
    /// Refused calls in the whole run before it stops with exit 3, checked after each call;
    /// unset, [`DEFAULT_MAX_DENIALS`] applies between turns.
    pub max_denials: Option<u32>,
    /// Refused calls in a row before it stops with exit 3, checked after each call; unset,
    /// [`DEFAULT_MAX_CONSECUTIVE_DENIALS`] applies between turns.
    pub max_consecutive_denials: Option<u32>,
    /// Concurrency-safe calls of one response that may run at once (S6).
    pub max_parallel_tools: usize,
    /// Auto mode: classifier denials in the whole run before it stops with exit 3.
    pub max_classifier_denials: u32,
    /// Auto mode: classifier denials in a row before it stops with exit 3.
    pub max_consecutive_classifier_denials: u32,
    /// Characters of tool results one user message may carry; past it the largest are
    /// replaced by previews (S8).
    pub message_result_chars: usize,
}

/// Every mode's headless contract: a model that keeps retrying refused calls is going
/// nowhere, so the run stops (exit 3) instead of burning turns until `max_turns`. The
/// defaults are checked before each request, not after each call, so one response's batch of
/// calls — a sweep the gate refuses call by call — is always answered whole.
pub const DEFAULT_MAX_DENIALS: u32 = 50;
pub const DEFAULT_MAX_CONSECUTIVE_DENIALS: u32 = 20;
/// Compaction starts when the next request would fill this share of the context window:
/// room is left for the answer and for the summary request itself.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// The model turns a compaction keeps whole, with their results.
pub const DEFAULT_COMPACTION_KEEP_RECENT: u32 = 4;

/// Auto mode's headless contract: a judge that keeps saying no ends the run, it never stalls.
pub const DEFAULT_MAX_CLASSIFIER_DENIALS: u32 = 20;
pub const DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS: u32 = 3;

/// The per-message budget when the task sets none: about 50k tokens of results in one turn.
pub const DEFAULT_MESSAGE_RESULT_CHARS: usize = 200_000;
/// A TodoWrite snapshot is sent in full every this many reminders (S3).
pub const DEFAULT_REMINDERS_FULL_EVERY: u32 = 5;

/// Built-ins that are never deferred: the model needs them from the first turn, and
/// ToolSearch is how the others are found.
pub const NEVER_DEFERRED: [ToolName; 7] = [
    ToolName::Bash,
    ToolName::Read,
    ToolName::Edit,
    ToolName::Write,
    ToolName::Glob,
    ToolName::Grep,
    ToolName::ToolSearch,
];

/// Built-ins deferred in every task: rarely needed, so until ToolSearch loads one it costs
/// only a line of the system prompt, not its schema in every request (S7).
pub const DEFERRED_BY_DEFAULT: [ToolName; 1] = [ToolName::WebFetch];

/// A command the task author runs after the agent stops; not gated (it is the author's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub run: String,
    pub expect_exit: i32,
    pub timeout: Duration,
    /// Line of the check's `name:` in the task file, so reports can point at it.
    pub line: u64,
    pub retry: Retry,
}

/// How often a failing check is tried. `feed_back`: the failure goes to the model as a new
/// user message and the checks run again when it stops; otherwise the check alone is re-run
/// (a flaky command), up to `max_attempts` in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub max_attempts: u32,
    pub feed_back: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max_attempts: 1,
            feed_back: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub file: PathBuf,
    pub name: String,
    /// The prompt as written, its placeholders not yet filled (the session fills them).
    pub prompt: String,
    /// The file line the prompt's text starts on, for a placeholder's error.
    pub prompt_line: u64,
    pub model: ModelSpec,
    /// `model.script:`, the scripted provider's replies: `Some` exactly when the provider
    /// is `scripted`.
    pub script: Option<ScriptedTurns>,
    pub mode: Option<PermissionMode>,
    /// Resolved against the task file's folder.
    pub policy: Option<PathBuf>,
    /// The task's own `permissions:` block; it ranks below the managed policy and the
    /// command line, and a managed-only policy ignores its allow and ask rules.
    pub permissions: Option<Policy>,
    /// Resolved against the task file's folder.
    pub workdir: Option<PathBuf>,
    /// Where `workdir:` is written (line, column), for an error about the folder.
    pub workdir_at: Option<(u64, u64)>,
    pub tools: Vec<ToolName>,
    /// Whether `tools:` was written: a task that names its tools gets each of them, while
    /// the default set leaves out a tool no call of which could be allowed.
    pub tools_named: bool,
    pub limits: Limits,
    pub checks: Vec<Check>,
    /// What turns into a non-zero exit; `--fail-on` overrides it.
    pub fail_on: FailOnSet,
    /// Names of environment variables whose values are redacted from every output, on top
    /// of those whose names look secret.
    pub redact_env: Vec<String>,
    /// `limits.max_result_chars`: per-tool offload thresholds that replace the tools' own.
    pub max_result_chars: Vec<(ToolName, usize)>,
    /// Tools offered by name only until ToolSearch loads them: the defaults and the task's.
    pub deferred_tools: Vec<ToolName>,
    /// `reminders.full_every`: a TodoWrite reminder is the full list every this many times.
    pub reminders_full_every: u32,
    /// The task's own MCP servers (`mcp_servers:`).
    pub mcp_servers: Vec<McpServerSpec>,
    /// `skills:`, resolved against the task file's folder.
    pub skills: Vec<PathBuf>,
    /// `agents:`, resolved against the task file's folder.
    pub agents: Vec<PathBuf>,
    /// `plugins:`, resolved against the task file's folder.
    pub plugins: Vec<PathBuf>,
    /// `subagents.max_turns`: the turns of each sub-agent's own conversation.
    pub subagent_max_turns: u32,
    /// `subagents.max_per_turn`: Agent calls one turn may make.
    pub subagent_max_per_turn: u32,
    /// `params:`, in name order.
    pub params: Vec<Param>,
    pub output_schema: Option<OutputSchema>,
    pub output_schema_attempts: u32,
    pub append_system_prompt: Option<String>,
    /// Whether AGENTS.md / CLAUDE.md are read (`memory:`, default true).
    pub memory: bool,
    pub compaction: Compaction,
    /// `effects:`: what the effect ledger measures (default: the whole workspace).
    pub effects: LedgerConfig,
}

/// `compaction:`: when and how the history is summarised to fit the model's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compaction {
    pub enabled: bool,
    /// In (0, 1]: the share of the window the next request may fill before compaction.
    pub threshold: f64,
    /// At least 1: the most recent model turns kept as they are.
    pub keep_recent: u32,
    /// The task's window in tokens; `None` leaves it to the table of known models.
    pub context_window: Option<u64>,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            enabled: true,
            threshold: DEFAULT_COMPACTION_THRESHOLD,
            keep_recent: DEFAULT_COMPACTION_KEEP_RECENT,
            context_window: None,
        }
    }
}

impl Task {
    /// `file` names the task in messages; `dir` (its folder, absolute) resolves relative
    /// paths; `home` expands `~/` in its permissions.
    pub fn parse(
        text: &str,
        file: &Path,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Task, ConfigError> {
        Self::parse_text(text, file, dir, home).map_err(|err| err.with_source(file, text))
    }

    fn parse_text(
        text: &str,
        file: &Path,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Task, ConfigError> {
        let mut raw: TaskFile = config::parse(text, file).map_err(|err| batch_hint(err, file))?;
        let at =
            |line: u64, column: u64, message: String| ConfigError::new(file, line, column, message);
        if raw.version.value != 1 {
            let loc = raw.version.referenced;
            return Err(at(
                loc.line(),
                loc.column(),
                format!(
                    "unsupported task version {}; this tollgate reads version 1",
                    raw.version.value
                ),
            ));
        }
        let (model, script) = model_spec(raw.model, &at)?;
        let tools_named = raw.tools.is_some();
        let tools = match raw.tools {
            None => default_tools(),
            Some(names) => names
                .into_iter()
                .map(|spanned| {
                    let loc = spanned.referenced;
                    ToolName::parse(&spanned.value)
                        .filter(|name| implemented_builtins().contains(name))
                        .ok_or_else(|| {
                            unknown_tool(
                                at(
                                    loc.line(),
                                    loc.column(),
                                    format!("unknown tool `{}`", spanned.value),
                                ),
                                &spanned.value,
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let max_result_chars = result_thresholds(raw.limits.max_result_chars.take(), &at)?;
        let limits = limits(raw.limits, &model, &at)?;
        let mut deferred_tools = DEFERRED_BY_DEFAULT.to_vec();
        for spanned in raw.deferred_tools.unwrap_or_default() {
            let name = ToolName::parse(&spanned.value)
                .filter(|name| implemented_builtins().contains(name))
                .ok_or_else(|| {
                    unknown_tool(
                        located(&spanned, &at, format!("unknown tool `{}`", spanned.value)),
                        &spanned.value,
                    )
                })?;
            if NEVER_DEFERRED.contains(&name) {
                return Err(located(
                    &spanned,
                    &at,
                    format!("{name} is never deferred: the model needs it from the first turn"),
                ));
            }
            if !deferred_tools.contains(&name) {
                deferred_tools.push(name);
            }
        }
        let reminders_full_every = match raw.reminders.full_every {
            None => DEFAULT_REMINDERS_FULL_EVERY,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "reminders.full_every must be at least 1".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let subagent_max_turns = match raw.subagents.max_turns {
            None => DEFAULT_SUBAGENT_MAX_TURNS,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "subagents.max_turns must be at least 1".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let subagent_max_per_turn = match raw.subagents.max_per_turn {
            None => DEFAULT_SUBAGENT_MAX_PER_TURN,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "subagents.max_per_turn must be at least 1 (remove Agent from `tools` to offer none)".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let compaction = compaction(raw.compaction, &at)?;
        let effects = effects(raw.effects, &at)?;
        let raw_skills = raw.skills.unwrap_or_default();
        if let Some(first) = raw_skills.first()
            && !tools.contains(&ToolName::Skill)
        {
            return Err(located(
                first,
                &at,
                "skills: needs the Skill tool: add Skill to tools:".into(),
            ));
        }
        let skills = raw_skills
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let raw_agents = raw.agents.unwrap_or_default();
        if let Some(first) = raw_agents.first()
            && !tools.contains(&ToolName::Agent)
        {
            return Err(located(
                first,
                &at,
                "agents: needs the Agent tool: add Agent to tools:".into(),
            ));
        }
        let agents = raw_agents
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let plugins = raw
            .plugins
            .unwrap_or_default()
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let mut checks: Vec<Check> = Vec::new();
        for check in raw.checks {
            if checks.iter().any(|seen| seen.name == check.name.value) {
                let loc = check.name.referenced;
                return Err(at(
                    loc.line(),
                    loc.column(),
                    format!("duplicate check name `{}`", check.name.value),
                ));
            }
            let retry = match check.retry {
                None => Retry::default(),
                Some(spanned)
                    if spanned.value.max_attempts == 0
                        || spanned.value.max_attempts > maxima::CHECK_ATTEMPTS =>
                {
                    let loc = spanned.referenced;
                    return Err(at(
                        loc.line(),
                        loc.column(),
                        format!(
                            "retry.max_attempts must be from 1 to {}",
                            maxima::CHECK_ATTEMPTS
                        ),
                    ));
                }
                Some(spanned) => Retry {
                    max_attempts: spanned.value.max_attempts,
                    feed_back: spanned.value.feed_back,
                },
            };
            checks.push(Check {
                line: check.name.referenced.line(),
                name: check.name.value,
                run: check.run,
                expect_exit: check.expect_exit,
                timeout: match check.timeout {
                    None => Duration::from_secs(DEFAULT_CHECK_TIMEOUT_SECS),
                    Some(spanned)
                        if spanned.value == 0 || spanned.value > maxima::TOOL_TIMEOUT.as_secs() =>
                    {
                        return Err(located(
                            &spanned,
                            &at,
                            format!(
                                "a check's timeout must be from 1 to {} seconds",
                                maxima::TOOL_TIMEOUT.as_secs()
                            ),
                        ));
                    }
                    Some(spanned) => Duration::from_secs(spanned.value),
                },
                retry,
            });
        }
        let permissions = raw
            .permissions
            .map(|block| Policy::from_block(block, PolicyOrigin { file, dir, home }))
            .transpose()?;
        let params = params(raw.params.unwrap_or_default(), &at)?;
        let output_schema = raw
            .output_schema
            .map(|spanned| output_schema(spanned, dir, &at))
            .transpose()?;
        let output_schema_attempts = match raw.output_schema_attempts {
            None => DEFAULT_OUTPUT_SCHEMA_ATTEMPTS,
            Some(spanned) if spanned.value == 0 || spanned.value > MAX_OUTPUT_SCHEMA_ATTEMPTS => {
                return Err(located(
                    &spanned,
                    &at,
                    format!(
                        "output_schema_attempts must be from 1 to {MAX_OUTPUT_SCHEMA_ATTEMPTS}"
                    ),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let prompt_line = prompt_first_line(text, &raw.prompt);
        Ok(Task {
            file: file.to_path_buf(),
            permissions,
            name: raw.name,
            prompt: raw.prompt.value,
            prompt_line,
            model,
            script,
            mode: raw.mode,
            policy: raw.policy.map(|p| normalize_lexically(&dir.join(p))),
            workdir_at: raw
                .workdir
                .as_ref()
                .map(|w| (w.referenced.line(), w.referenced.column())),
            workdir: raw.workdir.map(|w| normalize_lexically(&dir.join(w.value))),
            tools,
            tools_named,
            limits,
            checks,
            fail_on: raw
                .fail_on
                .map(FailOnSet::from_iter)
                .unwrap_or_else(FailOnSet::task_default),
            redact_env: raw.redact_env,
            max_result_chars,
            deferred_tools,
            reminders_full_every,
            mcp_servers: mcp_servers(raw.mcp_servers.unwrap_or_default(), file)?,
            skills,
            agents,
            plugins,
            subagent_max_turns,
            subagent_max_per_turn,
            params,
            output_schema,
            output_schema_attempts,
            append_system_prompt: raw.append_system_prompt,
            memory: raw.memory.unwrap_or(true),
            compaction,
            effects,
        })
    }
}

fn compaction(raw: CompactionFile, at: At<'_>) -> Result<Compaction, ConfigError> {
    let defaults = Compaction::default();
    let threshold = match raw.threshold {
        None => defaults.threshold,
        Some(spanned) if spanned.value > 0.0 && spanned.value <= 1.0 => spanned.value,
        Some(spanned) => {
            return Err(located(
                &spanned,
                at,
                "compaction.threshold must be a share of the context window, above 0 and at most 1"
                    .into(),
            ));
        }
    };
    let keep_recent = match raw.keep_recent {
        None => defaults.keep_recent,
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "compaction.keep_recent must be at least 1".into(),
            ));
        }
        Some(spanned) => spanned.value,
    };
    let context_window = match raw.context_window {
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "compaction.context_window must be at least 1 token".into(),
            ));
        }
        other => other.map(|spanned| spanned.value),
    };
    Ok(Compaction {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        threshold,
        keep_recent,
        context_window,
    })
}

fn effects(raw: EffectsFile, at: At<'_>) -> Result<LedgerConfig, ConfigError> {
    let defaults = LedgerConfig::default();
    let max_entries = match raw.max_entries {
        None => defaults.max_entries,
        Some(spanned) => match usize::try_from(spanned.value) {
            Ok(value) if (1..=MAX_MAX_ENTRIES).contains(&value) => value,
            _ => {
                return Err(located(
                    &spanned,
                    at,
                    format!("effects.max_entries must be from 1 to {MAX_MAX_ENTRIES}"),
                ));
            }
        },
    };
    Ok(LedgerConfig {
        scope: raw.scope.unwrap_or(defaults.scope),
        max_entries,
    })
}

/// The line the prompt's text starts on: the next one after a block scalar's `|` or `>`.
fn prompt_first_line(text: &str, prompt: &Spanned<String>) -> u64 {
    let loc = prompt.referenced;
    let line = loc.line();
    let rest = text
        .lines()
        .nth(usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX))
        .map(|source| {
            source
                .chars()
                .skip(usize::try_from(loc.column().saturating_sub(1)).unwrap_or(usize::MAX))
                .collect::<String>()
        })
        .unwrap_or_default();
    if rest.starts_with('|') || rest.starts_with('>') {
        line + 1
    } else {
        line
    }
}

/// `params:`: each name valid, each default of its type; a parameter with a default is
/// optional unless it says otherwise.
fn params(
    raw: std::collections::BTreeMap<String, Spanned<ParamFile>>,
    at: At<'_>,
) -> Result<Vec<Param>, ConfigError> {
    let mut params = Vec::new();
    for (name, spanned) in raw {
        crate::template::check_param_name(&name)
            .map_err(|why| located(&spanned, at, format!("params: {why}")))?;
        let at_param = (spanned.referenced.line(), spanned.referenced.column());
        let located = |message: String| at(at_param.0, at_param.1, message);
        let param = spanned.value;
        let default = match param.default {
            None => None,
            Some(serde_json::Value::String(text)) => Some(text),
            Some(value @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                Some(value.to_string())
            }
            Some(_) => {
                return Err(located(format!(
                    "params.{name}.default must be a string, a number or a boolean"
                )));
            }
        };
        if let Some(value) = &default
            && !param.kind.accepts(value)
        {
            return Err(located(format!(
                "params.{name}.default `{value}` is not a {}",
                param.kind.as_str()
            )));
        }
        params.push(Param {
            required: param.required.unwrap_or(default.is_none()),
            name,
            kind: param.kind,
            default,
            description: param.description,
            at: at_param,
        });
    }
    Ok(params)
}

/// `output_schema:`: a mapping is the schema itself, a string is a file (JSON or YAML)
/// relative to the task's folder.
fn output_schema(
    spanned: Spanned<serde_json::Value>,
    dir: &Path,
    at: At<'_>,
) -> Result<OutputSchema, ConfigError> {
    match &spanned.value {
        serde_json::Value::String(path) => {
            let path = normalize_lexically(&dir.join(path));
            OutputSchema::from_file(&path)
        }
        schema => OutputSchema::compiled(schema.clone(), "inline".into())
            .map_err(|why| located(&spanned, at, format!("output_schema: {why}"))),
    }
}

/// A batch task's own keys (`batch:`, `limits.batch_max_cost_usd`) in a task given to a
/// single run: name the command that reads them.
fn batch_hint(mut err: ConfigError, file: &Path) -> ConfigError {
    if matches!(
        err.unknown_key.as_deref(),
        Some("batch" | "batch_max_cost_usd")
    ) {
        err.message = format!(
            "`{}` is a batch task's key; `tollgate run` runs a single task",
            err.unknown_key.as_deref().unwrap_or_default()
        );
        err = err.with_hint(format!(
            "run a batch task over its repositories with `tollgate batch {} --repos FILE`",
            file.display()
        ));
    }
    err
}

/// The hint of an unknown name in `tools:`: the close built-in, else the list of them.
fn unknown_tool(err: ConfigError, given: &str) -> ConfigError {
    let names: Vec<String> = implemented_builtins()
        .iter()
        .map(ToString::to_string)
        .collect();
    let hint = match config::did_you_mean(given, names.iter().map(String::as_str)) {
        Some(close) => format!("did you mean `{close}`?"),
        None => format!("built-in tools are: {}", names.join(", ")),
    };
    err.with_hint(hint)
}

type At<'a> = &'a dyn Fn(u64, u64, String) -> ConfigError;

fn located<T>(spanned: &Spanned<T>, at: At<'_>, message: String) -> ConfigError {
    at(
        spanned.referenced.line(),
        spanned.referenced.column(),
        message,
    )
}

/// A positive, finite number of seconds, at most `max`.
fn seconds(
    value: Option<Spanned<f64>>,
    key: &str,
    max: Duration,
    at: At<'_>,
) -> Result<Option<Duration>, ConfigError> {
    let Some(spanned) = value else {
        return Ok(None);
    };
    Duration::try_from_secs_f64(spanned.value)
        .ok()
        .filter(|duration| !duration.is_zero() && *duration <= max)
        .map(Some)
        .ok_or_else(|| {
            located(
                &spanned,
                at,
                format!(
                    "{key} must be a positive number of seconds, at most {}",
                    max.as_secs()
                ),
            )
        })
}

/// The model's settings, and the scripted provider's replies when it is the one.
fn model_spec(
    raw: ModelFile,
    at: At<'_>,
) -> Result<(ModelSpec, Option<ScriptedTurns>), ConfigError> {
    let provider = raw.provider.value;
    let script = match (provider, raw.script) {
        (ProviderKind::Scripted, Some(script)) if !script.is_empty() => Some(script),
        (ProviderKind::Scripted, _) => {
            return Err(located(
                &raw.provider,
                at,
                "the scripted provider needs a non-empty `script:` (a list of assistant turns)"
                    .into(),
            ));
        }
        (other, Some(_)) => {
            return Err(located(
                &raw.provider,
                at,
                format!("`script:` is only for the scripted provider, not {other}"),
            ));
        }
        (_, None) => None,
    };
    let name = match (provider, raw.name) {
        (_, Some(name)) => name.value,
        (ProviderKind::Scripted, None) => provider.to_string(),
        (other, None) => {
            return Err(located(
                &raw.provider,
                at,
                format!(
                    "the {other} provider needs `name:` (the model, e.g. {})",
                    example_model(other)
                ),
            ));
        }
    };
    let max_tokens = match raw.max_tokens {
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "max_tokens must be at least 1".into(),
            ));
        }
        Some(spanned) => spanned.value,
        None => DEFAULT_MAX_TOKENS,
    };
    let real_only = |key: &str, line_of: Option<(u64, u64)>| match (provider, line_of) {
        (ProviderKind::Scripted, Some((line, column))) => Err(at(
            line,
            column,
            format!("`{key}:` is for the anthropic and openai providers, not scripted"),
        )),
        _ => Ok(()),
    };
    let position = |spanned: &Option<Spanned<String>>| {
        spanned
            .as_ref()
            .map(|s| (s.referenced.line(), s.referenced.column()))
    };
    real_only("base_url", position(&raw.base_url))?;
    real_only("fallback", position(&raw.fallback))?;
    let fallback = match raw.fallback {
        Some(spanned) if spanned.value.trim().is_empty() || spanned.value == name => {
            return Err(located(
                &spanned,
                at,
                "model.fallback must name another model of the same provider".into(),
            ));
        }
        other => other.map(|spanned| spanned.value),
    };
    real_only("api_key_env", position(&raw.api_key_env))?;
    let stream = match raw.stream {
        None => Streaming::Auto,
        Some(spanned) if provider != ProviderKind::Openai => {
            return Err(located(
                &spanned,
                at,
                "model.stream is for the openai provider (the others always stream)".into(),
            ));
        }
        Some(spanned) => match &spanned.value {
            StreamFile::Flag(true) => Streaming::Always,
            StreamFile::Flag(false) => Streaming::Never,
            StreamFile::Word(word) if word == "auto" => Streaming::Auto,
            StreamFile::Word(word) => {
                return Err(located(
                    &spanned,
                    at,
                    format!("model.stream must be true, false or auto, not `{word}`"),
                ));
            }
        },
    };
    let base_url = raw
        .base_url
        .map(|url| {
            let trimmed = url.value.trim_end_matches('/').to_string();
            if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
                Ok(trimmed)
            } else {
                Err(located(
                    &url,
                    at,
                    format!(
                        "base_url `{}` must start with http:// or https://",
                        url.value
                    ),
                ))
            }
        })
        .transpose()?;
    let api_key_env = raw
        .api_key_env
        .map(|name| {
            if !name.value.is_empty()
                && name
                    .value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                Ok(name.value)
            } else {
                Err(located(
                    &name,
                    at,
                    format!(
                        "api_key_env must name an environment variable, not `{}`",
                        name.value
                    ),
                ))
            }
        })
        .transpose()?;
    let thinking_budget = match raw.thinking_budget {
        None => None,
        Some(budget) if provider != ProviderKind::Anthropic => {
            return Err(located(
                &budget,
                at,
                "thinking_budget is for the anthropic provider".into(),
            ));
        }
        // The API's own bounds: at least 1024, and below max_tokens.
        Some(budget) if budget.value < 1024 || budget.value >= max_tokens => {
            return Err(located(
                &budget,
                at,
                format!(
                    "thinking_budget must be at least 1024 and below max_tokens ({max_tokens})"
                ),
            ));
        }
        Some(budget) => Some(budget.value),
    };
    let effort = raw
        .effort
        .as_ref()
        .map(|spanned| Effort::parse(&spanned.value).map_err(|err| located(spanned, at, err)))
        .transpose()?;
    let timeouts_file = raw.timeouts.unwrap_or_default();
    let defaults = Timeouts::default();
    let timeouts = Timeouts {
        connect: seconds(
            timeouts_file.connect,
            "timeouts.connect",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.connect),
        first_event: seconds(
            timeouts_file.first_event,
            "timeouts.first_event",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.first_event),
        idle: seconds(
            timeouts_file.idle,
            "timeouts.idle",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.idle),
        request: seconds(
            timeouts_file.request,
            "timeouts.request",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.request),
    };
    let retries_file = raw.retries.unwrap_or_default();
    let defaults = RetryPolicy::default();
    let retries = RetryPolicy {
        max: match retries_file.max {
            None => defaults.max,
            Some(spanned) if spanned.value > maxima::PROVIDER_RETRIES => {
                return Err(located(
                    &spanned,
                    at,
                    format!("retries.max must be at most {}", maxima::PROVIDER_RETRIES),
                ));
            }
            Some(spanned) => spanned.value,
        },
        base_delay: seconds(
            retries_file.base_delay,
            "retries.base_delay",
            maxima::RETRY_DELAY,
            at,
        )?
        .unwrap_or(defaults.base_delay),
        max_delay: seconds(
            retries_file.max_delay,
            "retries.max_delay",
            maxima::RETRY_DELAY,
            at,
        )?
        .unwrap_or(defaults.max_delay),
    };
    let model = ModelSpec {
        provider,
        name,
        max_tokens,
        base_url,
        api_key_env,
        thinking_budget,
        effort,
        platform: raw.platform.as_ref().map(|spanned| spanned.value),
        region: raw
            .region
            .as_ref()
            .map(|spanned| spanned.value.trim().to_string()),
        project: raw
            .project
            .as_ref()
            .map(|spanned| spanned.value.trim().to_string()),
        pricing_override: raw.pricing,
        timeouts,
        retries,
        fallback,
        stream,
    };
    if let Some(platform) = &raw.platform {
        let problem = match (platform.value, provider) {
            (Platform::Bedrock | Platform::Vertex, ProviderKind::Anthropic) => None,
            (Platform::Azure, ProviderKind::Anthropic | ProviderKind::Openai) => None,
            (Platform::Bedrock | Platform::Vertex, other) => Some(format!(
                "platform {} serves the anthropic provider's models, not {other}",
                platform.value.name()
            )),
            (Platform::Azure, other) => Some(format!(
                "platform azure serves the anthropic and openai providers' models, not {other}"
            )),
        };
        // Azure's endpoint is the resource's own; there is no default to fall back on.
        let problem = problem.or_else(|| {
            (platform.value == Platform::Azure && model.base_url.is_none()).then(|| {
                "platform azure needs model.base_url, the resource's endpoint: https://RESOURCE.services.ai.azure.com/anthropic (anthropic) or https://RESOURCE.openai.azure.com/openai/v1 (openai)".to_string()
            })
        });
        let problem = problem.or_else(|| {
            model.api_key_env.as_ref().map(|_| {
                format!(
                    "platform {} authenticates with its own credentials: drop api_key_env",
                    platform.value.name()
                )
            })
        });
        if let Some(problem) = problem {
            return Err(located(platform, at, problem));
        }
    }
    if let Some(region) = &raw.region
        && !matches!(
            raw.platform.as_ref().map(|spanned| spanned.value),
            Some(Platform::Bedrock | Platform::Vertex)
        )
    {
        return Err(located(
            region,
            at,
            "region is for a cloud platform: set platform (bedrock or vertex) too".into(),
        ));
    }
    if let Some(project) = &raw.project
        && raw.platform.as_ref().map(|spanned| spanned.value) != Some(Platform::Vertex)
    {
        return Err(located(
            project,
            at,
            "project is Vertex AI's: set platform: vertex too".into(),
        ));
    }
    if let (Err(err), Some(spanned)) = (model.check_effort(), &raw.effort) {
        return Err(located(spanned, at, err));
    }
    Ok((model, script))
}

fn example_model(provider: ProviderKind) -> &'static str {
    match provider {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Openai | ProviderKind::Scripted => "gpt-4.1",
    }
}

fn limits(raw: LimitsFile, model: &ModelSpec, at: At<'_>) -> Result<Limits, ConfigError> {
    let max_turns = match raw.max_turns {
        None => DEFAULT_MAX_TURNS,
        Some(spanned) if spanned.value == 0 => {
            return Err(located(&spanned, at, "max_turns must be at least 1".into()));
        }
        Some(spanned) => spanned.value,
    };
    let max_cost_usd = match raw.max_cost_usd {
        None => None,
        Some(spanned) if !(spanned.value.is_finite() && spanned.value > 0.0) => {
            return Err(located(
                &spanned,
                at,
                "max_cost_usd must be a positive number".into(),
            ));
        }
        // A budget that cannot be priced cannot be enforced; say so before spending.
        Some(spanned) if model.pricing().is_none() => {
            return Err(located(
                &spanned,
                at,
                format!(
                    "max_cost_usd needs a price for model `{}`, which the price table does not know; add model.pricing: {{input: …, output: …}} (USD per million tokens)",
                    model.name
                ),
            ));
        }
        Some(spanned) => Some(spanned.value),
    };
    let positive = |value: Option<Spanned<u64>>, key: &str| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map(|spanned| spanned.value)),
    };
    let at_least_one_if_set = |value: Option<Spanned<u32>>, key: &str| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map(|spanned| spanned.value)),
    };
    let at_least_one = |value: Option<Spanned<u32>>, key: &str, default: u32| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map_or(default, |spanned| spanned.value)),
    };
    Ok(Limits {
        max_turns,
        max_cost_usd,
        max_input_tokens: positive(raw.max_input_tokens, "max_input_tokens")?,
        max_output_tokens: positive(raw.max_output_tokens, "max_output_tokens")?,
        timeout: seconds(raw.timeout, "limits.timeout", maxima::RUN_TIMEOUT, at)?,
        tool_timeout: seconds(
            raw.tool_timeout,
            "limits.tool_timeout",
            maxima::TOOL_TIMEOUT,
            at,
        )?,
        max_denials: at_least_one_if_set(raw.max_denials, "max_denials")?,
        max_consecutive_denials: at_least_one_if_set(
            raw.max_consecutive_denials,
            "max_consecutive_denials",
        )?,
        max_parallel_tools: positive(
            bounded(
                raw.max_parallel_tools,
                "max_parallel_tools",
                maxima::PARALLEL_TOOLS,
                at,
            )?,
            "max_parallel_tools",
        )?
        .map_or(DEFAULT_MAX_PARALLEL_TOOLS, |max| {
            usize::try_from(max).unwrap_or(usize::MAX)
        }),
        max_classifier_denials: at_least_one(
            raw.max_classifier_denials,
            "max_classifier_denials",
            DEFAULT_MAX_CLASSIFIER_DENIALS,
        )?,
        max_consecutive_classifier_denials: at_least_one(
            raw.max_consecutive_classifier_denials,
            "max_consecutive_classifier_denials",
            DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS,
        )?,
        message_result_chars: positive(raw.message_result_chars, "message_result_chars")?
            .map_or(DEFAULT_MESSAGE_RESULT_CHARS, |max| {
                usize::try_from(max).unwrap_or(usize::MAX)
            }),
    })
}

/// `value` unless it is over `max`.
fn bounded(
    value: Option<Spanned<u64>>,
    key: &str,
    max: u64,
    at: At<'_>,
) -> Result<Option<Spanned<u64>>, ConfigError> {
    match value {
        Some(spanned) if spanned.value > max => Err(located(
            &spanned,
            at,
            format!("{key} must be at most {max}"),
        )),
        other => Ok(other),
    }
}

/// `limits.max_result_chars: {Bash: 50000}`. Read's results are never offloaded (offloading
/// them would send the model to Read the file again), so it takes no threshold.
fn result_thresholds(
    raw: Option<std::collections::BTreeMap<String, Spanned<u64>>>,
    at: At<'_>,
) -> Result<Vec<(ToolName, usize)>, ConfigError> {
    let mut thresholds = Vec::new();
    for (name, spanned) in raw.unwrap_or_default() {
        let tool = ToolName::parse(&name)
            .filter(|tool| implemented_builtins().contains(tool))
            .ok_or_else(|| {
                located(
                    &spanned,
                    at,
                    format!("limits.max_result_chars: unknown tool `{name}`"),
                )
            })?;
        if tool == ToolName::Read {
            return Err(located(
                &spanned,
                at,
                "limits.max_result_chars: Read is never offloaded; its own limits bound it".into(),
            ));
        }
        if spanned.value == 0 {
            return Err(located(
                &spanned,
                at,
                format!("limits.max_result_chars.{name} must be at least 1"),
            ));
        }
        thresholds.push((tool, usize::try_from(spanned.value).unwrap_or(usize::MAX)));
    }
    Ok(thresholds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScriptedBlock;

    const MINIMAL: &str = "version: 1\nname: t\nprompt: do it\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";

    const REAL: &str = "version: 1\nname: t\nprompt: do it\nmodel:\n  provider: openai\n  name: my-local-model\n  base_url: http://127.0.0.1:1/v1/\n";

    fn parse(text: &str) -> Result<Task, ConfigError> {
        Task::parse(text, Path::new("task.yaml"), Path::new("/tasks"), None)
    }

    #[test]
    fn agent_and_skill_are_named_to_be_had_and_skills_need_the_skill_tool() {
        let task = parse(MINIMAL).unwrap();
        assert!(!task.tools.contains(&ToolName::Agent));
        assert_eq!(task.subagent_max_turns, DEFAULT_SUBAGENT_MAX_TURNS);
        let task = parse(&format!(
            "{MINIMAL}tools: [Read, Agent, Skill]\nskills: [../team-skills]\nsubagents:\n  max_turns: 3\n"
        ))
        .unwrap();
        assert_eq!(task.skills, [PathBuf::from("/team-skills")]);
        assert_eq!(task.subagent_max_turns, 3);
        assert_eq!(task.subagent_max_per_turn, DEFAULT_SUBAGENT_MAX_PER_TURN);
        let err = parse(&format!("{MINIMAL}skills: [x]\n")).unwrap_err();
        assert_eq!(
            err.headline(),
            "task.yaml:8:10: skills: needs the Skill tool: add Skill to tools:"
        );
    }

    #[test]
    fn max_parallel_tools_is_at_least_one() {
        let task = parse(&format!("{MINIMAL}limits:\n  max_parallel_tools: 3\n")).unwrap();
        assert_eq!(task.limits.max_parallel_tools, 3);
        let err = parse(&format!("{MINIMAL}limits:\n  max_parallel_tools: 0\n")).unwrap_err();
        assert!(
            err.to_string()
                .contains("max_parallel_tools must be at least 1"),
            "{err}"
        );
    }

    #[test]
    fn economy_keys_parse_and_refuse_what_cannot_work() {
        let task = parse(&format!(
            "{MINIMAL}deferred_tools: [TodoWrite]\nreminders: {{full_every: 3}}\nlimits:\n  message_result_chars: 1000\n  max_result_chars: {{Bash: 500}}\n"
        ))
        .unwrap();
        assert_eq!(
            task.deferred_tools,
            [ToolName::WebFetch, ToolName::TodoWrite]
        );
        assert_eq!(task.reminders_full_every, 3);
        assert_eq!(task.limits.message_result_chars, 1000);
        assert_eq!(task.max_result_chars, [(ToolName::Bash, 500)]);
        let defaults = parse(MINIMAL).unwrap();
        assert_eq!(defaults.deferred_tools, [ToolName::WebFetch]);
        assert_eq!(
            defaults.limits.message_result_chars,
            DEFAULT_MESSAGE_RESULT_CHARS
        );
        // (the task's extra lines, what the error says)
        let refused = [
            ("deferred_tools: [Bash]\n", "Bash is never deferred"),
            ("deferred_tools: [Nope]\n", "unknown tool `Nope`"),
            (
                "reminders: {full_every: 0}\n",
                "full_every must be at least 1",
            ),
            (
                "limits: {max_result_chars: {Read: 10}}\n",
                "Read is never offloaded",
            ),
            (
                "limits: {max_result_chars: {Bash: 0}}\n",
                "max_result_chars.Bash must be at least 1",
            ),
            (
                "limits: {message_result_chars: 0}\n",
                "message_result_chars must be at least 1",
            ),
        ];
        for (extra, says) in refused {
            let err = parse(&format!("{MINIMAL}{extra}")).unwrap_err();
            assert!(err.to_string().contains(says), "{extra}: {err}");
        }
    }

    #[test]
    fn minimal_task_gets_defaults() {
        let task = parse(MINIMAL).unwrap();
        assert_eq!(task.limits.max_turns, DEFAULT_MAX_TURNS);
        assert_eq!(task.limits.max_parallel_tools, DEFAULT_MAX_PARALLEL_TOOLS);
        assert_eq!(task.tools, default_tools());
        assert_eq!(
            task.script,
            Some(ScriptedTurns(vec![vec![ScriptedBlock::Text(
                "done".into()
            )]]))
        );
        assert_eq!(task.mode, None);
    }

    #[test]
    fn full_task() {
        let task = parse(
            "version: 1\nname: t\nprompt: p\nmode: dontAsk\npolicy: ../p.yaml\nworkdir: ws\ntools: [Read, Bash]\nlimits:\n  max_turns: 3\nchecks:\n  - name: c\n    run: 'true'\n    expect_exit: 1\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Read, input: {file_path: a}}\n    - - text: ok\n",
        )
        .unwrap();
        assert_eq!(task.mode, Some(PermissionMode::DontAsk));
        assert_eq!(task.permissions, None);
        assert_eq!(task.policy, Some(PathBuf::from("/p.yaml")));
        assert_eq!(task.workdir, Some(PathBuf::from("/tasks/ws")));
        assert_eq!(task.tools, vec![ToolName::Read, ToolName::Bash]);
        assert_eq!(task.limits.max_turns, 3);
        assert_eq!(task.checks[0].expect_exit, 1);
    }

    #[test]
    fn real_providers_get_their_settings() {
        let task = parse(&format!(
            "{REAL}  api_key_env: LOCAL_KEY\n  pricing: {{input: 1, output: 2}}\n  timeouts: {{connect: 0.5, idle: 2}}\n  retries: {{max: 2, base_delay: 0.01}}\nlimits:\n  max_cost_usd: 0.5\n  max_output_tokens: 1000\n  timeout: 60\n  tool_timeout: 1.5\n"
        ))
        .unwrap();
        let model = &task.model;
        assert_eq!(model.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
        assert_eq!(model.stream, Streaming::Auto);
        for (written, stream) in [
            ("true", Streaming::Always),
            ("false", Streaming::Never),
            ("auto", Streaming::Auto),
        ] {
            let yaml = REAL.replace(
                "name: my-local-model",
                &format!("name: m\n  stream: {written}"),
            );
            assert_eq!(parse(&yaml).unwrap().model.stream, stream, "{written}");
        }
        assert_eq!(model.api_key_variable(), Some(("LOCAL_KEY", true)));
        assert_eq!(model.pricing().map(|p| p.output), Some(2.0));
        assert_eq!(model.timeouts.connect, Duration::from_millis(500));
        assert_eq!(model.timeouts.first_event, Timeouts::default().first_event);
        assert_eq!(model.retries.max, 2);
        assert_eq!(model.retries.base_delay, Duration::from_millis(10));
        assert_eq!(task.limits.max_cost_usd, Some(0.5));
        assert_eq!(task.limits.max_output_tokens, Some(1000));
        assert_eq!(task.limits.max_input_tokens, None);
        assert_eq!(task.limits.timeout, Some(Duration::from_secs(60)));
        assert_eq!(task.limits.tool_timeout, Some(Duration::from_millis(1500)));

        let local = parse(REAL).unwrap();
        assert_eq!(
            local.model.api_key_variable(),
            Some(("OPENAI_API_KEY", false))
        );
        assert_eq!(local.model.pricing(), None);
        let claude = parse(
            "version: 1\nname: t\nprompt: p\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5-20250929\n",
        )
        .unwrap();
        assert_eq!(
            claude.model.api_key_variable(),
            Some(("ANTHROPIC_API_KEY", true))
        );
        assert_eq!(claude.model.pricing().map(|p| p.input), Some(3.0));
        assert_eq!(parse(MINIMAL).unwrap().model.pricing(), Some(Pricing::FREE));
    }

    #[test]
    fn fail_on_retry_and_redact_env() {
        let task = parse(&format!(
            "{MINIMAL}fail_on: [check, denial]\nredact_env: [DB_URL]\nchecks:\n  - name: tests\n    run: 'true'\n    retry: {{max_attempts: 3, feed_back: true}}\n  - name: lint\n    run: 'true'\n"
        ))
        .unwrap();
        assert_eq!(task.fail_on.kinds(), [FailOn::Denial, FailOn::Check]);
        assert_eq!(task.redact_env, ["DB_URL"]);
        assert_eq!(
            task.checks[0].retry,
            Retry {
                max_attempts: 3,
                feed_back: true
            }
        );
        assert_eq!(task.checks[0].line, 11);
        assert_eq!(task.checks[1].retry, Retry::default());
        assert_eq!(parse(MINIMAL).unwrap().fail_on, FailOnSet::task_default());
        let none = parse(&format!("{MINIMAL}fail_on: []\n")).unwrap();
        assert_eq!(none.fail_on, FailOnSet::none());
    }

    #[test]
    fn permissions_block_becomes_a_policy() {
        let task = parse(&format!(
            "{MINIMAL}permissions:\n  allow: [Bash]\n  deny: ['Bash(rm:*)']\n"
        ))
        .unwrap();
        let permissions = task.permissions.unwrap();
        assert_eq!(permissions.rules.len(), 2);
        assert_eq!(permissions.rules[0].source.line, 10);
        let err = parse(&format!("{MINIMAL}permissions:\n  allow: ['Bash(']\n")).unwrap_err();
        assert_eq!(err.line, 9);
    }

    #[test]
    fn errors_are_located() {
        let cases = [
            (
                MINIMAL.replace("version: 1", "version: 2"),
                1,
                "unsupported task version",
            ),
            (format!("{MINIMAL}bogus: 1\n"), 8, "unknown field `bogus`"),
            (
                MINIMAL.replace("prompt: do it\n", ""),
                0,
                "missing field `prompt`",
            ),
            (format!("{MINIMAL}mode: yolo\n"), 8, "unknown value"),
            (
                format!("{MINIMAL}tools: [Read, Nope]\n"),
                8,
                "unknown tool `Nope`",
            ),
            (
                MINIMAL
                    .replace("provider: scripted", "provider: anthropic")
                    .replace("  script:\n    - - text: done\n", ""),
                5,
                "needs `name:`",
            ),
            (
                MINIMAL.replace(
                    "provider: scripted",
                    "provider: scripted\n  base_url: http://x",
                ),
                6,
                "not scripted",
            ),
            (
                MINIMAL.replace(
                    "provider: scripted",
                    "provider: scripted\n  fallback: other",
                ),
                6,
                "not scripted",
            ),
            (
                REAL.replace("name: my-local-model", "name: m\n  fallback: m"),
                7,
                "must name another model",
            ),
            (
                REAL.replace("name: my-local-model", "name: m\n  stream: maybe"),
                7,
                "model.stream must be true, false or auto, not `maybe`",
            ),
            (
                MINIMAL.replace("provider: scripted", "provider: scripted\n  stream: false"),
                6,
                "model.stream is for the openai provider",
            ),
            (
                format!("{MINIMAL}limits:\n  max_denials: 0\n"),
                9,
                "max_denials must be at least 1",
            ),
            (
                format!("{MINIMAL}limits:\n  timeout: -1\n"),
                9,
                "positive number of seconds",
            ),
            (
                format!("{REAL}limits:\n  max_cost_usd: 1\n"),
                9,
                "does not know",
            ),
            (
                REAL.replace("name: my-local-model", "name: m\n  thinking_budget: 10"),
                7,
                "thinking_budget is for the anthropic provider",
            ),
            (
                format!("{REAL}  timeouts: {{idle: 0}}\n"),
                8,
                "timeouts.idle must be a positive",
            ),
            (
                format!("{REAL}  retries: {{maximum: 3}}\n"),
                8,
                "unknown field `maximum`",
            ),
            (
                MINIMAL.replace("text: done", "txt: done"),
                7,
                "unknown value",
            ),
            (
                format!("{MINIMAL}limits:\n  max_turns: 0\n"),
                9,
                "at least 1",
            ),
            (format!("{MINIMAL}fail_on: [denials]\n"), 8, "unknown value"),
            (
                format!(
                    "{MINIMAL}checks:\n  - name: c\n    run: x\n    retry: {{max_attempts: 0}}\n"
                ),
                11,
                "retry.max_attempts must be from 1 to 100",
            ),
            (
                format!(
                    "{MINIMAL}checks:\n  - name: c\n    run: x\n    retry: {{max_attempts: 4294967295}}\n"
                ),
                11,
                "retry.max_attempts must be from 1 to 100",
            ),
        ];
        for (text, line, message) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.message.contains(message), "{err} should say {message}");
            if line > 0 {
                assert_eq!(err.line, line, "{err}");
                assert!(err.column > 0, "{err}");
            }
        }
    }

    /// docs/reliability.md lists each knob's maximum as the loader checks it.
    #[test]
    fn the_docs_list_the_maxima() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reliability.md"))
                .unwrap();
        for row in [
            format!(
                "| `model.timeouts.connect`, `first_event`, `idle`, `request` | {} s |",
                maxima::MODEL_TIMEOUT.as_secs()
            ),
            format!(
                "| `model.retries.base_delay`, `max_delay` | {} s |",
                maxima::RETRY_DELAY.as_secs()
            ),
            format!("| `model.retries.max` | {} |", maxima::PROVIDER_RETRIES),
            format!("| `limits.timeout` | {} s |", maxima::RUN_TIMEOUT.as_secs()),
            format!(
                "| `limits.tool_timeout` | {} s |",
                maxima::TOOL_TIMEOUT.as_secs()
            ),
            format!(
                "| `limits.max_parallel_tools` | {} |",
                maxima::PARALLEL_TOOLS
            ),
            format!(
                "| a check's `timeout` | {} s |",
                maxima::TOOL_TIMEOUT.as_secs()
            ),
            format!(
                "| a check's `retry.max_attempts` | {} |",
                maxima::CHECK_ATTEMPTS
            ),
            format!(
                "| a hook's `timeout` (policy) | {} s |",
                crate::hooks::MAX_TIMEOUT_SECS
            ),
        ] {
            assert!(docs.contains(&row), "docs/reliability.md lacks {row}");
        }
        assert!(docs.contains(&format!(
            "estimated at **{} bytes a token**",
            crate::model::ESTIMATE_BYTES_PER_TOKEN
        )));
    }
}
