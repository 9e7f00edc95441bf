//! Each repository's own working copy inside the batch folder: a `git worktree` of a local
//! repository (its checkout is never touched) or a fresh clone of a URL; then the branch,
//! the commit of the agent's change and its patch file. All git goes through `exec::run`,
//! started without a keeper (`Reach::Group`).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use super::manifest::{Repo, RepoSource};
use super::signing::CommitIdentity;
use crate::exec::{self, ChildEnv, Ending, ExecRequest, Reach};
use crate::tools::{trusted_git_env, trusted_git_env_for_remote};

/// A clone of a large repository over a slow link can take a while; a hung one must not.
const GIT_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Error)]
pub enum GitError {
    #[error("cannot start git: {0}")]
    Start(std::io::Error),
    #[error("`git {command}` failed: {detail}")]
    Failed { command: String, detail: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Runs git with the given arguments in `cwd`; its stdout on success. Local work: git with
/// the trusted side's config, which a planted `.git/config` or hook cannot change.
async fn git(cwd: &Path, args: &[&str]) -> Result<String, GitError> {
    run_git(cwd, args, trusted_git_env).await
}

/// [`git`] for a clone, a listing or a push: the user's credential helpers still answer.
async fn git_remote(cwd: &Path, args: &[&str]) -> Result<String, GitError> {
    run_git(cwd, args, trusted_git_env_for_remote).await
}

async fn run_git(
    cwd: &Path,
    args: &[&str],
    trusted: fn(&ChildEnv) -> ChildEnv,
) -> Result<String, GitError> {
    // No prompt may wait for a password nobody will type; no secret of tollgate's reaches git.
    let env = trusted(&ChildEnv::without_secrets(&BTreeSet::new()));
    // A commit would otherwise start `git maintenance run --auto` after it: one more process
    // per repository for housekeeping the batch's short-lived working copies never need.
    let mut argv: Vec<OsString> = vec!["git".into(), "-c".into(), "maintenance.auto=false".into()];
    argv.extend(args.iter().map(OsString::from));
    let mut request = ExecRequest::bash("", cwd.to_path_buf(), env, GIT_TIMEOUT);
    request.argv = argv;
    // git keeps what it starts in its process group, and this git runs no hooks, fsmonitor
    // or pager: the group is all there is to end, and starting it without forking the runner
    // is most of a batch's own time per repository (benches/README.md, issue 51).
    request.reach = Reach::Group;
    // A patch or a listing is the answer itself: keep far more than a command's output.
    request.capture.max_bytes = 64 * 1024 * 1024;
    let outcome = exec::run(request, std::future::pending())
        .await
        .map_err(GitError::Start)?;
    let command = args.join(" ");
    match outcome.ending {
        Ending::Exited(0) => Ok(outcome.stdout.text),
        Ending::Exited(_) | Ending::Signalled(_) => Err(GitError::Failed {
            command,
            detail: last_line(&outcome.stderr.text),
        }),
        Ending::TimedOut => Err(GitError::Failed {
            command,
            detail: format!("no answer within {}s", GIT_TIMEOUT.as_secs()),
        }),
        Ending::Cancelled => Err(GitError::Failed {
            command,
            detail: "cancelled".into(),
        }),
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
}

/// The commit the repository would start from now: part of its cache key.
pub async fn source_head(repo: &Repo) -> Result<String, GitError> {
    let wanted = repo.git_ref.as_deref().unwrap_or("HEAD");
    match &repo.source {
        RepoSource::Local(path) => {
            let spec = format!("{wanted}^{{commit}}");
            Ok(git(path, &["rev-parse", "--verify", &spec])
                .await?
                .trim()
                .to_string())
        }
        RepoSource::Url(url) => {
            let listed = git_remote(Path::new("/"), &["ls-remote", url, wanted]).await?;
            listed
                .split_whitespace()
                .next()
                .map(str::to_string)
                .or_else(|| {
                    // A commit id is not advertised by ls-remote: it is its own head.
                    (wanted.len() == 40 && wanted.chars().all(|c| c.is_ascii_hexdigit()))
                        .then(|| wanted.to_string())
                })
                .ok_or_else(|| GitError::Failed {
                    command: format!("ls-remote {url} {wanted}"),
                    detail: "no such ref".into(),
                })
        }
    }
}

/// A fresh working copy of `repo` at `head` in `dir` (whatever an earlier attempt left
/// there is removed first), on `branch` (made or reset to `head`).
pub async fn prepare(repo: &Repo, head: &str, dir: &Path, branch: &str) -> Result<(), GitError> {
    discard(repo, dir).await;
    let target = dir.to_string_lossy().into_owned();
    match &repo.source {
        RepoSource::Local(path) => {
            let add = ["worktree", "add", "--quiet", "-B", branch, &target, head];
            if git(path, &add).await.is_err() {
                // A record of a working copy once here and deleted by hand makes git refuse
                // the path until pruned. A `worktree add` killed with the batch leaves the
                // record locked as "initializing", which `prune` keeps, and may leave the
                // branch's lock from the `git branch --force` it runs. Anything else fails
                // again, with git's reason.
                let _ = git(path, &["worktree", "unlock", &target]).await;
                let _ = git(path, &["worktree", "prune"]).await;
                clear_source_branch_lock(path, branch).await?;
                git(path, &add).await?;
            }
        }
        RepoSource::Url(url) => {
            git_remote(
                Path::new("/"),
                &["clone", "--quiet", "--no-checkout", url, &target],
            )
            .await?;
            git(dir, &["checkout", "--quiet", "-B", branch, head]).await?;
        }
    }
    Ok(())
}

/// Removes a working copy (and a local repository's record of it).
pub async fn discard(repo: &Repo, dir: &Path) {
    if let RepoSource::Local(path) = &repo.source {
        // No folder, nothing to remove (`prepare` prunes a stale record if git refuses).
        if dir.symlink_metadata().is_ok() {
            let target = dir.to_string_lossy().into_owned();
            // Twice: a copy whose `worktree add` was killed is still locked as initializing.
            let _ = git(path, &["worktree", "remove", "--force", "--force", &target]).await;
            let _ = std::fs::remove_dir_all(dir);
            let _ = git(path, &["worktree", "prune"]).await;
        }
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes the lock files a git process killed with an earlier batch left in this working
/// copy (the index's, HEAD's and the branch's), which would make every later `git add` or
/// `git commit` refuse. Safe only because the batch holds its folder's lock: no other git
/// process works in a batch's working copy.
async fn clear_stale_locks(dir: &Path, branch: &str) -> Result<(), GitError> {
    let branch_lock = format!("refs/heads/{branch}.lock");
    let paths = match lock_paths(dir, &branch_lock) {
        Some(paths) => paths,
        None => git(dir, &lock_query(&branch_lock))
            .await?
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| dir.join(line))
            .collect(),
    };
    for path in paths {
        if path.exists() {
            tracing::info!(
                "removing {}, left by a git process killed with the batch",
                path.display()
            );
            std::fs::remove_file(&path).map_err(|source| GitError::Write { path, source })?;
        }
    }
    Ok(())
}

/// Removes the branch's lock file in a local source repository, which a git killed with an
/// earlier batch inside `worktree add -B` left there. Only the branch's: the branch is the
/// batch's own (it is reset with `-B`), while the source's index and `HEAD` are its owner's,
/// whose own git may hold them now.
async fn clear_source_branch_lock(source: &Path, branch: &str) -> Result<(), GitError> {
    let branch_lock = format!("refs/heads/{branch}.lock");
    let path = match lock_paths(source, &branch_lock).and_then(|paths| paths.last().cloned()) {
        Some(path) => path,
        None => source.join(
            git(source, &["rev-parse", "--git-path", &branch_lock])
                .await?
                .trim_end_matches(['\n', '\r']),
        ),
    };
    if path.exists() {
        tracing::info!(
            "removing {}, left by a git process killed with the batch",
            path.display()
        );
        std::fs::remove_file(&path).map_err(|source| GitError::Write { path, source })?;
    }
    Ok(())
}

/// `git rev-parse` arguments that print the three lock files' paths, one a line.
fn lock_query(branch_lock: &str) -> [&str; 7] {
    [
        "rev-parse",
        "--git-path",
        "index.lock",
        "--git-path",
        "HEAD.lock",
        "--git-path",
        branch_lock,
    ]
}

/// Where git keeps the index's, HEAD's and the branch's lock files for the working copy in
/// `dir`, read from its `.git` as git lays it out for a clone (a folder) or a worktree (a
/// `gitdir:` file, the shared refs in the folder its `commondir` names) with the files ref
/// backend; `None` for anything else (a reftable repository, an unexpected layout), which
/// `git rev-parse --git-path` answers instead.
fn lock_paths(dir: &Path, branch_lock: &str) -> Option<Vec<PathBuf>> {
    let dot_git = dir.join(".git");
    let metadata = dot_git.symlink_metadata().ok()?;
    let git_dir = if metadata.is_dir() {
        dot_git
    } else if metadata.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let named = Path::new(
            text.strip_prefix("gitdir: ")?
                .trim_end_matches(['\n', '\r']),
        );
        dir.join(named)
    } else {
        return None;
    };
    let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end_matches(['\n', '\r'])),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => git_dir.clone(),
        Err(_) => return None,
    };
    let files_backend = git_dir.join("HEAD").is_file()
        && common_dir.join("refs").is_dir()
        && !common_dir.join("reftable").exists();
    files_backend.then(|| {
        vec![
            git_dir.join("index.lock"),
            git_dir.join("HEAD.lock"),
            common_dir.join(branch_lock),
        ]
    })
}

/// Commits everything the agent changed on top of `base` on `branch`; `None` when nothing
/// changed. `identity` names the author and the signing key; a commit asked to be signed that
/// carries no signature is an error, not a commit.
pub async fn commit(
    dir: &Path,
    base: &str,
    branch: &str,
    message: &str,
    identity: &CommitIdentity,
) -> Result<Option<String>, GitError> {
    clear_stale_locks(dir, branch).await?;
    git(dir, &["add", "-A"]).await?;
    if git(dir, &["diff", "--cached", "--quiet", "--no-ext-diff"])
        .await
        .is_ok()
    {
        // A batch killed between the commit and its journal entry left the commit made:
        // it is the change, not "no change".
        let current = git(dir, &["rev-parse", "HEAD"]).await?.trim().to_string();
        return Ok((current != base).then_some(current));
    }
    // An identity of the user's when git has one; else a neutral one, so the commit works
    // on a bare CI machine.
    let has_identity = git(dir, &["config", "user.email"]).await.is_ok();
    let config = identity.config_args(has_identity);
    let mut args: Vec<&str> = config.iter().map(String::as_str).collect();
    args.extend(["commit", "--quiet", "--no-verify"]);
    args.extend(identity.sign_flag());
    args.extend(["-m", message]);
    git(dir, &args).await?;
    let head = git(dir, &["rev-parse", "HEAD"]).await?.trim().to_string();
    if identity.signing.is_some() {
        let object = git(dir, &["cat-file", "commit", &head]).await?;
        let headers = object.split("\n\n").next().unwrap_or_default();
        if !headers.lines().any(|line| line.starts_with("gpgsig")) {
            return Err(GitError::Failed {
                command: "commit --gpg-sign".into(),
                detail: "the commit carries no signature".into(),
            });
        }
    }
    Ok(Some(head))
}

/// The committed change as a mail-style patch (`git am` applies it).
pub async fn write_patch(dir: &Path, base: &str, path: &Path) -> Result<(), GitError> {
    let range = format!("{base}..HEAD");
    let patch = git(dir, &["format-patch", "--stdout", "--no-ext-diff", &range]).await?;
    crate::out_dir::write_atomic(path, patch.as_bytes()).map_err(|err| GitError::Write {
        path: err.path,
        source: err.source,
    })
}

/// Pushes the branch to `remote`, replacing what an earlier batch pushed there: the branch is
/// the batch's own.
/// The commit `dir`'s working copy is on.
pub async fn head(dir: &Path) -> Result<String, GitError> {
    Ok(git(dir, &["rev-parse", "HEAD"]).await?.trim().to_string())
}

pub async fn push(dir: &Path, remote: &str, branch: &str) -> Result<(), GitError> {
    let refspec = format!("+HEAD:refs/heads/{branch}");
    git_remote(dir, &["push", "--quiet", remote, &refspec]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// What git itself answers for the three lock files, made absolute.
    fn from_git(dir: &Path, branch_lock: &str) -> Vec<PathBuf> {
        git_in(dir, &lock_query(branch_lock))
            .lines()
            .map(|line| dir.join(line))
            .map(|path| crate::base::normalize_lexically(&path))
            .collect()
    }

    fn one_commit_repo(scratch: &Path) -> PathBuf {
        let repo = scratch.join("repo");
        std::fs::create_dir(&repo).unwrap();
        git_in(&repo, &["init", "-q"]);
        std::fs::write(repo.join("a"), "a\n").unwrap();
        git_in(&repo, &["add", "a"]);
        git_in(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "a",
            ],
        );
        repo
    }

    /// A working copy made again over the last one, and over one whose folder was deleted by
    /// hand (git still has its record and refuses the path until pruned).
    #[tokio::test]
    async fn a_working_copy_is_made_again_over_a_left_one_and_over_a_deleted_one() {
        let scratch = tempfile::tempdir().unwrap();
        let path = one_commit_repo(scratch.path());
        let repo = Repo {
            id: "repo".into(),
            source: RepoSource::Local(path.clone()),
            git_ref: None,
            params: std::collections::BTreeMap::new(),
        };
        let head = source_head(&repo).await.unwrap();
        let work = scratch.path().join("work");
        for leave in ["a file left in it", "the folder deleted by hand"] {
            prepare(&repo, &head, &work, "fix/x").await.unwrap();
            assert!(work.join("a").is_file(), "{leave}");
            assert_eq!(git_in(&work, &["branch", "--show-current"]).trim(), "fix/x");
            match leave {
                "a file left in it" => std::fs::write(work.join("left"), "x").unwrap(),
                _ => std::fs::remove_dir_all(&work).unwrap(),
            }
        }
        prepare(&repo, &head, &work, "fix/x").await.unwrap();
        assert!(!work.join("left").exists());
        assert_eq!(git_in(&work, &["branch", "--show-current"]).trim(), "fix/x");
    }

    /// What a `git worktree add -B` killed with SIGKILL (the batch killed with it) leaves in
    /// the source repository, each state found by killing one at random moments: the copy's
    /// record still locked as "initializing" (so neither `prune` nor a plain `remove --force`
    /// clears it, and the branch counts as checked out there), its `HEAD.lock`, and the
    /// branch's lock from the `git branch --force` it runs. The next attempt starts over.
    #[tokio::test]
    async fn a_working_copy_is_made_again_over_what_a_killed_worktree_add_left() {
        let scratch = tempfile::tempdir().unwrap();
        let path = one_commit_repo(scratch.path());
        let repo = Repo {
            id: "repo".into(),
            source: RepoSource::Local(path.clone()),
            git_ref: None,
            params: std::collections::BTreeMap::new(),
        };
        let head = source_head(&repo).await.unwrap();
        let work = scratch.path().join("work");
        for folder_left in [true, false] {
            prepare(&repo, &head, &work, "fix/x").await.unwrap();
            let record = path.join(".git/worktrees/work");
            std::fs::write(record.join("locked"), "initializing").unwrap();
            std::fs::write(record.join("HEAD.lock"), "").unwrap();
            std::fs::write(path.join(".git/refs/heads/fix/x.lock"), "").unwrap();
            if !folder_left {
                std::fs::remove_dir_all(&work).unwrap();
            }
            prepare(&repo, &head, &work, "fix/x")
                .await
                .unwrap_or_else(|err| panic!("folder left: {folder_left}: {err}"));
            assert!(work.join("a").is_file(), "folder left: {folder_left}");
            assert_eq!(git_in(&work, &["branch", "--show-current"]).trim(), "fix/x");
            assert!(!path.join(".git/refs/heads/fix/x.lock").exists());
        }
    }

    #[test]
    fn the_lock_files_are_where_git_says_for_a_clone_and_for_a_worktree() {
        let scratch = tempfile::tempdir().unwrap();
        let repo = one_commit_repo(scratch.path());
        let work = scratch.path().join("work");
        git_in(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-B",
                "fix/x",
                work.to_str().unwrap(),
                "HEAD",
            ],
        );
        let lock = "refs/heads/fix/x.lock";
        for dir in [&repo, &work] {
            let ours: Vec<PathBuf> = lock_paths(dir, lock)
                .unwrap()
                .iter()
                .map(|path| crate::base::normalize_lexically(path))
                .collect();
            assert_eq!(ours, from_git(dir, lock), "{}", dir.display());
        }
        // An unexpected layout is left to git.
        let odd = scratch.path().join("odd");
        std::fs::create_dir_all(&odd).unwrap();
        std::fs::write(odd.join(".git"), "not a gitfile\n").unwrap();
        assert_eq!(lock_paths(&odd, lock), None);
    }
}
