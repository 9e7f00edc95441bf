//! A task's `compaction:` block: when and how the history is summarised to fit the model's
//! window.

use super::{At, DEFAULT_COMPACTION_KEEP_RECENT, DEFAULT_COMPACTION_THRESHOLD, located};
use crate::config::ConfigError;
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CompactionFile {
    enabled: Option<bool>,
    /// The share of the context window past which the older turns are summarised.
    threshold: Option<Spanned<f64>>,
    /// Model turns (assistant messages) kept as they are.
    keep_recent: Option<Spanned<u32>>,
    /// Tokens; overrides the window the table knows for the model.
    context_window: Option<Spanned<u64>>,
}

/// `compaction:`: when and how the history is summarised to fit the model's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compaction {
    pub enabled: bool,
    /// In (0, 1]: the share of the window the next request may fill before compaction.
    pub threshold: f64,
    /// At least 1: the most recent model turns kept as they are.
    pub keep_recent: u32,
    /// The task's window in tokens; `None` leaves it to the table of known models.
    pub context_window: Option<u64>,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            enabled: true,
            threshold: DEFAULT_COMPACTION_THRESHOLD,
            keep_recent: DEFAULT_COMPACTION_KEEP_RECENT,
            context_window: None,
        }
    }
}

pub(super) fn compaction(raw: CompactionFile, at: At<'_>) -> Result<Compaction, ConfigError> {
    let defaults = Compaction::default();
    let threshold = match raw.threshold {
        None => defaults.threshold,
        Some(spanned) if spanned.value > 0.0 && spanned.value <= 1.0 => spanned.value,
        Some(spanned) => {
            return Err(located(
                &spanned,
                at,
                "compaction.threshold must be a share of the context window, above 0 and at most 1"
                    .into(),
            ));
        }
    };
    let keep_recent = match raw.keep_recent {
        None => defaults.keep_recent,
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "compaction.keep_recent must be at least 1".into(),
            ));
        }
        Some(spanned) => spanned.value,
    };
    let context_window = match raw.context_window {
        Some(spanned) if spanned.value == 0 => {
            return Err(located(
                &spanned,
                at,
                "compaction.context_window must be at least 1 token".into(),
            ));
        }
        other => other.map(|spanned| spanned.value),
    };
    Ok(Compaction {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        threshold,
        keep_recent,
        context_window,
    })
}
