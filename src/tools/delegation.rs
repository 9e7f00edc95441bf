//! Calls the agent loop runs as a nested conversation instead of as a tool (Agent, and a Skill
//! in agent mode): which kind of sub-agent, and what it is asked. Tools only describe the
//! delegation; the loop, which sits above them, runs it with its own context.

use serde::{Deserialize, Serialize};

use crate::policy::ToolName;

/// The sub-agents tollgate starts. Which tools each may have is decided here, once, so the
/// pool it is offered and the refusal of a forged call agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubagentKind {
    /// Read-only: Read, Glob, Grep, and Bash only where the analyser proves the command
    /// read-only. Enforced by its pool and by the loop, not by its prompt.
    Explore,
    /// The parent's tools except Agent and Skill: a sub-agent starts no sub-agent.
    General,
}

impl SubagentKind {
    pub const ALL: [SubagentKind; 2] = [SubagentKind::Explore, SubagentKind::General];

    /// As the model and `Agent(…)` rules write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentKind::Explore => "explore",
            SubagentKind::General => "general",
        }
    }

    /// Case-insensitive, so a rule written `Agent(Explore)` (Claude Code's spelling) still
    /// names the explore sub-agent: a deny rule must never miss on case.
    pub fn parse(text: &str) -> Option<SubagentKind> {
        SubagentKind::ALL
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether a tool of the parent's pool is in this sub-agent's pool.
    pub fn may_use(self, tool: &ToolName) -> bool {
        match self {
            SubagentKind::Explore => matches!(
                tool,
                ToolName::Read | ToolName::Glob | ToolName::Grep | ToolName::Bash
            ),
            SubagentKind::General => !matches!(tool, ToolName::Agent | ToolName::Skill),
        }
    }

    /// Whether every call the sub-agent makes must be read-only (Bash's analyser decides
    /// for a command; a call that is not proven read-only is refused).
    pub fn read_only(self) -> bool {
        self == SubagentKind::Explore
    }
}

impl std::fmt::Display for SubagentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a delegating call asks of its sub-agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub kind: SubagentKind,
    /// The short label the model gave (or the skill's name), for the transcript.
    pub description: String,
    /// The sub-agent's first user message.
    pub prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explore_may_use_only_the_reading_tools_and_general_no_delegating_one() {
        let explore: Vec<ToolName> = ToolName::BUILTINS
            .into_iter()
            .filter(|tool| SubagentKind::Explore.may_use(tool))
            .collect();
        assert_eq!(
            explore,
            [
                ToolName::Read,
                ToolName::Glob,
                ToolName::Grep,
                ToolName::Bash
            ]
        );
        let general: Vec<ToolName> = ToolName::BUILTINS
            .into_iter()
            .filter(|tool| !SubagentKind::General.may_use(tool))
            .collect();
        assert_eq!(general, [ToolName::Agent, ToolName::Skill]);
        assert_eq!(SubagentKind::parse("Explore"), Some(SubagentKind::Explore));
        assert_eq!(SubagentKind::parse("general-purpose"), None);
    }
}
