//! The scripted provider: replays assistant turns written in the task file, offline. It
//! checks the protocol a real API enforces, so a loop bug fails here as it would there.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use super::{
    ContentBlock, ModelRequest, ModelResponse, ProviderError, ReportedUsage, Role, StopReason,
    Usage,
};

/// One block of a scripted assistant turn: `{text: …}` or `{tool_use: {name, input}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptedBlock {
    Text(String),
    ToolUse {
        name: String,
        #[serde(default = "empty_object")]
        input: Value,
    },
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The scripted provider's replies, one assistant turn each, in order: what a task's
/// `model.script:` holds. Kept apart from the model's settings, which real providers share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct ScriptedTurns(pub Vec<Vec<ScriptedBlock>>);

impl ScriptedTurns {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Debug)]
pub struct ScriptedModel {
    turns: Vec<Vec<ScriptedBlock>>,
    next: usize,
}

impl ScriptedModel {
    pub fn new(turns: ScriptedTurns) -> Self {
        ScriptedModel {
            turns: turns.0,
            next: 0,
        }
    }

    /// Goes on after the first `turns` turns (a resumed run had them answered), so its
    /// commands are not run again and its tool_use ids stay unique in the conversation.
    pub fn skip(&mut self, turns: usize) {
        self.next = turns;
    }

    pub fn complete(&mut self, request: &ModelRequest<'_>) -> Result<ModelResponse, ProviderError> {
        check_protocol(request)?;
        let turn = self.next;
        let blocks = self
            .turns
            .get(turn)
            .ok_or(ProviderError::ScriptExhausted(turn + 1))?;
        self.next += 1;
        let content: Vec<ContentBlock> = blocks
            .iter()
            .enumerate()
            .map(|(index, block)| match block {
                ScriptedBlock::Text(text) => ContentBlock::Text { text: text.clone() },
                ScriptedBlock::ToolUse { name, input } => ContentBlock::ToolUse {
                    id: format!("toolu_{:02}_{index:02}", turn + 1),
                    name: name.clone(),
                    input: input.clone(),
                },
            })
            .collect();
        let stop_reason = if content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
        {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        Ok(ModelResponse {
            content,
            stop_reason,
            // A script costs nothing, and that is known.
            usage: ReportedUsage::Reported(Usage::default()),
            malformed_inputs: Vec::new(),
        })
    }
}

/// What the Messages API rejects: roles that do not alternate starting with the user, and a
/// tool_use whose id does not come back exactly once as a tool_result in the next message.
fn check_protocol(request: &ModelRequest<'_>) -> Result<(), ProviderError> {
    let messages = request.messages;
    if messages.first().map(|m| m.role) != Some(Role::User) {
        return Err(ProviderError::Protocol(
            "the first message must be the user's".into(),
        ));
    }
    for (index, pair) in messages.windows(2).enumerate() {
        if pair[0].role == pair[1].role {
            return Err(ProviderError::Protocol(format!(
                "messages {index} and {} have the same role",
                index + 1
            )));
        }
    }
    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let uses: Vec<&str> = message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if uses.is_empty() {
            continue;
        }
        let Some(reply) = messages.get(index + 1) else {
            return Err(ProviderError::Protocol(format!(
                "tool_use {} has no tool_result",
                uses.join(", ")
            )));
        };
        let results: Vec<&str> = reply
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        let unique: HashSet<&str> = results.iter().copied().collect();
        if unique.len() != results.len() || unique != uses.iter().copied().collect() {
            return Err(ProviderError::Protocol(format!(
                "message {} answers tool_use ids [{}] with tool_results [{}]",
                index + 1,
                uses.join(", "),
                results.join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{History, Message};

    fn request(messages: &History) -> ModelRequest<'_> {
        ModelRequest {
            system: "",
            messages,
            tools: &[],
            max_tokens: 100,
        }
    }

    #[test]
    fn replays_turns_and_then_reports_exhaustion() {
        let mut model = ScriptedModel::new(ScriptedTurns(vec![vec![
            ScriptedBlock::Text("hi".into()),
            ScriptedBlock::ToolUse {
                name: "Read".into(),
                input: json!({"file_path": "a"}),
            },
        ]]));
        let history = History::new(vec![Message::user_text("go")]);
        let response = model.complete(&request(&history)).unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert!(
            matches!(&response.content[1], ContentBlock::ToolUse { id, .. } if id == "toolu_01_01")
        );
        let mut history = history;
        history.push(Message {
            role: Role::Assistant,
            content: response.content,
        });
        history.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "toolu_01_01".into(),
                content: "x".into(),
                is_error: false,
            }],
        });
        assert_eq!(
            model.complete(&request(&history)),
            Err(ProviderError::ScriptExhausted(2))
        );
    }

    #[test]
    fn rejects_a_tool_use_without_its_result() {
        let mut model = ScriptedModel::new(ScriptedTurns(vec![vec![ScriptedBlock::Text(
            "done".into(),
        )]]));
        let history = History::new(vec![
            Message::user_text("go"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "Read".into(),
                    input: json!({}),
                }],
            },
            Message::user_text("no result here"),
        ]);
        assert!(matches!(
            model.complete(&request(&history)),
            Err(ProviderError::Protocol(_))
        ));
    }

    #[test]
    fn a_resumed_script_goes_on_at_its_next_turn() {
        let turn = |name: &str| {
            vec![ScriptedBlock::ToolUse {
                name: name.into(),
                input: json!({}),
            }]
        };
        let mut model = ScriptedModel::new(ScriptedTurns(vec![turn("First"), turn("Second")]));
        model.skip(1);
        let history = History::new(vec![Message::user_text("go")]);
        let response = model.complete(&request(&history)).unwrap();
        assert!(matches!(
            &response.content[0],
            ContentBlock::ToolUse { id, name, .. } if id == "toolu_02_00" && name == "Second"
        ));
    }
}
