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
