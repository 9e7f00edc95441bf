//! Permission modes: the tone of the gate. Parsed once at the edge, from the task, the policy
//! or `--mode`, in Claude Code's spelling.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PermissionMode {
    /// Dangerous actions ask; headless, an ask is a deny.
    #[serde(rename = "default")]
    Default,
    /// File edits inside the workspace are allowed without a rule.
    #[serde(rename = "acceptEdits")]
    AcceptEdits,
    /// Read-only exploration: only read-only tool calls may run.
    #[serde(rename = "plan")]
    Plan,
    /// Allowed unless a deny, an interaction requirement, a content ask rule or a guardrail.
    #[serde(rename = "bypassPermissions")]
    BypassPermissions,
    /// A classifier answers the ask (after a fast path).
    #[serde(rename = "auto")]
    Auto,
    /// Every ask becomes a deny.
    #[serde(rename = "dontAsk")]
    DontAsk,
}

impl PermissionMode {
    pub const ALL: [PermissionMode; 6] = [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
        PermissionMode::BypassPermissions,
        PermissionMode::Auto,
        PermissionMode::DontAsk,
    ];

    /// What the mode does when nobody is there to answer, for the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            PermissionMode::Default => "dangerous actions ask; headless, an ask is a deny",
            PermissionMode::AcceptEdits => {
                "file edits inside the workspace are allowed without a rule; other asks are denied"
            }
            PermissionMode::Plan => "read-only exploration: only read-only tool calls may run",
            PermissionMode::BypassPermissions => {
                "allowed unless a deny rule, an interaction requirement, a content ask rule or a \
guardrail refuses"
            }
            PermissionMode::Auto => {
                "an ask goes to the classifier (after a fast path); deny rules still decide first"
            }
            PermissionMode::DontAsk => "every ask becomes a deny",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Plan => "plan",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::Auto => "auto",
            PermissionMode::DontAsk => "dontAsk",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown permission mode `{given}` (expected one of: default, acceptEdits, plan, bypassPermissions, auto, dontAsk){close}",
    given = .0,
    close = close_mode(.0).map(|close| format!("; did you mean `{close}`?")).unwrap_or_default()
)]
pub struct UnknownMode(pub String);

fn close_mode(given: &str) -> Option<&'static str> {
    crate::config::did_you_mean(
        given,
        PermissionMode::ALL.into_iter().map(PermissionMode::as_str),
    )
}

impl FromStr for PermissionMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PermissionMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_mode() {
        for mode in PermissionMode::ALL {
            assert_eq!(mode.as_str().parse::<PermissionMode>(), Ok(mode));
        }
        assert!("dontask".parse::<PermissionMode>().is_err());
    }
}
