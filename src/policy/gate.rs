//! The permission gate (S4): the short-circuit pipeline 1a→3 over one tool call, then the
//! mode's transform of an ask. Headless, nobody answers an ask, so every ask ends as a deny.

use serde_json::Value;

use super::decision::{AskCause, Decision, Layer, PermissionDecision, RuleRef, Step, ToolCheck};
use super::rule::RuleKind;
use super::{PermissionContext, PermissionMode};
use crate::tools::Tool;

/// Tools auto mode lets through without a classifier: they only read.
const AUTO_SAFE_TOOLS: [&str; 5] = ["Read", "Glob", "Grep", "TodoWrite", "ToolSearch"];

/// An ask on its way to the mode transform.
struct PendingAsk {
    step: Step,
    layer: Layer,
    rule: Option<RuleRef>,
    reason: String,
    /// 1b/1e/1f/1g asks are answered by a person only: no mode, fast path or bypass turns
    /// them into allow.
    immune: bool,
}

pub fn decide(tool: &dyn Tool, input: &Value, ctx: &PermissionContext) -> PermissionDecision {
    let outcome = pipeline(tool, input, ctx);
    let decision = match outcome {
        Ok(decision) => decision,
        Err(ask) => transform_ask(tool, input, ctx, ask),
    };
    enforce_plan(tool, input, ctx, decision)
}

/// Steps 1a→3. `Err` carries an ask for the mode to answer.
fn pipeline(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
) -> Result<PermissionDecision, PendingAsk> {
    let name = tool.name();
    if let Some(rule) = ctx.rules.whole_tool(RuleKind::Deny, &name) {
        return Ok(deny(
            Step::WholeToolDeny,
            Layer::Rule,
            Some(rule.into()),
            format!("{name} is denied by rule {}", rule.text),
        ));
    }
    if let Some(rule) = ctx.rules.whole_tool(RuleKind::Ask, &name) {
        return Err(PendingAsk {
            step: Step::WholeToolAsk,
            layer: Layer::Rule,
            rule: Some(rule.into()),
            reason: format!("{name} needs approval by rule {}", rule.text),
            immune: true,
        });
    }
    let check = tool.check_permissions(input, ctx);
    let (step, reason) = match check {
        ToolCheck::Deny { reason, rule } => {
            let layer = if rule.is_some() {
                Layer::Rule
            } else {
                Layer::Tool
            };
            return Ok(deny(Step::ToolDeny, layer, rule, reason));
        }
        ToolCheck::Ask { reason, cause } => {
            if tool.requires_user_interaction() {
                return Err(PendingAsk {
                    step: Step::RequiresInteraction,
                    layer: Layer::Interaction,
                    rule: None,
                    reason,
                    immune: true,
                });
            }
            match cause {
                AskCause::ContentRule(rule) => {
                    return Err(PendingAsk {
                        step: Step::ContentAsk,
                        layer: Layer::Rule,
                        rule: Some(rule),
                        reason,
                        immune: true,
                    });
                }
                AskCause::Guardrail(_) => {
                    return Err(PendingAsk {
                        step: Step::Guardrail,
                        layer: Layer::Guardrail,
                        rule: None,
                        reason,
                        immune: true,
                    });
                }
                AskCause::Unproven => (Step::ToolCheck, reason),
            }
        }
        ToolCheck::Allow {
            reason,
            rule,
            updated_input,
        } => {
            let layer = if rule.is_some() {
                Layer::Rule
            } else {
                Layer::Tool
            };
            return Ok(PermissionDecision {
                decision: Decision::Allow,
                step: Step::ToolCheck,
                layer,
                rule,
                reason,
                updated_input,
            });
        }
        ToolCheck::Passthrough { reason } => {
            if tool.requires_user_interaction() {
                return Err(PendingAsk {
                    step: Step::RequiresInteraction,
                    layer: Layer::Interaction,
                    rule: None,
                    reason,
                    immune: true,
                });
            }
            (Step::Passthrough, reason)
        }
    };
    if ctx.mode == PermissionMode::BypassPermissions {
        return Ok(allow(
            Step::Bypass,
            Layer::Mode,
            None,
            "bypassPermissions mode".into(),
        ));
    }
    if let Some(rule) = ctx.rules.whole_tool(RuleKind::Allow, &name) {
        return Ok(allow(
            Step::WholeToolAllow,
            Layer::Rule,
            Some(rule.into()),
            format!("{name} is allowed by rule {}", rule.text),
        ));
    }
    Err(PendingAsk {
        step,
        layer: Layer::Mode,
        rule: None,
        reason,
        immune: false,
    })
}

fn transform_ask(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    ask: PendingAsk,
) -> PermissionDecision {
    let PendingAsk {
        step,
        layer,
        rule,
        reason,
        immune,
    } = ask;
    match ctx.mode {
        PermissionMode::DontAsk => deny(
            step,
            layer,
            rule,
            format!("{reason}; dontAsk mode turns every ask into a deny"),
        ),
        PermissionMode::Auto if !immune => {
            if let Some(fast) = auto_fast_path(tool, input, ctx) {
                return allow(step, Layer::Mode, rule, fast);
            }
            deny(
                step,
                layer,
                rule,
                format!(
                    "{reason}; auto mode: not on the fast path and no classifier is configured, so it fails closed"
                ),
            )
        }
        mode => deny(
            step,
            layer,
            rule,
            format!("{reason}; nobody is present to approve it in a headless {mode}-mode run"),
        ),
    }
}

/// Auto mode's fast path: what acceptEdits would allow, or a tool that only reads.
fn auto_fast_path(tool: &dyn Tool, input: &Value, ctx: &PermissionContext) -> Option<String> {
    let name = tool.name().to_string();
    if AUTO_SAFE_TOOLS.contains(&name.as_str()) && tool.is_read_only(input) {
        return Some(format!("auto mode fast path: {name} only reads"));
    }
    let as_accept_edits = PermissionContext {
        mode: PermissionMode::AcceptEdits,
        ..*ctx
    };
    match tool.check_permissions(input, &as_accept_edits) {
        ToolCheck::Allow { .. } => Some("auto mode fast path: acceptEdits would allow it".into()),
        _ => None,
    }
}

/// Plan mode is read-only exploration: whatever allowed a call, a call that may write is denied.
fn enforce_plan(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    decision: PermissionDecision,
) -> PermissionDecision {
    if ctx.mode == PermissionMode::Plan && decision.is_allow() && !tool.is_read_only(input) {
        return deny(
            decision.step,
            Layer::Mode,
            decision.rule,
            format!(
                "plan mode runs only read-only tools; {} may write",
                tool.name()
            ),
        );
    }
    decision
}

fn deny(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> PermissionDecision {
    PermissionDecision {
        decision: Decision::Deny,
        step,
        layer,
        rule,
        reason,
        updated_input: None,
    }
}

fn allow(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> PermissionDecision {
    PermissionDecision {
        decision: Decision::Allow,
        step,
        layer,
        rule,
        reason,
        updated_input: None,
    }
}
