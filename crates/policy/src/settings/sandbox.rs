//! The policy file's `sandbox:` block, parsed into typed values with file:line:column errors.
//! Plain data: nothing here touches the kernel or the disk (`sandbox/` enforces it). It lives
//! with the policy that carries it, so the policy layer never depends on the sandbox.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::ignored_key::IgnoredKey;
use crate::config::ConfigError;
use crate::rule::DomainPattern;
use tollgate_base::normalize_lexically;

/// What to do when the kernel cannot enforce what the policy asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnavailable {
    /// Exit 2 before any model call (fail closed: the default).
    #[default]
    Fail,
    /// Run anyway, with a loud warning in every report.
    Warn,
}

/// How far sandboxed commands reach the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// TCP connect and bind refused, except `allowed_ports`.
    #[default]
    None,
    /// Only through tollgate's proxy, to `allowed_domains`.
    Proxy,
    /// Unrestricted.
    Open,
}

/// Whether a Bash command allowed only by the analyser's read-only proof runs in the
/// kernel's read-only domain (`sandbox.read_only_commands`). Read even when `enabled: false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadOnlyCommands {
    /// Where Landlock ABI 3 is available (the default).
    #[default]
    Enforce,
    /// The read-only verdict is the analyser's word alone.
    Off,
}

/// Where the task's checks or the hooks run when the sandbox is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// In the sandbox, like the model's commands: they run what the model planted.
    #[default]
    Sandbox,
    /// Outside it, with their own environment (the author's choice, named in the summary).
    Outside,
}

/// Where the per-user caches of sandboxed commands go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Caches {
    /// A folder of the run's own (removed with it): `XDG_CACHE_HOME`, `CARGO_HOME`,
    /// `GOCACHE`, `GOMODCACHE`, `npm_config_cache`, `PIP_CACHE_DIR` point into it.
    #[default]
    Run,
    /// The variables as tollgate's environment has them (writable only if `allow_write`
    /// names their folders).
    Inherit,
}

/// `checks:`/`hooks:` as written: a placement, or the older `true` (sandbox) / `false`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum PlacementValue {
    Named(Placement),
    Flag(bool),
}

impl PlacementValue {
    fn placement(self) -> Placement {
        match self {
            PlacementValue::Named(placement) => placement,
            PlacementValue::Flag(true) => Placement::Sandbox,
            PlacementValue::Flag(false) => Placement::Outside,
        }
    }
}

/// A path as written in the policy: `~/x` is under the home folder, a relative path is under
/// the workspace, an absolute one is itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPath(String);

impl PolicyPath {
    /// Absolute and lexically normalised, as the carving compares paths by prefix.
    pub fn resolve(&self, workdir: &Path, home: Option<&Path>) -> Option<PathBuf> {
        let joined = match self.0.strip_prefix("~/") {
            Some(rest) => home?.join(rest),
            None => workdir.join(&self.0),
        };
        Some(normalize_lexically(&joined))
    }
}

/// Resource limits for each sandboxed command; `None` leaves that limit as inherited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsConfig {
    /// Processes (and threads) the command may have at once.
    pub max_processes: Option<u64>,
    /// Address space, bytes.
    pub max_memory_bytes: Option<u64>,
    pub max_cpu_seconds: Option<u64>,
    /// Largest file the command may write, bytes.
    pub max_file_bytes: Option<u64>,
    pub max_open_files: Option<u64>,
}

impl Default for LimitsConfig {
    /// Generous enough for a test suite or a compiler; small enough that a fork bomb or a
    /// runaway allocation stops at the command instead of at the runner.
    fn default() -> Self {
        LimitsConfig {
            max_processes: Some(512),
            max_memory_bytes: Some(16 << 30),
            max_cpu_seconds: Some(3600),
            max_file_bytes: Some(8 << 30),
            max_open_files: Some(8192),
        }
    }
}

/// The sandbox a policy asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub enabled: bool,
    pub on_unavailable: OnUnavailable,
    pub allow_write: Vec<PolicyPath>,
    pub deny_read: Vec<PolicyPath>,
    pub deny_write: Vec<PolicyPath>,
    pub network: NetworkMode,
    pub allowed_domains: Vec<DomainPattern>,
    pub allowed_ports: Vec<u16>,
    pub env_passthrough: Vec<String>,
    pub auto_allow_bash: bool,
    /// Where the task's checks run (`sandbox.checks`).
    pub checks: Placement,
    /// Where the hooks run (`sandbox.hooks`).
    pub hooks: Placement,
    pub caches: Caches,
    pub limits: LimitsConfig,
    pub read_only_commands: ReadOnlyCommands,
}

/// Read refused by default: credentials a runner or a developer keeps in the home folder.
pub const DEFAULT_DENY_READ: [&str; 9] = [
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.azure",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/gh",
    "~/.kube",
];

/// The keys of a `sandbox:` block and of its nested blocks, by where they stand in a policy
/// file, for the check that reports every unknown key of a file at once.
pub(crate) fn key_levels() -> [(&'static str, &'static [&'static str]); 4] {
    use crate::config::struct_keys;
    [
        ("sandbox", struct_keys::<SandboxBlock>()),
        ("sandbox.filesystem", struct_keys::<FilesystemBlock>()),
        ("sandbox.network", struct_keys::<NetworkBlock>()),
        ("sandbox.limits", struct_keys::<LimitsBlock>()),
    ]
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxBlock {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    on_unavailable: OnUnavailable,
    #[serde(default)]
    filesystem: FilesystemBlock,
    #[serde(default)]
    network: NetworkBlock,
    #[serde(default)]
    limits: LimitsBlock,
    #[serde(default)]
    env_passthrough: Vec<Spanned<String>>,
    /// Claude Code's `autoAllowBashIfSandboxed`.
    #[serde(default, alias = "autoAllowBashIfSandboxed")]
    auto_allow_bash: bool,
    /// Commands Claude Code runs outside its sandbox.
    #[serde(default, rename = "excludedCommands")]
    excluded_commands: Option<Spanned<Vec<String>>>,
    /// Whether a command may ask to run unsandboxed (`dangerouslyDisableSandbox`).
    #[serde(default, rename = "allowUnsandboxedCommands")]
    allow_unsandboxed_commands: Option<Spanned<bool>>,
    #[serde(default, rename = "enableWeakerNestedSandbox")]
    enable_weaker_nested_sandbox: Option<Spanned<bool>>,
    #[serde(default, rename = "ignoreViolations")]
    ignore_violations: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    checks: Option<PlacementValue>,
    #[serde(default)]
    hooks: Option<PlacementValue>,
    #[serde(default)]
    caches: Caches,
    #[serde(default)]
    read_only_commands: ReadOnlyCommands,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesystemBlock {
    #[serde(default, alias = "allowWrite")]
    allow_write: Vec<Spanned<String>>,
    /// `None` keeps the defaults; a list replaces them.
    #[serde(default)]
    deny_read: Option<Vec<Spanned<String>>>,
    /// Claude Code's `denyRead`: added to the defaults (Claude Code has none of tollgate's
    /// credential defaults to replace, so replacing them would widen).
    #[serde(default, rename = "denyRead")]
    deny_read_more: Vec<Spanned<String>>,
    #[serde(default, alias = "denyWrite")]
    deny_write: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkBlock {
    /// `None`: `proxy` when Claude Code's `allowedDomains` names domains, else `none`.
    #[serde(default)]
    mode: Option<NetworkMode>,
    #[serde(default)]
    allowed_domains: Vec<Spanned<String>>,
    /// Claude Code's `allowedDomains`: reached through tollgate's proxy.
    #[serde(default, rename = "allowedDomains")]
    claude_allowed_domains: Vec<Spanned<String>>,
    #[serde(default)]
    allowed_ports: Vec<u16>,
    #[serde(default, rename = "allowUnixSockets")]
    allow_unix_sockets: Option<Spanned<Vec<String>>>,
    #[serde(default, rename = "allowAllUnixSockets")]
    allow_all_unix_sockets: Option<Spanned<bool>>,
    #[serde(default, rename = "allowLocalBinding")]
    allow_local_binding: Option<Spanned<bool>>,
    #[serde(default, rename = "httpProxyPort")]
    http_proxy_port: Option<Spanned<u16>>,
    #[serde(default, rename = "socksProxyPort")]
    socks_proxy_port: Option<Spanned<u16>>,
}

/// `0` in a limit means "leave it as inherited".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsBlock {
    max_processes: Option<u64>,
    max_memory_mb: Option<u64>,
    max_cpu_seconds: Option<u64>,
    max_file_mb: Option<u64>,
    max_open_files: Option<u64>,
}

impl SandboxConfig {
    /// A `sandbox:` block's contents on their own (the keys under `sandbox:`).
    pub fn from_yaml(text: &str, file: &Path) -> Result<SandboxConfig, ConfigError> {
        let block: SandboxBlock = if text.trim().is_empty() {
            SandboxBlock::default()
        } else {
            crate::config::parse(text, file)?
        };
        block.into_config(file)
    }
}

/// Where a Claude Code sandbox key stands, to refuse it there.
fn refuse<T>(file: &Path, spanned: &Spanned<T>, key: &str, why: &str) -> ConfigError {
    ConfigError::new(
        file,
        spanned.referenced.line(),
        spanned.referenced.column(),
        format!("sandbox.{key} cannot be honoured: {why}"),
    )
}

impl SandboxBlock {
    pub fn into_config(self, file: &Path) -> Result<SandboxConfig, ConfigError> {
        self.into_config_noting(file).map(|(config, _)| config)
    }

    /// The config, with the Claude Code keys that loaded and grant nothing here. Claude
    /// Code's keys are applied where tollgate's sandbox has the same thing, ignored with why
    /// where they only silence a client, and refused at their line where honouring them
    /// would take a command outside what tollgate confines (dropping them silently would run
    /// something other than what the author planned).
    pub fn into_config_noting(
        mut self,
        file: &Path,
    ) -> Result<(SandboxConfig, Vec<IgnoredKey>), ConfigError> {
        let mut ignored = Vec::new();
        let cc = &self;
        if let Some(list) = cc
            .excluded_commands
            .as_ref()
            .filter(|l| !l.value.is_empty())
        {
            return Err(refuse(
                file,
                list,
                "excludedCommands",
                "tollgate runs every command inside the sandbox and has no way to run some outside it; remove the list (the commands then run sandboxed) or run them in a step before tollgate",
            ));
        }
        if let Some(flag) = cc.allow_unsandboxed_commands.as_ref().filter(|f| f.value) {
            return Err(refuse(
                file,
                flag,
                "allowUnsandboxedCommands",
                "tollgate has no escape hatch out of its sandbox; write `false` or remove the key",
            ));
        }
        if let Some(flag) = cc.enable_weaker_nested_sandbox.as_ref().filter(|f| f.value) {
            return Err(refuse(
                file,
                flag,
                "enableWeakerNestedSandbox",
                "tollgate does not weaken its sandbox; with `on_unavailable: fail` (the default) a run where it cannot be enforced stops instead",
            ));
        }
        if cc.ignore_violations.is_some() {
            ignored.push(IgnoredKey::new(
                "sandbox.ignoreViolations",
                "tollgate reports every violation in the transcript; the setting only silences Claude Code's notices",
            ));
        }
        let network = &self.network;
        let socket_refusal = "tollgate's sandbox grants no Unix socket (a socket such as docker.sock reaches outside the sandbox)";
        if let Some(list) = network
            .allow_unix_sockets
            .as_ref()
            .filter(|l| !l.value.is_empty())
        {
            return Err(refuse(
                file,
                list,
                "network.allowUnixSockets",
                socket_refusal,
            ));
        }
        if let Some(flag) = network.allow_all_unix_sockets.as_ref().filter(|f| f.value) {
            return Err(refuse(
                file,
                flag,
                "network.allowAllUnixSockets",
                socket_refusal,
            ));
        }
        if let Some(flag) = network.allow_local_binding.as_ref().filter(|f| f.value) {
            return Err(refuse(
                file,
                flag,
                "network.allowLocalBinding",
                "tollgate's sandbox lets commands bind only the ports `allowed_ports` names; list them there",
            ));
        }
        for (port, key) in [
            (&network.http_proxy_port, "network.httpProxyPort"),
            (&network.socks_proxy_port, "network.socksProxyPort"),
        ] {
            if let Some(port) = port {
                return Err(refuse(
                    file,
                    port,
                    key,
                    "tollgate filters sandboxed traffic through its own proxy and `allowed_domains`; it cannot know what another proxy lets through",
                ));
            }
        }
        let claude_shaped = self.excluded_commands.is_some()
            || self.allow_unsandboxed_commands.is_some()
            || self.enable_weaker_nested_sandbox.is_some()
            || self.ignore_violations.is_some()
            || !self.network.claude_allowed_domains.is_empty()
            || !self.filesystem.deny_read_more.is_empty();
        // Claude Code's sandbox is off unless its block says `enabled: true`.
        if self.enabled.is_none() && claude_shaped {
            self.enabled = Some(false);
        }
        let from_claude = std::mem::take(&mut self.network.claude_allowed_domains);
        if self.network.mode.is_none() && !from_claude.is_empty() {
            self.network.mode = Some(NetworkMode::Proxy);
        }
        self.network.allowed_domains.extend(from_claude);
        let config = self.into_tollgate_config(file)?;
        Ok((config, ignored))
    }

    fn into_tollgate_config(self, file: &Path) -> Result<SandboxConfig, ConfigError> {
        let at = |spanned: &Spanned<String>, message: String| {
            ConfigError::new(
                file,
                spanned.referenced.line(),
                spanned.referenced.column(),
                message,
            )
        };
        let paths = |list: Vec<Spanned<String>>| -> Result<Vec<PolicyPath>, ConfigError> {
            list.into_iter()
                .map(|spanned| {
                    let text = spanned.value.trim();
                    if text.is_empty() || (text.starts_with('~') && !text.starts_with("~/")) {
                        Err(at(
                            &spanned,
                            format!(
                                "`{}` is not a path (write `~/x`, `/x` or `x`)",
                                spanned.value
                            ),
                        ))
                    } else {
                        Ok(PolicyPath(text.to_string()))
                    }
                })
                .collect()
        };
        let mut allowed_domains = Vec::new();
        for spanned in &self.network.allowed_domains {
            let pattern = DomainPattern::parse(spanned.value.trim()).ok_or_else(|| {
                at(
                    spanned,
                    format!(
                        "`{}` is not a domain (write `example.com` or `*.example.com`)",
                        spanned.value
                    ),
                )
            })?;
            allowed_domains.push(pattern);
        }
        for spanned in &self.env_passthrough {
            let name = &spanned.value;
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(at(
                    spanned,
                    format!("`{name}` is not an environment variable name"),
                ));
            }
            if tollgate_base::is_secret_env_name(name) {
                return Err(at(
                    spanned,
                    format!(
                        "`{name}` looks like a credential; sandboxed commands never see credentials"
                    ),
                ));
            }
        }
        let mut deny_read = match self.filesystem.deny_read {
            Some(list) => paths(list)?,
            None => DEFAULT_DENY_READ
                .iter()
                .map(|path| PolicyPath((*path).to_string()))
                .collect(),
        };
        deny_read.extend(paths(self.filesystem.deny_read_more)?);
        Ok(SandboxConfig {
            enabled: self.enabled.unwrap_or(true),
            on_unavailable: self.on_unavailable,
            allow_write: paths(self.filesystem.allow_write)?,
            deny_read,
            deny_write: paths(self.filesystem.deny_write)?,
            network: self.network.mode.unwrap_or_default(),
            allowed_domains,
            allowed_ports: self.network.allowed_ports,
            env_passthrough: self.env_passthrough.into_iter().map(|s| s.value).collect(),
            auto_allow_bash: self.auto_allow_bash,
            checks: self
                .checks
                .map_or(Placement::Sandbox, PlacementValue::placement),
            hooks: self
                .hooks
                .map_or(Placement::Sandbox, PlacementValue::placement),
            caches: self.caches,
            limits: self.limits.resolve(),
            read_only_commands: self.read_only_commands,
        })
    }
}

impl LimitsBlock {
    fn resolve(&self) -> LimitsConfig {
        let defaults = LimitsConfig::default();
        let pick = |given: Option<u64>, scale: u64, default: Option<u64>| match given {
            Some(0) => None,
            Some(value) => Some(value.saturating_mul(scale)),
            None => default,
        };
        LimitsConfig {
            max_processes: pick(self.max_processes, 1, defaults.max_processes),
            max_memory_bytes: pick(self.max_memory_mb, 1 << 20, defaults.max_memory_bytes),
            max_cpu_seconds: pick(self.max_cpu_seconds, 1, defaults.max_cpu_seconds),
            max_file_bytes: pick(self.max_file_mb, 1 << 20, defaults.max_file_bytes),
            max_open_files: pick(self.max_open_files, 1, defaults.max_open_files),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        sandbox: SandboxBlock,
    }

    fn parse(text: &str) -> Result<SandboxConfig, ConfigError> {
        let file = Path::new("p.yaml");
        let holder: Holder = crate::config::parse(text, file)?;
        holder.sandbox.into_config(file)
    }

    #[test]
    fn an_empty_block_is_an_enabled_offline_sandbox_with_defaults() {
        let config = parse("sandbox: {}\n").unwrap();
        assert!(config.enabled && !config.auto_allow_bash);
        assert_eq!(config.on_unavailable, OnUnavailable::Fail);
        assert_eq!(config.network, NetworkMode::None);
        assert_eq!(config.deny_read.len(), DEFAULT_DENY_READ.len());
        assert_eq!(config.limits, LimitsConfig::default());
    }

    #[test]
    fn every_key_loads() {
        let config = parse(
            "sandbox:\n  enabled: true\n  on_unavailable: warn\n  filesystem:\n    allow_write: [target, ~/.cache]\n    deny_read: [secrets]\n    deny_write: [Cargo.lock]\n  network:\n    mode: proxy\n    allowed_domains: [crates.io, '*.crates.io']\n    allowed_ports: [5432]\n  limits: {max_processes: 64, max_memory_mb: 0}\n  env_passthrough: [RUST_LOG]\n  auto_allow_bash: true\n  checks: true\n",
        )
        .unwrap();
        assert_eq!(config.on_unavailable, OnUnavailable::Warn);
        assert_eq!(config.network, NetworkMode::Proxy);
        assert!(config.allowed_domains[1].matches("static.crates.io"));
        assert!(!config.allowed_domains[0].matches("evil.io"));
        assert_eq!(config.allowed_ports, [5432]);
        assert_eq!(config.limits.max_processes, Some(64));
        assert_eq!(config.limits.max_memory_bytes, None);
        assert_eq!(
            config.allow_write[1].resolve(Path::new("/w"), Some(Path::new("/home/u"))),
            Some(PathBuf::from("/home/u/.cache"))
        );
        assert_eq!(
            config.deny_read[0].resolve(Path::new("/w"), None),
            Some(PathBuf::from("/w/secrets"))
        );
        assert!(config.auto_allow_bash);
        assert_eq!(config.checks, Placement::Sandbox);
        assert_eq!(config.hooks, Placement::Sandbox);
    }

    #[test]
    fn checks_and_hooks_run_in_the_sandbox_unless_the_policy_says_outside() {
        let config = parse("sandbox: {}\n").unwrap();
        assert_eq!(
            (config.checks, config.hooks, config.caches),
            (Placement::Sandbox, Placement::Sandbox, Caches::Run)
        );
        let config =
            parse("sandbox: {checks: outside, hooks: outside, caches: inherit}\n").unwrap();
        assert_eq!(
            (config.checks, config.hooks, config.caches),
            (Placement::Outside, Placement::Outside, Caches::Inherit)
        );
        let config = parse("sandbox: {checks: false, hooks: true}\n").unwrap();
        assert_eq!(
            (config.checks, config.hooks),
            (Placement::Outside, Placement::Sandbox)
        );
        let err = parse("sandbox:\n  checks: maybe\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }

    #[test]
    fn mistakes_name_their_line_and_column() {
        let err = parse("sandbox:\n  network:\n    allowed_domains: [ok.org, 'bad domain']\n")
            .unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("not a domain"), "{err}");
        let err = parse("sandbox:\n  network: {mode: maybe}\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err = parse("sandbox:\n  env_passthrough: [OK, 'A=B']\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 25), "{err}");
        let err = parse("sandbox:\n  filesystem: {allow_write: ['~root/x']}\n").unwrap_err();
        assert!(err.message.contains("not a path"), "{err}");
        let err = parse("sandbox:\n  networks: {}\n").unwrap_err();
        assert!(err.message.contains("unknown field"), "{err}");
    }
}
