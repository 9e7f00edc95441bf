//! The effect ledger: what each executed call really changed in the workspace and its
//! guarded paths, measured by comparing the file system's metadata before and after it, and
//! whether that is more than the call's verdict allowed. It records and judges; it never
//! changes a file, and it decides no call (the gate did, before).
//!
//! Calls that run alone are measured alone; calls that run together (read-only calls the
//! scheduler overlaps) are measured as one batch, and each carries the batch's changes.

mod allowance;
mod effects;
mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub use allowance::{Allowance, GitWrites, Reach};
pub use effects::{Change, Effect};
pub use snapshot::{Coverage, Scope, Snapshot};

use crate::base::{has_prefix, normalize_lexically};

/// Entries a snapshot may hold by default: a large repository with its build output
/// (benches/README.md measures the cost per entry).
pub const DEFAULT_MAX_ENTRIES: usize = 200_000;
/// The most `effects.max_entries` may be.
pub const MAX_MAX_ENTRIES: usize = 10_000_000;

/// What the ledger measures (the task's `effects.scope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerScope {
    /// Every path in the workspace, and the guarded paths outside it.
    #[default]
    Workspace,
    /// Only the guarded paths (and every symbolic link): cheaper on a very large workspace,
    /// blind to other files.
    Guarded,
    /// No ledger: no call's effects are measured.
    Off,
}

impl LedgerScope {
    pub const ALL: [LedgerScope; 3] = [
        LedgerScope::Workspace,
        LedgerScope::Guarded,
        LedgerScope::Off,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LedgerScope::Workspace => "workspace",
            LedgerScope::Guarded => "guarded",
            LedgerScope::Off => "off",
        }
    }
}

/// The task's `effects:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerConfig {
    pub scope: LedgerScope,
    /// Past this many entries a snapshot is incomplete, and every call it measures counts
    /// as exceeding its verdict (fail closed).
    pub max_entries: usize,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            scope: LedgerScope::Workspace,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

impl LedgerConfig {
    /// One line for the summary and the logs.
    pub fn describe(&self) -> String {
        match self.scope {
            LedgerScope::Off => "off (effects.scope: off)".to_string(),
            scope => format!(
                "{}, at most {} entries",
                match scope {
                    LedgerScope::Guarded => "guarded paths and links only",
                    _ => "the whole workspace",
                },
                self.max_entries
            ),
        }
    }
}

/// Whether a call's changes were measured around it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// Nothing else ran while it did: every change is the call's.
    Call,
    /// It ran together with the calls in `batch`: the changes are theirs together.
    Batch,
}

/// What one executed call changed (the `effects` of its `tool_result`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEffects {
    pub attribution: Attribution,
    /// Under `batch`: the ids of every call of the batch, this one included, in call order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<String>,
    /// What the verdict (of every call of the batch together) let it change.
    pub allowed: Allowance,
    /// Every change seen, in path order; each one more than `allowed` says why.
    pub changes: Vec<Effect>,
    /// Why the measure is not whole (too many entries, a folder that cannot be listed): the
    /// call then counts as exceeding its verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

impl CallEffects {
    /// Whether the call did more than its verdict allowed, or could not be shown not to.
    pub fn exceeded(&self) -> bool {
        self.incomplete.is_some() || self.changes.iter().any(|change| change.exceeds.is_some())
    }

    /// The changes that exceed the verdict.
    pub fn excess(&self) -> impl Iterator<Item = &Effect> {
        self.changes
            .iter()
            .filter(|change| change.exceeds.is_some())
    }

    /// Adds what the sandbox found changed among its protected files and put back after the
    /// command (paths relative to the workspace): every one is a guarded path, so more than
    /// any verdict allows.
    pub fn add_restored(&mut self, violations: &[crate::sandbox::Violation]) {
        for violation in violations {
            let change = match violation.change {
                crate::sandbox::Change::Created => Change::Created,
                crate::sandbox::Change::Modified => Change::Modified,
                crate::sandbox::Change::Removed => Change::Deleted,
            };
            let why = "a guarded path: a protected file, which sandboxed commands may not change";
            match self
                .changes
                .iter_mut()
                .find(|effect| effect.path == violation.path)
            {
                Some(effect) => {
                    effect.restored = violation.unrestored.is_none();
                    effect.exceeds.get_or_insert_with(|| why.to_string());
                }
                None => {
                    let mut effect = Effect::new(violation.path.clone(), change);
                    effect.restored = violation.unrestored.is_none();
                    effect.exceeds = Some(why.to_string());
                    self.changes.push(effect);
                }
            }
        }
        self.changes
            .sort_by(|a, b| a.path.cmp(&b.path).then(a.change.cmp(&b.change)));
    }

    /// One line: `created .git/hooks/pre-commit (a guarded path: …)`, for the summary.
    pub fn describe_excess(&self) -> String {
        let mut parts: Vec<String> = self
            .excess()
            .map(|effect| {
                format!(
                    "{effect} — {}",
                    effect.exceeds.as_deref().unwrap_or_default()
                )
            })
            .collect();
        if let Some(why) = &self.incomplete {
            parts.push(format!("not measured whole: {why}"));
        }
        parts.join("; ")
    }
}

/// The run's ledger: where it looks, and the snapshot taken before the calls running now.
pub struct Ledger {
    config: LedgerConfig,
    scope: Arc<Scope>,
    /// The repository's git directories outside the workspace, longest first.
    git_dirs: Vec<PathBuf>,
    home: Option<PathBuf>,
    before: Option<Snapshot>,
}

impl Ledger {
    /// The ledger of a run in `root` (canonical); `None` when `effects.scope` is `off`.
    /// `excluded`: files tollgate writes itself while calls run (the transcript).
    pub fn new(
        config: LedgerConfig,
        root: &Path,
        home: Option<&Path>,
        excluded: Vec<PathBuf>,
    ) -> Option<Ledger> {
        let coverage = match config.scope {
            LedgerScope::Off => return None,
            LedgerScope::Workspace => Coverage::Everything,
            LedgerScope::Guarded => Coverage::Guarded,
        };
        let git_dirs = repository_git_dirs(root);
        let extra = git_dirs
            .iter()
            .flat_map(|dir| GUARDED_GIT_MEMBERS.iter().map(move |name| dir.join(name)))
            .collect();
        Some(Ledger {
            config,
            scope: Arc::new(Scope {
                root: root.to_path_buf(),
                extra,
                excluded,
                coverage,
                max_entries: config.max_entries,
            }),
            git_dirs,
            home: home.map(Path::to_path_buf),
            before: None,
        })
    }

    pub fn config(&self) -> LedgerConfig {
        self.config
    }

    /// Takes the snapshot before calls start (off the async threads), then waits out the
    /// clock tick of the latest change it saw, so no change the calls make can hide in it.
    pub async fn open(&mut self) {
        let scope = Arc::clone(&self.scope);
        let before = tokio::task::spawn_blocking(move || Snapshot::take(&scope, None))
            .await
            .unwrap_or_else(|err| Snapshot::failed(format!("the snapshot failed: {err}")));
        let wait = before.settle(SystemTime::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.before = Some(before);
    }

    /// Measures what changed since [`Ledger::open`], judged against `allowed`. `batch`:
    /// the ids of the calls that ran, when more than one.
    pub async fn close(&mut self, allowed: Allowance, batch: Vec<String>) -> CallEffects {
        let Some(before) = self.before.take() else {
            let why = "no snapshot before the call".to_string();
            return self.record(allowed, batch, Vec::new(), Some(why));
        };
        let scope = Arc::clone(&self.scope);
        let taken = tokio::task::spawn_blocking(move || {
            let after = Snapshot::take(&scope, Some(&before));
            (before, after)
        })
        .await;
        let (before, after) = match taken {
            Ok(both) => both,
            Err(err) => {
                let why = format!("the snapshot failed: {err}");
                return self.record(allowed, batch, Vec::new(), Some(why));
            }
        };
        let incomplete = before
            .incomplete
            .clone()
            .or_else(|| after.incomplete.clone());
        let mut changes = effects::between(&before, &after);
        let holds_head = |dir: &Path| dir.join("HEAD").is_file();
        let bounds = allowance::Bounds {
            root: &self.scope.root,
            git_dirs: &self.git_dirs,
            home: self.home.as_deref(),
            holds_head: &holds_head,
        };
        for change in &mut changes {
            change.exceeds = allowed.exceeds(change, &bounds);
        }
        self.record(allowed, batch, changes, incomplete)
    }

    /// The record, its paths relative to the workspace where they are inside it.
    fn record(
        &self,
        mut allowed: Allowance,
        batch: Vec<String>,
        mut changes: Vec<Effect>,
        incomplete: Option<String>,
    ) -> CallEffects {
        let root = &self.scope.root;
        let relative = |path: &Path| match path.strip_prefix(root) {
            Ok(inside) if !inside.as_os_str().is_empty() => inside.to_path_buf(),
            Ok(_) => PathBuf::from("."),
            Err(_) => path.to_path_buf(),
        };
        for change in &mut changes {
            change.path = relative(&change.path);
        }
        allowed.paths = allowed.paths.iter().map(|path| relative(path)).collect();
        CallEffects {
            attribution: if batch.len() > 1 {
                Attribution::Batch
            } else {
                Attribution::Call
            },
            batch: if batch.len() > 1 { batch } else { Vec::new() },
            allowed,
            changes,
            incomplete,
        }
    }
}

/// What git obeys or runs in a git directory outside the workspace: looked at whole.
const GUARDED_GIT_MEMBERS: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "info",
    "commondir",
    "gitdir",
    "HEAD",
];

/// The git directories of the repository `root` is in that lie outside it: the `.git` of a
/// folder above, or the one a `.git` file names (a worktree, a submodule), and the common
/// directory that one names in turn. Longest first, so a path is judged against the
/// innermost one.
fn repository_git_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in root.ancestors() {
        let dot = dir.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(metadata) if metadata.is_dir() => dirs.push(dot),
            Ok(metadata) if metadata.is_file() => {
                if let Some(named) = pointer(&dot, "gitdir:") {
                    dirs.push(named);
                }
            }
            _ => continue,
        }
        break;
    }
    if let Some(common) = dirs
        .first()
        .and_then(|dir| pointer(&dir.join("commondir"), ""))
    {
        dirs.push(common);
    }
    dirs.retain(|dir| !has_prefix(dir, root));
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.as_os_str().len()));
    dirs.dedup();
    dirs
}

/// The folder a git pointer file names (`gitdir: ../x`, or `commondir`'s bare path),
/// relative to the file's folder.
fn pointer(file: &Path, prefix: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let named = text.lines().next()?.strip_prefix(prefix)?.trim();
    if named.is_empty() {
        return None;
    }
    let base = file.parent()?;
    let path = normalize_lexically(&base.join(named));
    Some(path.canonicalize().unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(root: &Path) -> Ledger {
        Ledger::new(LedgerConfig::default(), root, None, Vec::new()).unwrap()
    }

    #[tokio::test]
    async fn a_read_only_call_that_writes_is_flagged_and_one_that_does_not_is_clean() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a"), "x").unwrap();
        let mut ledger = ledger(&root);
        ledger.open().await;
        let clean = ledger
            .close(Allowance::nothing(GitWrites::None), Vec::new())
            .await;
        assert_eq!(clean.changes, []);
        assert!(!clean.exceeded());
        ledger.open().await;
        std::fs::write(root.join("cache.bin"), "x").unwrap();
        let dirty = ledger
            .close(
                Allowance::nothing(GitWrites::None),
                vec!["t1".into(), "t2".into()],
            )
            .await;
        assert!(dirty.exceeded());
        assert_eq!(dirty.attribution, Attribution::Batch);
        assert_eq!(dirty.changes[0].path, PathBuf::from("cache.bin"));
        assert_eq!(
            dirty.describe_excess(),
            "created cache.bin — its verdict was read-only"
        );
    }

    #[test]
    fn the_git_directory_of_a_repository_above_or_a_worktree_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("repo/.git/worktrees/w")).unwrap();
        std::fs::create_dir_all(base.join("repo/sub")).unwrap();
        assert_eq!(
            repository_git_dirs(&base.join("repo/sub")),
            [base.join("repo/.git")]
        );
        assert!(repository_git_dirs(&base.join("repo")).is_empty());
        std::fs::create_dir_all(base.join("wt")).unwrap();
        std::fs::write(
            base.join("wt/.git"),
            format!("gitdir: {}\n", base.join("repo/.git/worktrees/w").display()),
        )
        .unwrap();
        std::fs::write(base.join("repo/.git/worktrees/w/commondir"), "../..\n").unwrap();
        assert_eq!(
            repository_git_dirs(&base.join("wt")),
            [base.join("repo/.git/worktrees/w"), base.join("repo/.git")]
        );
    }
}
