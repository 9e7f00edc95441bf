//! `--output-format json|stream-json`: the transcript's own events on stdout under Claude
//! Code's stream-json names, redacted like the transcript. Stdout carries nothing else then.

use std::io::Write;

use serde_json::Value;

use super::event::Event;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Only the final `result`, as one JSON object.
    Json,
    /// Every streamed event as it happens, one JSON object a line.
    StreamJson,
}

/// Where streamed events go (stdout in the CLI).
pub struct StreamOutput {
    format: StreamFormat,
    out: Box<dyn Write + Send>,
}

impl std::fmt::Debug for StreamOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOutput")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// The stream-json name of a transcript event; `None` for events only the transcript keeps
/// (model requests, hook runs, checks).
pub fn stream_type(event: &Event) -> Option<&'static str> {
    Some(match event {
        Event::RunStarted { .. } => "init",
        Event::AssistantMessage { .. } => "assistant",
        Event::ToolCall { .. } => "tool_use",
        Event::ToolProgress { .. } => "progress",
        Event::PermissionDecision { .. } => "permission_decision",
        Event::ClassifierCall { .. } => "classifier_call",
        Event::ToolResult { .. } => "tool_result",
        Event::NetworkConnection { .. } => "network_connection",
        Event::ApiRetry { .. } => "api_retry",
        Event::ModelFallback { .. } => "model_fallback",
        Event::StreamingOff { .. } => "streaming_off",
        Event::Compaction { .. } => "compaction",
        Event::RunResumed { .. } => "resumed",
        Event::QueuedMessage { .. } => "queued_message",
        Event::InputSkipped { .. } => "input_skipped",
        Event::QueryAborted { .. } => "query_aborted",
        Event::RunFinished { .. } => "result",
        Event::SubagentStarted { .. } => "subagent_started",
        Event::SubagentFinished { .. } => "subagent_finished",
        Event::ModelRequest { .. }
        | Event::ToolStarted { .. }
        | Event::UserMessage { .. }
        | Event::HookRun { .. }
        | Event::EventHooks { .. }
        | Event::CheckResult { .. }
        | Event::CheckFeedback { .. }
        | Event::Reminder { .. }
        | Event::MessageBudget { .. }
        | Event::McpNotification { .. }
        | Event::McpTools { .. }
        | Event::StructuredOutputRejected { .. } => return None,
    })
}

impl StreamOutput {
    pub fn new(format: StreamFormat, out: Box<dyn Write + Send>) -> StreamOutput {
        StreamOutput { format, out }
    }

    /// The line for `event` (the transcript line with its stream name), if this format
    /// streams it; the caller redacts and writes it.
    pub fn line(&self, event: &Event, mut line: Value) -> Option<String> {
        let name = stream_type(event)?;
        if self.format == StreamFormat::Json && name != "result" {
            return None;
        }
        if let Some(object) = line.as_object_mut() {
            object.insert("type".into(), Value::String(name.into()));
            if name == "result" {
                claude_code_result_fields(object);
            }
        }
        serde_json::to_string(&line).ok()
    }

    /// Writes one line; on stdout a CI runner scans it for workflow commands, so a `##[`
    /// inside a string is written with its `[` escaped (`neutral::json_log_line`).
    pub fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        self.out
            .write_all(crate::neutral::json_log_line(line).as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Claude Code's `result` fields beside tollgate's own (docs/output.md lists both), so a
/// script written for `claude -p --output-format json` reads this result too.
fn claude_code_result_fields(object: &mut serde_json::Map<String, Value>) {
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
    let outcome = text("outcome").unwrap_or_default();
    let failed = object
        .get("exit_code")
        .and_then(Value::as_u64)
        .is_none_or(|code| code != 0);
    let subtype = match outcome.as_str() {
        "success" if !failed => "success",
        "max_turns" => "error_max_turns",
        "max_budget_usd" => "error_max_budget_usd",
        "structured_output_invalid" => "error_max_structured_output_retries",
        _ => "error_during_execution",
    };
    let fields = [
        ("subtype", Value::String(subtype.into())),
        ("is_error", Value::Bool(failed)),
        (
            "result",
            Value::String(text("final_message").unwrap_or_default()),
        ),
        (
            "session_id",
            object.get("run_id").cloned().unwrap_or(Value::Null),
        ),
        (
            "num_turns",
            object.get("turns").cloned().unwrap_or(Value::from(0)),
        ),
    ];
    for (key, value) in fields {
        object.insert(key.into(), value);
    }
    // Claude Code's form of a parked run: its stop reason, and the (first) call that waits.
    if outcome == "parked" {
        object.insert("stop_reason".into(), Value::String("tool_deferred".into()));
        let first = object
            .get("deferred")
            .and_then(Value::as_array)
            .and_then(|calls| calls.first())
            .cloned();
        if let Some(call) = first {
            object.insert(
                "deferred_tool_use".into(),
                serde_json::json!({
                    "id": call.get("id"),
                    "name": call.get("tool"),
                    "input": call.get("input"),
                }),
            );
        }
    }
    if let Some(Value::Array(denials)) = object.get_mut("permission_denials") {
        for denial in denials.iter_mut().filter_map(Value::as_object_mut) {
            for (alias, own) in [("tool_name", "tool"), ("tool_use_id", "id")] {
                if let Some(value) = denial.get(own).cloned() {
                    denial.insert(alias.into(), value);
                }
            }
        }
    }
}
