//! The task author's checks, run after the agent stops: plain shell commands in the workdir
//! with the author's full environment. They are not gated: the model did not write them.

use std::path::Path;
use std::time::Instant;

use crate::task::Check;
use crate::tools::{AbortSignal, ShellEnding, run_shell};
use crate::transcript::CheckOutcome;

/// Output of a check kept in the transcript and reports.
const CHECK_OUTPUT_CHARS: usize = 20_000;

pub async fn run_check(check: &Check, workdir: &Path, abort: &AbortSignal) -> CheckOutcome {
    let started = Instant::now();
    let run = run_shell(&check.run, workdir, check.timeout, abort, false).await;
    let (exit_code, output) = match run {
        Ok(run) => {
            let note = match run.ending {
                ShellEnding::Exited(_) => String::new(),
                ShellEnding::TimedOut => {
                    format!("\n[timed out after {}s]", check.timeout.as_secs())
                }
                ShellEnding::Aborted => "\n[interrupted]".into(),
            };
            let code = match run.ending {
                ShellEnding::Exited(code) => code,
                _ => None,
            };
            (
                code,
                format!(
                    "{}{note}",
                    crate::tools::truncate_middle(&run.output, CHECK_OUTPUT_CHARS)
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
