//! The permission layer (S4): rules and their sources, modes, guardrails and the gate's
//! pipeline, and the settings file that carries them. Pure: takes values, returns decisions;
//! never reads files or runs anything, and its manifest lists no runtime, HTTP stack or
//! process runner to do so with.
//!
//! [`settings`] holds the file's other parts (hooks, sandbox, MCP servers, plugins, auto
//! mode, which source may set what); [`config`] reads YAML with file, line and column.

pub mod config;
pub mod settings;

mod ask;
mod decision;
mod file;
mod file_access;
mod gate;
mod guardrail;
mod lint;
mod mode;
mod path_glob;
mod path_index;
mod path_pattern;
mod rule;
mod rule_set;
mod self_test;
mod tool_name;
mod workspace;

pub use ask::{fast_path, headless_answer, headless_deny};
pub use decision::{
    AllowBasis, Ask, AskCause, Decision, DenialCounts, GateDecision, Grounds, HeadlessAnswer,
    Layer, PermissionDecision, RuleRef, Step, ToolCheck,
};
pub use file::{
    LowerGrant, ManagedKey, PermissionsBlock, Policy, PolicyOrigin, PolicyTest,
    ignored_claude_code_keys, key_levels_for_reference,
};
pub use file_access::{Access, check_path, read_refusal};
pub use gate::{GatedCall, TraceStep, decide, explain};
pub use guardrail::{
    fold, git_dir_write, may_guard_name, read_guardrail, read_guardrail_below, write_guardrail,
};
pub use lint::{LintWarning, danger, lint, reach};
pub use mode::{PermissionMode, UnknownMode};
pub use path_pattern::{PathBases, PathPattern};
pub use rule::{DomainPattern, Rule, RuleContent, RuleError, RuleKind};
#[cfg(any(test, feature = "test-support"))]
pub use rule_set::test_source;
pub use rule_set::{PolicySource, RuleSet, SourceKind};
pub use self_test::{AnswerForTest, SelfTestAnswer, SelfTestOutcome, run_self_tests};
pub use tool_name::{MAX_TOOL_NAME, ToolName};
pub use workspace::Workspace;

/// What a tool's own permission check may consult: the mode, the rules and the workspace.
#[derive(Debug, Clone, Copy)]
pub struct PermissionContext<'a> {
    pub mode: PermissionMode,
    pub rules: &'a RuleSet,
    pub workspace: &'a Workspace,
    /// Set only where nothing runs between decisions (`check --calls`): the disk as the
    /// stream first saw it, so a path is looked at once per stream, not once per decision.
    pub disk: Option<&'a tollgate_base::DiskView>,
    /// `sandbox.auto_allow_bash` with the sandbox enforced: a Bash command that no deny or
    /// ask rule or guardrail stopped may run without an allow rule (step 2b).
    pub auto_allow_bash: bool,
}

/// A context for tests of a tool's own properties: no rules, a workspace at `/ws`, default
/// mode.
#[cfg(any(test, feature = "test-support"))]
pub fn with_test_context<R>(f: impl FnOnce(&PermissionContext) -> R) -> R {
    let rules = RuleSet::default();
    let workspace = Workspace::new("/ws".into(), vec![], None);
    f(&PermissionContext {
        disk: None,
        auto_allow_bash: false,
        mode: PermissionMode::Default,
        rules: &rules,
        workspace: &workspace,
    })
}
