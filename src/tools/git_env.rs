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

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
