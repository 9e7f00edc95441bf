//! A task's `model:` block: the provider, its name, endpoint and cloud, effort and thinking,
//! streaming, timeouts and retries, pricing and the scripted provider's replies, read into
//! a [`ModelSpec`].

use super::maxima;
use super::{At, DEFAULT_MAX_TOKENS, located, seconds};
use crate::config::ConfigError;
use crate::model::pricing::PriceSource;
use crate::model::{Effort, EffortApi, Pricing, RetryPolicy, ScriptedTurns, Streaming, Timeouts};
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelFile {
    provider: Spanned<ProviderKind>,
    name: Option<Spanned<String>>,
    max_tokens: Option<Spanned<u32>>,
    script: Option<ScriptedTurns>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    thinking_budget: Option<Spanned<u32>>,
    /// Reasoning effort, mapped to the provider's own setting (`model::Effort`).
    effort: Option<Spanned<String>>,
    /// A cloud platform serving the provider's models, and its region.
    platform: Option<Spanned<Platform>>,
    region: Option<Spanned<String>>,
    /// Vertex AI's Google Cloud project.
    project: Option<Spanned<String>>,
    pricing: Option<Pricing>,
    timeouts: Option<TimeoutsFile>,
    retries: Option<RetriesFile>,
    /// Another model of the same provider, for the rest of the run once this one is
    /// overloaded or unavailable after its retries.
    fallback: Option<Spanned<String>>,
    /// `true`, `false` or `auto` (OpenAI-compatible servers only).
    stream: Option<Spanned<StreamFile>>,
}

/// `model.stream` as written: a boolean, or a word (only `auto` is one).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum StreamFile {
    Flag(bool),
    Word(String),
}

/// Seconds; fractions allowed (tests use milliseconds).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimeoutsFile {
    connect: Option<Spanned<f64>>,
    first_event: Option<Spanned<f64>>,
    idle: Option<Spanned<f64>>,
    request: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetriesFile {
    max: Option<Spanned<u32>>,
    /// Seconds.
    base_delay: Option<Spanned<f64>>,
    /// Seconds.
    max_delay: Option<Spanned<f64>>,
}

/// A cloud platform that serves a provider's models under its own identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Amazon Bedrock (Anthropic models), SigV4 with AWS credentials.
    Bedrock,
    /// Google Vertex AI (Anthropic models), Google OAuth tokens.
    Vertex,
    /// Microsoft Foundry (Anthropic models) or Azure OpenAI, Microsoft Entra tokens.
    Azure,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Bedrock => "bedrock",
            Platform::Vertex => "vertex",
            Platform::Azure => "azure",
        }
    }
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
    /// The task's base URL; the environment's (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) and
    /// the vendor's apply when it is `None`.
    pub base_url: Option<String>,
    /// The variable holding the API key, when the task names one.
    pub api_key_env: Option<String>,
    /// Anthropic extended thinking: the budget in tokens.
    pub thinking_budget: Option<u32>,
    /// `model.effort` or `--effort`, checked against the provider (see [`ModelSpec::check_effort`]).
    pub effort: Option<Effort>,
    /// `model.platform`: a cloud platform serving the model; `None`, the vendor's API.
    pub platform: Option<Platform>,
    /// `model.region`: the platform's region (else its environment's, e.g. `AWS_REGION`).
    pub region: Option<String>,
    /// `model.project`: Vertex AI's project (else `ANTHROPIC_VERTEX_PROJECT_ID`).
    pub project: Option<String>,
    /// The task's `pricing:`; see `ModelSpec::pricing`.
    pub pricing_override: Option<Pricing>,
    pub timeouts: Timeouts,
    pub retries: RetryPolicy,
    /// `model.fallback`: the model that answers once this one is overloaded (`--fallback-model`
    /// overrides it).
    pub fallback: Option<String>,
    /// `model.stream` (`--stream` overrides it); the openai provider's only.
    pub stream: Streaming,
}

impl ModelSpec {
    /// `Ok` when the provider takes the effort (or none is set); else why not. Thinking is
    /// set by one of `effort` and `thinking_budget`, never both.
    pub fn check_effort(&self) -> Result<(), String> {
        let Some(effort) = self.effort else {
            return Ok(());
        };
        match self.provider {
            ProviderKind::Scripted => {
                Err("effort is for the anthropic and openai providers, not scripted".into())
            }
            ProviderKind::Openai => effort.check(EffortApi::OpenAi),
            ProviderKind::Anthropic if self.thinking_budget.is_some() => Err(
                "effort and thinking_budget both set Anthropic's thinking: give one of them".into(),
            ),
            ProviderKind::Anthropic => effort.check(EffortApi::Anthropic),
        }
    }

    /// Anthropic's thinking budget: `thinking_budget`, else the effort's.
    pub fn thinking(&self) -> Option<u32> {
        match self.provider {
            ProviderKind::Anthropic => self
                .thinking_budget
                .or_else(|| self.effort.and_then(Effort::thinking_budget)),
            ProviderKind::Openai | ProviderKind::Scripted => None,
        }
    }

    /// The `max_tokens` a request asks for. Anthropic counts thinking inside `max_tokens`,
    /// so an effort's budget is added to the task's (which stays the answer's own room);
    /// an explicit `thinking_budget` is already below `max_tokens`.
    pub fn request_max_tokens(&self) -> u32 {
        match (self.provider, self.thinking_budget, self.effort) {
            (ProviderKind::Anthropic, None, Some(effort)) => self
                .max_tokens
                .saturating_add(effort.thinking_budget().unwrap_or(0)),
            _ => self.max_tokens,
        }
    }

    /// The task's price, else the price table's for the model's name (which `--model` may
    /// change after parsing); `None` when neither knows the model. The scripted model is free.
    pub fn pricing(&self) -> Option<Pricing> {
        self.price().0
    }

    /// [`pricing`](Self::pricing) and where it came from.
    pub fn price(&self) -> (Option<Pricing>, PriceSource) {
        match (self.provider, self.pricing_override) {
            (ProviderKind::Scripted, _) => (Some(Pricing::FREE), PriceSource::Free),
            (_, Some(pricing)) => (Some(pricing), PriceSource::Task),
            (_, None) => PriceSource::of_table(&self.name),
        }
    }

    /// The variable the API key is read from, and whether the run needs it. A local
    /// OpenAI-compatible server (a `base_url` and no `api_key_env`) may need no key.
    pub fn api_key_variable(&self) -> Option<(&str, bool)> {
        match (self.provider, self.api_key_env.as_deref()) {
            (ProviderKind::Scripted, _) => None,
            // A platform authenticates with its own credentials, not an API key.
            _ if self.platform.is_some() => None,
            (_, Some(name)) => Some((name, true)),
            (ProviderKind::Anthropic, None) => Some(("ANTHROPIC_API_KEY", true)),
            (ProviderKind::Openai, None) => Some(("OPENAI_API_KEY", self.base_url.is_none())),
        }
    }
}

/// The model's settings, and the scripted provider's replies when it is the one.
pub(super) fn model_spec(
    raw: ModelFile,
    at: At<'_>,
) -> Result<(ModelSpec, Option<ScriptedTurns>), ConfigError> {
    let provider = raw.provider.value;
    let script = match (provider, raw.script) {
        (ProviderKind::Scripted, Some(script)) if !script.is_empty() => Some(script),
        (ProviderKind::Scripted, _) => {
            return Err(located(
                &raw.provider,
                at,
                "the scripted provider needs a non-empty `script:` (a list of assistant turns)"
                    .into(),
            ));
        }
        (other, Some(_)) => {
            return Err(located(
                &raw.provider,
                at,
                format!("`script:` is only for the scripted provider, not {other}"),
            ));
        }
        (_, None) => None,
    };
    let name = match (provider, raw.name) {
        (_, Some(name)) => name.value,
        (ProviderKind::Scripted, None) => provider.to_string(),
        (other, None) => {
            return Err(located(
                &raw.provider,
                at,
                format!(
                    "the {other} provider needs `name:` (the model, e.g. {})",
                    example_model(other)
                ),
            ));
        }
    };
    let max_tokens = match raw.max_tokens {
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "max_tokens must be at least 1".into(),
            ));
        }
        Some(spanned) => spanned.value,
        None => DEFAULT_MAX_TOKENS,
    };
    let real_only = |key: &str, line_of: Option<(u64, u64)>| match (provider, line_of) {
        (ProviderKind::Scripted, Some((line, column))) => Err(at(
            line,
            column,
            format!("`{key}:` is for the anthropic and openai providers, not scripted"),
        )),
        _ => Ok(()),
    };
    let position = |spanned: &Option<Spanned<String>>| {
        spanned
            .as_ref()
            .map(|s| (s.referenced.line(), s.referenced.column()))
    };
    real_only("base_url", position(&raw.base_url))?;
    real_only("fallback", position(&raw.fallback))?;
    let fallback = match raw.fallback {
        Some(spanned) if spanned.value.trim().is_empty() || spanned.value == name => {
            return Err(located(
                &spanned,
                at,
                "model.fallback must name another model of the same provider".into(),
            ));
        }
        other => other.map(|spanned| spanned.value),
    };
    real_only("api_key_env", position(&raw.api_key_env))?;
    let stream = match raw.stream {
        None => Streaming::Auto,
        Some(spanned) if provider != ProviderKind::Openai => {
            return Err(located(
                &spanned,
                at,
                "model.stream is for the openai provider (the others always stream)".into(),
            ));
        }
        Some(spanned) => match &spanned.value {
            StreamFile::Flag(true) => Streaming::Always,
            StreamFile::Flag(false) => Streaming::Never,
            StreamFile::Word(word) if word == "auto" => Streaming::Auto,
            StreamFile::Word(word) => {
                return Err(located(
                    &spanned,
                    at,
                    format!("model.stream must be true, false or auto, not `{word}`"),
                ));
            }
        },
    };
    let base_url = raw
        .base_url
        .map(|url| {
            let trimmed = url.value.trim_end_matches('/').to_string();
            if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
                Ok(trimmed)
            } else {
                Err(located(
                    &url,
                    at,
                    format!(
                        "base_url `{}` must start with http:// or https://",
                        url.value
                    ),
                ))
            }
        })
        .transpose()?;
    let api_key_env = raw
        .api_key_env
        .map(|name| {
            if !name.value.is_empty()
                && name
                    .value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                Ok(name.value)
            } else {
                Err(located(
                    &name,
                    at,
                    format!(
                        "api_key_env must name an environment variable, not `{}`",
                        name.value
                    ),
                ))
            }
        })
        .transpose()?;
    let thinking_budget = match raw.thinking_budget {
        None => None,
        Some(budget) if provider != ProviderKind::Anthropic => {
            return Err(located(
                &budget,
                at,
                "thinking_budget is for the anthropic provider".into(),
            ));
        }
        // The API's own bounds: at least 1024, and below max_tokens.
        Some(budget) if budget.value < 1024 || budget.value >= max_tokens => {
            return Err(located(
                &budget,
                at,
                format!(
                    "thinking_budget must be at least 1024 and below max_tokens ({max_tokens})"
                ),
            ));
        }
        Some(budget) => Some(budget.value),
    };
    let effort = raw
        .effort
        .as_ref()
        .map(|spanned| Effort::parse(&spanned.value).map_err(|err| located(spanned, at, err)))
        .transpose()?;
    let timeouts_file = raw.timeouts.unwrap_or_default();
    let defaults = Timeouts::default();
    let timeouts = Timeouts {
        connect: seconds(
            timeouts_file.connect,
            "timeouts.connect",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.connect),
        first_event: seconds(
            timeouts_file.first_event,
            "timeouts.first_event",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.first_event),
        idle: seconds(
            timeouts_file.idle,
            "timeouts.idle",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.idle),
        request: seconds(
            timeouts_file.request,
            "timeouts.request",
            maxima::MODEL_TIMEOUT,
            at,
        )?
        .unwrap_or(defaults.request),
    };
    let retries_file = raw.retries.unwrap_or_default();
    let defaults = RetryPolicy::default();
    let retries = RetryPolicy {
        max: match retries_file.max {
            None => defaults.max,
            Some(spanned) if spanned.value > maxima::PROVIDER_RETRIES => {
                return Err(located(
                    &spanned,
                    at,
                    format!("retries.max must be at most {}", maxima::PROVIDER_RETRIES),
                ));
            }
            Some(spanned) => spanned.value,
        },
        base_delay: seconds(
            retries_file.base_delay,
            "retries.base_delay",
            maxima::RETRY_DELAY,
            at,
        )?
        .unwrap_or(defaults.base_delay),
        max_delay: seconds(
            retries_file.max_delay,
            "retries.max_delay",
            maxima::RETRY_DELAY,
            at,
        )?
        .unwrap_or(defaults.max_delay),
    };
    let model = ModelSpec {
        provider,
        name,
        max_tokens,
        base_url,
        api_key_env,
        thinking_budget,
        effort,
        platform: raw.platform.as_ref().map(|spanned| spanned.value),
        region: raw
            .region
            .as_ref()
            .map(|spanned| spanned.value.trim().to_string()),
        project: raw
            .project
            .as_ref()
            .map(|spanned| spanned.value.trim().to_string()),
        pricing_override: raw.pricing,
        timeouts,
        retries,
        fallback,
        stream,
    };
    if let Some(platform) = &raw.platform {
        let problem = match (platform.value, provider) {
            (Platform::Bedrock | Platform::Vertex, ProviderKind::Anthropic) => None,
            (Platform::Azure, ProviderKind::Anthropic | ProviderKind::Openai) => None,
            (Platform::Bedrock | Platform::Vertex, other) => Some(format!(
                "platform {} serves the anthropic provider's models, not {other}",
                platform.value.name()
            )),
            (Platform::Azure, other) => Some(format!(
                "platform azure serves the anthropic and openai providers' models, not {other}"
            )),
        };
        // Azure's endpoint is the resource's own; there is no default to fall back on.
        let problem = problem.or_else(|| {
            (platform.value == Platform::Azure && model.base_url.is_none()).then(|| {
                "platform azure needs model.base_url, the resource's endpoint: https://RESOURCE.services.ai.azure.com/anthropic (anthropic) or https://RESOURCE.openai.azure.com/openai/v1 (openai)".to_string()
            })
        });
        let problem = problem.or_else(|| {
            model.api_key_env.as_ref().map(|_| {
                format!(
                    "platform {} authenticates with its own credentials: drop api_key_env",
                    platform.value.name()
                )
            })
        });
        if let Some(problem) = problem {
            return Err(located(platform, at, problem));
        }
    }
    if let Some(region) = &raw.region
        && !matches!(
            raw.platform.as_ref().map(|spanned| spanned.value),
            Some(Platform::Bedrock | Platform::Vertex)
        )
    {
        return Err(located(
            region,
            at,
            "region is for a cloud platform: set platform (bedrock or vertex) too".into(),
        ));
    }
    if let Some(project) = &raw.project
        && raw.platform.as_ref().map(|spanned| spanned.value) != Some(Platform::Vertex)
    {
        return Err(located(
            project,
            at,
            "project is Vertex AI's: set platform: vertex too".into(),
        ));
    }
    if let (Err(err), Some(spanned)) = (model.check_effort(), &raw.effort) {
        return Err(located(spanned, at, err));
    }
    Ok((model, script))
}

pub(super) fn example_model(provider: ProviderKind) -> &'static str {
    match provider {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Openai | ProviderKind::Scripted => "gpt-4.1",
    }
}
