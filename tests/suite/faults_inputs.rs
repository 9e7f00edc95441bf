//! Faults of what the operator names (issue 47): every file a flag or the task names is read
//! with a cap and only if it is a regular file, and `--prompt-file -` has a cap too. Each bad
//! input ends the run with exit 2 naming the file, before any model request: the fake server
//! counts none.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::fake_model::{Api, FakeModel};
use crate::support::runs::{Finished, Run};

const KEY: &str = "sk-inputs-test-key";

/// What stands where a file belongs.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// `/dev/zero`: a device that never ends.
    Zero,
    /// A FIFO nobody writes to.
    Fifo,
    /// A listening Unix socket.
    Socket,
    /// A regular file one byte over the cap (sparse: it costs no disk).
    OverCap(u64),
}

/// The bad input at `dir/name`, and what the error must say of it.
fn make(dir: &Path, name: &str, bad: Bad, keep: &mut Vec<UnixListener>) -> (PathBuf, String) {
    let path = dir.join(name);
    let said = match bad {
        Bad::Zero => return (PathBuf::from("/dev/zero"), "is a character device".into()),
        Bad::Fifo => {
            let status = Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(status.success());
            "is a FIFO, not a regular file".to_string()
        }
        Bad::Socket => {
            keep.push(UnixListener::bind(&path).unwrap());
            "is a socket, not a regular file".to_string()
        }
        Bad::OverCap(cap) => {
            let file = std::fs::File::create(&path).unwrap();
            file.set_len(cap + 1).unwrap();
            format!("is larger than the {} MiB cap", cap >> 20)
        }
    };
    (path, said)
}

const CONFIG_CAP: u64 = 4 << 20;
const PROMPT_CAP: u64 = 8 << 20;

fn task(server: &FakeModel) -> String {
    format!(
        "version: 1\nname: inputs\nprompt: Say hi.\nworkdir: ws\nmode: dontAsk\n{}",
        server.model_block(Api::Anthropic, "")
    )
}

/// The run with `flag bad-path` (or the bad path as the task file), waited for off the
/// server's runtime.
async fn run(server: &FakeModel, flag: Option<&str>, path: &Path) -> Finished {
    let run = Run::new().task(&task(server)).model(server);
    let run = match flag {
        Some(flag) => run.args([flag, path.to_str().unwrap()]),
        None => run.task_file(path),
    };
    tokio::task::spawn_blocking(move || run.finish())
        .await
        .unwrap()
}

fn assert_refused(run: &Finished, path: &Path, said: &str, server: &FakeModel, case: &str) {
    assert_eq!(run.code, 2, "{case}: {}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&path.display().to_string()) && run.stderr.contains(said),
        "{case}: {}",
        run.stderr
    );
    assert!(
        server.requests().is_empty(),
        "{case}: a model request was made"
    );
    assert!(!run.wrote_transcript(), "{case}: a transcript was written");
}

/// The task file, `--policy`, `--vars-file`, `--output-schema` and `--prompt-file` on
/// `/dev/zero`, a FIFO with no writer, a socket and a file just over the cap: each exit 2
/// at once, the file named, no request made.
#[tokio::test(flavor = "multi_thread")]
async fn every_named_file_is_a_regular_file_within_its_cap() {
    let server = FakeModel::start(KEY, Vec::new()).await;
    let scratch = tempfile::tempdir().unwrap();
    let mut sockets = Vec::new();
    let flags: [(Option<&str>, u64); 5] = [
        (None, CONFIG_CAP),
        (Some("--policy"), CONFIG_CAP),
        (Some("--vars-file"), CONFIG_CAP),
        (Some("--output-schema"), CONFIG_CAP),
        (Some("--prompt-file"), PROMPT_CAP),
    ];
    for (index, (flag, cap)) in flags.into_iter().enumerate() {
        for bad in [Bad::Zero, Bad::Fifo, Bad::Socket, Bad::OverCap(cap)] {
            let name = format!("bad-{index}-{bad:?}").replace(['(', ')'], "");
            let (path, said) = make(scratch.path(), &name, bad, &mut sockets);
            let case = format!("{} on {bad:?}", flag.unwrap_or("the task file"));
            let started = std::time::Instant::now();
            let ran = run(&server, flag, &path).await;
            assert_refused(&ran, &path, &said, &server, &case);
            // "At once": a FIFO must not hold the run until some timeout.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{case}: took {:?}",
                started.elapsed()
            );
        }
    }
}

/// The managed policy and a repository's settings file: a FIFO in their place is an error
/// naming it, not a policy silently absent.
#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_in_place_of_a_policy_or_settings_file_is_refused() {
    let server = FakeModel::start(KEY, Vec::new()).await;
    for place in ["etc/policy.yaml", "ws/.claude/settings.json"] {
        let run = Run::new().task(&task(&server)).model(&server);
        let path = run.dir().join(place);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        assert!(
            Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        let ran = tokio::task::spawn_blocking(move || run.finish())
            .await
            .unwrap();
        assert_eq!(ran.code, 2, "{place}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("is a FIFO, not a regular file") && ran.stderr.contains(place),
            "{place}: {}",
            ran.stderr
        );
        assert!(server.requests().is_empty(), "{place}: a request was made");
    }
}

/// `yes | tollgate run … --prompt-file -`: standard input past the prompt's cap is an error
/// (exit 2) instead of a run that reads forever; a prompt piped in within it is sent.
#[tokio::test(flavor = "multi_thread")]
async fn an_endless_prompt_on_stdin_is_cut_at_its_cap() {
    let server = FakeModel::start(KEY, Vec::new()).await;
    let run = Run::new()
        .task(&task(&server))
        .model(&server)
        .args(["--prompt-file", "-"]);
    let mut yes = Command::new("yes").stdout(Stdio::piped()).spawn().unwrap();
    let stdout = yes.stdout.take().unwrap();
    let ran = tokio::task::spawn_blocking(move || run.finish_with_stdin(stdout))
        .await
        .unwrap();
    let _ = yes.kill();
    let _ = yes.wait();
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("the prompt from standard input is larger than the 8 MiB cap"),
        "{}",
        ran.stderr
    );
    assert!(server.requests().is_empty());
}
