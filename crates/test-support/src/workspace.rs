//! Making the folders a test works in: a git repository (or the folders that stand for one),
//! a bare remote and its clone, a copy of a tree, and a script the gate cannot read into.

use std::path::{Path, PathBuf};

/// `script` as a Bash call the gate cannot read into: written to `./.unseen.sh` through a
/// literal path, run by `bash`, then removed (its status kept). The gate holds a write whose
/// target it cannot see to a guardrail that bypassPermissions does not lift, so a test that
/// shows what the sandbox alone contains hands the sandbox such a write this way: a script
/// file, which bypassPermissions runs unread.
pub fn unseen_script(script: &str) -> String {
    format!(
        "printf '%s\\n' '{}' > .unseen.sh && bash ./.unseen.sh; s=$?; rm -f .unseen.sh; exit $s",
        script.replace('\'', "'\\''")
    )
}

/// `git ARGS` in `dir` with a throwaway identity; its stdout, or a panic with its stderr.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A bare `remote.git` in `dir` and its clone `ws`, with one commit pushed to `main`: where
/// a run's change is published from. Returns the clone.
pub fn remote_and_clone(dir: &Path) -> PathBuf {
    git(dir, &["init", "-q", "--bare", "remote.git"]);
    git(dir, &["clone", "-q", "remote.git", "ws"]);
    let ws = dir.join("ws");
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "init"]);
    git(&ws, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    ws
}

/// `git init -q` in `ws`; where git is missing, the folders the guardrails know a git
/// directory by (`.git/hooks`, `.git/config`) made by hand.
pub fn git_init_or_plant(ws: &Path) {
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status();
    if !git.is_ok_and(|status| status.success()) {
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    }
}

/// Copies a folder tree (files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
