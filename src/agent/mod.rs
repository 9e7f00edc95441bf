//! The loop (S2): ask the model, pass each tool call through the gate, run what is allowed,
//! feed every result back, until the model stops or a limit does; then the task's checks.
//! One orchestrator: the gate decides, the tools act, nothing else does either.

mod auto;
mod turn;

pub use crate::transcript::{CheckRecord, Denial, RunReport};
mod budget;
mod checks;
mod compaction;
mod fallback;
mod hooks;
mod prompt;
mod refusals;
mod reminders;
mod resume;
mod structured;
mod subagent;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use budget::Budget;
pub use checks::millis;
pub use fallback::FallbackModel;
pub use resume::{Resume, ResumeError};

use crate::base::{AbortReason, AbortSignal};
use crate::classifier::{Classifier, ProposedRule, proposed_rules_yaml};
use crate::exec::RunEnv;
use crate::hooks::{EventRuling, Hook, HookEvent, MAX_STOP_CONTINUATIONS};
use crate::mcp::{McpHub, McpLaunch, McpPlan};
use crate::model::Pricing;
use crate::model::{
    ContentBlock, History, Message, ModelRequest, ModelResponse, Provider, ProviderEvent, Role,
    StopReason, ToolSpec,
};
use crate::out_dir::OutDirLock;
use crate::policy::AllowBasis;
use crate::policy::{PermissionMode, RuleSet, ToolName, Workspace};
use crate::redact::Redactor;
use crate::results::ResultStore;
use crate::sandbox::{
    ProxyConnection, ReadOnlyDomain, ReadOnlyStatus, Sandbox, SandboxError, SandboxSpec,
};
use crate::scheduler::{Call, MessageQueue, QueuedInput, TurnEnd, run_turn};
use crate::task::{Check, FailOnSet, Limits};
use crate::tools::{
    DeferredTools, FileStateCache, RunState, Subagent, Tool, ToolContext, ToolDefinition,
    ToolLimits, ToolRegistry,
};
use crate::transcript::{
    AbortCause, DenialSummary, Disposition, Event, ModelSummary, Observer, Outcome, PolicySummary,
    QueryEnd, RunCounts, StreamOutput, TaskSummary, Transcript, UsageSource,
};
use reminders::Reminders;

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

fn interrupted(reason: AbortReason) -> Outcome {
    match reason {
        AbortReason::Interrupt => Outcome::Interrupted,
        AbortReason::Terminate | AbortReason::Hangup => Outcome::Terminated,
    }
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
    refusals: refusals::Refusals,
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
    /// The calls with an answer already, by id (the others are judged and run).
    settled: std::collections::HashMap<String, turn::Settled>,
    /// The resume's new words, added after the turn's results.
    prompt: Option<String>,
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
            deferred: DeferredTools::new(deferred_catalogue(&spec, &mcp)),
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
        refusals: refusals::Refusals::default(),
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
        Some(resume) => resumed(&mut run, &mut provider, resume)?,
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
    let Ending {
        mut outcome,
        final_message,
        reason: mut error,
    } = match opened {
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
    // No server outlives the run's work; a dropped loop kills them as well.
    std::mem::take(&mut run.mcp).shutdown().await;
    for record in checks::final_attempts(&checks) {
        if record.outcome.passed {
            run.counts.checks_passed += 1;
        } else {
            run.counts.checks_failed += 1;
        }
    }
    // An output failure outranks every other ending: the record is incomplete.
    if let Some(failed) = &run.unsaved {
        outcome = Outcome::OutputFailed;
        error = Some(format!("{failed}: {}", failed.source));
    } else if let Some(reason) = abort.reason() {
        outcome = interrupted(reason);
    } else if outcome == Outcome::Success && run.counts.checks_failed > 0 {
        outcome = Outcome::ChecksFailed;
    }
    // A model that finished saying nothing: under `output_schema` the schema judges the
    // answer (an empty one is never valid), otherwise it is said, and fails the run when
    // `fail_on` has `empty_answer`.
    let empty_answer = outcome == Outcome::Success
        && spec.output_schema.is_none()
        && final_message
            .as_deref()
            .is_none_or(|text| text.trim().is_empty());
    let warnings: Vec<String> = empty_answer
        .then(|| EMPTY_ANSWER_WARNING.to_string())
        .into_iter()
        .collect();
    let (outcome, exit_code) = crate::transcript::final_outcome::decide(
        outcome,
        &run.denials,
        &run.effects.exceeded,
        empty_answer,
        &spec.fail_on,
    );
    // The run is over: a SessionEnd hook is told, and can change nothing (its runs and any
    // failure are in the transcript).
    hooks::moment(
        &mut run,
        HookEvent::SessionEnd,
        "",
        serde_json::json!({"reason": "other"}),
    )
    .await?;
    let duration_ms = millis(started.into_std());
    let classifier_cost_usd = run.auto.as_ref().and_then(|auto| auto.cost_usd);
    let total_cost_usd = match (&run.auto, run.budget.total_cost_usd()) {
        (None, agent) => agent,
        (Some(_), agent) => agent.zip(classifier_cost_usd).map(|(a, c)| a + c),
    };
    let proposed_rules = run
        .auto
        .as_mut()
        .map(|auto| std::mem::take(&mut auto.proposals))
        .unwrap_or_default();
    write_proposed_rules(&spec, &proposed_rules)?;
    write_pending(&spec, &run.parked)?;
    let structured_output = run.structured_output.take();
    write_structured_output(&spec, structured_output.as_ref())?;
    let todos = run.ctx.state.todos.snapshot().items;
    let usage = run.counts.usage;
    let prompt_tokens =
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
    let cache_read_share =
        (prompt_tokens > 0).then(|| usage.cache_read_input_tokens as f64 / prompt_tokens as f64);
    let compactions = std::mem::take(&mut run.compactions);
    run.emit(Event::RunFinished {
        run_id: spec.run_id.clone(),
        transcript: transcript_path.clone(),
        outcome,
        exit_code: exit_code.code(),
        counts: run.counts,
        total_cost_usd,
        classifier_cost_usd: run.auto.as_ref().and(classifier_cost_usd),
        duration_ms,
        error: error.clone(),
        final_message: final_message.clone(),
        warnings: warnings.clone(),
        fail_on: spec.fail_on.kinds().to_vec(),
        redactions: spec.redactor.count(),
        permission_denials: run
            .denials
            .iter()
            .map(|denial| DenialSummary {
                id: denial.id.clone(),
                tool: denial.tool.to_string(),
                layer: denial.decision.layer,
                reason: denial.decision.reason.clone(),
                tool_input: denial.input.clone(),
            })
            .collect(),
        cache_read_share,
        todos: todos.clone(),
        compactions,
        structured_output: structured_output.clone(),
        held_back: spec.policy_summary.held_back.clone(),
        effects: run.effects.totals(),
        deferred: run.parked.clone(),
    })?;
    write_statement(&spec, &transcript_path, outcome)?;
    Ok(RunReport {
        run_id: spec.run_id.clone(),
        task_name: spec.task.name.clone(),
        model,
        mode: spec.mode,
        outcome,
        exit_code,
        counts: run.counts,
        calls_by_tool: run.calls_by_tool,
        denials: run.denials,
        checks,
        final_message,
        error,
        warnings,
        total_cost_usd,
        classifier_cost_usd,
        proposed_rules,
        duration_ms,
        transcript: transcript_path,
        fail_on: spec.fail_on.clone(),
        task_file: spec.task.file.clone(),
        workdir: spec.workspace.workdir.clone(),
        sandbox: sandbox_status,
        read_only_commands: spec.read_only.clone(),
        network_refusals: run.network_refusals,
        todos,
        structured_output,
        held_back: spec.policy_summary.held_back.clone(),
        effects: run.effects,
        parked: run.parked,
    })
}

/// The warning of a run whose model finished with an empty final answer.
const EMPTY_ANSWER_WARNING: &str = "the model's final answer is empty (or only whitespace): it finished without saying anything; `fail_on: [empty_answer]` fails such a run";

/// `statement.json` in the output folder: the in-toto statement of the run as its
/// transcript now stands (a resume rewrites it).
fn write_statement(
    spec: &RunSpec,
    transcript: &std::path::Path,
    outcome: Outcome,
) -> Result<(), AgentError> {
    use crate::attest::{Digested, Model, RunFacts, sha256};
    let failed = |path: &std::path::Path, source| AgentError::Transcript {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(transcript).map_err(|err| failed(transcript, err))?;
    let digested = |path: &std::path::Path| Digested {
        path: path.to_path_buf(),
        sha256: std::fs::read(path).ok().map(|bytes| sha256(&bytes)),
    };
    let facts = RunFacts {
        run_id: &spec.run_id,
        outcome,
        commit: crate::attest::head_commit(&spec.workspace.workdir),
        task: digested(&spec.task.file),
        policy: spec
            .policy_summary
            .sources
            .iter()
            .map(|(_, path)| digested(path))
            .collect(),
        model: Model {
            provider: spec.model.provider.clone(),
            name: spec.model.name.clone(),
        },
    };
    let statement = crate::attest::statement(facts, &text);
    let path = spec.out_dir.join(crate::attest::STATEMENT_FILE);
    let json = serde_json::to_string_pretty(&statement).unwrap_or_default() + "\n";
    crate::out_dir::write_atomic(&path, json.as_bytes()).map_err(|err| AgentError::Transcript {
        path: err.path,
        source: err.source,
    })
}

/// `pending.json` in the output folder when the run parked calls: what each would do, for
/// the person who answers it. Redacted like every record, as the transcript's inputs are
/// (the hashes bind the input as recorded).
fn write_pending(spec: &RunSpec, parked: &[crate::approval::ParkedCall]) -> Result<(), AgentError> {
    if parked.is_empty() {
        return Ok(());
    }
    let pending = crate::approval::Pending {
        run_id: spec.run_id.clone(),
        calls: parked.to_vec(),
    };
    let path = spec.out_dir.join(crate::approval::PENDING_FILE);
    let text = serde_json::to_string_pretty(&pending).unwrap_or_default() + "\n";
    crate::out_dir::write_atomic(&path, spec.redactor.redact(&text).as_bytes()).map_err(|err| {
        AgentError::Transcript {
            path: err.path,
            source: err.source,
        }
    })
}

/// `structured_output.json` in the output folder, redacted like every record.
fn write_structured_output(
    spec: &RunSpec,
    value: Option<&serde_json::Value>,
) -> Result<(), AgentError> {
    let Some(value) = value else {
        return Ok(());
    };
    let path = spec.out_dir.join(crate::out_dir::STRUCTURED_OUTPUT_FILE);
    let text = serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
    crate::out_dir::write_atomic(&path, spec.redactor.redact(&text).as_bytes()).map_err(|err| {
        AgentError::Transcript {
            path: err.path,
            source: err.source,
        }
    })
}

/// How a conversation ended: its outcome, the model's last answer when it gave one, and why
/// it stopped when something other than a finished answer ended it.
#[derive(Debug, Clone, PartialEq)]
struct Ending {
    outcome: Outcome,
    final_message: Option<String>,
    reason: Option<String>,
}

impl Ending {
    fn new(outcome: Outcome, final_message: Option<String>, reason: Option<String>) -> Ending {
        Ending {
            outcome,
            final_message,
            reason,
        }
    }

    /// Ended with no answer, the outcome saying all there is (an interruption, a record that
    /// could not be written).
    fn bare(outcome: Outcome) -> Ending {
        Ending::new(outcome, None, None)
    }

    /// Stopped before the model gave a final answer, for `why`.
    fn stopped(outcome: Outcome, why: impl Into<String>) -> Ending {
        Ending::new(outcome, None, Some(why.into()))
    }

    /// The model's final answer ended it.
    fn answered(outcome: Outcome, text: String) -> Ending {
        Ending::new(outcome, Some(text), None)
    }
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

/// What the Stop (or SubagentStop) hooks make of the model ending its turn.
enum StopHooks {
    /// The conversation ends.
    End,
    /// Back to work, told why.
    Continue(String),
    /// The run ends as `hook_stopped`.
    Stopped(String),
}

async fn stop_hooks(run: &mut Loop<'_>, scope: &mut Scope) -> Result<StopHooks, AgentError> {
    let active = scope.stop_continuations > 0;
    let (event, fields) = match &scope.subagent {
        None => (
            HookEvent::Stop,
            serde_json::json!({"stop_hook_active": active}),
        ),
        Some(kind) => (
            HookEvent::SubagentStop,
            serde_json::json!({"stop_hook_active": active, "agent_type": kind.to_string()}),
        ),
    };
    Ok(match hooks::moment(run, event, "", fields).await? {
        EventRuling::Proceed { .. } => StopHooks::End,
        EventRuling::Stop { reason } => StopHooks::Stopped(reason),
        EventRuling::Block { reason } if scope.stop_continuations >= MAX_STOP_CONTINUATIONS => {
            StopHooks::Stopped(format!(
                "{reason} (still blocking after {MAX_STOP_CONTINUATIONS} continuations)"
            ))
        }
        EventRuling::Block { reason } => {
            scope.stop_continuations += 1;
            StopHooks::Continue(reason)
        }
    })
}

fn run_turns_used_up(max_turns: u32) -> String {
    format!("stopped after max_turns = {max_turns} (the run's model turns, sub-agents' included)")
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

/// The model ↔ tools exchange. Returns how it ended, the model's last words and any error.
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
        // The pool is rebuilt each turn, so tools ToolSearch loaded reach the next request,
        // appended after the others so the tools array sent before stays its prefix.
        refresh_mcp(run).await?;
        let registry = subagent::pool(
            offered_tools(spec, &run.mcp, &run.ctx.state.deferred.loaded()),
            scope.subagent.as_ref(),
        );
        let tool_specs = tool_specs(&registry);
        // A resumed run goes on inside the turn it stopped in: no request, its calls
        // answered as the record places them.
        let pending = match scope.subagent {
            None => run.pending.take(),
            Some(_) => None,
        };
        let (assistant, stop_reason, malformed_inputs, turn, resumed) = match pending {
            Some(pending) => (
                pending.message,
                pending.stop_reason,
                Vec::new(),
                scope.turns,
                Some((pending.settled, pending.prompt)),
            ),
            None => match ask(run, provider, abort, messages, scope, &system, &tool_specs).await? {
                Ok(asked) => (
                    asked.message,
                    asked.stop_reason,
                    asked.malformed_inputs,
                    asked.turn,
                    None,
                ),
                Err(ending) => return Ok(ending),
            },
        };
        let calls: Vec<Call> = assistant
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, input } => Some(Call {
                    id: id.clone(),
                    name: ToolName::from_model(name),
                    input: input.clone(),
                }),
                _ => None,
            })
            .collect();
        let text = assistant.text();
        messages.push(assistant);
        if calls.is_empty() {
            match stop_reason {
                StopReason::Refusal => {
                    return Ok(Ending::new(
                        Outcome::Refusal,
                        Some(text),
                        Some("the model declined the task (stop reason: refusal)".into()),
                    ));
                }
                // A server-side pause: sending the turn back as it is lets the model go on.
                StopReason::PauseTurn => continue,
                StopReason::MaxTokens => {
                    push_user(run, messages, Message::user_text(CUT_OFF))?;
                    continue;
                }
                StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => {
                    // A message queued meanwhile starts a new query on this history; it is
                    // the run's, so a sub-agent leaves it for its parent.
                    let queued = match scope.subagent {
                        None => drain_queue(run, Disposition::NewQuery)?,
                        Some(_) => Vec::new(),
                    };
                    if queued.is_empty() {
                        match stop_hooks(run, scope).await? {
                            StopHooks::End => {}
                            StopHooks::Continue(reason) => {
                                let back = Message::user_text(format!(
                                    "A Stop hook says the work is not done: {reason}"
                                ));
                                push_user(run, messages, back)?;
                                continue;
                            }
                            StopHooks::Stopped(why) => {
                                return Ok(Ending::new(
                                    Outcome::HookStopped,
                                    Some(text),
                                    Some(why),
                                ));
                            }
                        }
                        // The Stop hooks let it end: the answer is checked against
                        // the output schema, if any.
                        let schema = spec
                            .output_schema
                            .as_ref()
                            .filter(|_| scope.subagent.is_none());
                        let Some(schema) = schema else {
                            return Ok(Ending::answered(Outcome::Success, text));
                        };
                        run.structured_answers += 1;
                        let attempt = run.structured_answers;
                        match structured::check(&schema.schema, &text) {
                            Ok(value) => {
                                run.structured_output = Some(value);
                                return Ok(Ending::answered(Outcome::Success, text));
                            }
                            Err(errors) => {
                                // A later answer supersedes an earlier valid one (after a
                                // check's feedback): only the last answer counts.
                                run.structured_output = None;
                                let max = spec.output_schema_attempts;
                                run.emit(Event::StructuredOutputRejected {
                                    turn,
                                    attempt,
                                    max_attempts: max,
                                    errors: errors.clone(),
                                })?;
                                if attempt >= max {
                                    return Ok(Ending::new(
                                        Outcome::StructuredOutputInvalid,
                                        Some(text),
                                        Some(format!(
                                            "the final answer was not valid against the output schema after {max} answers: {}",
                                            errors.first().map_or("", String::as_str)
                                        )),
                                    ));
                                }
                                let feedback = structured::feedback(&errors, attempt, max);
                                push_user(run, messages, Message::user_text(feedback))?;
                                continue;
                            }
                        }
                    }
                    push_user(
                        run,
                        messages,
                        Message {
                            role: Role::User,
                            content: queued,
                        },
                    )?;
                    continue;
                }
            }
        }
        let ctx = run.ctx.clone();
        let queue = spec.queue.as_ref().filter(|_| scope.subagent.is_none());
        let mut host = turn::LoopHost::new(
            run,
            provider,
            scope.subagent.clone(),
            &registry,
            &calls,
            &malformed_inputs,
        );
        let prompt = resumed.and_then(|(settled, prompt)| {
            host.settle(settled);
            prompt
        });
        let end = run_turn(
            &mut host,
            &calls,
            &ctx,
            spec.limits.max_parallel_tools,
            queue,
        )
        .await?;
        let stopped = host.stopped.take();
        let exempt = std::mem::take(&mut host.exempt);
        let mut results = std::mem::take(&mut host.results);
        let parked = std::mem::take(&mut host.parked);
        record_network(run)?;
        // A parked call has no result until a person answers it, and the model cannot be
        // asked again before every call has one: the run ends here, the turn's other
        // results recorded, and `--resume` goes on inside this turn (Claude Code's
        // `tool_deferred`). Only the run's own conversation parks (see `turn::gate`).
        if !parked.is_empty() {
            let ids: Vec<&str> = parked.iter().map(|call| call.id.as_str()).collect();
            let why = format!(
                "{} call(s) await a person's approval: {} (see {}; `tollgate approve`, then `tollgate run --resume`)",
                parked.len(),
                ids.join(", "),
                crate::approval::PENDING_FILE
            );
            run.parked = parked;
            return Ok(Ending::stopped(Outcome::Parked, why));
        }
        fit_message_budget(run, turn, &mut results, &exempt)?;
        match end {
            TurnEnd::Complete if scope.subagent.is_none() => {
                results.extend(drain_queue(run, Disposition::Drained)?);
            }
            TurnEnd::Complete => {}
            // Completed results are kept; the queued message follows them and gives the
            // context, so no "[Request interrupted]" is added (seed §5.2 E).
            TurnEnd::Interrupted => {
                run.emit(Event::QueryAborted {
                    reason: QueryEnd::AbortedTools,
                    by: AbortCause::Interrupt,
                    message: None,
                })?;
                results.extend(drain_queue(run, Disposition::Interrupt)?);
            }
            TurnEnd::HardStopped => {}
        }
        let todos = run.ctx.state.todos.snapshot();
        if let Some((kind, content)) = run.reminders.next(&todos) {
            run.emit(Event::Reminder {
                turn,
                kind,
                content: content.clone(),
            })?;
            results.push(ContentBlock::Text { text: content });
        }
        // A resume's new words join the results of the turn it went on inside.
        if let Some(prompt) = prompt {
            results.push(ContentBlock::Text { text: prompt });
        }
        push_user(
            run,
            messages,
            Message {
                role: Role::User,
                content: results,
            },
        )?;
        if end == TurnEnd::HardStopped {
            let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
            return hard_stop(run, messages, reason, QueryEnd::AbortedTools);
        }
        if let Some(stop) = stopped {
            return Ok(Ending::stopped(stop.outcome, stop.why));
        }
    }
}

/// The model's answer to the next request, as `conversation` goes on with it.
struct Asked {
    message: Message,
    stop_reason: StopReason,
    malformed_inputs: Vec<crate::model::MalformedInput>,
    turn: u32,
}

/// The model's next turn: the limits checked, the history compacted when due, the request
/// sent (compacted and sent once more when the provider finds it too long) and its answer
/// recorded; or how the conversation ended instead.
async fn ask(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut History,
    scope: &mut Scope,
    system: &str,
    tool_specs: &[ToolSpec],
) -> Result<Result<Asked, Ending>, AgentError> {
    let spec = run.spec;
    let fixed_bytes = system.len() + serde_json::to_vec(tool_specs).map_or(0, |b| b.len());
    if let Some(reason) = abort.reason() {
        let during = match messages.last() {
            Some(last)
                if last.role == Role::User
                    && last
                        .content
                        .iter()
                        .any(|block| matches!(block, ContentBlock::ToolResult { .. })) =>
            {
                QueryEnd::AbortedTools
            }
            _ => QueryEnd::AbortedStreaming,
        };
        return hard_stop(run, messages, reason, during).map(Err);
    }
    if run
        .deadline
        .is_some_and(|deadline| Instant::now() >= deadline)
    {
        return Ok(Err(timed_out(spec)));
    }
    if let Some(why) = default_denial_limit(run) {
        return Ok(Err(Ending::stopped(Outcome::DenialLimit, why)));
    }
    // One budget for the run: a sub-agent's turns are the run's too, so Agent calls cannot
    // multiply `max_turns`.
    if run.requests >= spec.limits.max_turns {
        return Ok(Err(Ending::stopped(
            Outcome::MaxTurns,
            run_turns_used_up(spec.limits.max_turns),
        )));
    }
    if scope.turns >= scope.max_turns {
        return Ok(Err(Ending::stopped(
            Outcome::MaxTurns,
            format!(
                "stopped after {} = {}",
                scope.max_turns_key(),
                scope.max_turns
            ),
        )));
    }
    let fixed = compaction::Fixed {
        system,
        tools: tool_specs,
        bytes: fixed_bytes,
    };
    let mut prompt_bytes = fixed_bytes + messages.encoded_len();
    // Sub-agents' conversations are short by their own turn limit; the run's own grows.
    if scope.subagent.is_none() && compaction::due(run, prompt_bytes, scope.turns + 1) {
        let trigger = crate::transcript::CompactionTrigger::Threshold;
        let turn = scope.turns + 1;
        match compaction::compact(run, provider, abort, messages, &fixed, turn, trigger).await? {
            compaction::Compacted::Stopped(None) => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            compaction::Compacted::Stopped(Some(ending)) => return Ok(Err(ending)),
            compaction::Compacted::Yes | compaction::Compacted::No => {}
        }
        prompt_bytes = fixed_bytes + messages.encoded_len();
    }
    let max_tokens = match run.budget.admit(prompt_bytes) {
        Ok(max_tokens) => max_tokens,
        Err(limit) => return Ok(Err(Ending::stopped(limit.outcome, limit.reason))),
    };
    // Held until the answer's cost settles it; any other end charges its worst case.
    let (max_tokens, lease) = match run.budget.reserve(prompt_bytes, max_tokens) {
        Ok(granted) => granted,
        Err(limit) => return Ok(Err(Ending::stopped(limit.outcome, limit.reason))),
    };
    scope.turns += 1;
    run.requests += 1;
    if scope.subagent.is_none() {
        run.counts.turns += 1;
    }
    let turn = scope.turns;
    run.emit(Event::ModelRequest {
        turn,
        messages: messages.len(),
        tools: tool_specs.iter().map(|tool| tool.name.clone()).collect(),
    })?;
    // A request the provider finds too long for its context is compacted and sent once
    // more, instead of ending the run.
    let mut overflowed = false;
    let response = loop {
        let request = ModelRequest {
            system,
            messages,
            tools: tool_specs,
            max_tokens,
        };
        let stop = match request_once(run, provider, &request, turn, abort).await? {
            Ok(response) => break response,
            Err(stop) => stop,
        };
        let message = match stop {
            Stop::Aborted => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            Stop::Ended(ending) => return Ok(Err(ending)),
            Stop::TooLong(message) => message,
        };
        let too_long = |why: &str| {
            Ok(Err(Ending::stopped(
                Outcome::ContextOverflow,
                format!("{message} ({why})"),
            )))
        };
        if scope.subagent.is_some() {
            return too_long("a sub-agent's conversation is not compacted");
        }
        if overflowed {
            return too_long("refused again after compacting");
        }
        if !spec.compaction.enabled {
            return too_long("compaction is off");
        }
        if run.backoff.spent() {
            return too_long(&format!(
                "{} compactions of this run failed already",
                compaction::MAX_FAILURES
            ));
        }
        overflowed = true;
        let trigger = crate::transcript::CompactionTrigger::ContextOverflow;
        match compaction::compact(run, provider, abort, messages, &fixed, turn, trigger).await? {
            compaction::Compacted::Yes => {}
            compaction::Compacted::No => {
                return too_long("compaction did not shorten it: see the compaction event");
            }
            compaction::Compacted::Stopped(None) => {
                let reason = abort.reason().unwrap_or(AbortReason::Interrupt);
                return hard_stop(run, messages, reason, QueryEnd::AbortedStreaming).map(Err);
            }
            compaction::Compacted::Stopped(Some(ending)) => return Ok(Err(ending)),
        }
    };
    let usage = response.usage.tokens();
    run.counts.usage.add(&usage);
    if response.usage.is_estimated() {
        run.counts.estimated_requests += 1;
    }
    let cost_usd = run.budget.record(&usage, prompt_bytes);
    crate::shared_budget::settle(lease, cost_usd);
    run.emit(Event::AssistantMessage {
        turn,
        content: response.content.clone(),
        stop_reason: response.stop_reason,
        usage,
        usage_source: UsageSource::of(&response.usage),
        cost_usd,
    })?;
    let ModelResponse {
        content,
        stop_reason,
        malformed_inputs,
        ..
    } = response;
    Ok(Ok(Asked {
        message: Message {
            role: Role::Assistant,
            content,
        },
        stop_reason,
        malformed_inputs,
        turn,
    }))
}

/// A resumed run: its state restored from the transcript, `run_resumed` recorded, and the
/// conversation to go on from (a call the run never answered gets its result first).
fn resumed(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    mut resume: Resume,
) -> Result<History, AgentError> {
    let mut answers = std::mem::take(&mut resume.answers);
    let spec = run.spec;
    run.counts = resume.counts;
    run.requests = resume.requests;
    run.budget.restore(resume.counts.usage, resume.cost_usd);
    run.calls_by_tool = resume.calls_by_tool;
    run.denials = resume.denials;
    run.effects.measured = resume.effects.measured;
    run.effects.changed = resume.effects.changed;
    run.effects.exceeded = resume.effects.exceeded;
    run.compactions = resume.compactions;
    for (tool, input, decision) in &resume.refused {
        run.refusals.remember(None, tool, input, decision);
    }
    if !resume.todos.is_empty() {
        let snapshot = run.ctx.state.todos.replace(resume.todos.clone());
        run.reminders.shown(snapshot.version);
    }
    let deferred: Vec<ToolName> = run
        .ctx
        .state
        .deferred
        .catalogue()
        .into_iter()
        .map(|definition| definition.name)
        .filter(|name| resume.offered_tools.contains(&name.to_string()))
        .collect();
    // In the order the last request offered them, so the tools array is the same again.
    let mut loaded: Vec<ToolName> = resume
        .offered_tools
        .iter()
        .filter_map(|name| {
            deferred
                .iter()
                .find(|tool| tool.to_string() == *name)
                .cloned()
        })
        .collect();
    loaded.dedup();
    run.ctx.state.deferred.load(&loaded);
    // The transcript only says the run had switched; the model switched to is the
    // operator's fallback (this invocation's), never a name the transcript gives.
    if let Some(to) = &resume.fallback_to
        && let Some(fallback) = run.fallback.take_if(|fallback| fallback.name == *to)
    {
        provider.switch_model(&fallback.name);
        run.budget.reprice(fallback.pricing);
        run.answering = fallback.name;
    }
    // The scripted model answers from the turn after the last one recorded.
    provider.resume_script(resume.responses);
    let mut messages = History::new(resume.messages);
    let mut prompt = spec.resume_prompt.clone();
    let after_turn = resume.interrupted.and_then(|stopped| {
        let calls = !stopped.calls.is_empty();
        // A final answer the run never concluded is superseded by new words.
        if !calls && prompt.is_some() {
            messages.push(stopped.message);
            return None;
        }
        let settled = stopped
            .calls
            .into_iter()
            .filter_map(|(id, state)| {
                let answer = answers.remove(&id);
                turn::Settled::of(state, answer).map(|settled| (id, settled))
            })
            .collect();
        Some(PendingTurn {
            message: stopped.message,
            stop_reason: stopped.stop_reason,
            settled,
            prompt: if calls { prompt.take() } else { None },
        })
    });
    if resume.torn {
        tracing::warn!(
            "the transcript's last line was cut short (a run killed while writing it): its {} bytes are dropped and the run goes on after the line before it",
            resume.torn_bytes
        );
    }
    run.emit(Event::RunResumed {
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        after_seq: resume.last_seq,
        mode: spec.mode,
        policy: Box::new(spec.policy_summary.clone()),
        model: spec.model.clone(),
        messages: messages.len(),
        prompt: spec.resume_prompt.clone(),
        requests: run.requests,
        cost_usd: run.budget.total_cost_usd(),
        loaded_tools: loaded.iter().map(ToString::to_string).collect(),
        todos: resume.todos,
        dropped_torn_bytes: resume.torn_bytes,
        turns: resume.counts.turns,
    })?;
    run.pending = after_turn;
    if let Some(prompt) = prompt {
        let text = ContentBlock::Text { text: prompt };
        match messages.last_mut() {
            // Roles alternate: the new words join the last user message.
            Some(last) if last.role == Role::User => {
                last.content.push(text.clone());
                run.emit(Event::UserMessage {
                    content: vec![text],
                    extends: true,
                    replaces: None,
                })?;
            }
            _ => push_user(
                run,
                &mut messages,
                Message {
                    role: Role::User,
                    content: vec![text],
                },
            )?,
        }
    }
    Ok(messages)
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

/// The connections the sandbox's proxy saw during the batch, as transcript events; refused
/// ones are kept for SARIF.
fn record_network(run: &mut Loop<'_>) -> Result<(), AgentError> {
    let Some(sandbox) = run.ctx.sandbox.clone() else {
        return Ok(());
    };
    for connection in sandbox.take_proxy_log() {
        if !connection.allowed {
            run.network_refusals.push(connection.clone());
        }
        run.emit(Event::NetworkConnection { connection })?;
    }
    Ok(())
}

/// The queued messages as text blocks for the next user message, each recorded with where
/// it went.
fn drain_queue(
    run: &mut Loop<'_>,
    disposition: Disposition,
) -> Result<Vec<ContentBlock>, AgentError> {
    let Some(queue) = &run.spec.queue else {
        return Ok(Vec::new());
    };
    let mut blocks = Vec::new();
    for entry in queue.drain() {
        let content = match entry {
            QueuedInput::Message(content) => content,
            QueuedInput::Skipped { line, reason } => {
                run.emit(Event::InputSkipped {
                    line,
                    reason: reason.to_string(),
                })?;
                continue;
            }
        };
        run.emit(Event::QueuedMessage {
            content: content.clone(),
            disposition,
        })?;
        blocks.push(ContentBlock::Text { text: content });
    }
    Ok(blocks)
}

/// SIGINT/SIGTERM: the history gets "[Request interrupted by user]" (in the last user
/// message when there is one, so roles keep alternating), the transcript says where the
/// query stood, and the run ends.
fn hard_stop(
    run: &mut Loop<'_>,
    messages: &mut History,
    reason: AbortReason,
    during: QueryEnd,
) -> Result<Ending, AgentError> {
    let text = ContentBlock::Text {
        text: INTERRUPTED_BY_USER.to_string(),
    };
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push(text.clone());
            run.emit(Event::UserMessage {
                content: vec![text],
                extends: true,
                replaces: None,
            })?;
        }
        _ => push_user(
            run,
            messages,
            Message {
                role: Role::User,
                content: vec![text],
            },
        )?,
    }
    run.emit(Event::QueryAborted {
        reason: during,
        by: match reason {
            AbortReason::Interrupt => AbortCause::Sigint,
            AbortReason::Terminate => AbortCause::Sigterm,
            AbortReason::Hangup => AbortCause::Sighup,
        },
        message: Some(INTERRUPTED_BY_USER.to_string()),
    })?;
    Ok(Ending::bare(interrupted(reason)))
}

/// What the model is told when its answer hit `max_tokens` with no tool call in it.
const CUT_OFF: &str = "Your last response was cut off at the max_tokens limit. \
Continue where it stopped; keep each response and tool input short.";

fn timed_out(spec: &RunSpec) -> Ending {
    let limit = spec.limits.timeout.unwrap_or_default();
    Ending::stopped(
        Outcome::Timeout,
        format!(
            "stopped: limits.timeout = {}s of wall clock ran out",
            limit.as_secs_f64()
        ),
    )
}

/// Resolves when `deadline` passes; never, without one.
async fn deadline_passed(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Why a request got no response.
enum Stop {
    /// A signal; the caller records it.
    Aborted,
    /// The run ends so (its deadline, the provider's failure).
    Ended(Ending),
    /// The provider refused the request as too long for its context (its message).
    TooLong(String),
}

/// One model request, raced against the abort and the run's deadline; the provider's retry
/// notices become `api_retry` events as they happen, and an unavailable model hands over to
/// the fallback.
async fn request_once(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    request: &ModelRequest<'_>,
    turn: u32,
    abort: &AbortSignal,
) -> Result<Result<ModelResponse, Stop>, AgentError> {
    loop {
        let result = match attempt(run, provider, request, turn, abort).await? {
            Ok(result) => result,
            Err(None) => return Ok(Err(Stop::Aborted)),
            Err(Some(ending)) => return Ok(Err(Stop::Ended(ending))),
        };
        let err = match result {
            Ok(response) => return Ok(Ok(response)),
            Err(err) if err.is_context_overflow() => {
                return Ok(Err(Stop::TooLong(err.to_string())));
            }
            Err(err) => err,
        };
        let switched = fallback::switch(
            &mut run.fallback,
            &mut run.answering,
            provider,
            &mut run.budget,
            &err,
            turn,
        );
        match switched {
            Some(event) => run.emit(event)?,
            None => {
                return Ok(Err(Stop::Ended(Ending::stopped(
                    Outcome::ProviderError,
                    err.to_string(),
                ))));
            }
        }
    }
}

/// The provider's answer, or how the run ended while it was awaited.
type Attempted = Result<Result<ModelResponse, crate::model::ProviderError>, Option<Ending>>;

/// The provider's answer to one request, its retries included; `Err` for the abort (`None`)
/// or the run's deadline.
async fn attempt(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    request: &ModelRequest<'_>,
    turn: u32,
    abort: &AbortSignal,
) -> Result<Attempted, AgentError> {
    let (sink, mut notices) = mpsc::unbounded_channel();
    let call = provider.complete(request, &sink);
    tokio::pin!(call);
    let deadline = deadline_passed(run.deadline);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            biased;
            Some(notice) = notices.recv() => record_notice(run, turn, notice)?,
            result = &mut call => break result,
            _ = abort.aborted() => return Ok(Err(None)),
            () = &mut deadline => return Ok(Err(Some(timed_out(run.spec)))),
        }
    };
    while let Ok(notice) = notices.try_recv() {
        record_notice(run, turn, notice)?;
    }
    Ok(Ok(result))
}

/// What the provider said while a request was in flight, as a transcript event; a switch
/// to whole responses is also a warning on stderr, as the run's behaviour changed.
fn record_notice(run: &mut Loop<'_>, turn: u32, notice: ProviderEvent) -> Result<(), AgentError> {
    match notice {
        ProviderEvent::Retry(retry) => run.emit(Event::ApiRetry { turn, retry }),
        ProviderEvent::StreamingOff { reason } => {
            tracing::warn!(
                "{}",
                crate::neutral::log_line(&format!(
                    "the model server cannot stream tool calls ({reason}); this request and the rest of the run's are sent with stream: false (model.stream: false says so from the start)"
                ))
            );
            run.emit(Event::StreamingOff { turn, reason })
        }
    }
}

/// `proposed-rules.yaml` in the run's folder, when the classifier denied anything.
fn write_proposed_rules(spec: &RunSpec, proposals: &[ProposedRule]) -> Result<(), AgentError> {
    if proposals.is_empty() {
        return Ok(());
    }
    let path = spec.out_dir.join("proposed-rules.yaml");
    crate::out_dir::write_atomic(
        &path,
        spec.redactor
            .redact(&proposed_rules_yaml(proposals))
            .as_bytes(),
    )
    .map_err(|err| AgentError::Transcript {
        path: err.path,
        source: err.source,
    })
}

/// Whether the run's refusals have reached a limit: a model that keeps hitting the gate is
/// going nowhere, and every further turn only burns budget.
fn denial_limit(run: &Loop<'_>) -> Option<auto::Stop> {
    denial_limit_reason(run).map(|why| auto::Stop {
        outcome: Outcome::DenialLimit,
        why,
    })
}

fn denial_limit_reason(run: &Loop<'_>) -> Option<String> {
    let limits = &run.spec.limits;
    if let Some(max) = limits.max_denials.filter(|max| run.counts.denials >= *max) {
        return Some(format!(
            "stopped after {} refused calls (limits.max_denials = {max})",
            run.counts.denials
        ));
    }
    if let Some(max) = limits
        .max_consecutive_denials
        .filter(|max| run.consecutive_denials >= *max)
    {
        return Some(format!(
            "stopped after {} refused calls in a row (limits.max_consecutive_denials = {max})",
            run.consecutive_denials
        ));
    }
    None
}

/// The defaults of the denial limits the task left unset, checked before a request: a model
/// that keeps retrying refused calls stops here, while one response's batch of refused calls
/// was answered whole.
fn default_denial_limit(run: &Loop<'_>) -> Option<String> {
    let limits = &run.spec.limits;
    if limits.max_denials.is_none() && run.counts.denials >= crate::task::DEFAULT_MAX_DENIALS {
        return Some(format!(
            "stopped after {} refused calls (limits.max_denials defaults to {})",
            run.counts.denials,
            crate::task::DEFAULT_MAX_DENIALS
        ));
    }
    if limits.max_consecutive_denials.is_none()
        && run.consecutive_denials >= crate::task::DEFAULT_MAX_CONSECUTIVE_DENIALS
    {
        return Some(format!(
            "stopped after {} refused calls in a row (limits.max_consecutive_denials defaults to {})",
            run.consecutive_denials,
            crate::task::DEFAULT_MAX_CONSECUTIVE_DENIALS
        ));
    }
    None
}

/// The run's tools (the task's, then the MCP servers'), each with whether it is deferred.
fn pool<'t>(spec: &'t RunSpec, mcp: &'t McpHub) -> Vec<(&'t Arc<dyn Tool>, bool)> {
    spec.tools
        .iter()
        .map(|tool| (tool, spec.deferred_tools.contains(&tool.name())))
        .chain(mcp.tools())
        .collect()
}

fn definition(tool: &Arc<dyn Tool>) -> ToolDefinition {
    ToolDefinition {
        name: tool.name(),
        description: tool.description().into_owned(),
        input_schema: tool.input_schema(),
    }
}

/// The definitions of the run's deferred tools, for ToolSearch and the system prompt's index.
fn deferred_catalogue(spec: &RunSpec, mcp: &McpHub) -> Vec<ToolDefinition> {
    pool(spec, mcp)
        .into_iter()
        .filter(|(_, deferred)| *deferred)
        .map(|(tool, _)| definition(tool))
        .collect()
}

/// This turn's tools: the pool's tools that are not deferred, ToolSearch when some are,
/// then the deferred tools ToolSearch has loaded, in the order it loaded them (S7).
fn offered_tools(spec: &RunSpec, mcp: &McpHub, loaded: &[ToolName]) -> ToolRegistry {
    let pool = pool(spec, mcp);
    let any_deferred = pool.iter().any(|(_, deferred)| *deferred);
    let search = any_deferred
        .then(|| crate::tools::builtin(&ToolName::ToolSearch))
        .flatten();
    let immediate = pool
        .iter()
        .filter(|(tool, deferred)| !deferred && tool.name() != ToolName::ToolSearch)
        .map(|(tool, _)| Arc::clone(tool));
    let loaded = loaded.iter().filter_map(|name| {
        pool.iter()
            .find(|(tool, deferred)| *deferred && tool.name() == *name)
            .map(|(tool, _)| Arc::clone(tool))
    });
    ToolRegistry::new(immediate.chain(search).chain(loaded))
}

/// Why the run stops before its first model call: `fail_on` has `mcp_start`, and a server
/// that is not `optional` failed to start, or one the task names was not started (held back
/// for an operator's approval, or kept off by the policy) while no server of its name runs.
fn mcp_start_failure(run: &Loop<'_>) -> Option<String> {
    if !run.spec.fail_on.contains(crate::task::FailOn::McpStart) {
        return None;
    }
    let failed = run
        .mcp
        .failed()
        .filter(|status| !status.optional)
        .map(|status| {
            format!(
                "{} ({})",
                status.name,
                status.error.as_deref().unwrap_or("no reason given")
            )
        });
    let missing = run
        .spec
        .mcp
        .skipped
        .iter()
        .filter(|skipped| skipped.required())
        .map(|skipped| format!("{} ({})", skipped.name, skipped.reason));
    let stopped: Vec<String> = failed.chain(missing).collect();
    (!stopped.is_empty()).then(|| {
        format!(
            "MCP servers did not start: {}; fail_on has mcp_start",
            stopped.join("; ")
        )
    })
}

/// The servers the model was meant to have and has not, each with why in a few words: every
/// server that failed to start, and each the task names that was not started while no server
/// of its name runs. The model is told, so it does not look for their tools in vain.
fn unavailable_servers<'a>(spec: &'a RunSpec, mcp: &'a McpHub) -> Vec<(&'a str, &'static str)> {
    let failed = mcp
        .failed()
        .map(|status| (status.name.as_str(), "it failed to start"));
    let missing = spec
        .mcp
        .skipped
        .iter()
        .filter(|skipped| skipped.missing)
        .map(|skipped| {
            let held = spec
                .mcp
                .held_back
                .iter()
                .any(|held| held.name == skipped.name && held.origin == skipped.origin);
            let why = if held {
                "it is held back until the operator approves it"
            } else {
                "the policy keeps it off"
            };
            (skipped.name.as_str(), why)
        });
    failed.chain(missing).collect()
}

/// The servers' notifications since the last turn, into the transcript; servers whose tool
/// list changed are listed again, so the next request offers what they offer now.
async fn refresh_mcp(run: &mut Loop<'_>) -> Result<(), AgentError> {
    for (server, notice) in run.mcp.notices() {
        run.emit(Event::McpNotification { server, notice })?;
    }
    let refreshed = run.mcp.refresh(&run.spec.rules).await;
    for (server, result) in refreshed {
        let covered = ToolName::Mcp {
            server: server.clone(),
            tool: None,
        };
        let deferred: Vec<ToolDefinition> = run
            .mcp
            .tools()
            .filter(|(tool, deferred)| *deferred && covered.covers(&tool.name()))
            .map(|(tool, _)| definition(tool))
            .collect();
        run.ctx.state.deferred.replace(&covered, deferred);
        let (tools, error) = match result {
            Ok(tools) => (tools, None),
            Err(err) => (Vec::new(), Some(err.to_string())),
        };
        run.emit(Event::McpTools {
            server,
            tools,
            error,
        })?;
    }
    Ok(())
}

/// The per-message budget (S8): when the results of this turn exceed
/// `limits.message_result_chars`, the largest are offloaded and replaced by previews. Runs
/// once, before the message is first sent; it is never revisited, so every later request
/// repeats this message byte for byte.
fn fit_message_budget(
    run: &mut Loop<'_>,
    turn: u32,
    results: &mut [ContentBlock],
    exempt: &std::collections::HashSet<String>,
) -> Result<(), AgentError> {
    let sizes: Vec<Option<usize>> = results
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } if !exempt.contains(tool_use_id) => Some(content.chars().count()),
            _ => None,
        })
        .collect();
    let replace = crate::results::over_budget(&sizes, run.spec.limits.message_result_chars);
    if replace.is_empty() {
        return Ok(());
    }
    let chars_before: usize = sizes.iter().flatten().sum();
    let mut replaced = Vec::new();
    for index in replace {
        if let Some(ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        }) = results.get_mut(index)
        {
            let chars = content.chars().count();
            let fitted = run
                .results
                .offload(tool_use_id, content, crate::results::KEPT_CHARS);
            *content = run.keep(fitted);
            replaced.push(crate::transcript::ReplacedResult {
                id: tool_use_id.clone(),
                chars,
                content: content.clone(),
            });
        }
    }
    let chars_after = results
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } if !exempt.contains(tool_use_id) => content.chars().count(),
            _ => 0,
        })
        .sum();
    run.emit(Event::MessageBudget {
        turn,
        replaced,
        chars_before,
        chars_after,
    })
}

/// The tools array of one request, in the registry's offer order.
fn tool_specs(registry: &ToolRegistry) -> Vec<ToolSpec> {
    registry
        .tools()
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_string(),
            description: tool.description().into_owned(),
            input_schema: tool.input_schema(),
        })
        .collect()
}
