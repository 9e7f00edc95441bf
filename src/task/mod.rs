//! Task files (YAML, version 1): what to ask the model, with which model, mode, policy,
//! tools, limits and checks. Parsed and validated once; errors name file:line:column.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::{self, ConfigError};
use crate::model::ScriptedBlock;
use crate::policy::{
    PermissionMode, PermissionsBlock, Policy, PolicyOrigin, ToolName, normalize_lexically,
};
use crate::tools::implemented_builtins;
pub use fail_on::{FailOn, FailOnSet};

mod fail_on;

pub const DEFAULT_MAX_TURNS: u32 = 50;
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 600;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    version: Spanned<u32>,
    name: String,
    prompt: String,
    model: ModelFile,
    mode: Option<PermissionMode>,
    policy: Option<String>,
    permissions: Option<PermissionsBlock>,
    workdir: Option<String>,
    tools: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    checks: Vec<CheckFile>,
    fail_on: Option<Vec<FailOn>>,
    #[serde(default)]
    redact_env: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    provider: Spanned<ProviderKind>,
    name: Option<String>,
    max_tokens: Option<u32>,
    script: Option<Vec<Vec<ScriptedBlock>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_turns: Option<Spanned<u32>>,
    max_denials: Option<u32>,
    max_consecutive_denials: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckFile {
    name: Spanned<String>,
    run: String,
    #[serde(default)]
    expect_exit: i32,
    /// Seconds.
    timeout: Option<u64>,
    retry: Option<Spanned<RetryFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryFile {
    max_attempts: u32,
    #[serde(default)]
    feed_back: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Scripted,
    Anthropic,
    Openai,
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProviderKind::Scripted => "scripted",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub provider: ProviderKind,
    pub name: String,
    pub max_tokens: u32,
    pub script: Vec<Vec<ScriptedBlock>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_turns: u32,
    /// Refused calls in the whole run before it stops with exit 3.
    pub max_denials: Option<u32>,
    /// Refused calls in a row before it stops with exit 3.
    pub max_consecutive_denials: Option<u32>,
}

/// A command the task author runs after the agent stops; not gated (it is the author's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub run: String,
    pub expect_exit: i32,
    pub timeout: Duration,
    /// Line of the check's `name:` in the task file, so reports can point at it.
    pub line: u64,
    pub retry: Retry,
}

/// How often a failing check is tried. `feed_back`: the failure goes to the model as a new
/// user message and the checks run again when it stops; otherwise the check alone is re-run
/// (a flaky command), up to `max_attempts` in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub max_attempts: u32,
    pub feed_back: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max_attempts: 1,
            feed_back: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub file: PathBuf,
    pub name: String,
    pub prompt: String,
    pub model: ModelSpec,
    pub mode: Option<PermissionMode>,
    /// Resolved against the task file's folder.
    pub policy: Option<PathBuf>,
    /// The task's own `permissions:` block; it ranks below the managed policy and the
    /// command line, and a managed-only policy ignores its allow and ask rules.
    pub permissions: Option<Policy>,
    /// Resolved against the task file's folder.
    pub workdir: Option<PathBuf>,
    pub tools: Vec<ToolName>,
    pub limits: Limits,
    pub checks: Vec<Check>,
    /// What turns into a non-zero exit; `--fail-on` overrides it.
    pub fail_on: FailOnSet,
    /// Names of environment variables whose values are redacted from every output, on top
    /// of those whose names look secret.
    pub redact_env: Vec<String>,
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
        let raw: TaskFile = config::parse(text, file)?;
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
        let model = model_spec(raw.model, &at)?;
        let tools = match raw.tools {
            None => implemented_builtins(),
            Some(names) => names
                .into_iter()
                .map(|spanned| {
                    let loc = spanned.referenced;
                    ToolName::parse(&spanned.value)
                        .filter(|name| implemented_builtins().contains(name))
                        .ok_or_else(|| {
                            at(
                                loc.line(),
                                loc.column(),
                                format!(
                                    "unknown tool `{}`; built-in tools are: {}",
                                    spanned.value,
                                    implemented_builtins()
                                        .iter()
                                        .map(ToString::to_string)
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let max_turns = match raw.limits.max_turns {
            None => DEFAULT_MAX_TURNS,
            Some(spanned) if spanned.value == 0 => {
                return Err(at(
                    spanned.referenced.line(),
                    spanned.referenced.column(),
                    "max_turns must be at least 1".into(),
                ));
            }
            Some(spanned) => spanned.value,
        };
        let mut checks: Vec<Check> = Vec::new();
        for check in raw.checks {
            if checks.iter().any(|seen| seen.name == check.name.value) {
                let loc = check.name.referenced;
                return Err(at(
                    loc.line(),
                    loc.column(),
                    format!("duplicate check name `{}`", check.name.value),
                ));
            }
            let retry = match check.retry {
                None => Retry::default(),
                Some(spanned) if spanned.value.max_attempts == 0 => {
                    let loc = spanned.referenced;
                    return Err(at(
                        loc.line(),
                        loc.column(),
                        "retry.max_attempts must be at least 1".into(),
                    ));
                }
                Some(spanned) => Retry {
                    max_attempts: spanned.value.max_attempts,
                    feed_back: spanned.value.feed_back,
                },
            };
            checks.push(Check {
                line: check.name.referenced.line(),
                name: check.name.value,
                run: check.run,
                expect_exit: check.expect_exit,
                timeout: Duration::from_secs(check.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT_SECS)),
                retry,
            });
        }
        let permissions = raw
            .permissions
            .map(|block| Policy::from_block(block, PolicyOrigin { file, dir, home }))
            .transpose()?;
        Ok(Task {
            file: file.to_path_buf(),
            permissions,
            name: raw.name,
            prompt: raw.prompt,
            model,
            mode: raw.mode,
            policy: raw.policy.map(|p| normalize_lexically(&dir.join(p))),
            workdir: raw.workdir.map(|w| normalize_lexically(&dir.join(w))),
            tools,
            limits: Limits {
                max_turns,
                max_denials: raw.limits.max_denials,
                max_consecutive_denials: raw.limits.max_consecutive_denials,
            },
            checks,
            fail_on: raw.fail_on.map(FailOnSet::from_iter).unwrap_or_default(),
            redact_env: raw.redact_env,
        })
    }
}

fn model_spec(
    raw: ModelFile,
    at: &dyn Fn(u64, u64, String) -> ConfigError,
) -> Result<ModelSpec, ConfigError> {
    let provider = raw.provider.value;
    let loc = raw.provider.referenced;
    let script = match (provider, raw.script) {
        (ProviderKind::Scripted, Some(script)) if !script.is_empty() => script,
        (ProviderKind::Scripted, _) => {
            return Err(at(
                loc.line(),
                loc.column(),
                "the scripted provider needs a non-empty `script:` (a list of assistant turns)"
                    .into(),
            ));
        }
        (other, Some(_)) => {
            return Err(at(
                loc.line(),
                loc.column(),
                format!("`script:` is only for the scripted provider, not {other}"),
            ));
        }
        (other, None) => {
            return Err(at(
                loc.line(),
                loc.column(),
                format!("provider `{other}` is not yet supported by this tollgate; use `scripted`"),
            ));
        }
    };
    Ok(ModelSpec {
        provider,
        name: raw.name.unwrap_or_else(|| provider.to_string()),
        max_tokens: raw.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        script,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "version: 1\nname: t\nprompt: do it\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";

    fn parse(text: &str) -> Result<Task, ConfigError> {
        Task::parse(text, Path::new("task.yaml"), Path::new("/tasks"), None)
    }

    #[test]
    fn minimal_task_gets_defaults() {
        let task = parse(MINIMAL).unwrap();
        assert_eq!(task.limits.max_turns, DEFAULT_MAX_TURNS);
        assert_eq!(task.tools, implemented_builtins());
        assert_eq!(
            task.model.script,
            vec![vec![ScriptedBlock::Text("done".into())]]
        );
        assert_eq!(task.mode, None);
    }

    #[test]
    fn full_task() {
        let task = parse(
            "version: 1\nname: t\nprompt: p\nmode: dontAsk\npolicy: ../p.yaml\nworkdir: ws\ntools: [Read, Bash]\nlimits:\n  max_turns: 3\nchecks:\n  - name: c\n    run: 'true'\n    expect_exit: 1\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Read, input: {file_path: a}}\n    - - text: ok\n",
        )
        .unwrap();
        assert_eq!(task.mode, Some(PermissionMode::DontAsk));
        assert_eq!(task.permissions, None);
        assert_eq!(task.policy, Some(PathBuf::from("/p.yaml")));
        assert_eq!(task.workdir, Some(PathBuf::from("/tasks/ws")));
        assert_eq!(task.tools, vec![ToolName::Read, ToolName::Bash]);
        assert_eq!(task.limits.max_turns, 3);
        assert_eq!(task.checks[0].expect_exit, 1);
    }

    #[test]
    fn fail_on_retry_and_redact_env() {
        let task = parse(&format!(
            "{MINIMAL}fail_on: [check, denial]\nredact_env: [DB_URL]\nchecks:\n  - name: tests\n    run: 'true'\n    retry: {{max_attempts: 3, feed_back: true}}\n  - name: lint\n    run: 'true'\n"
        ))
        .unwrap();
        assert_eq!(task.fail_on.kinds(), [FailOn::Denial, FailOn::Check]);
        assert_eq!(task.redact_env, ["DB_URL"]);
        assert_eq!(
            task.checks[0].retry,
            Retry {
                max_attempts: 3,
                feed_back: true
            }
        );
        assert_eq!(task.checks[0].line, 11);
        assert_eq!(task.checks[1].retry, Retry::default());
        assert_eq!(parse(MINIMAL).unwrap().fail_on, FailOnSet::default());
        let none = parse(&format!("{MINIMAL}fail_on: []\n")).unwrap();
        assert_eq!(none.fail_on, FailOnSet::none());
    }

    #[test]
    fn permissions_block_becomes_a_policy() {
        let task = parse(&format!(
            "{MINIMAL}permissions:\n  allow: [Bash]\n  deny: ['Bash(rm:*)']\n"
        ))
        .unwrap();
        let permissions = task.permissions.unwrap();
        assert_eq!(permissions.rules.len(), 2);
        assert_eq!(permissions.rules[0].source.line, 10);
        let err = parse(&format!("{MINIMAL}permissions:\n  allow: ['Bash(']\n")).unwrap_err();
        assert_eq!(err.line, 9);
    }

    #[test]
    fn errors_are_located() {
        let cases = [
            (
                MINIMAL.replace("version: 1", "version: 2"),
                1,
                "unsupported task version",
            ),
            (format!("{MINIMAL}bogus: 1\n"), 8, "unknown field `bogus`"),
            (
                MINIMAL.replace("prompt: do it\n", ""),
                0,
                "missing field `prompt`",
            ),
            (format!("{MINIMAL}mode: yolo\n"), 8, "unknown variant"),
            (
                format!("{MINIMAL}tools: [Read, Nope]\n"),
                8,
                "unknown tool `Nope`",
            ),
            (
                MINIMAL
                    .replace("provider: scripted", "provider: anthropic")
                    .replace("  script:\n    - - text: done\n", ""),
                5,
                "not yet supported",
            ),
            (
                MINIMAL.replace("text: done", "txt: done"),
                7,
                "unknown variant",
            ),
            (
                format!("{MINIMAL}limits:\n  max_turns: 0\n"),
                9,
                "at least 1",
            ),
            (
                format!("{MINIMAL}fail_on: [denials]\n"),
                8,
                "unknown variant",
            ),
            (
                format!(
                    "{MINIMAL}checks:\n  - name: c\n    run: x\n    retry: {{max_attempts: 0}}\n"
                ),
                11,
                "retry.max_attempts must be at least 1",
            ),
        ];
        for (text, line, message) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.message.contains(message), "{err} should say {message}");
            if line > 0 {
                assert_eq!(err.line, line, "{err}");
                assert!(err.column > 0, "{err}");
            }
        }
    }
}
