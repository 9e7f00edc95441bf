//! Running a shell command the way tollgate always does: `bash -c` in a folder, in its own
//! process group that is killed when the command ends, times out or the run is aborted.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::context::AbortSignal;
use super::git_env::git_env;
use super::progress::ProgressSink;

/// Output kept per stream; the rest is drained and counted.
const CAPTURE_BYTES: usize = 1024 * 1024;

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

/// Names of environment variables that look like credentials; the model's commands do not
/// inherit them (the task author's checks do).
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_SECRETS", "_CREDENTIALS"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
        || upper.contains("PASSWORD")
        || upper.contains("API_KEY")
}

/// Variables that would make a command the analyser proved read-only do something else:
/// start-up files, library injection, `cd` search paths, tool configs that run programs.
fn changes_what_commands_do(name: &str) -> bool {
    const EXACT: [&str; 10] = [
        "BASH_ENV",
        "ENV",
        "CDPATH",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "RIPGREP_CONFIG_PATH",
        "GIT_EXEC_PATH",
        "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF",
    ];
    EXACT.contains(&name) || name.starts_with("LD_") || name.starts_with("GIT_CONFIG")
}

/// Runs `command`. `Err` only when bash could not be started. `scrub_secrets` (for the
/// model's commands) drops credentials and variables that change what commands do, and
/// confines git to the workspace's repository (`git_env`). Each complete output line also
/// goes to `progress` as it arrives; the captured output is the same either way.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    abort: &AbortSignal,
    scrub_secrets: bool,
    progress: Option<&ProgressSink>,
) -> std::io::Result<ShellRun> {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if scrub_secrets {
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|name| is_secret_env_name(name) || changes_what_commands_do(name))
            {
                cmd.env_remove(&name);
            }
        }
        let git = git_env(cwd);
        for name in git.remove {
            cmd.env_remove(name);
        }
        cmd.envs(git.set);
    }
    let mut child = cmd.spawn()?;
    // The scheduler cancels a call by dropping its future (a sibling Bash failed, a hard
    // stop): the guard kills the group then too, not only the `bash` that kill_on_drop reaches.
    let group = GroupGuard(child.id());
    let stdout = tokio::spawn(read_capped(child.stdout.take(), progress.cloned()));
    let stderr = tokio::spawn(read_capped(child.stderr.take(), progress.cloned()));
    let ending = tokio::select! {
        status = child.wait() => ShellEnding::Exited(status?.code()),
        _ = tokio::time::sleep(timeout) => ShellEnding::TimedOut,
        _ = abort.aborted() => ShellEnding::Aborted,
    };
    // Whatever the command left running in the background goes too: nothing outlives a call,
    // and its pipes close so the readers below finish.
    drop(group);
    child.wait().await?;
    let mut output = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    if !stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&stderr);
    }
    Ok(ShellRun { ending, output })
}

/// Kills the command's process group when dropped, before the child is reaped.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            kill_group(group);
        }
    }
}

fn kill_group(group: u32) {
    let Ok(pid) = libc::pid_t::try_from(group) else {
        return;
    };
    // SAFETY: killpg only sends a signal. The group id is our child's pid, and the child is
    // not reaped until after this call (`GroupGuard` drops before the final wait, or with the
    // future that owns the child), so the id cannot have been reused by another group.
    unsafe {
        libc::killpg(pid, libc::SIGKILL);
    }
}

async fn read_capped<R: AsyncRead + Unpin>(
    stream: Option<R>,
    progress: Option<ProgressSink>,
) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut buffer = [0u8; 8192];
    let mut lines = progress.map(|sink| LineSplitter {
        sink,
        partial: Vec::new(),
    });
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some(lines) = &mut lines {
                    lines.feed(&buffer[..n]);
                }
                let room = CAPTURE_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                dropped += n.saturating_sub(room);
            }
        }
    }
    if let Some(lines) = &mut lines {
        lines.finish();
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n… [{dropped} more bytes not captured]"));
    }
    text
}

/// Cuts a byte stream into lines for the progress sink; a line longer than this is sent in
/// pieces, so one endless line cannot grow the buffer without bound.
const MAX_PROGRESS_LINE: usize = 4096;

struct LineSplitter {
    sink: ProgressSink,
    partial: Vec<u8>,
}

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                self.send();
            } else {
                self.partial.push(byte);
                if self.partial.len() >= MAX_PROGRESS_LINE {
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
        self.sink.line(line.trim_end_matches('\r'));
        self.partial.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{AbortHandle, AbortReason};

    #[tokio::test]
    async fn captures_both_streams_and_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = AbortHandle::new();
        let run = run_shell(
            "pwd; echo err >&2; exit 3",
            dir.path(),
            Duration::from_secs(10),
            &abort,
            true,
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
            true,
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
            true,
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.ending, ShellEnding::Aborted);
    }

    /// What a command sees of `name` (set to `value` in the test process) when scrubbed or not.
    async fn seen(name: &str, value: &str, scrub: bool) -> String {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = AbortHandle::new();
        // Only names no other test uses: setting BASH_ENV itself would leak into the other
        // tests running in this process.
        unsafe { std::env::set_var(name, value) };
        let command = format!("echo \"[${name}]\"");
        let run = run_shell(
            &command,
            dir.path(),
            Duration::from_secs(5),
            &abort,
            scrub,
            None,
        )
        .await
        .unwrap();
        run.output
    }

    #[tokio::test]
    async fn the_model_loses_secrets_and_start_up_hijacks_the_author_keeps_them() {
        assert_eq!(
            seen("TOLLGATE_TEST_SECRET_TOKEN", "hunter2", true).await,
            "[]\n"
        );
        assert_eq!(
            seen("TOLLGATE_TEST_SECRET_TOKEN", "hunter2", false).await,
            "[hunter2]\n"
        );
        assert_eq!(seen("LD_TOLLGATE_TEST_PRELOAD", "x", true).await, "[]\n");
        for name in [
            "BASH_ENV",
            "ENV",
            "CDPATH",
            "LD_PRELOAD",
            "GIT_CONFIG_GLOBAL",
            "RIPGREP_CONFIG_PATH",
        ] {
            assert!(changes_what_commands_do(name), "{name}");
        }
        assert!(!changes_what_commands_do("GIT_AUTHOR_NAME"));
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
            true,
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

    #[test]
    fn secret_names() {
        for name in [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET",
            "DB_PASSWORD",
            "OPENAI_API_KEY",
        ] {
            assert!(is_secret_env_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "KEYBOARD", "CI"] {
            assert!(!is_secret_env_name(name), "{name}");
        }
    }
}
