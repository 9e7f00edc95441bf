//! The git environment of the model's commands: whatever folder a command runs git in, git
//! finds the workspace's own repository or none, never one the model planted. Owns only the
//! variables; the process runner applies them.
//!
//! Git runs code from a repository's config (`core.fsmonitor`, `core.sshCommand`, filters,
//! hooks). A folder holding `HEAD`, `objects/` and `refs/` is a bare repository to git, so a
//! model allowed to write `src/**` could plant one and have an allowed `git status` run it.
//! Three variables close that: `safe.bareRepository=explicit` (command-scope config, which a
//! repository's own config cannot override) makes git refuse a bare repository it only
//! discovered; `GIT_CEILING_DIRECTORIES` stops discovery above the workspace's repository (or
//! above the workdir when there is none); inherited variables that point git at another
//! repository are dropped. A planted non-bare `.git` is refused when written (the write
//! guardrails); `GIT_DIR` is deliberately not pinned, because every git a test suite or build
//! starts would inherit it and act on the workspace's repository instead of its own.
//! `GIT_CONFIG_GLOBAL`/`GIT_CONFIG_NOSYSTEM` stay as they are: container jobs rely on the
//! global `safe.directory` and identity, and the model cannot write either file.
//!
//! The git that runs on the trusted side after the model (tollgate's own, for a batch's
//! commit and patch; whatever the task's checks and the hooks start) gets [`trusted_git_env`]
//! on top: command-scope config, which no repository file overrides and which git passes on
//! to the git it starts in submodules, turns off what a planted `.git/config`,
//! `.git/modules/*/config` or nested repository would make it run — the fsmonitor, hooks,
//! pager, credential helpers, submodule recursion, bare repositories it only discovered — and
//! the system config is not read. What command-scope config cannot switch off (an external
//! diff, a textconv or filter driver named in a repository's config) the sandbox's restore of
//! the protected files removes before the trusted side runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::exec::ChildEnv;

/// Config for git on the trusted side, at command scope (it wins over every config file).
/// `safe.directory` is left to the user's global config: a repository owned by someone else
/// stays refused.
const TRUSTED_CONFIG: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("protocol.ext.allow", "never"),
    ("safe.bareRepository", "explicit"),
    // A planted `commit.gpgSign` would otherwise run whatever program the repository's config
    // names to sign; the programs are git's defaults, found on PATH.
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("gpg.ssh.defaultKeyCommand", ""),
];

/// An empty value empties the list of helpers every config file before it named.
const NO_CREDENTIAL_HELPER: (&str, &str) = ("credential.helper", "");

/// `env` for git on the trusted side: [`TRUSTED_CONFIG`] appended after the config entries
/// `env` already passes (`GIT_CONFIG_COUNT`), so later entries, ours, win; no credential
/// helper, no system config, no pager, no prompt.
pub fn trusted_git_env(env: &ChildEnv) -> ChildEnv {
    with_trusted_config(env, true)
}

/// [`trusted_git_env`] for tollgate's own git that talks to a remote (a batch's clone and
/// push): the user's credential helpers still answer. A helper planted in the working copy's
/// config is put back by the sandbox's restore before this runs.
pub fn trusted_git_env_for_remote(env: &ChildEnv) -> ChildEnv {
    with_trusted_config(env, false)
}

fn with_trusted_config(env: &ChildEnv, no_credentials: bool) -> ChildEnv {
    let given = env
        .get("GIT_CONFIG_COUNT")
        .and_then(|count| count.to_str())
        .and_then(|count| count.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut env = env.clone();
    let entries = TRUSTED_CONFIG
        .iter()
        .chain(no_credentials.then_some(&NO_CREDENTIAL_HELPER));
    let mut count = given;
    for (key, value) in entries {
        env = env
            .with(format!("GIT_CONFIG_KEY_{count}"), key)
            .with(format!("GIT_CONFIG_VALUE_{count}"), value);
        count += 1;
    }
    env.with("GIT_CONFIG_COUNT", count.to_string())
        .with("GIT_CONFIG_NOSYSTEM", "1")
        .with("GIT_PAGER", "cat")
        .with("GIT_TERMINAL_PROMPT", "0")
}

/// Variables that point git at a repository, an index or objects other than the one it
/// would discover; a parent process (a git hook running tollgate) may have set them.
const REPOSITORY_LOCATORS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG_PARAMETERS",
];

/// What to change in a command's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitEnv {
    pub set: Vec<(&'static str, OsString)>,
    pub remove: &'static [&'static str],
}

/// The git environment for commands run in `workdir`. The caller drops every inherited
/// `GIT_CONFIG*` variable first (this sets `GIT_CONFIG_COUNT` from zero).
pub fn git_env(workdir: &Path) -> GitEnv {
    let mut set: Vec<(&'static str, OsString)> = vec![
        ("GIT_CONFIG_COUNT", "1".into()),
        ("GIT_CONFIG_KEY_0", "safe.bareRepository".into()),
        ("GIT_CONFIG_VALUE_0", "explicit".into()),
    ];
    if let Some(ceiling) = ceiling(workdir) {
        set.push(("GIT_CEILING_DIRECTORIES", ceiling.into_os_string()));
    }
    GitEnv {
        set,
        remove: REPOSITORY_LOCATORS,
    }
}

/// The folder above the repository that holds `workdir` (found as git finds it, by a `.git`
/// entry), or above `workdir` when no repository holds it.
fn ceiling(workdir: &Path) -> Option<PathBuf> {
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let top = workdir
        .ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .unwrap_or(&workdir);
    top.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, env: &GitEnv, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new("git");
        cmd.args(args).current_dir(dir);
        for name in env.remove {
            cmd.env_remove(name);
        }
        cmd.envs(env.set.iter().map(|(k, v)| (k, v)));
        cmd.output().unwrap()
    }

    fn trusted(dir: &Path, env: &ChildEnv, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .envs(env.vars().iter().map(|(k, v)| (k, v)));
        cmd.output().unwrap()
    }

    #[test]
    fn trusted_git_runs_nothing_a_planted_config_or_hook_names() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().canonicalize().unwrap();
        let marker = root.join("MARK");
        let plain = ChildEnv::from_vars(vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap()),
            ("HOME".into(), root.clone().into_os_string()),
            ("GIT_CONFIG_COUNT".into(), "2".into()),
            ("GIT_CONFIG_KEY_0".into(), "user.name".into()),
            ("GIT_CONFIG_VALUE_0".into(), "t".into()),
            ("GIT_CONFIG_KEY_1".into(), "user.email".into()),
            ("GIT_CONFIG_VALUE_1".into(), "t@t".into()),
        ]);
        let ok = |out: std::process::Output| assert!(out.status.success(), "{out:?}");
        let sub = root.join("sub");
        let ws = root.join("ws");
        for dir in [&sub, &ws] {
            std::fs::create_dir_all(dir).unwrap();
            ok(trusted(dir, &plain, &["init", "-q"]));
            ok(trusted(
                dir,
                &plain,
                &["commit", "-q", "--allow-empty", "-m", "0"],
            ));
        }
        let add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
        let mut args = add.to_vec();
        let sub_url = sub.display().to_string();
        args.extend([sub_url.as_str(), "sub"]);
        ok(trusted(&ws, &plain, &args));
        ok(trusted(&ws, &plain, &["commit", "-q", "-m", "1"]));
        let run = format!("\"touch {}; false\"", marker.display());
        let hooks = root.join("planted-hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for dir in [ws.join(".git/hooks"), hooks.clone()] {
            let hook = dir.join("pre-commit");
            std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let planted = format!(
            "[core]\n\tfsmonitor = {run}\n\thooksPath = {}\n\tpager = {run}\n[credential]\n\thelper = {run}\n",
            hooks.display()
        );
        for config in [ws.join(".git/config"), ws.join(".git/modules/sub/config")] {
            let mut text = std::fs::read_to_string(&config).unwrap();
            text.push_str(&planted);
            std::fs::write(&config, text).unwrap();
        }
        std::fs::write(ws.join("sub/new"), "x").unwrap();
        std::fs::write(ws.join("file"), "x").unwrap();
        // The same commands without the trusted environment run what was planted.
        trusted(&ws, &plain, &["status"]);
        assert!(
            marker.exists(),
            "the planted fsmonitor should run unprotected"
        );
        std::fs::remove_file(&marker).unwrap();

        let env = trusted_git_env(&plain);
        ok(trusted(&ws, &env, &["status"]));
        ok(trusted(&ws, &env, &["-C", "sub", "status"]));
        ok(trusted(&ws, &env, &["diff", "HEAD"]));
        ok(trusted(&ws, &env, &["add", "-A"]));
        ok(trusted(&ws, &env, &["commit", "-q", "-m", "2"]));
        ok(trusted(&ws, &env, &["log", "-p", "-1"]));
        assert!(!marker.exists(), "a planted command ran");
        // The entries the caller gave still hold (the commit above had its identity).
        let name = trusted(&ws, &env, &["config", "user.name"]);
        assert_eq!(String::from_utf8_lossy(&name.stdout).trim(), "t");
    }

    #[test]
    fn the_ceiling_sits_above_the_workspace_repository() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub/dir")).unwrap();
        std::fs::create_dir_all(root.join("plain/dir")).unwrap();
        assert_eq!(ceiling(&repo.join("sub/dir")), Some(root.clone()));
        assert_eq!(ceiling(&repo), Some(root.clone()));
        assert_eq!(ceiling(&root.join("plain/dir")), Some(root.join("plain")));
    }

    #[test]
    fn git_refuses_a_planted_bare_repository_and_still_uses_the_workspace_one() {
        let scratch = tempfile::tempdir().unwrap();
        let ws = scratch.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let plain = GitEnv {
            set: Vec::new(),
            remove: &[],
        };
        assert!(git(&ws, &plain, &["init", "-q"]).status.success());
        let planted = ws.join("src/evil");
        std::fs::create_dir_all(planted.join("objects")).unwrap();
        std::fs::create_dir_all(planted.join("refs")).unwrap();
        std::fs::write(planted.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let marker = scratch.path().join("MARK");
        std::fs::write(
            planted.join("config"),
            format!(
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {}\n\tfsmonitor = \"touch {}; false\"\n",
                ws.join("src").display(),
                marker.display()
            ),
        )
        .unwrap();
        // Without the environment the planted repository runs its fsmonitor: the test can fail.
        git(&planted, &plain, &["status"]);
        assert!(
            marker.exists(),
            "the planted repository should work unconfined"
        );
        std::fs::remove_file(&marker).unwrap();

        let env = git_env(&ws);
        let status = git(&planted, &env, &["status"]);
        assert!(!status.status.success());
        assert!(
            String::from_utf8_lossy(&status.stderr).contains("safe.bareRepository"),
            "{status:?}"
        );
        assert!(
            !git(&ws, &env, &["-C", "src/evil", "status"])
                .status
                .success()
        );
        assert!(!marker.exists());
        // Ordinary use goes on: the workspace's repository from any folder in it, explicit
        // bare repositories, repositories a test suite makes for itself.
        assert!(git(&ws.join("src"), &env, &["status"]).status.success());
        let own = scratch.path().join("own");
        assert!(
            git(scratch.path(), &env, &["init", "-q", "own"])
                .status
                .success()
        );
        assert!(git(&own, &env, &["status"]).status.success());
        let bare = scratch.path().join("bare.git");
        assert!(
            git(scratch.path(), &env, &["init", "-q", "--bare", "bare.git"])
                .status
                .success()
        );
        assert!(
            git(&bare, &env, &["--git-dir", ".", "rev-parse", "--git-dir"])
                .status
                .success()
        );
    }
}
