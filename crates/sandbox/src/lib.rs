//! The OS sandbox for what tollgate runs (Landlock, no namespaces, no privileges): the policy
//! keys, the preflight, the per-command plan applied in the child before exec, the proxy.
//! It bounds what a command can do once the gate let it run; it never decides whether it runs.
//!
//! The crate holds what carries that out: [`exec`], the one process runner every process
//! tollgate starts goes through, and [`net`], where tollgate's own connections on the model's
//! behalf may go (the proxy's and WebFetch's resolver). None of it decides anything: the
//! gate (`tollgate-policy`) has, and hands in the workspace and the settings.

pub mod exec;
pub mod net;

mod child;
mod fs_rules;
mod limits;
mod protected;
mod proxy;
mod read_only;
mod ruleset;
mod seccomp;
mod shared_ruleset;
mod tool_thread;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::exec::Ending;
use tollgate_policy::Workspace;

pub use tollgate_policy::settings::{
    Caches, DEFAULT_DENY_READ, LimitsConfig, NetworkMode, OnUnavailable, Placement, PolicyPath,
    SandboxBlock, SandboxConfig,
};

/// The read-only domain's preflight.
pub fn read_only_preflight(setting: ReadOnlyCommands) -> ReadOnlyStatus {
    read_only::preflight(setting)
}
pub use child::ChildSetup;
pub use limits::{LimitHit, ProcessLimit};
pub use protected::{Change, GuardError, Violation, describe as describe_violations};
pub use proxy::{Proxy, ProxyConnection, ProxyRules};
pub use read_only::{ReadOnlyCommands, ReadOnlyDomain, ReadOnlyStatus};
pub use seccomp::{SocketScope, SyscallFilter};
pub use tool_thread::run_confined;

use fs_rules::{FsScope, WRITABLE_DEVICES, list_dir};
use limits::CommandCgroup;
use protected::ProtectedFiles;
use ruleset::TcpAllow;
use shared_ruleset::SharedRuleset;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox cannot be enforced here: {0} (sandbox.on_unavailable: fail)")]
    Unavailable(String),
    #[error("cannot build the Landlock ruleset ({what}): {message}")]
    Ruleset { what: String, message: String },
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
    let what = what.into();
    move |source| SandboxError::Io { what, source }
}

/// What the kernel can enforce, and what this run will: in `run_started` (stream-json
/// `init`) and the step summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// 0 when the kernel has no Landlock.
    pub landlock_abi: u32,
    pub filesystem: bool,
    pub network: bool,
    pub scoping: bool,
    pub network_mode: NetworkMode,
    pub process_limit: ProcessLimit,
    pub auto_allow_bash: bool,
    /// Where the task's checks and the hooks run.
    #[serde(default)]
    pub checks: Placement,
    #[serde(default)]
    pub hooks: Placement,
    /// Set when the policy asked for more than the kernel enforces (`on_unavailable: warn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl SandboxStatus {
    /// Whether everything the policy asked for is enforced.
    pub fn enforced(&self) -> bool {
        self.warning.is_none()
    }

    /// One line for people: the step summary and the text summary.
    pub fn describe(&self) -> String {
        let processes = match &self.process_limit {
            ProcessLimit::Cgroup { .. } => "pids cgroup",
            ProcessLimit::Rlimit { binds: true } => "RLIMIT_NPROC",
            ProcessLimit::Rlimit { binds: false } => "RLIMIT_NPROC (does not bind root)",
        };
        let mut line = format!(
            "Landlock ABI {}: filesystem {}, network {} ({}), scoping {}; process limit via {processes}",
            self.landlock_abi,
            on_off(self.filesystem),
            on_off(self.network),
            tollgate_policy::config::serde_name(&self.network_mode),
            on_off(self.scoping),
        );
        line.push_str(&match (self.checks, self.hooks) {
            (Placement::Sandbox, Placement::Sandbox) => "; checks and hooks run in it".to_string(),
            (Placement::Outside, Placement::Outside) => {
                "; checks and hooks run OUTSIDE it (sandbox.checks/hooks: outside)".to_string()
            }
            (Placement::Outside, _) => {
                "; checks run OUTSIDE it (sandbox.checks: outside), hooks in it".to_string()
            }
            (_, Placement::Outside) => {
                "; hooks run OUTSIDE it (sandbox.hooks: outside), checks in it".to_string()
            }
        });
        if let Some(warning) = &self.warning {
            line.push_str(&format!(" — WARNING: {warning}"));
        }
        line
    }
}

fn on_off(enforced: bool) -> &'static str {
    if enforced { "enforced" } else { "NOT enforced" }
}

/// Detects what the kernel can enforce for `config`. With `on_unavailable: fail` a gap is an
/// error (the CLI exits 2 before any model call); with `warn` it becomes the status's warning.
pub fn preflight(config: &SandboxConfig) -> Result<SandboxStatus, SandboxError> {
    let cap = std::env::var(MAX_ABI_ENV)
        .ok()
        .and_then(|value| value.trim().parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    let process_limit = if std::env::var_os(NO_CGROUP_ENV).is_some_and(|v| v == "1") {
        ProcessLimit::without_cgroup()
    } else {
        ProcessLimit::detect()
    };
    let status = preflight_with(config, kernel_abi().min(cap), process_limit);
    match &status {
        Ok(status) => tracing::info!("sandbox preflight: {}", status.describe()),
        Err(err) => tracing::info!("sandbox preflight: refused to start: {err}"),
    }
    status
}

/// `1` makes tollgate act as on a machine where it may create no pids cgroup (RLIMIT_NPROC
/// then, and nothing but the keeper to end what a command left running).
pub const NO_CGROUP_ENV: &str = "TOLLGATE_SANDBOX_NO_CGROUP";

/// Caps the Landlock ABI tollgate uses, to see what a policy does on an older runner's
/// kernel. It can only lower what the kernel offers, never raise it.
pub const MAX_ABI_ENV: &str = "TOLLGATE_SANDBOX_MAX_ABI";

/// The Landlock ABI the running kernel offers (0: none).
pub fn kernel_abi() -> u32 {
    ruleset::kernel_abi()
}

fn preflight_with(
    config: &SandboxConfig,
    abi: u32,
    process_limit: ProcessLimit,
) -> Result<SandboxStatus, SandboxError> {
    // Truncation is a filesystem right only from ABI 3 on; before, a read-only file could be
    // emptied. TCP rules arrive with ABI 4, signal and abstract-socket scoping with ABI 6.
    let filesystem = abi >= 3;
    let network = abi >= 4;
    let mut gaps = Vec::new();
    if !filesystem {
        gaps.push(format!(
            "filesystem rules need Landlock ABI 3 (Linux 6.2), the kernel offers {abi}"
        ));
    }
    if config.network != NetworkMode::Open && !network {
        gaps.push(format!(
            "network.mode {} needs Landlock ABI 4 (Linux 6.7), the kernel offers {abi}",
            tollgate_policy::config::serde_name(&config.network)
        ));
    }
    let warning = (!gaps.is_empty()).then(|| gaps.join("; "));
    if let (Some(gap), OnUnavailable::Fail) = (&warning, config.on_unavailable) {
        return Err(SandboxError::Unavailable(gap.clone()));
    }
    Ok(SandboxStatus {
        landlock_abi: abi,
        filesystem,
        network: network && config.network != NetworkMode::Open,
        scoping: abi >= 6,
        network_mode: config.network,
        process_limit,
        auto_allow_bash: config.auto_allow_bash,
        checks: config.checks,
        hooks: config.hooks,
        warning,
    })
}

/// The sandbox a run will start: the policy's block and what the preflight found.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxSpec {
    pub config: SandboxConfig,
    pub status: SandboxStatus,
}

/// Environment variables a sandboxed command keeps: the basics and CI's non-secret context.
const BASE_ENV: [&str; 22] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "CI",
    "GITHUB_ACTIONS",
    "GITHUB_WORKSPACE",
    "GITHUB_REPOSITORY",
    "GITHUB_SHA",
    "GITHUB_REF",
    "GITHUB_RUN_ID",
    "GITHUB_EVENT_NAME",
    "RUNNER_OS",
    "RUNNER_ARCH",
    "RUNNER_TEMP",
];

/// The sandbox of one run: resolved paths, the run's temp folder, the proxy.
#[derive(Debug)]
pub struct Sandbox {
    config: SandboxConfig,
    status: SandboxStatus,
    /// The commands' Landlock ruleset, built at the start and shared.
    rules: SharedRuleset,
    tmpdir: PathBuf,
    proxy: Option<Proxy>,
    env: Vec<(OsString, OsString)>,
    /// The socket filter of every command, compiled once.
    filter: Arc<SyscallFilter>,
    /// What git and the write guardrails protect in the workspace, as the run found it.
    protected: ProtectedFiles,
}

impl Sandbox {
    /// Creates the run's temp folder and `allow_write` folders inside the workspace, takes
    /// the baseline of the protected files (`out_dir`, the run's own output, is not part of
    /// it), and starts the proxy in `proxy` mode.
    pub async fn start(
        spec: SandboxSpec,
        workspace: &Workspace,
        run_id: &str,
        out_dir: &Path,
    ) -> Result<Sandbox, SandboxError> {
        let SandboxSpec { config, status } = spec;
        let (workdir, roots, home) = (
            &workspace.workdir,
            &workspace.roots,
            workspace.home.as_deref(),
        );
        let tmpdir = std::env::temp_dir().join(format!("tollgate-{run_id}"));
        std::fs::create_dir_all(&tmpdir).map_err(io(format!("create {}", tmpdir.display())))?;
        let resolve = |list: &[PolicyPath]| -> Vec<PathBuf> {
            list.iter()
                .filter_map(|path| path.resolve(workdir, home))
                .collect()
        };
        let allow_write = resolve(&config.allow_write);
        for dir in &allow_write {
            if !dir.exists() && roots.iter().any(|root| dir.starts_with(root)) {
                std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
            }
        }
        let mut write_roots: Vec<PathBuf> = roots.clone();
        write_roots.push(tmpdir.clone());
        write_roots.extend(allow_write);
        write_roots.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        // The workspace roots are writable whole, so new top-level entries can be made (a
        // hole below a root would leave the root itself list-only). What git and the
        // guardrails protect there is kept by `protected` instead; a `deny_write` or
        // `deny_read` the policy names is still a hole the kernel enforces.
        let deny_write = resolve(&config.deny_write);
        // Other processes' /proc/<pid> folders (tollgate's own `environ` holds the model's
        // API key) are closed; the rest of /proc stays readable. The child opens its own.
        let mut read_roots = vec![PathBuf::from("/")];
        read_roots.extend(list_dir(Path::new("/proc")).into_iter().filter(|entry| {
            entry
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    !name.bytes().all(|b| b.is_ascii_digit())
                        && name != "self"
                        && name != "thread-self"
                })
        }));
        let mut deny_read = resolve(&config.deny_read);
        deny_read.push(PathBuf::from("/proc"));
        // tollgate's state folder holds the key that signs transcripts: a command that read
        // it could forge a run's record.
        deny_read.extend(workspace.state_folder.clone());
        let scope = FsScope {
            read_roots,
            write_roots,
            deny_read,
            deny_write,
        };
        let proxy = match config.network {
            NetworkMode::Proxy => Some(
                Proxy::start(
                    ProxyRules::new(config.allowed_domains.clone(), &config.allowed_ports),
                    crate::net::Resolver::System,
                )
                .await
                .map_err(io("start the sandbox proxy"))?,
            ),
            NetworkMode::None | NetworkMode::Open => None,
        };
        let mut env = scrubbed_env(&config, &tmpdir, proxy.as_ref().map(Proxy::port));
        if config.caches == Caches::Run {
            let caches = run_caches(&tmpdir.join("cache"), home)?;
            env.retain(|(name, _)| !caches.iter().any(|(cache, _)| cache == name));
            env.extend(caches);
        }
        let out_dir = out_dir
            .canonicalize()
            .unwrap_or_else(|_| out_dir.to_path_buf());
        // Only the workdir is tollgate's to put back: an additional directory is the
        // operator's, where other processes may be making repositories while the run starts,
        // and a baseline taken mid-way would undo their work. A repository planted there is
        // not one git runs in the workdir.
        let protected = ProtectedFiles::capture(&roots[..roots.len().min(1)], &[out_dir])?;
        tracing::debug!("{} protected paths in the workspace", protected.len());
        tracing::info!(
            tmpdir = %tmpdir.display(),
            proxy_port = proxy.as_ref().map(Proxy::port),
            write_roots = ?scope.write_roots,
            "sandbox started"
        );
        let filter = Arc::new(SyscallFilter::build(socket_scope(&config))?);
        let tcp = match config.network {
            NetworkMode::Open => None,
            NetworkMode::None | NetworkMode::Proxy => Some(TcpAllow {
                ports: config.allowed_ports.clone(),
                connect_only: proxy.iter().map(Proxy::port).collect(),
            }),
        };
        let rules = SharedRuleset::new(status.landlock_abi, scope, tcp)?;
        Ok(Sandbox {
            config,
            status,
            rules,
            tmpdir,
            proxy,
            env,
            filter,
            protected,
        })
    }

    pub fn status(&self) -> &SandboxStatus {
        &self.status
    }

    /// The run's TMPDIR, the one folder outside the workspace its commands may write.
    pub fn tmpdir(&self) -> &Path {
        &self.tmpdir
    }

    /// Whether the task's checks run in the sandbox (`sandbox.checks`, the default).
    pub fn confines_checks(&self) -> bool {
        self.config.checks == Placement::Sandbox
    }

    /// Whether the hooks run in the sandbox (`sandbox.hooks`, the default).
    pub fn confines_hooks(&self) -> bool {
        self.config.hooks == Placement::Sandbox
    }

    /// Puts every protected file back as the run found it; called after each sandboxed
    /// command and before anything trusted (a check, a hook outside the sandbox) runs.
    /// Returns what had changed.
    pub fn restore_protected(&self) -> Vec<Violation> {
        let violations = self.protected.restore();
        for violation in &violations {
            tracing::warn!("sandbox: protected path {violation}");
        }
        violations
    }

    pub fn auto_allow_bash(&self) -> bool {
        self.config.auto_allow_bash && self.status.enforced()
    }

    /// The connections the proxy saw since the last call.
    pub fn take_proxy_log(&self) -> Vec<ProxyConnection> {
        self.proxy.as_ref().map(Proxy::take_log).unwrap_or_default()
    }

    /// The Landlock ruleset a file tool's work thread enters ([`run_confined`]): the commands'
    /// own, so an in-process tool can write and read nothing a sandboxed command could not.
    /// `None` where the kernel has no Landlock.
    pub fn tool_domain(&self) -> Result<Option<Arc<std::os::fd::OwnedFd>>, SandboxError> {
        self.rules.for_tools()
    }

    /// Everything one command's child needs, prepared here in the parent.
    pub fn prepare(&self) -> Result<CommandSandbox, SandboxError> {
        let ruleset = self.rules.for_command()?;
        let limits = self.config.limits;
        let (cgroup, procs) = match (&self.status.process_limit, limits.max_processes) {
            (ProcessLimit::Cgroup { parent }, Some(max)) => {
                let (cgroup, procs) = CommandCgroup::create(parent, max)
                    .map_err(io("create the command's pids cgroup"))?;
                (Some(cgroup), Some(procs))
            }
            _ => (None, None),
        };
        let by_rlimit = matches!(self.status.process_limit, ProcessLimit::Rlimit { .. });
        Ok(CommandSandbox {
            env: self.env.clone(),
            child: ChildSetup {
                cgroup_procs: procs,
                rlimits: limits::rlimits(&limits, by_rlimit),
                own_proc_rights: if ruleset.is_some() {
                    ruleset::read_rights_bits(self.status.landlock_abi)
                } else {
                    0
                },
                ruleset,
                read_only: None,
                filter: Some(self.filter.clone()),
            },
            watch: LimitWatch { cgroup, limits },
        })
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.tmpdir) {
            tracing::debug!("cannot remove {}: {err}", self.tmpdir.display());
        }
    }
}

/// The sockets a mode needs: TCP only where some TCP connection is allowed at all (the
/// proxy, `allowed_ports`), any internet socket only in `open`.
fn socket_scope(config: &SandboxConfig) -> SocketScope {
    match config.network {
        NetworkMode::None if config.allowed_ports.is_empty() => SocketScope::Local,
        NetworkMode::None | NetworkMode::Proxy => SocketScope::Tcp,
        NetworkMode::Open => SocketScope::Internet,
    }
}

/// The base set from tollgate's own environment, `env_passthrough`, the run's TMPDIR and, in
/// proxy mode, the proxy variables. Nothing else: the model's API key never reaches a command.
fn scrubbed_env(
    config: &SandboxConfig,
    tmpdir: &Path,
    proxy_port: Option<u16>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = BASE_ENV
        .iter()
        .copied()
        .chain(config.env_passthrough.iter().map(String::as_str))
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.push(("TMPDIR".into(), tmpdir.into()));
    if let Some(port) = proxy_port {
        let url = OsString::from(format!("http://127.0.0.1:{port}"));
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            env.push((name.into(), url.clone()));
        }
        // Nothing bypasses the proxy: a direct connection would be refused by Landlock.
        env.push(("NO_PROXY".into(), OsString::new()));
        env.push(("no_proxy".into(), OsString::new()));
    }
    env
}

/// The per-user caches of sandboxed commands, in a folder of the run's own: a command can
/// fill them (a build, `npm test`'s logs) and nothing it leaves there outlives the run or
/// reaches the next one. Cargo's own settings (`config.toml`, never `credentials`) are
/// copied into its per-run home.
fn run_caches(
    cache: &Path,
    home: Option<&Path>,
) -> Result<Vec<(OsString, OsString)>, SandboxError> {
    let cargo_home = cache.join("cargo");
    let dirs = [
        ("XDG_CACHE_HOME", cache.join("xdg")),
        ("CARGO_HOME", cargo_home.clone()),
        ("GOCACHE", cache.join("go-build")),
        ("GOMODCACHE", cache.join("go-mod")),
        ("npm_config_cache", cache.join("npm")),
        ("PIP_CACHE_DIR", cache.join("pip")),
    ];
    for (_, dir) in &dirs {
        std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    }
    let real_cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".cargo")));
    if let Some(real) = real_cargo_home {
        for name in ["config.toml", "config"] {
            let from = real.join(name);
            if from.is_file() {
                std::fs::copy(&from, cargo_home.join(name))
                    .map_err(io(format!("copy {}", from.display())))?;
            }
        }
    }
    Ok(dirs
        .into_iter()
        .map(|(name, dir)| (OsString::from(name), dir.into_os_string()))
        .collect())
}

/// One command's confinement: its environment, what the child applies (moved into the
/// spawn's pre-exec step), and what tells afterwards which limit it hit.
#[derive(Debug)]
pub struct CommandSandbox {
    pub env: Vec<(OsString, OsString)>,
    pub child: ChildSetup,
    pub watch: LimitWatch,
}

/// The command's pids cgroup (removed when dropped) and its limits.
#[derive(Debug)]
pub struct LimitWatch {
    cgroup: Option<CommandCgroup>,
    limits: LimitsConfig,
}

impl LimitWatch {
    /// The limit the command ran into, if its ending shows one.
    pub fn limit_hit(&self, ending: Ending) -> Option<LimitHit> {
        if self
            .cgroup
            .as_ref()
            .is_some_and(CommandCgroup::limit_was_hit)
        {
            return self.limits.max_processes.map(LimitHit::MaxProcesses);
        }
        match ending {
            Ending::Exited(code) => limits::signalled_limit(&self.limits, None, Some(code)),
            Ending::Signalled(signal) => limits::signalled_limit(&self.limits, Some(signal), None),
            Ending::TimedOut | Ending::Cancelled => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(network: NetworkMode, on_unavailable: OnUnavailable) -> SandboxConfig {
        SandboxConfig {
            enabled: true,
            on_unavailable,
            allow_write: Vec::new(),
            deny_read: Vec::new(),
            deny_write: Vec::new(),
            network,
            allowed_domains: Vec::new(),
            allowed_ports: Vec::new(),
            env_passthrough: Vec::new(),
            auto_allow_bash: true,
            checks: Placement::Sandbox,
            hooks: Placement::Sandbox,
            caches: Caches::Run,
            limits: LimitsConfig::default(),
            read_only_commands: ReadOnlyCommands::Enforce,
        }
    }

    #[test]
    fn preflight_fails_closed_or_warns_as_the_policy_says() {
        let cgroup = ProcessLimit::Rlimit { binds: true };
        let table = [
            (7, NetworkMode::None, OnUnavailable::Fail, Ok(true)),
            (3, NetworkMode::Open, OnUnavailable::Fail, Ok(true)),
            (3, NetworkMode::None, OnUnavailable::Fail, Err("ABI 4")),
            (0, NetworkMode::Open, OnUnavailable::Fail, Err("ABI 3")),
            (2, NetworkMode::Proxy, OnUnavailable::Warn, Ok(false)),
        ];
        for (abi, network, on_unavailable, want) in table {
            let got = preflight_with(&config(network, on_unavailable), abi, cgroup.clone());
            match (got, want) {
                (Ok(status), Ok(enforced)) => {
                    assert_eq!(status.enforced(), enforced, "abi {abi}");
                    assert_eq!(status.warning.is_some(), !enforced);
                }
                (Err(err), Err(needle)) => assert!(err.to_string().contains(needle), "{err}"),
                (got, want) => panic!("abi {abi}: {got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn the_environment_keeps_only_the_base_set_and_passthrough() {
        let mut config = config(NetworkMode::Proxy, OnUnavailable::Fail);
        config.env_passthrough = vec!["TOLLGATE_SANDBOX_TEST_PASS".into()];
        // SAFETY (test): names no other test reads.
        unsafe {
            std::env::set_var("TOLLGATE_SANDBOX_TEST_PASS", "yes");
            std::env::set_var("TOLLGATE_SANDBOX_TEST_HIDDEN", "no");
        }
        let env = scrubbed_env(&config, Path::new("/tmp/t"), Some(4242));
        let get = |name: &str| {
            env.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("TOLLGATE_SANDBOX_TEST_PASS").as_deref(), Some("yes"));
        assert_eq!(get("TOLLGATE_SANDBOX_TEST_HIDDEN"), None);
        assert_eq!(get("TMPDIR").as_deref(), Some("/tmp/t"));
        assert_eq!(get("HTTPS_PROXY").as_deref(), Some("http://127.0.0.1:4242"));
        assert!(get("PATH").is_some());
    }
}

/// The test suite's one rule for a test that needs what this machine may lack (a kernel
/// feature): the same file as the integration tests' `support::skip`.
#[cfg(test)]
#[path = "../../test-support/src/skip.rs"]
#[allow(dead_code, reason = "the unit tests need only part of it")]
pub(crate) mod test_skip;
