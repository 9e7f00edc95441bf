//! The loop's side of a batch (S6): admits each call through validation, the gate and the
//! PreToolUse hooks, and records each landing (PostToolUse, offload, tool_result) in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::auto::{self, Stop};
use super::{AgentError, Loop, denial_limit, hooks, millis};
use crate::model::{ContentBlock, MalformedInput};
use crate::policy::{self, Decision, PermissionContext, PermissionDecision};
use crate::scheduler::{Admission, BatchHost, Call, CallDeadline, Landing, ProgressUpdate};
use crate::tools::{InterruptBehavior, Tool};
use crate::transcript::{Event, ResultStatus};

pub(super) struct TurnHost<'r, 'a> {
    pub run: &'r mut Loop<'a>,
    pub malformed: &'r [MalformedInput],
    /// Why the rest of the batch is not run (a denial limit was reached, or the classifier
    /// ended the run).
    pub stopped: Option<Stop>,
    /// When each call was admitted, for its duration.
    admitted_at: HashMap<usize, Instant>,
    /// The tool_result blocks, in call order.
    pub results: Vec<ContentBlock>,
}

impl<'r, 'a> TurnHost<'r, 'a> {
    pub fn new(run: &'r mut Loop<'a>, malformed: &'r [MalformedInput]) -> Self {
        TurnHost {
            run,
            malformed,
            stopped: None,
            admitted_at: HashMap::new(),
            results: Vec::new(),
        }
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.run
            .spec
            .tools
            .iter()
            .find(|tool| tool.name().to_string() == name)
            .cloned()
    }

    fn announce(&mut self, call: &Call) -> Result<(), AgentError> {
        self.run.emit(Event::ToolCall {
            id: call.id.clone(),
            tool: call.name.clone(),
            input: call.input.clone(),
        })
    }

    fn answered(content: String, status: ResultStatus) -> Admission {
        Admission::Answered { content, status }
    }

    /// The gate's decision and the PreToolUse hooks; the call and its bounds if they allow.
    async fn gate(&mut self, call: &Call, tool: Arc<dyn Tool>) -> Result<Admission, AgentError> {
        let run = &mut *self.run;
        let ctx = PermissionContext {
            auto_allow_bash: run
                .ctx
                .sandbox
                .as_ref()
                .is_some_and(|s| s.auto_allow_bash()),
            mode: run.spec.mode,
            rules: &run.spec.rules,
            workspace: &run.spec.workspace,
        };
        let decision = policy::decide(tool.as_ref(), &call.input, &ctx);
        let (decision, input) =
            hooks::pre_tool_use(run, &call.id, tool.as_ref(), call.input.clone(), decision).await?;
        let (decision, auto_stop) =
            auto::resolve(run, &call.id, &call.name, &input, decision).await?;
        record_decision(run, &call.id, &call.name, &input, decision.clone())?;
        if !decision.is_allow() {
            self.stopped = auto_stop.or_else(|| denial_limit(self.run));
            return Ok(Self::answered(
                format!("Permission denied: {}", decision.reason),
                ResultStatus::Denied,
            ));
        }
        let input = decision.updated_input.clone().unwrap_or(input);
        Ok(Admission::Run {
            tool,
            input,
            deadline: deadline(self.run),
        })
    }
}

/// The call is bounded by `limits.tool_timeout` and by what is left of the run's wall clock.
fn deadline(run: &Loop<'_>) -> Option<CallDeadline> {
    let limits = run.spec.task.limits;
    let tool_deadline = limits.tool_timeout.map(|limit| Instant::now() + limit);
    let (at, why, limit) = match (tool_deadline, run.deadline) {
        (Some(tool), Some(whole)) if whole < tool => {
            (Some(whole), "the run's limits.timeout", limits.timeout)
        }
        (Some(tool), _) => (Some(tool), "limits.tool_timeout", limits.tool_timeout),
        (None, whole) => (whole, "the run's limits.timeout", limits.timeout),
    };
    at.map(|at| CallDeadline {
        at,
        message: format!(
            "The tool call was stopped: {why} = {}s ran out",
            limit.map_or(0.0, |limit: Duration| limit.as_secs_f64())
        ),
    })
}

impl BatchHost for TurnHost<'_, '_> {
    type Error = AgentError;

    fn scheduling(&self, call: &Call) -> Option<(bool, InterruptBehavior)> {
        self.tool(&call.name).map(|tool| {
            (
                tool.is_concurrency_safe(&call.input),
                tool.interrupt_behavior(),
            )
        })
    }

    /// Validation, then the gate: always yields exactly one answer or a call to run.
    async fn admit(&mut self, index: usize, call: &Call) -> Result<Admission, AgentError> {
        self.announce(call)?;
        self.admitted_at.insert(index, Instant::now());
        if let Some(stop) = &self.stopped {
            // The run is over, but every tool_use still gets its one result.
            return Ok(Self::answered(
                format!("[not run: {}]", stop.why),
                ResultStatus::Cancelled,
            ));
        }
        let run = &mut *self.run;
        run.counts.tool_calls += 1;
        match run
            .calls_by_tool
            .iter_mut()
            .find(|(tool, _)| *tool == call.name)
        {
            Some((_, count)) => *count += 1,
            None => run.calls_by_tool.push((call.name.clone(), 1)),
        }
        let Some(tool) = self.tool(&call.name) else {
            let decision = PermissionDecision {
                decision: Decision::Deny,
                step: policy::Step::Pool,
                layer: policy::Layer::Tool,
                rule: None,
                reason: format!(
                    "No such tool available: {}. Available tools: {}",
                    call.name,
                    super::available(self.run)
                ),
                updated_input: None,
                asked: false,
            };
            record_decision(
                self.run,
                &call.id,
                &call.name,
                &call.input,
                decision.clone(),
            )?;
            self.stopped = denial_limit(self.run);
            return Ok(Self::answered(decision.reason, ResultStatus::Denied));
        };
        let malformed = self.malformed.iter().find(|bad| bad.id == call.id);
        // A garbled input from the model is answered like a schema violation: an error
        // result that says what was wrong, and the run goes on.
        match (malformed, tool.validate_input(&call.input)) {
            (Some(problem), _) => Ok(Self::answered(problem.message.clone(), ResultStatus::Error)),
            (None, Err(err)) => Ok(Self::answered(err.0, ResultStatus::Error)),
            (None, Ok(())) => self.gate(call, tool).await,
        }
    }

    /// PostToolUse, offload, the tool_result event and block.
    async fn land(
        &mut self,
        index: usize,
        call: &Call,
        landing: Landing,
    ) -> Result<(), AgentError> {
        let (status, content) = match landing {
            Landing::Answered { content, status } => (status, content),
            Landing::Ran {
                tool,
                input,
                result,
            } => {
                let (status, content) = match result {
                    Ok(output) => (ResultStatus::Success, output.content),
                    Err(err) => (ResultStatus::Error, err.0),
                };
                let (status, content) =
                    hooks::post_tool_use(self.run, &call.id, &call.name, &input, status, content)
                        .await?;
                let content = self
                    .run
                    .results
                    .fit(&call.id, content, tool.max_result_chars());
                (status, content)
            }
            Landing::Cancelled {
                why,
                admitted,
                started,
            } => {
                if !admitted {
                    self.announce(call)?;
                }
                (ResultStatus::Cancelled, why.content(started))
            }
        };
        let is_error = status != ResultStatus::Success;
        if status == ResultStatus::Error {
            self.run.counts.tool_errors += 1;
        }
        let duration_ms = self
            .admitted_at
            .get(&index)
            .map_or(0, |at| millis(at.into_std()));
        self.run.emit(Event::ToolResult {
            id: call.id.clone(),
            tool: call.name.clone(),
            status,
            is_error,
            content: content.clone(),
            duration_ms,
        })?;
        self.results.push(ContentBlock::ToolResult {
            tool_use_id: call.id.clone(),
            content,
            is_error,
        });
        Ok(())
    }

    fn progress(&mut self, call: &Call, update: ProgressUpdate) -> Result<(), AgentError> {
        self.run.emit(Event::ToolProgress {
            id: call.id.clone(),
            tool: call.name.clone(),
            update,
        })
    }
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
        run.denials.push(super::Denial {
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
