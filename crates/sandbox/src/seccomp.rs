//! The system-call filter a confined command runs under (seccomp, compiled by `seccompiler`
//! in the parent, installed by the child after Landlock): which sockets it may open, and no
//! io_uring. Landlock's network rules cover TCP only; everything else a socket can carry —
//! UDP, MPTCP, raw IP, packet sockets, netlink, vsock — is closed here, per network mode.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

use super::SandboxError;

/// The sockets a command may open. Each scope admits what the one before it does, and more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SocketScope {
    /// Connected pairs only (`socketpair(AF_UNIX)`): no socket that can name a peer. The
    /// read-only domain.
    Pairs,
    /// Unix sockets and route netlink (interface lists, `getaddrinfo`'s address check): no
    /// internet socket at all. `network: none` without `allowed_ports`.
    Local,
    /// Also IPv4/IPv6 TCP: stream sockets with protocol 0 or `IPPROTO_TCP`, which Landlock's
    /// port rules then bound. `network: none` with `allowed_ports`, and `proxy`.
    Tcp,
    /// Also any other IPv4/IPv6 socket but raw ones (UDP, MPTCP, ICMP echo): `network: open`.
    Internet,
}

/// The compiled filter; installed with [`SyscallFilter::apply`] between fork and exec.
#[derive(Debug)]
pub struct SyscallFilter {
    program: BpfProgram,
}

/// What a refused call returns: an ordinary "permission denied" the program reports.
const REFUSED: u32 = libc::EACCES as u32;

/// `SOCK_TYPE_MASK`: the type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
const TYPE_MASK: u64 = 0xf;

/// Not in `libc` for every target.
const IPPROTO_TCP: u64 = 6;
const NETLINK_ROUTE: u64 = 0;
const SOCK_PACKET: u64 = 10;

/// x32 system calls arrive with the x86_64 audit architecture and this bit set in the number;
/// the architecture check alone does not catch them.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, BackendError> {
    SeccompRule::new(conditions)
}

/// The families `scope` admits for `socket()`.
fn families(scope: SocketScope) -> Vec<u64> {
    let mut out = Vec::new();
    if scope >= SocketScope::Local {
        out.extend([libc::AF_UNIX as u64, libc::AF_NETLINK as u64]);
    }
    if scope >= SocketScope::Tcp {
        out.extend([libc::AF_INET as u64, libc::AF_INET6 as u64]);
    }
    out
}

/// The `socket()` calls refused under `scope`, as rules any one of which refuses.
fn socket_refusals(scope: SocketScope) -> Result<Vec<SeccompRule>, BackendError> {
    let admitted = families(scope);
    if admitted.is_empty() {
        // No family at all: the call is refused outright.
        return Ok(Vec::new());
    }
    let mut rules = Vec::new();
    // A family outside the list: every `!=` must hold.
    rules.push(rule(
        admitted
            .iter()
            .map(|family| cond(0, SeccompCmpOp::Ne, *family))
            .collect::<Result<_, _>>()?,
    )?);
    if scope >= SocketScope::Local {
        // Netlink beyond route: audit, netfilter, uevents, xfrm, …
        rules.push(rule(vec![
            cond(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?,
            cond(2, SeccompCmpOp::Ne, NETLINK_ROUTE)?,
        ])?);
    }
    for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
        match scope {
            SocketScope::Pairs | SocketScope::Local => {}
            SocketScope::Tcp => {
                // Any type but a stream, whatever flags are or'ed in.
                for kind in 0..=TYPE_MASK {
                    if kind != libc::SOCK_STREAM as u64 {
                        rules.push(rule(vec![
                            cond(0, SeccompCmpOp::Eq, family)?,
                            cond(1, SeccompCmpOp::MaskedEq(TYPE_MASK), kind)?,
                        ])?);
                    }
                }
                // A stream that is not TCP: MPTCP (262) and SCTP are not what Landlock's TCP
                // rules cover.
                rules.push(rule(vec![
                    cond(0, SeccompCmpOp::Eq, family)?,
                    cond(2, SeccompCmpOp::Ne, 0)?,
                    cond(2, SeccompCmpOp::Ne, IPPROTO_TCP)?,
                ])?);
            }
            SocketScope::Internet => {
                for kind in [libc::SOCK_RAW as u64, SOCK_PACKET] {
                    rules.push(rule(vec![
                        cond(0, SeccompCmpOp::Eq, family)?,
                        cond(1, SeccompCmpOp::MaskedEq(TYPE_MASK), kind)?,
                    ])?);
                }
            }
        }
    }
    Ok(rules)
}

/// The calls that change an existing file's metadata — mode, owner, timestamps, extended
/// attributes — which no Landlock right covers. Refused in the read-only domain.
fn metadata_changes() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        // fchmodat2, setxattrat, removexattrat: numbered alike on every architecture since
        // the tables were unified (not yet in `libc` everywhere).
        452,
        463,
        466,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    calls
}

/// The rule table: system call number → the rules that refuse it (an empty list refuses it
/// outright).
fn table(
    scope: SocketScope,
    read_only: bool,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, BackendError> {
    let mut map = BTreeMap::new();
    if read_only {
        for nr in metadata_changes() {
            map.insert(nr, Vec::new());
        }
    }
    map.insert(libc::SYS_socket, socket_refusals(scope)?);
    map.insert(
        libc::SYS_socketpair,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?],
    );
    // io_uring's socket and connect operations never pass through the filter above.
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        map.insert(nr, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    for nr in [
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        map.insert(nr | X32_SYSCALL_BIT, Vec::new());
    }
    Ok(map)
}

impl SyscallFilter {
    /// Compiles the filter for `scope`. Only the three architectures `seccompiler` knows have
    /// one; elsewhere this is an error, so a sandbox that cannot hold sockets is never taken
    /// for one that does.
    pub fn build(scope: SocketScope) -> Result<SyscallFilter, SandboxError> {
        SyscallFilter::compile(scope, false)
    }

    /// The read-only domain's: no socket but pairs, and no change to a file's metadata.
    pub fn read_only() -> Result<SyscallFilter, SandboxError> {
        SyscallFilter::compile(SocketScope::Pairs, true)
    }

    fn compile(scope: SocketScope, read_only: bool) -> Result<SyscallFilter, SandboxError> {
        let err = |source: BackendError| SandboxError::Ruleset {
            what: "the system-call filter".into(),
            message: source.to_string(),
        };
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
        // Other architectures' calls (i386 through int 0x80) kill the process: their numbers
        // mean other calls.
        let filter = SeccompFilter::new(
            table(scope, read_only).map_err(err)?,
            SeccompAction::Allow,
            SeccompAction::Errno(REFUSED),
            arch,
        )
        .map_err(err)?;
        let program = BpfProgram::try_from(filter).map_err(err)?;
        Ok(SyscallFilter { program })
    }

    /// In the child, last before exec: installs the filter (with no_new_privs, which
    /// seccomp requires of an unprivileged process). Only system calls on the program
    /// compiled in the parent.
    pub fn apply(&self) -> std::io::Result<()> {
        seccompiler::apply_filter(&self.program).map_err(|_| std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `probe` in a forked child under `scope`'s filter; the child's exit code is the
    /// errno `probe` ended with (0: allowed).
    fn in_child(scope: SocketScope, probe: fn() -> i32) -> i32 {
        let filter = SyscallFilter::build(scope).unwrap();
        // SAFETY (test): the child only installs the filter, makes system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = match filter.apply() {
                Ok(()) => probe(),
                Err(_) => 99,
            };
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "status {status}");
        libc::WEXITSTATUS(status)
    }

    fn errno_of(fd: libc::c_int) -> i32 {
        if fd >= 0 {
            unsafe { libc::close(fd) };
            0
        } else {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(98)
        }
    }

    fn socket(family: i32, kind: i32, protocol: i32) -> i32 {
        errno_of(unsafe { libc::socket(family, kind, protocol) })
    }

    const EACCES: i32 = libc::EACCES;

    #[test]
    fn tcp_scope_admits_tcp_and_unix_only() {
        let probes: [(fn() -> i32, i32); 9] = [
            (|| socket(libc::AF_INET, libc::SOCK_STREAM, 0), 0),
            (
                || socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 6),
                0,
            ),
            (|| socket(libc::AF_UNIX, libc::SOCK_STREAM, 0), 0),
            (|| socket(libc::AF_INET, libc::SOCK_STREAM, 262), EACCES),
            (
                || socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0),
                EACCES,
            ),
            (
                || socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
                EACCES,
            ),
            (|| socket(libc::AF_PACKET, libc::SOCK_RAW, 0), EACCES),
            (|| socket(libc::AF_NETLINK, libc::SOCK_RAW, 9), EACCES),
            (|| socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0), EACCES),
        ];
        for (index, (probe, want)) in probes.into_iter().enumerate() {
            assert_eq!(in_child(SocketScope::Tcp, probe), want, "probe {index}");
        }
    }

    #[test]
    fn local_scope_has_no_internet_socket_and_pairs_have_no_socket_at_all() {
        assert_eq!(
            in_child(SocketScope::Local, || socket(
                libc::AF_INET,
                libc::SOCK_STREAM,
                0
            )),
            EACCES
        );
        assert_eq!(
            in_child(SocketScope::Local, || socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW,
                0
            )),
            0
        );
        assert_eq!(
            in_child(SocketScope::Pairs, || socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM,
                0
            )),
            EACCES
        );
        let pair = || {
            let mut fds = [0; 2];
            let made =
                unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
            errno_of(if made == 0 { fds[0] } else { -1 })
        };
        assert_eq!(in_child(SocketScope::Pairs, pair), 0);
        let io_uring = || {
            let mut params = [0u8; 120];
            let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
            errno_of(fd as libc::c_int)
        };
        assert_eq!(in_child(SocketScope::Internet, io_uring), EACCES);
    }
}
