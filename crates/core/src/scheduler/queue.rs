//! User messages that arrive while the run is busy (`--input-format stream-json`): parsed
//! from JSON lines, queued, and announced to the running turn. It never aborts by itself.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::{Arc, Condvar, Mutex};

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum InputLineError {
    #[error("not a JSON object: {0}")]
    Json(String),
    #[error("`type` must be \"user\", found {0}")]
    NotUser(String),
    #[error("a user message needs `message.content` or `content`: a string or text blocks")]
    NoContent,
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("longer than the {} MiB line cap", MAX_INPUT_LINE_BYTES / (1024 * 1024))]
    TooLong,
}

/// The longest stdin line read as a message; the rest of a longer line is skipped unread
/// into memory, so a producer without newlines cannot exhaust it.
pub const MAX_INPUT_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Lines read ahead of the loop. Past this the reader waits (the pipe fills and the producer
/// blocks), so a producer that never stops costs memory for this many messages, no more.
pub const QUEUE_CAPACITY: usize = 64;

/// What the stdin reader hands the loop, in line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueuedInput {
    Message(String),
    /// A line that is not a user message: skipped, and recorded so the loss is visible.
    Skipped {
        line: u64,
        reason: InputLineError,
    },
}

/// Messages in arrival order, shared by the stdin reader and the loop.
#[derive(Debug, Clone)]
pub struct MessageQueue {
    entries: Arc<(Mutex<VecDeque<QueuedInput>>, Condvar)>,
    arrivals: Arc<watch::Sender<u64>>,
}

impl Default for MessageQueue {
    fn default() -> Self {
        MessageQueue {
            entries: Arc::default(),
            arrivals: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// Wakes a turn when a message arrives after the turn began; earlier ones were queued
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
    /// Queues a user message; blocks the (reader's) thread while the queue is full.
    pub fn push(&self, text: String) {
        self.push_entry(QueuedInput::Message(text));
        self.arrivals.send_modify(|count| *count += 1);
    }

    /// Records a skipped line; it wakes nobody, as there is nothing to answer.
    pub fn skip(&self, line: u64, reason: InputLineError) {
        self.push_entry(QueuedInput::Skipped { line, reason });
    }

    fn push_entry(&self, entry: QueuedInput) {
        let (entries, drained) = &*self.entries;
        let Ok(mut queue) = entries.lock() else {
            return;
        };
        while queue.len() >= QUEUE_CAPACITY {
            queue = match drained.wait(queue) {
                Ok(queue) => queue,
                Err(_) => return,
            };
        }
        queue.push_back(entry);
    }

    /// Everything queued, oldest first; the queue is left empty and the reader resumes.
    pub fn drain(&self) -> Vec<QueuedInput> {
        let (entries, drained) = &*self.entries;
        let taken = entries
            .lock()
            .map(|mut queue| queue.drain(..).collect())
            .unwrap_or_default();
        drained.notify_all();
        taken
    }

    /// No user message waiting (skipped lines do not count).
    pub fn is_empty(&self) -> bool {
        self.entries
            .0
            .lock()
            .map(|queue| {
                !queue
                    .iter()
                    .any(|entry| matches!(entry, QueuedInput::Message(_)))
            })
            .unwrap_or(true)
    }

    pub fn arrivals(&self) -> QueuedArrivals {
        let mut rx = self.arrivals.subscribe();
        rx.mark_unchanged();
        QueuedArrivals(rx)
    }
}

/// Reads `input` to its end, a line at a time, into `queue`: a bad line is recorded as
/// skipped and reading goes on; a read error ends input like end of file.
pub fn read_input(queue: &MessageQueue, mut input: impl BufRead) {
    let mut line = Vec::new();
    for number in 1u64.. {
        line.clear();
        let (read, complete) = match read_capped_line(&mut input, &mut line) {
            Ok(read) => read,
            Err(err) => {
                tracing::warn!("stopped reading stdin at line {number}: {err}");
                return;
            }
        };
        if read == 0 {
            return;
        }
        let parsed = if !complete {
            Err(InputLineError::TooLong)
        } else {
            std::str::from_utf8(&line)
                .map_err(|_| InputLineError::NotUtf8)
                .and_then(parse_input_line)
        };
        match parsed {
            Ok(Some(text)) => {
                queue.push(text);
                tracing::info!("queued the user message of stdin line {number}");
            }
            Ok(None) => {}
            Err(reason) => {
                queue.skip(number, reason.clone());
                tracing::warn!("stdin line {number}: skipped: {reason}");
            }
        }
    }
}

/// One line into `line` (without its end), at most `MAX_INPUT_LINE_BYTES` of it kept; the
/// bytes consumed and whether the line fit.
fn read_capped_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
) -> std::io::Result<(usize, bool)> {
    let mut read = 0;
    let mut complete = true;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok((read, complete));
        }
        let (part, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        if complete && line.len() + part.len() <= MAX_INPUT_LINE_BYTES {
            line.extend_from_slice(part);
        } else {
            complete = false;
            line.clear();
        }
        let used = ended.unwrap_or(buffer.len());
        input.consume(used);
        read += used;
        if ended.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok((read, complete));
        }
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

    #[test]
    fn bad_lines_are_recorded_and_reading_goes_on() {
        let queue = MessageQueue::default();
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"type\":\"user\",\"content\":\"one\"}\n");
        input.extend_from_slice(b"\xff\xfe\n");
        input.extend_from_slice(&vec![b'x'; MAX_INPUT_LINE_BYTES + 1]);
        input.extend_from_slice(b"\n\nnope\r\n{\"type\":\"user\",\"content\":\"two\"}");
        read_input(&queue, std::io::BufReader::with_capacity(1000, &input[..]));
        assert_eq!(
            queue.drain(),
            [
                QueuedInput::Message("one".into()),
                QueuedInput::Skipped {
                    line: 2,
                    reason: InputLineError::NotUtf8
                },
                QueuedInput::Skipped {
                    line: 3,
                    reason: InputLineError::TooLong
                },
                QueuedInput::Skipped {
                    line: 5,
                    reason: InputLineError::Json("expected ident at line 1 column 2".into())
                },
                QueuedInput::Message("two".into()),
            ]
        );
    }

    #[test]
    fn a_full_queue_holds_the_reader_until_it_is_drained() {
        let queue = MessageQueue::default();
        let line = b"{\"type\":\"user\",\"content\":\"again\"}\n";
        let input: Vec<u8> = line.repeat(QUEUE_CAPACITY * 3);
        let reader = {
            let queue = queue.clone();
            std::thread::spawn(move || read_input(&queue, &input[..]))
        };
        let mut total = 0;
        while total < QUEUE_CAPACITY * 3 {
            let drained = queue.drain().len();
            assert!(drained <= QUEUE_CAPACITY, "{drained} queued at once");
            total += drained;
            std::thread::yield_now();
        }
        reader.join().unwrap();
        assert_eq!(total, QUEUE_CAPACITY * 3);
    }

    #[tokio::test]
    async fn only_arrivals_after_subscribing_wake_a_turn() {
        let queue = MessageQueue::default();
        queue.push("early".into());
        let mut arrivals = queue.arrivals();
        let woke = tokio::time::timeout(std::time::Duration::ZERO, arrivals.next()).await;
        assert!(woke.is_err(), "an earlier message woke the turn");
        queue.push("late".into());
        arrivals.next().await;
        assert_eq!(
            queue.drain(),
            [
                QueuedInput::Message("early".into()),
                QueuedInput::Message("late".into())
            ]
        );
        assert!(queue.is_empty());
    }
}
