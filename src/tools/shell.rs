//! The model's shell commands: `bash -c` in a folder through the one process runner
//! (`exec`), its two streams joined into the text the model reads.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::context::AbortSignal;
use super::git_env::git_env;
use super::progress::ProgressSink;
use crate::exec::{self, ChildEnv, Ending, ExecRequest};

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

/// Runs `command` with exactly `env` (the run's environment for it: the model's commands
/// get one without secrets or start-up hijacks). `Err` only when bash could not be started.
/// Each complete output line also goes to `progress` as it arrives; the captured output is
/// the same either way.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    abort: &AbortSignal,
    env: &ChildEnv,
    progress: Option<&ProgressSink>,
) -> std::io::Result<ShellRun> {
    let mut request = ExecRequest::bash(command, cwd.to_path_buf(), env.clone(), timeout);
    if let Some(progress) = progress.cloned() {
        request.capture.lines = Some(Arc::new(move |line: &str| progress.line(line)));
    }
    let outcome = exec::run(request, async {
        abort.aborted().await;
    })
    .await?;
    let ending = match outcome.ending {
        Ending::Exited { code, .. } => ShellEnding::Exited(code),
        Ending::TimedOut => ShellEnding::TimedOut,
        Ending::Cancelled => ShellEnding::Aborted,
    };
    let mut output = with_drop_note(outcome.stdout);
    let stderr = with_drop_note(outcome.stderr);
    if !stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&stderr);
    }
    Ok(ShellRun { ending, output })
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
    use crate::exec::RunEnv;
    use crate::tools::{AbortHandle, AbortReason};

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
            &model_env(),
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
            &model_env(),
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
            &model_env(),
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
            &model_env(),
            Some(&sink),
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
