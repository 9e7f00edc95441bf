//! The settings file's parts that are not permission rules: hooks, the sandbox, MCP
//! servers, plugins and marketplaces, auto mode's classifier and prose, and the authority
//! each source holds over them (what a lower source may add, what waits on approval). The
//! gate reads none of them; the runner does.

pub(crate) mod authority;
pub(crate) mod auto_mode;
pub(crate) mod auto_mode_blocks;
pub(crate) mod held_back;
pub(crate) mod hooks;
pub(crate) mod ignored_key;
pub(crate) mod keys;
pub(crate) mod mcp_servers;
pub(crate) mod plugins;
pub(crate) mod sandbox;

pub use authority::{
    AuthorityError, ConfigOrigin, Power, Standing, approvers, counts, lower_may_add,
    refuse_disabled, refuse_managed_keys_below, repository_directories_approved,
    repository_hooks_approved, resolve_mode, standing, table,
};
pub use auto_mode::{AutoModeConfig, merge_auto_mode, moots_classifier};
pub use auto_mode_blocks::{
    AutoModeProse, ClassifierFile, ClassifierProvider, ClassifierSettings, ConfigSpot,
};
pub use held_back::{
    Approval, Approver, Held, HeldBack, HeldKind, approval, plugin as held_plugin, server_approved,
};
pub use hooks::{
    DEFAULT_TIMEOUT_SECS, Hook, HookEvent, HookList, HookSpec, IGNORED_EVENTS, MAX_TIMEOUT_SECS,
    MatcherError, OnError, ToolMatcher, merge_hooks,
};
pub use ignored_key::IgnoredKey;
pub use mcp_servers::{
    DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT, McpPolicy, McpServerMatcher,
    McpServerSpec, McpServersBlock, McpTransport, check_server_name, mcp_servers, mcp_transport,
    unsupported_transport,
};
pub use plugins::{
    EnabledPlugins, KnownMarketplaces, Marketplace, MarketplaceSource, PluginSettings,
};
pub use sandbox::{
    Caches, DEFAULT_DENY_READ, LimitsConfig, NetworkMode, OnUnavailable, Placement, PolicyPath,
    ReadOnlyCommands, SandboxBlock, SandboxConfig,
};
