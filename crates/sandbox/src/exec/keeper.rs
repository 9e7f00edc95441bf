//! The keeper: one small process per call, between tollgate and the command, that ends
//! everything the command started when the call ends — processes that left its process group
//! (`setsid`, daemons) included, where no pids cgroup holds them. It is a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so whatever the command orphans is reparented to the keeper
//! of *its* call, never to tollgate or init: concurrent calls cannot mix their leftovers.
//!
//! The keeper is the forked child itself, split once more in `pre_exec`: the parent side
//! stays the keeper and never returns to the standard library; the child side goes on to the
//! sandbox step and `exec`. The keeper holds nothing of tollgate's but the read end of its
//! call's control pipe (and the guardian's pipe): when the command's first process exits, or
//! the control pipe closes (the call timed out, was cancelled or dropped, or tollgate died),
//! it kills the command's process group, then every process still reparented to it, reaps
//! them all, and exits as the command's first process did. Only system calls on stack
//! buffers: it runs in a forked copy of a multi-threaded process.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The pipe a call holds open for as long as its keeper should wait.
pub(super) struct Control {
    /// Held for as long as the command may run: closing it (dropping) tells the keeper to
    /// end the command.
    _write: OwnedFd,
    /// The keeper's end; closed in tollgate once the child is started.
    pub(super) read: OwnedFd,
}

impl Control {
    pub(super) fn new() -> io::Result<Control> {
        let mut fds = [0; 2];
        // SAFETY: pipe2(2) writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just opened and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Control {
            _write: write,
            read,
        })
    }
}

/// In the forked child: splits off the command's process. Returns in the command's process
/// (in a process group of its own, announced to the guardian, tied to the keeper's life);
/// the keeper never returns.
pub(super) fn split(control: RawFd, guardian: Option<RawFd>) -> io::Result<()> {
    // SAFETY: getpid, prctl and fork are plain system calls; the fork is of a process that
    // is itself a fresh fork and runs only system calls until it exits or execs.
    unsafe {
        let keeper = libc::getpid();
        // Not inherited across fork: set before the command exists, so nothing it starts can
        // be orphaned before the keeper is its reaper.
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let command = libc::fork();
        if command < 0 {
            return Err(io::Error::last_os_error());
        }
        if command == 0 {
            // Its own group, so the keeper can kill the command's group without itself.
            libc::setpgid(0, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != keeper {
                return Err(io::Error::other(
                    "the command's keeper exited while it started",
                ));
            }
            if let Some(pipe) = guardian {
                super::guardian::announce_from_child(pipe);
            }
            return Ok(());
        }
        // Both sides set the group, so the keeper never signals a group not yet made.
        libc::setpgid(command, command);
        keep(command, control, guardian)
    }
}

/// The keeper's life; see the module comment.
fn keep(command: libc::pid_t, control: RawFd, guardian: Option<RawFd>) -> ! {
    // SAFETY: every call below is a system call on integers or on stack buffers we own.
    unsafe {
        // tollgate's death must reach the keeper as the control pipe's end, not as SIGKILL:
        // it has the command to end first.
        libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        close_all_but(&[control, guardian.unwrap_or(control)]);
        let pidfd = libc::syscall(libc::SYS_pidfd_open, command, 0) as libc::c_int;
        let mut status = None;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // Without pidfds (Linux < 5.3) the command's end is polled for.
            let (count, wait) = if pidfd >= 0 { (2, -1) } else { (1, 10) };
            libc::poll(fds.as_mut_ptr(), count, wait);
            let mut raw = 0;
            if libc::waitpid(command, &mut raw, libc::WNOHANG) == command {
                status = Some(raw);
                break;
            }
            if fds[0].revents != 0 {
                break;
            }
        }
        libc::killpg(command, libc::SIGKILL);
        if status.is_none() {
            libc::kill(command, libc::SIGKILL);
        }
        loop {
            let mut raw = 0;
            let reaped = libc::waitpid(-1, &mut raw, libc::WNOHANG);
            if reaped == command {
                status = Some(raw);
            } else if reaped == 0 {
                // Alive and reparented here: a process that left the group, or the child of
                // one just killed. Each round kills what is there; a killed process cannot
                // fork again, so the rounds end.
                kill_children(libc::getpid());
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            } else if reaped < 0 {
                break;
            }
        }
        if let Some(pipe) = guardian {
            super::guardian::release(pipe, command);
        }
        exit_as(status.unwrap_or(libc::SIGKILL))
    }
}

/// Ends the keeper the way the command's first process ended: its exit code, or its signal
/// (re-raised with no core dump, which would be a copy of tollgate's memory).
fn exit_as(status: libc::c_int) -> ! {
    // SAFETY: system calls on integers; `_exit` does not return.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// Closes every descriptor but `keep`: the keeper must hold no pipe of this call or any other
/// (a reader would wait for it), nor tollgate's files.
fn close_all_but(keep: &[RawFd]) {
    let mut next: libc::c_uint = 0;
    let mut sorted = [keep[0], *keep.get(1).unwrap_or(&keep[0])];
    sorted.sort_unstable();
    for fd in sorted {
        let Ok(fd) = libc::c_uint::try_from(fd) else {
            continue;
        };
        if fd > next {
            close_range(next, fd - 1);
        }
        next = next.max(fd + 1);
    }
    close_range(next, libc::c_uint::MAX);
}

fn close_range(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: close_range(2) and close(2) only close descriptors of this process.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            // Linux < 5.9: one by one, up to a bound far above any real descriptor count.
            for fd in first..=last.min(65_535) {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

/// SIGKILLs every process whose parent is `me`, found in /proc (the keeper cannot know the
/// ids of processes reparented to it otherwise; `/proc/<pid>/task/*/children` is not built
/// into every kernel).
fn kill_children(me: libc::pid_t) {
    // SAFETY: open/getdents64/read/close/kill on stack buffers we own.
    unsafe {
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let mut entries = [0u8; 4096];
        loop {
            let read = libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            );
            if read <= 0 {
                break;
            }
            let mut at = 0usize;
            let end = read as usize;
            while at + 19 < end {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name…
                let reclen = u16::from_ne_bytes([entries[at + 16], entries[at + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let name = &entries[at + 19..(at + reclen).min(end)];
                if let Some(pid) = parse_pid(name)
                    && parent_of(pid) == Some(me)
                {
                    libc::kill(pid, libc::SIGKILL);
                }
                at += reclen;
            }
        }
        libc::close(dir);
    }
}

/// The number a NUL-terminated /proc entry name spells, if it is all digits.
fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    let mut pid: libc::pid_t = 0;
    let mut digits = 0;
    for &byte in name {
        if byte == 0 {
            break;
        }
        if !byte.is_ascii_digit() {
            return None;
        }
        pid = pid
            .checked_mul(10)?
            .checked_add(libc::pid_t::from(byte - b'0'))?;
        digits += 1;
    }
    (digits > 0).then_some(pid)
}

/// The parent id in `/proc/<pid>/stat` (the field after the state, after the last `)`).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let at = prefix.len()
        + super::digits::write_decimal(u32::try_from(pid).ok()?, &mut path[prefix.len()..]);
    path[at..at + 5].copy_from_slice(b"/stat");
    let mut stat = [0u8; 512];
    // SAFETY: open/read/close of a NUL-terminated stack path into a stack buffer.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let read = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        read
    };
    let stat = stat.get(..usize::try_from(read).ok()?)?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    // ") S PPID ..."
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|field| !field.is_empty());
    fields.next()?;
    parse_pid(fields.next()?)
}

/// The descriptor numbers a `Control` hands the child.
impl Control {
    pub(super) fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_of_this_process_is_read_from_proc() {
        // SAFETY (test): getpid/getppid have no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        assert_eq!(parent_of(me), Some(parent));
        assert_eq!(parse_pid(b"123\0"), Some(123));
        assert_eq!(parse_pid(b"self\0"), None);
        assert_eq!(parse_pid(b"\0"), None);
    }
}
