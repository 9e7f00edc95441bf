//! A task's `checks:`: the commands that judge the work after the model finishes, each with
//! its timeout and retries.

use crate::config::ConfigError;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::time::Duration;

use super::{At, DEFAULT_CHECK_TIMEOUT_SECS, located, maxima};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckFile {
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
pub(super) struct RetryFile {
    max_attempts: u32,
    #[serde(default)]
    feed_back: bool,
}

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

/// The task's `checks:`, in order: names unique, timeouts and retries within their ceilings.
pub(super) fn checks(raw: Vec<CheckFile>, at: At<'_>) -> Result<Vec<Check>, ConfigError> {
    let mut checks: Vec<Check> = Vec::new();
    for check in raw {
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
                        at,
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
    Ok(checks)
}
