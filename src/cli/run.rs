//! `tollgate run`: set up the run from the task, policies and flags, drive the agent with
//! SIGINT/SIGTERM wired to its abort, then write the reports and print the summary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use super::setup::{
    additional_directories, canonical_dir, dangerous_allow_rules, home_dir, load_policy, load_task,
};
use super::{FailOnArg, ReportFormat, RunArgs};
use crate::agent::{self, RunSpec};
use crate::exit::ExitCode;
use crate::model::{Provider, ScriptedModel};
use crate::policy::{PermissionMode, RuleKind, RuleRef, RuleSet, Workspace};
use crate::redact::Redactor;
use crate::report::github::{self, GithubEnv, ReportPaths};
use crate::report::{junit_xml, sarif_json, text_summary};
use crate::task::FailOnSet;
use crate::tools::{AbortHandle, AbortReason, ToolLimits, builtin};
use crate::transcript::PolicySummary;

/// Headless, an ask is never answered; `dontAsk` says so in every refusal.
const DEFAULT_MODE: PermissionMode = PermissionMode::DontAsk;

pub fn run(args: RunArgs, redactor: Arc<Redactor>) -> Result<ExitCode> {
    let spec = prepare(&args, redactor)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(execute(spec, &args.reports))
}

fn prepare(args: &RunArgs, redactor: Arc<Redactor>) -> Result<RunSpec> {
    let task = load_task(&args.task)?;
    redactor.add_env_names(&task.redact_env);
    let fail_on = match &args.fail_on {
        None => task.fail_on.clone(),
        Some(values) => values
            .iter()
            .filter_map(|value| match value {
                FailOnArg::Kind(kind) => Some(*kind),
                FailOnArg::None => None,
            })
            .collect::<FailOnSet>(),
    };
    let home = home_dir();
    let managed = args
        .policy
        .as_deref()
        .map(|path| load_policy(path, home.as_deref()))
        .transpose()?;
    let task_policy = task
        .policy
        .as_deref()
        .map(|path| load_policy(path, home.as_deref()))
        .transpose()?;
    let others: Vec<_> = task_policy.iter().collect();
    let rules = RuleSet::merge(managed.as_ref(), &others);
    let policies: Vec<_> = managed.iter().chain(task_policy.iter()).collect();

    let mode = args
        .mode
        .or(task.mode)
        .or_else(|| policies.iter().find_map(|policy| policy.default_mode))
        .unwrap_or(DEFAULT_MODE);
    if let Some(policy) = policies
        .iter()
        .find(|policy| policy.disable_bypass && mode == PermissionMode::BypassPermissions)
    {
        return Err(anyhow!(
            "bypassPermissions mode is disabled by {}",
            policy.file.display()
        ));
    }

    let workdir = match (&args.workdir, &task.workdir) {
        (Some(dir), _) | (None, Some(dir)) => canonical_dir(dir, "workdir")?,
        (None, None) => canonical_dir(Path::new("."), "workdir")?,
    };
    let run_id = new_run_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(".tollgate/runs").join(&run_id));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create the output folder {}", out_dir.display()))?;
    let out_dir = out_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", out_dir.display()))?;

    let mut workspace = Workspace::new(workdir, additional_directories(&policies)?, home);
    workspace.read_only_roots.push(out_dir.join("results"));

    // The pool a model sees: the task's tools less those a whole-tool deny rule removes (S1).
    let tools = task
        .tools
        .iter()
        .filter(|name| rules.whole_tool(RuleKind::Deny, name).is_none())
        .filter_map(builtin)
        .collect();
    let warnings = dangerous_allow_rules(&rules);
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let policy_summary = PolicySummary {
        files: policies.iter().map(|policy| policy.file.clone()).collect(),
        managed_only: managed.as_ref().is_some_and(|policy| policy.managed_only),
        rules: rules.rules().len(),
        ignored_rules: rules.ignored().iter().map(RuleRef::from).collect(),
        warnings,
    };
    let max_turns = args.max_turns.unwrap_or(task.limits.max_turns);
    Ok(RunSpec {
        run_id,
        task,
        mode,
        rules,
        policy_summary,
        workspace: Arc::new(workspace),
        tools,
        out_dir,
        max_turns,
        limits: ToolLimits::default(),
        fail_on,
        redactor,
    })
}

async fn execute(spec: RunSpec, formats: &[ReportFormat]) -> Result<ExitCode> {
    let out_dir = spec.out_dir.clone();
    let redactor = spec.redactor.clone();
    let provider = Provider::Scripted(ScriptedModel::new(spec.task.model.script.clone()));
    let (handle, abort) = AbortHandle::new();
    tokio::spawn(forward_signals(handle));
    let report = agent::run(spec, provider, abort).await?;

    let mut paths = ReportPaths {
        transcript: report.transcript.clone(),
        ..ReportPaths::default()
    };
    for format in formats {
        let (path, text) = match format {
            ReportFormat::Junit => (
                out_dir.join("junit.xml"),
                junit_xml(&report)
                    .map_err(|err| anyhow!("cannot render the JUnit report: {err}"))?,
            ),
            ReportFormat::Sarif => (
                out_dir.join("tollgate.sarif"),
                sarif_json(&report)
                    .map_err(|err| anyhow!("cannot render the SARIF report: {err}"))?,
            ),
        };
        std::fs::write(&path, redactor.redact(&text))
            .with_context(|| format!("cannot write {}", path.display()))?;
        match format {
            ReportFormat::Junit => paths.junit = Some(path),
            ReportFormat::Sarif => paths.sarif = Some(path),
        }
    }
    // Annotations go to stdout before the summary, as the runner reads them line by line.
    let commands = github::publish(&report, &paths, &GithubEnv::from_env(), &redactor)
        .context("cannot write the GitHub step summary or outputs")?;
    for line in commands {
        println!("{line}");
    }
    let written: Vec<(&str, &Path)> = [("junit", &paths.junit), ("sarif", &paths.sarif)]
        .into_iter()
        .filter_map(|(name, path)| path.as_deref().map(|path| (name, path)))
        .collect();
    print!("{}", redactor.redact(&text_summary(&report, &written)));
    Ok(report.exit_code)
}

/// The first SIGINT/SIGTERM stops the run gracefully (reports are still written); a second
/// one exits at once — the transcript is already on disk, line by line.
async fn forward_signals(handle: AbortHandle) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "cannot listen for SIGINT/SIGTERM; an interrupted run will not write its reports"
        );
        return;
    };
    let mut first = None;
    loop {
        let reason = tokio::select! {
            _ = interrupt.recv() => AbortReason::Interrupt,
            _ = terminate.recv() => AbortReason::Terminate,
        };
        match first {
            None => {
                first = Some(reason);
                handle.abort(reason);
            }
            Some(first) => {
                let code = match first {
                    AbortReason::Interrupt => ExitCode::Interrupted,
                    AbortReason::Terminate => ExitCode::Terminated,
                };
                std::process::exit(i32::from(code.code()));
            }
        }
    }
}

/// Sortable by start time, unique enough for parallel runs on one machine.
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let entropy = now.timestamp_subsec_nanos() ^ std::process::id().rotate_left(16);
    format!("{}-{:08x}", now.format("%Y%m%dT%H%M%SZ"), entropy)
}
