//! `github publish --author … --signing-key …`: the published commit names the author given
//! and carries an SSH signature `git verify-commit` accepts; a key that is not there pushes
//! nothing; and a signing program the repository's own config names never runs.

use std::path::Path;

use serde_json::Value;

use crate::support::fake_forge::FakeForge;
use crate::support::git;
use crate::support::skip::need_program;

const AUTHOR: &str = "Release Bot <release-bot@example.com>";

/// A remote, its clone `ws` and a passing run (`run/`) that wrote NOTE.md there.
fn passing_run(dir: &Path) {
    crate::support::remote_and_clone(dir);
    std::fs::write(
        dir.join("t.yaml"),
        "version: 1\nname: change\nprompt: go\nworkdir: ws\nmode: acceptEdits\ntools: [Write]\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Write, input: {file_path: NOTE.md, content: \"note\\n\"}}\n    - - text: done\n",
    )
    .unwrap();
    let ran = crate::support::tollgate_in(dir)
        .args(["run", "t.yaml", "--out", "run"])
        .output()
        .unwrap();
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
}

fn publish(dir: &Path, forge: &FakeForge, flags: &[&str]) -> std::process::Output {
    crate::support::tollgate_in(dir)
        .args([
            "github",
            "publish",
            "--run",
            "run",
            "--workdir",
            "ws",
            "--base",
            "main",
            "--branch",
            "tollgate/signed",
        ])
        .args(flags)
        .env("GITHUB_REPOSITORY", "acme/widgets")
        .env("GITHUB_API_URL", forge.url())
        .env("GITHUB_TOKEN", "ghs_publish_token")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_commit_names_the_author_and_carries_a_signature_git_verifies() {
    if need_program("ssh-keygen", "Debian: apt-get install openssh-client").is_none() {
        return;
    }
    let forge = FakeForge::start(0).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    passing_run(dir);
    let key = dir.join("signing_key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "release-bot", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");

    // A key that is not there: refused before anything is committed or pushed.
    let missing = publish(
        dir,
        &forge,
        &["--signing-key", dir.join("no-key").to_str().unwrap()],
    );
    assert_ne!(missing.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("is not a file"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    assert!(forge.pulls().is_empty());

    let output = publish(
        dir,
        &forge,
        &["--author", AUTHOR, "--signing-key", key.to_str().unwrap()],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["published"], true, "{line}");
    let remote = dir.join("remote.git");
    assert_eq!(
        git(
            &remote,
            &[
                "log",
                "-1",
                "--format=%an <%ae>|%cn <%ce>",
                "tollgate/signed"
            ]
        )
        .trim(),
        format!("{AUTHOR}|{AUTHOR}")
    );
    // The remote's copy verifies against the public key as an allowed signer.
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = dir.join("allowed_signers");
    std::fs::write(&allowed, format!("release-bot@example.com {public}")).unwrap();
    let verified = std::process::Command::new("git")
        .args(["-c", "gpg.format=ssh", "-c"])
        .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
        .args(["verify-commit", "tollgate/signed"])
        .current_dir(&remote)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    assert!(
        String::from_utf8_lossy(&verified.stderr).contains("Good \"git\" signature"),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// The working copy's `.git/config` (the model's to write during the run) asks every commit
/// to be signed by a program of its own: publish's commit never starts it.
#[tokio::test(flavor = "multi_thread")]
async fn a_signing_program_the_repository_names_never_runs() {
    let forge = FakeForge::start(0).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    passing_run(dir);
    let ws = dir.join("ws");
    let marker = dir.join("planted-program-ran");
    let program = dir.join("sign.sh");
    std::fs::write(
        &program,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let program = program.to_str().unwrap();
    for (key, value) in [
        ("commit.gpgSign", "true"),
        ("gpg.program", program),
        ("gpg.ssh.program", program),
        ("gpg.x509.program", program),
        ("gpg.ssh.defaultKeyCommand", program),
    ] {
        git(&ws, &["config", key, value]);
    }
    for format in ["openpgp", "ssh", "x509"] {
        git(&ws, &["config", "gpg.format", format]);
        let output = publish(dir, &forge, &["--author", AUTHOR]);
        assert!(
            !marker.exists(),
            "gpg.format={format}: the planted program ran: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Signing with git's own program and no key fails: nothing is pushed.
        assert_ne!(output.status.code(), Some(0), "gpg.format={format}");
    }
}

/// A run that refused a call publishes nothing, unless the operator says so; then the pull
/// request's body says what the run did not pass.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_back_run_is_published_only_when_asked_and_the_body_says_why() {
    let forge = FakeForge::start(0).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    passing_run(dir);
    std::fs::write(dir.join("ws/.env"), "K=v\n").unwrap();
    std::fs::write(
        dir.join("t.yaml"),
        "version: 1\nname: change\nprompt: go\nworkdir: ws\nmode: acceptEdits\ntools: [Write, Read]\npermissions:\n  deny: ['Read(.env)']\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Read, input: {file_path: .env}}\n      - tool_use: {name: Write, input: {file_path: OTHER.md, content: \"x\\n\"}}\n    - - text: done\n",
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(dir.join("run"));
    let ran = crate::support::tollgate_in(dir)
        .args(["run", "t.yaml", "--out", "run"])
        .output()
        .unwrap();
    assert_ne!(ran.status.code(), Some(2), "{ran:?}");

    let held = publish(dir, &forge, &[]);
    let line: Value = serde_json::from_slice(&held.stdout).unwrap();
    assert_eq!(line["published"], false, "{line}");
    assert!(forge.pulls().is_empty());

    let forced = publish(dir, &forge, &["--even-if-held-back"]);
    assert_eq!(
        forced.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let line: Value = serde_json::from_slice(&forced.stdout).unwrap();
    assert_eq!(line["published"], true, "{line}");
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(
        pulls[0]
            .body
            .contains("**Published although the run ended policy_denied**"),
        "{}",
        pulls[0].body
    );
}
