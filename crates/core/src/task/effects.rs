//! A task's `effects:` block: what the effect ledger measures after each call.

use super::{At, located};
use crate::config::ConfigError;
use crate::ledger::{LedgerConfig, LedgerScope, MAX_MAX_ENTRIES};
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EffectsFile {
    scope: Option<LedgerScope>,
    max_entries: Option<Spanned<u64>>,
}

pub(super) fn effects(raw: EffectsFile, at: At<'_>) -> Result<LedgerConfig, ConfigError> {
    let defaults = LedgerConfig::default();
    let max_entries = match raw.max_entries {
        None => defaults.max_entries,
        Some(spanned) => match usize::try_from(spanned.value) {
            Ok(value) if (1..=MAX_MAX_ENTRIES).contains(&value) => value,
            _ => {
                return Err(located(
                    &spanned,
                    at,
                    format!("effects.max_entries must be from 1 to {MAX_MAX_ENTRIES}"),
                ));
            }
        },
    };
    Ok(LedgerConfig {
        scope: raw.scope.unwrap_or(defaults.scope),
        max_entries,
    })
}
