//! The model's shell commands: `bash -c` in a folder through the one process runner
//! (`exec`), its two streams joined into the text the model reads.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use super::git_env::{git_env, trusted_git_env};
use super::progress::ProgressSink;
use crate::base::AbortSignal;
use crate::exec::{self, ChildEnv, Ending, ExecRequest};
use crate::sandbox::{LimitHit, Sandbox, Violation};

/// Output kept per stream of a model's command; the rest is drained and counted (a note says
/// how much). Large, because Bash's output is kept whole and offloaded to a file when long
/// (S8): a 1 MB build log must survive intact.
pub const CAPTURE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEnding {
    /// Exit code, or `None` when a signal ended it.
    Exited(Option<i32>),
    TimedOut,
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRun {
    pub ending: ShellEnding,
    /// stdout then stderr.
    pub output: String,
    /// The sandbox limit the command ran into, if any.
    pub limit: Option<LimitHit>,
    /// Protected files the sandboxed command changed, put back after it ended.
    pub violations: Vec<Violation>,
}

/// The environment of the model's commands run in `workdir`: `base` (no secrets, no
/// start-up hijacks, no inherited `GIT_CONFIG*`) with git confined to the workspace's
/// repository (`git_env`).
pub fn model_command_env(base: &ChildEnv, workdir: &Path) -> ChildEnv {
    let git = git_env(workdir);
    let mut env = base.without(git.remove);
    for (name, value) in git.set {
        env = env.with(name, value);
    }
    env
}

/// The environment a shell command starts with, and whose command it is.
#[derive(Debug, Clone, Copy)]
pub enum ShellEnv<'a> {
    /// The model's: exactly this (the run built it without secrets, git confined); in the
    /// sandbox, the sandbox's scrubbed environment with git confined to the workspace's
    /// repository.
    Model(&'a ChildEnv),
    /// The task author's checks: this, or in the sandbox the sandbox's environment; either
    /// way with git on the trusted side's config (`trusted_git_env`).
    Author(&'a ChildEnv),
}

/// Runs `command`. `Err` only when bash could not be started, or a `sandbox` could not be
/// prepared for it (nothing runs unconfined then). Each complete output line also goes to
/// `progress` as it arrives; the captured output is the same either way.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    abort: &AbortSignal,
    env: ShellEnv<'_>,
    progress: Option<&ProgressSink>,
    sandbox: Option<&Sandbox>,
) -> std::io::Result<ShellRun> {
    let given = match env {
        ShellEnv::Model(env) => env.clone(),
        ShellEnv::Author(env) => trusted_git_env(env),
    };
    let mut request = ExecRequest::bash(command, cwd.to_path_buf(), given, timeout);
    request.capture.max_bytes = CAPTURE_BYTES;
    if let Some(progress) = progress.cloned() {
        request.capture.lines = Some(Arc::new(move |line: &str| progress.line(line)));
    }
    let mut watch = None;
    if let Some(sandbox) = sandbox {
        let confined = sandbox
            .prepare()
            .map_err(|err| std::io::Error::other(err.to_string()))?;
        let sandboxed = ChildEnv::from_vars(confined.env);
        request.env = match env {
            ShellEnv::Model(_) => model_command_env(&sandboxed, cwd),
            ShellEnv::Author(_) => trusted_git_env(&sandboxed),
        };
        let setup = Arc::new(confined.child);
        request.pre_exec = Some(Arc::new(move || setup.apply()));
        watch = Some(confined.watch);
    }
    let outcome = exec::run(request, async {
        abort.aborted().await;
    })
    .await?;
    let (ending, status) = match outcome.ending {
        Ending::Exited { code, signal } => (
            ShellEnding::Exited(code),
            Some(ExitStatus::from_raw(match (code, signal) {
                (Some(code), _) => code << 8,
                (None, Some(signal)) => signal,
                (None, None) => 0,
            })),
        ),
        Ending::TimedOut => (ShellEnding::TimedOut, None),
        Ending::Cancelled => (ShellEnding::Aborted, None),
    };
    let mut output = with_drop_note(outcome.stdout);
    let stderr = with_drop_note(outcome.stderr);
    if !stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&stderr);
    }
    let limit = watch.and_then(|watch| watch.limit_hit(status));
    // The command's process group is gone by now; whatever it did to what git or a shell
    // runs code from is undone before anything else (the next command, a check) runs.
    let violations = sandbox.map(Sandbox::restore_protected).unwrap_or_default();
    Ok(ShellRun {
        ending,
        output,
        limit,
        violations,
    })
}

fn with_drop_note(captured: exec::Captured) -> String {
    let mut text = captured.text;
    if captured.dropped_bytes > 0 {
        text.push_str(&format!(
            "\n… [{} more bytes not captured]",
            captured.dropped_bytes
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::{AbortHandle, AbortReason};
    use crate::exec::RunEnv;

    fn model_env() -> ChildEnv {
        RunEnv::new(&Default::default()).model
    }

    #[tokio::test]
    async fn captures_both_streams_and_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = AbortHandle::new();
        let run = run_shell(
            "pwd; echo err >&2; exit 3",
            dir.path(),
            Duration::from_secs(10),
            &abort,
            ShellEnv::Model(&model_env()),
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.ending, ShellEnding::Exited(Some(3)));
        let name = dir.path().file_name().unwrap().to_str().unwrap();
        assert!(
            run.output.contains(name) && run.output.ends_with("err\n"),
            "{:?}",
            run.output
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = AbortHandle::new();
        let run = run_shell(
            "(sleep 2; touch late) & sleep 30",
            dir.path(),
            Duration::from_millis(300),
            &abort,
            ShellEnv::Model(&model_env()),
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.ending, ShellEnding::TimedOut);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !dir.path().join("late").exists(),
            "a background child outlived the timeout"
        );
    }

    #[tokio::test]
    async fn abort_stops_a_running_command() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, abort) = AbortHandle::new();
        handle.abort(AbortReason::Terminate);
        let run = run_shell(
            "sleep 30",
            dir.path(),
            Duration::from_secs(60),
            &abort,
            ShellEnv::Model(&model_env()),
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.ending, ShellEnding::Aborted);
    }

    #[tokio::test]
    async fn lines_go_to_progress_as_they_come_and_the_output_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = AbortHandle::new();
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let sink = ProgressSink::new(3, tx);
        let run = run_shell(
            "echo one; printf 'two\\r\\nthree'",
            dir.path(),
            Duration::from_secs(10),
            &abort,
            ShellEnv::Model(&model_env()),
            Some(&sink),
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.output, "one\ntwo\r\nthree");
        let mut lines = Vec::new();
        while let Ok(line) = rx.try_recv() {
            assert_eq!(line.call, 3);
            lines.push(line.line);
        }
        assert_eq!(lines, ["one", "two", "three"]);
    }
}
