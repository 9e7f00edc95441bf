//! A task's `limits:` block: turns, cost, tokens, time, denials, parallel calls and result
//! sizes, each checked against its ceiling in [`super::maxima`] and read into [`Limits`].

use super::maxima;
use super::model::ModelSpec;
use super::{
    At, DEFAULT_MAX_CLASSIFIER_DENIALS, DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS,
    DEFAULT_MAX_TURNS, DEFAULT_MESSAGE_RESULT_CHARS, located, seconds,
};
use crate::base::DEFAULT_MAX_PARALLEL_TOOLS;
use crate::config::ConfigError;
use crate::policy::ToolName;
use crate::tools::implemented_builtins;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    max_turns: Option<Spanned<u32>>,
    max_cost_usd: Option<Spanned<f64>>,
    max_input_tokens: Option<Spanned<u64>>,
    max_output_tokens: Option<Spanned<u64>>,
    /// Seconds of wall clock for the whole run.
    timeout: Option<Spanned<f64>>,
    /// Seconds for one tool call.
    tool_timeout: Option<Spanned<f64>>,
    max_denials: Option<Spanned<u32>>,
    max_consecutive_denials: Option<Spanned<u32>>,
    max_parallel_tools: Option<Spanned<u64>>,
    max_classifier_denials: Option<Spanned<u32>>,
    max_consecutive_classifier_denials: Option<Spanned<u32>>,
    /// Characters of tool results one user message may carry (S8).
    message_result_chars: Option<Spanned<u64>>,
    /// Per tool: past this many characters a result is offloaded to a file (S8).
    pub(super) max_result_chars: Option<std::collections::BTreeMap<String, Spanned<u64>>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_turns: u32,
    pub max_cost_usd: Option<f64>,
    /// Prompt tokens over the run, cached or not.
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    /// Wall clock for the whole run.
    pub timeout: Option<Duration>,
    /// Wall clock for one tool call.
    pub tool_timeout: Option<Duration>,
    /// Refused calls in the whole run before it stops with exit 3, checked after each call;
    /// unset, [`DEFAULT_MAX_DENIALS`] applies between turns.
    pub max_denials: Option<u32>,
    /// Refused calls in a row before it stops with exit 3, checked after each call; unset,
    /// [`DEFAULT_MAX_CONSECUTIVE_DENIALS`] applies between turns.
    pub max_consecutive_denials: Option<u32>,
    /// Concurrency-safe calls of one response that may run at once (S6).
    pub max_parallel_tools: usize,
    /// Auto mode: classifier denials in the whole run before it stops with exit 3.
    pub max_classifier_denials: u32,
    /// Auto mode: classifier denials in a row before it stops with exit 3.
    pub max_consecutive_classifier_denials: u32,
    /// Characters of tool results one user message may carry; past it the largest are
    /// replaced by previews (S8).
    pub message_result_chars: usize,
}

pub(super) fn limits(
    raw: LimitsFile,
    model: &ModelSpec,
    at: At<'_>,
) -> Result<Limits, ConfigError> {
    let max_turns = match raw.max_turns {
        None => DEFAULT_MAX_TURNS,
        Some(spanned) if spanned.value == 0 => {
            return Err(located(&spanned, at, "max_turns must be at least 1".into()));
        }
        Some(spanned) => spanned.value,
    };
    let max_cost_usd = match raw.max_cost_usd {
        None => None,
        Some(spanned) if !(spanned.value.is_finite() && spanned.value > 0.0) => {
            return Err(located(
                &spanned,
                at,
                "max_cost_usd must be a positive number".into(),
            ));
        }
        // A budget that cannot be priced cannot be enforced; say so before spending.
        Some(spanned) if model.pricing().is_none() => {
            return Err(located(
                &spanned,
                at,
                format!(
                    "max_cost_usd needs a price for model `{}`, which the price table does not know; add model.pricing: {{input: …, output: …}} (USD per million tokens)",
                    model.name
                ),
            ));
        }
        Some(spanned) => Some(spanned.value),
    };
    let positive = |value: Option<Spanned<u64>>, key: &str| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map(|spanned| spanned.value)),
    };
    let at_least_one_if_set = |value: Option<Spanned<u32>>, key: &str| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map(|spanned| spanned.value)),
    };
    let at_least_one = |value: Option<Spanned<u32>>, key: &str, default: u32| match value {
        Some(spanned) if spanned.value == 0 => {
            Err(located(&spanned, at, format!("{key} must be at least 1")))
        }
        other => Ok(other.map_or(default, |spanned| spanned.value)),
    };
    Ok(Limits {
        max_turns,
        max_cost_usd,
        max_input_tokens: positive(raw.max_input_tokens, "max_input_tokens")?,
        max_output_tokens: positive(raw.max_output_tokens, "max_output_tokens")?,
        timeout: seconds(raw.timeout, "limits.timeout", maxima::RUN_TIMEOUT, at)?,
        tool_timeout: seconds(
            raw.tool_timeout,
            "limits.tool_timeout",
            maxima::TOOL_TIMEOUT,
            at,
        )?,
        max_denials: at_least_one_if_set(raw.max_denials, "max_denials")?,
        max_consecutive_denials: at_least_one_if_set(
            raw.max_consecutive_denials,
            "max_consecutive_denials",
        )?,
        max_parallel_tools: positive(
            bounded(
                raw.max_parallel_tools,
                "max_parallel_tools",
                maxima::PARALLEL_TOOLS,
                at,
            )?,
            "max_parallel_tools",
        )?
        .map_or(DEFAULT_MAX_PARALLEL_TOOLS, |max| {
            usize::try_from(max).unwrap_or(usize::MAX)
        }),
        max_classifier_denials: at_least_one(
            raw.max_classifier_denials,
            "max_classifier_denials",
            DEFAULT_MAX_CLASSIFIER_DENIALS,
        )?,
        max_consecutive_classifier_denials: at_least_one(
            raw.max_consecutive_classifier_denials,
            "max_consecutive_classifier_denials",
            DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS,
        )?,
        message_result_chars: positive(raw.message_result_chars, "message_result_chars")?
            .map_or(DEFAULT_MESSAGE_RESULT_CHARS, |max| {
                usize::try_from(max).unwrap_or(usize::MAX)
            }),
    })
}

/// `value` unless it is over `max`.
pub(super) fn bounded(
    value: Option<Spanned<u64>>,
    key: &str,
    max: u64,
    at: At<'_>,
) -> Result<Option<Spanned<u64>>, ConfigError> {
    match value {
        Some(spanned) if spanned.value > max => Err(located(
            &spanned,
            at,
            format!("{key} must be at most {max}"),
        )),
        other => Ok(other),
    }
}

/// `limits.max_result_chars: {Bash: 50000}`. Read's results are never offloaded (offloading
/// them would send the model to Read the file again), so it takes no threshold.
pub(super) fn result_thresholds(
    raw: Option<std::collections::BTreeMap<String, Spanned<u64>>>,
    at: At<'_>,
) -> Result<Vec<(ToolName, usize)>, ConfigError> {
    let mut thresholds = Vec::new();
    for (name, spanned) in raw.unwrap_or_default() {
        let tool = ToolName::parse(&name)
            .filter(|tool| implemented_builtins().contains(tool))
            .ok_or_else(|| {
                located(
                    &spanned,
                    at,
                    format!("limits.max_result_chars: unknown tool `{name}`"),
                )
            })?;
        if tool == ToolName::Read {
            return Err(located(
                &spanned,
                at,
                "limits.max_result_chars: Read is never offloaded; its own limits bound it".into(),
            ));
        }
        if spanned.value == 0 {
            return Err(located(
                &spanned,
                at,
                format!("limits.max_result_chars.{name} must be at least 1"),
            ));
        }
        thresholds.push((tool, usize::try_from(spanned.value).unwrap_or(usize::MAX)));
    }
    Ok(thresholds)
}
