//! The symbolic links beneath a folder, found by a bounded walk that follows none of them:
//! what a recursive, link-following command (`ls -LR`, `grep -R`, `find -L`) reaches besides
//! the folder it names. The walk's bounds end it with an error the gate turns into an ask
//! with the reason, never a partial answer.

use std::path::{Path, PathBuf};

/// Entries (files, folders, links) one walk looks at before it gives up.
pub const MAX_WALKED_ENTRIES: usize = 50_000;

/// Folders deep below the named one before the walk gives up.
pub const MAX_WALK_DEPTH: usize = 64;

/// Why a walk gave no answer; the text is the ask's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkWalkError {
    #[error("{} holds more than {MAX_WALKED_ENTRIES} entries to look through for links", .0.display())]
    TooMany(PathBuf),
    #[error("{} has folders more than {MAX_WALK_DEPTH} deep to look through for links", .0.display())]
    TooDeep(PathBuf),
    #[error("{} cannot be listed to look for links", .0.display())]
    Unlistable(PathBuf),
}

/// Every symbolic link at any depth below `dir` (absolute, canonical), by its path under
/// `dir`; none is followed. A `dir` that is no folder (a file, nothing) has none.
pub fn links_below(dir: &Path) -> Result<Vec<PathBuf>, LinkWalkError> {
    let mut links = Vec::new();
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        _ => return Ok(links),
    }
    let mut walked = 0usize;
    let mut folders = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = folders.pop() {
        let unlistable = || LinkWalkError::Unlistable(folder.clone());
        for entry in std::fs::read_dir(&folder).map_err(|_| unlistable())? {
            let entry = entry.map_err(|_| unlistable())?;
            walked += 1;
            if walked > MAX_WALKED_ENTRIES {
                return Err(LinkWalkError::TooMany(dir.to_path_buf()));
            }
            let kind = entry.file_type().map_err(|_| unlistable())?;
            if kind.is_symlink() {
                links.push(entry.path());
            } else if kind.is_dir() {
                if depth + 1 > MAX_WALK_DEPTH {
                    return Err(LinkWalkError::TooDeep(dir.to_path_buf()));
                }
                folders.push((entry.path(), depth + 1));
            }
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_links_at_any_depth_without_following_them_and_ends_at_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::write(root.join("a/file"), "").unwrap();
        std::os::unix::fs::symlink("/proc/1", root.join("a/b/c/p1")).unwrap();
        std::os::unix::fs::symlink("/nowhere/x", root.join("a/dang")).unwrap();
        // A link to a folder is reported, not walked (it would loop here).
        std::os::unix::fs::symlink(&root, root.join("a/up")).unwrap();
        let mut found = links_below(&root).unwrap();
        found.sort();
        assert_eq!(
            found,
            vec![
                root.join("a/b/c/p1"),
                root.join("a/dang"),
                root.join("a/up")
            ]
        );
        assert_eq!(links_below(&root.join("a/file")), Ok(vec![]));
        assert_eq!(links_below(&root.join("missing")), Ok(vec![]));

        let mut deep = root.join("deep");
        for _ in 0..=MAX_WALK_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            links_below(&root.join("deep")),
            Err(LinkWalkError::TooDeep(root.join("deep")))
        );
    }
}
