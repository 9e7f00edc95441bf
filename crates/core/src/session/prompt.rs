//! The run's task when the command line gives the job: a prompt with no task file gets a
//! built-in task (and, without `--policy`, the read-only `policies/prompt-default.yaml`);
//! a task file and flags combine with the flags winning. Then the prompt's parameters are
//! resolved (`--var`, `--vars-file`, `params:` defaults) and its placeholders filled, once,
//! as text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{RunOptions, SessionError};
use crate::config::{self, ConfigError};
use crate::policy::{Policy, PolicyOrigin};
use crate::task::{OutputSchema, ProviderKind, Task};
use crate::template::{EventPayload, RunContext, Template};

/// The task of a run with no task file. No user text is in it: the prompt and the flags are
/// set on the parsed task, never written into YAML.
const PROMPT_TASK: &str = "version: 1\nname: prompt\nprompt: ''\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5\n";

/// The policy of a prompt run without `--policy` (shipped as policies/prompt-default.yaml).
pub const PROMPT_DEFAULT_POLICY: &str = include_str!("../../../../policies/prompt-default.yaml");
pub const PROMPT_DEFAULT_POLICY_FILE: &str = "policies/prompt-default.yaml (built in)";

/// What names the command line's prompt in messages.
pub(super) const FLAG_PROMPT: &str = "--prompt";

/// The task file's task, or the built-in one, with the command line's choices applied.
pub fn task(options: &RunOptions, home: Option<&Path>) -> Result<Task, SessionError> {
    let mut task = match &options.task {
        Some(path) => super::load_task(path, home)?,
        None => builtin_task(options.policy.is_some(), home)?,
    };
    if let Some(prompt) = &options.prompt {
        task.prompt.clone_from(prompt);
        task.prompt_line = 1;
    }
    // Another provider: what the task said of its own provider's model (its name, endpoint,
    // cloud platform, price, script) does not carry over; `--model` and `--base-url` may set
    // them again. A platform left behind would send the other provider's requests with no
    // key, or a platform's token to the other provider's endpoint.
    if let Some(provider) = options.provider
        && provider != task.model.provider
    {
        task.model.provider = provider;
        task.model.name = default_model(provider).to_string();
        task.model.base_url = None;
        task.model.platform = None;
        task.model.region = None;
        task.model.project = None;
        task.model.pricing_override = None;
        task.script = None;
    }
    if let Some(url) = &options.base_url {
        if task.model.provider == ProviderKind::Scripted {
            return Err(ConfigError::whole_file(
                &task.file,
                "--base-url is for the anthropic and openai providers, not scripted",
            )
            .into());
        }
        task.model.base_url = Some(url.clone());
    }
    if let Some(stream) = options.model_stream {
        if task.model.provider != ProviderKind::Openai {
            return Err(ConfigError::whole_file(
                &task.file,
                "--stream is for the openai provider (the others always stream)",
            )
            .into());
        }
        task.model.stream = stream;
    }
    if let Some(effort) = options.effort {
        task.model.effort = Some(effort);
        task.model.thinking_budget = None;
    }
    // Checked again here: `--provider` or `--effort` may have changed either side.
    if let Err(err) = task.model.check_effort() {
        let flag = match options.effort {
            Some(effort) => format!("--effort {effort}: "),
            None => String::new(),
        };
        return Err(ConfigError::whole_file(&task.file, format!("{flag}{err}")).into());
    }
    if let Some(path) = &options.output_schema {
        task.output_schema = Some(OutputSchema::from_file(path)?);
    }
    if let Some(text) = &options.append_system_prompt {
        task.append_system_prompt = Some(match task.append_system_prompt.take() {
            Some(own) => format!("{own}\n{text}"),
            None => text.clone(),
        });
    }
    if options.no_memory {
        task.memory = false;
    }
    Ok(task)
}

/// The model a provider gets when only the provider is named.
pub fn default_model(provider: ProviderKind) -> &'static str {
    match provider {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Openai => "gpt-4.1",
        ProviderKind::Scripted => "scripted",
    }
}

fn builtin_task(policy_given: bool, home: Option<&Path>) -> Result<Task, SessionError> {
    let dir = std::path::absolute(".").map_err(|source| SessionError::Read {
        what: "current folder",
        path: PathBuf::from("."),
        source,
    })?;
    let file = Path::new(FLAG_PROMPT);
    let mut task = Task::parse(PROMPT_TASK, file, &dir, home)?;
    // A prompt run's work is its answer: an empty one fails it (`empty_answer`).
    task.fail_on = crate::task::FailOnSet::default();
    if !policy_given {
        let file = Path::new(PROMPT_DEFAULT_POLICY_FILE);
        task.permissions = Some(Policy::parse(
            PROMPT_DEFAULT_POLICY,
            PolicyOrigin {
                file,
                dir: &dir,
                home,
            },
        )?);
    }
    Ok(task)
}

/// The prompt with its placeholders filled. `withheld` are the variables no placeholder
/// may read.
pub fn render(
    task: &Task,
    options: &RunOptions,
    withheld: &std::collections::BTreeSet<String>,
) -> Result<String, SessionError> {
    if options.prompt_is_filled {
        return Ok(task.prompt.clone());
    }
    let params = params(task, &options.vars, options.vars_file.as_deref())?;
    let (file, first_line) = match (&options.prompt, &options.prompt_file) {
        (Some(_), Some(path)) => (path.clone(), 1),
        (Some(_), None) => (PathBuf::from(FLAG_PROMPT), 1),
        (None, _) => (task.file.clone(), task.prompt_line),
    };
    let template = Template::parse(&task.prompt, &file, first_line)?;
    let context = RunContext {
        params,
        withheld: withheld.clone(),
        event: if template.has_placeholders() {
            EventPayload::from_env()
        } else {
            EventPayload::Unset
        },
        env: Box::new(|name| std::env::var(name).ok()),
    };
    let prompt = template.render(|path| context.fill(path))?;
    // A provider refuses an empty message; say so before asking one.
    if prompt.trim().is_empty() {
        return Err(ConfigError::new(&file, first_line, 1, "the prompt is empty").into());
    }
    Ok(prompt)
}

/// The parameters' values: `--var` over `--vars-file` over the task's defaults. A task that
/// declares `params:` takes only those, each of its type, the required ones given.
fn params(
    task: &Task,
    vars: &[(String, String)],
    vars_file: Option<&Path>,
) -> Result<BTreeMap<String, String>, SessionError> {
    let mut given: BTreeMap<String, (String, String)> = BTreeMap::new();
    if let Some(path) = vars_file {
        for (name, value) in read_vars_file(path)? {
            given.insert(name, (value, path.display().to_string()));
        }
    }
    for (name, value) in vars {
        given.insert(name.clone(), (value.clone(), format!("--var {name}")));
    }
    if task.params.is_empty() {
        return Ok(given
            .into_iter()
            .map(|(name, (value, _))| (name, value))
            .collect());
    }
    if let Some((name, (_, from))) = given
        .iter()
        .find(|(name, _)| !task.params.iter().any(|param| &param.name == *name))
    {
        let declared: Vec<&str> = task.params.iter().map(|p| p.name.as_str()).collect();
        return Err(ConfigError::whole_file(
            Path::new(from),
            format!(
                "the task declares no parameter `{name}`; its params: {}",
                declared.join(", ")
            ),
        )
        .into());
    }
    let mut values = BTreeMap::new();
    for param in &task.params {
        let (line, column) = param.at;
        let value = match given.remove(&param.name) {
            Some((value, from)) => {
                if !param.kind.accepts(&value) {
                    return Err(ConfigError::whole_file(
                        Path::new(&from),
                        format!(
                            "parameter `{}` must be of type {}, not `{value}`",
                            param.name,
                            param.kind.as_str()
                        ),
                    )
                    .into());
                }
                value
            }
            None => match &param.default {
                Some(default) => default.clone(),
                None if param.required => {
                    return Err(ConfigError::new(
                        &task.file,
                        line,
                        column,
                        format!(
                            "parameter `{0}` is required: give it with --var {0}=VALUE or --vars-file",
                            param.name
                        ),
                    )
                    .into());
                }
                None => String::new(),
            },
        };
        values.insert(param.name.clone(), value);
    }
    Ok(values)
}

/// A `--vars-file`: a YAML (or JSON) mapping of names to strings, numbers or booleans.
fn read_vars_file(path: &Path) -> Result<Vec<(String, String)>, SessionError> {
    let text = super::read_text(path, "vars file")?;
    let raw: BTreeMap<String, serde_json::Value> =
        config::parse(&text, path).map_err(|err| err.with_source(path, &text))?;
    raw.into_iter()
        .map(|(name, value)| {
            crate::template::check_param_name(&name)
                .map_err(|why| ConfigError::whole_file(path, why))?;
            let text = match value {
                serde_json::Value::String(text) => text,
                value @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_)) => {
                    value.to_string()
                }
                _ => {
                    return Err(ConfigError::whole_file(
                        path,
                        format!("`{name}` must be a string, a number or a boolean"),
                    ));
                }
            };
            Ok((name, text))
        })
        .collect::<Result<_, _>>()
        .map_err(SessionError::from)
}
