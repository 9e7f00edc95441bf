//! The one process runner: every process tollgate starts (the model's Bash commands, hooks,
//! the task's checks, a batch's git) goes through [`run`]; a long-lived one (an MCP server)
//! through [`spawn_service`]. It owns process groups, the kill on timeout,
//! cancellation or drop, the bounded wait for pipes, the capture limit, the one `pre_exec`
//! block and the tie to tollgate's own life. It never decides whether something may run.

mod digits;
mod env;
mod guardian;
mod keeper;
mod service;
mod spawn;

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use env::{ChildEnv, RunEnv, seal_process_environment};
pub use service::{ServiceChild, ServiceExit, ServiceRequest, ServiceWatch, spawn_service};

/// A step run in the child between fork and exec, after the child is tied to tollgate's life
/// and before the program starts: the place an OS sandbox (Landlock, seccomp) restricts what
/// the command can do. It runs in a forked copy of a multi-threaded process, so it must only
/// make system calls on data prepared beforehand (no allocation, no locks); an `Err` stops
/// the command from starting and [`run`] returns that error.
pub type PreExecStep = Arc<dyn Fn() -> io::Result<()> + Send + Sync>;

/// Called with each complete output line (either stream) as it arrives; lines longer than
/// [`MAX_LINE_BYTES`] come in pieces. Must not block: the command's pipes wait on it.
pub type LineSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Output kept per stream unless a request asks for less; the rest is drained and counted.
pub const DEFAULT_CAPTURE_BYTES: usize = 1024 * 1024;

/// How long the output pipes may stay open after the command's process group was killed.
/// Only a process that escaped the group (`setsid`, a daemon) can hold them longer; its
/// output is then cut off rather than waited for without end.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// What to start and under which bounds.
pub struct ExecRequest {
    /// The program and its arguments; `argv[0]` is looked up in the child's `PATH`.
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment of the child: nothing of tollgate's own is inherited.
    pub env: ChildEnv,
    pub stdin: Stdin,
    pub timeout: Duration,
    pub capture: Capture,
    /// The sandbox hook; `None` runs the command unconfined.
    pub pre_exec: Option<PreExecStep>,
    pub reach: Reach,
}

/// What ending a command ends, which decides how it is started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reach {
    /// Everything the command started, processes that left its process group (`setsid`,
    /// daemons) included: a keeper per call, and so a `fork` of tollgate (two, with the
    /// keeper's own).
    #[default]
    Tree,
    /// Its process group: for tollgate's own programs that keep their children in their
    /// group (a batch's git, with hooks, the fsmonitor and the pager off). Started without
    /// copying tollgate (`spawn.rs`), as tied to its life as every command: PDEATHSIG and the
    /// guardian. With a sandbox step, without the guardian, or on a kernel without process
    /// descriptors (before 5.3) it is started as [`Reach::Tree`].
    Group,
}

impl ExecRequest {
    /// `bash -c script`, the form every command tollgate runs takes.
    pub fn bash(script: &str, cwd: PathBuf, env: ChildEnv, timeout: Duration) -> ExecRequest {
        ExecRequest {
            argv: vec!["bash".into(), "-c".into(), script.into()],
            cwd,
            env,
            stdin: Stdin::Null,
            timeout,
            capture: Capture::default(),
            pre_exec: None,
            reach: Reach::Tree,
        }
    }
}

pub enum Stdin {
    Null,
    /// Written from a task of its own, so a child that prints before it reads cannot
    /// deadlock on a full pipe; a child that never reads just closes the pipe.
    Bytes(Vec<u8>),
}

#[derive(Clone)]
pub struct Capture {
    /// Bytes kept per stream.
    pub max_bytes: usize,
    pub lines: Option<LineSink>,
}

impl Default for Capture {
    fn default() -> Self {
        Capture {
            max_bytes: DEFAULT_CAPTURE_BYTES,
            lines: None,
        }
    }
}

/// How a command ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself with this code.
    Exited(i32),
    /// A signal ended it (a sandbox limit, the kernel, another process).
    Signalled(i32),
    TimedOut,
    Cancelled,
}

impl Ending {
    fn of(status: std::process::ExitStatus) -> Ending {
        match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            // wait(2) without WUNTRACED reports no stopped child; should it, the command did
            // not exit by itself.
            (None, None) => Ending::Signalled(status.stopped_signal().unwrap_or_default()),
        }
    }
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    /// Bytes read beyond the capture limit (counted, not kept).
    pub dropped_bytes: usize,
    /// False when cut at the limit, on a read error, or still open when the grace ran out.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Runs the request to its end: exit, `timeout`, or `cancelled` resolving (dropping the
/// returned future cancels too). Whatever the command left running in its process group is
/// killed before this returns. `Err` only when the program could not be started.
pub async fn run(
    request: ExecRequest,
    cancelled: impl Future<Output = ()>,
) -> io::Result<ExecOutcome> {
    let ExecRequest {
        argv,
        cwd,
        env,
        stdin,
        timeout,
        capture,
        pre_exec,
        reach,
    } = request;
    let confined = pre_exec.is_some();
    let stdin = stdin_bytes(stdin);
    let Started {
        mut process,
        stdin: stdin_pipe,
        stdout,
        stderr,
    } = start(&argv, &cwd, &env, stdin.is_some(), pre_exec, reach)?;
    let (pid, started) = (process.id(), std::time::Instant::now());
    tracing::info!(pid, ?argv, cwd = %cwd.display(), confined, kept = process.is_kept(), "process started");
    let writer = match (stdin, stdin_pipe) {
        (Some(bytes), Some(mut pipe)) => Some(tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
        })),
        _ => None,
    };
    let (stop_reading, stop) = tokio::sync::watch::channel(false);
    let mut stdout = tokio::spawn(read_capped(stdout, capture.clone(), stop.clone()));
    let mut stderr = tokio::spawn(read_capped(stderr, capture, stop));
    let ending = tokio::select! {
        status = process.wait() => status.map(Ending::of),
        _ = tokio::time::sleep(timeout) => Ok(Ending::TimedOut),
        _ = cancelled => Ok(Ending::Cancelled),
    };
    tracing::info!(
        pid,
        ?ending,
        elapsed_ms = started.elapsed().as_millis(),
        "process ended"
    );
    // Nothing a command started outlives it, and its pipes close for the readers below.
    process.end();
    let ending = ending?;
    process.finish().await?;
    if let Some(writer) = writer {
        writer.abort();
    }
    // What was read is kept either way: past the grace the readers stop and return it,
    // marked incomplete.
    let streams = async { ((&mut stdout).await, (&mut stderr).await) };
    tokio::pin!(streams);
    let (stdout, stderr) = tokio::select! {
        both = &mut streams => both,
        _ = tokio::time::sleep(PIPE_GRACE) => {
            let _ = stop_reading.send(true);
            streams.await
        }
    };
    let (stdout, stderr) = (stdout.unwrap_or_default(), stderr.unwrap_or_default());
    Ok(ExecOutcome {
        ending,
        stdout,
        stderr,
    })
}

type Reader = Option<Pin<Box<dyn AsyncRead + Send>>>;
type Writer = Option<Pin<Box<dyn AsyncWrite + Send>>>;

/// A started command and tollgate's ends of its pipes.
struct Started {
    process: Process,
    stdin: Writer,
    stdout: Reader,
    stderr: Reader,
}

/// A started command, however it was started.
enum Process {
    /// Forked with its keeper: `child` is the keeper, `group` its control pipe. The killer is
    /// declared first so it is dropped first: a call dropped mid-run tells the keeper to end
    /// the command before the handle goes.
    Kept {
        group: GroupKiller,
        child: tokio::process::Child,
    },
    /// Started without a keeper (`spawn.rs`): tollgate ends the group itself.
    Grouped(spawn::GroupChild),
}

impl Process {
    fn id(&self) -> Option<u32> {
        match self {
            Process::Kept { child, .. } => child.id(),
            Process::Grouped(child) => Some(child.id()),
        }
    }

    fn is_kept(&self) -> bool {
        matches!(self, Process::Kept { .. })
    }

    /// Until the command's first process exits (for a kept command: until its keeper has
    /// ended the rest and exited as the command did).
    async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Process::Kept { child, .. } => child.wait().await,
            Process::Grouped(child) => child.wait().await,
        }
    }

    /// Kills what is left of the command.
    fn end(&mut self) {
        match self {
            Process::Kept { group, .. } => group.kill(),
            Process::Grouped(child) => child.end(),
        }
    }

    /// Waits, after [`Process::end`], until nothing of the command is left to reap.
    async fn finish(&mut self) -> io::Result<()> {
        match self {
            Process::Kept { child, .. } => wait_for_keeper(child).await.map(drop),
            Process::Grouped(child) => child.wait().await.map(drop),
        }
    }
}

/// Starts a command the way its reach and the machine allow (see [`Reach`]).
fn start(
    argv: &[OsString],
    cwd: &std::path::Path,
    env: &ChildEnv,
    piped_stdin: bool,
    pre_exec: Option<PreExecStep>,
    reach: Reach,
) -> io::Result<Started> {
    if reach == Reach::Group
        && pre_exec.is_none()
        && spawn::available()
        // Its pipes and process descriptor are watched by the runtime's reactor.
        && tokio::runtime::Handle::try_current().is_ok()
        && let Some(guardian) = guardian::pipe()
    {
        let input = if piped_stdin {
            spawn::Input::Piped
        } else {
            spawn::Input::Null
        };
        let spawned = spawn::spawn(argv, cwd, env, input, Some(guardian))?;
        let reader = |fd| -> io::Result<Reader> {
            Ok(Some(Box::pin(
                tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?,
            )))
        };
        let stdin = match spawned.stdin {
            Some(fd) => Some(Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)
                as Pin<Box<dyn AsyncWrite + Send>>),
            None => None,
        };
        return Ok(Started {
            stdin,
            stdout: reader(spawned.stdout)?,
            stderr: reader(spawned.stderr)?,
            process: Process::Grouped(spawned.child),
        });
    }
    let stdin = if piped_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let (mut cmd, control) = command(argv, cwd, env, stdin, pre_exec)?;
    let mut child = cmd.spawn()?;
    let group = GroupKiller::new(control);
    let stdin = child
        .stdin
        .take()
        .map(|pipe| Box::pin(pipe) as Pin<Box<dyn AsyncWrite + Send>>);
    let stdout = child
        .stdout
        .take()
        .map(|pipe| Box::pin(pipe) as Pin<Box<dyn AsyncRead + Send>>);
    let stderr = child
        .stderr
        .take()
        .map(|pipe| Box::pin(pipe) as Pin<Box<dyn AsyncRead + Send>>);
    Ok(Started {
        process: Process::Kept { group, child },
        stdin,
        stdout,
        stderr,
    })
}

/// How long a keeper may take to end its command once told; past it the keeper is killed
/// (what it had not yet ended then runs on without it).
const KEEPER_GRACE: Duration = Duration::from_secs(5);

/// Waits for the keeper (the started child) to exit after its command's end.
async fn wait_for_keeper(
    child: &mut tokio::process::Child,
) -> io::Result<std::process::ExitStatus> {
    match tokio::time::timeout(KEEPER_GRACE, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            child.start_kill()?;
            child.wait().await
        }
    }
}

/// The one way a child is set up: its exact environment, its keeper (which ends the command
/// and everything it left when the returned control pipe closes), its own process group, tied
/// to tollgate's life (PDEATHSIG, the guardian), then the sandbox step.
fn command(
    argv: &[OsString],
    cwd: &std::path::Path,
    env: &ChildEnv,
    stdin: Stdio,
    pre_exec: Option<PreExecStep>,
) -> io::Result<(tokio::process::Command, keeper::Control)> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.vars().iter().map(|(name, value)| (name, value)))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // Never: a killed keeper could not end what the command left running. Closing the
        // control pipe (the `GroupKiller`) is how a dropped call ends its command.
        .kill_on_drop(false);
    let parent = std::process::id();
    let guardian = guardian::pipe();
    let control = keeper::Control::new()?;
    let control_fd = control.read_fd();
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // (prctl, getppid, getpid, fork, write; the keeper's own are documented there) plus the
    // sandbox step, which is documented to do the same.
    unsafe {
        cmd.pre_exec(move || {
            tie_to_parent(parent)?;
            restore_file_size_signal();
            keeper::split(control_fd, guardian)?;
            match &pre_exec {
                Some(step) => step(),
                None => Ok(()),
            }
        });
    }
    Ok((cmd, control))
}

fn stdin_bytes(stdin: Stdin) -> Option<Vec<u8>> {
    match stdin {
        Stdin::Null => None,
        Stdin::Bytes(bytes) => Some(bytes),
    }
}

/// Makes a write over a file-size limit (`ulimit -f`) fail with EFBIG instead of killing
/// tollgate with SIGXFSZ: the failure then becomes an output failure (exit 5) with a whole
/// transcript, not a death with no record. Commands get the default back
/// ([`restore_file_size_signal`]), so the sandbox's file-size limit still ends them.
pub fn ignore_file_size_signal() {
    // SAFETY: sets one signal's disposition to "ignore"; no handler runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// In the child, before exec: an ignored signal stays ignored across exec, so SIGXFSZ gets
/// its default back.
fn restore_file_size_signal() {
    // SAFETY: signal() is async-signal-safe and sets one disposition.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
    }
}

/// In the child: die with tollgate. `PR_SET_PDEATHSIG` fires when the forking thread ends,
/// and tokio's worker threads live as long as the runtime, which is the process's life. If
/// tollgate died before the prctl took effect, the child was already reparented: give up.
fn tie_to_parent(parent: u32) -> io::Result<()> {
    // SAFETY: plain system calls on integers.
    let tied = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if tied != 0 {
        return Err(io::Error::last_os_error());
    }
    let now = unsafe { libc::getppid() };
    if u32::try_from(now).ok() != Some(parent) {
        return Err(io::Error::other(
            "tollgate exited while the command was starting",
        ));
    }
    Ok(())
}

/// Ends the command once, through its keeper: explicitly when the call ends, or on drop.
/// Closing the control pipe makes the keeper kill the command's group and every process
/// reparented to it, then exit. The command announced its group to the [`guardian`] before
/// exec, so a SIGKILL of tollgate kills it as well; the keeper withdraws it.
struct GroupKiller(Option<keeper::Control>);

impl GroupKiller {
    fn new(control: keeper::Control) -> GroupKiller {
        GroupKiller(Some(control))
    }

    fn kill(&mut self) {
        self.0.take();
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Pieces an endless line is sent in, so it cannot grow a buffer without bound.
pub const MAX_LINE_BYTES: usize = 4096;

async fn read_capped<R: AsyncRead + Unpin>(
    stream: Option<R>,
    capture: Capture,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Captured {
    let Some(mut stream) = stream else {
        return Captured::default();
    };
    let mut kept = Vec::new();
    let mut dropped_bytes = 0usize;
    let mut complete = true;
    let mut buffer = [0u8; 8192];
    let mut lines = capture.lines.map(|sink| LineSplitter {
        sink,
        partial: Vec::new(),
    });
    loop {
        let read = tokio::select! {
            read = stream.read(&mut buffer) => read,
            _ = stop.wait_for(|stop| *stop) => {
                complete = false;
                break;
            }
        };
        match read {
            Ok(0) => break,
            Err(_) => {
                complete = false;
                break;
            }
            Ok(n) => {
                if let Some(lines) = &mut lines {
                    lines.feed(&buffer[..n]);
                }
                let room = capture.max_bytes.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                dropped_bytes += n.saturating_sub(room);
            }
        }
    }
    if let Some(lines) = &mut lines {
        lines.finish();
    }
    Captured {
        text: String::from_utf8_lossy(&kept).into_owned(),
        complete: complete && dropped_bytes == 0,
        dropped_bytes,
    }
}

struct LineSplitter {
    sink: LineSink,
    partial: Vec<u8>,
}

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                self.send();
            } else {
                self.partial.push(byte);
                if self.partial.len() >= MAX_LINE_BYTES {
                    self.send();
                }
            }
        }
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.send();
        }
    }

    fn send(&mut self) {
        let line = String::from_utf8_lossy(&self.partial);
        (self.sink)(line.trim_end_matches('\r'));
        self.partial.clear();
    }
}

#[cfg(test)]
mod tests;
