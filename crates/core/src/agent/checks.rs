//! The task author's checks, run after the agent stops: plain shell commands in the workdir.
//! They are not gated (the model did not write them), but they run what the model wrote and
//! planted, so with the sandbox on they run in it (its scrubbed environment) unless the
//! policy says `sandbox.checks: outside` (then with the author's full environment, after the
//! protected files were put back). Either way git runs with the trusted side's config.
//! A failing check with `retry.feed_back` sends its output back to the model.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{AgentError, CheckRecord, Loop};
use crate::base::AbortSignal;
use crate::exec::ChildEnv;
use crate::sandbox::Sandbox;
use crate::task::Check;
use crate::tools::{CommandEnding, ShellEnv, run_shell};
use crate::transcript::{CheckOutcome, Event};

/// Output of a check kept in the transcript and reports.
const CHECK_OUTPUT_CHARS: usize = 20_000;

/// How long a check may run: its own timeout, or what is left of the run's clock when
/// that is shorter (the note its output gets then says which).
#[derive(Debug, Clone, Copy)]
pub struct CheckClock {
    pub timeout: Duration,
    pub run_deadline_first: bool,
}

impl CheckClock {
    /// `None` when the run's clock has run out already.
    pub fn new(check: &Check, run_deadline: Option<tokio::time::Instant>) -> Option<CheckClock> {
        let left = run_deadline.map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
        match left {
            Some(left) if left.is_zero() => None,
            Some(left) if left < check.timeout => Some(CheckClock {
                timeout: left,
                run_deadline_first: true,
            }),
            _ => Some(CheckClock {
                timeout: check.timeout,
                run_deadline_first: false,
            }),
        }
    }
}

pub async fn run_check(
    check: &Check,
    clock: CheckClock,
    workdir: &Path,
    env: &ChildEnv,
    abort: &AbortSignal,
    sandbox: Option<&Sandbox>,
) -> CheckOutcome {
    let started = Instant::now();
    let run = run_shell(
        &check.run,
        workdir,
        clock.timeout,
        abort,
        ShellEnv::Author(env),
        None,
        sandbox,
    )
    .await;
    let (exit_code, output) = match run {
        Ok(run) => {
            let ending = &run.outcome.ending;
            let mut note = match ending {
                CommandEnding::TimedOut { .. } if clock.run_deadline_first => {
                    "\n[stopped: the run's limits.timeout ran out]".to_string()
                }
                CommandEnding::TimedOut { .. } => {
                    format!("\n[timed out after {}s]", check.timeout.as_secs())
                }
                CommandEnding::Cancelled => "\n[interrupted]".into(),
                CommandEnding::Exited { .. }
                | CommandEnding::Signalled { .. }
                | CommandEnding::Stopped { .. }
                | CommandEnding::NotStarted { .. } => String::new(),
            };
            if !run.outcome.protected.is_empty() {
                note.push_str(&format!(
                    "\n[{}]",
                    crate::sandbox::describe_violations(&run.outcome.protected)
                ));
            }
            let code = ending.exit_code();
            (
                code,
                format!(
                    "{}{note}",
                    crate::base::truncate_middle(&run.output, CHECK_OUTPUT_CHARS)
                ),
            )
        }
        Err(err) => (None, format!("could not start bash: {err}")),
    };
    CheckOutcome {
        exit_code,
        expect_exit: check.expect_exit,
        passed: exit_code == Some(check.expect_exit),
        output,
        duration_ms: millis(started),
    }
}

pub fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Characters of failed checks' output the model reads inline in a feedback message; more
/// is offloaded to the results folder like a large tool result.
const FEEDBACK_CHARS: usize = 8_000;

/// How a round of checks ended.
#[derive(Debug)]
pub(super) enum RoundEnd {
    /// Every check ran; nothing goes back to the model.
    Done,
    /// Some failed and may be retried: this message goes back to the model.
    Feedback(String),
    /// The run's `limits.timeout` ran out during the round (the checks are inside its clock).
    OutOfTime,
}

/// Runs every check once (a check with `retry` and no `feed_back` is re-run at once until
/// it passes or its attempts are spent), recording each attempt, inside the run's clock.
/// Its bookkeeping is linear in the attempts: each check's last attempt is kept by name.
pub(super) async fn run_round(
    run: &mut Loop<'_>,
    abort: &AbortSignal,
    records: &mut Vec<CheckRecord>,
) -> Result<RoundEnd, AgentError> {
    let spec = run.spec;
    let mut last: HashMap<String, u32> = last_attempts(records)
        .into_iter()
        .map(|(name, attempt)| (name.to_string(), attempt))
        .collect();
    let first_new = records.len();
    for check in &spec.checks {
        let first_attempt = last.get(check.name.as_str()).copied().unwrap_or(0) + 1;
        loop {
            let Some(clock) = CheckClock::new(check, run.deadline) else {
                return Ok(RoundEnd::OutOfTime);
            };
            let attempt = last.get(check.name.as_str()).copied().unwrap_or(0) + 1;
            let sandbox = run.ctx.sandbox.as_deref();
            let confined = sandbox.filter(|s| s.confines_checks());
            // Outside the sandbox, a check must find the protected files as the run did, even
            // if something the model started is still changing them.
            let unconfined = sandbox
                .filter(|s| !s.confines_checks())
                .map(Sandbox::restore_protected)
                .unwrap_or_default();
            let mut outcome = run_check(
                check,
                clock,
                &spec.workspace.workdir,
                &spec.env.checks,
                abort,
                confined,
            )
            .await;
            if !unconfined.is_empty() {
                outcome.output.push_str(&format!(
                    "\n[before this check ran: {}]",
                    crate::sandbox::describe_violations(&unconfined)
                ));
            }
            run.emit(Event::CheckResult {
                name: check.name.clone(),
                run: check.run.clone(),
                attempt,
                outcome: outcome.clone(),
            })?;
            let passed = outcome.passed;
            records.push(CheckRecord {
                check: check.clone(),
                attempt,
                outcome,
            });
            last.insert(check.name.clone(), attempt);
            if clock.run_deadline_first && !passed {
                return Ok(RoundEnd::OutOfTime);
            }
            // Without feedback, `max_attempts` is a budget per round: the model changed
            // nothing between these attempts.
            let rerun_now = !passed
                && !check.retry.feed_back
                && attempt - first_attempt + 1 < check.retry.max_attempts
                && !abort.is_aborted();
            if !rerun_now {
                break;
            }
        }
    }
    let failed: Vec<&CheckRecord> = records[first_new..]
        .iter()
        .filter(|record| {
            !record.outcome.passed && last.get(record.check.name.as_str()) == Some(&record.attempt)
        })
        .collect();
    let retryable = |record: &&CheckRecord| {
        record.check.retry.feed_back && record.attempt < record.check.retry.max_attempts
    };
    if failed.is_empty() || abort.is_aborted() || !failed.iter().all(retryable) {
        return Ok(RoundEnd::Done);
    }
    let mut message = String::from(
        "The task's checks ran after you stopped, and some failed. Fix the cause, then stop \
         again; the checks will run once more.\n",
    );
    for record in &failed {
        let outcome = &record.outcome;
        let ended = match outcome.exit_code {
            Some(code) => format!("exited {code}, expected {}", outcome.expect_exit),
            None => "did not exit by itself".to_string(),
        };
        message.push_str(&format!(
            "\nCheck `{}` (attempt {} of {}): `{}` {ended}. Output:\n{}\n",
            record.check.name,
            record.attempt,
            record.check.retry.max_attempts,
            record.check.run,
            outcome.output
        ));
    }
    let attempt = failed
        .iter()
        .map(|record| record.attempt)
        .max()
        .unwrap_or(1);
    // Checks run with the author's full environment, the model's commands without its
    // secrets: what goes back to the model is redacted like what is written.
    let message = spec.redactor.redact(&message);
    let fitted = run.results.fit(
        &format!("check-feedback-{attempt}"),
        message,
        FEEDBACK_CHARS,
    );
    let message = run.keep(fitted);
    run.emit(Event::CheckFeedback {
        attempt,
        checks: failed.iter().map(|r| r.check.name.clone()).collect(),
        message: message.clone(),
    })?;
    Ok(RoundEnd::Feedback(message))
}

/// Each check's last attempt number, by name, in one pass.
fn last_attempts(records: &[CheckRecord]) -> HashMap<&str, u32> {
    let mut last: HashMap<&str, u32> = HashMap::new();
    for record in records {
        let seen = last.entry(record.check.name.as_str()).or_default();
        *seen = (*seen).max(record.attempt);
    }
    last
}

/// The last attempt of each check: what decides whether the checks passed.
pub fn final_attempts(records: &[CheckRecord]) -> impl Iterator<Item = &CheckRecord> {
    let last = last_attempts(records);
    records
        .iter()
        .filter(move |record| last.get(record.check.name.as_str()) == Some(&record.attempt))
}
