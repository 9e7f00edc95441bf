//! The tools of one turn, keyed by name: built each turn from the task's tools (and, as the
//! run learns of more — MCP servers, ToolSearch — those too), so the pool may grow between turns.

use std::collections::HashMap;
use std::sync::Arc;

use super::Tool;
use crate::policy::ToolName;

#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// In the order they are offered to the model.
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<ToolName, usize>,
}

impl ToolRegistry {
    /// The first tool of a name wins: a later one cannot shadow a built-in.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        for tool in tools {
            let name = tool.name();
            if !registry.by_name.contains_key(&name) {
                registry.by_name.insert(name, registry.tools.len());
                registry.tools.push(tool);
            }
        }
        registry
    }

    pub fn get(&self, name: &ToolName) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// "Read, Write, Bash" — for the model, when it calls a tool that is not there.
    pub fn names(&self) -> String {
        self.tools
            .iter()
            .map(|tool| tool.name().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin;

    #[test]
    fn lookup_by_name_keeps_the_offer_order_and_the_first_of_a_name() {
        let tool = |name: ToolName| builtin(&name).unwrap();
        let registry = ToolRegistry::new([
            tool(ToolName::Read),
            tool(ToolName::Bash),
            tool(ToolName::Read),
        ]);
        assert_eq!(registry.names(), "Read, Bash");
        assert!(registry.get(&ToolName::Bash).is_some());
        assert!(registry.get(&ToolName::Write).is_none());
        let grown = ToolRegistry::new(
            registry
                .tools()
                .iter()
                .cloned()
                .chain([tool(ToolName::Write)]),
        );
        assert_eq!(grown.names(), "Read, Bash, Write");
    }
}
