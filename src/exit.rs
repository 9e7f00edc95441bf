//! The process exit codes: one enum, so what a run means to CI is decided in one place.

/// What the process exit code tells a CI job. The numbers are a public contract (README).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitCode {
    /// The agent finished and every check passed.
    Success,
    /// The task failed: a check failed, or a limit (turns, budget, time) stopped the run.
    TaskFailed,
    /// Bad usage or configuration; nothing was sent to a model.
    ConfigError,
    /// The permission policy stopped the run.
    PolicyStop,
    /// The model provider failed after retries.
    ProviderError,
    /// The run's record (transcript, a report, a result file) could not be written.
    OutputError,
    /// SIGINT.
    Interrupted,
    /// SIGTERM.
    Terminated,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::TaskFailed => 1,
            ExitCode::ConfigError => 2,
            ExitCode::PolicyStop => 3,
            ExitCode::ProviderError => 4,
            ExitCode::OutputError => 5,
            ExitCode::Interrupted => 130,
            ExitCode::Terminated => 143,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code.code())
    }
}
