//! The loop (S2): ask the model, pass each tool call through the gate, run what is allowed,
//! feed every result back, until the model stops or a limit does; then the task's checks.
//! One orchestrator: the gate decides, the tools act, nothing else does either.

mod budget;
mod checks;
mod hooks;
pub mod verdict;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use budget::Budget;
pub use checks::millis;

use crate::exit::ExitCode;
use crate::hooks::Hook;
use crate::model::{
    ContentBlock, Message, ModelRequest, ModelResponse, Provider, ProviderEvent, Role, StopReason,
    ToolSpec,
};
use crate::policy::{
    self, Decision, PermissionContext, PermissionDecision, PermissionMode, RuleSet, Workspace,
};
use crate::redact::Redactor;
use crate::results::ResultStore;
use crate::task::{Check, FailOnSet, Task};
use crate::tools::{
    AbortReason, AbortSignal, FileStateCache, Tool, ToolContext, ToolError, ToolLimits,
};
use crate::transcript::{
    CheckOutcome, Event, ModelSummary, Outcome, PolicySummary, ResultStatus, RunCounts,
    TaskSummary, Transcript,
};

/// Everything a run needs, resolved and validated before the first model call.
pub struct RunSpec {
    pub run_id: String,
    pub task: Task,
    pub mode: PermissionMode,
    pub rules: RuleSet,
    pub policy_summary: PolicySummary,
    pub workspace: Arc<Workspace>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub out_dir: PathBuf,
    pub max_turns: u32,
    pub limits: ToolLimits,
    /// PreToolUse / PostToolUse hooks in force, managed policy's first.
    pub hooks: Vec<Hook>,
    /// The task's `fail_on`, or `--fail-on`.
    pub fail_on: FailOnSet,
    /// Applied to everything the run writes.
    pub redactor: Arc<Redactor>,
}

/// A refused call, as reports list it.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub id: String,
    pub tool: String,
    pub input: Value,
    pub decision: PermissionDecision,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CheckRecord {
    pub check: Check,
    /// 1 for the first run of the check; retries count up.
    pub attempt: u32,
    pub outcome: CheckOutcome,
}

/// What a finished run tells the reports and the CLI.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run_id: String,
    pub task_name: String,
    pub model: ModelSummary,
    pub mode: PermissionMode,
    pub outcome: Outcome,
    pub exit_code: ExitCode,
    pub counts: RunCounts,
    /// Calls per tool name, in first-call order.
    pub calls_by_tool: Vec<(String, u32)>,
    pub denials: Vec<Denial>,
    pub checks: Vec<CheckRecord>,
    pub final_message: Option<String>,
    pub error: Option<String>,
    /// `None` when the model's price is unknown.
    pub total_cost_usd: Option<f64>,
    pub duration_ms: u64,
    pub transcript: PathBuf,
    pub fail_on: FailOnSet,
    pub task_file: PathBuf,
    pub workdir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot write the transcript {path}: {source}")]
    Transcript {
        path: PathBuf,
        source: std::io::Error,
    },
}

const SYSTEM_PROMPT: &str = "You are a coding agent run by tollgate, unattended, in a CI job. \
Nobody is present to answer questions or approve actions. Work inside the working directory {workdir}. \
Every tool call passes a permission policy; a refused call comes back as an error result that says why. \
Do not repeat a refused call: find an allowed way, or stop and explain what you could not do. \
When the task is done, reply with a short summary of what you did and make no tool call.";

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Success => ExitCode::Success,
            Outcome::ChecksFailed
            | Outcome::MaxTurns
            | Outcome::MaxBudgetUsd
            | Outcome::MaxInputTokens
            | Outcome::MaxOutputTokens
            | Outcome::Timeout
            | Outcome::Refusal => ExitCode::TaskFailed,
            Outcome::DenialLimit | Outcome::PolicyDenied => ExitCode::PolicyStop,
            Outcome::ProviderError => ExitCode::ProviderError,
            Outcome::Interrupted => ExitCode::Interrupted,
            Outcome::Terminated => ExitCode::Terminated,
        }
    }
}

fn interrupted(reason: AbortReason) -> Outcome {
    match reason {
        AbortReason::Interrupt => Outcome::Interrupted,
        AbortReason::Terminate => Outcome::Terminated,
    }
}

struct Loop<'a> {
    spec: &'a RunSpec,
    transcript: Transcript,
    ctx: ToolContext,
    results: ResultStore,
    counts: RunCounts,
    calls_by_tool: Vec<(String, u32)>,
    denials: Vec<Denial>,
    budget: Budget,
    /// When `limits.timeout` runs out.
    deadline: Option<Instant>,
    /// Refusals since the last allowed call.
    consecutive_denials: u32,
}

impl Loop<'_> {
    fn emit(&mut self, event: Event) -> Result<(), AgentError> {
        self.transcript
            .emit(&event)
            .map_err(|source| AgentError::Transcript {
                path: self.transcript.path().to_path_buf(),
                source,
            })
    }
}

/// Runs the task. Every tool_use gets exactly one tool_result, whatever happens.
pub async fn run(
    spec: RunSpec,
    mut provider: Provider,
    abort: AbortSignal,
) -> Result<RunReport, AgentError> {
    let started = Instant::now();
    let transcript_path = spec.out_dir.join("transcript.jsonl");
    let transcript = Transcript::create(&transcript_path)
        .map_err(|source| AgentError::Transcript {
            path: transcript_path.clone(),
            source,
        })?
        .redacting(spec.redactor.clone());
    let ctx = ToolContext {
        workspace: spec.workspace.clone(),
        limits: spec.limits,
        abort: abort.clone(),
        files: FileStateCache::default(),
    };
    let model = ModelSummary {
        provider: spec.task.model.provider.to_string(),
        name: spec.task.model.name.clone(),
    };
    let mut run = Loop {
        spec: &spec,
        transcript,
        ctx,
        results: ResultStore::new(spec.out_dir.join("results")).redacting(spec.redactor.clone()),
        counts: RunCounts::default(),
        calls_by_tool: Vec::new(),
        denials: Vec::new(),
        budget: Budget::new(
            spec.task.limits,
            spec.task.model.pricing(),
            spec.task.model.max_tokens,
        ),
        deadline: spec.task.limits.timeout.map(|limit| started + limit),
        consecutive_denials: 0,
    };
    run.emit(Event::RunStarted {
        run_id: spec.run_id.clone(),
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        task: TaskSummary {
            name: spec.task.name.clone(),
            file: spec.task.file.clone(),
        },
        mode: spec.mode,
        policy: spec.policy_summary.clone(),
        model: model.clone(),
        workdir: spec.workspace.workdir.clone(),
        tools: spec
            .tools
            .iter()
            .map(|tool| tool.name().to_string())
            .collect(),
        max_turns: spec.max_turns,
    })?;

    // Checks with `retry.feed_back` send their failures back to the model and the
    // conversation goes on, its history kept, until the checks pass or no retry is left.
    let mut messages = vec![Message::user_text(spec.task.prompt.clone())];
    let mut checks = Vec::new();
    let (mut outcome, final_message, error) = loop {
        let ended = conversation(&mut run, &mut provider, &abort, &mut messages).await?;
        // After a limit the checks still say where the work stands; after the wall clock
        // ran out there is no time left for them.
        if !matches!(
            ended.0,
            Outcome::Success
                | Outcome::MaxTurns
                | Outcome::MaxBudgetUsd
                | Outcome::MaxInputTokens
                | Outcome::MaxOutputTokens
                | Outcome::Refusal
        ) {
            break ended;
        }
        match checks::run_round(&mut run, &abort, &mut checks).await? {
            Some(feedback) if ended.0 == Outcome::Success => {
                messages.push(Message::user_text(feedback));
            }
            _ => break ended,
        }
    };
    for record in checks::final_attempts(&checks) {
        if record.outcome.passed {
            run.counts.checks_passed += 1;
        } else {
            run.counts.checks_failed += 1;
        }
    }
    if let Some(reason) = abort.reason() {
        outcome = interrupted(reason);
    } else if outcome == Outcome::Success && run.counts.checks_failed > 0 {
        outcome = Outcome::ChecksFailed;
    }
    let (outcome, exit_code) = verdict::decide(outcome, &run.denials, &spec.fail_on);
    let duration_ms = millis(started.into_std());
    let total_cost_usd = run.budget.total_cost_usd();
    run.emit(Event::RunFinished {
        outcome,
        exit_code: exit_code.code(),
        counts: run.counts,
        total_cost_usd,
        duration_ms,
        error: error.clone(),
        final_message: final_message.clone(),
        fail_on: spec.fail_on.kinds().to_vec(),
        redactions: spec.redactor.count(),
    })?;
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
        total_cost_usd,
        duration_ms,
        transcript: transcript_path,
        fail_on: spec.fail_on.clone(),
        task_file: spec.task.file.clone(),
        workdir: spec.workspace.workdir.clone(),
    })
}

type Ending = (Outcome, Option<String>, Option<String>);

/// The model ↔ tools exchange. Returns how it ended, the model's last words and any error.
async fn conversation(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    abort: &AbortSignal,
    messages: &mut Vec<Message>,
) -> Result<Ending, AgentError> {
    let spec = run.spec;
    let system = SYSTEM_PROMPT.replace("{workdir}", &spec.workspace.workdir.display().to_string());
    let tool_specs: Vec<ToolSpec> = spec
        .tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_string(),
            description: tool.description().to_string(),
            input_schema: tool.input_schema(),
        })
        .collect();
    let tool_names: Vec<String> = tool_specs.iter().map(|t| t.name.clone()).collect();
    let fixed_bytes = system.len() + serde_json::to_vec(&tool_specs).map_or(0, |b| b.len());
    loop {
        if let Some(reason) = abort.reason() {
            return Ok((interrupted(reason), None, None));
        }
        if run
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            return Ok(timed_out(spec));
        }
        if run.counts.turns >= spec.max_turns {
            return Ok((
                Outcome::MaxTurns,
                None,
                Some(format!("stopped after max_turns = {}", spec.max_turns)),
            ));
        }
        let prompt_bytes = fixed_bytes + serde_json::to_vec(&messages).map_or(0, |b| b.len());
        let max_tokens = match run.budget.admit(prompt_bytes) {
            Ok(max_tokens) => max_tokens,
            Err(limit) => return Ok((limit.outcome, None, Some(limit.reason))),
        };
        run.counts.turns += 1;
        let turn = run.counts.turns;
        run.emit(Event::ModelRequest {
            turn,
            messages: messages.len(),
            tools: tool_names.clone(),
        })?;
        let request = ModelRequest {
            system: &system,
            messages,
            tools: &tool_specs,
            max_tokens,
        };
        let response = match request_once(run, provider, &request, turn, abort).await? {
            Ok(response) => response,
            Err(ending) => return Ok(ending),
        };
        run.counts.usage.add(&response.usage);
        let cost_usd = run.budget.record(&response.usage, prompt_bytes);
        run.emit(Event::AssistantMessage {
            turn,
            content: response.content.clone(),
            stop_reason: response.stop_reason,
            usage: response.usage,
            cost_usd,
        })?;
        let ModelResponse {
            content,
            stop_reason,
            malformed_inputs,
            ..
        } = response;
        let assistant = Message {
            role: Role::Assistant,
            content,
        };
        let calls: Vec<(String, String, Value)> = assistant
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        let text = assistant.text();
        messages.push(assistant);
        if calls.is_empty() {
            match stop_reason {
                StopReason::Refusal => {
                    return Ok((
                        Outcome::Refusal,
                        Some(text),
                        Some("the model declined the task (stop reason: refusal)".into()),
                    ));
                }
                // A server-side pause: sending the turn back as it is lets the model go on.
                StopReason::PauseTurn => continue,
                StopReason::MaxTokens => {
                    messages.push(Message::user_text(CUT_OFF));
                    continue;
                }
                StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => {
                    return Ok((Outcome::Success, Some(text), None));
                }
            }
        }
        let mut results = Vec::with_capacity(calls.len());
        let mut stopped: Option<String> = None;
        for (id, name, input) in calls {
            let malformed = malformed_inputs
                .iter()
                .find(|bad| bad.id == id)
                .map(|bad| bad.message.as_str());
            let (content, is_error) = match &stopped {
                // The run is over, but every tool_use still gets its one result.
                Some(why) => skip(run, &id, &name, input, why)?,
                None => execute(run, &id, &name, input, malformed).await?,
            };
            results.push(ContentBlock::ToolResult {
                tool_use_id: id,
                content,
                is_error,
            });
            if stopped.is_none() {
                stopped = denial_limit(run);
            }
        }
        messages.push(Message {
            role: Role::User,
            content: results,
        });
        if let Some(why) = stopped {
            return Ok((Outcome::DenialLimit, None, Some(why)));
        }
    }
}

/// What the model is told when its answer hit `max_tokens` with no tool call in it.
const CUT_OFF: &str = "Your last response was cut off at the max_tokens limit. \
Continue where it stopped; keep each response and tool input short.";

fn timed_out(spec: &RunSpec) -> Ending {
    let limit = spec.task.limits.timeout.unwrap_or_default();
    (
        Outcome::Timeout,
        None,
        Some(format!(
            "stopped: limits.timeout = {}s of wall clock ran out",
            limit.as_secs_f64()
        )),
    )
}

/// Resolves when `deadline` passes; never, without one.
async fn deadline_passed(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One model request, raced against the abort and the run's deadline; the provider's retry
/// notices become `api_retry` events as they happen. `Err` inside ends the run.
async fn request_once(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    request: &ModelRequest<'_>,
    turn: u32,
    abort: &AbortSignal,
) -> Result<Result<ModelResponse, Ending>, AgentError> {
    let (sink, mut notices) = mpsc::unbounded_channel();
    let call = provider.complete(request, &sink);
    tokio::pin!(call);
    let deadline = deadline_passed(run.deadline);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            biased;
            Some(ProviderEvent::Retry(retry)) = notices.recv() => {
                run.emit(Event::ApiRetry { turn, retry })?;
            }
            result = &mut call => break result,
            reason = abort.aborted() => return Ok(Err((interrupted(reason), None, None))),
            () = &mut deadline => return Ok(Err(timed_out(run.spec))),
        }
    };
    while let Ok(ProviderEvent::Retry(retry)) = notices.try_recv() {
        run.emit(Event::ApiRetry { turn, retry })?;
    }
    Ok(result.map_err(|err| (Outcome::ProviderError, None, Some(err.to_string()))))
}

/// Whether the run's refusals have reached a limit: a model that keeps hitting the gate is
/// going nowhere, and every further turn only burns budget.
fn denial_limit(run: &Loop<'_>) -> Option<String> {
    let limits = &run.spec.task.limits;
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

/// A call the run will not make because it has stopped.
fn skip(
    run: &mut Loop<'_>,
    id: &str,
    name: &str,
    input: Value,
    why: &str,
) -> Result<(String, bool), AgentError> {
    run.emit(Event::ToolCall {
        id: id.to_string(),
        tool: name.to_string(),
        input,
    })?;
    let content = format!("[not run: {why}]");
    run.emit(Event::ToolResult {
        id: id.to_string(),
        tool: name.to_string(),
        status: ResultStatus::Cancelled,
        is_error: true,
        content: content.clone(),
        duration_ms: 0,
    })?;
    Ok((content, true))
}

/// One call through validation, the gate and the tool. Always yields exactly one result.
async fn execute(
    run: &mut Loop<'_>,
    id: &str,
    name: &str,
    input: Value,
    malformed: Option<&str>,
) -> Result<(String, bool), AgentError> {
    run.counts.tool_calls += 1;
    match run.calls_by_tool.iter_mut().find(|(tool, _)| tool == name) {
        Some((_, count)) => *count += 1,
        None => run.calls_by_tool.push((name.to_string(), 1)),
    }
    run.emit(Event::ToolCall {
        id: id.to_string(),
        tool: name.to_string(),
        input: input.clone(),
    })?;
    let started = Instant::now();
    let tool = run
        .spec
        .tools
        .iter()
        .find(|tool| tool.name().to_string() == name)
        .cloned();
    let (status, content) = match tool {
        _ if run.ctx.abort.is_aborted() => (
            ResultStatus::Cancelled,
            "[Request interrupted by user]".to_string(),
        ),
        None => {
            let decision = PermissionDecision {
                decision: Decision::Deny,
                step: policy::Step::Pool,
                layer: policy::Layer::Tool,
                rule: None,
                reason: format!(
                    "No such tool available: {name}. Available tools: {}",
                    available(run)
                ),
                updated_input: None,
                asked: false,
            };
            record_decision(run, id, name, &input, decision.clone())?;
            (ResultStatus::Denied, decision.reason)
        }
        // A garbled input from the model is answered like a schema violation: an error
        // result that says what was wrong, and the run goes on.
        Some(tool) => match (malformed, tool.validate_input(&input)) {
            (Some(problem), _) => (ResultStatus::Error, problem.to_string()),
            (None, Err(err)) => (ResultStatus::Error, err.0),
            (None, Ok(())) => gate_and_call(run, id, name, tool, input).await?,
        },
    };
    let is_error = status != ResultStatus::Success;
    if status == ResultStatus::Error {
        run.counts.tool_errors += 1;
    }
    run.emit(Event::ToolResult {
        id: id.to_string(),
        tool: name.to_string(),
        status,
        is_error,
        content: content.clone(),
        duration_ms: millis(started.into_std()),
    })?;
    Ok((content, is_error))
}

/// The gate's decision and the PreToolUse hooks, then the call if they allow, bounded by
/// `limits.tool_timeout` and by what is left of the run's wall clock; then PostToolUse.
async fn gate_and_call(
    run: &mut Loop<'_>,
    id: &str,
    name: &str,
    tool: Arc<dyn Tool>,
    input: Value,
) -> Result<(ResultStatus, String), AgentError> {
    let ctx = PermissionContext {
        mode: run.spec.mode,
        rules: &run.spec.rules,
        workspace: &run.spec.workspace,
    };
    let decision = policy::decide(tool.as_ref(), &input, &ctx);
    let (decision, input) = hooks::pre_tool_use(run, id, tool.as_ref(), input, decision).await?;
    record_decision(run, id, name, &input, decision.clone())?;
    if !decision.is_allow() {
        return Ok((
            ResultStatus::Denied,
            format!("Permission denied: {}", decision.reason),
        ));
    }
    let input = decision.updated_input.clone().unwrap_or(input);
    let limits = run.spec.task.limits;
    let tool_deadline = limits.tool_timeout.map(|limit| Instant::now() + limit);
    let (deadline, why, limit) = match (tool_deadline, run.deadline) {
        (Some(tool), Some(whole)) if whole < tool => {
            (Some(whole), "the run's limits.timeout", limits.timeout)
        }
        (Some(tool), _) => (Some(tool), "limits.tool_timeout", limits.tool_timeout),
        (None, whole) => (whole, "the run's limits.timeout", limits.timeout),
    };
    let call = tool.call(input.clone(), &run.ctx);
    let result = match deadline {
        None => call.await,
        Some(deadline) => tokio::time::timeout_at(deadline, call)
            .await
            .unwrap_or_else(|_| {
                Err(ToolError::new(format!(
                    "The tool call was stopped: {why} = {}s ran out",
                    limit.map_or(0.0, |limit: Duration| limit.as_secs_f64())
                )))
            }),
    };
    let (status, content) = match result {
        Ok(output) => (ResultStatus::Success, output.content),
        Err(err) => (ResultStatus::Error, err.0),
    };
    let (status, content) = hooks::post_tool_use(run, id, name, &input, status, content).await?;
    Ok((
        status,
        run.results.fit(id, content, tool.max_result_chars()),
    ))
}

fn record_decision(
    run: &mut Loop<'_>,
    id: &str,
    name: &str,
    input: &Value,
    decision: PermissionDecision,
) -> Result<(), AgentError> {
    if decision.decision == Decision::Allow {
        run.consecutive_denials = 0;
    } else {
        run.consecutive_denials += 1;
        run.counts.denials += 1;
        run.counts.denials_by_layer.count(decision.layer);
        run.denials.push(Denial {
            id: id.to_string(),
            tool: name.to_string(),
            input: input.clone(),
            decision: decision.clone(),
        });
    }
    run.emit(Event::PermissionDecision {
        id: id.to_string(),
        tool: name.to_string(),
        decision,
    })
}

fn available(run: &Loop<'_>) -> String {
    run.spec
        .tools
        .iter()
        .map(|tool| tool.name().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
