//! One repository's phases once the driver knows where it resumes: the run with its checks
//! (from a fresh working copy), the commit and patch, the push and the pull request. Each
//! step records its phase in the journal as it ends; none decides which repositories run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch_task::{BatchSettings, PublishSettings};
use super::forge::{Forge, PullRequest};
use super::journal::{Durability, Journal, Phase, PushPermission, RunSummary};
use super::manifest::Repo;
use super::signing::CommitIdentity;
use super::workcopy;
use crate::agent::{self, RunReport};
use crate::base::AbortHandle;
use crate::exit::ExitCode;
use crate::policy::{PermissionContext, ToolName};
use crate::redact::Redactor;
use crate::session::{self, RunOptions, Session};
use crate::tools::builtin;
use crate::transcript::Outcome;

/// How far a repository got before it stopped, and why.
pub(super) struct Stopped {
    pub journal: Journal,
    pub reason: String,
}

pub(super) fn stop(journal: &Journal, reason: impl Into<String>) -> Box<Stopped> {
    Box::new(Stopped {
        journal: journal.clone(),
        reason: reason.into(),
    })
}

/// What every run of the batch shares: the managed policy and the model override.
pub(super) struct RunInputs<'a> {
    pub policy: Option<&'a Path>,
    pub model: Option<&'a str>,
    pub shared_budget: Option<&'a crate::shared_budget::SharedBudgetOptions>,
    pub telemetry: Option<&'a crate::telemetry::TelemetryConfig>,
}

/// One repository's steps, its task filled and its folder made.
pub(super) struct RepoSteps<'a> {
    pub repo: &'a Repo,
    pub head: &'a str,
    pub settings: BatchSettings,
    /// The task file as filled for this repository.
    pub task_text: String,
    /// `OUT/repos/ID`.
    pub dir: PathBuf,
    pub inputs: RunInputs<'a>,
}

impl RepoSteps<'_> {
    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    fn save(&self, journal: &Journal, durability: Durability) -> Result<(), Box<Stopped>> {
        journal
            .write(&self.dir.join("journal.json"), durability)
            .map_err(|err| stop(journal, format!("cannot write the journal: {err}")))
    }

    /// A fresh working copy, then the agent's run with its checks: `Cloned`, then `Checked`.
    /// A run cut short may have left half an edit, so this always starts from a clean copy.
    pub async fn run(
        &self,
        journal: &mut Journal,
        redactor: Arc<Redactor>,
    ) -> Result<(), Box<Stopped>> {
        let work = self.work();
        workcopy::prepare(self.repo, self.head, &work, &self.settings.branch)
            .await
            .map_err(|err| stop(journal, format!("cannot make the working copy: {err}")))?;
        journal.phase = Phase::Cloned;
        // An earlier journal must not come back after a power cut once its working copy is
        // gone; without one, a lost write only starts the repository afresh again.
        let replaces = if self.dir.join("journal.json").exists() {
            Durability::Disk
        } else {
            Durability::Process
        };
        self.save(journal, replaces)?;
        let task_file = self.dir.join("task.yaml");
        crate::out_dir::write_atomic(&task_file, self.task_text.as_bytes())
            .map_err(|err| stop(journal, format!("{err}: {}", err.source)))?;
        let push = self.settings.publish.as_ref().map(|publish| PushCall {
            remote: &publish.remote,
            branch: &self.settings.branch,
        });
        let (report, push) = self
            .run_agent(&task_file, &work, push, redactor)
            .await
            .map_err(|reason| stop(journal, reason))?;
        journal.phase = Phase::Checked;
        journal.run = Some(summary(&report));
        journal.push = push;
        self.save(journal, Durability::Disk)
    }

    /// Commits what the run changed on the branch and writes its patch: `Committed`. A
    /// commit made just before a kill is found (the branch is ahead of `head`), not repeated.
    pub async fn commit(&self, journal: &mut Journal) -> Result<(), Box<Stopped>> {
        let work = self.work();
        let commit = workcopy::commit(
            &work,
            self.head,
            &self.settings.branch,
            &self.settings.commit_message,
            &CommitIdentity::default(),
        )
        .await
        .map_err(|err| stop(journal, format!("cannot commit the change: {err}")))?;
        if commit.is_some() {
            let patch = self.dir.join(format!("{}.patch", self.repo.id));
            workcopy::write_patch(&work, self.head, &patch)
                .await
                .map_err(|err| stop(journal, err.to_string()))?;
            journal.patch = Some(patch);
        }
        journal.commit = commit;
        journal.phase = Phase::Committed;
        self.save(journal, Durability::Process)
    }

    /// Pushes the branch and opens (or updates) its one pull request: `Pushed`, then
    /// `PrOpened`. Only when the run's own gate allowed the push.
    pub async fn publish(
        &self,
        journal: &mut Journal,
        publish: &PublishSettings,
        forge: &Forge,
    ) -> Result<(), Box<Stopped>> {
        match &journal.push {
            Some(PushPermission::Allowed) => {}
            Some(PushPermission::Refused(reason)) => {
                return Err(stop(
                    journal,
                    format!("the run's policy does not allow the push: {reason}"),
                ));
            }
            None => {
                return Err(stop(
                    journal,
                    "the run was made before publishing was configured, so its policy was \
                     never asked about the push; run it again with --rerun failed",
                ));
            }
        }
        if journal.phase < Phase::Pushed {
            workcopy::push(&self.work(), &publish.remote, &self.settings.branch)
                .await
                .map_err(|err| stop(journal, format!("cannot push: {err}")))?;
            journal.phase = Phase::Pushed;
            self.save(journal, Durability::Disk)?;
        }
        if journal.phase < Phase::PrOpened {
            let body = pr_body(self.repo, journal);
            let request = PullRequest {
                repo: &publish.forge_repo,
                head: &self.settings.branch,
                base: &publish.base,
                title: &publish.title,
                body: &body,
            };
            let url = forge
                .open_or_update(&request)
                .await
                .map_err(|err| stop(journal, format!("cannot open the pull request: {err}")))?;
            journal.pr_url = Some(url);
            journal.phase = Phase::PrOpened;
            self.save(journal, Durability::Disk)?;
        }
        Ok(())
    }

    async fn run_agent(
        &self,
        task: &Path,
        work: &Path,
        push: Option<PushCall<'_>>,
        redactor: Arc<Redactor>,
    ) -> Result<(RunReport, Option<PushPermission>), String> {
        let out = self.dir.join("run");
        let telemetry = self
            .inputs
            .telemetry
            .map(|config| crate::telemetry::Telemetry::new(config.clone()));
        let options = RunOptions {
            observer: telemetry
                .as_ref()
                .map(crate::telemetry::Telemetry::observer),
            task: Some(task.to_path_buf()),
            // The batch filled its own placeholders: a value is not read as one again.
            prompt_is_filled: true,
            policy: self.inputs.policy.map(Path::to_path_buf),
            model: self.inputs.model.map(str::to_string),
            shared_budget: self.inputs.shared_budget.cloned(),
            workdir: Some(work.to_path_buf()),
            out: Some(out.clone()),
            // The journal decides when a repository's run is done again; its folder is then
            // the new run's.
            existing_out: crate::out_dir::Existing::Replace,
            ..RunOptions::default()
        };
        let Session { spec, provider } = session::assemble(options, redactor)
            .map_err(|err| format!("cannot start the run: {err}"))?;
        let push = push.map(|push| push.permission(&spec));
        let (_handle, abort) = AbortHandle::new();
        let redactor = spec.redactor.clone();
        let ran = agent::run(spec, provider, abort).await;
        if let Some(telemetry) = &telemetry {
            telemetry.finish().await;
        }
        let mut report = ran.map_err(|err| format!("the run stopped: {err}"))?;
        let reports = [
            (
                "junit.xml",
                crate::report::junit_xml(&report).map_err(|err| err.to_string()),
            ),
            (
                "tollgate.sarif",
                crate::report::sarif_json(&report).map_err(|err| err.to_string()),
            ),
            // What `tollgate run` prints, kept for the batch report's link.
            ("summary.txt", Ok(crate::report::text_summary(&report, &[]))),
        ];
        for (name, text) in reports {
            let path = out.join(name);
            let written = text.map_err(std::io::Error::other).and_then(|text| {
                crate::out_dir::write_atomic(&path, redactor.redact(&text).as_bytes())
                    .map_err(|err| err.source)
            });
            // As in a single run: a record that could not be written is the run's ending.
            if let Err(source) = written
                && report.outcome != Outcome::OutputFailed
            {
                report.outcome = Outcome::OutputFailed;
                report.exit_code = ExitCode::OutputError;
                report.error = Some(format!("cannot write {}: {source}", path.display()));
            }
        }
        Ok((report, push))
    }
}

/// Why the journaled run does not count as a success, if it does not.
pub(super) fn run_failure(journal: &Journal) -> Option<String> {
    let run = journal.run.as_ref();
    if run.is_some_and(|run| run.exit_code == ExitCode::Success.code()) {
        return None;
    }
    let failures = run.map(|run| run.failures.join("; ")).unwrap_or_default();
    Some(format!("the run failed: {failures}"))
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
            disk: None,
            auto_allow_bash: false,
        };
        let call = match crate::call::PreparedCall::prepare(bash, input) {
            Ok(call) => call,
            Err(err) => return PushPermission::Refused(format!("`{command}`: {err}")),
        };
        // The policy alone, as `check` gives it: no hook or classifier is there to answer.
        match crate::call::Decider::headless(ctx).decide_now(call) {
            crate::call::Resolution::Allowed { .. } => PushPermission::Allowed,
            crate::call::Resolution::Refused { decision, .. } => {
                PushPermission::Refused(format!("`{command}`: {}", decision.reason))
            }
            // A batch's push has no resume to wait for: a parked push is not made.
            crate::call::Resolution::Parked { decision, .. } => PushPermission::Refused(format!(
                "`{command}`: {} (a batch's push cannot wait for a person)",
                decision.reason
            )),
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
        run_id: report.run_id.clone(),
        outcome: crate::config::serde_name(&report.outcome),
        exit_code: report.exit_code.code(),
        checks_passed: count(true),
        checks_failed: count(false),
        denials: report.denials.len() as u32,
        cost_usd: report.total_cost_usd,
        duration_ms: report.duration_ms,
        failures,
        denial: report.denials.first().map(|denial| {
            format!(
                "{} {}: {}",
                denial.tool,
                crate::report::input_summary(&denial.tool, &denial.input),
                denial.decision.reason
            )
        }),
        usage_estimated: report.counts.estimated_requests > 0,
    }
}
