//! `fail_on`: which kinds of problem turn a run into a non-zero exit. The vocabulary only;
//! the agent decides which kind each problem is (`agent::verdict`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A kind of problem a task can choose to fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailOn {
    /// A tool call refused by a policy rule, a guardrail, a tool's own check or the mode.
    Denial,
    /// A tool call refused by the auto-mode classifier.
    ClassifierDenial,
    /// A check that did not pass (after its retries).
    Check,
    /// A limit (turns, and later budget or time) that stopped the run.
    Limit,
    /// An MCP server that did not start: the run stops before its first model call.
    McpStart,
    /// A call whose effects exceeded its verdict (the effect ledger).
    Effect,
    /// A model that finished with an empty (or whitespace-only) final answer.
    EmptyAnswer,
}

impl FailOn {
    pub const ALL: [FailOn; 7] = [
        FailOn::Denial,
        FailOn::ClassifierDenial,
        FailOn::Check,
        FailOn::Limit,
        FailOn::McpStart,
        FailOn::Effect,
        FailOn::EmptyAnswer,
    ];

    /// What the kind counts, for the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            FailOn::Denial => {
                "a tool call refused by a policy rule, a guardrail, a tool's own check or the mode"
            }
            FailOn::ClassifierDenial => "a tool call refused by the auto-mode classifier",
            FailOn::Check => "a check that did not pass (after its retries)",
            FailOn::Limit => "a limit (turns, cost, tokens, time) that stopped the run",
            FailOn::McpStart => {
                "an MCP server that did not start — one that failed, or one the task names that \
was held back for an operator's approval or kept off by the policy — unless its entry says \
`optional: true`: the run stops before its first model call"
            }
            FailOn::Effect => {
                "a call that changed more than its verdict allowed, as the effect ledger measured \
it: a read-only call that changed anything, a write outside the paths its decision named, a \
guarded path (`.git/` internals, `.tollgate/`, hooks, …) or a file outside the workspace \
changed, or a call whose effects could not be measured"
            }
            FailOn::EmptyAnswer => {
                "a model that finished with an empty or whitespace-only final answer (outcome \
`empty_answer`); in the default of a prompt run (`-p`, `--prompt-file`) without \
`--output-schema`, not in a task file's default: a task's work is in its files and its \
checks judge it, a prompt run's is its answer. Under `output_schema` the schema judges the \
answer instead"
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Denial => "denial",
            FailOn::ClassifierDenial => "classifier_denial",
            FailOn::Check => "check",
            FailOn::Limit => "limit",
            FailOn::McpStart => "mcp_start",
            FailOn::Effect => "effect",
            FailOn::EmptyAnswer => "empty_answer",
        }
    }
}

impl fmt::Display for FailOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FailOn {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FailOn::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown fail_on kind `{text}`; expected one of: {}",
                    FailOn::ALL.map(FailOn::as_str).join(", ")
                )
            })
    }
}

/// The kinds a run fails on. Default: all of them, so that denied work never passes as
/// success unless the task says so (a task file's default leaves out `empty_answer`:
/// [`FailOnSet::task_default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailOnSet(Vec<FailOn>);

impl FailOnSet {
    pub fn none() -> Self {
        FailOnSet(Vec::new())
    }

    pub fn contains(&self, kind: FailOn) -> bool {
        self.0.contains(&kind)
    }

    pub fn kinds(&self) -> &[FailOn] {
        &self.0
    }

    /// A task file's default: every kind but `empty_answer`. A task's work is the files it
    /// changes, judged by its checks; a model that ends it without a closing word has not
    /// failed it. A prompt run's work is its answer, so its default has every kind.
    pub fn task_default() -> Self {
        FailOn::ALL
            .into_iter()
            .filter(|kind| *kind != FailOn::EmptyAnswer)
            .collect()
    }
}

impl Default for FailOnSet {
    fn default() -> Self {
        FailOnSet(FailOn::ALL.to_vec())
    }
}

impl FromIterator<FailOn> for FailOnSet {
    fn from_iter<I: IntoIterator<Item = FailOn>>(kinds: I) -> Self {
        let mut kinds: Vec<FailOn> = kinds.into_iter().collect();
        kinds.sort();
        kinds.dedup();
        FailOnSet(kinds)
    }
}

impl fmt::Display for FailOnSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|kind| kind.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_keeps_a_sorted_set() {
        let set: FailOnSet = ["limit", "denial", "limit"]
            .into_iter()
            .map(|name| name.parse::<FailOn>().unwrap())
            .collect();
        assert_eq!(set.kinds(), [FailOn::Denial, FailOn::Limit]);
        assert_eq!(set.to_string(), "denial,limit");
        assert!(
            "denials"
                .parse::<FailOn>()
                .unwrap_err()
                .contains("classifier_denial")
        );
        assert_eq!(FailOnSet::default().kinds(), FailOn::ALL);
        assert_eq!(FailOnSet::none().to_string(), "none");
    }
}
