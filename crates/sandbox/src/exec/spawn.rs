//! Starting a program without copying tollgate, for its own short-lived helpers (a batch's
//! git): `clone` with the address space shared and the calling thread stopped until the
//! program is `exec`ed — what glibc's `posix_spawn` does — with the steps that tie the program
//! to tollgate's life done in between: a process group of its own, `PR_SET_PDEATHSIG`
//! (SIGKILL) and a check that tollgate is still its parent, its group announced to the
//! guardian. A `fork` copies tollgate's page tables and turns each page tollgate writes next
//! into a copy-on-write fault; with a keeper it is two forks per command (benches/README.md,
//! issue 51). This copies nothing.
//!
//! What it has no room for is a keeper, so nothing ends a process that left the program's
//! group: it is for programs tollgate trusts to keep their children in their group (its own
//! git, with hooks, the fsmonitor and the pager off), never for the model's commands, hooks or
//! checks. When the group's time is up (the first process exited, the call timed out, was
//! cancelled or dropped) tollgate kills the group itself, before it reaps the first process,
//! so the group's id cannot have been reused; a SIGKILL of tollgate reaches the first process
//! through PDEATHSIG and the rest of its group through the guardian.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::unix::AsyncFd;

use super::env::ChildEnv;

/// The program's stdin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Input {
    Null,
    Piped,
}

/// A started program: its process and tollgate's ends of its pipes.
pub(super) struct Spawned {
    pub(super) child: GroupChild,
    pub(super) stdin: Option<OwnedFd>,
    pub(super) stdout: OwnedFd,
    pub(super) stderr: OwnedFd,
}

/// Whether this kernel gives process descriptors (Linux 5.3): the wait for the program is a
/// poll on one, so that tollgate can kill the group before reaping its first process. Without
/// them commands are forked with a keeper, as every other command is.
pub(super) fn available() -> bool {
    static PIDFDS: OnceLock<bool> = OnceLock::new();
    *PIDFDS.get_or_init(|| {
        // SAFETY: pidfd_open(2) of this very process; a descriptor it returns is closed here.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
            match libc::c_int::try_from(fd) {
                Ok(fd) if fd >= 0 => {
                    libc::close(fd);
                    true
                }
                _ => false,
            }
        }
    })
}

/// The step of the child's way to `exec` that failed, told to the parent through the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
enum Step {
    Group = 1,
    Tie,
    Orphaned,
    Stdio,
    Cwd,
    Exec,
}

impl Step {
    fn of(value: i32) -> Option<Step> {
        [
            Step::Group,
            Step::Tie,
            Step::Orphaned,
            Step::Stdio,
            Step::Cwd,
            Step::Exec,
        ]
        .into_iter()
        .find(|step| *step as i32 == value)
    }
}

/// Everything the child reads, made before the clone: between the clone and `exec` the child
/// runs in tollgate's memory while tollgate's other threads go on, so it may not allocate,
/// take a lock, or touch anything but this and its own stack.
struct Plan {
    /// Where `argv[0]` may be, in `PATH` order (`execvp`'s search, done here because the
    /// child cannot build strings).
    programs: Vec<CString>,
    /// NULL-terminated pointers into `_args` and `_vars`, which own the strings.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _args: Vec<CString>,
    _vars: Vec<CString>,
    cwd: CString,
    /// The descriptors that become 0, 1 and 2; each above 2, so no `dup2` overwrites another.
    stdio: [RawFd; 3],
    parent: libc::pid_t,
    guardian: Option<RawFd>,
    /// Written by the child when a step failed (then it exits): the step and its errno.
    failed_step: AtomicI32,
    failed_errno: AtomicI32,
}

/// Starts `argv` in `cwd` with exactly `env`, its stdout and stderr piped, its group
/// announced on `guardian`. `Err` when the program could not be started (nothing runs then).
pub(super) fn spawn(
    argv: &[OsString],
    cwd: &Path,
    env: &ChildEnv,
    input: Input,
    guardian: Option<RawFd>,
) -> io::Result<Spawned> {
    let Some(program) = argv.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    };
    let args = argv
        .iter()
        .map(|arg| c_string(arg.as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let vars = env
        .vars()
        .iter()
        .map(|(name, value)| {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            c_string(&pair)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let (stdin_child, stdin) = match input {
        Input::Null => (open_null()?, None),
        Input::Piped => {
            let (read, write) = pipe()?;
            (read, Some(write))
        }
    };
    let (stdout, stdout_child) = pipe()?;
    let (stderr, stderr_child) = pipe()?;
    let child_ends = [
        above_stdio(stdin_child)?,
        above_stdio(stdout_child)?,
        above_stdio(stderr_child)?,
    ];
    let plan = Plan {
        programs: candidates(program, env.get("PATH"))?,
        argv: pointers(&args),
        envp: pointers(&vars),
        _args: args,
        _vars: vars,
        cwd: c_string(cwd.as_os_str().as_bytes())?,
        stdio: child_ends.each_ref().map(AsRawFd::as_raw_fd),
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        guardian,
        failed_step: AtomicI32::new(0),
        failed_errno: AtomicI32::new(0),
    };
    let (pid, pidfd) = clone_child(&plan)?;
    // The child has exec'ed or exited: its ends of the pipes are its own now.
    drop(child_ends);
    if let Some(step) = Step::of(plan.failed_step.load(Ordering::Acquire)) {
        let errno = plan.failed_errno.load(Ordering::Relaxed);
        // It exited; reaping it cannot wait.
        reap_blocking(pid);
        drop(pidfd);
        return Err(error_of(step, errno, program, cwd));
    }
    Ok(Spawned {
        child: GroupChild::new(pid, pidfd, guardian)?,
        stdin,
        stdout,
        stderr,
    })
}

/// Bytes of the child's stack: it runs `steps` and the C library's system-call wrappers,
/// nothing that recurses or keeps large buffers.
const STACK_BYTES: usize = 64 * 1024;

/// The clone itself; returns the child's pid and process descriptor once it has exec'ed or
/// exited.
fn clone_child(plan: &Plan) -> io::Result<(libc::pid_t, OwnedFd)> {
    let stack = Stack::new()?;
    let mut pidfd: libc::c_int = -1;
    // SAFETY: every signal is blocked in this thread across the clone, so the child starts
    // with all blocked and runs no handler of tollgate's before `steps` resets them; the mask
    // is restored before returning. The child runs `start` on `stack` (mapped below, unmapped
    // only after the clone returned, which with CLONE_VFORK is after the child exec'ed or
    // exited) and reads `plan`, which outlives this call. CLONE_PIDFD stores a new descriptor
    // in `pidfd`, owned here from then on.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        let pid = libc::clone(
            start,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::from_ref(plan).cast_mut().cast(),
            &mut pidfd as *mut libc::c_int,
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        if pid < 0 {
            return Err(error);
        }
        if pidfd < 0 {
            // A kernel that ignored CLONE_PIDFD: `available` said it has them, so this is
            // not expected; the child is killed rather than left unwatched.
            libc::kill(pid, libc::SIGKILL);
            reap_blocking(pid);
            return Err(io::Error::other("the kernel gave no process descriptor"));
        }
        Ok((pid, OwnedFd::from_raw_fd(pidfd)))
    }
}

/// The child's stack: its own mapping with an inaccessible page below it, so an overflow
/// faults instead of writing over tollgate's memory.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(4096);
        let len = STACK_BYTES + page;
        // SAFETY: a fresh anonymous private mapping, owned by the returned `Stack`; the guard
        // page is its lowest page.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Stack { base, len };
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The highest address, where a downward-growing stack starts; page-aligned, so aligned
    /// as every ABI wants.
    fn top(&self) -> *mut libc::c_void {
        self.base.wrapping_byte_add(self.len)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no child runs on it any more.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// The child's entry point.
extern "C" fn start(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` is the `Plan` `clone_child` was given, alive until the clone returns,
    // which is after this child exec'ed or exited; this is the child `steps` expects.
    unsafe { steps(&*plan.cast_const().cast::<Plan>()) }
}

/// The child's way to `exec`, in the order the forked path takes (`command` and the keeper):
/// its own group, tied to tollgate's life, announced to the guardian, then the program.
///
/// # Safety
///
/// Only in the child `clone_child` made: it shares tollgate's memory, so it makes system
/// calls on `plan` and its own stack and nothing else (no allocation, no lock, no panic).
unsafe fn steps(plan: &Plan) -> ! {
    // SAFETY: system calls on integers, on `plan`'s strings and on stack values.
    unsafe {
        // Its own group first, so the group exists before it is announced.
        if libc::setpgid(0, 0) != 0 {
            fail(plan, Step::Group, errno());
        }
        // PR_SET_PDEATHSIG fires when the thread that cloned this child ends: as for the
        // forked path, a tokio worker or the thread that blocks on the runtime, which live as
        // long as tollgate does.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            fail(plan, Step::Tie, errno());
        }
        // tollgate died before the prctl took effect: this child was reparented already.
        if libc::getppid() != plan.parent {
            fail(plan, Step::Orphaned, 0);
        }
        if let Some(pipe) = plan.guardian {
            // The raw system call: a C library that caches its pid would give tollgate's.
            let pid = libc::syscall(libc::SYS_getpid) as libc::pid_t;
            super::guardian::announce(pipe, pid);
        }
        default_signals();
        for (fd, target) in plan.stdio.into_iter().zip(0..) {
            if libc::dup2(fd, target) < 0 {
                fail(plan, Step::Stdio, errno());
            }
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(plan, Step::Cwd, errno());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // execvp's search: a candidate that is not there is passed over, one that may not
        // be run is remembered and passed over, any other failure ends the search.
        let mut denied = false;
        let mut last = libc::ENOENT;
        for program in &plan.programs {
            libc::execve(program.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            last = errno();
            match last {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => break,
            }
        }
        let not_there = matches!(
            last,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT
        );
        fail(
            plan,
            Step::Exec,
            if denied && not_there {
                libc::EACCES
            } else {
                last
            },
        )
    }
}

/// In the child: a handler is tollgate's code, and one run here, on memory shared with
/// tollgate, could corrupt it before `exec` would have reset it. So every handled signal goes
/// back to its default before signals are unblocked, as do SIGPIPE and SIGXFSZ, which
/// tollgate ignores and a command gets with their defaults (as the forked path gives them).
/// The C library's two internal signals cannot be changed here; they are sent to tollgate's
/// threads only, never to this process.
///
/// # Safety
///
/// As [`steps`].
unsafe fn default_signals() {
    // SAFETY: sigaction(2) on stack values.
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            let ignored_by_tollgate = old.sa_sigaction == libc::SIG_IGN
                && (signal == libc::SIGPIPE || signal == libc::SIGXFSZ);
            if handled || ignored_by_tollgate {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

/// In the child: tells the parent what failed and exits.
fn fail(plan: &Plan, step: Step, errno: i32) -> ! {
    plan.failed_errno.store(errno, Ordering::Relaxed);
    plan.failed_step.store(step as i32, Ordering::Release);
    // SAFETY: _exit(2) ends this child only (it is a process of its own) and does not return.
    unsafe { libc::_exit(127) }
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno slot (in the child, the thread stopped in `clone`,
    // which reads nothing from it until the child is gone).
    unsafe { *libc::__errno_location() }
}

fn error_of(step: Step, errno: i32, program: &OsStr, cwd: &Path) -> io::Error {
    let os = io::Error::from_raw_os_error(errno);
    match step {
        // As the forked path says it: the program's own error, for the caller to frame.
        Step::Exec => os,
        Step::Orphaned => io::Error::other("tollgate exited while the command was starting"),
        Step::Cwd => io::Error::new(
            os.kind(),
            format!("cannot enter {} to run it: {os}", cwd.display()),
        ),
        Step::Group | Step::Tie | Step::Stdio => io::Error::new(
            os.kind(),
            format!(
                "cannot start {}: {}: {os}",
                program.to_string_lossy(),
                match step {
                    Step::Group => "its own process group",
                    Step::Tie => "the tie to tollgate's life",
                    _ => "its standard streams",
                }
            ),
        ),
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a program's argument, variable or folder holds a NUL byte",
        )
    })
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|string| string.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Where `execvp` would look for `program`: itself when it names a path, else each folder of
/// the child's `PATH` (an empty entry is the working folder), or of the C library's default
/// when it has none.
fn candidates(program: &OsStr, path: Option<&OsStr>) -> io::Result<Vec<CString>> {
    let name = program.as_bytes();
    if name.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "an empty program name",
        ));
    }
    if name.contains(&b'/') {
        return Ok(vec![c_string(name)?]);
    }
    let folders = path.map_or(&b"/bin:/usr/bin"[..], OsStr::as_bytes);
    folders
        .split(|&byte| byte == b':')
        .map(|folder| {
            let mut candidate = if folder.is_empty() {
                b".".to_vec()
            } else {
                folder.to_vec()
            };
            candidate.push(b'/');
            candidate.extend_from_slice(name);
            c_string(&candidate)
        })
        .collect()
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn open_null() -> io::Result<OwnedFd> {
    // SAFETY: open(2) of a constant path; the descriptor is owned from here on.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fd` moved above 2 when tollgate runs with a standard stream closed and the kernel handed
/// out 0, 1 or 2: the child's `dup2`s onto 0, 1 and 2 must not overwrite a source.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl(2) duplicates a descriptor we own into a new one we then own.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

/// Reaps `pid`, which has exited or was killed (waitpid(2) on our own child).
fn reap_blocking(pid: libc::pid_t) -> Option<ExitStatus> {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid(2) of our own child into a stack integer.
        let reaped = unsafe { libc::waitpid(pid, &mut raw, 0) };
        if reaped == pid {
            return Some(ExitStatus::from_raw(raw));
        }
        if reaped < 0 && errno() == libc::EINTR {
            continue;
        }
        return None;
    }
}

/// Whether our child `pid` has exited, leaving it unreaped (waitid(2) with WNOWAIT).
fn has_exited(pid: libc::pid_t) -> io::Result<bool> {
    let id = libc::id_t::try_from(pid).map_err(|_| io::Error::other("a negative process id"))?;
    // SAFETY: waitid(2) of our own child into a zeroed siginfo we own; `si_pid` is the field
    // waitid fills (zero when nothing has exited).
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let options = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, id, &mut info, options) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.si_pid() != 0)
    }
}

/// A program started by [`spawn`]: its first process (the group leader) and its group.
pub(super) struct GroupChild {
    pid: libc::pid_t,
    /// Readable once the first process has exited; `None` only after a drop handed it on.
    exited: Option<AsyncFd<OwnedFd>>,
    guardian: Option<RawFd>,
    /// The group was killed and withdrawn from the guardian.
    ended: bool,
    status: Option<ExitStatus>,
}

impl GroupChild {
    fn new(pid: libc::pid_t, pidfd: OwnedFd, guardian: Option<RawFd>) -> io::Result<GroupChild> {
        let mut child = GroupChild {
            pid,
            exited: None,
            guardian,
            ended: false,
            status: None,
        };
        // On an error `child` is dropped, which kills and reaps the program.
        // SAFETY: the `AsyncFd` owns `pidfd`, an open descriptor whose `as_raw_fd` is the
        // same number for as long as it lives.
        let registered =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        child.exited = Some(registered.map_err(io::Error::from)?);
        Ok(child)
    }

    pub(super) fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Waits for the first process to exit, then kills what is left of its group and reaps
    /// it. Cancel-safe: dropped before the exit, nothing has changed.
    pub(super) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        if let Some(exited) = &self.exited {
            loop {
                let mut ready = exited.readable().await?;
                if has_exited(self.pid)? {
                    break;
                }
                ready.clear_ready();
            }
        }
        self.end();
        let status = reap_blocking(self.pid).ok_or_else(io::Error::last_os_error)?;
        self.status = Some(status);
        Ok(status)
    }

    /// SIGKILLs the group and withdraws it from the guardian, once. The first process is not
    /// reaped before this, so the group's id is still the group's.
    pub(super) fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        // SAFETY: killpg(2) of the group this child leads.
        unsafe {
            libc::killpg(self.pid, libc::SIGKILL);
        }
        if let Some(pipe) = self.guardian {
            super::guardian::release(pipe, self.pid);
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.end();
        let pid = self.pid;
        let mut raw = 0;
        // SAFETY: waitpid(2) of our own child, without waiting.
        if unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG) } != 0 {
            return;
        }
        // Killed but not yet gone (the kernel finishes a system call first): reaped by a task
        // once it is, so a dropped call does not block its thread.
        match (tokio::runtime::Handle::try_current(), self.exited.take()) {
            (Ok(runtime), Some(exited)) => {
                runtime.spawn(async move {
                    let _ = exited.readable().await;
                    reap_blocking(pid);
                });
            }
            _ => {
                reap_blocking(pid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_looked_for_as_execvp_looks() {
        let path = OsStr::new("/usr/local/bin::/bin");
        let found: Vec<CString> = candidates(OsStr::new("git"), Some(path)).unwrap();
        assert_eq!(
            found,
            [c"/usr/local/bin/git", c"./git", c"/bin/git"].map(CString::from)
        );
        assert_eq!(
            candidates(OsStr::new("./run.sh"), Some(path)).unwrap(),
            [CString::from(c"./run.sh")]
        );
        assert_eq!(
            candidates(OsStr::new("git"), None).unwrap(),
            [c"/bin/git", c"/usr/bin/git"].map(CString::from)
        );
        assert!(candidates(OsStr::new(""), Some(path)).is_err());
        assert!(candidates(OsStr::new("a\0b"), Some(path)).is_err());
    }

    #[test]
    fn every_step_is_told_back_by_its_number() {
        for step in [
            Step::Group,
            Step::Tie,
            Step::Orphaned,
            Step::Stdio,
            Step::Cwd,
            Step::Exec,
        ] {
            assert_eq!(Step::of(step as i32), Some(step));
        }
        assert_eq!(Step::of(0), None);
    }
}
