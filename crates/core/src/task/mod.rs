//! Task files (YAML, version 1): what to ask the model, with which model, mode, policy,
//! tools, limits and checks. Parsed and validated once; errors name file:line:column.
//!
//! This file reads the whole task and the keys that are one line each; a block with rules of
//! its own has its file: `model` (provider, endpoint, effort, timeouts, retries, pricing),
//! `limits`, `checks`, `params`, `output_schema`, `compaction`, `effects` and `fail_on`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::base::normalize_lexically;
use crate::config::{self, ConfigError};
use crate::ledger::LedgerConfig;
use crate::model::ScriptedTurns;
use crate::policy::{PermissionMode, PermissionsBlock, Policy, PolicyOrigin, ToolName};
use crate::settings::{McpServerSpec, McpServersBlock, mcp_servers};
use crate::tools::{default_tools, implemented_builtins};
pub use checks::{Check, Retry};
pub use compaction::Compaction;
pub use fail_on::{FailOn, FailOnSet};
pub use limits::Limits;
pub use model::{ModelSpec, Platform, ProviderKind};
pub use output_schema::{DEFAULT_OUTPUT_SCHEMA_ATTEMPTS, MAX_OUTPUT_SCHEMA_ATTEMPTS, OutputSchema};
pub use params::{Param, ParamType};

mod checks;
mod compaction;
mod effects;
mod fail_on;
mod limits;
mod model;
mod output_schema;
mod params;
#[cfg(test)]
mod tests;

use checks::{CheckFile, checks};
use compaction::{CompactionFile, compaction};
use effects::{EffectsFile, effects};
use limits::{LimitsFile, limits, result_thresholds};
use model::{ModelFile, model_spec};
use output_schema::output_schema;
use params::{ParamFile, params};

pub const DEFAULT_MAX_TURNS: u32 = 50;
/// A sub-agent's own turns (`subagents.max_turns`): a focused job, so fewer than the run's.
pub const DEFAULT_SUBAGENT_MAX_TURNS: u32 = 20;
/// Agent calls one model turn may make (`subagents.max_per_turn`); the calls past it get an
/// error result instead of a sub-agent, so one response cannot multiply the run's requests.
pub const DEFAULT_SUBAGENT_MAX_PER_TURN: u32 = 3;
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 600;

/// The most each knob of a task may be, checked at load (a larger value is a config error
/// with its file:line:col, not a deadline past what a clock holds). Generous on purpose:
/// each is far past any real use, so only a typo or a hostile file meets it.
pub mod maxima {
    use std::time::Duration;

    const DAY: u64 = 86_400;
    /// `model.timeouts.connect`, `first_event`, `idle` and `request`.
    pub const MODEL_TIMEOUT: Duration = Duration::from_secs(DAY);
    /// `model.retries.base_delay` and `max_delay`.
    pub const RETRY_DELAY: Duration = Duration::from_secs(3600);
    /// `model.retries.max`.
    pub const PROVIDER_RETRIES: u32 = 100;
    /// `limits.timeout`: a week of wall clock.
    pub const RUN_TIMEOUT: Duration = Duration::from_secs(7 * DAY);
    /// `limits.tool_timeout` and a check's `timeout`.
    pub const TOOL_TIMEOUT: Duration = Duration::from_secs(DAY);
    /// A check's `retry.max_attempts`.
    pub const CHECK_ATTEMPTS: u32 = 100;
    /// `limits.max_parallel_tools`.
    pub const PARALLEL_TOOLS: u64 = 1024;
}

/// Every block of a task file and the keys it takes, from the types that read them (serde's
/// own field lists): the reference's table cannot name a key the parser refuses or miss one
/// it reads. `permissions` and `mcp_servers.NAME` take a policy file's keys.
pub fn key_levels() -> Vec<(&'static str, &'static [&'static str])> {
    use crate::config::struct_keys;
    vec![
        ("", struct_keys::<TaskFile>()),
        ("model", struct_keys::<ModelFile>()),
        ("model.timeouts", struct_keys::<model::TimeoutsFile>()),
        ("model.retries", struct_keys::<model::RetriesFile>()),
        ("limits", struct_keys::<LimitsFile>()),
        ("checks[]", struct_keys::<CheckFile>()),
        ("checks[].retry", struct_keys::<checks::RetryFile>()),
        ("params.NAME", struct_keys::<ParamFile>()),
        ("subagents", struct_keys::<SubagentsFile>()),
        ("reminders", struct_keys::<RemindersFile>()),
        ("compaction", struct_keys::<CompactionFile>()),
        ("effects", struct_keys::<EffectsFile>()),
    ]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    version: Spanned<u32>,
    name: String,
    prompt: Spanned<String>,
    model: ModelFile,
    mode: Option<PermissionMode>,
    policy: Option<String>,
    permissions: Option<PermissionsBlock>,
    workdir: Option<Spanned<String>>,
    tools: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    checks: Vec<CheckFile>,
    fail_on: Option<Vec<FailOn>>,
    #[serde(default)]
    redact_env: Vec<String>,
    /// Tools offered only by name until ToolSearch loads them (S7), besides the default ones.
    deferred_tools: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    reminders: RemindersFile,
    /// MCP servers this task starts (the shape of `.mcp.json`'s `mcpServers`).
    mcp_servers: Option<McpServersBlock>,
    /// Folders of skills (or skill folders), besides the workdir's `skills/`.
    skills: Option<Vec<Spanned<String>>>,
    /// Agent files (or folders of them), besides the workdir's `.claude/agents/`.
    agents: Option<Vec<Spanned<String>>>,
    /// Local plugin folders (Claude Code's layout) whose parts the run uses.
    plugins: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    subagents: SubagentsFile,
    /// The prompt's parameters: `{{ NAME }}` placeholders, typed, with defaults.
    params: Option<std::collections::BTreeMap<String, Spanned<ParamFile>>>,
    /// A JSON Schema the final answer must satisfy: inline, or a file's path.
    output_schema: Option<Spanned<serde_json::Value>>,
    /// Answers the model may give before one is valid against `output_schema`.
    output_schema_attempts: Option<Spanned<u32>>,
    /// Text added at the end of tollgate's system prompt.
    append_system_prompt: Option<String>,
    /// `false`: AGENTS.md and CLAUDE.md are not read.
    memory: Option<bool>,
    #[serde(default)]
    compaction: CompactionFile,
    /// What the effect ledger measures around each call.
    #[serde(default)]
    effects: EffectsFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubagentsFile {
    max_turns: Option<Spanned<u32>>,
    max_per_turn: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemindersFile {
    full_every: Option<Spanned<u32>>,
}

/// Every mode's headless contract: a model that keeps retrying refused calls is going
/// nowhere, so the run stops (exit 3) instead of burning turns until `max_turns`. The
/// defaults are checked before each request, not after each call, so one response's batch of
/// calls — a sweep the gate refuses call by call — is always answered whole.
pub const DEFAULT_MAX_DENIALS: u32 = 50;
pub const DEFAULT_MAX_CONSECUTIVE_DENIALS: u32 = 20;
/// Compaction starts when the next request would fill this share of the context window:
/// room is left for the answer and for the summary request itself.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// The model turns a compaction keeps whole, with their results.
pub const DEFAULT_COMPACTION_KEEP_RECENT: u32 = 4;

/// Auto mode's headless contract: a judge that keeps saying no ends the run, it never stalls.
pub const DEFAULT_MAX_CLASSIFIER_DENIALS: u32 = 20;
pub const DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS: u32 = 3;

/// The per-message budget when the task sets none: about 50k tokens of results in one turn.
pub const DEFAULT_MESSAGE_RESULT_CHARS: usize = 200_000;
/// A TodoWrite snapshot is sent in full every this many reminders (S3).
pub const DEFAULT_REMINDERS_FULL_EVERY: u32 = 5;

/// Built-ins that are never deferred: the model needs them from the first turn, and
/// ToolSearch is how the others are found.
pub const NEVER_DEFERRED: [ToolName; 7] = [
    ToolName::Bash,
    ToolName::Read,
    ToolName::Edit,
    ToolName::Write,
    ToolName::Glob,
    ToolName::Grep,
    ToolName::ToolSearch,
];

/// Built-ins deferred in every task: rarely needed, so until ToolSearch loads one it costs
/// only a line of the system prompt, not its schema in every request (S7).
pub const DEFERRED_BY_DEFAULT: [ToolName; 1] = [ToolName::WebFetch];

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub file: PathBuf,
    pub name: String,
    /// The prompt as written, its placeholders not yet filled (the session fills them).
    pub prompt: String,
    /// The file line the prompt's text starts on, for a placeholder's error.
    pub prompt_line: u64,
    pub model: ModelSpec,
    /// `model.script:`, the scripted provider's replies: `Some` exactly when the provider
    /// is `scripted`.
    pub script: Option<ScriptedTurns>,
    pub mode: Option<PermissionMode>,
    /// Resolved against the task file's folder.
    pub policy: Option<PathBuf>,
    /// The task's own `permissions:` block; it ranks below the managed policy and the
    /// command line, and a managed-only policy ignores its allow and ask rules.
    pub permissions: Option<Policy>,
    /// Resolved against the task file's folder.
    pub workdir: Option<PathBuf>,
    /// Where `workdir:` is written (line, column), for an error about the folder.
    pub workdir_at: Option<(u64, u64)>,
    pub tools: Vec<ToolName>,
    /// Whether `tools:` was written: a task that names its tools gets each of them, while
    /// the default set leaves out a tool no call of which could be allowed.
    pub tools_named: bool,
    pub limits: Limits,
    pub checks: Vec<Check>,
    /// What turns into a non-zero exit; `--fail-on` overrides it.
    pub fail_on: FailOnSet,
    /// Names of environment variables whose values are redacted from every output, on top
    /// of those whose names look secret.
    pub redact_env: Vec<String>,
    /// `limits.max_result_chars`: per-tool offload thresholds that replace the tools' own.
    pub max_result_chars: Vec<(ToolName, usize)>,
    /// Tools offered by name only until ToolSearch loads them: the defaults and the task's.
    pub deferred_tools: Vec<ToolName>,
    /// `reminders.full_every`: a TodoWrite reminder is the full list every this many times.
    pub reminders_full_every: u32,
    /// The task's own MCP servers (`mcp_servers:`).
    pub mcp_servers: Vec<McpServerSpec>,
    /// `skills:`, resolved against the task file's folder.
    pub skills: Vec<PathBuf>,
    /// `agents:`, resolved against the task file's folder.
    pub agents: Vec<PathBuf>,
    /// `plugins:`, resolved against the task file's folder.
    pub plugins: Vec<PathBuf>,
    /// `subagents.max_turns`: the turns of each sub-agent's own conversation.
    pub subagent_max_turns: u32,
    /// `subagents.max_per_turn`: Agent calls one turn may make.
    pub subagent_max_per_turn: u32,
    /// `params:`, in name order.
    pub params: Vec<Param>,
    pub output_schema: Option<OutputSchema>,
    pub output_schema_attempts: u32,
    pub append_system_prompt: Option<String>,
    /// Whether AGENTS.md / CLAUDE.md are read (`memory:`, default true).
    pub memory: bool,
    pub compaction: Compaction,
    /// `effects:`: what the effect ledger measures (default: the whole workspace).
    pub effects: LedgerConfig,
}

impl Task {
    /// `file` names the task in messages; `dir` (its folder, absolute) resolves relative
    /// paths; `home` expands `~/` in its permissions.
    pub fn parse(
        text: &str,
        file: &Path,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Task, ConfigError> {
        Self::parse_text(text, file, dir, home).map_err(|err| err.with_source(file, text))
    }

    fn parse_text(
        text: &str,
        file: &Path,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Task, ConfigError> {
        let mut raw: TaskFile = config::parse(text, file).map_err(|err| batch_hint(err, file))?;
        let at =
            |line: u64, column: u64, message: String| ConfigError::new(file, line, column, message);
        if raw.version.value != 1 {
            let loc = raw.version.referenced;
            return Err(at(
                loc.line(),
                loc.column(),
                format!(
                    "unsupported task version {}; this tollgate reads version 1",
                    raw.version.value
                ),
            ));
        }
        let (model, script) = model_spec(raw.model, &at)?;
        let tools_named = raw.tools.is_some();
        let tools = match raw.tools {
            None => default_tools(),
            Some(names) => names
                .into_iter()
                .map(|spanned| {
                    let loc = spanned.referenced;
                    ToolName::parse(&spanned.value)
                        .filter(|name| implemented_builtins().contains(name))
                        .ok_or_else(|| {
                            unknown_tool(
                                at(
                                    loc.line(),
                                    loc.column(),
                                    format!("unknown tool `{}`", spanned.value),
                                ),
                                &spanned.value,
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let max_result_chars = result_thresholds(raw.limits.max_result_chars.take(), &at)?;
        let limits = limits(raw.limits, &model, &at)?;
        let mut deferred_tools = DEFERRED_BY_DEFAULT.to_vec();
        for spanned in raw.deferred_tools.unwrap_or_default() {
            let name = ToolName::parse(&spanned.value)
                .filter(|name| implemented_builtins().contains(name))
                .ok_or_else(|| {
                    unknown_tool(
                        located(&spanned, &at, format!("unknown tool `{}`", spanned.value)),
                        &spanned.value,
                    )
                })?;
            if NEVER_DEFERRED.contains(&name) {
                return Err(located(
                    &spanned,
                    &at,
                    format!("{name} is never deferred: the model needs it from the first turn"),
                ));
            }
            if !deferred_tools.contains(&name) {
                deferred_tools.push(name);
            }
        }
        let reminders_full_every = match raw.reminders.full_every {
            None => DEFAULT_REMINDERS_FULL_EVERY,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "reminders.full_every must be at least 1".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let subagent_max_turns = match raw.subagents.max_turns {
            None => DEFAULT_SUBAGENT_MAX_TURNS,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "subagents.max_turns must be at least 1".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let subagent_max_per_turn = match raw.subagents.max_per_turn {
            None => DEFAULT_SUBAGENT_MAX_PER_TURN,
            Some(spanned) if spanned.value == 0 => {
                return Err(located(
                    &spanned,
                    &at,
                    "subagents.max_per_turn must be at least 1 (remove Agent from `tools` to offer none)".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let compaction = compaction(raw.compaction, &at)?;
        let effects = effects(raw.effects, &at)?;
        let raw_skills = raw.skills.unwrap_or_default();
        if let Some(first) = raw_skills.first()
            && !tools.contains(&ToolName::Skill)
        {
            return Err(located(
                first,
                &at,
                "skills: needs the Skill tool: add Skill to tools:".into(),
            ));
        }
        let skills = raw_skills
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let raw_agents = raw.agents.unwrap_or_default();
        if let Some(first) = raw_agents.first()
            && !tools.contains(&ToolName::Agent)
        {
            return Err(located(
                first,
                &at,
                "agents: needs the Agent tool: add Agent to tools:".into(),
            ));
        }
        let agents = raw_agents
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let plugins = raw
            .plugins
            .unwrap_or_default()
            .into_iter()
            .map(|spanned| normalize_lexically(&dir.join(spanned.value)))
            .collect();
        let checks = checks(raw.checks, &at)?;
        let permissions = raw
            .permissions
            .map(|block| Policy::from_block(block, PolicyOrigin { file, dir, home }))
            .transpose()?;
        let params = params(raw.params.unwrap_or_default(), &at)?;
        let output_schema = raw
            .output_schema
            .map(|spanned| output_schema(spanned, dir, &at))
            .transpose()?;
        let output_schema_attempts = match raw.output_schema_attempts {
            None => DEFAULT_OUTPUT_SCHEMA_ATTEMPTS,
            Some(spanned) if spanned.value == 0 || spanned.value > MAX_OUTPUT_SCHEMA_ATTEMPTS => {
                return Err(located(
                    &spanned,
                    &at,
                    format!(
                        "output_schema_attempts must be from 1 to {MAX_OUTPUT_SCHEMA_ATTEMPTS}"
                    ),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let prompt_line = prompt_first_line(text, &raw.prompt);
        Ok(Task {
            file: file.to_path_buf(),
            permissions,
            name: raw.name,
            prompt: raw.prompt.value,
            prompt_line,
            model,
            script,
            mode: raw.mode,
            policy: raw.policy.map(|p| normalize_lexically(&dir.join(p))),
            workdir_at: raw
                .workdir
                .as_ref()
                .map(|w| (w.referenced.line(), w.referenced.column())),
            workdir: raw.workdir.map(|w| normalize_lexically(&dir.join(w.value))),
            tools,
            tools_named,
            limits,
            checks,
            fail_on: raw
                .fail_on
                .map(FailOnSet::from_iter)
                .unwrap_or_else(FailOnSet::task_default),
            redact_env: raw.redact_env,
            max_result_chars,
            deferred_tools,
            reminders_full_every,
            mcp_servers: mcp_servers(raw.mcp_servers.unwrap_or_default(), file)?,
            skills,
            agents,
            plugins,
            subagent_max_turns,
            subagent_max_per_turn,
            params,
            output_schema,
            output_schema_attempts,
            append_system_prompt: raw.append_system_prompt,
            memory: raw.memory.unwrap_or(true),
            compaction,
            effects,
        })
    }
}

/// The line the prompt's text starts on: the next one after a block scalar's `|` or `>`.
fn prompt_first_line(text: &str, prompt: &Spanned<String>) -> u64 {
    let loc = prompt.referenced;
    let line = loc.line();
    let rest = text
        .lines()
        .nth(usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX))
        .map(|source| {
            source
                .chars()
                .skip(usize::try_from(loc.column().saturating_sub(1)).unwrap_or(usize::MAX))
                .collect::<String>()
        })
        .unwrap_or_default();
    if rest.starts_with('|') || rest.starts_with('>') {
        line + 1
    } else {
        line
    }
}

/// A batch task's own keys (`batch:`, `limits.batch_max_cost_usd`) in a task given to a
/// single run: name the command that reads them.
fn batch_hint(mut err: ConfigError, file: &Path) -> ConfigError {
    if matches!(
        err.unknown_key.as_deref(),
        Some("batch" | "batch_max_cost_usd")
    ) {
        err.message = format!(
            "`{}` is a batch task's key; `tollgate run` runs a single task",
            err.unknown_key.as_deref().unwrap_or_default()
        );
        err = err.with_hint(format!(
            "run a batch task over its repositories with `tollgate batch {} --repos FILE`",
            file.display()
        ));
    }
    err
}

/// The hint of an unknown name in `tools:`: the close built-in, else the list of them.
fn unknown_tool(err: ConfigError, given: &str) -> ConfigError {
    let names: Vec<String> = implemented_builtins()
        .iter()
        .map(ToString::to_string)
        .collect();
    let hint = match config::did_you_mean(given, names.iter().map(String::as_str)) {
        Some(close) => format!("did you mean `{close}`?"),
        None => format!("built-in tools are: {}", names.join(", ")),
    };
    err.with_hint(hint)
}

type At<'a> = &'a dyn Fn(u64, u64, String) -> ConfigError;

fn located<T>(spanned: &Spanned<T>, at: At<'_>, message: String) -> ConfigError {
    at(
        spanned.referenced.line(),
        spanned.referenced.column(),
        message,
    )
}

/// A positive, finite number of seconds, at most `max`.
fn seconds(
    value: Option<Spanned<f64>>,
    key: &str,
    max: Duration,
    at: At<'_>,
) -> Result<Option<Duration>, ConfigError> {
    let Some(spanned) = value else {
        return Ok(None);
    };
    Duration::try_from_secs_f64(spanned.value)
        .ok()
        .filter(|duration| !duration.is_zero() && *duration <= max)
        .map(Some)
        .ok_or_else(|| {
            located(
                &spanned,
                at,
                format!(
                    "{key} must be a positive number of seconds, at most {}",
                    max.as_secs()
                ),
            )
        })
}
