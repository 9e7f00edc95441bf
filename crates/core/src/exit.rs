//! The process exit codes: one enum, so what a run means to CI is decided in one place.

/// What the process exit code tells a CI job. The numbers are a public contract: the
/// README's table and `--help` are rendered from `code`, `summary` and `meaning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Calls wait for a person's approval (outcome `parked`).
    Parked,
    /// SIGINT.
    Interrupted,
    /// SIGTERM, or SIGHUP (which ends a run the same way).
    Terminated,
}

impl ExitCode {
    pub const ALL: [ExitCode; 9] = [
        ExitCode::Success,
        ExitCode::TaskFailed,
        ExitCode::ConfigError,
        ExitCode::PolicyStop,
        ExitCode::ProviderError,
        ExitCode::OutputError,
        ExitCode::Parked,
        ExitCode::Interrupted,
        ExitCode::Terminated,
    ];

    /// A few words, for help texts.
    pub fn summary(self) -> &'static str {
        match self {
            ExitCode::Success => "success",
            ExitCode::TaskFailed => "task failed (check or limit)",
            ExitCode::ConfigError => "usage or configuration error",
            ExitCode::PolicyStop => "a tool call was refused or did more than allowed (policy)",
            ExitCode::ProviderError => "provider error",
            ExitCode::OutputError => "the run's record could not be written",
            ExitCode::Parked => "calls await a person's approval (parked)",
            ExitCode::Interrupted => "interrupted (SIGINT)",
            ExitCode::Terminated => "terminated (SIGTERM or SIGHUP)",
        }
    }

    /// What the code tells a CI job, in full (the README's table).
    pub fn meaning(self) -> &'static str {
        match self {
            ExitCode::Success => {
                "success: the model finished, and nothing that `fail_on` counts went wrong"
            }
            ExitCode::TaskFailed => {
                "task failed: a check failed (after its retries), or a limit (`max_turns`, \
`max_cost_usd`, tokens, `timeout`) stopped the run, or the model refused — each only when \
`fail_on` has `check` / `limit` (the default); or an MCP server did not start and `fail_on` \
has `mcp_start` (the default; outcome `mcp_start_failed`, no model call made); or a hook \
stopped the run (outcome `hook_stopped`); or, under \
`output_schema`, no final answer was valid against the schema within its attempts (outcome \
`structured_output_invalid`, whatever `fail_on` says); or the model finished with an empty \
final answer and `fail_on` has `empty_answer` (the default of a prompt run without \
`--output-schema`; outcome `empty_answer`)"
            }
            ExitCode::ConfigError => {
                "usage or configuration error (bad flags, task or policy file); nothing was sent \
to a model"
            }
            ExitCode::PolicyStop => {
                "the permission policy: a tool call was refused and `fail_on` has its kind \
(`denial`, `classifier_denial`: the default has both), or `limits.max_denials` / \
`limits.max_consecutive_denials` stopped the run, or in auto mode \
`limits.max_classifier_denials` / `limits.max_consecutive_classifier_denials` did (outcome \
`classifier_denials`), or a call changed more than its verdict allowed and `fail_on` has \
`effect` (the default; outcome `effects_exceeded`)"
            }
            ExitCode::ProviderError => {
                "provider error: the model could not be reached or answered wrongly (the \
scripted model: its script ran out, or the loop broke the protocol); in auto mode also a \
classifier that cannot be reached after the provider's retries (outcome \
`classifier_unavailable`), or a history too long for the model's context that compaction \
could not make fit (outcome `context_overflow`)"
            }
            ExitCode::OutputError => {
                "output failure: the run's record could not be written — the transcript, \
`junit.xml`, `tollgate.sarif` or an offloaded result under `results/` (disk full, folder \
removed, no permission); for `batch`, also a merged report or a repository's run record. \
stderr names the file once; the transcript holds every whole line \
written before the failure (after a result file, the run ends with outcome `output_failed` \
and its reports)"
            }
            ExitCode::Parked => {
                "parked: calls wait for a person's approval (a `defer:` rule, `--defer-asks` or \
a PreToolUse hook's `defer`; outcome `parked`). The run folder's `pending.json` lists each with \
its exact input, its hash and what it would do; `tollgate approve RUN` answers them and \
`tollgate run --resume RUN` goes on"
            }
            ExitCode::Interrupted => {
                "interrupted by SIGINT: running commands are killed, the transcript and reports \
are still written. A second signal exits at once."
            }
            ExitCode::Terminated => {
                "terminated by SIGTERM, or by SIGHUP (the terminal or the runner's session went \
away): running commands are killed, the transcript and reports are still written; the \
transcript's `query_aborted` says which signal. A second signal exits at once."
            }
        }
    }

    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::TaskFailed => 1,
            ExitCode::ConfigError => 2,
            ExitCode::PolicyStop => 3,
            ExitCode::ProviderError => 4,
            ExitCode::OutputError => 5,
            ExitCode::Parked => 6,
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
