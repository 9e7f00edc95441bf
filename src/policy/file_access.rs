//! The check every file tool makes on a resolved path: path rules, guardrails, workspace
//! confinement and acceptEdits, in that order. Pure: the caller resolves the path on disk.

use std::path::Path;

use super::decision::{AskCause, RuleRef, ToolCheck};
use super::guardrail::{read_guardrail, write_guardrail};
use super::rule::{RuleContent, RuleKind};
use super::tool_name::ToolName;
use super::{PermissionContext, PermissionMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// `path` must be absolute, normalised and have its symlinks resolved.
pub fn check_path(
    ctx: &PermissionContext,
    tool: &ToolName,
    path: &Path,
    access: Access,
) -> ToolCheck {
    let shown = path.display();
    if let Some(rule) = matching_rule(ctx, RuleKind::Deny, tool, path) {
        return ToolCheck::Deny {
            reason: format!("{tool} of {shown} is denied by rule {}", rule.rule),
            rule: Some(rule),
        };
    }
    let guardrail = match access {
        Access::Read => read_guardrail(path),
        Access::Write => write_guardrail(path, ctx.workspace.home.as_deref()),
    };
    if let Some(guardrail) = guardrail {
        return ToolCheck::Ask {
            reason: format!("{tool} of {shown} trips a safety guardrail: {guardrail}"),
            cause: AskCause::Guardrail(guardrail),
        };
    }
    if let Some(rule) = matching_rule(ctx, RuleKind::Ask, tool, path) {
        return ToolCheck::Ask {
            reason: format!("{tool} of {shown} needs approval by rule {}", rule.rule),
            cause: AskCause::ContentRule(rule),
        };
    }
    if let Some(rule) = matching_rule(ctx, RuleKind::Allow, tool, path) {
        return ToolCheck::Allow {
            reason: format!("{tool} of {shown} is allowed by rule {}", rule.rule),
            rule: Some(rule),
            updated_input: None,
        };
    }
    let inside = match access {
        Access::Read => ctx.workspace.readable(path),
        Access::Write => ctx.workspace.contains(path),
    };
    if !inside {
        return ToolCheck::Deny {
            reason: format!(
                "{shown} is outside the workspace ({}); file tools are confined to the workdir and additional_directories",
                roots(ctx)
            ),
            rule: None,
        };
    }
    match (access, ctx.mode) {
        (Access::Read, _) => ToolCheck::Allow {
            reason: format!("{tool} inside the workspace"),
            rule: None,
            updated_input: None,
        },
        (Access::Write, PermissionMode::AcceptEdits) => ToolCheck::Allow {
            reason: "acceptEdits mode allows edits inside the workspace".into(),
            rule: None,
            updated_input: None,
        },
        (Access::Write, _) => ToolCheck::Passthrough {
            reason: format!("no rule allows {tool} of {shown}"),
        },
    }
}

fn matching_rule(
    ctx: &PermissionContext,
    kind: RuleKind,
    tool: &ToolName,
    path: &Path,
) -> Option<RuleRef> {
    let bases = ctx.workspace.bases();
    ctx.rules
        .content_rules(kind, tool)
        .find(|rule| matches!(&rule.content, Some(RuleContent::Path(pattern)) if pattern.matches(path, &bases)))
        .map(RuleRef::from)
}

fn roots(ctx: &PermissionContext) -> String {
    ctx.workspace
        .roots
        .iter()
        .map(|root| root.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
