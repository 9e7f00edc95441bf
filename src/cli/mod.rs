//! The command line: parses arguments, sets up logging, hands each subcommand its typed
//! options and turns its result into the process exit code. `anyhow` lives here only.

mod approve;
mod auto;
mod batch;
mod check;
mod github;
mod manual;
mod policy;
mod progress;
mod replay;
mod run;
mod verify;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::exit::ExitCode;
use crate::policy::PermissionMode;
use crate::redact::Redactor;
use crate::task::FailOn;

#[derive(Debug, Parser)]
#[command(
    name = "tollgate",
    version,
    about = "A headless runner for LLM coding agents: every tool call passes a permission gate.",
    long_about = None,
)]
pub(crate) struct Cli {
    /// Log what tollgate does on stderr: -v provider requests, gate decisions, processes,
    /// the sandbox and MCP servers; -vv more detail; -vvv its libraries too. Added to RUST_LOG.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a task: drive the model through the tool loop, then the task's checks.
    #[command(after_help = crate::reference::run_after_help())]
    Run(Box<RunArgs>),
    /// Decide tool calls under the policies and print the decisions; runs nothing.
    #[command(
        after_help = "Example:\n  tollgate check --policy policies/read-only.yaml --tool Write \\\n    --input '{\"file_path\":\"a\",\"content\":\"x\"}' --mode dontAsk\n\n\
Prints one JSON line: {\"decision\",\"step\",\"layer\",\"rule\",\"source\",\"reason\"}.\n\n\
Many calls in one process (JSONL in, JSONL out):\n  tollgate check --policy P --calls calls.jsonl\n\n\
Every step of the pipeline:\n  tollgate check --policy P --tool Bash --input '{\"command\":\"ls\"}' --explain"
    )]
    Check(CheckArgs),
    /// Test or lint a policy file.
    #[command(
        after_help = "Examples:\n  tollgate policy test policies/ci-default.yaml\n  tollgate policy lint policies/ci-default.yaml\n\n\
`test` runs the policy's own `tests:` (exit 1 if one fails); `lint` warns about dangerous\n\
allow rules and rules that can never match (exit 1 if there is a warning)."
    )]
    Policy(PolicyArgs),
    /// Re-decide every tool call of a transcript under another policy; print what changes.
    #[command(
        after_help = "Examples:\n  tollgate replay .tollgate/runs/RUN/transcript.jsonl --policy policies/new.yaml\n  \
tollgate replay .tollgate/runs --policy policies/new.yaml --sarif flips.sarif\n\n\
Prints one JSON line per call whose decision changes (stdout) and a short table (stderr).\n\
Exits 1 if a call that was denied would now be allowed, so it can guard policy changes in CI."
    )]
    Replay(ReplayArgs),
    /// Answer a parked run's calls: approve or deny each, for `run --resume` to go on.
    #[command(
        after_help = "Examples:\n  tollgate approve .tollgate/runs/RUN toolu_01 --deny toolu_02 --note 'no force push'\n  \
tollgate approve RUN --all\n\n\
A run parks calls (exit 6, outcome parked) under a `defer:` rule, `--defer-asks` or a\n\
PreToolUse hook's `defer`, listing them in RUN/pending.json. Each answer is appended to\n\
RUN/approvals.jsonl, bound to the run, the call's exact input (its hash) and the approver\n\
(GITHUB_ACTOR with the run and job ids in GitHub Actions, else USER), tagged with the\n\
operator's key. `tollgate run --resume RUN` then runs exactly the approved calls, once."
    )]
    Approve(approve::ApproveArgs),
    /// GitHub Actions helpers: whether an event (a comment, review, label, assignment)
    /// starts a run, and whether its sender may start one.
    #[command(
        after_help = "Example (an Action step on issue_comment):\n  tollgate github trigger --phrase @tollgate --prompt-out \"$RUNNER_TEMP/prompt.md\"\n\n\
Reads GITHUB_EVENT_PATH, GITHUB_EVENT_NAME and GITHUB_REPOSITORY. A person needs write\n\
permission (--min-permission) unless named in --allow-users; a bot must be named in\n\
--allow-bots; a pull request from a fork is refused. Prints one JSON line and sets the step\n\
outputs triggered (true, false or refused), actor, kind, number and prompt_file.\n\
Exit codes: 0 a run or no trigger, 3 refused, 2 a bad payload or flag, or an API that\n\
could not be asked (nothing runs then either)."
    )]
    Github(github::GithubArgs),
    /// Check a run folder against its in-toto statement (statement.json) and say what differs.
    #[command(after_help = "Example:\n  tollgate verify .tollgate/runs/RUN\n\n\
Every run writes RUN/statement.json, an in-toto statement (the commit, the task, policy and\n\
model digests, the decisions, the parked and approved calls, the transcript's SHA-256) for\n\
a workflow to sign with its attestation step. verify recomputes it from the transcript and,\n\
with the operator's key, checks every line's tag. Exit 0 if nothing differs, 1 if something does.")]
    Verify(verify::VerifyArgs),
    /// Auto mode's classifier outside a run.
    #[command(
        after_help = "Example:\n  tollgate auto eval examples/auto-mode/cases.jsonl --policy examples/auto-mode/policy.yaml\n\n\
Runs the configured classifier over labelled actions (one JSON object a line:\n\
{\"intent\", \"action\": {\"tool\", \"input\"}, \"expect\": \"allow\"|\"deny\"}) and prints the\n\
confusion matrix, false-block and false-allow rates, model calls, cost and latency."
    )]
    Auto(AutoArgs),
    /// Run one task over many repositories: a working copy, run, branch and patch each.
    #[command(
        after_help = "Example:\n  tollgate batch bump.yaml --repos repos.txt --jobs 4 --out .tollgate/batch\n\n\
Each repository gets its own working copy, run folder, branch and patch under the batch\n\
folder; a journal per repository lets the same command resume after a kill.\n\
Exit codes: 0 every repository passed, 1 one failed, 2 usage/config error (also a\n\
journal that does not parse), 5 a report or a run's record could not be written."
    )]
    Batch(batch::BatchArgs),
    /// Merge the reports of batch folders (one per shard).
    Report(batch::ReportArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  tollgate completions bash > /etc/bash_completion.d/tollgate\n  \
tollgate completions zsh > \"${fpath[1]}/_tollgate\"\n  tollgate completions fish > ~/.config/fish/completions/tollgate.fish"
    )]
    Completions(manual::CompletionsArgs),
    /// Print the man page, or write one page per command into a folder.
    #[command(
        after_help = "Examples:\n  tollgate man | man -l -\n  tollgate man --out /usr/local/share/man/man1"
    )]
    Man(manual::ManArgs),
}

#[derive(Debug, Args)]
struct AutoArgs {
    #[command(subcommand)]
    command: AutoCommand,
}

#[derive(Debug, Subcommand)]
enum AutoCommand {
    /// Measure the configured classifier on labelled cases (JSONL).
    Eval(AutoEvalArgs),
}

#[derive(Debug, Args)]
struct AutoEvalArgs {
    /// The labelled cases, one JSON object a line.
    cases: PathBuf,
    /// The managed policy file with `classifier:` and `auto_mode:` [default: /etc/tollgate].
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// A task file: its provider is the classifier's default, and its policy counts.
    #[arg(long, value_name = "FILE")]
    task: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// Earlier runs: transcripts (transcript.jsonl), run folders, or folders of run folders
    /// (each subfolder holding a transcript.jsonl), replayed one after another.
    #[arg(required = true, value_name = "TRANSCRIPT|RUN|DIR")]
    transcripts: Vec<PathBuf>,
    /// Writes a SARIF 2.1.0 file of the calls that would flip from refused to allowed, each
    /// at its transcript line (a required check for pull requests that edit a policy).
    #[arg(long, value_name = "FILE")]
    sarif: Option<PathBuf>,
    /// The policy to decide under, as the managed policy.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Permission mode [default: the run's].
    #[arg(long, value_name = "MODE", value_parser = crate::reference::mode_values())]
    mode: Option<PermissionMode>,
    /// The workspace [default: the run's workdir if it still exists, else the current folder].
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    rules: RuleFlags,
}

#[derive(Debug, Args)]
struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Run the policy's `tests:` and report each.
    Test {
        /// The policy file.
        file: PathBuf,
        /// The workspace the tests' paths are judged against [default: the current folder].
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Warn about dangerous allow rules and rules that can never match.
    Lint {
        /// The policy file.
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The task file (YAML). Optional with -p or --prompt-file: the prompt then runs alone,
    /// under policies/prompt-default.yaml's read-only rules unless --policy is given. A
    /// resumed run takes it from here too (never from its transcript): give it again.
    #[arg(required_unless_present_any = ["prompt", "prompt_file", "resume", "continue_run"])]
    task: Option<PathBuf>,
    /// The prompt; replaces the task's `prompt:`. Its `{{ NAME }}` placeholders are filled
    /// from --var, --vars-file and the task's `params:`.
    #[arg(
        short = 'p',
        long,
        value_name = "PROMPT",
        conflicts_with = "prompt_file"
    )]
    prompt: Option<String>,
    /// Reads the prompt from a file of at most 8 MiB (`-`: standard input, read to its end
    /// within 60 s); replaces the task's `prompt:`.
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    /// A parameter for the prompt's `{{ NAME }}`, as NAME=VALUE; repeatable; wins over
    /// --vars-file and the task's defaults.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// Parameters from a YAML or JSON mapping of names to scalars.
    #[arg(long, value_name = "FILE")]
    vars_file: Option<PathBuf>,
    /// The provider (anthropic or openai); overrides the task's `model.provider`.
    #[arg(long, value_name = "NAME", value_parser = parse_provider)]
    provider: Option<crate::task::ProviderKind>,
    /// The provider's base URL (a gateway, a local server); overrides the task's
    /// `model.base_url` and ANTHROPIC_BASE_URL / OPENAI_BASE_URL.
    #[arg(long, value_name = "URL", value_parser = parse_base_url)]
    base_url: Option<String>,
    /// A JSON Schema file: the final answer must be JSON valid against it (`output_schema:`).
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Text added at the end of the system prompt, after the task's `append_system_prompt:`.
    #[arg(long, value_name = "TEXT")]
    append_system_prompt: Option<String>,
    /// Do not read AGENTS.md / CLAUDE.md (as the task's `memory: false`).
    #[arg(long)]
    no_memory: bool,
    /// Writes the model's final message to this file (empty when there is none); also
    /// spelled --output-last-message, as `codex exec` has it.
    #[arg(long, value_name = "FILE", alias = "output-last-message")]
    final_message_file: Option<PathBuf>,
    /// Go on with an earlier run from its transcript: its folder, or its run id under
    /// .tollgate/runs/. It continues in that folder, from where it stopped, configured by
    /// this invocation; the transcript must carry the operator's integrity tags.
    #[arg(long, value_name = "DIR|RUN_ID", conflicts_with_all = ["continue_run", "out", "force"])]
    resume: Option<PathBuf>,
    /// Resume the run tollgate last recorded for this workdir (in its state folder).
    #[arg(long = "continue", conflicts_with_all = ["out", "force"])]
    continue_run: bool,
    /// The managed policy file (YAML or JSON); it outranks the task's own policy.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Permission mode; overrides the task and the policies.
    #[arg(long, value_name = "MODE", value_parser = crate::reference::mode_values())]
    mode: Option<PermissionMode>,
    /// Park every ask only a person could answer instead of refusing it (a `defer:` rule
    /// parks its own asks without this): the run ends `parked` (exit 6) with `pending.json`;
    /// `tollgate approve` answers the calls and `--resume` goes on. Never parks a deny.
    #[arg(long)]
    defer_asks: bool,
    /// Where the transcript and reports go [default: .tollgate/runs/<run-id>/]; `{run_id}`
    /// in it is the run's id. A folder holding an earlier run is refused without --force.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Replace the run already in --out instead of refusing to start.
    #[arg(long)]
    force: bool,
    /// The folder the agent works in; overrides the task's `workdir`.
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// A local plugin folder (Claude Code's layout) whose skills, agents, hooks and MCP
    /// servers the run uses, as the operator's; repeatable.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Overrides the task's `limits.max_turns`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,
    /// Overrides the task's model name (`model.name`).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Another model of the same provider (not empty, not the run's own) that answers once
    /// the first is overloaded or unavailable after its retries; overrides `model.fallback`.
    #[arg(long, value_name = "NAME")]
    fallback_model: Option<String>,
    /// Whether an OpenAI-compatible server's responses are streamed: `auto` streams until the
    /// server shows it cannot stream tool calls, then sends the rest whole; overrides
    /// `model.stream`.
    #[arg(long, value_name = "WHEN", value_parser = parse_stream)]
    stream: Option<crate::model::Streaming>,
    /// How hard the model reasons: none, minimal, low, medium, high or xhigh, as the
    /// provider takes them (anthropic: low, medium, high, as a thinking budget; openai: all,
    /// as `reasoning_effort`). Overrides the task's `model.effort` and `thinking_budget`.
    #[arg(long, value_name = "LEVEL", value_parser = crate::model::Effort::parse)]
    effort: Option<crate::model::Effort>,
    /// Caps `limits.max_cost_usd`: the run never spends more than this many US dollars.
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    max_cost: Option<f64>,
    #[command(flatten)]
    shared_budget: SharedBudgetArgs,
    /// In GitHub Actions: keep one comment on this issue or pull request (of
    /// GITHUB_REPOSITORY, with GITHUB_TOKEN) that shows the run's progress and then its result.
    #[arg(long, value_name = "NUMBER")]
    github_comment: Option<u64>,
    /// Reports to write to the output folder; repeat or separate with commas.
    #[arg(
        long = "report",
        value_name = "FORMAT",
        value_delimiter = ',',
        default_value = "junit"
    )]
    reports: Vec<ReportFormat>,
    #[arg(
        long,
        value_name = "KINDS",
        value_delimiter = ',',
        value_parser = parse_fail_on,
        help = crate::reference::fail_on_help()
    )]
    fail_on: Option<Vec<FailOnArg>>,
    #[command(flatten)]
    rules: RuleFlags,
    /// `stream-json`: read user messages from stdin as JSON lines while the run goes on
    /// (docs/stream-json.md); `text` leaves stdin alone.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    input_format: InputFormat,
    /// `text`: a short summary; `json`: only the final result as one JSON object;
    /// `stream-json`: every event as a JSON line as it happens (docs/stream-json.md).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    output_format: OutputFormat,
    /// No progress on stderr (a live line on a terminal, else a line per turn, tool call
    /// and check); warnings and errors are still written.
    #[arg(short, long)]
    quiet: bool,
    /// Run as this unprivileged account (tollgate itself, its file tools and every command,
    /// hook and MCP server): dropped to in place when tollgate is root, else reached through
    /// `sudo -n -u USER`; refused when neither can be done. The workspace and the output
    /// folder must be the account's to write (docs/sandbox.md).
    #[arg(long, value_name = "USER")]
    run_as: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InputFormat {
    Text,
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// `junit.xml`: a testsuite, a testcase for the agent run and one per check attempt.
    Junit,
    /// `tollgate.sarif`: SARIF 2.1.0 for code scanning, a result per denial and failed check.
    Sarif,
}

/// One `--fail-on` value; `none` empties the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailOnArg {
    Kind(FailOn),
    None,
}

/// A cost budget shared with other runs: a ledger file on storage they all reach.
#[derive(Debug, Clone, Args)]
pub(crate) struct SharedBudgetArgs {
    /// A ledger file that many runs (shards, matrix jobs, cron runs) share: each request
    /// reserves its worst case there, so together they never spend more than its cap.
    #[arg(long, value_name = "FILE", env = "TOLLGATE_SHARED_BUDGET")]
    shared_budget: Option<PathBuf>,
    /// The shared budget's cap in US dollars, set when the ledger is created (a ledger that
    /// holds another cap is refused).
    #[arg(
        long,
        value_name = "USD",
        value_parser = parse_usd,
        env = "TOLLGATE_SHARED_MAX_COST",
        requires = "shared_budget"
    )]
    shared_max_cost: Option<f64>,
}

impl SharedBudgetArgs {
    pub(crate) fn options(&self) -> Option<crate::shared_budget::SharedBudgetOptions> {
        self.shared_budget
            .as_ref()
            .map(|path| crate::shared_budget::SharedBudgetOptions {
                path: path.clone(),
                max_cost_usd: self.shared_max_cost,
            })
    }
}

fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!("`{text}` is not a positive amount of US dollars")),
    }
}

fn parse_var(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))?;
    crate::template::check_param_name(name)?;
    Ok((name.to_string(), value.to_string()))
}

fn parse_provider(text: &str) -> Result<crate::task::ProviderKind, String> {
    match text {
        "anthropic" => Ok(crate::task::ProviderKind::Anthropic),
        "openai" => Ok(crate::task::ProviderKind::Openai),
        other => Err(format!("`{other}` is not a provider: anthropic or openai")),
    }
}

fn parse_stream(text: &str) -> Result<crate::model::Streaming, String> {
    match text {
        "auto" => Ok(crate::model::Streaming::Auto),
        "true" => Ok(crate::model::Streaming::Always),
        "false" => Ok(crate::model::Streaming::Never),
        other => Err(format!("`{other}` is not true, false or auto")),
    }
}

fn parse_base_url(text: &str) -> Result<String, String> {
    let trimmed = text.trim().trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        Ok(trimmed.to_string())
    } else {
        Err(format!("`{text}` must start with http:// or https://"))
    }
}

fn parse_fail_on(text: &str) -> Result<FailOnArg, String> {
    match text {
        "none" => Ok(FailOnArg::None),
        other => other.parse().map(FailOnArg::Kind),
    }
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The managed policy file (YAML or JSON) [default: /etc/tollgate/policy.yaml and policy.d/].
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The tool's name, e.g. Bash, Read, Write.
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "calls",
        requires = "input"
    )]
    tool: Option<String>,
    /// The tool call's input as JSON.
    #[arg(long, value_name = "JSON", requires = "tool")]
    input: Option<String>,
    /// Decide every call of a JSONL file (`-` for stdin), lines {"id"?, "tool", "input"};
    /// writes one decision a line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "input", "explain"])]
    calls: Option<PathBuf>,
    /// Print every pipeline step with what it saw and decided.
    #[arg(long)]
    explain: bool,
    /// Permission mode [default: the policies' default_mode, else dontAsk].
    #[arg(long, value_name = "MODE", value_parser = crate::reference::mode_values())]
    mode: Option<PermissionMode>,
    /// The workspace the call is judged against [default: the current folder].
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Auto mode: the task's intent the classifier judges the call against.
    #[arg(long, value_name = "TEXT")]
    intent: Option<String>,
    /// Exit with the decision: 0 allow, 3 deny, 1 ask; with --calls, the strongest of all
    /// lines (deny, then ask, then allow).
    #[arg(long)]
    exit_code: bool,
    #[command(flatten)]
    rules: RuleFlags,
}

/// Rules given on the command line; they rank below the managed policy and above the task.
#[derive(Debug, Args)]
struct RuleFlags {
    /// An allow rule, e.g. 'Bash(npm test:*)'; repeatable.
    #[arg(long, value_name = "RULE")]
    allow: Vec<String>,
    /// A deny rule; repeatable.
    #[arg(long, value_name = "RULE")]
    deny: Vec<String>,
    /// An ask rule; repeatable.
    #[arg(long, value_name = "RULE")]
    ask: Vec<String>,
    /// Make the policy's warnings (allow rules that let through more than they seem to,
    /// rules that never match) configuration errors: exit 2 before anything is decided.
    #[arg(long)]
    strict: bool,
}

impl RuleFlags {
    fn sources<'a>(
        &'a self,
        policy: Option<&'a std::path::Path>,
    ) -> crate::session::SourceFlags<'a> {
        crate::session::SourceFlags {
            policy,
            allow: &self.allow,
            deny: &self.deny,
            ask: &self.ask,
            strict: self.strict,
        }
    }
}

pub fn main() -> std::process::ExitCode {
    // First of all, while the process has one thread: after this no command the model starts
    // can read a secret from tollgate's /proc/<pid>/environ.
    let sealed = crate::exec::seal_process_environment();
    crate::exec::ignore_file_size_signal();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::ConfigError.into()
            } else {
                ExitCode::Success.into()
            };
        }
    };
    // Still one thread: the change of account is process-wide and rewrites the environment.
    if let Command::Run(args) = &cli.command
        && let Some(user) = &args.run_as
        && let Err(err) =
            crate::identity::become_user(user, crate::session::user_policy_path().as_slice())
    {
        eprintln!("tollgate: error: {err}");
        return ExitCode::ConfigError.into();
    }
    // Built before anything can be written, so logs are redacted from the first line.
    let redactor = Arc::new(Redactor::from_env());
    let stderr = progress::Stderr::default();
    init_logging(redactor.clone(), cli.verbose, stderr.clone());
    if let Err(err) = sealed {
        tracing::warn!("cannot clear the environment block /proc shows: {err}");
    }
    let result = match cli.command {
        Command::Run(args) => run::run(*args, redactor.clone(), stderr),
        Command::Check(args) => check::check(args),
        Command::Policy(args) => policy::policy(args),
        Command::Replay(args) => replay::replay(args),
        Command::Approve(args) => approve::approve(args),
        Command::Github(args) => github::github(args),
        Command::Verify(args) => verify::verify(args),
        Command::Auto(AutoArgs {
            command: AutoCommand::Eval(args),
        }) => auto::eval(args),
        Command::Batch(args) => batch::batch(args, redactor.clone()),
        Command::Report(args) => batch::report(args),
        Command::Completions(args) => manual::completions(args),
        Command::Man(args) => manual::man(args),
    };
    match result {
        Ok(code) => code.into(),
        Err(err) => {
            // An error may quote a file or a provider's answer: inert on a runner's log.
            let message = crate::neutral::log_text(&redactor.redact(&error_text(&err)));
            eprintln!("tollgate: error: {message}");
            error_code(&err).into()
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`tollgate run … | true`, a closed
/// pipe under a CI runner) is ignored: the record is on disk, and the exit code stays the
/// command's own instead of a panic's 101.
pub(crate) fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(err) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        tracing::debug!("stdout is closed: {err}");
    }
}

/// The error and its causes, each said once: a cause whose words its error already quotes
/// (`cannot read task file t.yaml: No such file or directory`) is not repeated.
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

/// A run whose record could not be written exits with its own code; every other error
/// here happened before a model was asked (bad flags, task, policy, a busy output folder).
fn error_code(err: &anyhow::Error) -> ExitCode {
    let output_failed = err.chain().any(|cause| {
        cause.is::<crate::out_dir::OutputError>()
            || matches!(
                cause.downcast_ref::<crate::agent::AgentError>(),
                Some(crate::agent::AgentError::Transcript { .. })
            )
    });
    if output_failed {
        ExitCode::OutputError
    } else {
        ExitCode::ConfigError
    }
}

fn init_logging(redactor: Arc<Redactor>, verbose: u8, stderr: progress::Stderr) {
    let rust_log = std::env::var(tracing_subscriber::EnvFilter::DEFAULT_ENV).ok();
    let (filter, bad_rust_log) = log_filter(rust_log.as_deref(), verbose);
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(terminal)
        .with_writer(move || RedactingStderr {
            redactor: redactor.clone(),
            stderr: stderr.clone(),
            inert: !terminal,
        })
        .try_init();
    if let Some(err) = bad_rust_log {
        tracing::warn!("RUST_LOG is not a valid filter ({err}); logging warnings only");
    }
}

/// RUST_LOG (tracing-subscriber's syntax; `warn` when unset), with tollgate's own level
/// raised by each `-v`. A RUST_LOG that does not parse is reported and replaced by `warn`.
fn log_filter(
    rust_log: Option<&str>,
    verbose: u8,
) -> (tracing_subscriber::EnvFilter, Option<String>) {
    use tracing_subscriber::EnvFilter;
    let own = match verbose {
        0 => None,
        1 => Some("tollgate=info"),
        2 => Some("tollgate=debug"),
        _ => Some("tollgate=trace"),
    };
    // -vvv also opens the libraries (HTTP, MCP) at debug, unless RUST_LOG says otherwise.
    let default = if verbose >= 3 { "debug" } else { "warn" };
    let given = rust_log.map(str::trim).filter(|text| !text.is_empty());
    let (base, bad) = match given.map(EnvFilter::try_new) {
        Some(Ok(_)) => (given.unwrap_or(default), None),
        None => (default, None),
        Some(Err(err)) => (default, Some(err.to_string())),
    };
    let directives: Vec<&str> = [base].into_iter().chain(own).collect();
    let filter =
        EnvFilter::try_new(directives.join(",")).unwrap_or_else(|_| EnvFilter::new(default));
    (filter, bad)
}

/// stderr for log lines, each redacted before it is written (and written above the live
/// progress line, when one is drawn).
struct RedactingStderr {
    redactor: Arc<Redactor>,
    stderr: progress::Stderr,
    /// Off a terminal (a CI log): a logged command, path or provider message may carry
    /// what the runner would read as a workflow command, so each line is made inert.
    inert: bool,
}

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = self
            .redactor
            .redact_uncounted(&String::from_utf8_lossy(buf));
        let text = if self.inert {
            crate::neutral::log_text(&text)
        } else {
            text
        };
        self.stderr.write(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut std::io::stderr())
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt;

    use super::log_filter;

    /// Whether an event of `level` from `target` would be logged under RUST_LOG and `-v`s.
    fn logged(rust_log: Option<&str>, verbose: u8, target: &str, level: Level) -> bool {
        let (filter, _) = log_filter(rust_log, verbose);
        let subscriber = tracing_subscriber::registry().with(filter);
        tracing::subscriber::with_default(subscriber, || match (target, level) {
            ("tollgate", Level::INFO) => tracing::enabled!(target: "tollgate::model", Level::INFO),
            ("tollgate", Level::DEBUG) => {
                tracing::enabled!(target: "tollgate::model", Level::DEBUG)
            }
            ("tollgate", Level::WARN) => tracing::enabled!(target: "tollgate::model", Level::WARN),
            ("hyper", Level::DEBUG) => tracing::enabled!(target: "hyper::client", Level::DEBUG),
            ("hyper", Level::WARN) => tracing::enabled!(target: "hyper::client", Level::WARN),
            other => panic!("no probe for {other:?}"),
        })
    }

    #[test]
    fn each_v_raises_tollgate_s_own_level_on_top_of_rust_log() {
        let table = [
            (None, 0, "tollgate", Level::WARN, true),
            (None, 0, "tollgate", Level::INFO, false),
            (None, 1, "tollgate", Level::INFO, true),
            (None, 1, "tollgate", Level::DEBUG, false),
            (None, 1, "hyper", Level::DEBUG, false),
            (None, 2, "tollgate", Level::DEBUG, true),
            (None, 3, "hyper", Level::DEBUG, true),
            (Some(""), 0, "tollgate", Level::INFO, false),
            (Some("debug"), 0, "tollgate", Level::DEBUG, true),
            (Some("debug"), 0, "hyper", Level::DEBUG, true),
            (Some("hyper=debug"), 1, "hyper", Level::DEBUG, true),
            (Some("hyper=debug"), 1, "tollgate", Level::INFO, true),
            // -v wins over a lower level RUST_LOG gives tollgate itself.
            (Some("tollgate=warn"), 1, "tollgate", Level::INFO, true),
            (Some("error"), 0, "tollgate", Level::WARN, false),
            // A RUST_LOG that does not parse is replaced by the default.
            (Some("tollgate=loud"), 0, "tollgate", Level::WARN, true),
            (Some("tollgate=loud"), 0, "tollgate", Level::INFO, false),
        ];
        for (rust_log, verbose, target, level, want) in table {
            assert_eq!(
                logged(rust_log, verbose, target, level),
                want,
                "RUST_LOG={rust_log:?} -v×{verbose} {target} {level}"
            );
        }
        assert!(log_filter(Some("tollgate=loud"), 0).1.is_some());
        assert!(log_filter(Some("tollgate=info"), 0).1.is_none());
    }
}
