//! `tollgate run`: the flags become `session::RunOptions`, the session assembles the run;
//! this drives the agent with SIGINT/SIGTERM/SIGHUP wired to its abort, then writes the reports
//! and prints the summary.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::progress::{RunProgress, Stderr, View};
use super::{FailOnArg, InputFormat, OutputFormat, ReportFormat, RunArgs};
use crate::agent::{self, RunSpec};
use crate::base::{AbortHandle, AbortReason};
use crate::exit::ExitCode;
use crate::model::Provider;
use crate::redact::Redactor;
use crate::report::github::{self, GithubEnv, ReportPaths};
use crate::report::{junit_xml, sarif_json, text_summary};
use crate::scheduler::{MessageQueue, read_input};
use crate::session::{self, RunOptions, Session};
use crate::task::FailOnSet;
use crate::transcript::{Outcome, StreamFormat, StreamOutput};

pub fn run(args: RunArgs, redactor: Arc<Redactor>, stderr: Stderr) -> Result<ExitCode> {
    let mut options = run_options(&args)?;
    let streaming = args.output_format == OutputFormat::StreamJson;
    let telemetry = crate::telemetry::Telemetry::from_env()?;
    let comment = match args.github_comment {
        Some(number) => Some(progress_comment(number)?),
        None => None,
    };
    let view = View::choose(args.quiet, streaming).map(|view| {
        Box::new(RunProgress::start(view, stderr)) as Box<dyn crate::transcript::Observer>
    });
    options.observer = crate::transcript::Observers::of([
        view,
        telemetry
            .as_ref()
            .map(crate::telemetry::Telemetry::observer),
        comment
            .as_ref()
            .map(crate::trigger::ProgressComment::observer),
    ]);
    let Session { spec, provider } = session::assemble(options, redactor)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let code = runtime.block_on(async {
        let code = execute(
            spec,
            provider,
            &args.reports,
            args.output_format,
            args.final_message_file.as_deref(),
        )
        .await;
        if let Some(telemetry) = &telemetry {
            telemetry.finish().await;
        }
        if let Some(comment) = &comment {
            comment.finish().await;
        }
        code
    });
    // The stdin reader may still be blocked on a line nobody will send: do not wait for it.
    runtime.shutdown_background();
    code
}

/// The progress comment `--github-comment NUMBER` asks for, from the job's variables.
fn progress_comment(number: u64) -> Result<crate::trigger::ProgressComment> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let repo = var("GITHUB_REPOSITORY")
        .ok_or_else(|| anyhow!("--github-comment needs GITHUB_REPOSITORY (OWNER/NAME)"))?;
    let api = var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
    let run_url = match (var("GITHUB_SERVER_URL"), var("GITHUB_RUN_ID")) {
        (Some(server), Some(run)) => Some(format!("{server}/{repo}/actions/runs/{run}")),
        _ => None,
    };
    let forge = crate::fleet::Forge::new(&api, var("GITHUB_TOKEN"))?;
    Ok(crate::trigger::ProgressComment::new(
        forge,
        crate::trigger::CommentTarget {
            repo,
            number,
            run_url,
        },
    ))
}

/// The flags as the library's run options; stdin and stdout are wired here, as only the
/// command line has them.
fn run_options(args: &RunArgs) -> Result<RunOptions> {
    let resume = match (&args.resume, args.continue_run) {
        (Some(given), _) => Some(session::resume_folder(given)?),
        (None, true) => Some(session::latest_run(
            args.workdir.as_deref().unwrap_or(Path::new(".")),
        )?),
        (None, false) => None,
    };
    let prompt = match (&args.prompt, &args.prompt_file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(path)) => Some(read_prompt_file(path, args.input_format)?),
        (None, None) => None,
    };
    // On a resume the prompt is the new message the run goes on with, not the task's.
    let (prompt, resume_prompt) = match resume {
        Some(_) => (None, prompt),
        None => (prompt, None),
    };
    Ok(RunOptions {
        task: args.task.clone(),
        resume,
        resume_prompt,
        prompt,
        prompt_file: args.prompt_file.clone(),
        prompt_is_filled: false,
        vars: args.vars.clone(),
        vars_file: args.vars_file.clone(),
        provider: args.provider,
        base_url: args.base_url.clone(),
        output_schema: args.output_schema.clone(),
        append_system_prompt: args.append_system_prompt.clone(),
        no_memory: args.no_memory,
        policy: args.policy.clone(),
        allow: args.rules.allow.clone(),
        deny: args.rules.deny.clone(),
        ask: args.rules.ask.clone(),
        strict: args.rules.strict,
        mode: args.mode,
        defer_asks: args.defer_asks,
        model: args.model.clone(),
        fallback_model: args.fallback_model.clone(),
        model_stream: args.stream,
        effort: args.effort,
        max_cost: args.max_cost,
        shared_budget: args.shared_budget.options(),
        max_turns: args.max_turns,
        fail_on: args.fail_on.as_ref().map(|values| {
            values
                .iter()
                .filter_map(|value| match value {
                    FailOnArg::Kind(kind) => Some(*kind),
                    FailOnArg::None => None,
                })
                .collect::<FailOnSet>()
        }),
        workdir: args.workdir.clone(),
        plugin_dirs: args.plugin_dirs.clone(),
        out: args.out.clone(),
        existing_out: if args.force {
            crate::out_dir::Existing::Replace
        } else {
            crate::out_dir::Existing::Refuse
        },
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
        observer: None,
    })
}

/// The prompt from `--prompt-file` (`-`: all of standard input, which stream-json input
/// then cannot also have).
fn read_prompt_file(path: &Path, input: InputFormat) -> Result<String> {
    if path == Path::new("-") {
        if input == InputFormat::StreamJson {
            return Err(crate::config::ConfigError::whole_file(
                path,
                "--prompt-file - and --input-format stream-json both want standard input",
            )
            .into());
        }
        return Ok(crate::input_file::read_stream(
            std::io::stdin(),
            "prompt",
            crate::input_file::PROMPT_CAP,
            crate::input_file::STDIN_TIMEOUT,
        )?);
    }
    let prompt = crate::input_file::Input {
        what: "prompt file",
        cap: crate::input_file::PROMPT_CAP,
        stdin_flag: true,
    };
    Ok(crate::input_file::read_text(path, prompt)?)
}

/// Reads user messages from stdin on a thread of its own (a blocking read must not hold the
/// runtime at exit); a line that is not a user message is recorded as skipped; end of input
/// only means no more messages.
fn read_messages(queue: MessageQueue) {
    std::thread::spawn(move || read_input(&queue, std::io::stdin().lock()));
}

async fn execute(
    spec: RunSpec,
    provider: Provider,
    formats: &[ReportFormat],
    output: OutputFormat,
    final_message_file: Option<&Path>,
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
    // A result file that could not be written: named once, as an error the CLI prints, while
    // the transcript and the reports below are still written.
    if report.outcome == Outcome::OutputFailed
        && let Some(error) = &report.error
    {
        let error = crate::neutral::log_text(&redactor.redact(error));
        eprintln!("tollgate: error: {error}");
    }

    if let Some(path) = final_message_file {
        let text = redactor.redact(report.final_message.as_deref().unwrap_or_default());
        crate::out_dir::write_atomic(path, text.as_bytes())?;
    }

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
        crate::out_dir::write_atomic(&path, redactor.redact(&text).as_bytes())?;
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
                    OutputFormat::Text => super::print_out(&format!("{line}\n")),
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
    super::print_out(&redactor.redact(&text_summary(&report, &written)));
    Ok(report.exit_code)
}

/// The signals that stop a run: SIGINT, SIGTERM and SIGHUP.
struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

/// The first SIGINT/SIGTERM/SIGHUP stops the run gracefully (reports are still written); a
/// second one exits at once — the transcript is already on disk, line by line.
async fn forward_signals(signals: Option<StopSignals>, handle: AbortHandle) {
    let Some(mut signals) = signals else {
        tracing::warn!(
            "cannot listen for SIGINT/SIGTERM/SIGHUP; an interrupted run will not write its reports"
        );
        return;
    };
    let mut first = None;
    loop {
        let reason = tokio::select! {
            _ = signals.interrupt.recv() => AbortReason::Interrupt,
            _ = signals.terminate.recv() => AbortReason::Terminate,
            _ = signals.hangup.recv() => AbortReason::Hangup,
        };
        match first {
            None => {
                first = Some(reason);
                handle.abort(reason);
            }
            Some(first) => {
                let code = match first {
                    AbortReason::Interrupt => ExitCode::Interrupted,
                    AbortReason::Terminate | AbortReason::Hangup => ExitCode::Terminated,
                };
                std::process::exit(i32::from(code.code()));
            }
        }
    }
}

fn listen_for_signals() -> Option<StopSignals> {
    Some(StopSignals {
        interrupt: signal(SignalKind::interrupt()).ok()?,
        terminate: signal(SignalKind::terminate()).ok()?,
        hangup: signal(SignalKind::hangup()).ok()?,
    })
}
