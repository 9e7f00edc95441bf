//! How the loop ends: the named `Ending` every stop produces (a finished answer, a limit,
//! a signal, the provider, a refusal limit, a hook, a parked call), the hard stop's record,
//! and `finish`, the one path from an ending to the final outcome and everything a run
//! leaves (the run's last events, `pending.json`, `proposed-rules.yaml`,
//! `structured_output.json`, `statement.json`) and its `RunReport`.

use std::path::PathBuf;

use tokio::time::Instant;

use super::{AgentError, CheckRecord, INTERRUPTED_BY_USER, Loop, RunReport, RunSpec, push_user};
use super::{checks, hooks, millis};
use crate::base::{AbortReason, AbortSignal};
use crate::classifier::{ProposedRule, proposed_rules_yaml};
use crate::hooks::HookEvent;
use crate::model::{ContentBlock, History, Message, Role};
use crate::sandbox::SandboxStatus;
use crate::transcript::{AbortCause, DenialSummary, Event, ModelSummary, Outcome, QueryEnd};

pub(super) fn interrupted(reason: AbortReason) -> Outcome {
    match reason {
        AbortReason::Interrupt => Outcome::Interrupted,
        AbortReason::Terminate | AbortReason::Hangup => Outcome::Terminated,
    }
}

/// How a conversation ended: its outcome, the model's last answer when it gave one, and why
/// it stopped when something other than a finished answer ended it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ending {
    pub(super) outcome: Outcome,
    pub(super) final_message: Option<String>,
    pub(super) reason: Option<String>,
}

impl Ending {
    pub(super) fn new(
        outcome: Outcome,
        final_message: Option<String>,
        reason: Option<String>,
    ) -> Ending {
        Ending {
            outcome,
            final_message,
            reason,
        }
    }

    /// Ended with no answer, the outcome saying all there is (an interruption, a record that
    /// could not be written).
    pub(super) fn bare(outcome: Outcome) -> Ending {
        Ending::new(outcome, None, None)
    }

    /// Stopped before the model gave a final answer, for `why`.
    pub(super) fn stopped(outcome: Outcome, why: impl Into<String>) -> Ending {
        Ending::new(outcome, None, Some(why.into()))
    }

    /// The model's final answer ended it.
    pub(super) fn answered(outcome: Outcome, text: String) -> Ending {
        Ending::new(outcome, Some(text), None)
    }
}

/// SIGINT/SIGTERM: the history gets "[Request interrupted by user]" (in the last user
/// message when there is one, so roles keep alternating), the transcript says where the
/// query stood, and the run ends.
pub(super) fn hard_stop(
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

pub(super) fn timed_out(spec: &RunSpec) -> Ending {
    let limit = spec.limits.timeout.unwrap_or_default();
    Ending::stopped(
        Outcome::Timeout,
        format!(
            "stopped: limits.timeout = {}s of wall clock ran out",
            limit.as_secs_f64()
        ),
    )
}

/// The warning of a run whose model finished with an empty final answer.
pub(super) const EMPTY_ANSWER_WARNING: &str = "the model's final answer is empty (or only whitespace): it finished without saying anything; `fail_on: [empty_answer]` fails such a run";

/// `statement.json` in the output folder: the in-toto statement of the run as its
/// transcript now stands (a resume rewrites it).
pub(super) fn write_statement(
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
pub(super) fn write_pending(
    spec: &RunSpec,
    parked: &[crate::approval::ParkedCall],
) -> Result<(), AgentError> {
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
pub(super) fn write_structured_output(
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

/// `proposed-rules.yaml` in the run's folder, when the classifier denied anything.
pub(super) fn write_proposed_rules(
    spec: &RunSpec,
    proposals: &[ProposedRule],
) -> Result<(), AgentError> {
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

/// What the run's end needs beside the loop and its ending.
pub(super) struct Finishing<'s> {
    pub checks: Vec<CheckRecord>,
    pub abort: &'s AbortSignal,
    pub started: Instant,
    pub transcript: PathBuf,
    pub sandbox: Option<SandboxStatus>,
    pub model: ModelSummary,
}

/// The one way a run ends, whatever ended it: the servers stopped, the checks counted, the
/// outcome settled (an unwritten result outranks everything, then a signal, then failed
/// checks), weighed against `fail_on` into the final outcome and exit code; SessionEnd told;
/// every file the run leaves written and `run_finished` recorded.
pub(super) async fn finish(
    mut run: Loop<'_>,
    ended: Ending,
    finishing: Finishing<'_>,
) -> Result<RunReport, AgentError> {
    let Finishing {
        checks,
        abort,
        started,
        transcript: transcript_path,
        sandbox: sandbox_status,
        model,
    } = finishing;
    let spec = run.spec;
    let Ending {
        mut outcome,
        final_message,
        reason: mut error,
    } = ended;
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
    write_proposed_rules(spec, &proposed_rules)?;
    write_pending(spec, &run.parked)?;
    let structured_output = run.structured_output.take();
    write_structured_output(spec, structured_output.as_ref())?;
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
    write_statement(spec, &transcript_path, outcome)?;
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
