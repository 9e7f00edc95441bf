//! The permission layer (S4): rules and their sources, modes, guardrails and the gate's
//! pipeline. Pure: takes values, returns decisions; never reads files or runs anything.

mod ask;
mod authority;
mod auto_mode;
mod auto_mode_blocks;
mod decision;
mod file;
mod file_access;
mod gate;
mod guardrail;
mod held_back;
mod hooks_config;
mod ignored_key;
mod lint;
mod mcp_servers;
mod mode;
mod path_glob;
mod path_index;
mod path_pattern;
mod plugin_settings;
mod rule;
mod rule_set;
mod sandbox_config;
mod self_test;
mod settings_keys;
mod tool_name;
mod workspace;

pub use ask::{fast_path, headless_answer, headless_deny};
pub use authority::{
    AuthorityError, ConfigOrigin, Power, Standing, approvers, counts, lower_may_add,
    refuse_disabled, refuse_managed_keys_below, repository_directories_approved,
    repository_hooks_approved, resolve_mode, standing, table,
};
pub use auto_mode::{AutoModeConfig, merge_auto_mode, moots_classifier};
pub use auto_mode_blocks::{
    AutoModeProse, ClassifierFile, ClassifierProvider, ClassifierSettings, ConfigSpot,
};
pub use decision::{
    AllowBasis, Ask, AskCause, Decision, DenialCounts, GateDecision, Grounds, HeadlessAnswer,
    Layer, PermissionDecision, RuleRef, Step, ToolCheck,
};
pub use file::{LowerGrant, ManagedKey, PermissionsBlock, Policy, PolicyOrigin, PolicyTest};
pub use file_access::{Access, check_path, read_refusal};
pub use gate::{GatedCall, TraceStep, decide, explain};
pub use guardrail::{
    fold, git_dir_write, may_guard_name, read_guardrail, read_guardrail_below, write_guardrail,
};
pub use held_back::{
    Approval, Approver, Held, HeldBack, HeldKind, approval, plugin as held_plugin, server_approved,
};
pub use hooks_config::{
    DEFAULT_TIMEOUT_SECS, Hook, HookEvent, HookList, HookSpec, IGNORED_EVENTS, MAX_TIMEOUT_SECS,
    MatcherError, OnError, ToolMatcher, merge_hooks,
};
pub use ignored_key::IgnoredKey;
pub use lint::{LintWarning, danger, lint, reach};
pub use mcp_servers::{
    DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT, McpPolicy, McpServerMatcher,
    McpServerSpec, McpServersBlock, McpTransport, check_server_name, mcp_servers, mcp_transport,
    unsupported_transport,
};
pub use mode::{PermissionMode, UnknownMode};
pub use path_pattern::{PathBases, PathPattern};
pub use plugin_settings::{
    EnabledPlugins, KnownMarketplaces, Marketplace, MarketplaceSource, PluginSettings,
};
pub use rule::{DomainPattern, Rule, RuleContent, RuleError, RuleKind};
#[cfg(test)]
pub(crate) use rule_set::test_source;
pub use rule_set::{PolicySource, RuleSet, SourceKind};
pub use sandbox_config::{
    Caches, DEFAULT_DENY_READ, LimitsConfig, NetworkMode, OnUnavailable, Placement, PolicyPath,
    ReadOnlyCommands, SandboxBlock, SandboxConfig,
};
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
    pub disk: Option<&'a crate::base::DiskView>,
    /// `sandbox.auto_allow_bash` with the sandbox enforced: a Bash command that no deny or
    /// ask rule or guardrail stopped may run without an allow rule (step 2b).
    pub auto_allow_bash: bool,
}

/// A context for tests of a tool's own properties: no rules, a workspace at `/ws`, default
/// mode.
#[cfg(test)]
pub(crate) fn with_test_context<R>(f: impl FnOnce(&PermissionContext) -> R) -> R {
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
