//! `tollgate run`: set up the run from the task, policies and flags, drive the agent with
//! SIGINT/SIGTERM wired to its abort, then write the reports and print the summary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::policy::require_self_tests;
use super::setup::{
    additional_directories, canonical_dir, dangerous_allow_rules, home_dir, load_sources,
    load_task, resolve_mode,
};
use super::{FailOnArg, InputFormat, OutputFormat, ReportFormat, RunArgs};
use crate::agent::{self, RunSpec};
use crate::exit::ExitCode;
use crate::hooks::{Hook, merge_hooks};
use crate::model::{
    ANTHROPIC_DEFAULT_BASE_URL, AnthropicModel, ApiKey, HttpSettings, OPENAI_DEFAULT_BASE_URL,
    OpenAiModel, Provider, ScriptedModel,
};
use crate::out_dir;
use crate::policy::{PolicySource, RuleKind, RuleRef, RuleSet, SourceKind, Workspace};
use crate::redact::Redactor;
use crate::report::github::{self, GithubEnv, ReportPaths};
use crate::report::{junit_xml, sarif_json, text_summary};
use crate::scheduler::{MessageQueue, read_input};
use crate::task::{FailOnSet, ModelSpec, ProviderKind};
use crate::tools::{AbortHandle, AbortReason, ToolLimits, builtin};
use crate::transcript::{PolicySummary, StreamFormat, StreamOutput};

pub fn run(args: RunArgs, redactor: Arc<Redactor>) -> Result<ExitCode> {
    let spec = prepare(&args, redactor)?;
    let provider = provider(&spec.task.model)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let code = runtime.block_on(execute(spec, provider, &args.reports, args.output_format));
    // The stdin reader may still be blocked on a line nobody will send: do not wait for it.
    runtime.shutdown_background();
    code
}

/// Reads user messages from stdin on a thread of its own (a blocking read must not hold the
/// runtime at exit); a line that is not a user message is recorded as skipped; end of input
/// only means no more messages.
fn read_messages(queue: MessageQueue) {
    std::thread::spawn(move || read_input(&queue, std::io::stdin().lock()));
}

/// The model's provider, with its key and base URL from the task and the environment. A
/// missing key is a configuration error here, before any request; the key's value is never
/// part of a message.
fn provider(model: &ModelSpec) -> Result<Provider> {
    Ok(match model.provider {
        ProviderKind::Scripted => Provider::Scripted(ScriptedModel::new(model.script.clone())),
        ProviderKind::Anthropic => Provider::Anthropic(AnthropicModel::new(
            http_settings(model, "ANTHROPIC_BASE_URL", ANTHROPIC_DEFAULT_BASE_URL)?,
            model.name.clone(),
            model.thinking_budget,
        )?),
        ProviderKind::Openai => Provider::OpenAi(OpenAiModel::new(
            http_settings(model, "OPENAI_BASE_URL", OPENAI_DEFAULT_BASE_URL)?,
            model.name.clone(),
        )?),
    })
}

/// The key, base URL, timeouts and retries of a real provider. The base URL is the task's,
/// else the environment's (a gateway), else the vendor's.
fn http_settings(model: &ModelSpec, base_env: &str, default_base: &str) -> Result<HttpSettings> {
    let api_key = match model.api_key_variable() {
        None => None,
        Some((name, required)) => match std::env::var(name) {
            Ok(key) if !key.trim().is_empty() => Some(ApiKey::new(key.trim())),
            _ if required => {
                return Err(anyhow!(
                    "the {} provider needs an API key: set the environment variable {name}{}",
                    model.provider,
                    if model.api_key_env.is_some() {
                        " (named by model.api_key_env)"
                    } else {
                        ""
                    }
                ));
            }
            _ => None,
        },
    };
    let base_url = model
        .base_url
        .clone()
        .or_else(|| {
            std::env::var(base_env)
                .ok()
                .map(|url| url.trim().trim_end_matches('/').to_string())
                .filter(|url| !url.is_empty())
        })
        .unwrap_or_else(|| default_base.to_string());
    Ok(HttpSettings {
        base_url,
        api_key,
        timeouts: model.timeouts,
        retries: model.retries,
    })
}

fn prepare(args: &RunArgs, redactor: Arc<Redactor>) -> Result<RunSpec> {
    let home = home_dir();
    let mut task = load_task(&args.task, home.as_deref())?;
    if let Some(name) = &args.model {
        task.model.name = name.clone();
    }
    if let Some(cap) = args.max_cost {
        let own = task.limits.max_cost_usd.unwrap_or(cap);
        task.limits.max_cost_usd = Some(own.min(cap));
    }
    // The task's own budget was checked against its own model's price at parse time.
    if task.limits.max_cost_usd.is_some() && task.model.pricing().is_none() {
        return Err(anyhow!(
            "a cost limit needs a price for model `{}`, which the price table does not know; add model.pricing to the task",
            task.model.name
        ));
    }
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
    let workdir = match (&args.workdir, &task.workdir) {
        (Some(dir), _) | (None, Some(dir)) => canonical_dir(dir, "workdir")?,
        (None, None) => canonical_dir(Path::new("."), "workdir")?,
    };
    let flags = args.rules.sources(args.policy.as_deref());
    let sources = load_sources(flags, Some(&task), &workdir, home.as_deref())?;
    let rules = RuleSet::from_sources(&sources);
    let mode = resolve_mode(args.mode, task.mode, &sources)?;

    let run_id = new_run_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(".tollgate/runs").join(&run_id));
    let (out_dir, out_lock) = out_dir::claim(&out_dir)?;

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
        // Rule text may come from a project's file: inert on a runner's log.
        tracing::warn!("{}", crate::neutral::log_line(&warning.to_string()));
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
    let mut limits = ToolLimits::default();
    if let Some(tool_timeout) = task.limits.tool_timeout {
        // Bash ends its whole process group at its own timeout; the loop's bound on the
        // call is then only a backstop.
        limits.bash_timeout = tool_timeout;
    }
    Ok(RunSpec {
        run_id,
        task,
        mode,
        rules,
        policy_summary,
        workspace: Arc::new(workspace),
        tools,
        out_dir,
        out_lock: Arc::new(out_lock),
        max_turns,
        limits,
        hooks: hooks_in_force(&sources),
        fail_on,
        redactor,
        queue: (args.input_format == InputFormat::StreamJson).then(|| {
            let queue = MessageQueue::default();
            read_messages(queue.clone());
            queue
        }),
        stream: match args.output_format {
            OutputFormat::Text => None,
            OutputFormat::Json => Some(StreamFormat::Json),
            OutputFormat::StreamJson => Some(StreamFormat::StreamJson),
        }
        .map(|format| StreamOutput::new(format, Box::new(std::io::stdout()))),
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

async fn execute(
    spec: RunSpec,
    provider: Provider,
    formats: &[ReportFormat],
    output: OutputFormat,
) -> Result<ExitCode> {
    let out_dir = spec.out_dir.clone();
    // Held until the reports are written too.
    let _out_lock = spec.out_lock.clone();
    let redactor = spec.redactor.clone();
    let (handle, abort) = AbortHandle::new();
    // Listen before the first model call, so no signal can arrive unheard.
    let signals = listen_for_signals();
    tokio::spawn(forward_signals(signals, handle));
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
        out_dir::write_atomic(&path, redactor.redact(&text).as_bytes())?;
        match format {
            ReportFormat::Junit => paths.junit = Some(path),
            ReportFormat::Sarif => paths.sarif = Some(path),
        }
    }
    // Annotations go to stdout before the summary, as the runner reads them line by line;
    // in the json formats stdout is the events' alone, and the runner reads workflow
    // commands on stderr too. A step summary that cannot be written must not hide the
    // run's own exit code.
    match github::publish(&report, &paths, &GithubEnv::from_env(), &redactor) {
        Ok(commands) => {
            for line in commands {
                match output {
                    OutputFormat::Text => println!("{line}"),
                    OutputFormat::Json | OutputFormat::StreamJson => eprintln!("{line}"),
                }
            }
        }
        Err(err) => tracing::warn!("cannot write the GitHub step summary or outputs: {err}"),
    }
    if output != OutputFormat::Text {
        return Ok(report.exit_code);
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
