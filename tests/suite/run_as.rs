//! `run --run-as USER`: the whole run — tollgate, its file tools and the commands — as an
//! unprivileged account, with no way back to root; and the refusals (root as the target, an
//! unknown account, an invoker that can neither change user nor reach it through sudo), each
//! with exit 2 before anything is written. Changing user needs root: the tests that do it
//! are skipped, named, elsewhere. `nobody` (uid 65534) is the account, as every Debian has it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use crate::support::skip::skip;
use crate::support::{Sandbox, events, transcript};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A sandbox `nobody` may enter and write.
fn open_sandbox() -> Sandbox {
    let sandbox = Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    for dir in [sandbox.path().to_path_buf(), sandbox.path().join("ws")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    sandbox
}

const TASK: &str = "version: 1\nname: run-as\nprompt: go\nworkdir: ws\nmode: bypassPermissions\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: 'id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; cat root-only.txt || echo unreadable; touch by-bash.txt'}}\n      - tool_use: {name: Write, input: {file_path: by-write.txt, content: hi}}\n      - tool_use: {name: Read, input: {file_path: root-only.txt}}\n    - - text: done\n";

#[test]
fn a_run_as_nobody_runs_its_commands_and_file_tools_as_nobody_with_no_way_back() {
    if !is_root() {
        skip("--run-as changes user only as root or through sudo; this test runs as neither");
        return;
    }
    let sandbox = open_sandbox();
    sandbox.write("t.yaml", TASK);
    let secret = sandbox.write("ws/root-only.txt", "the runner's secret\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = sandbox.tollgate(&["run", "t.yaml", "--out", "out", "--run-as", "nobody"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    let results = events(&all, "tool_result");
    assert_eq!(results.len(), 3, "{results:?}");
    let bash = results[0]["content"].as_str().unwrap();
    let lines: Vec<&str> = bash.lines().collect();
    // uid, gid and the one group: nobody's alone, none of root's.
    assert_eq!(lines[0], NOBODY.to_string(), "{bash}");
    assert_eq!(lines[1], "65534", "{bash}");
    assert_eq!(lines[2], "65534", "{bash}");
    assert!(bash.contains("NoNewPrivs:\t1"), "{bash}");
    assert!(!bash.contains("the runner's secret"), "{bash}");
    assert!(bash.contains("unreadable"), "{bash}");
    // The Read tool runs in tollgate's own process: as nobody too, so the kernel refuses it.
    assert_eq!(results[2]["is_error"], true, "{:?}", results[2]);
    let read = results[2]["content"].as_str().unwrap();
    assert!(read.contains("Permission denied"), "{read}");
    assert!(!read.contains("the runner's secret"), "{read}");

    // Files the command, the Write tool and tollgate itself made are nobody's.
    for made in ["ws/by-bash.txt", "ws/by-write.txt", "out/transcript.jsonl"] {
        let meta = std::fs::metadata(sandbox.path().join(made)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY), "{made}");
    }
}

#[test]
fn root_and_an_unknown_account_are_refused_before_anything_is_written() {
    let sandbox = open_sandbox();
    sandbox.write("t.yaml", TASK);
    for (user, says) in [
        ("root", "that account is root"),
        ("no-such-account-tollgate", "no such user"),
    ] {
        let output = sandbox.tollgate(&["run", "t.yaml", "--out", "out", "--run-as", user]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{user}: {stderr}");
        assert!(stderr.contains(says), "{user}: {stderr}");
        assert!(!sandbox.path().join("out").exists(), "{user}");
    }
}

/// An account that is not root and has no sudo that answers for it cannot change user: the
/// run is refused with the reason, not run as the invoker.
#[test]
fn an_invoker_that_cannot_change_user_is_refused_not_run_as_itself() {
    if !is_root() {
        skip("starting tollgate as nobody needs root");
        return;
    }
    let sandbox = open_sandbox();
    sandbox.write("t.yaml", TASK);
    // A copy of the binary nobody may execute, wherever the build folder is.
    let bin = sandbox.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tollgate = bin.join("tollgate");
    std::fs::copy(env!("CARGO_BIN_EXE_tollgate"), &tollgate).unwrap();
    std::fs::set_permissions(&tollgate, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A `sudo` on PATH that refuses, as one without a rule for this account does.
    let fake_sudo = bin.join("sudo");
    std::fs::write(
        &fake_sudo,
        "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake_sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = as_nobody(&tollgate, sandbox.path(), &bin)
        .args(["run", "t.yaml", "--out", "out", "--run-as", "daemon"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("can neither change user"), "{stderr}");
    assert!(stderr.contains("a password is required"), "{stderr}");
    assert!(!sandbox.path().join("out").exists());
}

fn as_nobody(tollgate: &Path, dir: &Path, path: &Path) -> Command {
    let mut command = Command::new(tollgate);
    command
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", path.display()))
        .env("HOME", dir)
        .uid(NOBODY)
        .gid(NOBODY);
    command
}
