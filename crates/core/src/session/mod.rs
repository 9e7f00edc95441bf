//! Assembling a run as a library: a task file, the policy sources and the run's options
//! become a validated [`RunSpec`] and its [`Provider`], ready for `agent::run`. The CLI
//! only parses flags into [`RunOptions`] and prints; `tollgate batch` can assemble many runs
//! in one process. Everything here happens before the first model call; every error is a
//! configuration error.

mod classifier;
mod prompt;
mod sources;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

pub use classifier::auto_classifier;
pub use prompt::{PROMPT_DEFAULT_POLICY, default_model};
pub use sources::{
    AdditionalDirectories, HooksInForce, PolicyInForce, SourceFlags, additional_directories,
    canonical_dir, dangerous_allow_rules, home_dir, hooks_in_force, load_policy, load_sources,
    load_task, log_warnings, mcp_in_force, read_only_commands_in_force, read_text, refuse_warnings,
    resolve_mode, rules_for_mode, sandbox_in_force, unknown_tool_rules, user_policy_path,
    with_snippet,
};

use crate::agent::RunSpec;
use crate::config::{ConfigError, serde_name};
use crate::exec::RunEnv;
use crate::model::cloud::{Platform as CloudPlatform, SecretSink};
use crate::model::{
    ANTHROPIC_DEFAULT_BASE_URL, ApiKey, HttpSettings, OPENAI_DEFAULT_BASE_URL, Provider,
    ProviderConfig, ProviderError, ScriptedTurns,
};
use crate::policy::{
    PermissionMode, Policy, PolicySource, RuleError, RuleKind, RuleRef, RuleSet, SelfTestOutcome,
    SourceKind, ToolName, Workspace, run_self_tests,
};
use crate::redact::Redactor;
use crate::sandbox::{self, SandboxError, SandboxSpec};
use crate::scheduler::MessageQueue;
use crate::settings::{AuthorityError, Hook, HookEvent, merge_auto_mode};
use crate::task::{FailOnSet, ModelSpec, Platform as TaskPlatform, ProviderKind, Task};
use crate::tools::{ToolLimits, builtin, model_command_env};
use crate::transcript::{ModelSummary, Observer, PolicySummary, StreamOutput, TaskSummary};

#[derive(Debug, Error)]
pub enum SessionError {
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Input(#[from] crate::input_file::InputError),
    #[error(
        "{what} {} does not exist or is not a folder",
        crate::base::truncate_middle(&path.display().to_string(), crate::config::MAX_ECHO_CHARS)
    )]
    NoFolder { what: &'static str, path: PathBuf },
    #[error(transparent)]
    OutputFolder(#[from] crate::out_dir::OutDirError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error(transparent)]
    Authority(#[from] AuthorityError),
    #[error(
        "a cost limit needs a price for model `{0}`, which the price table does not know; add model.pricing to the task"
    )]
    NoPrice(String),
    #[error(
        "a cost limit needs a price for the fallback model `{0}`, which the price table does not know; name a model it knows or drop the cost limit"
    )]
    NoFallbackPrice(String),
    #[error("--fallback-model: the scripted provider has no other model to fall back to")]
    ScriptedFallback,
    #[error("--fallback-model: {0}")]
    BadFallback(String),
    #[error(
        "the {provider} provider needs an API key: set the environment variable {variable}{}",
        if *named_by_task { " (named by model.api_key_env)" } else { "" }
    )]
    MissingKey {
        provider: ProviderKind,
        variable: String,
        named_by_task: bool,
    },
    /// A cloud platform's settings or credentials are missing.
    #[error("{0}")]
    Cloud(String),
    #[error("the scripted provider needs a script (its replies, in order)")]
    NoScript,
    #[error("policy self-test failed, refusing to start: {0}")]
    SelfTest(String),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    SharedBudget(#[from] crate::shared_budget::SharedBudgetError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    CacheWritable(String),
    #[error(transparent)]
    Resume(#[from] crate::agent::ResumeError),
    #[error("cannot resume {}: {why}", dir.display())]
    CannotResume { dir: PathBuf, why: String },
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(
        "{} is a symbolic link: tollgate writes its runs only into real folders (a link there could send them anywhere)",
        path.display()
    )]
    LinkedOutRoot { path: PathBuf },
}

/// What a run is asked to be, beside its task file: the command line's choices, already
/// parsed. `None` leaves the task's (or the default) value; a flag wins over the task.
#[derive(Default)]
pub struct RunOptions {
    /// The task file; `None` runs `prompt` alone under a built-in task.
    pub task: Option<PathBuf>,
    /// The prompt (`-p`, `--prompt-file`); replaces the task's.
    pub prompt: Option<String>,
    /// The file the prompt was read from, for its placeholders' errors.
    pub prompt_file: Option<PathBuf>,
    /// The prompt's placeholders are filled already (a batch renders its own).
    pub prompt_is_filled: bool,
    /// `--var NAME=VALUE`, in order; later ones win.
    pub vars: Vec<(String, String)>,
    pub vars_file: Option<PathBuf>,
    pub provider: Option<ProviderKind>,
    pub base_url: Option<String>,
    /// `--output-schema`: replaces the task's `output_schema:`.
    pub output_schema: Option<PathBuf>,
    /// Added after the task's `append_system_prompt:`.
    pub append_system_prompt: Option<String>,
    /// `--no-memory`: AGENTS.md / CLAUDE.md are not read.
    pub no_memory: bool,
    /// The managed policy (else /etc/tollgate).
    pub policy: Option<PathBuf>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    /// The policy's warnings are configuration errors (`--strict`).
    pub strict: bool,
    pub mode: Option<crate::policy::PermissionMode>,
    /// `--defer-asks`: an ask only a person could answer is parked, not refused.
    pub defer_asks: bool,
    pub model: Option<String>,
    /// `--effort`: replaces the task's `model.effort` (and its `thinking_budget`).
    pub effort: Option<crate::model::Effort>,
    /// `--fallback-model`: overrides the task's `model.fallback`.
    pub fallback_model: Option<String>,
    /// `--stream`: overrides the task's `model.stream`.
    pub model_stream: Option<crate::model::Streaming>,
    /// Caps the task's own `max_cost_usd`.
    pub max_cost: Option<f64>,
    /// `--shared-budget`: a cost budget this run shares with others.
    pub shared_budget: Option<crate::shared_budget::SharedBudgetOptions>,
    pub max_turns: Option<u32>,
    pub fail_on: Option<FailOnSet>,
    pub workdir: Option<PathBuf>,
    /// `--plugin-dir`: local plugin folders, the operator's.
    pub plugin_dirs: Vec<PathBuf>,
    /// Default: `.tollgate/runs/<run-id>/`; `{run_id}` in the path is the run's id.
    pub out: Option<PathBuf>,
    /// What to do when `out` already holds a run (refused unless told otherwise).
    pub existing_out: crate::out_dir::Existing,
    /// `--resume`/`--continue`: the folder of the run to go on with (see [`resume_folder`]).
    pub resume: Option<PathBuf>,
    /// The new user message a resumed run goes on with.
    pub resume_prompt: Option<String>,
    /// User messages arriving mid-run, fed by the caller.
    pub queue: Option<MessageQueue>,
    /// Where events are streamed as they happen.
    pub stream: Option<StreamOutput>,
    /// Shown every event as it is written (the command line's progress).
    pub observer: Option<Box<dyn Observer>>,
}

/// A run ready to start.
pub struct Session {
    pub spec: RunSpec,
    pub provider: Provider,
}

/// Loads and validates everything a run needs. `redactor` learns the task's `redact_env`.
pub fn assemble(options: RunOptions, redactor: Arc<Redactor>) -> Result<Session, SessionError> {
    assemble_checked(options, redactor).map_err(with_snippet)
}

fn assemble_checked(
    mut options: RunOptions,
    redactor: Arc<Redactor>,
) -> Result<Session, SessionError> {
    let home = home_dir();
    let state = operator_state()?;
    let resume = match options.resume.clone() {
        Some(dir) => Some(resuming(&dir, &mut options, state.as_ref())?),
        None => None,
    };
    let mut task = prompt::task(&options, home.as_deref())?;
    if let Some(name) = &options.model {
        task.model.name = name.clone();
    }
    if let Some(max_turns) = options.max_turns {
        task.limits.max_turns = max_turns;
    }
    if let Some(cap) = options.max_cost {
        let own = task.limits.max_cost_usd.unwrap_or(cap);
        task.limits.max_cost_usd = Some(own.min(cap));
    }
    // The task's own budget was checked against its own model's price at parse time.
    let priced = task.limits.max_cost_usd.is_some() || options.shared_budget.is_some();
    if priced && task.model.pricing().is_none() {
        return Err(SessionError::NoPrice(task.model.name.clone()));
    }
    let fallback = fallback_model(&options, &task)?;
    redactor.add_env_names(&task.redact_env);
    let workdir = match (&options.workdir, &task.workdir) {
        (Some(dir), _) => canonical_dir(dir, "workdir")?,
        // The task's own: the error points at its line.
        (None, Some(dir)) => canonical_dir(dir, "workdir").map_err(|err| {
            let (line, column) = task.workdir_at.unwrap_or((0, 0));
            SessionError::Config(ConfigError::new(&task.file, line, column, err.to_string()))
        })?,
        (None, None) => canonical_dir(Path::new("."), "workdir")?,
    };
    // The workdir is this invocation's; a transcript may only refuse a mismatch.
    if let Some(resume) = &resume
        && resume.workdir != workdir
    {
        return Err(SessionError::CannotResume {
            dir: options.out.clone().unwrap_or_default(),
            why: format!(
                "the run worked in {}, this invocation in {}; give --workdir (or the task's workdir) to go on there",
                resume.workdir.display(),
                workdir.display()
            ),
        });
    }
    // The checkout's credential is known by value before anything reads the workspace.
    redactor.add_git_credentials(&workdir);
    let flags = SourceFlags {
        policy: options.policy.as_deref(),
        allow: &options.allow,
        deny: &options.deny,
        ask: &options.ask,
        strict: options.strict,
    };
    let mut sources = load_sources(flags, Some(&task), &workdir, home.as_deref())?;
    let plugins = load_plugins(&options, &mut task, &mut sources, &workdir)?;
    let mode = resolve_mode(options.mode, task.mode, &sources)?;
    let (rules, dropped_for_auto) = rules_for_mode(RuleSet::from_sources(&sources), mode);
    refuse_warnings(&rules, options.strict)?;
    // Before any model call: a sandbox the kernel cannot enforce stops the run here (exit 2).
    let sandbox = sandbox_in_force(&sources)
        .map(|config| {
            let status = sandbox::preflight(&config)?;
            if let Some(warning) = &status.warning {
                tracing::warn!("the sandbox is not fully enforced: {warning}");
            }
            Ok::<_, SandboxError>(SandboxSpec { config, status })
        })
        .transpose()?;
    let read_only = sandbox::read_only_preflight(read_only_commands_in_force(&sources));
    if let Some(reason) = &read_only.reason {
        tracing::info!("read-only commands are not kernel-enforced: {reason}");
    }

    let run_id = resume
        .as_ref()
        .map_or_else(new_run_id, |resume| resume.run_id.clone());
    let out_dir = match options.out.as_deref() {
        Some(out) => with_run_id(out, &run_id),
        None => {
            refuse_linked_out_root()?;
            PathBuf::from(DEFAULT_OUT_ROOT).join(&run_id)
        }
    };
    let (out_dir, out_lock) = crate::out_dir::claim_run(&out_dir, options.existing_out)?;

    let directories = additional_directories(&sources);
    let mut workspace = Workspace::new(workdir, directories.dirs.clone(), home)
        .with_state_folder(crate::state::guarded_folder());
    let (state, transcript_key) = transcript_key(state.as_ref(), &workspace)?;
    require_self_tests(&sources, &workspace)?;
    let classifier = match mode {
        PermissionMode::Auto => {
            let config = merge_auto_mode(&sources);
            if let Some(dir) = &config.classifier.cache_dir {
                let allow_write: Vec<PathBuf> = sandbox
                    .iter()
                    .flat_map(|spec| &spec.config.allow_write)
                    .filter_map(|path| path.resolve(&workspace.workdir, workspace.home.as_deref()))
                    .collect();
                classifier::refuse_writable_cache(
                    dir,
                    config.classifier.cache_dir_at.as_ref(),
                    &workspace,
                    &allow_write,
                )?;
            }
            auto_classifier(&task.model, &config)?
        }
        _ => None,
    };
    workspace.read_only_roots.push(out_dir.join("results"));
    // The run's own folder is tollgate's: no tool or command the model starts writes it.
    workspace.own_folders.push(out_dir.clone());

    // What the plugins and agent files said that is not applied, for `run_started`.
    let mut extensions = plugins.notices.clone();
    let hooks = hooks_in_force(&sources);
    let web_fetch_may_run = web_fetch_may_run(mode, &rules, &hooks.in_force);
    // The pool a model sees: the task's tools less those a whole-tool deny rule removes (S1),
    // and, from the default set, WebFetch where no call of it could run: offering it costs
    // ToolSearch and the deferred catalogue in every request for nothing (S7).
    let tools = task
        .tools
        .iter()
        .filter(|name| rules.whole_tool(RuleKind::Deny, name).is_none())
        .filter(|name| task.tools_named || **name != ToolName::WebFetch || web_fetch_may_run)
        .map(|name| match name {
            ToolName::Skill => skill_tool(&workspace, &task.skills, &plugins),
            ToolName::Agent => agent_tool(&workspace, &task.agents, &plugins, &mut extensions),
            _ => Ok(builtin(name)),
        })
        .filter_map(Result::transpose)
        .collect::<Result<_, _>>()?;
    let mcp = mcp_in_force(&sources, &task, &workspace.workdir)?;
    redactor.add_env_names(&crate::mcp::header_variables(&mcp));
    let mut policy_summary = policy_summary(&sources, &rules, &hooks, directories);
    // Servers first (the task may need them), then what the plugins, hooks and directories
    // wait on: the order the progress and the summary say them in.
    policy_summary.held_back = mcp
        .held_back
        .iter()
        .chain(&plugins.held_back)
        .chain(&hooks.held_back)
        .chain(&policy_summary.held_back)
        .cloned()
        .collect();
    for notice in &extensions {
        tracing::warn!("{notice}");
    }
    policy_summary.warnings.extend(extensions);
    policy_summary.plugins = plugins
        .plugins
        .iter()
        .map(|(parts, kind)| crate::transcript::PluginSummary {
            name: parts.name.clone(),
            root: parts.root.clone(),
            enabled_by: *kind,
        })
        .collect();
    policy_summary.dropped_for_auto = dropped_for_auto.iter().map(RuleRef::from).collect();
    let mut tool_limits = ToolLimits::default();
    if let Some(tool_timeout) = task.limits.tool_timeout {
        // Bash ends its whole process group at its own timeout; the loop's bound on the
        // call is then only a backstop.
        tool_limits.bash_timeout = tool_timeout;
    }
    let fail_on = options
        .fail_on
        .clone()
        .unwrap_or_else(|| task.fail_on.clone());
    let withheld = withheld_variables(&task);
    let prompt = prompt::render(&task, &options, &withheld)?;
    // Each memory file passes the Read tool's gate (deny and ask rules, the guardrails, the
    // state folder), and what it says reaches the model with its secrets replaced.
    let read_gate = |path: &Path| {
        crate::policy::read_refusal(&rules, &workspace, &ToolName::Read, path, false)
            .map(|check| check.reason().to_string())
    };
    let memory = task
        .memory
        .then(|| crate::memory::load(&workspace.workdir, &read_gate))
        .filter(|memory| !memory.is_empty() || !memory.skipped.is_empty())
        .map(|mut memory| {
            memory.text = redactor.redact(&memory.text);
            memory
        });
    let mut env = RunEnv::new(&withheld);
    env.model = model_command_env(&env.model, &workspace.workdir);
    let learned = redactor.clone();
    let secrets = SecretSink::new(move |name, value| learned.add_value(name, value));
    let provider = Provider::new(provider_config(
        &task.model,
        task.script.as_ref(),
        &secrets,
    )?)?;
    let (pricing, price) = task.model.price();
    let price_warning = price.warning(&task.model.name);
    if let Some(warning) = &price_warning {
        tracing::warn!("{}", crate::neutral::log_line(warning));
    }
    // Every check passed: the run starts in this folder, which `--continue` goes on with.
    if let Some(state) = &state
        && let Err(err) = state.record_run(&workspace.workdir, &out_dir)
    {
        tracing::warn!("{err}; --continue will not find this run");
    }
    let shared_budget = match &options.shared_budget {
        Some(shared) => Some(crate::shared_budget::SharedBudget::open(
            &shared.path,
            shared.max_cost_usd,
            &run_id,
            lease_ttl(&task.model),
        )?),
        None => None,
    };
    let spec = RunSpec {
        shared_budget,
        run_id,
        task: TaskSummary {
            name: task.name,
            file: task.file,
        },
        prompt,
        memory,
        append_system_prompt: task.append_system_prompt,
        output_schema: task.output_schema,
        output_schema_attempts: task.output_schema_attempts,
        model: ModelSummary {
            provider: task.model.provider.to_string(),
            name: task.model.name.clone(),
            price: Some(price),
            price_warning,
        },
        pricing,
        fallback,
        max_tokens: task.model.request_max_tokens(),
        limits: task.limits,
        max_result_chars: task.max_result_chars,
        deferred_tools: task.deferred_tools,
        reminders_full_every: task.reminders_full_every,
        checks: task.checks,
        mode,
        headless: if options.defer_asks {
            crate::policy::HeadlessAnswer::Defer
        } else {
            crate::policy::HeadlessAnswer::Deny
        },
        rules: Arc::new(rules),
        policy_summary,
        workspace: Arc::new(workspace),
        tools,
        out_dir,
        out_lock: Arc::new(out_lock),
        tool_limits,
        subagent_max_turns: task.subagent_max_turns,
        subagent_max_per_turn: task.subagent_max_per_turn,
        hooks: hooks.in_force,
        sandbox,
        read_only,
        fail_on,
        effects: task.effects,
        env,
        redactor,
        queue: options.queue,
        stream: options.stream,
        observer: options.observer,
        classifier,
        mcp,
        context_window: task
            .compaction
            .context_window
            .or_else(|| crate::model::window::context_window(&task.model.name)),
        compaction: task.compaction,
        resume,
        resume_prompt: options.resume_prompt,
        transcript_key,
    };
    Ok(Session { spec, provider })
}

/// The fallback model (`--fallback-model` over `model.fallback`), priced: a cost limit needs
/// its price as much as the first model's.
fn fallback_model(
    options: &RunOptions,
    task: &Task,
) -> Result<Option<crate::agent::FallbackModel>, SessionError> {
    let Some(name) = options
        .fallback_model
        .clone()
        .or_else(|| task.model.fallback.clone())
    else {
        return Ok(None);
    };
    if task.model.provider == ProviderKind::Scripted {
        return Err(SessionError::ScriptedFallback);
    }
    // The task's `model.fallback` was checked at parse time against its own model; the flag,
    // and a `--model` that now names the task's fallback, are checked here.
    if name.trim().is_empty() {
        return Err(SessionError::BadFallback(
            "the name is empty; give another model of the same provider, or leave the flag out"
                .into(),
        ));
    }
    if name == task.model.name {
        return Err(SessionError::BadFallback(format!(
            "`{name}` is the run's own model; a fallback must be another model of the same provider"
        )));
    }
    let fallback = crate::agent::FallbackModel::priced(name);
    let priced = task.limits.max_cost_usd.is_some() || options.shared_budget.is_some();
    if priced && fallback.pricing.is_none() {
        return Err(SessionError::NoFallbackPrice(fallback.name));
    }
    Ok(Some(fallback))
}

/// How long a shared-budget lease lives: every attempt of a request at its longest, with
/// the pauses between, and a margin; a holder that has not settled by then is gone.
fn lease_ttl(model: &crate::task::ModelSpec) -> std::time::Duration {
    let attempts = model.retries.max.saturating_add(1);
    model
        .timeouts
        .request
        .saturating_add(model.retries.max_delay)
        .saturating_mul(attempts)
        .saturating_add(std::time::Duration::from_secs(300))
}

/// The plugins the run uses (`plugins`), their hooks and servers put with the sources that
/// enabled them, and the task's plugins' servers with the task's own.
fn load_plugins(
    options: &RunOptions,
    task: &mut Task,
    sources: &mut Vec<PolicySource>,
    workdir: &Path,
) -> Result<crate::plugins::Loaded, ConfigError> {
    let (requests, mut notices) =
        crate::plugins::requests(&options.plugin_dirs, &task.plugins, &task.file, sources);
    let mut loaded = crate::plugins::load(&requests, sources)?;
    crate::plugins::apply(&loaded, sources, &mut task.mcp_servers, workdir)?;
    notices.append(&mut loaded.notices);
    loaded.notices = notices;
    for (parts, kind) in &loaded.plugins {
        tracing::info!(
            plugin = %parts.name,
            root = %parts.root.display(),
            enabled_by = %serde_name(kind),
            "plugin loaded"
        );
    }
    Ok(loaded)
}

/// The Agent tool over the built-in sub-agents and the custom agents of the workdir's
/// `.claude/agents/`, the task's `agents:` paths and the plugins' `agents/`. Read only when
/// the pool has Agent.
fn agent_tool(
    workspace: &Workspace,
    task_paths: &[PathBuf],
    plugins: &crate::plugins::Loaded,
    notices: &mut Vec<String>,
) -> Result<Option<Arc<dyn crate::tools::Tool>>, ConfigError> {
    let mut roots = vec![workspace.workdir.join(crate::agents::PROJECT_AGENTS)];
    roots.extend(task_paths.iter().cloned());
    roots.extend(plugins.agent_roots().cloned());
    let found = crate::agents::discover(&roots, &workspace.workdir)?;
    notices.extend(found.notices);
    let tool = crate::tools::AgentTool::with_agents(found.agents);
    Ok(Some(Arc::new(tool) as Arc<dyn crate::tools::Tool>))
}

/// Whether some WebFetch call could be allowed: an allow rule names it (a domain's or the
/// whole tool's), the mode can allow without a rule (`bypassPermissions`, or `auto`'s
/// classifier), or a PreToolUse hook that runs for it may answer allow. In every other mode
/// a call no rule allows is asked, and unattended an ask is a refusal.
fn web_fetch_may_run(mode: PermissionMode, rules: &RuleSet, hooks: &[Hook]) -> bool {
    let name = ToolName::WebFetch;
    matches!(
        mode,
        PermissionMode::BypassPermissions | PermissionMode::Auto
    ) || rules
        .rules()
        .iter()
        .any(|rule| rule.kind == RuleKind::Allow && rule.tool.covers(&name))
        || hooks.iter().any(|hook| {
            hook.spec.event == HookEvent::PreToolUse
                && hook
                    .spec
                    .matcher
                    .as_ref()
                    .is_none_or(|matcher| matcher.matches(&name.to_string()))
        })
}

/// The Skill tool over the workdir's `skills/`, the task's `skills:` paths and the plugins'
/// skills; `None`, with a warning, when there is no skill to offer. Read only when the pool
/// has Skill, so a run without it never reads (or fails on) a repository's skills.
fn skill_tool(
    workspace: &Workspace,
    task_paths: &[PathBuf],
    plugins: &crate::plugins::Loaded,
) -> Result<Option<Arc<dyn crate::tools::Tool>>, ConfigError> {
    let mut roots = vec![workspace.workdir.join("skills")];
    roots.extend(task_paths.iter().cloned());
    roots.extend(plugins.skill_roots().cloned());
    let tool = crate::skills::SkillTool::new(crate::skills::discover(&roots, &workspace.workdir)?);
    if tool.is_none() {
        tracing::warn!(
            "Skill is in tools: but no skill was found under {}; it is not offered",
            roots
                .iter()
                .map(|root| root.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(tool.map(|tool| Arc::new(tool) as Arc<dyn crate::tools::Tool>))
}

/// What `run_started` says of the policies: sources, counts, and everything left aside.
fn policy_summary(
    sources: &[PolicySource],
    rules: &RuleSet,
    hooks: &HooksInForce,
    directories: AdditionalDirectories,
) -> PolicySummary {
    let mut warnings = dangerous_allow_rules(rules);
    warnings.extend(unknown_tool_rules(rules));
    log_warnings(&warnings);
    warnings.extend(directories.warnings);
    PolicySummary {
        sources: sources
            .iter()
            .map(|source| (source.kind, source.policy.file.clone()))
            .collect(),
        managed_only: sources
            .iter()
            .any(|source| source.kind == SourceKind::Managed && source.policy.managed_only),
        rules: rules.rules().len(),
        ignored_rules: rules.ignored().iter().map(RuleRef::from).collect(),
        ignored_hooks: hooks
            .ignored
            .iter()
            .map(|hook| format!("{} ({})", hook.spec.command, hook.source.display()))
            .collect(),
        ignored_additional_directories: directories.ignored,
        held_back: directories.held_back,
        ignored_keys: ignored_keys(sources),
        warnings,
        dropped_for_auto: Vec::new(),
        plugins: Vec::new(),
    }
}

/// What the model's commands and the hooks never see: the provider key under whatever name
/// the task gave it, and every `redact_env` variable (token-named ones go anyway).
fn withheld_variables(task: &Task) -> BTreeSet<String> {
    task.model
        .api_key_variable()
        .map(|(name, _)| name.to_string())
        .into_iter()
        .chain(task.redact_env.iter().cloned())
        .collect()
}

fn ignored_keys(sources: &[PolicySource]) -> Vec<String> {
    sources
        .iter()
        .flat_map(|source| {
            source
                .policy
                .ignored_keys
                .iter()
                .map(|key| format!("{}: {key}", source.policy.file.display()))
        })
        .collect()
}

/// The model's provider settings, with its key and base URL from the task and the
/// environment, and for the scripted provider its replies. A missing key is an error here,
/// before any request; the key's value is never part of a message.
pub fn provider_config(
    model: &ModelSpec,
    script: Option<&ScriptedTurns>,
    secrets: &SecretSink,
) -> Result<ProviderConfig, SessionError> {
    Ok(match model.provider {
        ProviderKind::Scripted => {
            ProviderConfig::Scripted(script.cloned().ok_or(SessionError::NoScript)?)
        }
        ProviderKind::Anthropic => match model.platform {
            None => ProviderConfig::Anthropic {
                http: http_settings(model, "ANTHROPIC_BASE_URL", ANTHROPIC_DEFAULT_BASE_URL)?,
                name: model.name.clone(),
                thinking_budget: model.thinking(),
                platform: None,
            },
            Some(TaskPlatform::Bedrock) => {
                let region = platform_region(model, &["AWS_REGION", "AWS_DEFAULT_REGION"])?;
                let source = crate::model::cloud::aws::find_source(
                    &|name| std::env::var(name).ok(),
                    home_dir().as_deref(),
                    &region,
                )
                .map_err(|why| SessionError::Cloud(format!("bedrock: {why}")))?;
                tracing::info!(region, credentials = %source.describe(), "Amazon Bedrock");
                let endpoint = format!("https://bedrock-runtime.{region}.amazonaws.com");
                ProviderConfig::Anthropic {
                    http: http_settings(model, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint)?,
                    name: model.name.clone(),
                    thinking_budget: model.thinking(),
                    platform: Some(CloudPlatform::Bedrock {
                        region,
                        source,
                        secrets: secrets.clone(),
                    }),
                }
            }
            Some(TaskPlatform::Vertex) => {
                // The variables Claude Code reads for Vertex, then Google's own.
                let region = platform_region(model, &["CLOUD_ML_REGION"])?;
                let project = model
                    .project
                    .clone()
                    .filter(|project| !project.is_empty())
                    .or_else(|| first_set(&["ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"]))
                    .ok_or_else(|| {
                        SessionError::Cloud(
                            "platform vertex needs a project: set model.project or ANTHROPIC_VERTEX_PROJECT_ID".into(),
                        )
                    })?;
                let source = crate::model::cloud::google::find_source(
                    &|name| std::env::var(name).ok(),
                    home_dir().as_deref(),
                    secrets,
                )
                .map_err(|why| SessionError::Cloud(format!("vertex: {why}")))?;
                tracing::info!(region, project, credentials = %source.describe(), "Google Vertex AI");
                // Vertex's global endpoint has no region in its host.
                let endpoint = if region == "global" {
                    "https://aiplatform.googleapis.com".to_string()
                } else {
                    format!("https://{region}-aiplatform.googleapis.com")
                };
                ProviderConfig::Anthropic {
                    http: http_settings(model, "ANTHROPIC_VERTEX_BASE_URL", &endpoint)?,
                    name: model.name.clone(),
                    thinking_budget: model.thinking(),
                    platform: Some(CloudPlatform::Vertex {
                        region,
                        project,
                        source,
                        secrets: secrets.clone(),
                    }),
                }
            }
            Some(TaskPlatform::Azure) => ProviderConfig::Anthropic {
                http: http_settings(model, "ANTHROPIC_FOUNDRY_BASE_URL", "")?,
                name: model.name.clone(),
                thinking_budget: model.thinking(),
                platform: Some(azure_platform(
                    crate::model::cloud::azure::FOUNDRY_SCOPE,
                    secrets,
                )?),
            },
        },
        ProviderKind::Openai => ProviderConfig::OpenAi {
            http: http_settings(model, "OPENAI_BASE_URL", OPENAI_DEFAULT_BASE_URL)?,
            name: model.name.clone(),
            streaming: model.stream,
            effort: model.effort,
            platform: match model.platform {
                Some(TaskPlatform::Azure) => Some(azure_platform(
                    crate::model::cloud::azure::COGNITIVE_SCOPE,
                    secrets,
                )?),
                _ => None,
            },
        },
    })
}

/// Microsoft Entra credentials for `scope`, as the environment gives them.
fn azure_platform(scope: &str, secrets: &SecretSink) -> Result<CloudPlatform, SessionError> {
    let source =
        crate::model::cloud::azure::find_source(&|name| std::env::var(name).ok(), scope, secrets)
            .map_err(|why| SessionError::Cloud(format!("azure: {why}")))?;
    tracing::info!(credentials = %source.describe(), "Microsoft Entra");
    Ok(CloudPlatform::Azure {
        source,
        secrets: secrets.clone(),
    })
}

/// The first of `variables` set to something, trimmed.
fn first_set(variables: &[&str]) -> Option<String> {
    variables.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    })
}

/// The platform's region: the task's `model.region`, else the first of `variables` set.
fn platform_region(model: &ModelSpec, variables: &[&str]) -> Result<String, SessionError> {
    model
        .region
        .clone()
        .filter(|region| !region.is_empty())
        .or_else(|| {
            variables.iter().find_map(|name| {
                std::env::var(name)
                    .ok()
                    .map(|value| value.trim().to_string())
                    .filter(|value| !value.is_empty())
            })
        })
        .ok_or_else(|| {
            SessionError::Cloud(format!(
                "platform {} needs a region: set model.region or {}",
                model.platform.map_or("", |platform| platform.name()),
                variables.join(" or ")
            ))
        })
}

/// The key, base URL, timeouts and retries of a real provider. The base URL is the task's,
/// else the environment's (a gateway), else the vendor's.
fn http_settings(
    model: &ModelSpec,
    base_env: &str,
    default_base: &str,
) -> Result<HttpSettings, SessionError> {
    let api_key = match model.api_key_variable() {
        None => None,
        Some((name, required)) => match std::env::var(name) {
            Ok(key) if !key.trim().is_empty() => Some(ApiKey::new(key.trim())),
            _ if required => {
                return Err(SessionError::MissingKey {
                    provider: model.provider,
                    variable: name.to_string(),
                    named_by_task: model.api_key_env.is_some(),
                });
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

/// Runs a policy's own `tests:`, deciding with the built-in tools.
pub fn self_tests(policy: &Policy, workspace: &Workspace) -> Vec<SelfTestOutcome> {
    run_self_tests(policy, workspace, &crate::call::self_test_answer)
}

/// Runs every source's self-tests; the first failure refuses the run.
pub fn require_self_tests(
    sources: &[PolicySource],
    workspace: &Workspace,
) -> Result<(), SessionError> {
    for source in sources {
        if let Some(failed) = self_tests(&source.policy, workspace)
            .into_iter()
            .find(|outcome| !outcome.passed)
        {
            return Err(SessionError::SelfTest(describe_self_test(&failed)));
        }
    }
    Ok(())
}

/// One line for a self-test's outcome: what was expected, what the gate said and why.
pub fn describe_self_test(outcome: &SelfTestOutcome) -> String {
    let test = &outcome.test;
    let verdict = if outcome.passed { "ok  " } else { "FAIL" };
    let expected = serde_name(&test.expect);
    let how = match &outcome.got {
        Ok(answer) => {
            let decision = answer.decision();
            let step = serde_name(&decision.step);
            let rule = decision
                .rule
                .as_ref()
                .map(|rule| format!(", rule {} at {}", rule.rule, rule.source))
                .unwrap_or_default();
            format!(" at step {step}{rule}: {}", decision.reason)
        }
        Err(_) => String::new(),
    };
    format!(
        "{verdict} {} ({}): {} {} — expected {expected}, got {}{how}",
        test.name,
        test.source,
        test.tool,
        test.input,
        outcome.got_label()
    )
}

/// `--resume DIR|RUN_ID`: the folder itself, else the run of that id under the default out
/// root (relative to the current folder).
pub fn resume_folder(given: &Path) -> Result<PathBuf, SessionError> {
    if given.join(crate::out_dir::TRANSCRIPT_FILE).is_file() {
        return Ok(given.to_path_buf());
    }
    let by_id = Path::new(DEFAULT_OUT_ROOT).join(given);
    if by_id.join(crate::out_dir::TRANSCRIPT_FILE).is_file() {
        return Ok(by_id);
    }
    Err(SessionError::CannotResume {
        dir: given.to_path_buf(),
        why: format!("it is neither a run's folder nor the id of a run under {DEFAULT_OUT_ROOT}/"),
    })
}

/// `--continue`: the run tollgate last created (or resumed) for `workdir`, as the operator's
/// state folder recorded it — never a folder found by looking under `.tollgate/runs/`, where
/// a repository can plant one.
pub fn latest_run(workdir: &Path) -> Result<PathBuf, SessionError> {
    let workdir = canonical_dir(workdir, "workdir")?;
    let none = |why: String| SessionError::CannotResume {
        dir: PathBuf::from(DEFAULT_OUT_ROOT),
        why,
    };
    let state = crate::state::StateDir::open(&[])?;
    let folder = state.latest_run(&workdir).ok_or_else(|| {
        none(format!(
            "no run of the workdir {} is recorded in {}",
            workdir.display(),
            state.path().display()
        ))
    })?;
    // The recorded folder itself, not a link put in its place since.
    let real = folder
        .symlink_metadata()
        .is_ok_and(|meta| meta.is_dir())
        .then_some(folder.as_path())
        .filter(|dir| dir.join(crate::out_dir::TRANSCRIPT_FILE).is_file());
    match real {
        Some(dir) => Ok(dir.to_path_buf()),
        None => Err(none(format!(
            "the last run of the workdir {} ({}) is no longer a run folder",
            workdir.display(),
            folder.display()
        ))),
    }
}

/// The operator's state folder. One that cannot be made is a warning (the run goes on, its
/// transcript without tags: it can never be resumed); one that is unsafe to keep a key in
/// stops the run.
fn operator_state() -> Result<Option<crate::state::StateDir>, SessionError> {
    use crate::state::StateError;
    match crate::state::StateDir::open(&[]) {
        Ok(state) => Ok(Some(state)),
        Err(err @ (StateError::Unsafe { .. } | StateError::Relative(_))) => Err(err.into()),
        Err(err) => {
            tracing::warn!(
                "{err}; the transcript is written without integrity tags and cannot be resumed"
            );
            Ok(None)
        }
    }
}

/// The key that tags this run's transcript, once the state folder is known to lie outside
/// the workdir, and that folder (where the run is recorded once it is ready to start).
type KeyedState = (
    Option<crate::state::StateDir>,
    Option<Arc<crate::state::TranscriptKey>>,
);

fn transcript_key(
    state: Option<&crate::state::StateDir>,
    workspace: &Workspace,
) -> Result<KeyedState, SessionError> {
    let Some(state) = state else {
        return Ok((None, None));
    };
    let state =
        crate::state::StateDir::open_at(state.path(), std::slice::from_ref(&workspace.workdir))?;
    match state.key() {
        Ok(key) => Ok((Some(state), Some(Arc::new(key)))),
        Err(err @ crate::state::StateError::Unsafe { .. }) => Err(err.into()),
        Err(err) => {
            tracing::warn!(
                "{err}; the transcript is written without integrity tags and cannot be resumed"
            );
            Ok((None, None))
        }
    }
}

/// Without `--out`, runs go under `.tollgate/runs/` of the current folder: a repository that
/// commits either as a link would send them (and the files tollgate writes) elsewhere.
fn refuse_linked_out_root() -> Result<(), SessionError> {
    let root = Path::new(DEFAULT_OUT_ROOT);
    for path in root.ancestors().filter(|path| !path.as_os_str().is_empty()) {
        if path.symlink_metadata().is_ok_and(|meta| meta.is_symlink()) {
            return Err(SessionError::LinkedOutRoot {
                path: path.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// A link anywhere in a run folder to resume: tollgate would write (offloaded results, the
/// lock, the reports) or read through it.
fn linked_entry(dir: &Path) -> Option<PathBuf> {
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = pending.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                return Some(entry.path());
            }
            // Run folders are shallow (`results/`); a deep one is not tollgate's.
            if kind.is_dir() {
                if depth >= 8 {
                    return Some(entry.path());
                }
                pending.push((entry.path(), depth + 1));
            }
        }
    }
    None
}

/// Reads the run in `dir` and points `options` at its folder. Only the conversation and what
/// was spent come from the transcript, and only when every line carries the operator's tag;
/// the task, policy, mode, workdir, model and base URL are this invocation's, as for a new
/// run. What the transcript says of them may only refuse a resume that does not fit.
fn resuming(
    dir: &Path,
    options: &mut RunOptions,
    state: Option<&crate::state::StateDir>,
) -> Result<crate::agent::Resume, SessionError> {
    let refuse = |why: String| SessionError::CannotResume {
        dir: dir.to_path_buf(),
        why,
    };
    if let Some(link) = linked_entry(dir) {
        return Err(refuse(format!(
            "it holds a symbolic link or a folder nested too deep ({}); tollgate does not follow links in its run folders",
            link.display()
        )));
    }
    let key = match state {
        Some(state) => Some(state.key()?),
        None => None,
    };
    let mut resume =
        crate::agent::Resume::read(&dir.join(crate::out_dir::TRANSCRIPT_FILE), key.as_ref())?;
    // The id names the run's temp folder and reports: only the characters tollgate's own
    // ids have.
    if resume.run_id.is_empty()
        || !resume
            .run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(refuse(format!(
            "its run id `{}` is not one tollgate makes",
            crate::base::truncate_middle(&resume.run_id, crate::config::MAX_ECHO_CHARS)
        )));
    }
    if resume
        .messages
        .first()
        .is_none_or(|first| first.role != crate::model::Role::User)
    {
        return Err(refuse(
            "its transcript records no conversation to go on from (written by an older tollgate?)"
                .into(),
        ));
    }
    // A run that recorded its end after the model's answer; one killed before it did goes
    // on to conclude that answer (its Stop hooks, output schema, checks).
    let ended_with_answer = resume
        .interrupted
        .as_ref()
        .filter(|turn| turn.calls.is_empty())
        .and(resume.finished);
    if let Some(ended) = ended_with_answer
        && options.resume_prompt.is_none()
    {
        let ended = ended.as_str();
        return Err(refuse(format!(
            "the run ended ({ended}) with the model's answer: there is nothing to go on from without a new prompt"
        )));
    }
    // The task is the command line's: a run started from a task file goes on only when it is
    // given again (a run of `-p` alone goes on as one).
    if options.task.is_none() && resume.task_file != Path::new(prompt::FLAG_PROMPT) {
        return Err(refuse(format!(
            "give the task file again (the run was started with {}): a resume takes its task, policy, mode, workdir and model from the command line, never from the transcript",
            resume.task_file.display()
        )));
    }
    let parked = resume.parked();
    if !parked.is_empty() {
        resume.answers =
            person_answers(dir, &resume.run_id, &parked, key.as_ref(), state).map_err(refuse)?;
    }
    options.out = Some(dir.to_path_buf());
    options.existing_out = crate::out_dir::Existing::Resume;
    Ok(resume)
}

/// A person's answer to each parked call, from the run folder's `approvals.jsonl` (see
/// [`crate::approval::answers`]), each then marked used in the operator's state folder: a
/// second resume, of this folder or of a copy made before (a re-run job's artifact), finds
/// it used. Marked before the call runs, so a run killed now cannot run it twice either.
fn person_answers(
    dir: &Path,
    run_id: &str,
    parked: &[crate::approval::ParkedOnRecord],
    key: Option<&crate::state::TranscriptKey>,
    state: Option<&crate::state::StateDir>,
) -> Result<std::collections::HashMap<String, crate::approval::PersonAnswer>, String> {
    use crate::approval::APPROVALS_FILE;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(state) = state else {
        return Err(
            "it has parked calls, and without tollgate's state folder their approvals cannot be checked".into(),
        );
    };
    let path = dir.join(APPROVALS_FILE);
    let mut text = String::new();
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(mut file) => {
            std::io::Read::read_to_string(&mut file, &mut text)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    }
    let held = crate::approval::answers(&text, key, run_id, parked, chrono::Utc::now(), &|nonce| {
        state.approval_used(nonce)
    })
    .map_err(|err| err.to_string())?;
    let mut answers = std::collections::HashMap::new();
    for (id, (answer, nonce)) in held {
        if !state.use_approval(&nonce).map_err(|err| err.to_string())? {
            return Err(format!(
                "the answer to {id} was used by another resume meanwhile; each approval runs its call once"
            ));
        }
        answers.insert(id, answer);
    }
    Ok(answers)
}

/// Where runs go without `--out`: a folder per run id, so runs never share one.
pub const DEFAULT_OUT_ROOT: &str = ".tollgate/runs";

/// `out` with each `{run_id}` replaced by the run's id (a path that is not UTF-8 has none).
fn with_run_id(out: &Path, run_id: &str) -> PathBuf {
    match out.to_str() {
        Some(text) if text.contains("{run_id}") => PathBuf::from(text.replace("{run_id}", run_id)),
        _ => out.to_path_buf(),
    }
}

/// Sortable by start time, unique enough for parallel runs on one machine.
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let entropy = now.timestamp_subsec_nanos() ^ std::process::id().rotate_left(16);
    format!("{}-{:08x}", now.format("%Y%m%dT%H%M%SZ"), entropy)
}
