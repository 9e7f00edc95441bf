//! How a command ended, as a value from the process runner to the land step: the scheduler's
//! sibling rule, the transcript's `tool_result` and the model's text all read this one value,
//! and the text is written only when the result lands ([`CommandRun`]'s `Display`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exec::Ending;
use crate::sandbox::{LimitHit, Violation, describe_violations};

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ending", rename_all = "snake_case")]
pub enum CommandEnding {
    /// It exited by itself; 0 is success.
    Exited { code: i32 },
    /// A signal ended it.
    Signalled { signal: i32 },
    /// Its timeout ran out; it and everything it started were killed.
    TimedOut {
        #[serde(rename = "timeout_ms", with = "millis")]
        after: Duration,
    },
    /// The run was interrupted (SIGINT, SIGTERM); it and everything it started were killed.
    Cancelled,
    /// The scheduler ended the call first (`limits.tool_timeout`, the run's `limits.timeout`).
    Stopped { reason: String },
    /// Nothing ran: bash could not be started, or the sandbox not prepared for it.
    NotStarted { error: String },
}

impl CommandEnding {
    /// The runner's ending of a command started with `timeout`.
    pub fn of(ending: Ending, timeout: Duration) -> CommandEnding {
        match ending {
            Ending::Exited(code) => CommandEnding::Exited { code },
            Ending::Signalled(signal) => CommandEnding::Signalled { signal },
            Ending::TimedOut => CommandEnding::TimedOut { after: timeout },
            Ending::Cancelled => CommandEnding::Cancelled,
        }
    }

    /// The exit code, when the command exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            CommandEnding::Exited { code } => Some(*code),
            _ => None,
        }
    }
}

/// The ending and what the sandbox saw of the command, each independent of the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutcome {
    #[serde(flatten)]
    pub ending: CommandEnding,
    /// The sandbox limit it ran into, whatever its ending says (a refused fork may still end
    /// in exit 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitHit>,
    /// Protected files it changed, put back (or not) after it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<Violation>,
}

impl CommandOutcome {
    pub fn new(ending: CommandEnding) -> CommandOutcome {
        CommandOutcome {
            ending,
            limit: None,
            protected: Vec::new(),
        }
    }

    /// Exit 0, no limit hit, nothing protected changed.
    pub fn succeeded(&self) -> bool {
        self.ending == CommandEnding::Exited { code: 0 }
            && self.limit.is_none()
            && self.protected.is_empty()
    }
}

/// A command's outcome and what it printed (stdout then stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    pub outcome: CommandOutcome,
    pub output: String,
}

impl CommandRun {
    /// A command that never started.
    pub fn not_started(error: impl std::fmt::Display) -> CommandRun {
        CommandRun {
            outcome: CommandOutcome::new(CommandEnding::NotStarted {
                error: error.to_string(),
            }),
            output: String::new(),
        }
    }

    /// A command the scheduler ended before it returned.
    pub fn stopped(reason: String) -> CommandRun {
        CommandRun {
            outcome: CommandOutcome::new(CommandEnding::Stopped { reason }),
            output: String::new(),
        }
    }
}

/// The model's text: the output (trailing whitespace dropped) and, in brackets, what ended it
/// other than success: the limit if one was hit, else the ending; then any protected files.
impl std::fmt::Display for CommandRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let output = self.output.trim_end();
        let with_note = |note: &str| format!("{output}\n[{note}]").trim_start().to_string();
        let text = match (&self.outcome.limit, &self.outcome.ending) {
            (Some(limit), _) => with_note(&limit.to_string()),
            (None, CommandEnding::Exited { code: 0 }) if output.is_empty() => {
                "(no output)".to_string()
            }
            (None, CommandEnding::Exited { code: 0 }) => output.to_string(),
            (None, CommandEnding::Exited { code }) => with_note(&format!("exit code {code}")),
            (None, CommandEnding::Signalled { .. }) => with_note("killed by a signal"),
            (None, CommandEnding::TimedOut { after }) => with_note(&format!(
                "timed out after {}s; the command and its children were killed",
                after.as_secs_f32()
            )),
            (None, CommandEnding::Cancelled) => {
                with_note("interrupted; the command and its children were killed")
            }
            (None, CommandEnding::Stopped { reason }) => reason.clone(),
            (None, CommandEnding::NotStarted { error }) => format!("cannot start bash: {error}"),
        };
        f.write_str(&text)?;
        if !self.outcome.protected.is_empty() {
            write!(f, "\n[{}]", describe_violations(&self.outcome.protected))?;
        }
        Ok(())
    }
}

/// A duration as whole milliseconds in the transcript.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::sandbox::Change;

    fn run(ending: CommandEnding, output: &str) -> CommandRun {
        CommandRun {
            outcome: CommandOutcome::new(ending),
            output: output.into(),
        }
    }

    #[test]
    fn each_ending_reads_as_before_and_records_as_a_type() {
        let table = [
            (
                CommandEnding::Exited { code: 0 },
                "",
                "(no output)",
                json!({"ending": "exited", "code": 0}),
            ),
            (
                CommandEnding::Exited { code: 3 },
                "out\n",
                "out\n[exit code 3]",
                json!({"ending": "exited", "code": 3}),
            ),
            (
                CommandEnding::Signalled { signal: 9 },
                "",
                "[killed by a signal]",
                json!({"ending": "signalled", "signal": 9}),
            ),
            (
                CommandEnding::TimedOut {
                    after: Duration::from_millis(200),
                },
                "",
                "[timed out after 0.2s; the command and its children were killed]",
                json!({"ending": "timed_out", "timeout_ms": 200}),
            ),
            (
                CommandEnding::Cancelled,
                "x",
                "x\n[interrupted; the command and its children were killed]",
                json!({"ending": "cancelled"}),
            ),
            (
                CommandEnding::NotStarted {
                    error: "no bash".into(),
                },
                "",
                "cannot start bash: no bash",
                json!({"ending": "not_started", "error": "no bash"}),
            ),
        ];
        for (ending, output, text, recorded) in table {
            let ran = run(ending, output);
            assert_eq!(ran.to_string(), text);
            assert_eq!(serde_json::to_value(&ran.outcome).unwrap(), recorded);
            let back: CommandOutcome = serde_json::from_value(recorded).unwrap();
            assert_eq!(back, ran.outcome);
        }
    }

    /// A limit names itself over the ending, and protected files are reported with either.
    #[test]
    fn a_limit_and_protected_files_are_both_told() {
        let mut ran = run(CommandEnding::Exited { code: 0 }, "built\n");
        ran.outcome.limit = Some(LimitHit::MaxProcesses(8));
        ran.outcome.protected = vec![Violation {
            path: PathBuf::from(".git/config"),
            change: Change::Modified,
            unrestored: None,
        }];
        assert!(!ran.outcome.succeeded());
        assert_eq!(
            ran.to_string(),
            "built\n[sandbox limit max_processes (8) was hit]\n[sandbox: this command changed \
             protected files, which are read-only for sandboxed commands: .git/config \
             (modified, restored)]"
        );
        assert_eq!(
            serde_json::to_value(&ran.outcome).unwrap(),
            json!({
                "ending": "exited",
                "code": 0,
                "limit": {"max_processes": 8},
                "protected": [{"path": ".git/config", "change": "modified"}]
            })
        );
    }
}
