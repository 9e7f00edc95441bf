//! What a call's verdict lets it change, and which measured changes exceed that. Pure:
//! paths in, reasons out (the one disk look, whether a folder holds a `HEAD`, is injected).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::effects::{Change, Effect};
use crate::base::has_prefix;
use crate::policy::{git_dir_write, write_guardrail};

/// How far a verdict reaches, narrowest first.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// A read-only verdict (the analyser's proof, a read-only tool): nothing may change.
    #[default]
    Nothing,
    /// Only the paths the decision named (a Write's or Edit's `file_path`; a command's
    /// redirections and the files its arguments name), what is below them, and folders made
    /// on the way to them.
    Named,
    /// A program the verdict let run without naming what it writes (a build or test runner
    /// or git allowed by a rule; a command the mode, a hook or the classifier allowed; an MCP
    /// tool): anything in the workspace but its guarded paths, and the named paths.
    Workspace,
}

/// What git may write in its own directory when the call runs it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GitWrites {
    #[default]
    None,
    /// Its index, which `git status` and `git diff` refresh.
    Index,
    /// Its bookkeeping: index, objects, refs, logs, `HEAD` and the state of a merge, rebase
    /// or commit in progress — never `config`, `hooks/`, `info/`, `commondir`, `modules/`
    /// or `worktrees/`, which git obeys or runs.
    Repository,
}

impl GitWrites {
    fn is_none(&self) -> bool {
        *self == GitWrites::None
    }

    /// Whether git may write `member` (a path relative to a git directory).
    fn allows(self, member: &Path) -> bool {
        let Some(Component::Normal(first)) = member.components().next() else {
            return false;
        };
        let first = first.to_string_lossy();
        let name = first.strip_suffix(".lock").unwrap_or(&first);
        match self {
            GitWrites::None => false,
            GitWrites::Index => name == "index" && member.components().count() == 1,
            GitWrites::Repository => {
                GIT_BOOKKEEPING.contains(&name)
                    || GIT_STATE_PREFIXES
                        .iter()
                        .any(|prefix| name.starts_with(prefix))
            }
        }
    }
}

/// What git writes in its directory as it works (files and the folders below them).
const GIT_BOOKKEEPING: &[&str] = &[
    "index",
    "objects",
    "refs",
    "logs",
    "packed-refs",
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "AUTO_MERGE",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "rr-cache",
    "shallow",
    "gc.pid",
    "gc.log",
];

/// `MERGE_HEAD`, `MERGE_MSG`, `CHERRY_PICK_HEAD`, `BISECT_LOG`…
const GIT_STATE_PREFIXES: &[&str] = &["MERGE_", "CHERRY_PICK_", "REVERT_", "REBASE_", "BISECT_"];

/// What a call (or the calls of a batch together) may change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowance {
    pub reach: Reach,
    /// The paths the decision named (absolute while judging; relative to the workspace in
    /// the record when inside it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "GitWrites::is_none")]
    pub git: GitWrites,
}

impl Allowance {
    pub fn nothing(git: GitWrites) -> Allowance {
        Allowance {
            reach: Reach::Nothing,
            paths: Vec::new(),
            git,
        }
    }

    pub fn named(paths: Vec<PathBuf>, git: GitWrites) -> Allowance {
        Allowance {
            reach: Reach::Named,
            paths,
            git,
        }
    }

    pub fn workspace(paths: Vec<PathBuf>, git: GitWrites) -> Allowance {
        Allowance {
            reach: Reach::Workspace,
            paths,
            git,
        }
    }

    /// What calls run together may change together.
    pub fn union(mut self, other: &Allowance) -> Allowance {
        self.reach = self.reach.max(other.reach);
        self.git = self.git.max(other.git);
        for path in &other.paths {
            if !self.paths.contains(path) {
                self.paths.push(path.clone());
            }
        }
        self
    }

    /// Why `effect` (its path absolute) is more than this allows; `None` when it is allowed.
    pub(super) fn exceeds(&self, effect: &Effect, bounds: &Bounds<'_>) -> Option<String> {
        let path = &effect.path;
        let named = self.paths.iter().any(|named| {
            has_prefix(path, named)
                // A folder made on the way to a named path.
                || (effect.change == Change::Created && has_prefix(named, path))
        });
        if named {
            return None;
        }
        if let Some(member) = bounds.git_member(path) {
            if self.git.allows(&member) {
                return None;
            }
            if self.reach != Reach::Nothing {
                return Some(format!(
                    "a guarded path: {} is git's own ({})",
                    member.display(),
                    if member.starts_with("config")
                        || member.starts_with("hooks")
                        || member.starts_with("commondir")
                        || member.starts_with("info")
                    {
                        "git obeys or runs it"
                    } else {
                        "the verdict did not let git write it"
                    }
                ));
            }
        }
        match self.reach {
            Reach::Nothing => Some("its verdict was read-only".to_string()),
            Reach::Named | Reach::Workspace => {
                if let Some(guardrail) = bounds.guarded(path) {
                    Some(format!("a guarded path: {guardrail}"))
                } else if !has_prefix(path, bounds.root) {
                    Some("outside the workspace".to_string())
                } else if self.reach == Reach::Named {
                    Some("not among the paths its decision named".to_string())
                } else {
                    None
                }
            }
        }
    }
}

/// Where a verdict's bounds lie on disk.
pub(super) struct Bounds<'a> {
    /// The workspace (canonical).
    pub root: &'a Path,
    /// Git directories outside the workspace that are the repository's (longest first).
    pub git_dirs: &'a [PathBuf],
    pub home: Option<&'a Path>,
    /// Whether a folder holds a `HEAD` (a git directory made inside the workspace).
    pub holds_head: &'a dyn Fn(&Path) -> bool,
}

impl Bounds<'_> {
    /// `path` relative to the git directory it is in: the repository's own, or any `.git`
    /// folder inside the workspace (the last one on the path).
    fn git_member(&self, path: &Path) -> Option<PathBuf> {
        if let Some(dir) = self.git_dirs.iter().find(|dir| has_prefix(path, dir)) {
            return path.strip_prefix(dir).ok().map(Path::to_path_buf);
        }
        let inside = path.strip_prefix(self.root).ok()?;
        let names: Vec<Component<'_>> = inside.components().collect();
        let at = names
            .iter()
            .rposition(|name| matches!(name, Component::Normal(n) if *n == ".git"))?;
        let member: PathBuf = names[at + 1..].iter().collect();
        (!member.as_os_str().is_empty()).then_some(member)
    }

    /// The guardrail a change of `path` trips, as a write to it would.
    fn guarded(&self, path: &Path) -> Option<String> {
        if self.git_dirs.iter().any(|dir| has_prefix(path, dir)) {
            return Some("the repository's git directory (its config and hooks run code)".into());
        }
        let inside = path.strip_prefix(self.root).ok()?;
        let holds_head = |dir: &Path| (self.holds_head)(&self.root.join(dir));
        write_guardrail(inside, self.home)
            .or_else(|| git_dir_write(inside, &holds_head))
            .map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(path: &str, change: Change) -> Effect {
        Effect::new(PathBuf::from(path), change)
    }

    fn judge(allowance: &Allowance, path: &str, change: Change) -> Option<String> {
        let git_dirs = [PathBuf::from("/repo/.git")];
        let bounds = Bounds {
            root: Path::new("/repo/ws"),
            git_dirs: &git_dirs,
            home: None,
            holds_head: &|dir| dir.ends_with("planted"),
        };
        allowance.exceeds(&effect(path, change), &bounds)
    }

    #[test]
    fn each_reach_allows_what_it_says_and_no_more() {
        let nothing = Allowance::nothing(GitWrites::Index);
        assert_eq!(
            judge(&nothing, "/repo/ws/x", Change::Created).as_deref(),
            Some("its verdict was read-only")
        );
        assert_eq!(judge(&nothing, "/repo/.git/index", Change::Modified), None);
        assert!(judge(&nothing, "/repo/.git/config", Change::Modified).is_some());

        let named = Allowance::named(vec!["/repo/ws/out/a.txt".into()], GitWrites::None);
        assert_eq!(judge(&named, "/repo/ws/out/a.txt", Change::Modified), None);
        assert_eq!(judge(&named, "/repo/ws/out", Change::Created), None);
        assert!(judge(&named, "/repo/ws/out", Change::Deleted).is_some());
        assert_eq!(
            judge(&named, "/repo/ws/cache.bin", Change::Created).as_deref(),
            Some("not among the paths its decision named")
        );
        assert_eq!(
            judge(&named, "/elsewhere/x", Change::Created).as_deref(),
            Some("outside the workspace")
        );

        let program = Allowance::workspace(Vec::new(), GitWrites::Repository);
        assert_eq!(
            judge(&program, "/repo/ws/target/debug/x", Change::Created),
            None
        );
        assert_eq!(
            judge(&program, "/repo/.git/objects/ab/cd", Change::Created),
            None
        );
        assert_eq!(judge(&program, "/repo/.git/HEAD", Change::Modified), None);
        for guarded in [
            "/repo/.git/config",
            "/repo/.git/hooks/pre-commit",
            "/repo/.git/commondir",
            "/repo/ws/.tollgate/policy.yaml",
            "/repo/ws/src/.envrc",
            "/repo/ws/sub/.git/config",
            "/repo/ws/planted/config",
        ] {
            let why = judge(&program, guarded, Change::Created);
            assert!(
                why.is_some_and(|why| why.starts_with("a guarded path")),
                "{guarded}"
            );
        }
        assert_eq!(
            judge(&program, "/tmp/x", Change::Created).as_deref(),
            Some("outside the workspace")
        );
    }

    #[test]
    fn calls_run_together_may_do_what_any_of_them_may() {
        let together = Allowance::nothing(GitWrites::Index).union(&Allowance::named(
            vec!["/repo/ws/a".into()],
            GitWrites::None,
        ));
        assert_eq!(together.reach, Reach::Named);
        assert_eq!(together.git, GitWrites::Index);
        assert_eq!(together.paths, [PathBuf::from("/repo/ws/a")]);
    }
}
