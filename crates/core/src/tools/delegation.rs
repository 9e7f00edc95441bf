//! Calls the agent loop runs as a nested conversation instead of as a tool (Agent, and a Skill
//! in agent mode): which sub-agent (a built-in kind, or a custom agent from an agent file), and
//! what it is asked. Tools only describe the delegation; the loop, which sits above them, runs
//! it with its own context.

use std::path::PathBuf;
use std::sync::Arc;

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

/// A custom sub-agent, from an agent file (`.claude/agents/*.md`, a task's `agents:`, a
/// plugin's `agents/`): a general sub-agent with its own instructions whose tools can only
/// narrow the parent's. The file is text for the model: it names tools to keep, never a rule,
/// a mode or a hook (those keys are left aside when it is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    /// Lower-case letters, digits and `-`; what `subagent_type` and `Agent(name)` rules say.
    pub name: String,
    pub description: String,
    /// The tools it keeps of the parent's pool; `None` keeps them all (as `general`).
    pub tools: Option<Vec<ToolName>>,
    /// Tools it never has, whatever `tools` says.
    pub disallowed: Vec<ToolName>,
    /// Its instructions: the file's body, said after the run's system prompt.
    pub prompt: String,
    /// At most this many turns, within the run's `subagents.max_turns`.
    pub max_turns: Option<u32>,
    /// The file it came from.
    pub file: PathBuf,
}

impl AgentProfile {
    /// Whether a tool of the parent's pool stays in this agent's: a general sub-agent's tool,
    /// named by `tools` (when it has the key) and not by `disallowedTools`. ToolSearch stays
    /// while any kept tool may be deferred (an MCP one), since it only loads kept tools.
    pub fn may_use(&self, tool: &ToolName) -> bool {
        if !SubagentKind::General.may_use(tool)
            || self
                .disallowed
                .iter()
                .any(|named| named.covers_in_any_case(tool))
        {
            return false;
        }
        match &self.tools {
            None => true,
            Some(kept) if *tool == ToolName::ToolSearch => kept
                .iter()
                .any(|named| matches!(named, ToolName::Mcp { .. } | ToolName::ToolSearch)),
            Some(kept) => kept.iter().any(|named| named.covers(tool)),
        }
    }
}

/// The sub-agent a conversation is: its kind and, for a custom agent, its profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subagent {
    pub kind: SubagentKind,
    pub custom: Option<Arc<AgentProfile>>,
}

impl Subagent {
    pub fn builtin(kind: SubagentKind) -> Subagent {
        Subagent { kind, custom: None }
    }

    /// A custom agent runs as a general sub-agent, narrowed by its profile.
    pub fn custom(profile: Arc<AgentProfile>) -> Subagent {
        Subagent {
            kind: SubagentKind::General,
            custom: Some(profile),
        }
    }

    /// As `subagent_type` and `Agent(…)` rules name it.
    pub fn name(&self) -> &str {
        match &self.custom {
            Some(profile) => &profile.name,
            None => self.kind.as_str(),
        }
    }

    /// Whether a tool of the parent's pool is in this sub-agent's pool.
    pub fn may_use(&self, tool: &ToolName) -> bool {
        self.kind.may_use(tool)
            && self
                .custom
                .as_ref()
                .is_none_or(|profile| profile.may_use(tool))
    }

    pub fn read_only(&self) -> bool {
        self.kind.read_only()
    }
}

impl std::fmt::Display for Subagent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a delegating call asks of its sub-agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub agent: Subagent,
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

    #[test]
    fn a_custom_agent_only_narrows_the_general_pool() {
        let named = |names: &[&str]| -> Vec<ToolName> {
            names.iter().map(|n| ToolName::parse(n).unwrap()).collect()
        };
        let profile = |tools: Option<&[&str]>, disallowed: &[&str]| {
            Subagent::custom(Arc::new(AgentProfile {
                name: "reviewer".into(),
                description: "d".into(),
                tools: tools.map(named),
                disallowed: named(disallowed),
                prompt: "p".into(),
                max_turns: None,
                file: PathBuf::from("a.md"),
            }))
        };
        let pool = named(&[
            "Read",
            "Edit",
            "Bash",
            "Agent",
            "Skill",
            "ToolSearch",
            "mcp__gh__issue",
            "mcp__db__q",
        ]);
        let kept = |agent: &Subagent| -> Vec<String> {
            pool.iter()
                .filter(|tool| agent.may_use(tool))
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            kept(&profile(None, &[])),
            [
                "Read",
                "Edit",
                "Bash",
                "ToolSearch",
                "mcp__gh__issue",
                "mcp__db__q"
            ]
        );
        // Naming Agent or Skill does not give a sub-agent a sub-agent.
        assert_eq!(
            kept(&profile(Some(&["Read", "Agent", "Skill"]), &[])),
            ["Read"]
        );
        assert_eq!(
            kept(&profile(Some(&["Read", "mcp__gh"]), &[])),
            ["Read", "ToolSearch", "mcp__gh__issue"]
        );
        assert_eq!(
            kept(&profile(None, &["Bash", "mcp__GH"])),
            ["Read", "Edit", "ToolSearch", "mcp__db__q"]
        );
        assert_eq!(kept(&profile(Some(&[]), &[])), Vec::<String>::new());
    }
}
