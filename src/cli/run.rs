//! `tollgate run`: set up the run from the task, policies and flags, drive the agent with
//! SIGINT/SIGTERM wired to its abort, then write the reports and print the summary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::RunArgs;
use super::policy::require_self_tests;
use super::setup::{
    SourceFlags, additional_directories, canonical_dir, dangerous_allow_rules, home_dir,
    load_sources, load_task, resolve_mode,
};
use crate::agent::{self, RunSpec};
use crate::exit::ExitCode;
use crate::hooks::{Hook, merge_hooks};
use crate::model::{Provider, ScriptedModel};
use crate::policy::{PolicySource, RuleKind, RuleRef, RuleSet, SourceKind, Workspace};
use crate::report::{junit_xml, text_summary};
use crate::tools::{AbortHandle, AbortReason, ToolLimits, builtin};
use crate::transcript::PolicySummary;

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let spec = prepare(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(execute(spec))
}

fn prepare(args: &RunArgs) -> Result<RunSpec> {
    let home = home_dir();
    let task = load_task(&args.task, home.as_deref())?;
    let workdir = match (&args.workdir, &task.workdir) {
        (Some(dir), _) | (None, Some(dir)) => canonical_dir(dir, "workdir")?,
        (None, None) => canonical_dir(Path::new("."), "workdir")?,
    };
    let flags = SourceFlags {
        policy: args.policy.as_deref(),
        allow: &args.allow,
        deny: &args.deny,
        ask: &args.ask,
    };
    let sources = load_sources(flags, Some(&task), &workdir, home.as_deref())?;
    let rules = RuleSet::from_sources(&sources);
    let mode = resolve_mode(args.mode, task.mode, &sources)?;

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

    let mut workspace = Workspace::new(workdir, additional_directories(&sources)?, home);
    let policies: Vec<_> = sources.iter().map(|source| &source.policy).collect();
    require_self_tests(&policies, &workspace)?;
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
        sources: sources
            .iter()
            .map(|source| (source.kind, source.policy.file.clone()))
            .collect(),
        managed_only: sources
            .iter()
            .any(|source| source.kind == SourceKind::Managed && source.policy.managed_only),
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
        hooks: hooks_in_force(&sources),
    })
}

/// The managed policies' hooks first; the others' only if no managed policy says
/// `managed_hooks_only`.
fn hooks_in_force(sources: &[PolicySource]) -> Vec<Hook> {
    let (managed, others): (Vec<&PolicySource>, Vec<&PolicySource>) = sources
        .iter()
        .partition(|source| source.kind == SourceKind::Managed);
    let managed_only = managed
        .iter()
        .any(|source| source.policy.managed_hooks_only);
    let collect = |list: &[&PolicySource]| -> Vec<Hook> {
        list.iter()
            .flat_map(|source| source.policy.hooks.iter().cloned())
            .collect()
    };
    merge_hooks(&collect(&managed), managed_only, &collect(&others))
}

async fn execute(spec: RunSpec) -> Result<ExitCode> {
    let out_dir = spec.out_dir.clone();
    let provider = Provider::Scripted(ScriptedModel::new(spec.task.model.script.clone()));
    let (handle, abort) = AbortHandle::new();
    // Listen before the first model call, so no signal can arrive unheard.
    let signals = listen_for_signals();
    tokio::spawn(forward_signals(signals, handle));
    let report = agent::run(spec, provider, abort).await?;
    let junit_path = out_dir.join("junit.xml");
    let xml = junit_xml(&report).map_err(|err| anyhow!("cannot render the JUnit report: {err}"))?;
    std::fs::write(&junit_path, xml)
        .with_context(|| format!("cannot write {}", junit_path.display()))?;
    print!("{}", text_summary(&report, &[("junit", &junit_path)]));
    Ok(report.exit_code)
}

/// The first SIGINT/SIGTERM stops the run gracefully (reports are still written); a second
/// one exits at once — the transcript is already on disk, line by line.
async fn forward_signals(signals: Option<(Signal, Signal)>, handle: AbortHandle) {
    let Some((mut interrupt, mut terminate)) = signals else {
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

fn listen_for_signals() -> Option<(Signal, Signal)> {
    let interrupt = signal(SignalKind::interrupt()).ok()?;
    let terminate = signal(SignalKind::terminate()).ok()?;
    Some((interrupt, terminate))
}

/// Sortable by start time, unique enough for parallel runs on one machine.
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let entropy = now.timestamp_subsec_nanos() ^ std::process::id().rotate_left(16);
    format!("{}-{:08x}", now.format("%Y%m%dT%H%M%SZ"), entropy)
}
