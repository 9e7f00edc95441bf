//! Running one hook command: `bash -c` in its own process group, the JSON input on stdin,
//! stdout and stderr captured apart; on timeout or abort the whole group is killed.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::base::AbortSignal;

/// Output kept per stream. A hook's answer is a small JSON object; anything longer is a bug
/// in the hook, and is reported as such rather than parsed from a cut-off prefix.
const CAPTURE_BYTES: usize = 1024 * 1024;

/// How long the output pipes may stay open after the hook's process group was killed. Only a
/// process that escaped the group (setsid) can hold them longer; the hook's answer is then
/// incomplete, which is an error rather than a wait without end.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// `code` is `None` when `signal` ended it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    TimedOut,
    Aborted,
}

/// One captured stream. `complete` is false when it was cut at [`CAPTURE_BYTES`] or still
/// open when the grace ran out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Captured {
    pub text: String,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProcessRun {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// What a hook process needs besides its command.
pub(super) struct Invocation<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: &'a [(&'a str, &'a str)],
    pub stdin: Vec<u8>,
    pub timeout: Duration,
}

/// Runs the hook to its end. `Err` only when bash could not be started.
pub(super) async fn run_process(
    invocation: Invocation<'_>,
    abort: &AbortSignal,
) -> std::io::Result<ProcessRun> {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(invocation.command)
        .current_dir(invocation.cwd)
        .envs(invocation.env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    // Declared after `child`, so if this future is dropped mid-run (the caller was cancelled)
    // the group is killed before the child is, while its id is still reserved.
    let mut group = GroupKiller(child.id());
    // Written from its own task so a hook that prints before it reads cannot deadlock us on a
    // full pipe; a hook that never reads its input just closes the pipe (the error is moot).
    let stdin = child.stdin.take();
    let payload = invocation.stdin;
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&payload).await;
        }
    });
    let mut stdout = tokio::spawn(read_capped(child.stdout.take()));
    let mut stderr = tokio::spawn(read_capped(child.stderr.take()));
    let ending = tokio::select! {
        status = child.wait() => status.map(|status| Ending::Exited {
            code: status.code(),
            signal: status.signal(),
        }),
        _ = tokio::time::sleep(invocation.timeout) => Ok(Ending::TimedOut),
        _ = abort.aborted() => Ok(Ending::Aborted),
    };
    // Whatever the hook left running goes too, so nothing it started outlives its answer and
    // its pipes close for the readers below.
    group.kill();
    let ending = ending?;
    child.wait().await?;
    writer.abort();
    let streams = tokio::time::timeout(OUTPUT_GRACE, async {
        ((&mut stdout).await, (&mut stderr).await)
    })
    .await;
    let (stdout, stderr) = match streams {
        Ok((out, err)) => (out.unwrap_or_default(), err.unwrap_or_default()),
        Err(_) => {
            stdout.abort();
            stderr.abort();
            (Captured::default(), Captured::default())
        }
    };
    Ok(ProcessRun {
        ending,
        stdout,
        stderr,
    })
}

/// Kills the hook's process group once: explicitly when the hook ends, or on drop.
struct GroupKiller(Option<u32>);

impl GroupKiller {
    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            kill_group(group);
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_group(group: u32) {
    let Ok(pid) = libc::pid_t::try_from(group) else {
        return;
    };
    // SAFETY: killpg only sends a signal. The group id stays reserved while any process of the
    // group lives, so it names the hook's group or, once all of them are gone, nothing; the
    // id could only be reused after the leader is reaped and the group is empty (the same
    // window `tools::run_shell` accepts).
    unsafe {
        libc::killpg(pid, libc::SIGKILL);
    }
}

async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>) -> Captured {
    let Some(mut stream) = stream else {
        return Captured::default();
    };
    let mut kept = Vec::new();
    let mut complete = true;
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => break,
            Err(_) => {
                complete = false;
                break;
            }
            Ok(n) => {
                let room = CAPTURE_BYTES.saturating_sub(kept.len());
                if n > room {
                    complete = false;
                }
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    Captured {
        text: String::from_utf8_lossy(&kept).into_owned(),
        complete,
    }
}
