//! State a run's tools share through their context (S1: tools hold none themselves): the
//! TodoWrite list (S3) and the deferred tools with those ToolSearch has loaded (S7). Cheap to
//! clone; every clone sees the same state.

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::ToolName;

#[derive(Debug, Clone, Default)]
pub struct RunState {
    pub todos: TodoList,
    pub deferred: DeferredTools,
}

/// Where a todo stands. Descriptive only: marking one in_progress executes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    /// The present-continuous form shown while it is in progress ("Running the tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// The list as of one write; `version` counts the writes, so a reader knows it changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoSnapshot {
    pub items: Vec<Todo>,
    pub version: u64,
}

impl TodoSnapshot {
    /// (pending, in progress, completed)
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |status| self.items.iter().filter(|t| t.status == status).count();
        (
            count(TodoStatus::Pending),
            count(TodoStatus::InProgress),
            count(TodoStatus::Completed),
        )
    }
}

/// TodoWrite replaces the whole list each call: a snapshot, not a log, so it stays bounded.
#[derive(Debug, Clone, Default)]
pub struct TodoList(Arc<Mutex<TodoSnapshot>>);

impl TodoList {
    pub fn replace(&self, items: Vec<Todo>) -> TodoSnapshot {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        list.items = items;
        list.version += 1;
        list.clone()
    }

    pub fn snapshot(&self) -> TodoSnapshot {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the model gets of a tool once it is loaded: the same three fields the tools array has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: ToolName,
    pub description: String,
    pub input_schema: Value,
}

impl ToolDefinition {
    /// The one line the system prompt's index gives a deferred tool: its first sentence.
    pub fn summary(&self) -> &str {
        let first = self
            .description
            .find(". ")
            .map_or(self.description.as_str(), |end| &self.description[..=end]);
        first.trim()
    }
}

#[derive(Debug, Default)]
struct Deferred {
    catalogue: Vec<ToolDefinition>,
    /// In the order ToolSearch loaded them: the order they are appended to the tools array.
    loaded: Vec<ToolName>,
}

/// The deferred tools of a run and which of them ToolSearch has loaded.
#[derive(Debug, Clone, Default)]
pub struct DeferredTools(Arc<Mutex<Deferred>>);

impl DeferredTools {
    pub fn new(catalogue: Vec<ToolDefinition>) -> DeferredTools {
        DeferredTools(Arc::new(Mutex::new(Deferred {
            catalogue,
            loaded: Vec::new(),
        })))
    }

    pub fn catalogue(&self) -> Vec<ToolDefinition> {
        self.lock().catalogue.clone()
    }

    pub fn loaded(&self) -> Vec<ToolName> {
        self.lock().loaded.clone()
    }

    /// Replaces the definitions `covered` names with `definitions` (an MCP server's tools
    /// after its list changed); what was loaded stays loaded.
    pub fn replace(&self, covered: &ToolName, definitions: Vec<ToolDefinition>) {
        let mut deferred = self.lock();
        deferred
            .catalogue
            .retain(|definition| !covered.covers(&definition.name));
        deferred.catalogue.extend(definitions);
    }

    /// Marks `names` loaded; from the next request on they are in the tools array.
    pub fn load(&self, names: &[ToolName]) {
        let mut deferred = self.lock();
        for name in names {
            if !deferred.loaded.contains(name) {
                deferred.loaded.push(name.clone());
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deferred> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
