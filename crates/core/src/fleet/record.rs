//! A repository's record in a batch's reports: its journal and the folder holding its run.

use std::path::{Path, PathBuf};

use super::journal::Journal;

/// A repository's journal and the folder holding its run (`DIR/repos/ID`).
#[derive(Debug, Clone)]
pub struct RepoRecord {
    pub journal: Journal,
    pub folder: PathBuf,
}

impl RepoRecord {
    /// The record of a repository of the batch folder `batch_dir`.
    pub fn in_batch(batch_dir: &Path, journal: Journal) -> RepoRecord {
        let folder = batch_dir.join("repos").join(&journal.repo);
        RepoRecord { journal, folder }
    }
}
