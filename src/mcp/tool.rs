//! An MCP server's tool as a tollgate tool (S1, S9): named `mcp__<server>__<tool>`, gated
//! like any other call. It fails closed: no check of its own allows it (a rule must), and it
//! is read-only (plan mode, concurrency) only when the server says `readOnlyHint` and a
//! policy entry trusts that server's hints.

use std::borrow::Cow;

use serde_json::Value;

use super::connection::{Link, ListedTool};
use crate::policy::{PermissionContext, ToolCheck, ToolName};
use crate::tools::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput,
};

/// The providers' limit on a tool name (OpenAI's is the tighter, 64).
pub const MAX_TOOL_NAME: usize = 64;

pub struct McpTool {
    name: ToolName,
    /// The name as the server knows it.
    remote: String,
    description: String,
    input_schema: Value,
    read_only: bool,
    link: Link,
}

/// `mcp__<server>__<tool>` with the tool's name made of what the APIs accept (letters,
/// digits, `_`, `-`; other characters become `_`) and cut to the length they accept.
pub fn tool_name(server: &str, remote: &str) -> ToolName {
    let room = MAX_TOOL_NAME.saturating_sub("mcp____".len() + server.len());
    let mut tool: String = remote
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(room.max(1))
        .collect();
    if tool.is_empty() {
        tool.push('_');
    }
    ToolName::Mcp {
        server: server.to_string(),
        tool: Some(tool),
    }
}

impl McpTool {
    pub fn new(link: Link, listed: ListedTool, trust_read_only_hint: bool) -> McpTool {
        McpTool {
            name: tool_name(&link.server, &listed.name),
            read_only: listed.read_only_hint && trust_read_only_hint,
            remote: listed.name,
            description: listed.description,
            input_schema: object_schema(listed.input_schema),
            link,
        }
    }
}

/// The APIs want an object schema; a server that lists something else gets the empty one.
fn object_schema(schema: Value) -> Value {
    match schema {
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("object") => {
            Value::Object(map)
        }
        _ => serde_json::json!({"type": "object"}),
    }
}

impl Tool for McpTool {
    fn name(&self) -> ToolName {
        self.name.clone()
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Owned(format!(
            "{} (MCP server `{}`)",
            if self.description.is_empty() {
                &self.remote
            } else {
                &self.description
            },
            self.link.server
        ))
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        // Dropping a call sends `notifications/cancelled`; nothing here is half-written.
        InterruptBehavior::Cancel
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let Value::Object(arguments) = input else {
            return Err(ToolError::Schema {
                tool: self.name.clone(),
                message: "the input must be a JSON object".into(),
            });
        };
        Ok(Box::new(McpCall {
            name: self.name.clone(),
            remote: self.remote.clone(),
            arguments: arguments.clone(),
            read_only: self.read_only,
            link: self.link.clone(),
        }))
    }
}

struct McpCall {
    name: ToolName,
    remote: String,
    arguments: serde_json::Map<String, Value>,
    read_only: bool,
    link: Link,
}

impl ToolInput for McpCall {
    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn is_concurrency_safe(&self) -> bool {
        self.read_only
    }

    fn is_destructive(&self) -> bool {
        !self.read_only
    }

    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        // What a server's tool does is the server's secret: only a rule can allow it.
        ToolCheck::Passthrough {
            reason: format!(
                "{} is a tool of MCP server `{}`; an allow rule ({}, mcp__{}__* or mcp__{}) must name it",
                self.name, self.link.server, self.name, self.link.server, self.link.server
            ),
        }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let call = self.link.call(&self.remote, self.arguments.clone());
            let outcome = tokio::select! {
                outcome = call => outcome,
                _ = ctx.abort.aborted() => {
                    return Err(ToolError::Stopped("the run was interrupted".into()));
                }
            };
            match outcome {
                Ok(outcome) if outcome.is_error => Err(ToolError::Failed(outcome.text)),
                Ok(outcome) => Ok(ToolOutput::new(outcome.text)),
                Err(err) => Err(ToolError::Failed(err.to_string())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_the_apis_accept() {
        // (server, remote, name)
        let table = [
            ("docs", "search", "mcp__docs__search"),
            (
                "docs",
                "get-annotated message",
                "mcp__docs__get-annotated_message",
            ),
            ("docs", "a.b/c", "mcp__docs__a_b_c"),
            ("docs", "", "mcp__docs___"),
        ];
        for (server, remote, expected) in table {
            let name = tool_name(server, remote);
            assert_eq!(name.to_string(), expected);
            assert_eq!(ToolName::parse(expected), Some(name));
        }
        let long = tool_name("docs", &"x".repeat(100)).to_string();
        assert_eq!(long.len(), MAX_TOOL_NAME);
    }

    #[test]
    fn schemas_are_objects() {
        let schema = serde_json::json!({"type": "object", "properties": {"a": {}}});
        assert_eq!(object_schema(schema.clone()), schema);
        assert_eq!(
            object_schema(serde_json::json!({"type": "string"})),
            serde_json::json!({"type": "object"})
        );
    }
}
