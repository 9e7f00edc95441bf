//! A run's change as a pull request: its working tree committed (on top of the commit the
//! workflow checked out), pushed to a branch named from a template, and one pull request
//! opened or updated with the run's summary. Only a run that passed — no refused call, no
//! failed check, outcome `success` — is published, unless the operator says otherwise.

use std::io::BufRead;
use std::path::Path;

use crate::fleet::{Forge, PullRequest};
use crate::transcript::{Event, Outcome, RecordedLine};

/// What a run's transcript says of its ending.
#[derive(Debug, Clone)]
pub struct RunEnding {
    pub run_id: String,
    pub outcome: Outcome,
    pub denials: u32,
    pub checks_failed: u32,
    pub final_message: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0} holds no run_finished event: the run did not end, so nothing is published")]
    Unfinished(String),
    #[error("the branch name `{0}` is not one git takes")]
    Branch(String),
    #[error(transparent)]
    Git(#[from] crate::fleet::GitError),
    #[error("cannot open the pull request: {0}")]
    Forge(#[from] crate::fleet::ForgeError),
}

/// The ending the run folder's transcript records (its last `run_finished`).
pub fn run_ending(run: &Path) -> Result<RunEnding, PublishError> {
    let path = run.join(crate::out_dir::TRANSCRIPT_FILE);
    let file = std::fs::File::open(&path).map_err(|source| PublishError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let mut ending = None;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|source| PublishError::Read {
            path: path.display().to_string(),
            source,
        })?;
        // Lines of other shapes (a torn last one) say nothing of the ending.
        let Ok(recorded) = serde_json::from_str::<RecordedLine>(&line) else {
            continue;
        };
        if let Event::RunFinished {
            run_id,
            outcome,
            counts,
            final_message,
            ..
        } = recorded.event
            && recorded.agent_id.is_none()
        {
            ending = Some(RunEnding {
                run_id,
                outcome,
                denials: counts.denials,
                checks_failed: counts.checks_failed,
                final_message,
            });
        }
    }
    ending.ok_or_else(|| PublishError::Unfinished(path.display().to_string()))
}

impl RunEnding {
    /// Why this run is not published, if it is not.
    pub fn held_back(&self) -> Option<String> {
        if self.outcome != Outcome::Success {
            return Some(format!(
                "the run ended {}",
                crate::config::serde_name(&self.outcome)
            ));
        }
        if self.denials > 0 {
            return Some(format!("{} call(s) were refused", self.denials));
        }
        if self.checks_failed > 0 {
            return Some(format!("{} check(s) failed", self.checks_failed));
        }
        None
    }
}

/// `template` with `{run_id}` filled, if git takes it as a branch name.
pub fn branch_name(template: &str, run_id: &str) -> Result<String, PublishError> {
    let name = template.replace("{run_id}", run_id);
    if !crate::fleet::valid_branch(&name) {
        return Err(PublishError::Branch(name));
    }
    Ok(name)
}

/// What was published.
#[derive(Debug)]
pub struct Published {
    pub branch: String,
    pub commit: String,
    pub pr_url: String,
}

/// Where and how a change is published.
pub struct Publish<'a> {
    pub workdir: &'a Path,
    pub remote: &'a str,
    pub branch: &'a str,
    pub base: &'a str,
    pub repo: &'a str,
    pub title: &'a str,
    pub run_url: Option<&'a str>,
    /// The commit's author and signing key.
    pub identity: &'a crate::fleet::CommitIdentity,
}

/// Commits the working tree (None when nothing changed), pushes it to the branch and opens
/// or updates the one pull request from it.
pub async fn publish(
    ending: &RunEnding,
    to: &Publish<'_>,
    forge: &Forge,
) -> Result<Option<Published>, PublishError> {
    let base = crate::fleet::head_commit(to.workdir).await?;
    let head =
        crate::fleet::commit_change(to.workdir, &base, to.branch, to.title, to.identity).await?;
    let Some(commit) = head else {
        return Ok(None);
    };
    crate::fleet::push_head(to.workdir, to.remote, to.branch).await?;
    let mut body = format!(
        "Made by tollgate run `{}` (outcome {}).\n",
        ending.run_id,
        crate::config::serde_name(&ending.outcome)
    );
    if let Some(why) = ending.held_back() {
        // Only an operator's `--even-if-held-back` gets here: the reviewer is told.
        body.push_str(&format!(
            "\n**Published although {why}**: read the run's record before merging.\n"
        ));
    }
    if let Some(message) = ending
        .final_message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
    {
        body.push_str("\n**The model's summary**\n\n");
        for line in message.replace('@', "@\u{200b}").lines() {
            body.push_str(&format!("> {line}\n"));
        }
    }
    if let Some(url) = to.run_url {
        body.push_str(&format!(
            "\n[The run's log, transcript and reports]({url})\n"
        ));
    }
    let pr_url = forge
        .open_or_update(&PullRequest {
            repo: to.repo,
            head: to.branch,
            base: to.base,
            title: to.title,
            body: &body,
        })
        .await?;
    Ok(Some(Published {
        branch: to.branch.to_string(),
        commit,
        pr_url,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_checked_as_git_checks_them() {
        assert_eq!(
            branch_name("tollgate/{run_id}", "20261206T1-ab").unwrap(),
            "tollgate/20261206T1-ab"
        );
        for bad in [
            "", "-x", "a..b", "a b", "a~1", "x.lock", "a//b", "a/", "@{x}",
        ] {
            assert!(branch_name(bad, "r").is_err(), "{bad}");
        }
    }
}
