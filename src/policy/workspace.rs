//! The run's workspace as the gate sees it: canonical roots (workdir and additional
//! directories) and the home folder. Plain data; resolving paths on disk is the tools' job.

use std::path::{Path, PathBuf};

use super::path_pattern::PathBases;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Canonical working directory; relative paths and `./x` rules resolve against it.
    pub workdir: PathBuf,
    /// Canonical roots a file tool may touch: the workdir first, then additional directories.
    pub roots: Vec<PathBuf>,
    /// Folders tools may read but never write: the run's offloaded results (S8), which the
    /// model is pointed at when a result was too large to keep inline.
    pub read_only_roots: Vec<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Workspace {
    pub fn new(workdir: PathBuf, additional: Vec<PathBuf>, home: Option<PathBuf>) -> Self {
        let mut roots = vec![workdir.clone()];
        roots.extend(additional.into_iter().filter(|dir| *dir != workdir));
        Workspace {
            workdir,
            roots,
            read_only_roots: Vec::new(),
            home,
        }
    }

    /// Whether a resolved path may be read: inside a root or a read-only root.
    pub fn readable(&self, path: &Path) -> bool {
        self.contains(path)
            || self
                .read_only_roots
                .iter()
                .any(|root| crate::base::has_prefix(path, root))
    }

    /// Whether a resolved (absolute, normalised, symlink-free) path lies inside a root.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|root| crate::base::has_prefix(path, root))
    }

    pub fn bases(&self) -> PathBases<'_> {
        PathBases {
            workdir: &self.workdir,
            home: self.home.as_deref(),
        }
    }
}
