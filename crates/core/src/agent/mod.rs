//! The loop (S2): ask the model, pass each tool call through the gate, run what is allowed,
//! feed every result back, until the model stops or a limit does; then the task's checks.
//! One orchestrator: the gate decides, the tools act, nothing else does either.

mod after_turn;
mod answer;
mod attempt;
mod auto;
mod budget;
mod checks;
mod compaction;
mod ending;
mod fallback;
mod hooks;
mod limits;
mod mcp;
mod prompt;
mod reminders;
mod request;
mod restore;
mod resume;
mod structured;
mod subagent;
mod turn;

pub use crate::transcript::{CheckRecord, Denial, RunReport};

use std::path::PathBuf;
use std::sync::Arc;

use tokio::time::Instant;

use budget::Budget;
pub use checks::millis;
use ending::{Ending, timed_out};
pub use fallback::FallbackModel;
use mcp::{mcp_start_failure, refresh_mcp, unavailable_servers};
use reminders::Reminders;
pub use resume::{Resume, ResumeError};

use crate::base::AbortSignal;
use crate::classifier::Classifier;
use crate::exec::RunEnv;
use crate::hooks::{EventRuling, Hook, HookEvent};
use crate::mcp::{McpHub, McpLaunch, McpPlan};
use crate::model::{ContentBlock, History, Message, Pricing, Provider, Role, StopReason};
use crate::out_dir::OutDirLock;
use crate::policy::{AllowBasis, PermissionMode, RuleSet, ToolName, Workspace};
use crate::redact::Redactor;
use crate::results::ResultStore;
use crate::sandbox::{
    ProxyConnection, ReadOnlyDomain, ReadOnlyStatus, Sandbox, SandboxError, SandboxSpec,
};
use crate::scheduler::MessageQueue;
use crate::task::{Check, FailOnSet, Limits};
use crate::tools::{
    DeferredTools, FileStateCache, Pool, RunState, Subagent, Tool, ToolContext, ToolLimits,
    ToolRegistry, tool_specs,
};
use crate::transcript::{
    Event, ModelSummary, Observer, Outcome, PolicySummary, RunCounts, StreamOutput, TaskSummary,
    Transcript,
};

/// Everything a run needs, resolved and validated before the first model call: values the
/// loop reads as they are (the task file's, overridden by the command line where it may).
pub struct RunSpec {
    pub run_id: String,
    /// A cost budget shared with other runs (`--shared-budget`): each request reserves its
    /// worst case there too.
    pub shared_budget: Option<Arc<crate::shared_budget::SharedBudget>>,
    /// The task's name and file, as the transcript and the reports name it.
    pub task: TaskSummary,
    /// The first user message (its placeholders filled).
    pub prompt: String,
    /// AGENTS.md / CLAUDE.md, sent once, in the first user message before the prompt.
    pub memory: Option<crate::memory::Memory>,
    /// The operator's text at the end of the system prompt.
    pub append_system_prompt: Option<String>,
    /// The final answer must be JSON valid against this schema.
    pub output_schema: Option<crate::task::OutputSchema>,
    /// Answers the model may give before one is valid.
    pub output_schema_attempts: u32,
    /// Which model answers (`--model` applied); its connection lives in the `Provider`.
    pub model: ModelSummary,
    /// The model's price, `None` when no table knows it (then no cost limit can be set).
    pub pricing: Option<Pricing>,
    /// The model that takes over once this one is overloaded or unavailable.
    pub fallback: Option<FallbackModel>,
    /// The most output tokens one request may ask for.
    pub max_tokens: u32,
    /// The run's limits: the task's, with `--max-turns` and `--max-cost` applied.
    pub limits: Limits,
    /// Per tool: past this many characters a result is offloaded (the task's thresholds).
    pub max_result_chars: Vec<(ToolName, usize)>,
    /// Tools offered by name only until ToolSearch loads them.
    pub deferred_tools: Vec<ToolName>,
    /// A TodoWrite reminder is the full list every this many times.
    pub reminders_full_every: u32,
    /// The task author's commands, run after the model stops.
    pub checks: Vec<Check>,
    pub mode: PermissionMode,
    /// What an ask only a person could answer becomes (`--defer-asks`: parked).
    pub headless: crate::policy::HeadlessAnswer,
    pub rules: Arc<RuleSet>,
    pub policy_summary: PolicySummary,
    pub workspace: Arc<Workspace>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub out_dir: PathBuf,
    /// The output folder's lock: no other run writes there while this one lives.
    pub out_lock: Arc<OutDirLock>,
    /// What each tool may take (Bash's timeout, output caps).
    pub tool_limits: ToolLimits,
    /// `subagents.max_turns`: each sub-agent's own turns.
    pub subagent_max_turns: u32,
    /// `subagents.max_per_turn`: Agent calls one turn may make.
    pub subagent_max_per_turn: u32,
    /// PreToolUse / PostToolUse hooks in force, managed policy's first.
    pub hooks: Vec<Hook>,
    /// The task's `fail_on`, or `--fail-on`.
    pub fail_on: FailOnSet,
    /// What the effect ledger measures around each call (the task's `effects:`).
    pub effects: crate::ledger::LedgerConfig,
    /// Applied to everything the run writes.
    pub redactor: Arc<Redactor>,
    /// The environments of the commands and hooks the run starts (no secrets in them).
    pub env: RunEnv,
    /// User messages arriving while the run is busy (`--input-format stream-json`).
    pub queue: Option<MessageQueue>,
    /// Where events are streamed as they happen (`--output-format json|stream-json`).
    pub stream: Option<StreamOutput>,
    /// Shown every event as it is written (the command line's progress).
    pub observer: Option<Box<dyn Observer>>,
    /// Auto mode's judge, when the run is in auto mode and one is configured.
    pub classifier: Option<Classifier>,
    /// The OS sandbox Bash commands run in, checked by the preflight.
    pub sandbox: Option<SandboxSpec>,
    /// Whether commands allowed only by a read-only proof run in the read-only domain.
    pub read_only: ReadOnlyStatus,
    /// The MCP servers the run starts, and those the policy left out.
    pub mcp: McpPlan,
    /// When the history is compacted, and what of it is kept.
    pub compaction: crate::task::Compaction,
    /// The model's context window in tokens (the task's, else the table's); `None`: unknown,
    /// so only a provider's "too long" answer compacts.
    pub context_window: Option<u64>,
    /// `--resume`: the run as its transcript left it; the loop goes on from there.
    pub resume: Option<Resume>,
    /// The new user message a resumed run goes on with; `None`: from where it stopped.
    pub resume_prompt: Option<String>,
    /// The operator's key that tags each transcript line; `None` without a state folder
    /// (the run goes on, but no resume will trust its transcript).
    pub transcript_key: Option<Arc<crate::state::TranscriptKey>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    // The OS's reason is the source, printed once by whoever prints the chain.
    #[error("cannot write the transcript {path}")]
    Transcript {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

struct Loop<'a> {
    spec: &'a RunSpec,
    transcript: Transcript,
    ctx: ToolContext,
    results: ResultStore,
    counts: RunCounts,
    calls_by_tool: Vec<(ToolName, u32)>,
    denials: Vec<Denial>,
    budget: Budget,
    /// When `limits.timeout` runs out.
    deadline: Option<Instant>,
    /// Refusals since the last allowed call.
    consecutive_denials: u32,
    /// The fallback not yet switched to, and the model answering now.
    fallback: Option<FallbackModel>,
    answering: String,
    /// Each compaction's prompt tokens before and after, for `run_finished`.
    compactions: Vec<crate::transcript::CompactionTokens>,
    /// Refused calls, so a verbatim repeat gets the same answer without a new judgement.
    refusals: crate::call::Refusals,
    /// Auto mode's classifier and its tallies.
    auto: Option<auto::AutoState>,
    network_refusals: Vec<ProxyConnection>,
    /// When the TodoWrite list is shown again (S3).
    reminders: Reminders,
    /// The run's MCP servers; ended before `run_finished` (and killed if the loop is dropped).
    mcp: McpHub,
    /// The first offloaded result whose file could not be written: the run stops at the
    /// end of that batch as an output failure.
    unsaved: Option<crate::out_dir::OutputError>,
    /// Sub-agents started so far, for their ids.
    subagents: u32,
    /// Model requests of the whole run, sub-agents' included: `max_turns` bounds these.
    requests: u32,
    /// The final answer's value under `output_schema`, once one was valid.
    structured_output: Option<serde_json::Value>,
    /// Final answers given so far under `output_schema`, valid or not.
    structured_answers: u32,
    /// The effect ledger, unless `effects.scope` is `off`.
    ledger: Option<crate::ledger::Ledger>,
    /// What it measured so far.
    effects: crate::transcript::EffectReport,
    /// A resumed run's turn it stopped inside, gone on with before any request.
    pending: Option<PendingTurn>,
    /// The run's failed compactions: the threshold backs off, the attempts are bounded.
    backoff: compaction::Backoff,
    /// The calls the run parked for a person: listed in `pending.json` when it ends.
    parked: Vec<crate::approval::ParkedCall>,
}

/// The model turn a resumed run goes on inside: its calls answered as the record places
/// them, those never started judged and run now; or a final answer never concluded.
struct PendingTurn {
    message: Message,
    stop_reason: StopReason,
    /// What the record already settled of the turn, and the resume's new words.
    resumed: turn::Resumed,
}

impl Loop<'_> {
    /// Past this many characters a tool's result is offloaded: the task's threshold for the
    /// tool, else the tool's own. Read's is unbounded (the task cannot set one).
    fn result_threshold(&self, call: &crate::call::PreparedCall) -> usize {
        self.spec
            .max_result_chars
            .iter()
            .find(|(tool, _)| tool == call.name())
            .map_or_else(|| call.max_result_chars(), |(_, max)| *max)
    }
}

impl Loop<'_> {
    /// What the history keeps of an offloaded result; a file that could not be written is
    /// remembered, and ends the run once the batch has its results.
    fn keep(&mut self, fitted: Result<String, crate::results::Unsaved>) -> String {
        match fitted {
            Ok(content) => content,
            Err(unsaved) => {
                self.unsaved.get_or_insert(unsaved.error);
                unsaved.kept
            }
        }
    }

    fn emit(&mut self, event: Event) -> Result<(), AgentError> {
        self.transcript
            .emit(&event)
            .map_err(|source| AgentError::Transcript {
                path: self.transcript.path().to_path_buf(),
                source,
            })
    }
}

/// What a hard stop appends to the history, as Claude Code does after ESC.
pub const INTERRUPTED_BY_USER: &str = "[Request interrupted by user]";

/// Runs the task. Every tool_use gets exactly one tool_result, whatever happens.
pub async fn run(
    mut spec: RunSpec,
    mut provider: Provider,
    abort: AbortSignal,
) -> Result<RunReport, AgentError> {
    let started = Instant::now();
    let transcript_path = spec.out_dir.join(crate::out_dir::TRANSCRIPT_FILE);
    let resume = spec.resume.take();
    let (transcript, chain) = match &resume {
        Some(resume) => (
            Transcript::append(&transcript_path, resume.last_seq, resume.verified_len),
            spec.transcript_key
                .clone()
                .map(|key| crate::state::Chain::resume(key, resume.last_tag)),
        ),
        None => (
            Transcript::create(&transcript_path),
            spec.transcript_key.clone().map(crate::state::Chain::start),
        ),
    };
    let transcript = transcript
        .map_err(|source| AgentError::Transcript {
            path: transcript_path.clone(),
            source,
        })?
        .sealed(chain)
        .redacting(spec.redactor.clone())
        .streaming(spec.stream.take())
        .observed_by(spec.observer.take());
    let classifier = spec.classifier.take();
    let sandbox_status = spec.sandbox.as_ref().map(|sandbox| sandbox.status.clone());
    let sandbox = match spec.sandbox.take() {
        Some(sandbox) => Some(Arc::new(
            Sandbox::start(sandbox, &spec.workspace, &spec.run_id, &spec.out_dir).await?,
        )),
        None => None,
    };
    let read_only = ReadOnlyDomain::start(
        &spec.read_only,
        sandbox.as_deref().map(Sandbox::tmpdir),
        &spec.run_id,
    )?
    .map(Arc::new);
    let ctx = ToolContext {
        workspace: spec.workspace.clone(),
        rules: Arc::clone(&spec.rules),
        limits: spec.tool_limits,
        abort: abort.clone(),
        files: FileStateCache::default(),
        command_env: spec.env.model.clone(),
        progress: None,
        sandbox,
        read_only,
        allow_basis: AllowBasis::Granted,
        state: RunState::default(),
        resolver: crate::net::Resolver::System,
    };
    let starting = McpHub::start(
        &spec.mcp,
        McpLaunch {
            workdir: &spec.workspace.workdir,
            env: &spec.env.hooks,
            sandbox: ctx.sandbox.as_deref(),
            rules: &spec.rules,
            resolver: &ctx.resolver,
        },
    );
    // A signal while servers start ends the wait: the dropped start kills what it began,
    // and the loop then sees the abort before any model call.
    let mcp = tokio::select! {
        hub = starting => hub,
        _ = abort.aborted() => McpHub::default(),
    };
    let ctx = ToolContext {
        state: RunState {
            deferred: DeferredTools::new(pool(&spec, &mcp).deferred_catalogue()),
            ..RunState::default()
        },
        ..ctx
    };
    let model = spec.model.clone();
    let mut run = Loop {
        spec: &spec,
        transcript,
        ctx,
        results: ResultStore::new(spec.out_dir.join("results")).redacting(spec.redactor.clone()),
        counts: RunCounts::default(),
        calls_by_tool: Vec::new(),
        denials: Vec::new(),
        budget: Budget::new(spec.limits, spec.pricing, spec.max_tokens)
            .shared(spec.shared_budget.clone()),
        deadline: spec
            .limits
            .timeout
            .map(|limit| crate::base::deadline(started, limit)),
        consecutive_denials: 0,
        refusals: crate::call::Refusals::default(),
        compactions: Vec::new(),
        fallback: spec.fallback.clone(),
        answering: spec.model.name.clone(),
        auto: classifier.map(auto::AutoState::new),
        network_refusals: Vec::new(),
        reminders: Reminders::new(spec.reminders_full_every),
        mcp,
        unsaved: None,
        subagents: 0,
        requests: 0,
        structured_output: None,
        structured_answers: 0,
        // The transcript is the one file tollgate writes while calls run.
        ledger: crate::ledger::Ledger::new(
            spec.effects,
            &spec.workspace.workdir,
            spec.workspace.home.as_deref(),
            vec![transcript_path.clone()],
        ),
        effects: crate::transcript::EffectReport {
            config: (spec.effects.scope != crate::ledger::LedgerScope::Off).then_some(spec.effects),
            ..Default::default()
        },
        pending: None,
        backoff: compaction::Backoff::default(),
        parked: Vec::new(),
    };
    let resuming = resume.is_some();
    let mut messages = match resume {
        Some(resume) => restore::resumed(&mut run, &mut provider, resume)?,
        None => {
            run.emit(Event::RunStarted {
                run_id: spec.run_id.clone(),
                tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
                task: spec.task.clone(),
                mode: spec.mode,
                policy: Box::new(spec.policy_summary.clone()),
                model: model.clone(),
                workdir: spec.workspace.workdir.clone(),
                tools: spec
                    .tools
                    .iter()
                    .map(|tool| tool.name().to_string())
                    .collect(),
                max_turns: spec.limits.max_turns,
                sandbox: sandbox_status.clone(),
                read_only_commands: Some(spec.read_only.clone()),
                mcp_servers: run.mcp.statuses().to_vec(),
                memory: spec
                    .memory
                    .as_ref()
                    .map(|memory| memory.files.clone())
                    .unwrap_or_default(),
                memory_skipped: spec
                    .memory
                    .as_ref()
                    .map(|memory| memory.skipped.clone())
                    .unwrap_or_default(),
                effects: Some(spec.effects),
            })?;
            History::default()
        }
    };
    // Checks with `retry.feed_back` send their failures back to the model and the
    // conversation goes on, its history kept, until the checks pass or no retry is left.
    let mut checks = Vec::new();
    let mut scope = Scope::main(spec.limits.max_turns);
    // Turn numbers go on from the run's own turns before the resume.
    scope.turns = run.counts.turns;
    let opened = match mcp_start_failure(&run) {
        Some(why) => Err(Ending::stopped(Outcome::McpStartFailed, why)),
        // A resumed conversation was opened (and its hooks heard) when it started.
        None if resuming => Ok(()),
        None => match opening(&mut run).await? {
            Ok(first) => {
                push_user(&mut run, &mut messages, first)?;
                Ok(())
            }
            Err(why) => Err(Ending::stopped(Outcome::HookStopped, why)),
        },
    };
    let ended = match opened {
        Err(ended) => ended,
        Ok(()) => loop {
            let ended =
                conversation(&mut run, &mut provider, &abort, &mut messages, &mut scope).await?;
            // After a limit the checks still say where the work stands; after the wall clock
            // ran out there is no time left for them.
            if run.unsaved.is_some()
                || !matches!(
                    ended.outcome,
                    Outcome::Success
                        | Outcome::MaxTurns
                        | Outcome::MaxBudgetUsd
                        | Outcome::MaxInputTokens
                        | Outcome::MaxOutputTokens
                        | Outcome::Refusal
                )
            {
                break ended;
            }
            match checks::run_round(&mut run, &abort, &mut checks).await? {
                checks::RoundEnd::Feedback(feedback)
                    if ended.outcome == Outcome::Success && run.unsaved.is_none() =>
                {
                    push_user(&mut run, &mut messages, Message::user_text(feedback))?;
                }
                checks::RoundEnd::OutOfTime => break timed_out(&spec),
                checks::RoundEnd::Done | checks::RoundEnd::Feedback(_) => break ended,
            }
        },
    };
    ending::finish(
        run,
        ended,
        ending::Finishing {
            checks,
            abort: &abort,
            started,
            transcript: transcript_path,
            sandbox: sandbox_status,
            model,
        },
    )
    .await
}

/// SessionStart and UserPromptSubmit, before the first model call: the first message (the
/// task's prompt, with the context the hooks added), or why a hook ended the run there.
async fn opening(run: &mut Loop<'_>) -> Result<Result<Message, String>, AgentError> {
    let prompt = run.spec.prompt.clone();
    let Message { mut content, .. } = prompt::first_message(run.spec);
    for (event, subject, fields) in [
        (
            HookEvent::SessionStart,
            "startup",
            serde_json::json!({"source": "startup"}),
        ),
        (
            HookEvent::UserPromptSubmit,
            "",
            serde_json::json!({"prompt": prompt}),
        ),
    ] {
        match hooks::moment(run, event, subject, fields).await? {
            EventRuling::Stop { reason } => return Ok(Err(reason)),
            EventRuling::Block { reason } => {
                return Ok(Err(format!("the prompt was blocked: {reason}")));
            }
            EventRuling::Proceed { context } => {
                content.extend(context.into_iter().map(|text| ContentBlock::Text {
                    text: format!("<{event}-hook-context>\n{text}\n</{event}-hook-context>"),
                }));
            }
        }
    }
    Ok(Ok(Message {
        role: Role::User,
        content,
    }))
}

/// Whose conversation the loop is running: the task's own, or a sub-agent's, with its turns.
struct Scope {
    /// `None` for the run's own conversation.
    subagent: Option<Subagent>,
    max_turns: u32,
    turns: u32,
    /// Times Stop hooks sent the model back to work.
    stop_continuations: u32,
}

impl Scope {
    fn main(max_turns: u32) -> Scope {
        Scope {
            subagent: None,
            max_turns,
            turns: 0,
            stop_continuations: 0,
        }
    }

    /// The turn limit's name, as the report says it.
    fn max_turns_key(&self) -> &'static str {
        match self.subagent {
            None => "max_turns",
            Some(_) => "subagents.max_turns",
        }
    }
}

/// What a phase of the loop leaves it to do.
enum Next {
    /// Another turn: a request, unless the run ends before it.
    Again,
    End(Ending),
}

/// The model ↔ tools exchange, one turn a round: the pool offered, the next turn asked for
/// (`request`), then either the answer without calls weighed (`answer`) or the turn's calls
/// gated and run (`turn`) and the turn closed (`after_turn`). Returns how it ended.
async fn conversation(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut History,
    scope: &mut Scope,
) -> Result<Ending, AgentError> {
    let spec = run.spec;
    let system = prompt::system_prompt(
        spec,
        &run.ctx.state.deferred.catalogue(),
        &unavailable_servers(spec, &run.mcp),
        scope.subagent.as_ref(),
    );
    loop {
        // A result file that could not be written stops the run once its batch has landed;
        // `run` gives the outcome.
        if run.unsaved.is_some() {
            return Ok(Ending::bare(Outcome::OutputFailed));
        }
        let registry = offered(run, scope).await?;
        let specs = tool_specs(&registry);
        let asked = match request::next_turn(run, provider, abort, messages, scope, &system, &specs)
            .await?
        {
            Ok(asked) => asked,
            Err(ending) => return Ok(ending),
        };
        let calls = asked.calls();
        let text = asked.message.text();
        messages.push(asked.message);
        let next = if calls.is_empty() {
            answer::without_calls(run, messages, scope, asked.stop_reason, text, asked.turn).await?
        } else {
            let played = turn::play(
                run,
                provider,
                scope,
                &registry,
                &calls,
                &asked.malformed_inputs,
                asked.resumed,
            )
            .await?;
            after_turn::close(run, abort, messages, scope, asked.turn, played)?
        };
        if let Next::End(ending) = next {
            return Ok(ending);
        }
    }
}

/// The pool offered this turn. It is rebuilt each turn, so tools ToolSearch loaded reach the
/// next request, appended after the others so the tools array sent before stays its prefix.
async fn offered(run: &mut Loop<'_>, scope: &Scope) -> Result<ToolRegistry, AgentError> {
    refresh_mcp(run).await?;
    Ok(pool(run.spec, &run.mcp).offered(&run.ctx.state.deferred.loaded(), scope.subagent.as_ref()))
}

/// The run's pool as it stands: the task's tools and the running servers'.
fn pool<'r>(spec: &'r RunSpec, mcp: &'r McpHub) -> Pool<'r> {
    Pool::new(&spec.tools, &spec.deferred_tools, mcp.tools())
}

/// Appends a user message to the history and records it, so a resumed run finds it.
fn push_user(
    run: &mut Loop<'_>,
    messages: &mut History,
    message: Message,
) -> Result<(), AgentError> {
    run.emit(Event::UserMessage {
        content: message.content.clone(),
        extends: false,
        replaces: None,
    })?;
    messages.push(message);
    Ok(())
}
