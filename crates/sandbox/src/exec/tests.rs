use std::path::Path;
use std::sync::Mutex;

use super::*;

fn bash(script: &str, dir: &Path, timeout: Duration) -> ExecRequest {
    let env = ChildEnv::default().with("PATH", std::env::var_os("PATH").unwrap_or_default());
    ExecRequest::bash(script, dir.to_path_buf(), env, timeout)
}

async fn never() {
    std::future::pending::<()>().await
}

#[tokio::test]
async fn captures_both_streams_and_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        bash(
            "pwd; echo err >&2; exit 3",
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Exited(3));
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    assert!(
        outcome.stdout.text.trim_end().ends_with(name),
        "{:?}",
        outcome.stdout
    );
    assert_eq!(outcome.stderr.text, "err\n");
    assert!(outcome.stdout.complete && outcome.stderr.complete);
}

#[tokio::test]
async fn the_child_sees_only_the_environment_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = bash("env | sort", dir.path(), Duration::from_secs(10));
    request.env = request.env.with("ONLY_THIS", "1");
    let outcome = run(request, never()).await.unwrap();
    let names: Vec<&str> = outcome
        .stdout
        .text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .filter(|name| !["PWD", "SHLVL", "_", "OLDPWD"].contains(name))
        .collect();
    assert_eq!(names, ["ONLY_THIS", "PATH"]);
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        bash(
            "(sleep 2; touch late) & sleep 30",
            dir.path(),
            Duration::from_millis(300),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::TimedOut);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !dir.path().join("late").exists(),
        "a background child outlived the timeout"
    );
}

#[tokio::test]
async fn cancellation_stops_a_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        bash("sleep 30", dir.path(), Duration::from_secs(60)),
        async {},
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Cancelled);
}

#[tokio::test]
async fn a_daemon_holding_stdout_is_ended_with_the_call_and_its_output_kept() {
    let dir = tempfile::tempdir().unwrap();
    // setsid leaves the group, so no group kill reaches it, and it holds stdout open. The
    // call's keeper (its subreaper) ends it when the command exits; what was printed stays.
    let outcome = run(
        bash(
            "echo before; setsid sh -c 'echo daemon; echo $$ > left; exec sleep 30' & \
             until [ -s left ]; do sleep 0.01; done; echo after",
            dir.path(),
            Duration::from_secs(20),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Exited(0));
    for line in ["before", "daemon", "after"] {
        assert!(outcome.stdout.text.contains(line), "{:?}", outcome.stdout);
    }
    let daemon: i32 = std::fs::read_to_string(dir.path().join("left"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY (test): kill with signal 0 only asks whether the process exists.
    assert_ne!(
        unsafe { libc::kill(daemon, 0) },
        0,
        "the daemon outlived the call"
    );
}

#[tokio::test]
async fn nothing_a_command_orphans_outlives_the_call() {
    let dir = tempfile::tempdir().unwrap();
    // A new session, its own stdio, a delay: neither the group kill, the pipes nor a cgroup
    // (none here) reach it — only the keeper, to which it was reparented.
    let outcome = run(
        bash(
            "setsid sh -c 'sleep 1; echo x > marker' </dev/null >/dev/null 2>&1 & \
             (setsid sh -c 'sleep 1; echo y > marker2' </dev/null >/dev/null 2>&1 &); echo started",
            dir.path(),
            Duration::from_secs(20),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.stdout.text, "started\n");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !dir.path().join("marker").exists(),
        "an orphan wrote after the call"
    );
    assert!(
        !dir.path().join("marker2").exists(),
        "an orphan wrote after the call"
    );
}

#[tokio::test]
async fn output_past_the_limit_is_counted_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = bash(
        "head -c 5000 /dev/zero | tr '\\0' x",
        dir.path(),
        Duration::from_secs(10),
    );
    request.capture.max_bytes = 1000;
    let outcome = run(request, never()).await.unwrap();
    assert_eq!(outcome.stdout.text.len(), 1000);
    assert_eq!(outcome.stdout.dropped_bytes, 4000);
    assert!(!outcome.stdout.complete);
}

#[tokio::test]
async fn stdin_is_written_and_lines_are_reported_as_they_come() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut request = bash(
        "cat; printf 'two\\r\\nthree'",
        dir.path(),
        Duration::from_secs(10),
    );
    request.stdin = Stdin::Bytes(b"one\n".to_vec());
    request.capture.lines = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.to_string())
    }));
    let outcome = run(request, never()).await.unwrap();
    assert_eq!(outcome.stdout.text, "one\ntwo\r\nthree");
    assert_eq!(*seen.lock().unwrap(), ["one", "two", "three"]);
}

#[tokio::test]
async fn a_failing_pre_exec_step_keeps_the_program_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = bash("touch ran", dir.path(), Duration::from_secs(10));
    request.pre_exec = Some(Arc::new(|| Err(io::Error::from_raw_os_error(libc::EPERM))));
    let err = run(request, never()).await.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    assert!(!dir.path().join("ran").exists());
}

/// A request started without a keeper (`Reach::Group`, spawn.rs).
fn grouped(argv: &[&str], dir: &Path, timeout: Duration) -> ExecRequest {
    let mut request = bash("", dir, timeout);
    request.argv = argv.iter().map(OsString::from).collect();
    request.reach = Reach::Group;
    request
}

fn alive(pid: i32) -> bool {
    // A zombie runs nothing: dead for this purpose.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// A killed process leaves /proc a moment after the signal: bounded polling.
async fn gone(pid: i32) -> bool {
    for _ in 0..500 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn pid_in(file: &Path) -> i32 {
    for _ in 0..1000 {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} was never written", file.display());
}

#[tokio::test]
async fn a_grouped_command_is_this_process_own_child_with_its_streams_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        grouped(
            &["bash", "-c", "echo $PPID; pwd; echo err >&2; exit 3"],
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Exited(3));
    let mut lines = outcome.stdout.text.lines();
    // No keeper between: the program's parent is tollgate itself, so it was not forked.
    assert_eq!(
        lines.next(),
        Some(std::process::id().to_string().as_str()),
        "{:?}",
        outcome.stdout
    );
    assert_eq!(
        lines.next().map(Path::new),
        Some(dir.path().canonicalize().unwrap().as_path())
    );
    assert_eq!(outcome.stderr.text, "err\n");
    assert!(outcome.stdout.complete && outcome.stderr.complete);
}

#[tokio::test]
async fn a_command_with_a_sandbox_step_is_kept_even_when_it_asks_for_its_group_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = grouped(
        &["bash", "-c", "echo $PPID"],
        dir.path(),
        Duration::from_secs(10),
    );
    request.pre_exec = Some(Arc::new(|| Ok(())));
    let outcome = run(request, never()).await.unwrap();
    assert_eq!(outcome.ending, Ending::Exited(0));
    assert_ne!(
        outcome.stdout.text.trim(),
        std::process::id().to_string(),
        "a sandboxed command went without its keeper"
    );
}

#[tokio::test]
async fn a_grouped_command_sees_only_its_environment_and_no_blocked_or_ignored_signal() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = grouped(&["env"], dir.path(), Duration::from_secs(10));
    request.env = request.env.with("ONLY_THIS", "1");
    let outcome = run(request, never()).await.unwrap();
    let mut names: Vec<&str> = outcome
        .stdout
        .text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["ONLY_THIS", "PATH"]);
    // tollgate ignores SIGPIPE and SIGXFSZ and blocks every signal around the start; the
    // program gets neither, and no other disposition than a forked command gets.
    ignore_file_size_signal();
    let signals = |reach| async move {
        let dir = tempfile::tempdir().unwrap();
        let mut request = grouped(
            &["cat", "/proc/self/status"],
            dir.path(),
            Duration::from_secs(10),
        );
        request.reach = reach;
        let status = run(request, never()).await.unwrap().stdout.text;
        let field = |name: &str| {
            let line = status.lines().find(|line| line.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        (field("SigBlk:"), field("SigIgn:"))
    };
    let (blocked, ignored) = signals(Reach::Group).await;
    assert_eq!(blocked, 0);
    for signal in [libc::SIGPIPE, libc::SIGXFSZ] {
        assert_eq!(ignored & (1 << (signal - 1)), 0, "signal {signal} ignored");
    }
    assert_eq!((blocked, ignored), signals(Reach::Tree).await);
}

#[tokio::test]
async fn a_grouped_command_that_cannot_start_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = run(
        grouped(
            &["tollgate-no-such-program"],
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");
    let nowhere = dir.path().join("nowhere");
    let folder = run(
        grouped(&["true"], &nowhere, Duration::from_secs(10)),
        never(),
    )
    .await
    .unwrap_err();
    assert_eq!(folder.kind(), io::ErrorKind::NotFound, "{folder}");
    assert!(
        folder.to_string().contains(&nowhere.display().to_string()),
        "{folder}"
    );
    let not_a_program = dir.path().join("data.txt");
    std::fs::write(&not_a_program, "x").unwrap();
    let denied = run(
        grouped(
            &[not_a_program.to_str().unwrap()],
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap_err();
    assert_eq!(denied.raw_os_error(), Some(libc::EACCES), "{denied}");
    let empty = run(grouped(&[], dir.path(), Duration::from_secs(10)), never())
        .await
        .unwrap_err();
    assert_eq!(empty.kind(), io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_grouped_command_killed_by_a_signal_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        grouped(
            &["bash", "-c", "kill -TERM $$"],
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Signalled(libc::SIGTERM));
}

#[tokio::test]
async fn a_grouped_command_takes_stdin_and_reports_lines() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut request = grouped(
        &["bash", "-c", "cat; printf 'two\\nthree'"],
        dir.path(),
        Duration::from_secs(10),
    );
    request.stdin = Stdin::Bytes(b"one\n".to_vec());
    request.capture.lines = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.to_string())
    }));
    let outcome = run(request, never()).await.unwrap();
    assert_eq!(outcome.stdout.text, "one\ntwo\nthree");
    assert_eq!(*seen.lock().unwrap(), ["one", "two", "three"]);
}

#[tokio::test]
async fn a_grouped_command_and_its_group_end_with_it_on_exit_timeout_and_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    // Exit: a background child left in the group is killed when the first process exits.
    let outcome = run(
        grouped(
            &["bash", "-c", "sleep 300 & echo $! > left"],
            dir.path(),
            Duration::from_secs(10),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Exited(0));
    assert!(gone(pid_in(&dir.path().join("left")).await).await);
    // Timeout.
    let outcome = run(
        grouped(
            &["bash", "-c", "sleep 300 & echo $! > late; sleep 300"],
            dir.path(),
            Duration::from_millis(500),
        ),
        never(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::TimedOut);
    assert!(gone(pid_in(&dir.path().join("late")).await).await);
    // Cancellation.
    let outcome = run(
        grouped(&["sleep", "300"], dir.path(), Duration::from_secs(60)),
        async {},
    )
    .await
    .unwrap();
    assert_eq!(outcome.ending, Ending::Cancelled);
}

#[tokio::test]
async fn a_grouped_command_dropped_mid_run_is_killed_and_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let call = tokio::spawn(run(
        grouped(
            &[
                "bash",
                "-c",
                "sleep 300 & echo $! > child; echo $$ > first; wait",
            ],
            dir.path(),
            Duration::from_secs(60),
        ),
        never(),
    ));
    let (first, child) = (
        pid_in(&dir.path().join("first")).await,
        pid_in(&dir.path().join("child")).await,
    );
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(gone(child).await, "the group outlived the dropped call");
    // Reaped, not left a zombie: its /proc entry goes altogether.
    let mut reaped = false;
    for _ in 0..500 {
        if !Path::new(&format!("/proc/{first}")).exists() {
            reaped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reaped, "the first process was left unreaped");
}
