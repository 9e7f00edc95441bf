//! Runs a batch: loads the manifest and the task, picks this shard's repositories, decides
//! where each resumes and whether the cost limit lets it start, and takes it through its
//! phases (`phases.rs`), `jobs` at a time. A repository's failure is its own: the batch goes on.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::FleetError;
use super::batch_task::BatchTask;
use super::forge::Forge;
use super::journal::{Durability, Journal, Phase, RepoOutcome, stable_hash};
use super::manifest::{Repo, parse_manifest};
use super::phases::{RepoSteps, RunInputs, Stopped, run_failure, stop};
use super::progress::Progress;
use super::shard::Shard;
use super::tally::{cost_of, spent};
use super::workcopy;
use crate::out_dir::OutDirLock;
use crate::redact::Redactor;
use crate::session::read_text;

/// Which finished repositories a batch started again over the same `--out` re-runs;
/// unfinished ones always continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rerun {
    /// Those that failed.
    Failed,
    /// Those whose cache key (head commit, task, policy, model) changed.
    Changed,
    /// Every repository, from the start: the way to start over, also past a journal that
    /// does not parse (which without it stops the batch).
    All,
}

pub struct BatchOptions {
    pub task: PathBuf,
    pub manifest: PathBuf,
    pub jobs: usize,
    pub shard: Option<Shard>,
    pub out: PathBuf,
    pub dry_run: bool,
    pub rerun: Option<Rerun>,
    /// The managed policy for every run.
    pub policy: Option<PathBuf>,
    pub model: Option<String>,
    /// A cost budget every run of the batch (and of its other shards) shares.
    pub shared_budget: Option<crate::shared_budget::SharedBudgetOptions>,
    /// Where each repository's run sends its telemetry (a trace of its own each).
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
}

/// A batch loaded and validated, not yet started.
pub struct Batch {
    task: BatchTask,
    repos: Vec<Repo>,
    out: PathBuf,
    jobs: usize,
    rerun: Option<Rerun>,
    policy: Option<PathBuf>,
    policy_text: String,
    model: Option<String>,
    shared_budget: Option<crate::shared_budget::SharedBudgetOptions>,
    telemetry: Option<crate::telemetry::TelemetryConfig>,
    max_cost_usd: Option<f64>,
    dry_run: bool,
    /// One client and one rate budget for every repository's pull request.
    forge: Option<Forge>,
    /// Each repository's journal from an earlier batch over this folder, read at load.
    previous: Vec<Option<Journal>>,
    _lock: OutDirLock,
}

impl Batch {
    /// Everything that can be wrong with the files is found here, before any git.
    pub fn load(options: BatchOptions) -> Result<Batch, FleetError> {
        let manifest_text = read_text(&options.manifest, "manifest")?;
        let base = std::path::absolute(&options.manifest)
            .ok()
            .and_then(|path| path.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let all = parse_manifest(&manifest_text, &options.manifest, &base)?;
        let task_text = read_text(&options.task, "task file")?;
        let task = BatchTask::load(task_text, &options.task, &all)?;
        let first = match all.first() {
            Some(first) => Some(task.render(first)?.1),
            None => None,
        };
        let max_cost_usd = first.as_ref().and_then(|settings| settings.max_cost_usd);
        let forge = match first.and_then(|settings| settings.publish) {
            Some(publish) if !options.dry_run => {
                let token = std::env::var(&publish.token_env)
                    .ok()
                    .filter(|token| !token.trim().is_empty());
                if token.is_none() {
                    tracing::warn!(
                        "{} is not set: pull requests are opened without a token",
                        publish.token_env
                    );
                }
                Some(Forge::new(&publish.api_url, token)?)
            }
            _ => None,
        };
        let repos = match options.shard {
            Some(shard) => all.into_iter().filter(|repo| shard.takes(repo)).collect(),
            None => all,
        };
        let policy_text = match &options.policy {
            Some(path) => read_text(path, "policy file")?,
            None => String::new(),
        };
        // Held for the batch's life: a second batch over the same folder would race this
        // one through the same journals and working copies.
        let (out, lock) = crate::out_dir::claim(&options.out)?;
        std::fs::create_dir_all(out.join("repos")).map_err(|source| FleetError::Output {
            path: options.out.clone(),
            source,
        })?;
        let mut previous = Vec::with_capacity(repos.len());
        for repo in &repos {
            let path = out.join("repos").join(&repo.id).join("journal.json");
            previous.push(match Journal::read(&path) {
                Ok(journal) => journal,
                // Starting over was asked for: what the journal said no longer matters.
                Err(_) if options.rerun == Some(Rerun::All) => None,
                Err(err) => return Err(err.into()),
            });
        }
        Ok(Batch {
            task,
            repos,
            out,
            jobs: options.jobs.max(1),
            rerun: options.rerun,
            policy: options.policy,
            policy_text,
            model: options.model,
            shared_budget: options.shared_budget,
            telemetry: options.telemetry,
            max_cost_usd,
            dry_run: options.dry_run,
            forge,
            previous,
            _lock: lock,
        })
    }

    pub fn repos(&self) -> &[Repo] {
        &self.repos
    }

    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Runs every repository of the shard; returns their journals in manifest order.
    pub async fn run(self, redactor: Arc<Redactor>) -> Vec<Journal> {
        // A run's loop holds its transcript writer across awaits and is not `Send`: the
        // repositories interleave on one thread, their commands and requests still async.
        tokio::task::LocalSet::new()
            .run_until(self.run_local(redactor))
            .await
    }

    async fn run_local(mut self, redactor: Arc<Redactor>) -> Vec<Journal> {
        let previous = std::mem::take(&mut self.previous);
        let batch = Arc::new(self);
        // What earlier runs over this folder spent counts: a restarted batch gets no new budget.
        let spent = spent(previous.iter().flatten());
        let progress = Arc::new(Mutex::new(Progress::start(batch.repos.len(), spent)));
        let gate = Arc::new(Semaphore::new(batch.jobs));
        let mut tasks = Vec::new();
        for (repo, previous) in batch.repos.clone().into_iter().zip(previous) {
            let (batch, gate, progress, redactor) = (
                batch.clone(),
                gate.clone(),
                progress.clone(),
                redactor.clone(),
            );
            tasks.push(tokio::task::spawn_local(async move {
                let Ok(_permit) = gate.acquire_owned().await else {
                    return Journal::new(&repo.id);
                };
                batch.start(&repo, previous, &progress, redactor).await
            }));
        }
        let mut journals = Vec::with_capacity(tasks.len());
        for (task, repo) in tasks.into_iter().zip(&batch.repos) {
            journals.push(task.await.unwrap_or_else(|err| {
                let mut journal = Journal::new(&repo.id);
                journal.outcome = Some(RepoOutcome::Failed);
                journal.reason = Some(format!("the repository's task ended abnormally: {err}"));
                journal
            }));
        }
        if let Ok(progress) = progress.lock() {
            progress.end();
        }
        journals
    }

    /// Takes one repository through its phases, unless the batch's cost limit is spent:
    /// then it is not started (one already running finishes).
    async fn start(
        &self,
        repo: &Repo,
        previous: Option<Journal>,
        progress: &Mutex<Progress>,
        redactor: Arc<Redactor>,
    ) -> Journal {
        // A poisoned lock means the spend is unknown: fail closed, start nothing more.
        let spent = progress
            .lock()
            .map(|progress| progress.spent())
            .unwrap_or(f64::INFINITY);
        if let Some(limit) = self.max_cost_usd
            && spent >= limit
        {
            let journal = self.skip(repo, previous, limit, spent);
            if let Ok(mut progress) = progress.lock() {
                progress.finished(&journal, false, 0.0);
            }
            return journal;
        }
        if let Ok(mut progress) = progress.lock() {
            progress.started();
        }
        let run_id = |journal: Option<&Journal>| {
            journal.and_then(|journal| journal.run.as_ref().map(|run| run.run_id.clone()))
        };
        let before = run_id(previous.as_ref());
        let journal = self.process(repo, previous, redactor).await;
        // Only a new run is new spend: an earlier one's cost is counted already.
        let cost = if run_id(Some(&journal)) == before {
            0.0
        } else {
            cost_of(&journal).unwrap_or(0.0)
        };
        if let Ok(mut progress) = progress.lock() {
            progress.finished(&journal, true, cost);
        }
        journal
    }

    fn repo_dir(&self, repo: &Repo) -> PathBuf {
        self.out.join("repos").join(&repo.id)
    }

    async fn process(
        &self,
        repo: &Repo,
        previous: Option<Journal>,
        redactor: Arc<Redactor>,
    ) -> Journal {
        let dir = self.repo_dir(repo);
        let mut journal = match self.advance(repo, previous, &dir, redactor).await {
            Ok(journal) => journal,
            Err(stopped) => {
                let Stopped {
                    mut journal,
                    reason,
                } = *stopped;
                journal.outcome = Some(RepoOutcome::Failed);
                journal.reason = Some(reason);
                journal
            }
        };
        write_journal(&dir, &mut journal);
        journal
    }

    /// Takes the repository from its journaled phase to its end, one phase a step. `Err`
    /// carries the journal as far as it got and why it stopped.
    async fn advance(
        &self,
        repo: &Repo,
        previous: Option<Journal>,
        dir: &Path,
        redactor: Arc<Redactor>,
    ) -> Result<Journal, Box<Stopped>> {
        let head = workcopy::source_head(repo).await.map_err(|err| {
            let journal = previous.clone().unwrap_or_else(|| Journal::new(&repo.id));
            stop(&journal, format!("cannot read the repository: {err}"))
        })?;
        let key = self.cache_key(&head);
        let mut journal = match self.resume(repo, previous, &key) {
            Resume::Keep(journal) => return Ok(journal),
            Resume::Continue(journal) => journal,
        };
        let steps = self.steps(repo, &head, key, dir, &mut journal)?;
        if journal.phase < Phase::Checked {
            steps.run(&mut journal, redactor).await?;
        }
        if let Some(reason) = run_failure(&journal) {
            journal.outcome = Some(RepoOutcome::Failed);
            journal.reason = Some(reason);
            return Ok(journal);
        }
        if journal.phase < Phase::Committed {
            steps.commit(&mut journal).await?;
        }
        if journal.commit.is_none() {
            journal.outcome = Some(RepoOutcome::Unchanged);
            return Ok(journal);
        }
        if let (Some(publish), Some(forge)) = (&steps.settings.publish, &self.forge)
            && !self.dry_run
        {
            steps.publish(&mut journal, publish, forge).await?;
        }
        journal.outcome = Some(RepoOutcome::Changed);
        Ok(journal)
    }

    /// Where a repository stands given its earlier journal and its cache key now.
    fn resume(&self, repo: &Repo, previous: Option<Journal>, key: &str) -> Resume {
        match previous {
            Some(journal) if self.keeps(&journal, key) => Resume::Keep(journal),
            Some(journal)
                if (!journal.finished() || self.publish_pending(&journal))
                    && journal.cache_key.as_deref() == Some(key) =>
            {
                Resume::Continue(journal)
            }
            Some(_) | None => Resume::Continue(Journal::new(&repo.id)),
        }
    }

    /// The repository's task filled, its folder made and the journal's inputs recorded.
    fn steps<'a>(
        &'a self,
        repo: &'a Repo,
        head: &'a str,
        key: String,
        dir: &Path,
        journal: &mut Journal,
    ) -> Result<RepoSteps<'a>, Box<Stopped>> {
        let (task_text, settings) = self
            .task
            .render(repo)
            .map_err(|err| stop(journal, err.to_string()))?;
        journal.cache_key = Some(key);
        journal.head = Some(head.to_string());
        journal.branch = Some(settings.branch.clone());
        journal.outcome = None;
        journal.reason = None;
        std::fs::create_dir_all(dir)
            .map_err(|err| stop(journal, format!("cannot create {}: {err}", dir.display())))?;
        Ok(RepoSteps {
            repo,
            head,
            settings,
            task_text,
            dir: dir.to_path_buf(),
            inputs: RunInputs {
                policy: self.policy.as_deref(),
                model: self.model.as_deref(),
                shared_budget: self.shared_budget.as_ref(),
                telemetry: self.telemetry.as_ref(),
            },
        })
    }

    /// A repository not started because the cost limit was spent; its journal says so, so
    /// the merged reports do, and a later batch (with a higher limit) continues it.
    fn skip(&self, repo: &Repo, previous: Option<Journal>, limit: f64, spent: f64) -> Journal {
        let mut journal = previous.unwrap_or_else(|| Journal::new(&repo.id));
        if journal.finished() {
            return journal;
        }
        journal.outcome = Some(RepoOutcome::Skipped);
        journal.reason = Some(format!(
            "not started: the batch's cost limit (max_cost_usd {limit}) was reached, ${spent:.4} spent"
        ));
        write_journal(&self.repo_dir(repo), &mut journal);
        journal
    }

    /// Whether a journal from an earlier batch stands as it is.
    fn keeps(&self, journal: &Journal, key: &str) -> bool {
        if !journal.finished() || self.publish_pending(journal) {
            return false;
        }
        match self.rerun {
            None => true,
            Some(Rerun::Failed) => journal.outcome != Some(RepoOutcome::Failed),
            Some(Rerun::Changed) => journal.cache_key.as_deref() == Some(key),
            Some(Rerun::All) => false,
        }
    }

    /// A change committed by a dry run (or before publishing was configured) that this
    /// batch is to push: it continues from its commit.
    fn publish_pending(&self, journal: &Journal) -> bool {
        self.forge.is_some()
            && journal.outcome == Some(RepoOutcome::Changed)
            && journal.phase < Phase::PrOpened
    }

    fn cache_key(&self, head: &str) -> String {
        let model = self.model.as_deref().unwrap_or("");
        let hash = stable_hash(&[
            head.as_bytes(),
            self.task.text.as_bytes(),
            self.policy_text.as_bytes(),
            model.as_bytes(),
        ]);
        format!("{hash:016x}")
    }
}

/// What an earlier journal means for this batch.
enum Resume {
    /// Finished and still standing: reported as it is.
    Keep(Journal),
    /// Continued from its last finished phase (a fresh journal starts from the beginning).
    Continue(Journal),
}

/// Writes the journal to `dir`; a journal that cannot be written fails its repository,
/// since a restart could not know where it stood. Not flushed: a repository's outcome is
/// derived from the phases journaled before it, so a lost write only derives it again.
fn write_journal(dir: &Path, journal: &mut Journal) {
    if let Err(err) = std::fs::create_dir_all(dir)
        .and_then(|()| journal.write(&dir.join("journal.json"), Durability::Process))
    {
        journal.outcome = Some(RepoOutcome::Failed);
        journal.reason = Some(format!("cannot write the journal: {err}"));
    }
}
