//! The run's workspace as the gate sees it: canonical roots (workdir and additional
//! directories) and the home folder. Plain data; resolving paths on disk is the tools' job.

use std::path::{Path, PathBuf};

use super::path_pattern::PathBases;

const STATE_FOLDER: &str =
    "reads or writes tollgate's state folder (the key that signs transcripts, the record of runs)";
const RUN_FOLDER: &str = "writes to the run's own folder (tollgate's transcript and reports)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Canonical working directory; relative paths and `./x` rules resolve against it.
    pub workdir: PathBuf,
    /// Canonical roots a file tool may touch: the workdir first, then additional directories.
    pub roots: Vec<PathBuf>,
    /// Folders tools may read but never write: the run's offloaded results (S8), which the
    /// model is pointed at when a result was too large to keep inline.
    pub read_only_roots: Vec<PathBuf>,
    /// tollgate's own run folders (the transcript, reports, offloaded results): readable,
    /// never written by a tool or a command the model starts, wherever they are.
    pub own_folders: Vec<PathBuf>,
    pub home: Option<PathBuf>,
    /// tollgate's state folder (resolved): neither read nor written by a tool or command.
    /// Handed in by the runner, which knows where it is; the gate does not look.
    pub state_folder: Option<PathBuf>,
}

impl Workspace {
    pub fn new(workdir: PathBuf, additional: Vec<PathBuf>, home: Option<PathBuf>) -> Self {
        let mut roots = vec![workdir.clone()];
        roots.extend(additional.into_iter().filter(|dir| *dir != workdir));
        Workspace {
            workdir,
            roots,
            read_only_roots: Vec::new(),
            own_folders: Vec::new(),
            home,
            state_folder: None,
        }
    }

    /// This workspace with tollgate's state folder guarded (see [`Workspace::own_state_guard`]).
    pub fn with_state_folder(mut self, folder: Option<PathBuf>) -> Self {
        self.state_folder = folder;
        self
    }

    /// The guard tollgate's own state puts on an access to `path` (resolved), if any: its
    /// state folder (the transcript key, the record of runs) is neither read nor written, and
    /// its run folders are not written. With `below`, everything under the folder `path`
    /// counts (a recursive read of a folder that holds the state folder trips it too).
    pub fn own_state_guard(&self, path: &Path, write: bool, below: bool) -> Option<&'static str> {
        if let Some(state) = self.state_folder.as_deref()
            && (tollgate_base::has_prefix(path, state)
                || (below && tollgate_base::has_prefix(state, path)))
        {
            return Some(STATE_FOLDER);
        }
        (write
            && self
                .own_folders
                .iter()
                .any(|folder| tollgate_base::has_prefix(path, folder)))
        .then_some(RUN_FOLDER)
    }

    /// Whether a resolved path may be read: inside a root or a read-only root.
    pub fn readable(&self, path: &Path) -> bool {
        self.contains(path)
            || self
                .read_only_roots
                .iter()
                .any(|root| tollgate_base::has_prefix(path, root))
    }

    /// Whether a resolved (absolute, normalised, symlink-free) path lies inside a root.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|root| tollgate_base::has_prefix(path, root))
    }

    pub fn bases(&self) -> PathBases<'_> {
        PathBases {
            workdir: &self.workdir,
            home: self.home.as_deref(),
        }
    }
}
