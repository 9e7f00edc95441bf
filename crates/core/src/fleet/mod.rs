//! `tollgate batch`: one task over many repositories in one process — the manifest, the
//! per-repository templates, working copies, journal and shard, and the merged reports.
//! Every run goes through `session::assemble` and `agent::run`, as a single run does.

mod batch_task;
mod driver;
mod forge;
mod html;
mod journal;
mod manifest;
mod merge;
mod phases;
mod progress;
mod record;
mod shard;
mod signing;
mod tally;
mod template;
mod workcopy;

use std::path::PathBuf;

use thiserror::Error;

pub use batch_task::valid_branch;
pub use driver::{Batch, BatchOptions, Rerun};
pub use forge::{Forge, ForgeError, PullRequest};
pub use journal::{Journal, JournalError, Phase, RepoOutcome, RunSummary};
pub use manifest::{Repo, RepoSource};
pub use merge::{collect, junit_xml, markdown, sarif, write_reports};
pub use record::RepoRecord;
pub use shard::Shard;
pub use signing::{Author, CommitIdentity, Signing, SigningFormat};
pub use workcopy::{GitError, commit as commit_change, head as head_commit, push as push_head};

#[derive(Debug, Error)]
pub enum FleetError {
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Forge(#[from] forge::ForgeError),
    #[error(transparent)]
    Folder(#[from] crate::out_dir::OutDirError),
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error("cannot create the batch folder {}: {source}", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}
