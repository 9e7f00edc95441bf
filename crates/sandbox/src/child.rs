//! What runs in the forked child before `exec`: join the command's pids cgroup, set the
//! resource limits, drop every capability, set no_new_privs, restrict itself with the
//! prepared Landlock ruleset(s), install the system-call filter. Only raw system calls on
//! values prepared in the parent: no allocation, no locks, so it is safe between `fork` and
//! `exec` of a multi-threaded runner.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::seccomp::SyscallFilter;

/// One `setrlimit` to make: the soft limit is what the command hits first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    pub resource: RlimitResource,
    pub soft: u64,
    pub hard: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RlimitResource {
    Processes,
    AddressSpace,
    CpuSeconds,
    FileSize,
    OpenFiles,
}

impl RlimitResource {
    /// The hard limit this process runs under; `None` when unlimited or unknown.
    pub fn current_hard(self) -> Option<u64> {
        let mut value = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit(2) writes into the struct we own and reads nothing else.
        let ok = unsafe { libc::getrlimit(self.raw(), &mut value) } == 0;
        (ok && value.rlim_max != libc::RLIM_INFINITY).then_some(value.rlim_max)
    }

    fn raw(self) -> libc::__rlimit_resource_t {
        match self {
            RlimitResource::Processes => libc::RLIMIT_NPROC,
            RlimitResource::AddressSpace => libc::RLIMIT_AS,
            RlimitResource::CpuSeconds => libc::RLIMIT_CPU,
            RlimitResource::FileSize => libc::RLIMIT_FSIZE,
            RlimitResource::OpenFiles => libc::RLIMIT_NOFILE,
        }
    }
}

/// Everything the child applies, prepared in the parent.
#[derive(Debug)]
pub struct ChildSetup {
    /// `cgroup.procs` of the command's own pids cgroup, open for writing.
    pub cgroup_procs: Option<OwnedFd>,
    pub rlimits: Vec<Rlimit>,
    /// The Landlock ruleset, shared by the run's commands; `None` where the kernel has no
    /// Landlock (`on_unavailable: warn`).
    pub ruleset: Option<Arc<OwnedFd>>,
    /// Read rights the child grants itself on its own `/proc/<pid>`, which the parent cannot
    /// name before the fork (the rest of `/proc/<pid>` stays closed: this kernel lets a
    /// Landlock domain read other processes' `environ`).
    pub own_proc_rights: u64,
    /// A second domain stacked on the first: the read-only one, shared by the run's commands.
    pub read_only: Option<Arc<OwnedFd>>,
    /// Installed last; `None` only where the command is not confined at all.
    pub filter: Option<Arc<SyscallFilter>>,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's ABI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: libc::c_int,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_long = 1;

impl ChildSetup {
    /// Runs in the child between fork and exec. Any failure stops the exec: a command that
    /// could not be confined does not run.
    pub fn apply(&self) -> std::io::Result<()> {
        if let Some(procs) = &self.cgroup_procs {
            // "0" moves the writing process itself.
            // SAFETY: write(2) of a 1-byte static buffer to a descriptor we own.
            let written = unsafe { libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if written != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for limit in &self.rlimits {
            let value = libc::rlimit {
                rlim_cur: limit.soft,
                rlim_max: limit.hard,
            };
            // SAFETY: setrlimit(2) reads the struct we pass and nothing else.
            if unsafe { libc::setrlimit(limit.resource.raw(), &value) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        drop_capabilities()?;
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only. Without it no
        // unprivileged process may restrict itself, and a setuid binary could shed the rules.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(ruleset) = &self.ruleset {
            if self.own_proc_rights != 0 {
                grant_own_proc(ruleset.as_raw_fd(), self.own_proc_rights)?;
            }
            // SAFETY: landlock_restrict_self(2) takes the ruleset descriptor we own and flags 0.
            let done = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if done != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(ruleset) = &self.read_only {
            // SAFETY: as above; a second call stacks a second, independent domain.
            let done = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if done != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(filter) = &self.filter {
            filter.apply()?;
        }
        Ok(())
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two of them (64 capability bits).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Not in `libc`.
const CAP_SETPCAP: libc::c_int = 8;

/// Drops every capability for good: the bounding set (so no exec can regain one, root's
/// included), the ambient set, then effective, permitted and inheritable. As root this is
/// what keeps a raw or packet socket, a mount or a `ptrace` of tollgate out of reach. A
/// process without `CAP_SETPCAP` may not shrink its bounding set; it has no capability to
/// lose, and no_new_privs keeps file capabilities from adding any at exec.
fn drop_capabilities() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the kernel's last capability.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINVAL) => break,
                Some(libc::EPERM) if !has_effective(CAP_SETPCAP) => break,
                _ => return Err(std::io::Error::last_os_error()),
            }
        }
    }
    // SAFETY: prctl with integer arguments. EINVAL: a kernel without ambient capabilities.
    let cleared = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    if cleared != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(std::io::Error::last_os_error());
    }
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) reads the header and the two data structs we own; dropping every
    // capability is always permitted.
    if unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            none.as_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `cap` is in this process's effective set.
fn has_effective(cap: libc::c_int) -> bool {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget(2) writes into the two data structs we own.
    let got = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    let Ok(bit) = u32::try_from(cap) else {
        return false;
    };
    got == 0 && data[(bit / 32) as usize % 2].effective & (1 << (bit % 32)) != 0
}

/// Adds a read rule for this process's own `/proc/<pid>` to the ruleset.
fn grant_own_proc(ruleset: libc::c_int, rights: u64) -> std::io::Result<()> {
    // SAFETY: open(2) of a static NUL-terminated path; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/self".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attr = PathBeneathAttr {
        allowed_access: rights,
        parent_fd: fd,
    };
    // SAFETY: landlock_add_rule(2) reads the attribute struct we pass; flags must be 0.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    let error = (added != 0).then(std::io::Error::last_os_error);
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
    match error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}
