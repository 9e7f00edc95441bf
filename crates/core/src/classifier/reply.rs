//! The classifier's answer, parsed strictly: one JSON object `{decision, reason, risk}` with
//! nothing missing and nothing extra. Whatever else a model says is not an answer, and the
//! caller turns it into a deny.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    Allow,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    Low,
    Medium,
    High,
}

/// A well-formed answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub decision: Ruling,
    pub reason: String,
    pub risk: Risk,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("the classifier's answer is not the JSON verdict asked for ({0})")]
    Malformed(String),
    #[error("the classifier's verdict gives no reason")]
    NoReason,
}

/// Parses the model's whole text. Surrounding whitespace is the only slack: prose around the
/// object, a code fence, a second object or a key given twice (at any depth) is refused,
/// since a judge that cannot follow the format cannot be trusted to have followed the rules
/// either.
pub fn parse_reply(text: &str) -> Result<Reply, ReplyError> {
    let reply: Reply = crate::base::from_str_unique_keys(text.trim())
        .map_err(|err| ReplyError::Malformed(err.to_string()))?;
    if reply.reason.trim().is_empty() {
        return Err(ReplyError::NoReason);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_shape_is_a_reply() {
        let ok = parse_reply(
            " {\"decision\": \"deny\", \"reason\": \"pushes to a remote\", \"risk\": \"high\"}\n",
        )
        .unwrap();
        assert_eq!(
            ok,
            Reply {
                decision: Ruling::Deny,
                reason: "pushes to a remote".into(),
                risk: Risk::High,
            }
        );
        for bad in [
            "",
            "allow",
            "Sure! {\"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"low\"}",
            "```json\n{\"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"low\"}\n```",
            "{\"decision\": \"allow\", \"reason\": \"r\"}",
            "{\"decision\": \"maybe\", \"reason\": \"r\", \"risk\": \"low\"}",
            "{\"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"none\"}",
            "{\"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"low\", \"override\": true}",
            "{\"decision\": \"allow\", \"reason\": 3, \"risk\": \"low\"}",
            "{\"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"low\"} {}",
            "{\"decision\": \"deny\", \"decision\": \"allow\", \"reason\": \"r\", \"risk\": \"low\"}",
            "{\"decision\": \"allow\", \"reason\": \"r\", \"reason\": \"s\", \"risk\": \"low\"}",
        ] {
            assert!(
                matches!(parse_reply(bad), Err(ReplyError::Malformed(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_reply("{\"decision\": \"allow\", \"reason\": \" \", \"risk\": \"low\"}"),
            Err(ReplyError::NoReason)
        );
    }
}
