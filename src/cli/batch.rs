//! `tollgate batch` and `tollgate report merge`: flags become `fleet::BatchOptions`; the
//! batch runs in one process and its merged reports are written to its folder.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use crate::exit::ExitCode;
use crate::fleet::{self, Batch, BatchOptions, RepoOutcome, RepoRecord, Rerun, Shard};
use crate::redact::Redactor;

#[derive(Debug, Args)]
pub(super) struct BatchArgs {
    /// The task file (YAML), with `{{ repo.* }}` placeholders and an optional `batch:` block.
    task: PathBuf,
    /// The repositories: a YAML list (repo, name, ref, params) or one `LOCATION [REF]` a line.
    #[arg(long, value_name = "FILE")]
    repos: PathBuf,
    /// Repositories worked on at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: u16,
    /// Take only shard I of N (stable by repository id) [default: from JOB_COMPLETION_INDEX
    /// and TOLLGATE_SHARD_COUNT when set, else all].
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// The batch folder: working copies, run folders, journals, merged reports. Start again
    /// with the same folder to resume.
    #[arg(long, value_name = "DIR", default_value = ".tollgate/batch")]
    out: PathBuf,
    /// Do everything but push.
    #[arg(long)]
    dry_run: bool,
    /// Also re-run finished repositories: `failed` ones, those whose inputs `changed`, or
    /// `all` of them from the start (also past a journal that does not parse).
    #[arg(long, value_name = "WHICH")]
    rerun: Option<RerunArg>,
    /// The managed policy file for every run.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Overrides the task's model name.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    #[command(flatten)]
    shared_budget: super::SharedBudgetArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RerunArg {
    Failed,
    Changed,
    All,
}

#[derive(Debug, Args)]
pub(super) struct ReportArgs {
    #[command(subcommand)]
    command: ReportCommand,
}

#[derive(Debug, Subcommand)]
enum ReportCommand {
    /// Merge batch folders (e.g. one per shard) into one JUnit file, one SARIF log, one
    /// Markdown summary and one self-contained HTML page.
    Merge {
        /// Batch folders, as given to `tollgate batch --out`.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged reports go.
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
    },
}

pub(super) fn batch(args: BatchArgs, redactor: Arc<Redactor>) -> Result<ExitCode> {
    let shard = match args.shard {
        Some(shard) => Some(shard),
        None => Shard::from_env(
            std::env::var("JOB_COMPLETION_INDEX").ok().as_deref(),
            std::env::var("TOLLGATE_SHARD_COUNT").ok().as_deref(),
        )
        .map_err(anyhow::Error::msg)?,
    };
    let batch = Batch::load(BatchOptions {
        task: args.task,
        manifest: args.repos,
        jobs: usize::from(args.jobs),
        shard,
        out: args.out,
        dry_run: args.dry_run,
        rerun: args.rerun.map(|which| match which {
            RerunArg::Failed => Rerun::Failed,
            RerunArg::Changed => Rerun::Changed,
            RerunArg::All => Rerun::All,
        }),
        policy: args.policy,
        model: args.model,
        shared_budget: args.shared_budget.options(),
        telemetry: crate::telemetry::TelemetryConfig::from_env(|name| std::env::var(name).ok())?,
    })?;
    let out = batch.out().to_path_buf();
    eprintln!(
        "tollgate batch: {}{} into {}",
        crate::base::counted(batch.repos().len(), "repository"),
        shard
            .map(|shard| format!(" (shard {shard})"))
            .unwrap_or_default(),
        out.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let journals = runtime.block_on(batch.run(redactor));
    let records: Vec<RepoRecord> = journals
        .iter()
        .map(|journal| RepoRecord::in_batch(&out, journal.clone()))
        .collect();
    // The journals are on disk whatever happens here: a batch whose reports could not be
    // written exits 5 (as a single run does) and the same command writes them again.
    let written = fleet::write_reports(&out, &records)?;
    super::print_out(&fleet::markdown(&journals));
    for path in written {
        super::print_out(&format!("wrote {}\n", path.display()));
    }
    let record_lost = journals.iter().any(|journal| {
        journal
            .run
            .as_ref()
            .is_some_and(|run| run.exit_code == ExitCode::OutputError.code())
    });
    let failed = journals
        .iter()
        .any(|journal| journal.outcome == Some(RepoOutcome::Failed));
    Ok(if record_lost {
        ExitCode::OutputError
    } else if failed {
        ExitCode::TaskFailed
    } else {
        ExitCode::Success
    })
}

pub(super) fn report(args: ReportArgs) -> Result<ExitCode> {
    match args.command {
        ReportCommand::Merge { dirs, out } => {
            let records = fleet::collect(&dirs).context("cannot read the batch folders")?;
            let written = fleet::write_reports(&out, &records)?;
            for path in written {
                super::print_out(&format!("wrote {}\n", path.display()));
            }
            Ok(ExitCode::Success)
        }
    }
}
