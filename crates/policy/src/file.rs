//! Policy files (YAML or JSON): tollgate's `permissions` block, or Claude Code's settings
//! `permissions` block unchanged, turned into typed rules that remember their file and line.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::decision::{Decision, HeadlessAnswer};
use super::mode::PermissionMode;
use super::rule::{Rule, RuleKind};
use super::tool_name::ToolName;
use crate::config::{self, ConfigError, SourceLocation};
use crate::settings::auto_mode_blocks::{AutoModeProse, ClassifierFile, ClassifierSettings};
use crate::settings::hooks::{Hook, HookList};
use crate::settings::ignored_key::IgnoredKey;
use crate::settings::keys::{Level, Schema, every_unknown_key};
use crate::settings::mcp_servers::{McpPolicy, McpServerMatcher, McpServersBlock, mcp_servers};
use crate::settings::plugins::{EnabledPlugins, KnownMarketplaces, PluginSettings};
use crate::settings::sandbox::{SandboxBlock, SandboxConfig};

/// Declares `PolicyFile` with tollgate's own keys plus the Claude Code settings keys that a
/// user's `settings.json` may carry and that grant nothing here: those load, are ignored with
/// the reason given, and are named in `run_started`; any other unknown key is still an error
/// with its location.
macro_rules! policy_file {
    ($($claude_key:literal => $field:ident: $why:expr,)*) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct PolicyFile {
            #[serde(default)]
            permissions: PermissionsBlock,
            /// Claude Code's `allowManagedPermissionRulesOnly`.
            #[serde(default, alias = "allowManagedPermissionRulesOnly")]
            managed_only: Option<Spanned<bool>>,
            #[serde(default)]
            disable_bypass_mode: bool,
            #[serde(default)]
            disable_auto_mode: bool,
            #[serde(default)]
            tests: Vec<Spanned<PolicyTestFile>>,
            #[serde(default)]
            hooks: HookList,
            /// Claude Code's `disableAllHooks`: hooks off, as far as this file's authority
            /// goes (see `session::hooks_in_force`).
            #[serde(default, alias = "disableAllHooks")]
            disable_all_hooks: bool,
            /// Claude Code's `allowManagedHooksOnly`.
            #[serde(default, alias = "allowManagedHooksOnly")]
            managed_hooks_only: Option<Spanned<bool>>,
            /// Modes a lower source may choose (managed policy only).
            #[serde(default)]
            allowed_modes: Option<Spanned<Vec<Spanned<String>>>>,
            /// What lower sources may still add under `managed_only` (managed policy only).
            #[serde(default)]
            lower_sources_may_add: Option<Spanned<Vec<LowerGrant>>>,
            /// Auto mode's judge.
            #[serde(default)]
            classifier: Option<Spanned<ClassifierFile>>,
            /// Auto mode's prose for the judge (Claude Code's `autoMode`, the same shape).
            #[serde(default, alias = "autoMode")]
            auto_mode: Option<AutoModeProse>,
            /// tollgate's `sandbox:` block, or Claude Code's (`autoAllowBashIfSandboxed`, …).
            #[serde(default)]
            sandbox: Option<SandboxBlock>,
            /// MCP servers to start (the shape of `.mcp.json`'s `mcpServers`).
            #[serde(default)]
            mcp_servers: Option<McpServersBlock>,
            /// Read the workdir's `.mcp.json` (Claude Code's `enableAllProjectMcpServers`).
            #[serde(default, alias = "enableAllProjectMcpServers")]
            allow_project_mcp: Option<bool>,
            /// The repository's hooks (task file, `.tollgate/policy.yaml`) run; honoured in the
            /// managed and the user's policy only.
            #[serde(default)]
            allow_project_hooks: Option<bool>,
            /// The repository's `additional_directories` (task file, `.tollgate/policy.yaml`,
            /// `.claude/settings.json`) count; honoured in the managed and the user's policy.
            #[serde(default)]
            allow_project_directories: Option<bool>,
            /// Only the managed policy's MCP servers start (managed policy only; Claude Code's
            /// `allowManagedMcpServersOnly`).
            #[serde(default, alias = "allowManagedMcpServersOnly")]
            managed_mcp_only: Option<Spanned<bool>>,
            #[serde(default, rename = "enabledMcpjsonServers")]
            enabled_mcpjson_servers: Vec<String>,
            #[serde(default, rename = "disabledMcpjsonServers")]
            disabled_mcpjson_servers: Vec<String>,
            #[serde(default, rename = "allowedMcpServers")]
            allowed_mcp_servers: Option<Vec<McpServerMatcher>>,
            #[serde(default, rename = "deniedMcpServers")]
            denied_mcp_servers: Vec<McpServerMatcher>,
            /// Claude Code's plugins switched on (`name@marketplace: true`).
            #[serde(default, rename = "enabledPlugins")]
            enabled_plugins: EnabledPlugins,
            /// Claude Code's marketplaces beyond the official one.
            #[serde(default, rename = "extraKnownMarketplaces")]
            extra_known_marketplaces: KnownMarketplaces,
            /// Local plugin folders (Claude Code's layout) this file enables.
            #[serde(default, rename = "plugins")]
            plugin_dirs: Vec<Spanned<String>>,
            $(
                #[serde(default, rename = $claude_key)]
                $field: Option<IgnoredAny>,
            )*
        }

        impl PolicyFile {
            /// The Claude Code keys present that grant nothing here, with why.
            fn ignored_claude_code_keys(&self) -> Vec<IgnoredKey> {
                let mut keys = Vec::new();
                $(
                    if self.$field.is_some() {
                        keys.push(IgnoredKey::new($claude_key, $why));
                    }
                )*
                keys
            }
        }

        /// Every Claude Code key this file loads and ignores, with why: for the documentation's
        /// table, and for the hint of such a key written at the wrong level.
        const IGNORED_CLAUDE_CODE_KEYS: &[(&str, &str)] = &[$(($claude_key, $why),)*];

        /// The keys of every level of a policy file whose keys are checked together (the
        /// top: tollgate's, their Claude Code aliases and the Claude Code keys it ignores;
        /// `permissions`; `sandbox` and its blocks), from the types that read them.
        fn key_levels() -> Vec<Level> {
            let mut levels = vec![
                Level {
                    path: "",
                    keys: config::struct_keys::<PolicyFile>(),
                },
                Level {
                    path: "permissions",
                    keys: config::struct_keys::<PermissionsBlock>(),
                },
            ];
            levels.extend(
                crate::settings::sandbox::key_levels()
                    .into_iter()
                    .map(|(path, keys)| Level { path, keys }),
            );
            levels
        }
    };
}

/// Every block of a policy file and the keys it takes, taken from the types that read them
/// (serde's own field lists, aliases included), for the reference's table: the levels the
/// unknown-key check walks, then the blocks whose entries are checked one by one. The Claude
/// Code keys the top level loads and ignores are left out; [`ignored_claude_code_keys`] has
/// them with why.
pub fn key_levels_for_reference() -> Vec<(&'static str, Vec<&'static str>)> {
    use crate::settings::hooks::HookSpec;
    use crate::settings::mcp_servers::McpServerFile;
    let ignored = |key: &&str| !IGNORED_CLAUDE_CODE_KEYS.iter().any(|(name, _)| name == key);
    let mut levels: Vec<(&'static str, Vec<&'static str>)> = key_levels()
        .into_iter()
        .map(|level| {
            (
                level.path,
                level.keys.iter().copied().filter(ignored).collect(),
            )
        })
        .collect();
    levels.extend([
        ("hooks[]", config::struct_keys::<HookSpec>().to_vec()),
        (
            "mcp_servers.NAME",
            config::struct_keys::<McpServerFile>().to_vec(),
        ),
        (
            "classifier",
            config::struct_keys::<ClassifierFile>().to_vec(),
        ),
        ("auto_mode", config::struct_keys::<AutoModeProse>().to_vec()),
        ("tests[]", config::struct_keys::<PolicyTestFile>().to_vec()),
    ]);
    levels
}

/// The Claude Code keys a policy file loads and ignores, with why.
pub fn ignored_claude_code_keys() -> &'static [(&'static str, &'static str)] {
    IGNORED_CLAUDE_CODE_KEYS
}

const CLIENT: &str = "interactive client setting: tollgate has no terminal UI";
const AUTH: &str = "credentials come from the task's provider settings, never from a settings file";
const MODEL: &str = "the task file chooses the model and its settings";

policy_file! {
    "$schema" => schema: "an editor's schema hint",
    "apiKeyHelper" => api_key_helper: AUTH,
    "awsAuthRefresh" => aws_auth_refresh: AUTH,
    "awsCredentialExport" => aws_credential_export: AUTH,
    "forceLoginMethod" => force_login_method: AUTH,
    "forceLoginOrgUUID" => force_login_org_uuid: AUTH,
    "otelHeadersHelper" => otel_headers_helper: "tollgate exports no OpenTelemetry; its transcript is the record",
    "cleanupPeriodDays" => cleanup_period_days: "tollgate keeps no session history between runs",
    "companyAnnouncements" => company_announcements: CLIENT,
    "env" => env: "the environment comes from the runner and the task; a settings file cannot set what commands see",
    "includeCoAuthoredBy" => include_co_authored_by: "tollgate writes no commits of its own",
    "includeGitInstructions" => include_git_instructions: "the task's prompt is the model's instructions",
    "attribution" => attribution: "tollgate writes no commits or pull requests of its own",
    "model" => model: MODEL,
    "availableModels" => available_models: MODEL,
    "effortLevel" => effort_level: MODEL,
    "alwaysThinkingEnabled" => always_thinking_enabled: MODEL,
    "fastMode" => fast_mode: MODEL,
    "outputStyle" => output_style: "the task's prompt is the model's instructions",
    "statusLine" => status_line: CLIENT,
    "fileSuggestion" => file_suggestion: CLIENT,
    "spinnerTipsEnabled" => spinner_tips_enabled: CLIENT,
    "spinnerTipsOverride" => spinner_tips_override: CLIENT,
    "spinnerVerbs" => spinner_verbs: CLIENT,
    "showTurnDuration" => show_turn_duration: CLIENT,
    "terminalProgressBarEnabled" => terminal_progress_bar_enabled: CLIENT,
    "prefersReducedMotion" => prefers_reduced_motion: CLIENT,
    "theme" => theme: CLIENT,
    "editorMode" => editor_mode: CLIENT,
    "verbose" => verbose: CLIENT,
    "preferredNotifChannel" => preferred_notif_channel: CLIENT,
    "messageIdleNotifThresholdMs" => message_idle_notif_threshold_ms: CLIENT,
    "autoConnectIde" => auto_connect_ide: CLIENT,
    "autoInstallIdeExtension" => auto_install_ide_extension: CLIENT,
    "teammateMode" => teammate_mode: CLIENT,
    "feedbackSurveyRate" => feedback_survey_rate: CLIENT,
    "language" => language: "the task's prompt is the model's instructions",
    "autoUpdatesChannel" => auto_updates_channel: "tollgate does not update itself",
    "autoUpdates" => auto_updates: "tollgate does not update itself",
    "autoCompactEnabled" => auto_compact_enabled: "the task file, not a settings file, decides how a run handles its context",
    "respectGitignore" => respect_gitignore: CLIENT,
    "plansDirectory" => plans_directory: "tollgate writes no plan files; plan mode only restricts tools",
    "skipDangerousModePermissionPrompt" => skip_dangerous_mode_permission_prompt: "tollgate asks nobody before bypassPermissions; the managed policy's `allowed_modes` decide whether it may run",
    "installedPluginVersions" => installed_plugin_versions: "a record of what the interactive client installed; tollgate loads plugins from local folders only",
    "strictKnownMarketplaces" => strict_known_marketplaces: "tollgate fetches no marketplace; only local plugin folders load",
    "pluginConfigs" => plugin_configs: "plugin options are the plugin folder's own",
    "skipWebFetchPreflight" => skip_web_fetch_preflight: "tollgate's WebFetch makes no preflight call",
    "disableNonEssentialModelCalls" => disable_non_essential_model_calls: "tollgate makes no side model calls besides auto mode's classifier",
    "autoMemoryEnabled" => auto_memory_enabled: "tollgate keeps no memory between runs",
    "autoMemoryDirectory" => auto_memory_directory: "tollgate keeps no memory between runs",
    "skipAutoPermissionPrompt" => skip_auto_permission_prompt: "tollgate asks nobody before auto mode; the managed policy's `allowed_modes` decide whether it may run",
    "useAutoModeDuringPlan" => use_auto_mode_during_plan: "plan mode in tollgate runs only read-only calls, whatever the mode's judge would say",
    "claudeMdExcludes" => claude_md_excludes: "the task file, not a settings file, decides which memory files the model reads",
}

/// What a managed policy lets lower sources add although it is `managed_only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LowerGrant {
    Hooks,
    AdditionalDirectories,
    McpServers,
}

/// A key only a managed policy may set, where a file wrote it (so a lower file that does is
/// refused with this location instead of being believed in force).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedKey {
    pub key: &'static str,
    pub line: u64,
    pub column: u64,
}

/// A `permissions:` block, in a policy file or a task file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsBlock {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    /// Ask rules whose call a headless run parks for a person (`tollgate approve`)
    /// instead of refusing it.
    #[serde(default)]
    defer: Vec<Spanned<String>>,
    #[serde(default, alias = "additionalDirectories")]
    additional_directories: Vec<Spanned<String>>,
    #[serde(default, alias = "defaultMode")]
    default_mode: Option<Spanned<String>>,
    /// Claude Code's `disableBypassPermissionsMode: "disable"`.
    #[serde(default, rename = "disableBypassPermissionsMode")]
    disable_bypass_permissions_mode: Option<Spanned<String>>,
    /// Claude Code's `disableAutoMode: "disable"`.
    #[serde(default, rename = "disableAutoMode")]
    disable_auto_mode: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyTestFile {
    name: Option<String>,
    tool: String,
    #[serde(default)]
    input: Value,
    expect: Decision,
    mode: Option<PermissionMode>,
}

/// A policy's self-test: the decision the policy must give for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyTest {
    pub name: String,
    /// `Other` when tollgate has no such tool: the test then fails, saying so.
    pub tool: ToolName,
    pub input: Value,
    pub expect: Decision,
    pub mode: Option<PermissionMode>,
    pub source: SourceLocation,
}

/// Where a policy's text came from: `file` names it in messages; `dir` (absolute) anchors
/// `/x` path rules and relative additional directories; `home` expands `~/`.
#[derive(Debug, Clone, Copy)]
pub struct PolicyOrigin<'a> {
    pub file: &'a Path,
    pub dir: &'a Path,
    pub home: Option<&'a Path>,
}

/// One loaded policy file (or a task's `permissions:` block, or the command line's rules).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub file: PathBuf,
    pub rules: Vec<Rule>,
    /// Absolute; relative entries are resolved against the policy file's folder.
    pub additional_directories: Vec<PathBuf>,
    pub default_mode: Option<PermissionMode>,
    pub managed_only: bool,
    pub disable_bypass: bool,
    pub disable_auto: bool,
    pub tests: Vec<PolicyTest>,
    pub hooks: Vec<Hook>,
    /// Only the managed policy's hooks run (meaningful in a managed policy only).
    pub managed_hooks_only: bool,
    /// `allow_project_hooks`: the repository's hooks run (meaningful in the managed and the
    /// user's policy only; see `policy::authority`).
    pub allow_project_hooks: bool,
    /// `allow_project_directories`: the repository's additional directories count
    /// (meaningful in the managed and the user's policy only; see `policy::authority`).
    pub allow_project_directories: bool,
    /// `disable_all_hooks` (Claude Code's `disableAllHooks`).
    pub disable_all_hooks: bool,
    /// Auto mode's judge (`classifier:`).
    pub classifier: Option<ClassifierSettings>,
    /// Auto mode's prose (`auto_mode:`).
    pub auto_mode: Option<AutoModeProse>,
    /// The modes a lower source may choose; `None`: the default rule (see `policy::authority`).
    pub allowed_modes: Option<Vec<PermissionMode>>,
    pub lower_may_add: Vec<LowerGrant>,
    /// Managed-only keys this file wrote, with their locations.
    pub managed_keys: Vec<ManagedKey>,
    /// Claude Code settings keys present that grant nothing here, with why.
    pub ignored_keys: Vec<IgnoredKey>,
    /// Claude Code's `enabledPlugins` and `extraKnownMarketplaces`, as written.
    pub plugins: PluginSettings,
    /// `plugins:`, local plugin folders, resolved against the file's folder.
    pub plugin_dirs: Vec<PathBuf>,
    /// The `sandbox:` block, if the file has one.
    pub sandbox: Option<SandboxConfig>,
    /// MCP servers and which of them may start.
    pub mcp: McpPolicy,
}

impl Policy {
    pub fn parse(text: &str, origin: PolicyOrigin) -> Result<Policy, ConfigError> {
        Self::parse_text(text, origin).map_err(|err| err.with_source(origin.file, text))
    }

    fn parse_text(text: &str, origin: PolicyOrigin) -> Result<Policy, ConfigError> {
        let mut parsed: PolicyFile = config::parse(text, origin.file).map_err(|err| {
            let levels = key_levels();
            let schema = Schema {
                levels: &levels,
                ignored: IGNORED_CLAUDE_CODE_KEYS,
            };
            every_unknown_key(err, text, origin.file, schema)
        })?;
        let mut ignored_keys = parsed.ignored_claude_code_keys();
        ignored_keys.append(&mut parsed.hooks.ignored);
        let permissions = std::mem::take(&mut parsed.permissions);
        let mut policy = Policy::from_block(permissions, origin)?;
        policy.plugins = PluginSettings {
            enabled: std::mem::take(&mut parsed.enabled_plugins),
            marketplaces: std::mem::take(&mut parsed.extra_known_marketplaces),
        };
        // Where each managed-only key stands, so a lower file that writes one is refused at
        // its location.
        let at = |spanned: Option<&serde_saphyr::Location>| {
            spanned.map(|location| (location.line(), location.column()))
        };
        let managed_keys = [
            (
                "managed_only",
                at(parsed.managed_only.as_ref().map(|s| &s.referenced)),
            ),
            (
                "managed_hooks_only",
                at(parsed.managed_hooks_only.as_ref().map(|s| &s.referenced)),
            ),
            (
                "allowed_modes",
                at(parsed.allowed_modes.as_ref().map(|s| &s.referenced)),
            ),
            (
                "lower_sources_may_add",
                at(parsed.lower_sources_may_add.as_ref().map(|s| &s.referenced)),
            ),
            (
                "managed_mcp_only",
                at(parsed.managed_mcp_only.as_ref().map(|s| &s.referenced)),
            ),
        ];
        for (key, found) in managed_keys {
            if let Some((line, column)) = found {
                policy.managed_keys.push(ManagedKey { key, line, column });
            }
        }
        policy.managed_only = parsed.managed_only.is_some_and(|spanned| spanned.value);
        policy.allow_project_hooks = parsed.allow_project_hooks.unwrap_or(false);
        policy.allow_project_directories = parsed.allow_project_directories.unwrap_or(false);
        policy.disable_all_hooks = parsed.disable_all_hooks;
        policy.disable_bypass |= parsed.disable_bypass_mode;
        policy.disable_auto |= parsed.disable_auto_mode;
        policy.managed_hooks_only = parsed
            .managed_hooks_only
            .is_some_and(|spanned| spanned.value);
        policy.lower_may_add = parsed
            .lower_sources_may_add
            .map(|spanned| spanned.value)
            .unwrap_or_default();
        policy.allowed_modes = parsed
            .allowed_modes
            .map(|spanned| {
                spanned
                    .value
                    .iter()
                    .map(|mode| parse_mode(mode, origin.file))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        policy.auto_mode = parsed.auto_mode;
        policy.classifier = parsed
            .classifier
            .map(|spanned| {
                let at = spanned.referenced;
                spanned
                    .value
                    .validate(origin.dir, origin.file)
                    .map_err(|message| {
                        ConfigError::new(origin.file, at.line(), at.column(), message)
                    })
            })
            .transpose()?;
        if let Some(block) = parsed.sandbox {
            let (config, mut ignored) = block.into_config_noting(origin.file)?;
            policy.sandbox = Some(config);
            ignored_keys.append(&mut ignored);
        }
        policy.ignored_keys = ignored_keys;
        policy.plugin_dirs = parsed
            .plugin_dirs
            .iter()
            .map(|spanned| resolve_dir(&spanned.value, origin.dir, origin.home))
            .collect();
        policy.mcp = McpPolicy {
            servers: mcp_servers(parsed.mcp_servers.unwrap_or_default(), origin.file)?,
            allow_project: parsed.allow_project_mcp.unwrap_or(false),
            enabled_project: parsed.enabled_mcpjson_servers,
            disabled_project: parsed.disabled_mcpjson_servers,
            allowed: parsed.allowed_mcp_servers,
            denied: parsed.denied_mcp_servers,
            managed_only: parsed.managed_mcp_only.is_some_and(|spanned| spanned.value),
        };
        policy.hooks = parsed
            .hooks
            .specs
            .into_iter()
            .map(|spec| Hook {
                spec,
                source: origin.file.to_path_buf(),
            })
            .collect();
        policy.tests = parsed
            .tests
            .into_iter()
            .enumerate()
            .map(|(index, spanned)| {
                let test = spanned.value;
                PolicyTest {
                    name: test.name.unwrap_or_else(|| format!("test {}", index + 1)),
                    tool: ToolName::from_model(&test.tool),
                    input: test.input,
                    expect: test.expect,
                    mode: test.mode,
                    source: SourceLocation {
                        file: origin.file.to_path_buf(),
                        line: spanned.referenced.line(),
                    },
                }
            })
            .collect();
        Ok(policy)
    }

    /// A policy made of one `permissions:` block (a task file embeds one).
    pub fn from_block(
        block: PermissionsBlock,
        origin: PolicyOrigin,
    ) -> Result<Policy, ConfigError> {
        let file = origin.file;
        let mut rules = Vec::new();
        // A `defer:` rule is an ask rule that says what nobody's answer becomes.
        for (kind, headless, texts) in [
            (RuleKind::Deny, HeadlessAnswer::Deny, &block.deny),
            (RuleKind::Ask, HeadlessAnswer::Deny, &block.ask),
            (RuleKind::Ask, HeadlessAnswer::Defer, &block.defer),
            (RuleKind::Allow, HeadlessAnswer::Deny, &block.allow),
        ] {
            for spanned in texts {
                let line = spanned.referenced.line();
                let source = SourceLocation {
                    file: file.to_path_buf(),
                    line,
                };
                let rule =
                    Rule::parse(&spanned.value, kind, source, origin.dir).map_err(|err| {
                        ConfigError::new(file, line, spanned.referenced.column(), err.to_string())
                    })?;
                rules.push(Rule { headless, ..rule });
            }
        }
        let default_mode = block
            .default_mode
            .map(|spanned| parse_mode(&spanned, file))
            .transpose()?;
        let disable_bypass = disable_switch(
            block.disable_bypass_permissions_mode,
            "disableBypassPermissionsMode",
            file,
        )?;
        let disable_auto = disable_switch(block.disable_auto_mode, "disableAutoMode", file)?;
        let additional_directories = block
            .additional_directories
            .iter()
            .map(|spanned| resolve_dir(&spanned.value, origin.dir, origin.home))
            .collect();
        Ok(Policy {
            file: file.to_path_buf(),
            rules,
            additional_directories,
            default_mode,
            managed_only: false,
            disable_bypass,
            disable_auto,
            tests: Vec::new(),
            hooks: Vec::new(),
            managed_hooks_only: false,
            allow_project_hooks: false,
            allow_project_directories: false,
            disable_all_hooks: false,
            classifier: None,
            auto_mode: None,
            allowed_modes: None,
            lower_may_add: Vec::new(),
            managed_keys: Vec::new(),
            ignored_keys: Vec::new(),
            plugins: PluginSettings::default(),
            plugin_dirs: Vec::new(),
            sandbox: None,
            mcp: McpPolicy::default(),
        })
    }

    /// Rules given as command-line flags; `label` names them in decisions (`--allow #2`).
    pub fn from_flags(
        allow: &[String],
        deny: &[String],
        ask: &[String],
        dir: &Path,
    ) -> Result<Policy, super::rule::RuleError> {
        let mut rules = Vec::new();
        for (kind, texts, flag) in [
            (RuleKind::Deny, deny, "--deny"),
            (RuleKind::Ask, ask, "--ask"),
            (RuleKind::Allow, allow, "--allow"),
        ] {
            for (index, text) in texts.iter().enumerate() {
                let source = SourceLocation {
                    file: PathBuf::from(format!("<command line {flag}>")),
                    line: u64::try_from(index + 1).unwrap_or(u64::MAX),
                };
                rules.push(Rule::parse(text, kind, source, dir)?);
            }
        }
        Ok(Policy {
            file: PathBuf::from("<command line>"),
            rules,
            additional_directories: Vec::new(),
            default_mode: None,
            managed_only: false,
            disable_bypass: false,
            disable_auto: false,
            tests: Vec::new(),
            hooks: Vec::new(),
            managed_hooks_only: false,
            allow_project_hooks: false,
            allow_project_directories: false,
            disable_all_hooks: false,
            classifier: None,
            auto_mode: None,
            allowed_modes: None,
            lower_may_add: Vec::new(),
            managed_keys: Vec::new(),
            ignored_keys: Vec::new(),
            plugins: PluginSettings::default(),
            plugin_dirs: Vec::new(),
            sandbox: None,
            mcp: McpPolicy::default(),
        })
    }
}

/// A Claude Code switch that takes only the word "disable" (`disableBypassPermissionsMode`,
/// `disableAutoMode`): absent is off, anything else is an error at its place.
fn disable_switch(
    value: Option<Spanned<String>>,
    key: &str,
    file: &Path,
) -> Result<bool, ConfigError> {
    match value {
        None => Ok(false),
        Some(spanned) if spanned.value == "disable" => Ok(true),
        Some(spanned) => Err(ConfigError::new(
            file,
            spanned.referenced.line(),
            spanned.referenced.column(),
            format!("{key} must be \"disable\", not `{}`", spanned.value),
        )),
    }
}

fn parse_mode(spanned: &Spanned<String>, file: &Path) -> Result<PermissionMode, ConfigError> {
    spanned.value.parse::<PermissionMode>().map_err(|err| {
        ConfigError::new(
            file,
            spanned.referenced.line(),
            spanned.referenced.column(),
            err.to_string(),
        )
    })
}

fn resolve_dir(entry: &str, policy_dir: &Path, home: Option<&Path>) -> PathBuf {
    match (entry.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => policy_dir.join(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_name::ToolName;

    fn parse(text: &str) -> Result<Policy, ConfigError> {
        Policy::parse(
            text,
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/etc/tg"),
                home: None,
            },
        )
    }

    /// A `defer:` rule is an ask rule that parks its call; a bad one is an error at its place.
    #[test]
    fn defer_rules_are_ask_rules_that_park() {
        let policy = parse(
            "permissions:\n  ask: [\"Bash(git commit:*)\"]\n  defer:\n    - \"Bash(git push:*)\"\n",
        )
        .unwrap();
        let rules: Vec<(RuleKind, &str, HeadlessAnswer)> = policy
            .rules
            .iter()
            .map(|rule| (rule.kind, rule.text.as_str(), rule.headless))
            .collect();
        assert_eq!(
            rules,
            [
                (RuleKind::Ask, "Bash(git commit:*)", HeadlessAnswer::Deny),
                (RuleKind::Ask, "Bash(git push:*)", HeadlessAnswer::Defer),
            ]
        );
        let err = parse("permissions:\n  defer:\n    - \"Bash(git push\"\n").unwrap_err();
        assert_eq!((err.line, err.column), (3, 7), "{err}");
    }

    #[test]
    fn loads_tollgate_policy_with_rule_lines() {
        let policy = parse(
            "managed_only: true\npermissions:\n  allow:\n    - Read\n    - Bash(npm test:*)\n  deny:\n    - Bash(rm:*)\n  default_mode: dontAsk\n  additional_directories: [../common]\n",
        )
        .unwrap();
        assert!(policy.managed_only);
        assert_eq!(policy.default_mode, Some(PermissionMode::DontAsk));
        assert_eq!(
            policy.additional_directories,
            vec![PathBuf::from("/etc/tg/../common")]
        );
        let lines: Vec<(RuleKind, String, u64)> = policy
            .rules
            .iter()
            .map(|r| (r.kind, r.text.clone(), r.source.line))
            .collect();
        assert_eq!(
            lines,
            vec![
                (RuleKind::Deny, "Bash(rm:*)".into(), 7),
                (RuleKind::Allow, "Read".into(), 4),
                (RuleKind::Allow, "Bash(npm test:*)".into(), 5),
            ]
        );
    }

    #[test]
    fn loads_claude_code_settings_block_unchanged() {
        let settings = r#"{
  "permissions": {
    "allow": ["Bash(git diff:*)", "Edit(src/**)", "WebFetch(domain:docs.rs)", "WebSearch"],
    "deny": ["Bash(curl:*)", "Read(./.env)"],
    "ask": ["Bash(git push:*)"],
    "additionalDirectories": ["../docs/"],
    "defaultMode": "acceptEdits",
    "disableBypassPermissionsMode": "disable"
  },
  "allowManagedPermissionRulesOnly": false
}"#;
        let origin = PolicyOrigin {
            file: Path::new("settings.json"),
            dir: Path::new("/p"),
            home: None,
        };
        let policy = Policy::parse(settings, origin).unwrap();
        assert_eq!(policy.rules.len(), 7);
        assert!(policy.disable_bypass);
        assert_eq!(policy.default_mode, Some(PermissionMode::AcceptEdits));
        assert!(
            policy
                .rules
                .iter()
                .any(|r| r.tool == ToolName::Other("WebSearch".into()))
        );
    }

    /// The shape Claude Code's documentation shows for `settings.json`: keys tollgate does
    /// not use load, are ignored and named; its own keys stay strict.
    #[test]
    fn a_whole_claude_code_settings_file_loads() {
        let settings = r#"{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "apiKeyHelper": "/bin/generate_temp_api_key.sh",
  "cleanupPeriodDays": 20,
  "env": {"FOO": "bar", "CLAUDE_CODE_ENABLE_TELEMETRY": "1"},
  "includeCoAuthoredBy": false,
  "model": "claude-sonnet-4-5",
  "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
  "outputStyle": "Explanatory",
  "forceLoginMethod": "claudeai",
  "enableAllProjectMcpServers": true,
  "enabledMcpjsonServers": ["memory", "github"],
  "spinnerTipsEnabled": false,
  "disableAllHooks": false,
  "permissions": {
    "allow": ["Bash(npm run lint)", "Bash(npm run test:*)", "Read(~/.zshrc)"],
    "deny": ["Bash(curl:*)", "Read(./.env)", "Read(./secrets/**)"],
    "additionalDirectories": ["../docs/"],
    "defaultMode": "acceptEdits"
  },
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo ok"}]}]}
}"#;
        let origin = PolicyOrigin {
            file: Path::new("settings.json"),
            dir: Path::new("/p"),
            home: Some(Path::new("/home/u")),
        };
        let policy = Policy::parse(settings, origin).unwrap();
        assert_eq!(policy.rules.len(), 6);
        assert_eq!(policy.hooks.len(), 1);
        assert!(!policy.disable_all_hooks);
        let off = Policy::parse(
            &settings.replace("\"disableAllHooks\": false", "\"disableAllHooks\": true"),
            origin,
        )
        .unwrap();
        assert!(off.disable_all_hooks);
        // The MCP approval keys are read, not ignored (`mcp::selection` applies them).
        assert!(policy.mcp.allow_project);
        assert_eq!(policy.mcp.enabled_project, ["memory", "github"]);
        assert_eq!(policy.default_mode, Some(PermissionMode::AcceptEdits));
        let ignored: Vec<&str> = policy.ignored_keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "$schema",
                "apiKeyHelper",
                "forceLoginMethod",
                "cleanupPeriodDays",
                "env",
                "includeCoAuthoredBy",
                "model",
                "outputStyle",
                "statusLine",
                "spinnerTipsEnabled",
            ]
        );
        assert!(policy.managed_keys.is_empty());
        // A key neither tollgate nor Claude Code knows is still a located error.
        let err = parse(
            "permissions: {allow: [Read]}
manged_only: true
",
        )
        .unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.message.contains("unknown field"), "{err}");
    }

    #[test]
    fn self_tests_and_mode_switches_load() {
        let policy = parse(
            "disable_bypass_mode: true\ndisable_auto_mode: true\ntests:\n  - tool: Bash\n    input: {command: rm -rf /}\n    expect: deny\n  - name: reads\n    tool: Read\n    input: {file_path: a}\n    expect: allow\n    mode: plan\n",
        )
        .unwrap();
        assert!(policy.disable_bypass && policy.disable_auto);
        assert_eq!(policy.tests.len(), 2);
        assert_eq!(policy.tests[0].name, "test 1");
        assert_eq!(policy.tests[0].source.line, 4);
        assert_eq!(policy.tests[1].mode, Some(PermissionMode::Plan));
        let err = parse("tests:\n  - tool: Bash\n    expect: maybe\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
    }

    #[test]
    fn hooks_load_in_both_forms() {
        let policy = parse("managed_hooks_only: true\nhooks:\n  - {event: PreToolUse, matcher: Bash, command: ./check.sh}\n").unwrap();
        assert!(policy.managed_hooks_only);
        assert_eq!(policy.hooks.len(), 1);
        assert_eq!(policy.hooks[0].source, PathBuf::from("p.yaml"));
        let claude = r#"{"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}]}, "allowManagedHooksOnly": false}"#;
        assert_eq!(parse(claude).unwrap().hooks.len(), 1);
        let err =
            parse("hooks:\n  - {event: PreToolUse, matcher: 'Bash(x)', command: a}\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }

    #[test]
    fn bad_rules_and_modes_name_their_line() {
        let err = parse("permissions:\n  allow:\n    - Read\n    - Bash(git status\n").unwrap_err();
        assert_eq!((err.line, err.column), (4, 7));
        assert!(err.message.contains("not a rule"), "{err}");
        let err = parse("permissions:\n  default_mode: yolo\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("permissions:\n  allw: [Read]\n").unwrap_err();
        assert!(err.message.contains("unknown field"), "{err}");
    }

    #[test]
    fn command_line_rules_name_their_flag() {
        let policy = Policy::from_flags(
            &["Bash(ls:*)".into()],
            &["WebFetch".into()],
            &[],
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            policy.rules[0].source.to_string(),
            "<command line --deny>:1"
        );
        assert!(Policy::from_flags(&["Bash(".into()], &[], &[], Path::new("/")).is_err());
    }

    /// Every key of the levels checked is one some type reads: the levels are the types',
    /// and a file that uses keys of every level loads.
    #[test]
    fn every_level_has_its_types_keys() {
        for level in key_levels() {
            assert!(!level.keys.is_empty(), "{}", level.path);
        }
        let text = r#"{"$schema": "x", "model": "m", "autoMode": {"soft_deny": ["x"]}, "permissions": {"allow": [], "additionalDirectories": [], "disableBypassPermissionsMode": "disable"}, "sandbox": {"enabled": true, "filesystem": {"allowWrite": ["/tmp"]}, "network": {"allowedDomains": ["x.org"]}, "limits": {"max_processes": 5}}}"#;
        parse(text).unwrap();
    }

    /// The reference lists every Claude Code key that loads and is ignored, with its reason.
    #[test]
    fn the_documentation_lists_every_ignored_key() {
        let docs = include_str!("../../../docs/policy.md");
        for (key, why) in IGNORED_CLAUDE_CODE_KEYS {
            assert!(
                docs.contains(&format!("`{key}`")) && docs.contains(why),
                "docs/policy.md does not list `{key}` ({why})"
            );
        }
    }
}
