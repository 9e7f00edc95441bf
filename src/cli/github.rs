//! `tollgate github trigger`: the Action's first step on a comment, review, label or
//! assignment — whether the event asks for a run, whether its sender may start one, and the
//! prompt that quotes what they wrote as data.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::exit::ExitCode;
use crate::fleet::Forge;
use crate::trigger::{Activation, Permission, TriggerConfig};

#[derive(Debug, Args)]
pub(super) struct GithubArgs {
    #[command(subcommand)]
    command: GithubCommand,
}

#[derive(Debug, Subcommand)]
enum GithubCommand {
    /// Decide whether this workflow's event starts a run, and write its prompt.
    Trigger(TriggerArgs),
    /// Post a run's findings on a pull request as one review with inline comments (those an
    /// earlier run posted are skipped), and write them as SARIF.
    Review(ReviewArgs),
    /// Print the findings schema, for `run --output-schema` (or the action's output-schema).
    FindingsSchema,
    /// Commit a run's change, push it to a branch and open (or update) its pull request.
    Publish(PublishArgs),
}

/// Where the REST API is, which repository, and the variable holding the token: every
/// `github` command's.
#[derive(Debug, Args)]
struct GithubApi {
    /// The repository, OWNER/NAME [default: GITHUB_REPOSITORY].
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: Option<String>,
    /// The REST API's root [default: GITHUB_API_URL, else https://api.github.com].
    #[arg(
        long,
        value_name = "URL",
        env = "GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    api_url: String,
    /// The variable holding the token (never the token itself).
    #[arg(long, value_name = "NAME", default_value = "GITHUB_TOKEN")]
    token_env: String,
}

impl GithubApi {
    fn repository(&self) -> Result<&str> {
        self.repository
            .as_deref()
            .filter(|repo| !repo.is_empty())
            .ok_or_else(|| {
                anyhow!("--repository or GITHUB_REPOSITORY names the repository (OWNER/NAME)")
            })
    }

    fn forge(&self) -> Result<Forge> {
        let token = std::env::var(&self.token_env)
            .ok()
            .filter(|t| !t.is_empty());
        Ok(Forge::new(&self.api_url, token)?)
    }
}

/// Runs one request's future to its end on a runtime of its own.
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

#[derive(Debug, Args)]
struct PublishArgs {
    /// The run's folder (its transcript says how it ended).
    #[arg(long, value_name = "DIR")]
    run: PathBuf,
    /// The working copy the run changed.
    #[arg(long, value_name = "DIR", default_value = ".")]
    workdir: PathBuf,
    /// The branch to push, `{run_id}` filled in.
    #[arg(long, value_name = "TEMPLATE", default_value = "tollgate/{run_id}")]
    branch: String,
    /// The pull request's base branch [default: GITHUB_BASE_REF, else GITHUB_REF_NAME].
    #[arg(long, value_name = "BRANCH")]
    base: Option<String>,
    /// The remote to push to.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    remote: String,
    /// The commit message and the pull request's title.
    #[arg(long, value_name = "TEXT", default_value = "Changes made by tollgate")]
    title: String,
    /// Publish even when the run refused a call, a check failed or it did not succeed.
    #[arg(long)]
    even_if_held_back: bool,
    /// The commit's author and committer, as `Name <email>` [default: git's configuration,
    /// else `tollgate <tollgate@localhost>`].
    #[arg(long, value_name = "NAME <EMAIL>", value_parser = crate::fleet::Author::parse)]
    author: Option<crate::fleet::Author>,
    /// Sign the commit with this key: an SSH private key file (or public key, the private
    /// one in ssh-agent), or with --signing-format openpgp a gpg key id. A commit that comes
    /// out unsigned is not pushed.
    #[arg(long, value_name = "KEY")]
    signing_key: Option<String>,
    /// The signing key's kind.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "ssh",
        requires = "signing_key"
    )]
    signing_format: crate::fleet::SigningFormat,
    #[command(flatten)]
    api: GithubApi,
}

#[derive(Debug, Args)]
struct ReviewArgs {
    /// The run's answer under the findings schema (the action's output-file).
    #[arg(long, value_name = "FILE")]
    findings: PathBuf,
    /// The pull request to review; without it only the SARIF is written.
    #[arg(long, value_name = "NUMBER")]
    pr: Option<u64>,
    /// Also write the findings as SARIF 2.1.0 here (fingerprinted: code scanning keeps one alert).
    #[arg(long, value_name = "FILE")]
    sarif: Option<PathBuf>,
    #[command(flatten)]
    api: GithubApi,
}

#[derive(Debug, Args)]
struct TriggerArgs {
    /// The event payload [default: GITHUB_EVENT_PATH].
    #[arg(long, value_name = "FILE", env = "GITHUB_EVENT_PATH")]
    event: PathBuf,
    /// The event's name [default: GITHUB_EVENT_NAME].
    #[arg(long, value_name = "NAME", env = "GITHUB_EVENT_NAME")]
    event_name: String,
    #[command(flatten)]
    api: GithubApi,
    /// Words in a comment, review or issue that start a run.
    #[arg(long, value_name = "TEXT", default_value = "@tollgate")]
    phrase: String,
    /// A label that starts a run when added.
    #[arg(long, value_name = "NAME")]
    label: Option<String>,
    /// A login that starts a run when assigned.
    #[arg(long, value_name = "LOGIN")]
    assignee: Option<String>,
    /// The least repository permission a person needs: read, triage, write, maintain, admin.
    #[arg(long, value_name = "LEVEL", default_value = "write", value_parser = parse_permission)]
    min_permission: Permission,
    /// People who may start runs whatever their permission, comma-separated (`*`: anyone).
    #[arg(long, value_name = "LOGINS", value_delimiter = ',')]
    allow_users: Vec<String>,
    /// Bots that may start runs, comma-separated (`*`: any bot); none by default.
    #[arg(long, value_name = "LOGINS", value_delimiter = ',')]
    allow_bots: Vec<String>,
    /// What the model is told to do with the request, before it.
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "Do what is asked below in this repository, within the permissions you have."
    )]
    instruction: String,
    /// Where the prompt is written when the event starts a run.
    #[arg(long, value_name = "FILE")]
    prompt_out: Option<PathBuf>,
}

fn parse_permission(text: &str) -> Result<Permission, String> {
    Permission::parse(text)
        .filter(|p| *p != Permission::None)
        .ok_or_else(|| format!("`{text}` is not read, triage, write, maintain or admin"))
}

pub(super) fn github(args: GithubArgs) -> Result<ExitCode> {
    match args.command {
        GithubCommand::Trigger(args) => trigger(args),
        GithubCommand::Review(args) => review(args),
        GithubCommand::Publish(args) => publish(args),
        GithubCommand::FindingsSchema => {
            println!("{}", crate::trigger::FINDINGS_SCHEMA);
            Ok(ExitCode::Success)
        }
    }
}

fn publish(args: PublishArgs) -> Result<ExitCode> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let ending = crate::trigger::run_ending(&args.run)?;
    let mut outputs: Vec<(&str, String)> = Vec::new();
    let held = ending.held_back().filter(|_| !args.even_if_held_back);
    let line = if let Some(why) = held {
        eprintln!("tollgate github publish: nothing pushed: {why}");
        outputs.push(("published", "false".into()));
        json!({"published": false, "reason": why})
    } else {
        let base = args
            .base
            .clone()
            .or_else(|| var("GITHUB_BASE_REF"))
            .or_else(|| var("GITHUB_REF_NAME"))
            .ok_or_else(|| {
                anyhow!("--base, GITHUB_BASE_REF or GITHUB_REF_NAME names the pull request's base")
            })?;
        let branch = crate::trigger::branch_name(&args.branch, &ending.run_id)?;
        let repository = args.api.repository()?;
        let run_url = match (var("GITHUB_SERVER_URL"), var("GITHUB_RUN_ID")) {
            (Some(server), Some(run)) => Some(format!("{server}/{repository}/actions/runs/{run}")),
            _ => None,
        };
        let forge = args.api.forge()?;
        let identity = crate::fleet::CommitIdentity {
            author: args.author.clone(),
            signing: args
                .signing_key
                .as_deref()
                .map(|key| crate::fleet::Signing::checked(args.signing_format, key))
                .transpose()
                .map_err(|why| anyhow!("--signing-key: {why}"))?,
        };
        let target = crate::trigger::Publish {
            workdir: &args.workdir,
            remote: &args.remote,
            branch: &branch,
            base: &base,
            repo: repository,
            title: &args.title,
            run_url: run_url.as_deref(),
            identity: &identity,
        };
        match block_on(crate::trigger::publish(&ending, &target, &forge))?? {
            None => {
                eprintln!("tollgate github publish: the run changed nothing");
                outputs.push(("published", "false".into()));
                json!({"published": false, "reason": "nothing changed"})
            }
            Some(published) => {
                let number = published
                    .pr_url
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                outputs.push(("published", "true".into()));
                outputs.push(("branch_name", published.branch.clone()));
                outputs.push(("pr_url", published.pr_url.clone()));
                outputs.push(("pr_number", number.clone()));
                json!({"published": true, "branch": published.branch, "commit": published.commit, "pr_url": published.pr_url, "pr_number": number})
            }
        }
    };
    println!("{line}");
    write_outputs(&outputs)?;
    Ok(ExitCode::Success)
}

/// Appends `name=value` lines to the step's outputs, when the runner gave a file for them.
fn write_outputs(outputs: &[(&str, String)]) -> Result<()> {
    if let Ok(path) = std::env::var("GITHUB_OUTPUT")
        && !path.is_empty()
    {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| format!("cannot write the step outputs to {path}"))?;
        for (name, value) in outputs {
            // Values are one line each: a login, a kind, a path, a branch, a URL.
            writeln!(file, "{name}={}", value.replace(['\n', '\r'], " "))?;
        }
    }
    Ok(())
}

fn review(args: ReviewArgs) -> Result<ExitCode> {
    let input = crate::input_file::Input::config("findings file");
    let text = crate::input_file::read_text(&args.findings, input)?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON", args.findings.display()))?;
    let schema: serde_json::Value = serde_json::from_str(crate::trigger::FINDINGS_SCHEMA)?;
    let validator =
        jsonschema::validator_for(&schema).map_err(|err| anyhow!("the findings schema: {err}"))?;
    if let Some(error) = validator.iter_errors(&value).next() {
        return Err(anyhow!(
            "{}: not findings ({} at {}); see `tollgate github findings-schema`",
            args.findings.display(),
            error,
            error.instance_path()
        ));
    }
    let findings: crate::trigger::Findings = serde_json::from_value(value)?;
    if let Some(path) = &args.sarif {
        let log = crate::trigger::findings_sarif(&findings)?;
        crate::out_dir::write_atomic(path, log.as_bytes())
            .map_err(|err| anyhow!("cannot write {}: {}", path.display(), err.source))?;
    }
    if let Some(number) = args.pr {
        let repo = args.api.repository()?;
        let forge = args.api.forge()?;
        let posted = block_on(crate::trigger::post_review(&forge, repo, number, &findings))??;
        println!(
            "{}",
            json!({"review": number, "posted": posted.new, "already_posted": posted.already, "outside_diff": posted.outside_diff})
        );
    }
    Ok(ExitCode::Success)
}

fn trigger(args: TriggerArgs) -> Result<ExitCode> {
    let event = crate::trigger::read_event(&args.event)?;
    let config = TriggerConfig {
        phrase: args.phrase.clone(),
        label: args.label.clone().filter(|l| !l.is_empty()),
        assignee: args.assignee.clone().filter(|a| !a.is_empty()),
        min_permission: args.min_permission,
        allowed_users: clean(&args.allow_users),
        allowed_bots: clean(&args.allow_bots),
    };
    let repository = args.api.repository()?;
    let forge = args.api.forge()?;
    let activation = block_on(crate::trigger::decide(
        &args.event_name,
        &event,
        repository,
        &config,
        &forge,
    ))??;
    let mut outputs: Vec<(&str, String)> = Vec::new();
    let (line, code) = match &activation {
        Activation::Run(invocation) => {
            if let Some(path) = &args.prompt_out {
                let prompt = crate::trigger::prompt(&args.instruction, invocation);
                crate::out_dir::write_atomic(path, prompt.as_bytes())
                    .map_err(|err| anyhow!("cannot write {}: {}", path.display(), err.source))?;
                outputs.push(("prompt_file", path.display().to_string()));
            }
            outputs.push(("triggered", "true".into()));
            outputs.push(("actor", invocation.actor.clone()));
            outputs.push(("kind", invocation.kind.name().into()));
            if let Some(number) = invocation.number {
                outputs.push(("number", number.to_string()));
            }
            (
                json!({"triggered": true, "actor": invocation.actor, "kind": invocation.kind.name(), "number": invocation.number}),
                ExitCode::Success,
            )
        }
        Activation::NotTriggered(why) => {
            outputs.push(("triggered", "false".into()));
            eprintln!("tollgate github trigger: no run: {why}");
            (
                json!({"triggered": false, "reason": why}),
                ExitCode::Success,
            )
        }
        Activation::Refused(why) => {
            outputs.push(("triggered", "refused".into()));
            eprintln!("tollgate github trigger: refused: {why}");
            if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
                println!(
                    "::error title=tollgate trigger refused::{}",
                    crate::neutral::log_line(why)
                );
            }
            (
                json!({"triggered": false, "refused": why}),
                ExitCode::PolicyStop,
            )
        }
    };
    println!("{line}");
    write_outputs(&outputs)?;
    Ok(code)
}

fn clean(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|entry| entry.trim().to_string())
        .filter(|entry| !entry.is_empty())
        .collect()
}
