//! The conversation as the loop keeps it: append-only messages, each with its JSON encodings
//! made at most once. A message sent once is frozen (S3: every request's messages are the
//! previous request's plus new ones), so its bytes are reused by every later request and the
//! cost of building one no longer grows with the history. Only `last_mut` changes a message,
//! and it drops that message's encodings.

use std::ops::Deref;
use std::sync::OnceLock;

use super::Message;

/// One message's encodings, made on first use.
#[derive(Debug, Default)]
struct Encoded {
    /// The message as a JSON value, encoded: the Messages API's shape. Its length is that of
    /// `serde_json::to_vec(message)` (the same fields, perhaps in another order).
    value: OnceLock<Box<[u8]>>,
    /// The Chat Completions messages it becomes, comma-separated; empty when it becomes none.
    chat: OnceLock<Box<[u8]>>,
}

#[derive(Debug, Default)]
pub struct History {
    messages: Vec<Message>,
    /// Parallel to `messages`.
    encoded: Vec<Encoded>,
}

impl History {
    pub fn new(messages: Vec<Message>) -> History {
        let encoded = messages.iter().map(|_| Encoded::default()).collect();
        History { messages, encoded }
    }

    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
        self.encoded.push(Encoded::default());
    }

    /// The newest message, to change it; its encodings are made again when next needed.
    pub fn last_mut(&mut self) -> Option<&mut Message> {
        if let Some(encoded) = self.encoded.last_mut() {
            *encoded = Encoded::default();
        }
        self.messages.last_mut()
    }

    /// Message `index` encoded as a JSON value, as it sits inside a request's `Value`.
    pub fn value_bytes(&self, index: usize) -> &[u8] {
        let Some(encoded) = self.encoded.get(index) else {
            return &[];
        };
        encoded.value.get_or_init(|| {
            // A message is strings and JSON values: encoding it cannot fail.
            serde_json::to_value(&self.messages[index])
                .and_then(|value| serde_json::to_vec(&value))
                .unwrap_or_default()
                .into_boxed_slice()
        })
    }

    /// Message `index` as chat messages, made by `encode` the first time.
    pub(super) fn chat(&self, index: usize, encode: impl FnOnce(&Message) -> Vec<u8>) -> &[u8] {
        let Some(encoded) = self.encoded.get(index) else {
            return &[];
        };
        encoded
            .chat
            .get_or_init(|| encode(&self.messages[index]).into_boxed_slice())
    }

    /// The length of `serde_json::to_vec(&messages)`, from the messages' own encodings.
    pub fn encoded_len(&self) -> usize {
        let items: usize = (0..self.messages.len())
            .map(|index| self.value_bytes(index).len())
            .sum();
        2 + items + self.messages.len().saturating_sub(1)
    }
}

impl Deref for History {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.messages
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> History {
        History::new(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContentBlock, Role};

    fn history() -> History {
        let mut history = History::new(vec![Message::user_text("go")]);
        history.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Text {
                text: "done \"quoted\"".into(),
            }],
        });
        history
    }

    #[test]
    fn the_size_is_that_of_the_whole_history_encoded() {
        let history = history();
        assert_eq!(
            history.encoded_len(),
            serde_json::to_vec(&history.messages).unwrap().len()
        );
        assert_eq!(History::default().encoded_len(), 2);
    }

    /// A changed message is encoded again; the others keep their bytes.
    #[test]
    fn changing_the_last_message_drops_its_encoding() {
        let mut history = history();
        let first = history.value_bytes(0).as_ptr();
        let before = history.value_bytes(1).to_vec();
        let Some(last) = history.last_mut() else {
            panic!("a message");
        };
        last.content.push(ContentBlock::Text {
            text: "more".into(),
        });
        assert_ne!(history.value_bytes(1), before.as_slice());
        assert_eq!(
            history.value_bytes(1),
            serde_json::to_vec(&serde_json::to_value(&history[1]).unwrap())
                .unwrap()
                .as_slice()
        );
        assert_eq!(history.value_bytes(0).as_ptr(), first);
    }
}
