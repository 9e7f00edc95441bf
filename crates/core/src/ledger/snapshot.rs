//! A snapshot of what the workspace holds, as metadata only: for every path in scope its
//! kind, inode, size, times, mode, owner, link count and (for a symbolic link) its target.
//! Two snapshots compared say what changed between them; reading one changes nothing.
//!
//! Soundness rests on the kernel's own bookkeeping: creating, removing or renaming an entry
//! changes the set of paths; writing a file moves its `mtime` and `ctime`; `chmod`, `chown`,
//! a new hard link and an extended attribute move `ctime`, which no process can set back
//! (`utimensat` sets `mtime` only). Each file is looked at (one `statx`) every time: a file
//! written in place changes no folder above it, so no subtree can be skipped on its folder's
//! times. What the clock cannot tell apart — a write in the same clock tick as a change the
//! snapshot saw — is ruled out by [`Snapshot::settle`].

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::base::{has_prefix, normalize_lexically};
use crate::policy::may_guard_name;

/// Past this margin after a change, a new change gets another `ctime`: the kernel stamps
/// inodes with a clock that moves once a tick (a jiffy, at most 10 ms; newer kernels stamp
/// finer once a time was looked at).
pub(super) const TICK: Duration = Duration::from_millis(20);

/// Outside targets of links that are followed at most (each one `stat`).
const MAX_LINK_TARGETS: usize = 1_000;

/// What the snapshot measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Every path below the root.
    Everything,
    /// Only guarded paths (whatever a write guardrail names, at any depth, with everything
    /// below them; folders that hold a `HEAD`), and every symbolic link: each folder is
    /// listed, but only these are looked at.
    Guarded,
}

/// Where one snapshot looks.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The workspace (canonical).
    pub root: PathBuf,
    /// Guarded paths outside the root, looked at whole: the repository's git directory when
    /// the workspace is below it, a worktree's git directory and its common directory.
    pub extra: Vec<PathBuf>,
    /// Paths never measured: files tollgate itself writes while calls run (the transcript).
    pub excluded: Vec<PathBuf>,
    pub coverage: Coverage,
    /// More entries than this make the snapshot incomplete.
    pub max_entries: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Link,
    /// A fifo, socket or device.
    Other,
}

/// One path as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub kind: Kind,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    /// Permission bits (with setuid, setgid, sticky).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    /// A link's target as it is written.
    pub target: Option<PathBuf>,
    /// Reached through a link that leaves the scope: a folder's own times then stand for
    /// its entries, which are not listed.
    pub outside: bool,
}

impl Entry {
    fn of(metadata: &std::fs::Metadata, target: Option<PathBuf>) -> Entry {
        let file_type = metadata.file_type();
        let kind = if file_type.is_symlink() {
            Kind::Link
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        Entry {
            kind,
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
            mode: metadata.mode() & 0o7777,
            uid: metadata.uid(),
            gid: metadata.gid(),
            nlink: metadata.nlink(),
            target,
            outside: false,
        }
    }
}

/// The workspace's metadata at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub(super) entries: HashMap<PathBuf, Entry>,
    /// Why some of the scope could not be measured.
    pub(super) incomplete: Option<String>,
    /// Every path outside the scope it looked at through a link, there or not.
    pub(super) looked_outside: HashSet<PathBuf>,
    /// The latest `ctime` seen, for [`Snapshot::settle`].
    latest_change: Option<SystemTime>,
}

impl Snapshot {
    /// Looks at every path in `scope` now, and at what `previous` found outside it
    /// through links (so a file there that went away is seen gone, whatever became of the
    /// link).
    pub fn take(scope: &Scope, previous: Option<&Snapshot>) -> Snapshot {
        let mut walk = Walk {
            scope,
            snapshot: Snapshot::default(),
            links: previous.map(Snapshot::outside).unwrap_or_default(),
        };
        walk.root(&scope.root, false);
        for extra in &scope.extra {
            walk.root(extra, true);
        }
        walk.link_targets();
        walk.snapshot
    }

    /// The paths it looked at outside the scope, through links.
    fn outside(&self) -> Vec<PathBuf> {
        self.looked_outside.iter().cloned().collect()
    }

    /// A snapshot that could not be taken at all.
    pub(super) fn failed(why: String) -> Snapshot {
        Snapshot {
            incomplete: Some(why),
            ..Snapshot::default()
        }
    }

    /// How many paths it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How long to wait, from `now`, before a change can no longer carry the same `ctime` as
    /// the latest change this snapshot saw. A call started after that wait cannot change a
    /// file without moving its `ctime`, so the comparison after it misses nothing; zero when
    /// everything settled long ago (the usual case).
    pub fn settle(&self, now: SystemTime) -> Duration {
        self.latest_change
            .and_then(|latest| (latest + TICK).duration_since(now).ok())
            .unwrap_or_default()
    }
}

struct Walk<'s> {
    scope: &'s Scope,
    snapshot: Snapshot,
    /// Absolute targets of the links seen that lie outside the scope.
    links: Vec<PathBuf>,
}

impl Walk<'_> {
    /// `all`: everything below `path` is recorded, whatever the coverage.
    fn root(&mut self, path: &Path, all: bool) {
        match std::fs::symlink_metadata(path) {
            Ok(metadata) => {
                let is_dir = metadata.is_dir();
                self.record(path.to_path_buf(), &metadata);
                if is_dir {
                    self.below(path, all);
                }
            }
            // Not there now: a later snapshot that finds it reports it created.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => self.incomplete(format!("cannot look at {}: {err}", path.display())),
        }
    }

    fn below(&mut self, top: &Path, all: bool) {
        let mut folders = vec![(top.to_path_buf(), all)];
        while let Some((dir, all)) = folders.pop() {
            if self.snapshot.incomplete.is_some() && self.full() {
                return;
            }
            let listing = match std::fs::read_dir(&dir) {
                Ok(listing) => listing,
                Err(err) => {
                    self.incomplete(format!("cannot list {}: {err}", dir.display()));
                    continue;
                }
            };
            let mut entries = Vec::new();
            for entry in listing {
                match entry {
                    Ok(entry) => entries.push(entry),
                    Err(err) => self.incomplete(format!("cannot list {}: {err}", dir.display())),
                }
            }
            // A folder that holds a `HEAD` is a git directory: every file of it counts.
            let git_dir = self.scope.coverage == Coverage::Guarded
                && entries.iter().any(|entry| entry.file_name() == "HEAD");
            for entry in entries {
                let name: OsString = entry.file_name();
                let path = dir.join(&name);
                if self.scope.excluded.contains(&path) {
                    continue;
                }
                let Ok(file_type) = entry.file_type() else {
                    self.incomplete(format!("cannot look at {}", path.display()));
                    continue;
                };
                let guarded = all
                    || git_dir
                    || self.scope.coverage == Coverage::Guarded
                        && may_guard_name(&name.to_string_lossy());
                let wanted = self.scope.coverage == Coverage::Everything
                    || guarded
                    || file_type.is_symlink();
                if wanted {
                    match entry.metadata() {
                        Ok(metadata) => self.record(path.clone(), &metadata),
                        // Removed since it was listed: it is not there.
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(err) => {
                            self.incomplete(format!("cannot look at {}: {err}", path.display()));
                            continue;
                        }
                    }
                    if self.full() {
                        self.incomplete(format!(
                            "the workspace holds more than {} entries (effects.max_entries)",
                            self.scope.max_entries
                        ));
                        return;
                    }
                }
                if file_type.is_dir() {
                    folders.push((path, guarded));
                }
            }
        }
    }

    fn full(&self) -> bool {
        self.snapshot.entries.len() >= self.scope.max_entries
    }

    fn record(&mut self, path: PathBuf, metadata: &std::fs::Metadata) {
        let target = if metadata.file_type().is_symlink() {
            match std::fs::read_link(&path) {
                Ok(target) => Some(target),
                Err(err) => {
                    self.incomplete(format!("cannot read the link {}: {err}", path.display()));
                    None
                }
            }
        } else {
            None
        };
        if let Some(target) = &target {
            let parent = path.parent().unwrap_or(Path::new("/"));
            let absolute = normalize_lexically(&parent.join(target));
            if !self.in_scope(&absolute) {
                self.links.push(absolute);
            }
        }
        let changed = changed_at(metadata);
        if changed > self.snapshot.latest_change {
            self.snapshot.latest_change = changed;
        }
        self.snapshot
            .entries
            .insert(path, Entry::of(metadata, target));
    }

    fn in_scope(&self, path: &Path) -> bool {
        has_prefix(path, &self.scope.root)
            || self.scope.extra.iter().any(|extra| has_prefix(path, extra))
    }

    /// What each link leaving the scope points at, followed to the end (a chain of links, a
    /// dangling one): `echo x > src/dang` with `src/dang -> /elsewhere/x` creates that file,
    /// and only this look sees it. A folder there is looked at, not listed.
    fn link_targets(&mut self) {
        let mut targets = std::mem::take(&mut self.links);
        targets.sort();
        targets.dedup();
        if targets.len() > MAX_LINK_TARGETS {
            self.incomplete(format!(
                "more than {MAX_LINK_TARGETS} links lead out of the workspace"
            ));
            targets.truncate(MAX_LINK_TARGETS);
        }
        for target in targets {
            if self.in_scope(&target) {
                continue;
            }
            self.snapshot.looked_outside.insert(target.clone());
            // A dangling link: what it would create is absent now (and looked at).
            if let Ok(metadata) = std::fs::metadata(&target) {
                let changed = changed_at(&metadata);
                if changed > self.snapshot.latest_change {
                    self.snapshot.latest_change = changed;
                }
                let entry = Entry {
                    outside: true,
                    ..Entry::of(&metadata, None)
                };
                self.snapshot.entries.insert(target, entry);
            }
        }
    }

    fn incomplete(&mut self, why: String) {
        self.snapshot.incomplete.get_or_insert(why);
    }
}

fn changed_at(metadata: &std::fs::Metadata) -> Option<SystemTime> {
    let secs = u64::try_from(metadata.ctime()).ok()?;
    let nanos = u32::try_from(metadata.ctime_nsec()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(root: &Path, coverage: Coverage) -> Scope {
        Scope {
            root: root.to_path_buf(),
            extra: Vec::new(),
            excluded: Vec::new(),
            coverage,
            max_entries: 1_000,
        }
    }

    #[test]
    fn everything_records_each_path_and_guarded_only_the_guarded_ones_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join("src/deep/a.rs"), "a").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "x").unwrap();
        std::fs::write(root.join("src/.envrc"), "x").unwrap();
        std::os::unix::fs::symlink("deep/a.rs", root.join("src/link")).unwrap();
        let all = Snapshot::take(&scope(&root, Coverage::Everything), None);
        assert_eq!(all.incomplete, None);
        for path in [
            "",
            "src",
            "src/deep/a.rs",
            ".git/hooks/pre-commit",
            "src/link",
        ] {
            assert!(all.entries.contains_key(&root.join(path)), "{path}");
        }
        assert_eq!(
            all.entries[&root.join("src/link")].target,
            Some(PathBuf::from("deep/a.rs"))
        );
        let guarded = Snapshot::take(&scope(&root, Coverage::Guarded), None);
        for path in [".git", ".git/hooks/pre-commit", "src/.envrc", "src/link"] {
            assert!(guarded.entries.contains_key(&root.join(path)), "{path}");
        }
        assert!(!guarded.entries.contains_key(&root.join("src/deep/a.rs")));
    }

    #[test]
    fn a_link_out_of_the_workspace_has_its_target_looked_at_dangling_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("there"), "x").unwrap();
        std::os::unix::fs::symlink(outside.join("there"), root.join("to-file")).unwrap();
        std::os::unix::fs::symlink("../outside/absent", root.join("dangling")).unwrap();
        let snapshot = Snapshot::take(&scope(&root, Coverage::Guarded), None);
        assert!(snapshot.entries.contains_key(&outside.join("there")));
        assert!(!snapshot.entries.contains_key(&outside.join("absent")));
        std::fs::write(outside.join("absent"), "made through the link").unwrap();
        let later = Snapshot::take(&scope(&root, Coverage::Guarded), None);
        assert!(later.entries.contains_key(&outside.join("absent")));
    }

    #[test]
    fn too_many_entries_or_an_unlisted_folder_make_it_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for i in 0..20 {
            std::fs::write(root.join(format!("f{i}")), "").unwrap();
        }
        let mut small = scope(&root, Coverage::Everything);
        small.max_entries = 5;
        let cut = Snapshot::take(&small, None);
        assert!(cut.incomplete.unwrap().contains("more than 5 entries"));
        let excluded = Scope {
            excluded: vec![root.join("f3")],
            ..scope(&root, Coverage::Everything)
        };
        assert!(
            !Snapshot::take(&excluded, None)
                .entries
                .contains_key(&root.join("f3"))
        );
    }

    #[test]
    fn a_fresh_change_asks_for_a_wait_of_at_most_a_tick() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("f"), "").unwrap();
        let snapshot = Snapshot::take(&scope(&root, Coverage::Everything), None);
        let now = SystemTime::now();
        assert!(snapshot.settle(now) <= TICK);
        assert_eq!(snapshot.settle(now + TICK * 2), Duration::ZERO);
    }
}
