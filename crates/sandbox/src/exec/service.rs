//! Long-lived children (an MCP server): started exactly as every command is (own process
//! group, exact environment, PDEATHSIG and the guardian, the sandbox step), with stdin and
//! stdout handed to the caller and stderr drained into a short tail for error messages. The
//! whole group is killed when the child's first process exits, on [`ServiceChild::terminate`],
//! or when the handle is dropped, so nothing a server started outlives it or the run.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{oneshot, watch};

use super::{ChildEnv, GroupKiller, PreExecStep, command};

/// Lines of stderr kept (the last ones), and the characters kept of each.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_LINE_CHARS: usize = 512;

pub struct ServiceRequest {
    /// The program and its arguments; `argv[0]` is looked up in the child's `PATH`.
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment of the child: nothing of tollgate's own is inherited.
    pub env: ChildEnv,
    /// The sandbox hook; `None` runs the child unconfined.
    pub pre_exec: Option<PreExecStep>,
}

/// How a service ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceExit {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ServiceExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exited with code {code}"),
            (None, Some(signal)) => write!(f, "killed by signal {signal}"),
            (None, None) => f.write_str("ended"),
        }
    }
}

/// A running service. Its pipes are the caller's; the process group is the handle's.
pub struct ServiceChild {
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    /// The first process's id, which is also its process group's.
    pub pid: u32,
    watch: ServiceWatch,
    /// Sending (or dropping) it kills the group.
    stop: Option<oneshot::Sender<()>>,
}

/// What others may know of a running service: whether and how it ended, and its stderr tail.
/// Cheap to clone.
#[derive(Clone)]
pub struct ServiceWatch {
    exit: watch::Receiver<Option<ServiceExit>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// Starts `request`. `Err` only when the program could not be started (or the sandbox step
/// refused it).
pub fn spawn_service(request: ServiceRequest) -> io::Result<ServiceChild> {
    let ServiceRequest {
        argv,
        cwd,
        env,
        pre_exec,
    } = request;
    let (mut cmd, control) = command(&argv, &cwd, &env, Stdio::piped(), pre_exec)?;
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the service exited before it could be watched"))?;
    tracing::info!(pid, ?argv, "service process started");
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let reader = child
        .stderr
        .take()
        .map(|pipe| tokio::spawn(keep_tail(pipe, stderr.clone())));
    let (exit_tx, exit) = watch::channel(None);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        // Owned here with the child: if the runtime drops this task, the drop kills the group.
        let mut group = GroupKiller::new(control);
        let status = tokio::select! {
            status = child.wait() => status,
            _ = stopped => {
                group.kill();
                super::wait_for_keeper(&mut child).await
            }
        };
        // The first process is gone, and its keeper ended whatever it left.
        group.kill();
        // Its last words, before anyone hears that it ended; bounded, since a process that
        // left the group may hold the pipe open.
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(super::PIPE_GRACE, reader).await;
        }
        let ended = match status {
            Ok(status) => ServiceExit {
                code: status.code(),
                signal: status.signal(),
            },
            Err(_) => ServiceExit {
                code: None,
                signal: None,
            },
        };
        tracing::info!(
            pid,
            code = ended.code,
            signal = ended.signal,
            "service process ended"
        );
        let _ = exit_tx.send(Some(ended));
    });
    Ok(ServiceChild {
        stdin,
        stdout,
        pid,
        watch: ServiceWatch { exit, stderr },
        stop: Some(stop),
    })
}

impl ServiceChild {
    pub fn watch(&self) -> ServiceWatch {
        self.watch.clone()
    }

    /// Ends the service: its stdin is closed (the MCP way to ask a stdio server to stop), and
    /// after `grace` the whole group is killed. Bounded by `grace` plus the reaping.
    pub async fn terminate(&mut self, grace: Duration) -> ServiceExit {
        self.stdin = None;
        let ended = self.watch.ended();
        tokio::pin!(ended);
        if let Ok(exit) = tokio::time::timeout(grace, &mut ended).await {
            return exit;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        ended.await
    }
}

impl ServiceWatch {
    /// How it ended, once it has.
    pub fn exit(&self) -> Option<ServiceExit> {
        *self.exit.borrow()
    }

    /// Resolves when the service has ended (at once if it already has).
    pub fn ended(&self) -> impl std::future::Future<Output = ServiceExit> + Send + 'static {
        let mut exit = self.exit.clone();
        async move {
            loop {
                if let Some(ended) = *exit.borrow_and_update() {
                    return ended;
                }
                if exit.changed().await.is_err() {
                    return ServiceExit {
                        code: None,
                        signal: None,
                    };
                }
            }
        }
    }

    /// The last lines it wrote to stderr, oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

/// Keeps the last lines of `pipe`; a line longer than [`super::MAX_LINE_BYTES`] arrives in
/// pieces, so a server that never writes a newline cannot grow memory.
async fn keep_tail<R: AsyncRead + Unpin>(mut pipe: R, tail: Arc<Mutex<VecDeque<String>>>) {
    let sink: super::LineSink = Arc::new(move |line: &str| {
        let cut: String = line.chars().take(STDERR_LINE_CHARS).collect();
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(cut.trim_end().to_string());
    });
    let mut lines = super::LineSplitter {
        sink,
        partial: Vec::new(),
    };
    let mut buffer = [0u8; 8192];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        lines.feed(&buffer[..read]);
    }
    lines.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunEnv;

    fn bash(script: &str, dir: &std::path::Path) -> ServiceRequest {
        ServiceRequest {
            argv: vec!["bash".into(), "-c".into(), script.into()],
            cwd: dir.to_path_buf(),
            env: RunEnv::new(&Default::default()).hooks,
            pre_exec: None,
        }
    }

    fn alive(pid: u32) -> bool {
        // A zombie is dead for this purpose: it runs nothing.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    }

    /// A killed process leaves /proc a moment after the signal: bounded polling.
    async fn gone(pid: u32) -> bool {
        for _ in 0..500 {
            if !alive(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn terminate_kills_the_group_and_a_grandchild_that_ignores_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn_service(bash(
            "sleep 300 & echo $! > grandchild; echo started >&2; sleep 300",
            dir.path(),
        ))
        .unwrap();
        let grandchild_file = dir.path().join("grandchild");
        let grandchild: u32 = loop {
            if let Ok(text) = std::fs::read_to_string(&grandchild_file)
                && let Ok(pid) = text.trim().parse()
            {
                break pid;
            }
            tokio::task::yield_now().await;
        };
        assert!(alive(grandchild));
        let exit = child.terminate(Duration::from_millis(100)).await;
        assert_eq!(exit.signal, Some(libc::SIGKILL), "{exit:?}");
        assert!(gone(child.pid).await);
        assert!(
            gone(grandchild).await,
            "the grandchild outlived the service"
        );
        assert_eq!(child.watch().stderr_tail(), ["started"]);
    }

    #[tokio::test]
    async fn a_service_that_exits_is_seen_and_its_group_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let child =
            spawn_service(bash("sleep 300 & echo $! > grandchild; exit 7", dir.path())).unwrap();
        let exit = child.watch().ended().await;
        assert_eq!(exit.code, Some(7));
        assert_eq!(child.watch().exit(), Some(exit));
        let grandchild: u32 = std::fs::read_to_string(dir.path().join("grandchild"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            gone(grandchild).await,
            "the grandchild outlived the service"
        );
    }

    #[tokio::test]
    async fn a_stderr_line_without_end_is_kept_in_bounded_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let child = spawn_service(bash(
            "head -c 100000 /dev/zero | tr '\\0' x >&2; echo >&2; echo last >&2",
            dir.path(),
        ))
        .unwrap();
        child.watch().ended().await;
        let tail = child.watch().stderr_tail();
        assert_eq!(tail.len(), STDERR_TAIL_LINES);
        assert!(tail.iter().all(|line| line.len() <= STDERR_LINE_CHARS));
        assert_eq!(tail.last().unwrap(), "last");
    }

    #[tokio::test]
    async fn an_empty_argv_or_a_missing_program_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut request = bash("true", dir.path());
        request.argv = vec!["/nonexistent/tollgate-no-such-program".into()];
        assert!(spawn_service(request).is_err());
    }
}
