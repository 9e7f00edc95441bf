//! Tools as data contracts (S1): a name, a schema, and `prepare`, which turns a model's input
//! into a typed `ToolInput` with pure functions of it and `run`. Everything a run needs comes
//! from its `ToolContext`; tools hold no state.

mod agent;
mod bash;
mod context;
mod delegation;
mod edit;
mod git_env;
mod glob;
mod grep;
mod outcome;
mod page_markdown;
mod path;
mod place;
mod pool;
mod progress;
mod read;
mod registry;
mod regular_file;
mod run_state;
mod shell;
mod text;
mod todo_write;
mod tool_search;
mod walk;
mod web_fetch;
mod write;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use agent::{AgentTool, check_literal, delegation_refusal};
pub use bash::BashTool;
pub use context::{FileStateCache, Stale, ToolContext, ToolLimits};
pub use delegation::{AgentProfile, Delegation, Subagent, SubagentKind};
pub use edit::EditTool;
pub use git_env::{trusted_git_env, trusted_git_env_for_remote};
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use outcome::{CommandEnding, CommandOutcome, CommandRun};
pub use path::{check_file_access, check_file_access_keeping, resolve_path, resolve_symlinks};
pub use pool::{Pool, tool_definition, tool_specs};
pub use progress::{ProgressLine, ProgressSink};
pub use read::ReadTool;
pub use registry::ToolRegistry;
pub use run_state::{
    DeferredTools, RunState, Todo, TodoList, TodoSnapshot, TodoStatus, ToolDefinition,
};
pub use shell::{Confinement, ShellEnv, model_command_env, run_confined, run_shell};
pub use todo_write::TodoWriteTool;
pub use tool_search::ToolSearchTool;
pub use web_fetch::{WebFetchTool, allow_patterns, domain_rule};
pub use write::WriteTool;

use crate::ledger::{Allowance, GitWrites};
use crate::policy::{PermissionContext, ToolCheck, ToolName};

/// What a running tool does when the run is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptBehavior {
    /// Stop at once; nothing is left half-done.
    Cancel,
    /// Finish (or be killed) before the interrupt takes effect.
    Block,
}

/// A successful result, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    /// How the command the call ran ended (Bash); `None` for a call that ran none.
    pub command: Option<CommandOutcome>,
}

impl ToolOutput {
    pub fn new(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            command: None,
        }
    }

    /// A command's result: an output when it succeeded, else an error that keeps its outcome.
    pub fn of_command(run: CommandRun) -> Result<ToolOutput, ToolError> {
        if run.outcome.succeeded() {
            Ok(ToolOutput {
                content: run.to_string(),
                command: Some(run.outcome),
            })
        } else {
            Err(ToolError::Command(run))
        }
    }
}

/// A call that could not be run or failed; its text goes back to the model as an is_error
/// tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The input does not fit the tool's schema.
    #[error("invalid input for {tool}: {message}")]
    Schema { tool: ToolName, message: String },
    /// The input fits the schema but cannot be run as given (an empty command, a pattern that
    /// does not compile, an edit that changes nothing).
    #[error("{0}")]
    Invalid(String),
    /// A write to a file the run has not read in its current version (Write, Edit).
    #[error(transparent)]
    Stale(#[from] Stale),
    /// The call ran and failed; the text (with any output) says how.
    #[error("{0}")]
    Failed(String),
    /// The scheduler stopped the call at its deadline.
    #[error("{0}")]
    Stopped(String),
    /// The command the call ran did not succeed ([`ToolOutput::of_command`]), or was stopped;
    /// its text is written when the result lands.
    #[error("{0}")]
    Command(CommandRun),
}

impl ToolError {
    /// How the call's command ended, for a call that ran one.
    pub fn command(&self) -> Option<&CommandOutcome> {
        match self {
            ToolError::Command(run) => Some(&run.outcome),
            ToolError::Schema { .. }
            | ToolError::Invalid(_)
            | ToolError::Stale(_)
            | ToolError::Failed(_)
            | ToolError::Stopped(_) => None,
        }
    }
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// The S1 contract: what a tool is, and how it turns a model's input into a validated one.
pub trait Tool: Send + Sync {
    fn name(&self) -> ToolName;
    /// What the model is told the tool does (an MCP server's own text is owned).
    fn description(&self) -> Cow<'static, str>;
    fn input_schema(&self) -> Value;
    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Block
    }
    fn requires_user_interaction(&self) -> bool {
        false
    }
    fn max_result_chars(&self) -> usize {
        30_000
    }
    /// Parses and validates the input once, into the typed input every later stage reads.
    /// `Err` says what is wrong, for the model.
    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError>;
}

/// A tool's validated input, with the pure functions of it (S1). The defaults fail closed:
/// an input that says nothing about itself is writing and exclusive. S1's "destructive?" is
/// "not read-only" here: every tool answered it as exactly that, so one function says both.
pub trait ToolInput: Send + Sync {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        false
    }
    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        false
    }
    /// The tool's own permission check (S4 step 1c).
    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck;
    /// Whether an allow from [`ToolInput::check_permissions`] under `ctx` rests on a proof
    /// that the call only reads (Bash's analyser), and on nothing a rule or mode granted.
    fn allowed_by_read_only_proof(&self, _ctx: &PermissionContext) -> bool {
        false
    }
    /// What this call may change, for the effect ledger: `by_check` when the tool's own
    /// check allowed it (its analysis named what it writes), else a rule, the mode, a hook or
    /// the classifier allowed it whole. The default fails closed on the side of the verdict:
    /// a read-only input may change nothing; any other input is a program whose writes
    /// nobody named, held to the workspace without its guarded paths.
    fn allowed_effects(&self, ctx: &PermissionContext, by_check: bool) -> Allowance {
        let _ = by_check;
        if self.is_read_only(ctx) {
            Allowance::nothing(GitWrites::None)
        } else {
            Allowance::workspace(Vec::new(), GitWrites::None)
        }
    }
    /// A Bash command's analysis under `ctx`'s rules and workspace, the one the tool's own
    /// check read: the classifier's rule proposal names its commands. `None` for other tools.
    fn bash_analysis(&self, _ctx: &PermissionContext) -> Option<Arc<crate::bash::BashAnalysis>> {
        None
    }
    /// Details of the tool's own check for `check --explain` (Bash: each simple command
    /// and its verdict). Empty when the check's reason says it all.
    fn explain_permissions(&self, _ctx: &PermissionContext) -> Vec<String> {
        Vec::new()
    }
    /// This call's result when the scheduler ends it before `run` returned (its deadline ran
    /// out, its task panicked). A call that runs a command reports the command as stopped.
    fn stopped(&self, reason: String) -> ToolError {
        ToolError::Stopped(reason)
    }
    /// A call the agent loop runs as a sub-agent's conversation (Agent, an agent-mode
    /// Skill) instead of through `run`.
    fn delegation(&self) -> Option<&Delegation> {
        None
    }
    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// Parses a tool's input into its typed form; the message names the problem for the model.
pub fn parse_input<T: DeserializeOwned>(tool: &ToolName, input: &Value) -> Result<T, ToolError> {
    T::deserialize(input).map_err(|err| ToolError::Schema {
        tool: tool.clone(),
        message: err.to_string(),
    })
}

/// The built-in tools by name, in the order they are offered to the model.
pub fn builtin(name: &ToolName) -> Option<Arc<dyn Tool>> {
    let tool: Arc<dyn Tool> = match name {
        ToolName::Read => Arc::new(ReadTool),
        ToolName::Write => Arc::new(WriteTool),
        ToolName::Edit => Arc::new(EditTool),
        ToolName::Glob => Arc::new(GlobTool),
        ToolName::Grep => Arc::new(GrepTool),
        ToolName::Bash => Arc::new(BashTool),
        ToolName::TodoWrite => Arc::new(TodoWriteTool),
        ToolName::ToolSearch => Arc::new(ToolSearchTool),
        ToolName::WebFetch => Arc::new(WebFetchTool),
        ToolName::Agent => Arc::new(AgentTool::default()),
        _ => return None,
    };
    Some(tool)
}

/// Names of the built-ins tollgate implements today, for `tools:` validation and help text.
/// Skill is built per run from the skills found, so `builtin` has none to give.
pub fn implemented_builtins() -> Vec<ToolName> {
    ToolName::BUILTINS
        .into_iter()
        .filter(|name| builtin(name).is_some() || *name == ToolName::Skill)
        .collect()
}

/// Tools a task names to have: a sub-agent or a skill spends budget in a context of its
/// own, so a task without `tools:` gets neither.
pub const OPT_IN: [ToolName; 2] = [ToolName::Agent, ToolName::Skill];

/// The tools of a task without `tools:`.
pub fn default_tools() -> Vec<ToolName> {
    implemented_builtins()
        .into_iter()
        .filter(|name| !OPT_IN.contains(name))
        .collect()
}
