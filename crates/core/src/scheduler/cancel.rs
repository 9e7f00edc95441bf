//! Why a call that was admitted or queued did not run to its end, and the synthetic result
//! the model reads for it, so every tool_use still gets exactly one tool_result (S2).

use serde::Serialize;

/// The three ways the scheduler ends a call early.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Cancellation {
    /// A command a call of the same response ran did not succeed (a Bash call failed);
    /// commands often depend on each other, so the rest of the turn's calls is moot.
    SiblingError { failed_id: String },
    /// A hard stop (SIGINT/SIGTERM): everything running is cancelled, block tools too.
    UserInterrupted,
    /// A queued user message arrived while only `cancel` tools were running.
    Interrupt,
}

impl Cancellation {
    /// What the model reads in place of the call's output.
    pub fn content(&self, started: bool) -> String {
        let what = if started {
            "was cancelled while running"
        } else {
            "was not run"
        };
        match self {
            Cancellation::SiblingError { failed_id } => format!(
                "[sibling_error: this call {what} because the Bash call {failed_id} in the same response failed]"
            ),
            Cancellation::UserInterrupted => {
                format!("[Request interrupted by user: this call {what}]")
            }
            Cancellation::Interrupt => format!(
                "[Request interrupted by a new user message: this call {what}; its result was discarded]"
            ),
        }
    }
}
