//! Runs a batch: loads the manifest and the task, picks this shard's repositories and takes
//! each through its phases (working copy → run with checks → commit and patch), `jobs` at a
//! time, every phase journaled. A repository's failure is its own: the batch goes on.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::FleetError;
use super::batch_task::BatchTask;
use super::forge::{Forge, PullRequest};
use super::journal::{Journal, Phase, PushPermission, RepoOutcome, RunSummary, stable_hash};
use super::manifest::{Repo, parse_manifest};
use super::shard::Shard;
use super::workcopy;
use crate::agent::{self, RunReport};
use crate::base::AbortHandle;
use crate::exit::ExitCode;
use crate::policy::{Decision, PermissionContext, ToolName};
use crate::redact::Redactor;
use crate::session::{self, RunOptions, Session, read_text};
use crate::tools::builtin;

/// Which finished repositories a batch started again over the same `--out` re-runs;
/// unfinished ones always continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rerun {
    /// Those that failed.
    Failed,
    /// Those whose cache key (head commit, task, policy, model) changed.
    Changed,
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
    max_cost_usd: Option<f64>,
    dry_run: bool,
    /// One client and one rate budget for every repository's pull request.
    forge: Option<Forge>,
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
        std::fs::create_dir_all(options.out.join("repos")).map_err(|source| {
            FleetError::Output {
                path: options.out.clone(),
                source,
            }
        })?;
        let out = options
            .out
            .canonicalize()
            .map_err(|source| FleetError::Output {
                path: options.out.clone(),
                source,
            })?;
        Ok(Batch {
            task,
            repos,
            out,
            jobs: options.jobs.max(1),
            rerun: options.rerun,
            policy: options.policy,
            policy_text,
            model: options.model,
            max_cost_usd,
            dry_run: options.dry_run,
            forge,
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

    async fn run_local(self, redactor: Arc<Redactor>) -> Vec<Journal> {
        let batch = Arc::new(self);
        let gate = Arc::new(Semaphore::new(batch.jobs));
        let tally = Arc::new(Mutex::new(Tally {
            total: batch.repos.len(),
            ..Tally::default()
        }));
        let mut tasks = Vec::new();
        for repo in batch.repos.clone() {
            let (batch, gate, tally, redactor) =
                (batch.clone(), gate.clone(), tally.clone(), redactor.clone());
            tasks.push(tokio::task::spawn_local(async move {
                let Ok(_permit) = gate.acquire_owned().await else {
                    return Journal::new(&repo.id);
                };
                let over_budget = batch.max_cost_usd.is_some_and(|limit| {
                    tally
                        .lock()
                        .map(|tally| tally.cost >= limit)
                        .unwrap_or(true)
                });
                if let Ok(mut tally) = tally.lock() {
                    tally.running += 1;
                }
                let journal = if over_budget {
                    skipped(&batch, &repo)
                } else {
                    batch.process(&repo, redactor).await
                };
                if let Ok(mut tally) = tally.lock() {
                    tally.finish(&journal);
                }
                journal
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
        journals
    }

    fn repo_dir(&self, repo: &Repo) -> PathBuf {
        self.out.join("repos").join(&repo.id)
    }

    async fn process(&self, repo: &Repo, redactor: Arc<Redactor>) -> Journal {
        let dir = self.repo_dir(repo);
        let journal_path = dir.join("journal.json");
        let previous = Journal::read(&journal_path);
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
        if let Err(err) = std::fs::create_dir_all(&dir).and_then(|()| journal.write(&journal_path))
        {
            journal.outcome = Some(RepoOutcome::Failed);
            journal.reason = Some(format!("cannot write the journal: {err}"));
        }
        journal
    }

    /// Takes the repository from its journaled phase to its end. `Err` carries the journal
    /// as far as it got and why it stopped.
    async fn advance(
        &self,
        repo: &Repo,
        previous: Option<Journal>,
        dir: &Path,
        redactor: Arc<Redactor>,
    ) -> Result<Journal, Box<Stopped>> {
        let fresh = || Journal::new(&repo.id);
        let head = workcopy::source_head(repo).await.map_err(|err| {
            Box::new(Stopped {
                journal: previous.clone().unwrap_or_else(fresh),
                reason: format!("cannot read the repository: {err}"),
            })
        })?;
        let key = self.cache_key(&head);
        let mut journal = match previous {
            Some(journal) if self.keeps(&journal, &key) => return Ok(journal),
            Some(journal)
                if (!journal.finished() || self.publish_pending(&journal))
                    && journal.cache_key.as_deref() == Some(&key) =>
            {
                journal
            }
            _ => fresh(),
        };
        let fail = |journal: &Journal, reason: String| {
            Box::new(Stopped {
                journal: journal.clone(),
                reason,
            })
        };
        let (task_text, settings) = self
            .task
            .render(repo)
            .map_err(|err| fail(&journal, err.to_string()))?;
        journal.cache_key = Some(key);
        journal.head = Some(head.clone());
        journal.branch = Some(settings.branch.clone());
        journal.outcome = None;
        journal.reason = None;
        let work = dir.join("work");
        let journal_path = dir.join("journal.json");
        let save = |journal: &Journal| {
            journal
                .write(&journal_path)
                .map_err(|err| fail(journal, format!("cannot write the journal: {err}")))
        };
        std::fs::create_dir_all(dir)
            .map_err(|err| fail(&journal, format!("cannot create {}: {err}", dir.display())))?;
        if journal.phase < Phase::Checked {
            // A run cut short may have left half an edit: always start it from a clean copy.
            workcopy::prepare(repo, &head, &work, &settings.branch)
                .await
                .map_err(|err| fail(&journal, format!("cannot make the working copy: {err}")))?;
            journal.phase = Phase::Cloned;
            save(&journal)?;
            let task_file = dir.join("task.yaml");
            std::fs::write(&task_file, &task_text).map_err(|err| {
                fail(
                    &journal,
                    format!("cannot write {}: {err}", task_file.display()),
                )
            })?;
            let push = settings.publish.as_ref().map(|publish| PushCall {
                remote: &publish.remote,
                branch: &settings.branch,
            });
            let (report, push) = self
                .run_agent(&task_file, &work, &dir.join("run"), push, redactor)
                .await
                .map_err(|reason| fail(&journal, reason))?;
            journal.phase = Phase::Checked;
            journal.run = Some(summary(&report));
            journal.push = push;
            save(&journal)?;
        }
        let passed = journal
            .run
            .as_ref()
            .is_some_and(|run| run.exit_code == ExitCode::Success.code());
        if !passed {
            let failures = journal
                .run
                .as_ref()
                .map(|run| run.failures.join("; "))
                .unwrap_or_default();
            journal.outcome = Some(RepoOutcome::Failed);
            journal.reason = Some(format!("the run failed: {failures}"));
            return Ok(journal);
        }
        if journal.phase < Phase::Committed {
            let commit = workcopy::commit(&work, &head, &settings.commit_message)
                .await
                .map_err(|err| fail(&journal, format!("cannot commit the change: {err}")))?;
            if commit.is_some() {
                let patch = dir.join(format!("{}.patch", repo.id));
                workcopy::write_patch(&work, &head, &patch)
                    .await
                    .map_err(|err| fail(&journal, err.to_string()))?;
                journal.patch = Some(patch);
            }
            journal.commit = commit;
            journal.phase = Phase::Committed;
            save(&journal)?;
        }
        if journal.commit.is_none() {
            journal.outcome = Some(RepoOutcome::Unchanged);
            return Ok(journal);
        }
        if let (Some(publish), Some(forge)) = (&settings.publish, &self.forge)
            && !self.dry_run
        {
            match &journal.push {
                Some(PushPermission::Allowed) => {}
                Some(PushPermission::Refused(reason)) => {
                    return Err(fail(
                        &journal,
                        format!("the run's policy does not allow the push: {reason}"),
                    ));
                }
                None => {
                    return Err(fail(
                        &journal,
                        "the run was made before publishing was configured, so its policy was \
                         never asked about the push; run it again with --rerun failed"
                            .into(),
                    ));
                }
            }
            if journal.phase < Phase::Pushed {
                workcopy::push(&work, &publish.remote, &settings.branch)
                    .await
                    .map_err(|err| fail(&journal, format!("cannot push: {err}")))?;
                journal.phase = Phase::Pushed;
                save(&journal)?;
            }
            if journal.phase < Phase::PrOpened {
                let body = pr_body(repo, &journal);
                let request = PullRequest {
                    repo: &publish.forge_repo,
                    head: &settings.branch,
                    base: &publish.base,
                    title: &publish.title,
                    body: &body,
                };
                let url = forge.open_or_update(&request).await.map_err(|err| {
                    fail(&journal, format!("cannot open the pull request: {err}"))
                })?;
                journal.pr_url = Some(url);
                journal.phase = Phase::PrOpened;
                save(&journal)?;
            }
        }
        journal.outcome = Some(RepoOutcome::Changed);
        Ok(journal)
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

    async fn run_agent(
        &self,
        task: &Path,
        work: &Path,
        out: &Path,
        push: Option<PushCall<'_>>,
        redactor: Arc<Redactor>,
    ) -> Result<(RunReport, Option<PushPermission>), String> {
        let options = RunOptions {
            task: task.to_path_buf(),
            policy: self.policy.clone(),
            model: self.model.clone(),
            workdir: Some(work.to_path_buf()),
            out: Some(out.to_path_buf()),
            ..RunOptions::default()
        };
        let Session { spec, provider } = session::assemble(options, redactor)
            .map_err(|err| format!("cannot start the run: {err}"))?;
        let push = push.map(|push| push.permission(&spec));
        let (_handle, abort) = AbortHandle::new();
        let report = agent::run(spec, provider, abort)
            .await
            .map_err(|err| format!("the run stopped: {err}"))?;
        if let Ok(junit) = crate::report::junit_xml(&report) {
            let _ = std::fs::write(out.join("junit.xml"), junit);
        }
        if let Ok(sarif) = crate::report::sarif_json(&report) {
            let _ = std::fs::write(out.join("tollgate.sarif"), sarif);
        }
        Ok((report, push))
    }
}

/// The push a published repository needs, put to its run's own gate as the Bash call it
/// is: publishing happens only where the policy would let the agent push (fail closed —
/// an ask is a no in a batch).
struct PushCall<'a> {
    remote: &'a str,
    branch: &'a str,
}

impl PushCall<'_> {
    fn permission(&self, spec: &crate::agent::RunSpec) -> PushPermission {
        let Some(bash) = builtin(&ToolName::Bash) else {
            return PushPermission::Refused("no Bash tool to decide the push".into());
        };
        let command = format!("git push {} {}", self.remote, self.branch);
        let input = serde_json::json!({ "command": command });
        let ctx = PermissionContext {
            mode: spec.mode,
            rules: &spec.rules,
            workspace: &spec.workspace,
            auto_allow_bash: false,
        };
        let call = match crate::call::PreparedCall::prepare(bash, input) {
            Ok(call) => call,
            Err(err) => return PushPermission::Refused(format!("`{command}`: {err}")),
        };
        // The policy alone, as `check` gives it: no hook or classifier is there to answer.
        let gated = crate::policy::decide(&call, &ctx);
        let decision = crate::call::approval::headless(&call, gated, &ctx, None);
        match decision.decision {
            Decision::Allow => PushPermission::Allowed,
            Decision::Ask | Decision::Deny => {
                PushPermission::Refused(format!("`{command}`: {}", decision.reason))
            }
        }
    }
}

/// The pull request's description: what the run did and what it cost.
fn pr_body(repo: &Repo, journal: &Journal) -> String {
    let mut body = format!("Opened by `tollgate batch` for `{}`.\n\n", repo.id);
    if let Some(run) = &journal.run {
        body.push_str(&format!(
            "| checks passed | checks failed | denials | cost (USD) |\n|---|---|---|---|\n| {} | {} | {} | {} |\n",
            run.checks_passed,
            run.checks_failed,
            run.denials,
            run.cost_usd.map(|cost| format!("{cost:.4}")).unwrap_or_else(|| "unknown".into()),
        ));
    }
    body
}

/// How far a repository got before it stopped, and why.
struct Stopped {
    journal: Journal,
    reason: String,
}

fn skipped(batch: &Batch, repo: &Repo) -> Journal {
    let mut journal = Journal::read(&batch.repo_dir(repo).join("journal.json"))
        .unwrap_or_else(|| Journal::new(&repo.id));
    if !journal.finished() {
        journal.outcome = Some(RepoOutcome::Skipped);
        journal.reason = Some("not started: batch.max_cost_usd was reached".into());
    }
    journal
}

fn summary(report: &RunReport) -> RunSummary {
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|record| !record.outcome.passed)
        .map(|record| format!("check `{}` failed", record.check.name))
        .collect();
    let count = |passed: bool| {
        report
            .checks
            .iter()
            .filter(|record| record.outcome.passed == passed)
            .count() as u32
    };
    let mut failures = failed;
    if let Some(error) = &report.error {
        failures.push(error.clone());
    }
    if failures.is_empty() && report.exit_code != ExitCode::Success {
        failures.push(format!(
            "outcome {}",
            crate::config::serde_name(&report.outcome)
        ));
    }
    RunSummary {
        outcome: crate::config::serde_name(&report.outcome),
        exit_code: report.exit_code.code(),
        checks_passed: count(true),
        checks_failed: count(false),
        denials: report.denials.len() as u32,
        cost_usd: report.total_cost_usd,
        duration_ms: report.duration_ms,
        failures,
    }
}

/// The progress line's counts.
#[derive(Debug, Default)]
struct Tally {
    total: usize,
    done: usize,
    running: usize,
    failed: usize,
    cost: f64,
}

impl Tally {
    /// Counts a finished repository and prints the progress line: plain lines, which a CI
    /// log keeps and a terminal shows just as well.
    fn finish(&mut self, journal: &Journal) {
        self.running = self.running.saturating_sub(1);
        self.done += 1;
        if journal.outcome == Some(RepoOutcome::Failed) {
            self.failed += 1;
        }
        self.cost += journal
            .run
            .as_ref()
            .and_then(|run| run.cost_usd)
            .unwrap_or(0.0);
        let outcome = journal
            .outcome
            .map(|outcome| crate::config::serde_name(&outcome))
            .unwrap_or_default();
        let reason = journal
            .reason
            .as_deref()
            .map(|reason| format!(" — {}", crate::neutral::log_line(reason)))
            .unwrap_or_default();
        eprintln!(
            "tollgate batch: [{}/{} done, {} running, {} failed, ${:.4}] {}: {outcome}{reason}",
            self.done, self.total, self.running, self.failed, self.cost, journal.repo
        );
    }
}
