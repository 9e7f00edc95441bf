//! What changed between two snapshots, path by path: created, modified, deleted, a link
//! made or re-pointed, a mode or owner changed, one kind of file replaced by another.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::snapshot::{Entry, Kind, Snapshot};

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Created,
    /// Written, truncated, or its inode otherwise changed (a hard link added, an attribute).
    Modified,
    Deleted,
    /// A symbolic link created, or re-pointed, or put where something else was.
    Linked,
    /// Its permissions or owner changed.
    Mode,
    /// Something of another kind (or another folder) is there now.
    Replaced,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
            Change::Linked => "linked",
            Change::Mode => "mode changed",
            Change::Replaced => "replaced",
        }
    }
}

/// One change as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// Relative to the workspace when inside it, else absolute.
    pub path: PathBuf,
    pub change: Change,
    /// A link made or re-pointed: where it points now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<PathBuf>,
    /// A mode or owner change: `0644 -> 0755`, `uid 1000 -> 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Why the change is more than the call's verdict allowed; absent when it allowed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exceeds: Option<String>,
    /// The sandbox put the path back after the command (a protected file).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
}

impl Effect {
    pub(super) fn new(path: PathBuf, change: Change) -> Effect {
        Effect {
            path,
            change,
            target: None,
            mode: None,
            exceeds: None,
            restored: false,
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.change.as_str(), self.path.display())?;
        if let Some(target) = &self.target {
            write!(f, " -> {}", target.display())?;
        }
        if let Some(mode) = &self.mode {
            write!(f, " ({mode})")?;
        }
        if self.restored {
            write!(f, " (restored by the sandbox)")?;
        }
        Ok(())
    }
}

/// Every change from `before` to `after`, in path order, paths absolute.
pub(super) fn between(before: &Snapshot, after: &Snapshot) -> Vec<Effect> {
    let mut effects = Vec::new();
    for (path, was) in &before.entries {
        match after.entries.get(path) {
            None => effects.push(Effect::new(path.to_path_buf(), Change::Deleted)),
            Some(now) => effects.extend(compare(path, was, now)),
        }
    }
    for (path, now) in &after.entries {
        // A path outside first reached through a link made since: what was there before
        // is not known (the link itself is reported).
        if before.entries.contains_key(path)
            || (now.outside && !before.looked_outside.contains(path))
        {
            continue;
        }
        let mut effect = Effect::new(
            path.clone(),
            if now.kind == Kind::Link {
                Change::Linked
            } else {
                Change::Created
            },
        );
        effect.target = now.target.clone();
        effects.push(effect);
    }
    effects.sort_by(|a, b| a.path.cmp(&b.path).then(a.change.cmp(&b.change)));
    effects
}

/// What changed at one path that is there before and after.
fn compare(path: &Path, was: &Entry, now: &Entry) -> Vec<Effect> {
    let mut effects = Vec::new();
    let same_inode = (was.dev, was.ino) == (now.dev, now.ino);
    if now.kind == Kind::Link && (was.kind != Kind::Link || was.target != now.target) {
        let mut effect = Effect::new(path.to_path_buf(), Change::Linked);
        effect.target = now.target.clone();
        return vec![effect];
    }
    if was.kind != now.kind || (now.kind == Kind::Dir && !same_inode) {
        return vec![Effect::new(path.to_path_buf(), Change::Replaced)];
    }
    let owner_or_mode = (was.mode, was.uid, was.gid) != (now.mode, now.uid, now.gid);
    // A folder's own times move with every entry made or removed in it; those entries are
    // reported themselves. A folder reached through a link out of the scope is not listed:
    // its times are all there is.
    let content = match now.kind {
        Kind::Dir => now.outside && (was.mtime, was.ctime) != (now.mtime, now.ctime),
        // A fifo's, socket's or device's times move with the data that passes through it,
        // whoever sends it (a reader of a pipe another process writes): the node is the same
        // node, and a new one is a different inode.
        Kind::Other => !same_inode,
        Kind::File | Kind::Link => {
            !same_inode
                || (was.size, was.mtime, was.nlink) != (now.size, now.mtime, now.nlink)
                // `ctime` alone: something changed the inode and set `mtime` back, or
                // added an attribute; a mode change moves it too, and says so below.
                || (was.ctime != now.ctime && !owner_or_mode)
        }
    };
    if content {
        effects.push(Effect::new(path.to_path_buf(), Change::Modified));
    }
    if owner_or_mode {
        let mut effect = Effect::new(path.to_path_buf(), Change::Mode);
        let mut parts = Vec::new();
        if was.mode != now.mode {
            parts.push(format!("{:04o} -> {:04o}", was.mode, now.mode));
        }
        if was.uid != now.uid {
            parts.push(format!("uid {} -> {}", was.uid, now.uid));
        }
        if was.gid != now.gid {
            parts.push(format!("gid {} -> {}", was.gid, now.gid));
        }
        effect.mode = Some(parts.join(", "));
        effects.push(effect);
    }
    effects
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::super::snapshot::{Coverage, Scope};
    use super::*;

    fn take(root: &Path) -> Snapshot {
        Snapshot::take(
            &Scope {
                root: root.to_path_buf(),
                extra: Vec::new(),
                excluded: Vec::new(),
                coverage: Coverage::Everything,
                max_entries: 1_000,
            },
            None,
        )
    }

    fn changes(root: &Path, before: &Snapshot, after: &Snapshot) -> Vec<(String, Change)> {
        between(before, after)
            .into_iter()
            .map(|effect| {
                let path = effect
                    .path
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string();
                (path, effect.change)
            })
            .collect()
    }

    #[test]
    fn each_kind_of_change_is_seen_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        for name in [
            "same",
            "written",
            "gone",
            "chmod",
            "relink",
            "becomes-link",
            "ln",
        ] {
            std::fs::write(root.join("d").join(name), "x").unwrap();
        }
        std::os::unix::fs::symlink("same", root.join("d/l")).unwrap();
        let before = take(&root);
        // Every change below lands at least a tick after the look (see `settle`).
        std::thread::sleep(before.settle(std::time::SystemTime::now()));
        assert!(changes(&root, &before, &take(&root)).is_empty());
        // Same size, so only the inode's times tell.
        std::fs::write(root.join("d/written"), "y").unwrap();
        std::fs::remove_file(root.join("d/gone")).unwrap();
        std::fs::write(root.join("d/new"), "").unwrap();
        std::fs::set_permissions(root.join("d/chmod"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::remove_file(root.join("d/l")).unwrap();
        std::os::unix::fs::symlink("written", root.join("d/l")).unwrap();
        std::fs::remove_file(root.join("d/becomes-link")).unwrap();
        std::os::unix::fs::symlink("/", root.join("d/becomes-link")).unwrap();
        std::fs::hard_link(root.join("d/ln"), root.join("ln2")).unwrap();
        std::fs::create_dir(root.join("e")).unwrap();
        assert_eq!(
            changes(&root, &before, &take(&root)),
            [
                ("d/becomes-link".into(), Change::Linked),
                ("d/chmod".into(), Change::Mode),
                ("d/gone".into(), Change::Deleted),
                ("d/l".into(), Change::Linked),
                ("d/ln".into(), Change::Modified),
                ("d/new".into(), Change::Created),
                ("d/written".into(), Change::Modified),
                ("e".into(), Change::Created),
                ("ln2".into(), Change::Created),
            ]
        );
    }

    /// What a committed link out of the workspace points at is watched, there or not: a
    /// write through a dangling one is a file created outside. A link made since is
    /// reported itself; what it reaches was never looked at before, so it is not guessed.
    #[test]
    fn a_file_made_through_a_committed_link_out_is_seen_created() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("ws");
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(base.join("planted"), root.join("dang")).unwrap();
        let before = take(&root);
        std::fs::write(root.join("dang"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("other"), root.join("new")).unwrap();
        std::fs::write(base.join("other"), "x").unwrap();
        let effects: Vec<(PathBuf, Change)> = between(&before, &take(&root))
            .into_iter()
            .map(|effect| (effect.path, effect.change))
            .collect();
        assert_eq!(
            effects,
            [
                (base.join("planted"), Change::Created),
                (root.join("new"), Change::Linked)
            ]
        );
    }

    #[test]
    fn a_write_that_sets_the_time_back_is_still_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let file = root.join("f");
        std::fs::write(&file, "aaaa").unwrap();
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        let before = take(&root);
        std::thread::sleep(before.settle(std::time::SystemTime::now()));
        std::fs::write(&file, "bbbb").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(
            changes(&root, &before, &take(&root)),
            [("f".into(), Change::Modified)]
        );
    }
}
