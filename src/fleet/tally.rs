//! What a batch's journals add up to, as every report of the batch states it: each
//! repository's outcome name and cost, the total spent, the repositories not started.

use super::journal::{Journal, RepoOutcome};
use crate::config::serde_name;

/// The repositories the batch did not start, with why (the cost limit, say).
pub(super) fn not_started(journals: &[Journal]) -> Vec<(&str, &str)> {
    journals
        .iter()
        .filter(|journal| journal.outcome == Some(RepoOutcome::Skipped))
        .map(|journal| {
            (
                journal.repo.as_str(),
                journal.reason.as_deref().unwrap_or("not started"),
            )
        })
        .collect()
}

pub(super) fn outcome_name(journal: &Journal) -> String {
    journal
        .outcome
        .map(|outcome| serde_name(&outcome))
        .unwrap_or_else(|| "unfinished".into())
}

pub(super) fn cost_of(journal: &Journal) -> Option<f64> {
    journal.run.as_ref().and_then(|run| run.cost_usd)
}

/// What the journals' runs cost together. Folded from +0.0: an empty `f64` sum is -0.0,
/// which would print as `$-0.0000`.
pub(super) fn spent<'a>(journals: impl IntoIterator<Item = &'a Journal>) -> f64 {
    journals
        .into_iter()
        .filter_map(cost_of)
        .fold(0.0, |sum, cost| sum + cost)
}
