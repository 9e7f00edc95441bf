//! The task author's checks, run after the agent stops: plain shell commands in the workdir.
//! They are not gated (the model did not write them), but they run what the model wrote and
//! planted, so with the sandbox on they run in it (its scrubbed environment) unless the
//! policy says `sandbox.checks: outside` (then with the author's full environment, after the
//! protected files were put back). Either way git runs with the trusted side's config.
//! A failing check with `retry.feed_back` sends its output back to the model.

use std::path::Path;
use std::time::Instant;

use super::{AgentError, CheckRecord, Loop};
use crate::base::AbortSignal;
use crate::exec::ChildEnv;
use crate::sandbox::Sandbox;
use crate::task::Check;
use crate::tools::{ShellEnding, ShellEnv, run_shell};
use crate::transcript::{CheckOutcome, Event};

/// Output of a check kept in the transcript and reports.
const CHECK_OUTPUT_CHARS: usize = 20_000;

pub async fn run_check(
    check: &Check,
    workdir: &Path,
    env: &ChildEnv,
    abort: &AbortSignal,
    sandbox: Option<&Sandbox>,
) -> CheckOutcome {
    let started = Instant::now();
    let run = run_shell(
        &check.run,
        workdir,
        check.timeout,
        abort,
        ShellEnv::Author(env),
        None,
        sandbox,
    )
    .await;
    let (exit_code, output) = match run {
        Ok(run) => {
            let mut note = match run.ending {
                ShellEnding::Exited(_) => String::new(),
                ShellEnding::TimedOut => {
                    format!("\n[timed out after {}s]", check.timeout.as_secs())
                }
                ShellEnding::Aborted => "\n[interrupted]".into(),
            };
            if !run.violations.is_empty() {
                note.push_str(&format!(
                    "\n[{}]",
                    crate::sandbox::describe_violations(&run.violations)
                ));
            }
            let code = match run.ending {
                ShellEnding::Exited(code) => code,
                _ => None,
            };
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

/// Runs every check once (a check with `retry` and no `feed_back` is re-run at once until
/// it passes or its attempts are spent), recording each attempt. Returns the feedback
/// message for the model when every failed check may still be retried with feedback.
pub(super) async fn run_round(
    run: &mut Loop<'_>,
    abort: &AbortSignal,
    records: &mut Vec<CheckRecord>,
) -> Result<Option<String>, AgentError> {
    let spec = run.spec;
    let mut failed: Vec<&CheckRecord> = Vec::new();
    let first_new = records.len();
    for check in &spec.checks {
        let first_attempt = last_attempt(records, &check.name) + 1;
        loop {
            let attempt = last_attempt(records, &check.name) + 1;
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
    failed.extend(records[first_new..].iter().filter(|record| {
        !record.outcome.passed && last_attempt(records, &record.check.name) == record.attempt
    }));
    let retryable = |record: &&CheckRecord| {
        record.check.retry.feed_back && record.attempt < record.check.retry.max_attempts
    };
    if failed.is_empty() || abort.is_aborted() || !failed.iter().all(retryable) {
        return Ok(None);
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
    Ok(Some(message))
}

fn last_attempt(records: &[CheckRecord], name: &str) -> u32 {
    records
        .iter()
        .filter(|record| record.check.name == name)
        .map(|record| record.attempt)
        .max()
        .unwrap_or(0)
}

/// The last attempt of each check: what decides whether the checks passed.
pub fn final_attempts(records: &[CheckRecord]) -> impl Iterator<Item = &CheckRecord> {
    records
        .iter()
        .filter(|record| last_attempt(records, &record.check.name) == record.attempt)
}
