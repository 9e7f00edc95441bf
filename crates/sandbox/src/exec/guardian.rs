//! The guardian: a small bash process, started on the first command, that outlives a SIGKILL
//! of tollgate and then kills every process group tollgate had running. `PR_SET_PDEATHSIG`
//! reaches only each group's first process; what it forked (`sleep 60 & wait`, a pipeline)
//! is reparented to init and would run on. The guardian learns group ids on its stdin and
//! acts when that pipe closes, which the kernel does however tollgate ends.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// Reads `+ GROUP` / `- GROUP` lines; at end of input kills the groups still listed. It
/// ignores the signals a terminal or CI runner sends to a whole session, so it is still there
/// to clean up after them.
const SCRIPT: &str = r#"trap '' INT TERM HUP PIPE
declare -A live
while read -r op group; do
  [[ $group =~ ^[0-9]+$ ]] || continue
  case $op in
    +) live[$group]=1 ;;
    -) unset "live[$group]" ;;
  esac
done
for group in "${!live[@]}"; do kill -KILL -- "-$group" 2>/dev/null; done
"#;

/// `None` when the guardian could not be started: commands still run, tied to tollgate by
/// `PR_SET_PDEATHSIG` alone (a warning says so once).
static GUARDIAN: OnceLock<Option<Mutex<Guardian>>> = OnceLock::new();

struct Guardian {
    /// Kept, never waited for: the guardian ends after tollgate and is reaped by init.
    _process: Child,
    stdin: ChildStdin,
}

fn guardian() -> Option<&'static Mutex<Guardian>> {
    GUARDIAN
        .get_or_init(|| match start() {
            Ok(guardian) => Some(Mutex::new(guardian)),
            Err(err) => {
                tracing::warn!(
                    "cannot start the process guardian ({err}); a killed tollgate may leave its commands' children running"
                );
                None
            }
        })
        .as_ref()
}

fn start() -> std::io::Result<Guardian> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    // Its own group, so a signal to tollgate's group does not reach it; no secrets in its
    // environment; nothing inherited but the pipe (Rust opens every descriptor close-on-exec).
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(SCRIPT)
        .env_clear()
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin pipe"))?;
    Ok(Guardian {
        _process: child,
        stdin,
    })
}

/// The guardian's pipe, for a child to announce itself from `pre_exec` (started now if it
/// was not yet). A child announces its own group before `exec`, so no process of the group
/// exists unannounced, however early tollgate is killed.
pub(super) fn pipe() -> Option<RawFd> {
    let guardian = guardian()?.lock().ok()?;
    Some(guardian.stdin.as_raw_fd())
}

/// In the child, between fork and exec: writes `+ <own pid>` to the guardian's pipe. Only
/// system calls on a stack buffer; a line this short is written atomically, so it cannot
/// interleave with tollgate's own lines.
pub(super) fn announce_from_child(pipe: RawFd) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    announce(pipe, pid);
}

/// `+ <pid>`: from a child started without a fork (spawn.rs), which reads its own id with
/// the raw system call.
pub(super) fn announce(pipe: RawFd, pid: libc::pid_t) {
    write_line(pipe, b'+', pid);
}

/// Once the command's group is gone: `- <group>`. From a call's keeper, or from tollgate for
/// a command started without one.
pub(super) fn release(pipe: RawFd, group: libc::pid_t) {
    write_line(pipe, b'-', group);
}

fn write_line(pipe: RawFd, op: u8, pid: libc::pid_t) {
    let mut line = [0u8; 24];
    line[0] = op;
    line[1] = b' ';
    let count = super::digits::write_decimal(u32::try_from(pid).unwrap_or(0), &mut line[2..]);
    line[2 + count] = b'\n';
    // SAFETY: write(2) of our own stack buffer to a descriptor the parent keeps open; a
    // failure (the guardian is gone) leaves nothing to do.
    unsafe {
        libc::write(pipe, line.as_ptr().cast(), 3 + count);
    }
}
