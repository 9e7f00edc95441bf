//! The `classifier:` and `auto_mode:` blocks as a policy file writes them, each checked into
//! its typed form. Pure data; which source's blocks a run obeys is `auto_mode`'s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_saphyr::Spanned;

/// Which provider answers the classifier's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierProvider {
    Scripted,
    Anthropic,
    Openai,
}

/// A policy's `classifier:` block as written; every field optional, since the run's task
/// supplies the defaults (its provider, that provider's small model).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierFile {
    pub provider: Option<ClassifierProvider>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// Seconds for one classifier request.
    pub timeout: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_cost_usd: Option<f64>,
    pub cache_dir: Option<Spanned<String>>,
    pub two_stage: Option<bool>,
    /// The scripted provider's answers, in order: a string is sent as the model's text, a
    /// mapping as its JSON.
    pub script: Option<Vec<Value>>,
}

/// A place in a configuration file, kept with a value checked later than it was parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSpot {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
}

impl ConfigSpot {
    pub fn error(&self, message: impl Into<String>) -> crate::config::ConfigError {
        crate::config::ConfigError::new(&self.file, self.line, self.column, message)
    }
}

/// The validated `classifier:` block of one policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassifierSettings {
    pub provider: Option<ClassifierProvider>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub timeout: Option<Duration>,
    pub max_tokens: Option<u32>,
    pub max_cost_usd: Option<f64>,
    /// Absolute: a relative `cache_dir` is resolved against the policy file's folder.
    pub cache_dir: Option<PathBuf>,
    /// Where `cache_dir` was written, for the error that refuses a writable one.
    pub cache_dir_at: Option<ConfigSpot>,
    pub two_stage: Option<bool>,
    /// The scripted answers as the model's text.
    pub script: Option<Vec<String>>,
}

/// The longest `classifier.timeout`: a day, as for the model's own timeouts.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

impl ClassifierFile {
    /// Checks every field; `Err` says what is wrong in words for a ConfigError.
    pub fn validate(self, policy_dir: &Path, file: &Path) -> Result<ClassifierSettings, String> {
        let timeout = self
            .timeout
            .map(|secs| {
                Duration::try_from_secs_f64(secs)
                    .ok()
                    .filter(|timeout| !timeout.is_zero() && *timeout <= MAX_TIMEOUT)
                    .ok_or("classifier.timeout must be a positive number of seconds, at most 86400")
            })
            .transpose()?;
        if self.max_tokens == Some(0) {
            return Err("classifier.max_tokens must be at least 1".into());
        }
        if self
            .max_cost_usd
            .is_some_and(|cost| !(cost.is_finite() && cost > 0.0))
        {
            return Err("classifier.max_cost_usd must be a positive number".into());
        }
        if let Some(url) = &self.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "classifier.base_url `{url}` must start with http:// or https://"
            ));
        }
        let scripted = self.provider == Some(ClassifierProvider::Scripted);
        match (&self.script, scripted) {
            (Some(_), false) => {
                return Err("classifier.script is only for `provider: scripted`".into());
            }
            (None, true) => {
                return Err(
                    "the scripted classifier needs `script:` (its answers, in order)".into(),
                );
            }
            _ => {}
        }
        let script = self.script.map(|answers| {
            answers
                .into_iter()
                .map(|answer| match answer {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
                .collect()
        });
        Ok(ClassifierSettings {
            provider: self.provider,
            model: self.model,
            base_url: self
                .base_url
                .map(|url| url.trim_end_matches('/').to_string()),
            api_key_env: self.api_key_env,
            timeout,
            max_tokens: self.max_tokens,
            max_cost_usd: self.max_cost_usd,
            cache_dir_at: self.cache_dir.as_ref().map(|spanned| ConfigSpot {
                file: file.to_path_buf(),
                line: spanned.referenced.line(),
                column: spanned.referenced.column(),
            }),
            cache_dir: self.cache_dir.map(|dir| policy_dir.join(dir.value)),
            two_stage: self.two_stage,
            script,
        })
    }
}

/// What the operator tells the classifier about this environment, in their words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AutoModeProse {
    /// Facts about where the agent runs (what the repository is, what the network reaches).
    #[serde(default)]
    pub environment: Vec<String>,
    /// Kinds of action to allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Kinds of action to deny unless the task clearly needs them.
    #[serde(default)]
    pub soft_deny: Vec<String>,
    /// Kinds of action to deny whatever the task says.
    #[serde(default)]
    pub hard_deny: Vec<String>,
}

impl AutoModeProse {
    /// Only what narrows: the deny lines.
    pub(crate) fn denials(&self) -> AutoModeProse {
        AutoModeProse {
            environment: Vec::new(),
            allow: Vec::new(),
            soft_deny: self.soft_deny.clone(),
            hard_deny: self.hard_deny.clone(),
        }
    }

    pub(crate) fn extend(&mut self, other: &AutoModeProse) {
        self.environment.extend(other.environment.iter().cloned());
        self.allow.extend(other.allow.iter().cloned());
        self.soft_deny.extend(other.soft_deny.iter().cloned());
        self.hard_deny.extend(other.hard_deny.iter().cloned());
    }
}
