//! Tools as data contracts (S1): a name, a schema and pure functions of the input, plus
//! `call`. Everything a call needs comes from its `ToolContext`; tools hold no state.

mod bash;
mod context;
mod edit;
mod git_env;
mod glob;
mod grep;
mod path;
mod progress;
mod read;
mod shell;
mod text;
mod walk;
mod write;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use bash::BashTool;
pub use context::{AbortHandle, AbortReason, AbortSignal, FileStateCache, ToolContext, ToolLimits};
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use path::{check_file_access, resolve_path, resolve_symlinks};
pub use progress::{ProgressLine, ProgressSink};
pub use read::ReadTool;
pub use shell::{ShellEnding, ShellEnv, ShellRun, model_command_env, run_shell};
pub use text::truncate_middle;
pub use write::WriteTool;

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
}

impl ToolOutput {
    pub fn new(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
        }
    }
}

/// A failed call; the message goes back to the model as an is_error tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// The S1 contract. The defaults fail closed: a tool that says nothing about itself is
/// treated as writing, exclusive, destructive and blocking, and its calls need the gate.
pub trait Tool: Send + Sync {
    fn name(&self) -> ToolName;
    fn description(&self) -> &'static str;
    fn input_schema(&self) -> Value;
    /// Checks the input's shape before anything else looks at it.
    fn validate_input(&self, input: &Value) -> Result<(), ToolError>;
    fn is_read_only(&self, _input: &Value) -> bool {
        false
    }
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }
    fn is_destructive(&self, _input: &Value) -> bool {
        true
    }
    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Block
    }
    fn requires_user_interaction(&self) -> bool {
        false
    }
    fn check_permissions(&self, _input: &Value, _ctx: &PermissionContext) -> ToolCheck {
        ToolCheck::Passthrough {
            reason: format!("{} has no permission check of its own", self.name()),
        }
    }
    /// Details of the tool's own check for `check --explain` (Bash: each simple command
    /// and its verdict). Empty when the check's reason says it all.
    fn explain_permissions(&self, _input: &Value, _ctx: &PermissionContext) -> Vec<String> {
        Vec::new()
    }
    fn max_result_chars(&self) -> usize {
        30_000
    }
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// Parses a tool's input into its typed form; the message names the problem for the model.
pub fn parse_input<T: DeserializeOwned>(tool: &ToolName, input: &Value) -> Result<T, ToolError> {
    serde_json::from_value(input.clone())
        .map_err(|err| ToolError::new(format!("invalid input for {tool}: {err}")))
}

/// A malformed input in a permission check: nothing about it is proven, so deny.
fn invalid_input_check(err: ToolError) -> ToolCheck {
    ToolCheck::Deny {
        reason: err.0,
        rule: None,
    }
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
        _ => return None,
    };
    Some(tool)
}

/// Names of the built-ins tollgate implements today, for `tools:` validation and help text.
pub fn implemented_builtins() -> Vec<ToolName> {
    ToolName::BUILTINS
        .into_iter()
        .filter(|name| builtin(name).is_some())
        .collect()
}
