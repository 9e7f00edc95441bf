//! Where a file tool acts: the root that holds the path the gate resolved, opened as a
//! directory capability ([`crate::base::Root`]), and the path below it. The workspace's roots
//! (the workdir, each additional directory) take writes; the read-only roots (the run's
//! `results/`) and, for a read an operator's allow rule granted outside every root, `/`,
//! take reads only. Nothing here judges a path — the gate did — but nothing a tool does
//! reaches past the root the path was placed in, or through a link.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::path::resolve_path;
use crate::base::{BeneathError, Root, has_prefix, strip_prefix};
use crate::policy::Workspace;

/// What the tool will do there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Read,
    Write,
}

/// A resolved path, as a root and the path below it.
#[derive(Debug)]
pub struct Place {
    /// Shared by the places of the files a walk finds below this one.
    pub root: Arc<Root>,
    /// Relative to the root; empty for the root itself.
    pub rel: PathBuf,
    /// The absolute path, for messages and the file-state cache.
    pub path: PathBuf,
}

/// Why a path has no place for what a tool would do there.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error(
        "cannot write {}: it is outside the workspace ({}); Write and Edit act only beneath the workdir and additional_directories",
        path.display(),
        roots
    )]
    NotWritable { path: PathBuf, roots: String },
    #[error(transparent)]
    Root(#[from] BeneathError),
}

/// The place of `path` (absolute, resolved as the gate resolved it) for `intent`: beneath the
/// longest root that holds it lexically.
pub fn place(workspace: &Workspace, path: &Path, intent: Intent) -> Result<Place, PlaceError> {
    let writable = workspace.roots.iter().map(|root| (root, true));
    let read_only = workspace.read_only_roots.iter().map(|root| (root, false));
    let best = writable
        .chain(read_only)
        .filter(|(root, _)| has_prefix(path, root))
        .max_by_key(|(root, _)| root.as_os_str().len());
    let (root, rel) = match (best, intent) {
        (Some((root, true)), _) | (Some((root, false)), Intent::Read) => {
            let rel = strip_prefix(path, root).unwrap_or(Path::new(""));
            (root.as_path(), rel.to_path_buf())
        }
        (Some((_, false)), Intent::Write) | (None, Intent::Write) => {
            let roots: Vec<String> = workspace
                .roots
                .iter()
                .map(|root| root.display().to_string())
                .collect();
            return Err(PlaceError::NotWritable {
                path: path.to_path_buf(),
                roots: roots.join(", "),
            });
        }
        // Outside every root: the gate let it through only by an operator's rule naming it.
        // Reached from `/`, still through no link.
        (None, Intent::Read) => {
            let rel = path.strip_prefix("/").unwrap_or(path);
            (Path::new("/"), rel.to_path_buf())
        }
    };
    Ok(Place {
        root: Arc::new(Root::open(root)?),
        rel,
        path: path.to_path_buf(),
    })
}

/// The path a call's decision judged, kept for the call's run: the tool then acts on that
/// very path (beneath its root, through no link) rather than on what a second resolution would
/// find, so a link made or swapped between the decision and the run — by a command that ran
/// meanwhile, another call of the batch — fails the call instead of redirecting it. The
/// first decision's path is kept (a call is decided once; `acceptEdits`'s look-ahead
/// resolves the same path in the same workspace).
#[derive(Debug, Clone, Default)]
pub struct Judged(OnceLock<PathBuf>);

impl Judged {
    /// Keeps `path` if no path was kept yet.
    pub fn keep(&self, path: &Path) {
        let _ = self.0.set(path.to_path_buf());
    }

    /// The path the decision judged; `raw` resolved now for a call run without one (a test's).
    pub fn path(&self, raw: &str, workspace: &Workspace) -> PathBuf {
        match self.0.get() {
            Some(path) => path.clone(),
            None => resolve_path(raw, &workspace.workdir, workspace.home.as_deref()),
        }
    }
}

impl Place {
    /// The place of `path`, a file a walk found below this place: beneath the same root.
    /// `None` when it is not below the root.
    pub fn child(&self, path: &Path) -> Option<Place> {
        let rel = strip_prefix(path, self.root.path())?;
        Some(Place {
            root: Arc::clone(&self.root),
            rel: rel.to_path_buf(),
            path: path.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_placed_beneath_the_longest_root_that_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let extra = base.join("extra");
        let results = ws.join(".tollgate/runs/r/results");
        for folder in [&ws, &extra, &results] {
            std::fs::create_dir_all(folder).unwrap();
        }
        let mut workspace = Workspace::new(ws.clone(), vec![extra.clone()], None);
        workspace.read_only_roots.push(results.clone());
        let at = |path: &Path, intent| {
            place(&workspace, path, intent)
                .map(|place| (place.root.path().to_path_buf(), place.rel))
                .map_err(|err| err.to_string())
        };
        assert_eq!(
            at(&ws.join("src/a.rs"), Intent::Write),
            Ok((ws.clone(), "src/a.rs".into()))
        );
        assert_eq!(
            at(&extra.join("b.rs"), Intent::Write),
            Ok((extra.clone(), "b.rs".into()))
        );
        assert_eq!(
            at(&results.join("t.txt"), Intent::Read),
            Ok((results.clone(), "t.txt".into()))
        );
        assert_eq!(at(&ws, Intent::Read), Ok((ws.clone(), "".into())));
        assert_eq!(
            at(Path::new("/etc/hosts"), Intent::Read),
            Ok(("/".into(), "etc/hosts".into()))
        );
        for refused in [results.join("t.txt"), PathBuf::from("/etc/hosts")] {
            let err = at(&refused, Intent::Write).unwrap_err();
            assert!(
                err.contains("Write and Edit act only beneath the workdir"),
                "{err}"
            );
        }
    }
}
