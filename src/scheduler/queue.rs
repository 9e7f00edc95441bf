//! User messages that arrive while the run is busy (`--input-format stream-json`): parsed
//! from JSON lines, queued, and announced to the running batch. It never aborts by itself.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputLineError {
    #[error("not a JSON object: {0}")]
    Json(String),
    #[error("`type` must be \"user\", found {0}")]
    NotUser(String),
    #[error("a user message needs `message.content` or `content`: a string or text blocks")]
    NoContent,
}

/// Messages in arrival order, shared by the stdin reader and the loop.
#[derive(Debug, Clone)]
pub struct MessageQueue {
    messages: Arc<Mutex<VecDeque<String>>>,
    arrivals: Arc<watch::Sender<u64>>,
}

impl Default for MessageQueue {
    fn default() -> Self {
        MessageQueue {
            messages: Arc::default(),
            arrivals: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// Wakes a batch when a message arrives after the batch began; earlier ones were queued
/// while no tool ran, so they wait for the next API round.
#[derive(Debug)]
pub struct QueuedArrivals(watch::Receiver<u64>);

impl QueuedArrivals {
    pub async fn next(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl MessageQueue {
    pub fn push(&self, text: String) {
        if let Ok(mut messages) = self.messages.lock() {
            messages.push_back(text);
        }
        self.arrivals.send_modify(|count| *count += 1);
    }

    /// Every queued message, oldest first; the queue is left empty.
    pub fn drain(&self) -> Vec<String> {
        self.messages
            .lock()
            .map(|mut messages| messages.drain(..).collect())
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.messages
            .lock()
            .map(|messages| messages.is_empty())
            .unwrap_or(true)
    }

    pub fn arrivals(&self) -> QueuedArrivals {
        let mut rx = self.arrivals.subscribe();
        rx.mark_unchanged();
        QueuedArrivals(rx)
    }
}

#[derive(Deserialize)]
struct InputLine {
    #[serde(rename = "type")]
    kind: String,
    message: Option<InputMessage>,
    content: Option<Value>,
}

#[derive(Deserialize)]
struct InputMessage {
    content: Value,
}

/// One stdin line: Claude Code's `{"type":"user","message":{"role":"user","content":…}}`
/// or the short `{"type":"user","content":…}`; content is a string or text blocks. A blank
/// line is `None`.
pub fn parse_input_line(line: &str) -> Result<Option<String>, InputLineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let parsed: InputLine =
        serde_json::from_str(line).map_err(|err| InputLineError::Json(err.to_string()))?;
    if parsed.kind != "user" {
        return Err(InputLineError::NotUser(parsed.kind));
    }
    let content = parsed
        .message
        .map(|message| message.content)
        .or(parsed.content)
        .ok_or(InputLineError::NoContent)?;
    let text = match content {
        Value::String(text) => text,
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Err(InputLineError::NoContent),
    };
    if text.trim().is_empty() {
        return Err(InputLineError::NoContent);
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_line_shapes_and_text_blocks_parse() {
        let long = r#"{"type":"user","message":{"role":"user","content":"stop and summarise"}}"#;
        assert_eq!(
            parse_input_line(long),
            Ok(Some("stop and summarise".into()))
        );
        let short = r#"{"type":"user","content":"hi"}"#;
        assert_eq!(parse_input_line(short), Ok(Some("hi".into())));
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}}"#;
        assert_eq!(parse_input_line(blocks), Ok(Some("a\nb".into())));
        assert_eq!(parse_input_line("  "), Ok(None));
    }

    #[test]
    fn other_lines_are_refused_with_a_reason() {
        assert!(matches!(
            parse_input_line("nope"),
            Err(InputLineError::Json(_))
        ));
        assert_eq!(
            parse_input_line(r#"{"type":"control","content":"x"}"#),
            Err(InputLineError::NotUser("control".into()))
        );
        assert_eq!(
            parse_input_line(r#"{"type":"user"}"#),
            Err(InputLineError::NoContent)
        );
    }

    #[tokio::test]
    async fn only_arrivals_after_subscribing_wake_a_batch() {
        let queue = MessageQueue::default();
        queue.push("early".into());
        let mut arrivals = queue.arrivals();
        let woke = tokio::time::timeout(std::time::Duration::ZERO, arrivals.next()).await;
        assert!(woke.is_err(), "an earlier message woke the batch");
        queue.push("late".into());
        arrivals.next().await;
        assert_eq!(queue.drain(), ["early", "late"]);
        assert!(queue.is_empty());
    }
}
