//! What a batch's journals add up to, as every report of the batch states it: each
//! repository's outcome name, cost, branch and reason, the total spent, the repositories not
//! started.

use super::journal::{Journal, RepoOutcome};
use crate::config::serde_name;

/// The repositories the batch did not start, with why (the cost limit, say).
pub(super) fn not_started<'a>(
    journals: impl IntoIterator<Item = &'a Journal>,
) -> Vec<(&'a str, &'a str)> {
    journals
        .into_iter()
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

/// The branch, only when the run's change was committed on it: a repository that changed
/// nothing has no branch to look at.
pub(super) fn committed_branch(journal: &Journal) -> Option<&str> {
    journal.commit.as_ref().and(journal.branch.as_deref())
}

/// A run's cost as a table shows it: `unknown` when the model had no price (never a zero
/// that was not measured), `≈` when the provider did not report the usage it is priced on,
/// empty when nothing ran.
pub(super) fn cost_cell(journal: &Journal) -> String {
    match &journal.run {
        None => String::new(),
        Some(run) => match run.cost_usd {
            None => "unknown".to_string(),
            Some(cost) if run.usage_estimated => format!("≈{cost:.4}"),
            Some(cost) => format!("{cost:.4}"),
        },
    }
}

/// What the runs cost together, said honestly: estimated when some usage was, and how many
/// runs' cost is unknown (a model with no price).
pub(super) fn spent_sentence<'a>(
    journals: impl IntoIterator<Item = &'a Journal> + Clone,
) -> String {
    let total = spent(journals.clone());
    let runs: Vec<_> = journals
        .into_iter()
        .filter_map(|journal| journal.run.as_ref())
        .collect();
    let unknown = runs.iter().filter(|run| run.cost_usd.is_none()).count();
    let estimated = runs.iter().any(|run| run.usage_estimated);
    let mut sentence = format!("{}${total:.4} spent", if estimated { "≈" } else { "" });
    if estimated {
        sentence.push_str(" (some usage estimated: the provider did not report it)");
    }
    if unknown > 0 {
        sentence.push_str(&format!(
            "; cost unknown for {} (no price for the model)",
            crate::base::counted(unknown, "run")
        ));
    }
    sentence
}

/// Why a repository ended as it did: the failed check or the run's outcome, and the first
/// denial; for one not started, why not.
pub(super) fn reason(journal: &Journal) -> String {
    let denial = journal
        .run
        .as_ref()
        .and_then(|run| run.denial.as_deref())
        .map(|denial| format!("denied: {denial}"));
    let own = journal
        .reason
        .as_deref()
        .filter(|_| journal.outcome != Some(RepoOutcome::Changed))
        .map(|reason| reason.replace('\n', " "));
    let parts: Vec<String> = own.into_iter().chain(denial).collect();
    parts.join(" · ")
}

/// What the journals' runs cost together. Folded from +0.0: an empty `f64` sum is -0.0,
/// which would print as `$-0.0000`.
pub(super) fn spent<'a>(journals: impl IntoIterator<Item = &'a Journal>) -> f64 {
    journals
        .into_iter()
        .filter_map(cost_of)
        .fold(0.0, |sum, cost| sum + cost)
}
