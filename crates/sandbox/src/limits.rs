//! Resource limits of a sandboxed command, and telling afterwards which one it hit. The
//! process count goes through a pids cgroup where tollgate may create one (RLIMIT_NPROC does
//! not bind root, and counts every process of the user, not the command's).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::child::{Rlimit, RlimitResource};
use tollgate_policy::settings::LimitsConfig;

/// How the process limit is enforced on this machine (reported by the preflight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum ProcessLimit {
    /// A pids cgroup per command, under this folder.
    Cgroup { parent: PathBuf },
    /// RLIMIT_NPROC; `binds` is false for root, which the kernel exempts.
    Rlimit { binds: bool },
}

impl ProcessLimit {
    /// Finds a pids controller folder tollgate may create children in (cgroup v2, else v1).
    pub fn detect() -> ProcessLimit {
        match pids_parent().filter(|dir| probe(dir)) {
            Some(parent) => ProcessLimit::Cgroup { parent },
            None => ProcessLimit::without_cgroup(),
        }
    }

    /// RLIMIT_NPROC, which the kernel does not apply to root.
    pub fn without_cgroup() -> ProcessLimit {
        // SAFETY: geteuid has no preconditions.
        ProcessLimit::Rlimit {
            binds: unsafe { libc::geteuid() } != 0,
        }
    }
}

/// Our own pids cgroup folder, from /proc/self/cgroup and the mount table.
fn pids_parent() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mount_of = |fstype: &str, option: Option<&str>| {
        mounts.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let matches = fields.get(2) == Some(&fstype)
                && option.is_none_or(|want| {
                    fields
                        .get(3)
                        .is_some_and(|opts| opts.split(',').any(|o| o == want))
                });
            matches.then(|| PathBuf::from(fields.get(1).copied().unwrap_or("")))
        })
    };
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "pids")
            && let Some(mount) = mount_of("cgroup", Some("pids"))
        {
            return Some(mount.join(relative));
        }
        if controllers.is_empty()
            && let Some(mount) = mount_of("cgroup2", None)
        {
            let dir = mount.join(relative);
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                .is_ok_and(|text| text.split_whitespace().any(|c| c == "pids"));
            if enabled {
                return Some(dir);
            }
        }
    }
    None
}

/// Whether a child cgroup with a `pids.max` can be made here.
fn probe(parent: &Path) -> bool {
    let dir = parent.join(format!("tollgate-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&dir).is_ok();
    let usable = made && dir.join("pids.max").exists();
    if made {
        let _ = std::fs::remove_dir(&dir);
    }
    usable
}

/// A limit a command ran into, named as the policy names it (the file size in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitHit {
    MaxProcesses(u64),
    MaxCpuSeconds(u64),
    MaxFileBytes(u64),
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitHit::MaxProcesses(n) => write!(f, "sandbox limit max_processes ({n}) was hit"),
            LimitHit::MaxCpuSeconds(n) => {
                write!(f, "sandbox limit max_cpu_seconds ({n}) was hit")
            }
            LimitHit::MaxFileBytes(n) => {
                write!(f, "sandbox limit max_file_mb ({} MiB) was hit", n >> 20)
            }
        }
    }
}

/// The pids cgroup of one command; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct CommandCgroup {
    dir: PathBuf,
}

static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

impl CommandCgroup {
    /// Creates the cgroup with `pids.max` and opens its `cgroup.procs` for the child.
    pub fn create(parent: &Path, max: u64) -> std::io::Result<(CommandCgroup, OwnedFd)> {
        let n = NEXT_CGROUP.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("tollgate-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let cgroup = CommandCgroup { dir };
        std::fs::write(cgroup.dir.join("pids.max"), max.to_string())?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(cgroup.dir.join("cgroup.procs"))?;
        Ok((cgroup, procs.into()))
    }

    /// Whether a fork was refused for the limit.
    pub fn limit_was_hit(&self) -> bool {
        std::fs::read_to_string(self.dir.join("pids.events")).is_ok_and(|text| {
            text.lines()
                .filter_map(|line| line.strip_prefix("max "))
                .any(|count| count.trim().parse::<u64>().is_ok_and(|n| n > 0))
        })
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        // The command's process group was killed before this; a process that left the group
        // (setsid) is still in the cgroup and goes now, so nothing outlives the call. One that
        // is still dying keeps the cgroup, which then stays behind rather than block the run.
        let members = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in members
            .lines()
            .filter_map(|line| line.trim().parse::<libc::pid_t>().ok())
        {
            // SAFETY: kill(2) only sends a signal, to a process listed in the command's own
            // cgroup a moment ago.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if let Err(err) = std::fs::remove_dir(&self.dir) {
            tracing::debug!("cannot remove {}: {err}", self.dir.display());
        }
    }
}

/// The rlimits for `config`; the process count only when no cgroup carries it. CPU time gets
/// a few seconds between soft and hard limit, so SIGXCPU (which names the limit) comes first.
/// A limit is never raised above the hard limit tollgate itself runs under (a container's
/// `--ulimit nofile=1024`): raising it would fail in the child and no command could start,
/// while the lower limit already binds harder than the policy asks.
pub fn rlimits(config: &LimitsConfig, processes_by_rlimit: bool) -> Vec<Rlimit> {
    let mut out = Vec::new();
    let mut push = |resource: RlimitResource, value: Option<u64>, grace: u64| {
        if let Some(value) = value {
            let ceiling = resource.current_hard().unwrap_or(u64::MAX);
            out.push(Rlimit {
                resource,
                soft: value.min(ceiling),
                hard: value.saturating_add(grace).min(ceiling),
            });
        }
    };
    if processes_by_rlimit {
        push(RlimitResource::Processes, config.max_processes, 0);
    }
    push(RlimitResource::AddressSpace, config.max_memory_bytes, 0);
    push(RlimitResource::CpuSeconds, config.max_cpu_seconds, 5);
    push(RlimitResource::FileSize, config.max_file_bytes, 0);
    push(RlimitResource::OpenFiles, config.max_open_files, 0);
    out
}

/// The limit a command's ending shows: killed by (or bash reporting) SIGXCPU or SIGXFSZ.
pub fn signalled_limit(
    config: &LimitsConfig,
    signal: Option<i32>,
    code: Option<i32>,
) -> Option<LimitHit> {
    let signal = signal.or_else(|| code.filter(|c| *c > 128).map(|c| c - 128))?;
    match signal {
        libc::SIGXCPU => config.max_cpu_seconds.map(LimitHit::MaxCpuSeconds),
        libc::SIGXFSZ => config.max_file_bytes.map(LimitHit::MaxFileBytes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_name_their_limit() {
        let config = LimitsConfig::default();
        assert_eq!(
            signalled_limit(&config, Some(libc::SIGXCPU), None),
            Some(LimitHit::MaxCpuSeconds(3600))
        );
        assert_eq!(
            signalled_limit(&config, None, Some(128 + libc::SIGXFSZ)),
            config.max_file_bytes.map(LimitHit::MaxFileBytes)
        );
        assert_eq!(signalled_limit(&config, None, Some(1)), None);
        assert_eq!(signalled_limit(&config, Some(libc::SIGKILL), None), None);
    }

    #[test]
    fn the_process_rlimit_only_without_a_cgroup() {
        let config = LimitsConfig::default();
        let has = |list: &[Rlimit]| list.iter().any(|l| l.resource == RlimitResource::Processes);
        assert!(has(&rlimits(&config, true)));
        assert!(!has(&rlimits(&config, false)));
        let cpu = rlimits(&config, false)
            .into_iter()
            .find(|l| l.resource == RlimitResource::CpuSeconds);
        assert_eq!(cpu.map(|l| l.hard - l.soft), Some(5));
    }

    #[test]
    fn no_limit_is_raised_above_the_runners_own_hard_limit() {
        let config = LimitsConfig {
            max_open_files: Some(u64::MAX / 2),
            ..LimitsConfig::default()
        };
        let ceiling = RlimitResource::OpenFiles.current_hard();
        let files = rlimits(&config, false)
            .into_iter()
            .find(|l| l.resource == RlimitResource::OpenFiles)
            .unwrap();
        match ceiling {
            Some(hard) => assert!(
                files.soft <= hard && files.hard <= hard,
                "{files:?} > {hard}"
            ),
            None => assert_eq!(files.soft, u64::MAX / 2),
        }
    }
}
