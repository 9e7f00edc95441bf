//! The model's shell commands: `bash -c` in a folder through the one process runner
//! (`exec`), its two streams joined into the text the model reads.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::git_env::{git_env, trusted_git_env};
use super::outcome::{CommandEnding, CommandOutcome, CommandRun};
use super::progress::ProgressSink;
use crate::base::AbortSignal;
use crate::exec::{self, ChildEnv, ExecRequest};
use crate::sandbox::{ReadOnlyDomain, Sandbox};

/// Output kept per stream of a model's command; the rest is drained and counted (a note says
/// how much). Large, because Bash's output is kept whole and offloaded to a file when long
/// (S8): a 1 MB build log must survive intact.
pub const CAPTURE_BYTES: usize = 16 * 1024 * 1024;

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

/// Where a command runs: the run's sandbox, the read-only domain, both, or neither.
#[derive(Debug, Clone, Copy, Default)]
pub struct Confinement<'a> {
    pub sandbox: Option<&'a Sandbox>,
    /// Stacked on the sandbox (or alone): for a command only a read-only proof allowed.
    pub read_only: Option<&'a ReadOnlyDomain>,
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
) -> std::io::Result<CommandRun> {
    let confinement = Confinement {
        sandbox,
        read_only: None,
    };
    run_confined(command, cwd, timeout, abort, env, progress, confinement).await
}

/// [`run_shell`] under any [`Confinement`].
pub async fn run_confined(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    abort: &AbortSignal,
    env: ShellEnv<'_>,
    progress: Option<&ProgressSink>,
    confinement: Confinement<'_>,
) -> std::io::Result<CommandRun> {
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
    let mut setup = None;
    if let Some(sandbox) = confinement.sandbox {
        let confined = sandbox
            .prepare()
            .map_err(|err| std::io::Error::other(err.to_string()))?;
        let sandboxed = ChildEnv::from_vars(confined.env);
        request.env = match env {
            ShellEnv::Model(_) => model_command_env(&sandboxed, cwd),
            ShellEnv::Author(_) => trusted_git_env(&sandboxed),
        };
        setup = Some(confined.child);
        watch = Some(confined.watch);
    }
    if let Some(domain) = confinement.read_only {
        match &mut setup {
            Some(setup) => domain.confine(setup),
            None => setup = Some(domain.setup()),
        }
        request.env = request.env.with("TMPDIR", domain.tmpdir());
    }
    if let Some(setup) = setup {
        let setup = Arc::new(setup);
        request.pre_exec = Some(Arc::new(move || setup.apply()));
    }
    let outcome = exec::run(request, async {
        abort.aborted().await;
    })
    .await?;
    let mut output = with_drop_note(outcome.stdout);
    let stderr = with_drop_note(outcome.stderr);
    if !stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&stderr);
    }
    let limit = watch.and_then(|watch| watch.limit_hit(outcome.ending));
    // The command's process group is gone by now; whatever it did to what git or a shell
    // runs code from is undone before anything else (the next command, a check) runs.
    let protected = confinement
        .sandbox
        .map(Sandbox::restore_protected)
        .unwrap_or_default();
    Ok(CommandRun {
        outcome: CommandOutcome {
            ending: CommandEnding::of(outcome.ending, timeout),
            limit,
            protected,
        },
        output,
    })
}

fn with_drop_note(captured: exec::Captured) -> String {
    let mut text = captured.text;
    if captured.dropped_bytes > 0 {
        text.push_str(&format!(
            "\n… [{} more bytes not captured]",
            captured.dropped_bytes
        ));
    } else if !captured.complete {
        text.push_str("\n… [output incomplete: the stream was still open when the command ended]");
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

    /// An execution the gate never made: a writing command injected into the read-only
    /// domain stands for a read-only verdict that was wrong.
    #[tokio::test]
    async fn the_read_only_domain_denies_every_write_and_every_connection() {
        use crate::sandbox::{ReadOnlyCommands, ReadOnlyDomain, read_only_preflight};
        let status = read_only_preflight(ReadOnlyCommands::Enforce);
        if !status.enforced {
            eprintln!("skipped: {}", status.describe());
            return;
        }
        let domain = ReadOnlyDomain::start(&status, None, "shell-test")
            .unwrap()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "kept\n").unwrap();
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let (_handle, abort) = AbortHandle::new();
        let confinement = Confinement {
            sandbox: None,
            read_only: Some(&domain),
        };
        let attempts = [
            "echo x > new",
            "echo x >> file",
            ": > file",
            "rm file",
            "mv file moved",
            "ln file hard",
            "ln -s file soft",
            "mkdir made",
            "rmdir folder",
            "mkfifo fifo",
            "touch file",
            "chmod +x file",
            "exec 3<>/dev/tcp/127.0.0.1/PORT",
            "echo x > /dev/shm/tollgate-shell-test",
        ];
        for attempt in attempts {
            let script = attempt.replace("PORT", &port.to_string());
            let run = run_confined(
                &script,
                dir.path(),
                Duration::from_secs(10),
                &abort,
                ShellEnv::Model(&model_env()),
                None,
                confinement,
            )
            .await
            .unwrap();
            assert_ne!(
                run.outcome.ending,
                CommandEnding::Exited { code: 0 },
                "{attempt}: {run:?}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join("file")).unwrap(),
            "kept\n"
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["file", "folder"]);
        assert!(
            listener.accept().is_err(),
            "connected from the read-only domain"
        );
        // What a reader needs still works: /dev/null, its pipes, TMPDIR.
        let run = run_confined(
            "cat file | tr a-z A-Z; echo gone > /dev/null; echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
            dir.path(),
            Duration::from_secs(10),
            &abort,
            ShellEnv::Model(&model_env()),
            None,
            confinement,
        )
        .await
        .unwrap();
        assert_eq!(
            run.outcome.ending,
            CommandEnding::Exited { code: 0 },
            "{run:?}"
        );
        assert_eq!(run.output, "KEPT\nt\n");
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
        assert_eq!(run.outcome.ending, CommandEnding::Exited { code: 3 });
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
        assert_eq!(
            run.outcome.ending,
            CommandEnding::TimedOut {
                after: Duration::from_millis(300)
            }
        );
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
        assert_eq!(run.outcome.ending, CommandEnding::Cancelled);
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
