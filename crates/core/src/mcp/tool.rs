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

/// The providers' limit on a tool name (OpenAI's is the tighter, 64); the policy's, since
/// its deny rules must still match a name cut to it.
pub use crate::policy::MAX_TOOL_NAME;

pub struct McpTool {
    name: ToolName,
    server: String,
    /// The name as the server knows it.
    remote: String,
    description: String,
    input_schema: Value,
    read_only: bool,
    /// `None` for a stand-in that is only gated (`check`, policy self-tests), never run.
    link: Option<Link>,
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
            server: link.server.clone(),
            read_only: listed.read_only_hint && trust_read_only_hint,
            remote: listed.name,
            description: listed.description,
            input_schema: object_schema(listed.input_schema),
            link: Some(link),
        }
    }
}

/// A tool of that name as the gate sees it without its server (`tollgate check`, a policy's
/// `tests:`): any input, never read-only (no hint can be known), no check of its own that
/// allows — so the rules decide exactly as in a run. `None` for a name that is no MCP tool.
pub fn stand_in(name: &ToolName) -> Option<std::sync::Arc<dyn Tool>> {
    let ToolName::Mcp {
        server,
        tool: Some(tool),
    } = name
    else {
        return None;
    };
    Some(std::sync::Arc::new(McpTool {
        name: name.clone(),
        server: server.clone(),
        remote: tool.clone(),
        description: String::new(),
        input_schema: serde_json::json!({"type": "object"}),
        read_only: false,
        link: None,
    }))
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
            self.server
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
        // No input is no arguments (`tools/call` makes them optional; a policy test may omit
        // them); anything else must be an object.
        let arguments = match input {
            Value::Object(arguments) => arguments.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(ToolError::Schema {
                    tool: self.name.clone(),
                    message: "the input must be a JSON object".into(),
                });
            }
        };
        Ok(Box::new(McpCall {
            name: self.name.clone(),
            server: self.server.clone(),
            remote: self.remote.clone(),
            arguments,
            read_only: self.read_only,
            link: self.link.clone(),
        }))
    }
}

struct McpCall {
    name: ToolName,
    server: String,
    remote: String,
    arguments: serde_json::Map<String, Value>,
    read_only: bool,
    link: Option<Link>,
}

impl ToolInput for McpCall {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        self.read_only
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        self.read_only
    }

    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        // What a server's tool does is the server's secret: only a rule can allow it.
        ToolCheck::Passthrough {
            reason: format!(
                "{} is a tool of MCP server `{}`; an allow rule ({}, mcp__{}__* or mcp__{}) must name it",
                self.name, self.server, self.name, self.server, self.server
            ),
        }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(link) = &self.link else {
                return Err(ToolError::Failed(format!(
                    "{} has no server here: it can be gated, not run",
                    self.name
                )));
            };
            let call = link.call(&self.remote, self.arguments.clone());
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
