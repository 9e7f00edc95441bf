//! The pool: which tools a run or a sub-agent offers the model (S1, S7). It owns the
//! assembly — the task's tools and the MCP servers', each deferred or not; ToolSearch when
//! some are deferred; the deferred ones ToolSearch loaded, in the order it loaded them; a
//! sub-agent's narrower set — and what the model is told of them. Rebuilt each turn by the
//! loop, which owns none of this.

use std::sync::Arc;

use crate::model::ToolSpec;
use crate::policy::ToolName;

use super::{Subagent, Tool, ToolDefinition, ToolRegistry};

/// The tools present for a run, each with whether it is deferred: the task's first, then
/// the MCP servers'.
pub struct Pool<'t> {
    tools: Vec<(&'t Arc<dyn Tool>, bool)>,
}

impl<'t> Pool<'t> {
    /// `deferred` names the task's tools offered by name only; an MCP tool says it itself.
    pub fn new(
        tools: &'t [Arc<dyn Tool>],
        deferred: &[ToolName],
        mcp: impl Iterator<Item = (&'t Arc<dyn Tool>, bool)>,
    ) -> Pool<'t> {
        Pool {
            tools: tools
                .iter()
                .map(|tool| (tool, deferred.contains(&tool.name())))
                .chain(mcp)
                .collect(),
        }
    }

    /// The definitions of the deferred tools, for ToolSearch and the system prompt's index.
    pub fn deferred_catalogue(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .filter(|(_, deferred)| *deferred)
            .map(|(tool, _)| tool_definition(tool))
            .collect()
    }

    /// This turn's tools: those not deferred, ToolSearch when some are, then the deferred
    /// tools ToolSearch has loaded, in the order it loaded them (S7), so the tools array
    /// sent before stays a prefix of the next one. A sub-agent gets the part of that it may
    /// use.
    pub fn offered(&self, loaded: &[ToolName], subagent: Option<&Subagent>) -> ToolRegistry {
        let any_deferred = self.tools.iter().any(|(_, deferred)| *deferred);
        let search = any_deferred
            .then(|| super::builtin(&ToolName::ToolSearch))
            .flatten();
        let immediate = self
            .tools
            .iter()
            .filter(|(tool, deferred)| !deferred && tool.name() != ToolName::ToolSearch)
            .map(|(tool, _)| Arc::clone(tool));
        let loaded = loaded.iter().filter_map(|name| {
            self.tools
                .iter()
                .find(|(tool, deferred)| *deferred && tool.name() == *name)
                .map(|(tool, _)| Arc::clone(tool))
        });
        let offered = immediate.chain(search).chain(loaded);
        match subagent {
            None => ToolRegistry::new(offered),
            Some(agent) => ToolRegistry::new(offered.filter(|tool| agent.may_use(&tool.name()))),
        }
    }
}

/// What the model is told of a tool once it is loaded.
pub fn tool_definition(tool: &Arc<dyn Tool>) -> ToolDefinition {
    ToolDefinition {
        name: tool.name(),
        description: tool.description().into_owned(),
        input_schema: tool.input_schema(),
    }
}

/// The tools array of one request, in the registry's offer order.
pub fn tool_specs(registry: &ToolRegistry) -> Vec<ToolSpec> {
    registry
        .tools()
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_string(),
            description: tool.description().into_owned(),
            input_schema: tool.input_schema(),
        })
        .collect()
}
