//! Transcript events. One enum, tagged by `type`, so the transcript's schema is this file.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::classifier::ClassifierCall;
use crate::hooks::{EventReport, HookEvent, HookReport};
use crate::ledger::{CallEffects, LedgerConfig, LedgerScope};
use crate::mcp::{McpNotice, McpServerStatus};
pub use crate::model::UsageSource;
use crate::model::pricing::PriceSource;
use crate::model::{ContentBlock, RetryNotice, StopReason, Usage};
use crate::policy::{DenialCounts, Layer, PermissionDecision, PermissionMode, RuleRef, SourceKind};
use crate::sandbox::{ProxyConnection, ReadOnlyStatus, SandboxStatus};
use crate::settings::HeldBack;
use crate::task::FailOn;
use crate::tools::{CommandOutcome, SubagentKind, Todo};

/// A result the per-message budget replaced: its id, its size, and the preview sent instead
/// (the `tool_result` event keeps what the tool returned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplacedResult {
    pub id: String,
    pub chars: usize,
    pub content: String,
}

/// A reminder's form: the whole list, or a one-line count while it is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReminderKind {
    Full,
    Sparse,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        tollgate_version: String,
        task: TaskSummary,
        mode: PermissionMode,
        // Boxed: the largest part of the largest event, which every other event would pay for.
        policy: Box<PolicySummary>,
        model: ModelSummary,
        workdir: PathBuf,
        tools: Vec<String>,
        max_turns: u32,
        /// What the OS sandbox enforces (the preflight); absent when it is off.
        #[serde(skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxStatus>,
        /// Whether the kernel holds commands allowed by a read-only proof to it (absent only
        /// in transcripts of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_only_commands: Option<ReadOnlyStatus>,
        /// Each MCP server with its status (started, failed, skipped) and error.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mcp_servers: Vec<McpServerStatus>,
        /// The repository memory files sent (AGENTS.md, CLAUDE.md, their imports) and sizes.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        memory: Vec<crate::memory::MemoryFile>,
        /// Memory files named but left out, each with why.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        memory_skipped: Vec<crate::memory::SkippedFile>,
        /// What the effect ledger measures (`effects:`; absent only in transcripts of older
        /// versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effects: Option<LedgerConfig>,
    },
    /// A notification an MCP server sent (a log message, a changed tool list).
    McpNotification {
        server: String,
        #[serde(flatten)]
        notice: McpNotice,
    },
    /// An MCP server's tools, listed again after it said they changed; `error` when listing
    /// failed (the old list stays).
    McpTools {
        server: String,
        tools: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    ModelRequest {
        turn: u32,
        messages: usize,
        tools: Vec<String>,
    },
    /// A model request failed transiently and is about to be retried after `delay_ms`.
    ApiRetry {
        turn: u32,
        #[serde(flatten)]
        retry: RetryNotice,
    },
    /// The OpenAI-compatible server cannot stream a request with tools (`reason`: how it
    /// showed it): this request and every later one are sent with `stream: false`.
    StreamingOff { turn: u32, reason: String },
    /// The run's model was overloaded or unavailable after its retries: this request and
    /// every later one go to `to`, charged at its own price.
    ModelFallback {
        turn: u32,
        from: String,
        to: String,
        price: PriceSource,
        /// The failure that caused the switch.
        error: String,
    },
    AssistantMessage {
        turn: u32,
        content: Vec<ContentBlock>,
        stop_reason: StopReason,
        usage: Usage,
        /// `estimated` when the API sent no usage and `usage` is tollgate's estimate;
        /// absent when the API counted it.
        #[serde(default, skip_serializing_if = "UsageSource::is_reported")]
        usage_source: UsageSource,
        /// This request's cost (of the estimate, when estimated); `None` when the model's
        /// price is unknown.
        cost_usd: Option<f64>,
    },
    /// A user message the history gained, as it is sent (results already fitted and
    /// offloaded): with the assistant messages, the conversation a resumed run goes on from.
    UserMessage {
        content: Vec<ContentBlock>,
        /// The blocks were added to the last user message instead (an interruption's note).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        extends: bool,
        /// A compaction: this message replaced the history's first `replaces` messages.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<usize>,
    },
    /// `tollgate run --resume`: the run goes on from its transcript, in the same folder, under
    /// the policy as it is now.
    RunResumed {
        tollgate_version: String,
        /// The transcript line the run goes on after.
        after_seq: u64,
        mode: PermissionMode,
        policy: Box<PolicySummary>,
        model: ModelSummary,
        /// Messages restored, and the new prompt added to them, if any.
        messages: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        /// Model requests and cost spent before, counted against the limits.
        requests: u32,
        cost_usd: Option<f64>,
        /// Deferred tools ToolSearch had loaded, offered again.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loaded_tools: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        todos: Vec<Todo>,
        /// The bytes of a last line cut short (a run killed while writing it), dropped from
        /// the transcript before this line.
        #[serde(default, skip_serializing_if = "is_zero_u64")]
        dropped_torn_bytes: u64,
        /// The model turns the run had made: this run's turns are numbered on from here.
        #[serde(default)]
        turns: u32,
    },
    ToolCall {
        id: String,
        tool: String,
        input: Value,
    },
    /// An allowed call is about to run: written before it starts, so a run killed while it
    /// ran is known, on resume, to have started (its result lost, it may have taken effect).
    ToolStarted { id: String, tool: String },
    PermissionDecision {
        id: String,
        tool: String,
        #[serde(flatten)]
        decision: PermissionDecision,
    },
    /// One classifier model call (or cache hit) reviewing an auto-mode ask.
    ClassifierCall {
        id: String,
        tool: String,
        /// The action under review (the call's input).
        input: Value,
        #[serde(flatten)]
        call: ClassifierCall,
    },
    /// Hooks that ran for a call, each with its answer.
    HookRun {
        id: String,
        tool: String,
        event: HookEvent,
        #[serde(flatten)]
        report: HookReport,
    },
    /// Hooks that ran for a moment of the run (SessionStart, Stop, …), each with its answer.
    EventHooks {
        event: HookEvent,
        #[serde(flatten)]
        report: EventReport,
    },
    /// New output lines of a running call, throttled; outside call order.
    ToolProgress {
        id: String,
        tool: String,
        #[serde(flatten)]
        update: ProgressUpdate,
    },
    /// A user message that arrived on stdin (`--input-format stream-json`) and where it went.
    QueuedMessage {
        content: String,
        disposition: Disposition,
    },
    /// A stdin line (`--input-format stream-json`) that is not a user message: skipped, and
    /// reading went on.
    InputSkipped { line: u64, reason: String },
    /// The current query stopped early: by a queued message (`interrupt`) or a signal. After
    /// a signal, `message` is the text appended to the history.
    QueryAborted {
        reason: QueryEnd,
        by: AbortCause,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A connection a sandboxed command asked the sandbox's proxy for, allowed or refused.
    NetworkConnection {
        #[serde(flatten)]
        connection: ProxyConnection,
    },
    ToolResult {
        id: String,
        tool: String,
        status: ResultStatus,
        is_error: bool,
        content: String,
        duration_ms: u64,
        /// How the command the call ran ended (Bash); absent when it ran none, or was
        /// cancelled before it returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<CommandOutcome>,
        /// What the call changed, as the effect ledger measured it, and what of that
        /// exceeds its verdict; absent when the call did not run or the ledger is off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effects: Option<CallEffects>,
    },
    CheckResult {
        name: String,
        run: String,
        /// 1 for the first run of this check; retries count up.
        attempt: u32,
        #[serde(flatten)]
        outcome: CheckOutcome,
    },
    /// Failed checks' output sent to the model as a new user message (`retry.feed_back`).
    CheckFeedback {
        attempt: u32,
        checks: Vec<String>,
        message: String,
    },
    RunFinished {
        /// The run's id (as `run_started`'s), so a result read alone names its run.
        run_id: String,
        /// Where this transcript is.
        transcript: PathBuf,
        outcome: Outcome,
        exit_code: u8,
        #[serde(flatten)]
        counts: RunCounts,
        /// Agent and classifier together; `None` when a model's price is unknown.
        total_cost_usd: Option<f64>,
        /// The classifier's share of the total (auto mode with a classifier only).
        #[serde(skip_serializing_if = "Option::is_none")]
        classifier_cost_usd: Option<f64>,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_message: Option<String>,
        /// What the run says beside its outcome (`the model's final answer is empty …`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// What this run fails on (`fail_on`).
        fail_on: Vec<FailOn>,
        /// Secrets replaced in the transcript and offloaded results up to this line.
        redactions: u64,
        /// Every refused call of the run.
        permission_denials: Vec<DenialSummary>,
        /// Of all prompt tokens, the share read from the provider's cache; `None` before
        /// any usage was reported.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_read_share: Option<f64>,
        /// The TodoWrite list as the run left it (S3).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        todos: Vec<Todo>,
        /// Each compaction's prompt tokens before and after.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        compactions: Vec<CompactionTokens>,
        /// Under `output_schema`: the final answer's JSON value, once one was valid.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured_output: Option<serde_json::Value>,
        /// What the run went without for want of an operator's approval (as `run_started`'s
        /// `policy.held_back`), so the result read alone says it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        held_back: Vec<HeldBack>,
        /// The effect ledger's totals; absent when it was off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effects: Option<EffectTotals>,
        /// The calls parked for a person (outcome `parked`), as `pending.json` lists them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deferred: Vec<crate::approval::ParkedCall>,
    },
    /// Under `output_schema`: a final answer that is not valid against it, fed back to the
    /// model with the validator's errors unless it was the last answer allowed.
    StructuredOutputRejected {
        turn: u32,
        /// 1 for the first final answer.
        attempt: u32,
        max_attempts: u32,
        errors: Vec<String>,
    },
    /// An Agent call (or an agent-mode Skill) started a sub-agent; the events after it that
    /// carry `agent_id` = `id` are its conversation, up to its `subagent_finished`.
    SubagentStarted {
        id: String,
        /// The tool_use id of the call that started it; its result is the sub-agent's answer.
        parent_id: String,
        subagent_type: SubagentKind,
        /// The custom agent's name (its file's `name`), which runs as a general one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        description: String,
        /// Its first request's tools.
        tools: Vec<String>,
        max_turns: u32,
    },
    SubagentFinished {
        id: String,
        parent_id: String,
        outcome: Outcome,
        turns: u32,
        /// Its requests' tokens; they are in the run's totals too.
        usage: Usage,
        /// Its requests' cost, included in the run's `total_cost_usd`.
        cost_usd: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A TodoWrite snapshot appended to the next user message (S3).
    Reminder {
        turn: u32,
        kind: ReminderKind,
        content: String,
    },
    /// The older turns were replaced by a summary (S8): the system prompt and tools are
    /// unchanged, the recent turns kept whole, the todo list and offloaded files restated.
    Compaction {
        turn: u32,
        trigger: CompactionTrigger,
        outcome: CompactionOutcome,
        /// Messages replaced by the summary, and messages kept after it.
        dropped_messages: usize,
        kept_messages: usize,
        /// The tool calls whose exchanges were dropped (their results stay on record here).
        dropped_tool_uses: Vec<String>,
        #[serde(flatten)]
        tokens: CompactionTokens,
        summary: String,
        /// The summary request's tokens and cost (in the run's totals too).
        usage: Usage,
        cost_usd: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// PreCompact hooks that ran.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hooks: Vec<crate::hooks::HookRun>,
        /// Summary requests that got an answer (2 when the first summary was over the cap
        /// and it was asked for once more).
        #[serde(default, skip_serializing_if = "is_zero")]
        responses: u32,
    },
    /// Results of one user message replaced by previews to fit `limits.message_result_chars`
    /// (S8). Decided once: the message is sent as it is from then on.
    MessageBudget {
        turn: u32,
        /// The results replaced, largest first, with what the history holds instead.
        replaced: Vec<ReplacedResult>,
        chars_before: usize,
        chars_after: usize,
    },
}

/// Why a history was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The next request would have passed `compaction.threshold` of the context window.
    Threshold,
    /// The provider refused a request as too long for its context.
    ContextOverflow,
}

/// What became of one compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionOutcome {
    Compacted,
    /// A PreCompact hook said no: the history is as it was.
    Vetoed,
    /// No summary could be had (too few turns, the provider failed, an empty answer).
    Failed,
}

/// A compaction's prompt size, estimated in tokens, before and after (`run_finished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionTokens {
    pub turn: u32,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Where a queued user message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// It aborted the running `cancel` tools and starts a new query on the kept history.
    Interrupt,
    /// Appended to the next API round of the same query (a `block` tool was running, or
    /// the model was being asked).
    Drained,
    /// The model had finished: it starts a new query.
    NewQuery,
}

/// How an aborted query ended: during the model request or during the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryEnd {
    AbortedStreaming,
    AbortedTools,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

fn is_zero_u64(count: &u64) -> bool {
    *count == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortCause {
    /// A queued user message while only `cancel` tools ran.
    Interrupt,
    Sigint,
    Sigterm,
    Sighup,
}

/// What the effect ledger measured over a run (`run_finished`'s `effects`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectTotals {
    pub scope: LedgerScope,
    /// Calls measured.
    pub measured: u32,
    /// Of those, the calls that changed anything.
    pub changed: u32,
    /// The calls (for a batch, its first call) whose effects exceeded their verdict.
    pub exceeded: Vec<String>,
}

/// A refused call, as the run's result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenialSummary {
    pub id: String,
    pub tool: String,
    pub layer: Layer,
    pub reason: String,
    /// The refused call's input (Claude Code's `tool_input`).
    #[serde(default)]
    pub tool_input: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    pub name: String,
    pub file: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    /// Every policy source in force, highest precedence first.
    pub sources: Vec<(SourceKind, PathBuf)>,
    pub managed_only: bool,
    pub rules: usize,
    /// Rules dropped because the managed policy is managed-only.
    pub ignored_rules: Vec<RuleRef>,
    /// Lower sources' hooks left aside by the managed policy (`command (file)`).
    pub ignored_hooks: Vec<String>,
    /// Lower sources' additional directories left aside under `managed_only`.
    pub ignored_additional_directories: Vec<PathBuf>,
    /// Claude Code settings keys that loaded and take no effect (`file: key`).
    pub ignored_keys: Vec<String>,
    /// Allow rules that hand out more than they seem to.
    pub warnings: Vec<String>,
    /// Allow rules auto mode dropped because they would make its classifier moot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_for_auto: Vec<RuleRef>,
    /// The plugins the run uses (their parts are in the pool, the hooks and the servers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginSummary>,
    /// What the run goes without until an operator's policy lets it in (MCP servers, hooks,
    /// plugins, additional directories), each with the lines that would.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<HeldBack>,
}

/// A plugin a run loaded, and which source enabled it (its hooks and servers are that
/// source's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginSummary {
    pub name: String,
    pub root: PathBuf,
    pub enabled_by: SourceKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub provider: String,
    pub name: String,
    /// Where the run's price came from (absent in older transcripts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<PriceSource>,
    /// Said when the price table knows only the model's family: its cost may be wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_warning: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Success,
    Error,
    Denied,
    /// The call never ran (the run stopped first, a sibling failed, a limit was reached).
    Cancelled,
    /// The call started and the run was killed before its result was recorded: it may have
    /// taken effect (written by the resumed run).
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutcome {
    /// `None` when the check did not exit by itself (timeout, signal, could not start).
    pub exit_code: Option<i32>,
    pub expect_exit: i32,
    pub passed: bool,
    pub output: String,
    pub duration_ms: u64,
}

/// How a run ended. The exit code follows from it (see `Outcome::exit_code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The model finished and every check passed.
    Success,
    /// The model finished but a check failed.
    ChecksFailed,
    /// `limits.max_turns` stopped the loop.
    MaxTurns,
    /// `limits.max_cost_usd` stopped the loop before a request that could exceed it.
    MaxBudgetUsd,
    /// `limits.max_input_tokens` stopped the loop.
    MaxInputTokens,
    /// `limits.max_output_tokens` stopped the loop.
    MaxOutputTokens,
    /// `limits.timeout`, the run's wall clock, ran out.
    Timeout,
    /// The model declined the task (stop reason `refusal` or a content filter).
    Refusal,
    /// `limits.max_denials` or `limits.max_consecutive_denials` stopped the run: it was
    /// going nowhere.
    DenialLimit,
    /// A tool call was refused and `fail_on` counts that kind of refusal.
    PolicyDenied,
    /// A call changed more than its verdict allowed (the effect ledger) and `fail_on` has
    /// `effect`.
    EffectsExceeded,
    /// Auto mode: `limits.max_classifier_denials` or `limits.max_consecutive_classifier_denials`
    /// stopped the run.
    ClassifierDenials,
    /// Auto mode: the classifier could not be reached after the provider's retries (or its
    /// budget was spent), so nothing more could be judged.
    ClassifierUnavailable,
    /// The provider failed.
    ProviderError,
    /// An MCP server did not start and `fail_on` has `mcp_start`: no model call was made.
    McpStartFailed,
    /// A hook stopped the run: `continue: false`, a blocked prompt, a Stop hook that kept
    /// sending the model back, or a failing hook under `on_error: deny`.
    HookStopped,
    /// SIGINT.
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// A file of the run's record (an offloaded result) could not be written: the run
    /// stopped once that batch had its results.
    OutputFailed,
    /// Under `output_schema`: no final answer was valid against it within its attempts.
    StructuredOutputInvalid,
    /// The provider refused the history as too long for the model's context, and
    /// compaction could not make it fit (or was off, or its attempts were spent).
    ContextOverflow,
    /// The model finished with an empty (or whitespace-only) final answer and `fail_on` has
    /// `empty_answer`.
    EmptyAnswer,
    /// Calls were parked for a person's approval: the run waits in `pending.json`.
    Parked,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    pub turns: u32,
    pub tool_calls: u32,
    /// Every refused call, from whichever layer refused it.
    pub denials: u32,
    pub denials_by_layer: DenialCounts,
    pub tool_errors: u32,
    pub checks_passed: u32,
    pub checks_failed: u32,
    pub usage: Usage,
    /// Requests whose usage the API did not send: their tokens in `usage` are estimates.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated_requests: u32,
    /// Auto mode's classifier, counted apart from the agent.
    pub classifier: ClassifierCounts,
}

/// What the auto-mode classifier did in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifierCounts {
    /// Actions reviewed (each once, whatever the number of model calls).
    pub reviews: u32,
    /// Model calls made (a two-stage review may make two).
    pub calls: u32,
    pub cache_hits: u32,
    pub allows: u32,
    pub denies: u32,
    /// Answers that were no verdict, or a judge that could not be reached (each a deny).
    pub errors: u32,
    pub usage: Usage,
    /// Model calls whose usage the API did not send: their tokens in `usage` are estimates.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated_calls: u32,
}

/// Some new lines of a running call's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressUpdate {
    pub lines: Vec<String>,
    /// Lines since the last update that were not kept.
    pub omitted_lines: u64,
}
