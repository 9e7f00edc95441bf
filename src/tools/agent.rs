//! Agent (S1): the model starts a sub-agent with a prompt. The tool only validates the request
//! and answers the gate (`Agent(explore)` / `Agent(general)` rules); the agent loop runs the
//! sub-agent's own conversation, since tools sit below the loop.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::delegation::{Delegation, SubagentKind};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, parse_input};
use crate::policy::{
    AskCause, PermissionContext, RuleContent, RuleKind, RuleRef, ToolCheck, ToolName,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    description: String,
    prompt: String,
    subagent_type: String,
}

struct AgentInput(Delegation);

pub struct AgentTool;

impl Tool for AgentTool {
    fn name(&self) -> ToolName {
        ToolName::Agent
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Starts a sub-agent with its own context on a self-contained job; its final message comes back as the result. \
             explore: reads and searches only (Read, Glob, Grep, read-only Bash) — use it to look around before you edit. \
             general: your tools except Agent. Give it everything it needs in the prompt: it sees nothing of this conversation.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A few words on what it is for"},
                "prompt": {"type": "string", "description": "The whole job, self-contained"},
                "subagent_type": {"type": "string", "enum": ["explore", "general"]}
            },
            "required": ["description", "prompt", "subagent_type"],
            "additionalProperties": false
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let raw: RawInput = parse_input(&self.name(), input)?;
        let kind = SubagentKind::parse(&raw.subagent_type).ok_or_else(|| {
            ToolError::Invalid(format!(
                "unknown subagent_type `{}`: use explore or general",
                raw.subagent_type
            ))
        })?;
        if raw.prompt.trim().is_empty() {
            return Err(ToolError::Invalid("the sub-agent needs a prompt".into()));
        }
        Ok(Box::new(AgentInput(Delegation {
            kind,
            description: raw.description,
            prompt: raw.prompt,
        })))
    }
}

/// The first `kind` rule whose content names `label` (compared case-insensitively: a deny
/// rule must not miss on case).
fn literal_rule(
    ctx: &PermissionContext,
    tool: &ToolName,
    kind: RuleKind,
    label: &str,
) -> Option<RuleRef> {
    ctx.rules
        .content_rules(kind, tool)
        .find(|rule| {
            matches!(&rule.content, Some(RuleContent::Literal(content))
                if content.trim().eq_ignore_ascii_case(label))
        })
        .map(RuleRef::from)
}

/// `Tool(label)` rules, deny first; with none, an ask that only an allow rule (or the mode)
/// settles: starting a sub-agent spends the run's budget, so it is never allowed unseen.
pub fn check_literal(ctx: &PermissionContext, tool: &ToolName, label: &str) -> ToolCheck {
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Deny, label) {
        return ToolCheck::Deny {
            reason: format!("{tool}({label}) is denied by rule {}", rule.rule),
            rule: Some(rule),
        };
    }
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Ask, label) {
        return ToolCheck::Ask {
            reason: format!("{tool}({label}) needs approval by rule {}", rule.rule),
            cause: AskCause::ContentRule(rule),
        };
    }
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Allow, label) {
        return ToolCheck::Allow {
            reason: format!("{tool}({label}) is allowed by rule {}", rule.rule),
            rule: Some(rule),
            updated_input: None,
        };
    }
    ToolCheck::Passthrough {
        reason: format!("{tool}({label}) needs an allow rule such as {tool}({label})"),
    }
}

impl ToolInput for AgentInput {
    // An explore sub-agent cannot write by construction; a general one may.
    fn is_read_only(&self) -> bool {
        self.0.kind.read_only()
    }

    // Not concurrency-safe: sub-agents share the run's one provider (a script is consumed
    // in order), its budget (each request is admitted against the sum so far, which two
    // sub-agents in parallel would both pass), and its transcript. One at a time keeps all
    // three exact; the sub-agent's own calls still run in parallel where they may.
    fn is_concurrency_safe(&self) -> bool {
        false
    }

    fn is_destructive(&self) -> bool {
        !self.0.kind.read_only()
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_literal(ctx, &ToolName::Agent, self.0.kind.as_str())
    }

    fn delegation(&self) -> Option<&Delegation> {
        Some(&self.0)
    }

    // The loop takes every delegating call before the scheduler would run it; should one
    // reach here, it fails rather than run a sub-agent without its own context.
    fn run<'a>(&'a self, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async {
            Err(ToolError::Failed(
                "a sub-agent runs only inside the agent loop".into(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run with `--nocapture` for the bytes the README quotes (measured as the economy
    /// bench measures every built-in's definition).
    #[test]
    fn the_input_names_a_known_subagent_and_a_prompt() {
        let definition = json!({
            "name": AgentTool.name().to_string(),
            "description": AgentTool.description(),
            "input_schema": AgentTool.input_schema(),
        });
        eprintln!("Agent definition: {} bytes", definition.to_string().len());
        let prepare = |kind: &str, prompt: &str| {
            AgentTool.prepare(&json!({"description": "d", "prompt": prompt, "subagent_type": kind}))
        };
        let explore = prepare("Explore", "look").unwrap();
        assert_eq!(explore.delegation().unwrap().kind, SubagentKind::Explore);
        assert!(explore.is_read_only() && !explore.is_destructive());
        assert!(!explore.is_concurrency_safe());
        let general = prepare("general", "edit").unwrap();
        assert!(!general.is_read_only() && general.is_destructive());
        assert_eq!(
            prepare("general-purpose", "x").err().unwrap().to_string(),
            "unknown subagent_type `general-purpose`: use explore or general"
        );
        assert!(prepare("explore", "  ").is_err());
        assert!(
            AgentTool
                .prepare(&json!({"prompt": "p", "subagent_type": "explore"}))
                .is_err()
        );
    }
}
