//! TodoWrite (S3): replaces the run's todo list and answers with a short receipt; the loop
//! re-injects the list as a `<system-reminder>`. Statuses are descriptive: nothing runs.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::run_state::Todo;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input};
use crate::policy::{PermissionContext, ToolCheck, ToolName};

/// More than this is not a plan any more; a bound keeps the reminder small.
const MAX_TODOS: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TodoWriteInput {
    todos: Vec<Todo>,
}

pub struct TodoWriteTool;

impl Tool for TodoWriteTool {
    fn name(&self) -> ToolName {
        ToolName::TodoWrite
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Replaces your todo list (send the whole list). For work of three or more steps: mark an \
             item in_progress before starting it, completed once done. It runs nothing; the list \
             comes back in <system-reminder> blocks.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1, "description": "Imperative: \"Run the tests\""},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "minLength": 1, "description": "While in progress: \"Running the tests\""}
                        },
                        "required": ["content", "status", "activeForm"]
                    }
                }
            },
            "required": ["todos"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let input: TodoWriteInput = parse_input(&self.name(), input)?;
        if input.todos.len() > MAX_TODOS {
            return Err(ToolError::Invalid(format!(
                "{} todos; keep the list to {MAX_TODOS} at most",
                input.todos.len()
            )));
        }
        if input
            .todos
            .iter()
            .any(|todo| todo.content.trim().is_empty() || todo.active_form.trim().is_empty())
        {
            return Err(ToolError::Invalid(
                "every todo needs a non-empty content and activeForm".into(),
            ));
        }
        Ok(Box::new(input))
    }
}

impl ToolInput for TodoWriteInput {
    // It writes only the run's own list, in memory: nothing outside the run changes.
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        ToolCheck::Allow {
            reason: "TodoWrite only updates the run's own todo list; it runs nothing".into(),
            rule: None,
            updated_input: None,
        }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let snapshot = ctx.state.todos.replace(self.todos.clone());
            let (pending, in_progress, completed) = snapshot.counts();
            Ok(ToolOutput::new(format!(
                "Todo list updated: {pending} pending, {in_progress} in progress, {completed} completed. \
                 Go on with the current item."
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lists_are_refused_before_the_gate() {
        let tool = TodoWriteTool;
        let todo = |content: &str| json!({"content": content, "status": "pending", "activeForm": "Doing it"});
        assert!(
            tool.prepare(&json!({"todos": [todo("Run the tests")]}))
                .is_ok()
        );
        assert!(tool.prepare(&json!({"todos": []})).is_ok());
        assert!(matches!(
            tool.prepare(&json!({"todos": [todo(" ")]})),
            Err(ToolError::Invalid(_))
        ));
        assert!(matches!(
            tool.prepare(
                &json!({"todos": [{"content": "x", "status": "started", "activeForm": "x"}]})
            ),
            Err(ToolError::Schema { .. })
        ));
        let many: Vec<Value> = (0..=MAX_TODOS).map(|i| todo(&i.to_string())).collect();
        assert!(matches!(
            tool.prepare(&json!({ "todos": many })),
            Err(ToolError::Invalid(_))
        ));
    }
}
