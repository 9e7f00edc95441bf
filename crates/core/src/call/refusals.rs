//! Calls the gate refused, kept for the rest of the run: a call the model repeats verbatim
//! (same conversation, tool and input) is answered with the earlier refusal instead of being
//! judged again (`Unreached::Repeated`), and still counts as a denial. Never used to allow
//! anything.

use serde_json::Value;

use super::Unreached;
use crate::policy::{PermissionDecision, ToolName};
use crate::tools::Subagent;

#[derive(Debug, Default)]
pub struct Refusals {
    refused: Vec<Refused>,
}

#[derive(Debug)]
struct Refused {
    /// Whose conversation: an explore sub-agent refuses what the run itself may do.
    scope: Option<Subagent>,
    tool: ToolName,
    input: Value,
    decision: PermissionDecision,
}

impl Refusals {
    pub fn remember(
        &mut self,
        scope: Option<&Subagent>,
        tool: &ToolName,
        input: &Value,
        decision: &PermissionDecision,
    ) {
        if self.earlier(scope, tool, input).is_none() {
            self.refused.push(Refused {
                scope: scope.cloned(),
                tool: tool.clone(),
                input: input.clone(),
                decision: decision.clone(),
            });
        }
    }

    /// The run's own refused calls, one line each (tool, input, reason), for a compacted
    /// history: the model keeps knowing what not to try again.
    pub fn lines(&self, max: usize) -> Vec<String> {
        self.refused
            .iter()
            .filter(|refused| refused.scope.is_none())
            .take(max)
            .map(|refused| {
                format!(
                    "{} {}: {}",
                    refused.tool,
                    crate::base::truncate_middle(&refused.input.to_string(), 200),
                    refused.decision.reason
                )
            })
            .collect()
    }

    /// A repeat of a refused call: answered with that refusal instead of being judged again.
    pub fn repeat(
        &self,
        scope: Option<&Subagent>,
        tool: &ToolName,
        input: &Value,
    ) -> Option<Unreached> {
        self.earlier(scope, tool, input)
            .cloned()
            .map(Unreached::Repeated)
    }

    /// The refusal of an earlier call identical to this one. Inputs compare as JSON values,
    /// so the order of an object's keys does not make a call new.
    fn earlier(
        &self,
        scope: Option<&Subagent>,
        tool: &ToolName,
        input: &Value,
    ) -> Option<&PermissionDecision> {
        self.refused
            .iter()
            .find(|refused| {
                refused.scope.as_ref() == scope && refused.tool == *tool && refused.input == *input
            })
            .map(|refused| &refused.decision)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{Decision, Layer, Step};

    fn denied(reason: &str) -> PermissionDecision {
        PermissionDecision {
            decision: Decision::Deny,
            step: Step::ToolDeny,
            layer: Layer::Rule,
            rule: None,
            reason: reason.into(),
            updated_input: None,
            asked: false,
        }
    }

    #[test]
    fn only_the_same_call_in_the_same_conversation_is_a_repeat() {
        let mut refusals = Refusals::default();
        let input = json!({"command": "rm -rf build", "timeout": 5});
        refusals.remember(None, &ToolName::Bash, &input, &denied("no rm"));
        let reordered: Value =
            serde_json::from_str(r#"{"timeout": 5, "command": "rm -rf build"}"#).unwrap();
        assert_eq!(
            refusals
                .earlier(None, &ToolName::Bash, &reordered)
                .map(|d| d.reason.as_str()),
            Some("no rm")
        );
        assert!(
            refusals
                .earlier(None, &ToolName::Bash, &json!({"command": "rm -rf build "}))
                .is_none()
        );
        assert!(refusals.earlier(None, &ToolName::Read, &input).is_none());
        assert!(
            refusals
                .earlier(
                    Some(&Subagent::builtin(crate::tools::SubagentKind::Explore)),
                    &ToolName::Bash,
                    &input
                )
                .is_none()
        );
    }
}
