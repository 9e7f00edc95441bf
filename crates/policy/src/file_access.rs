//! The check every file tool makes on a resolved path: path rules, guardrails, workspace
//! confinement and acceptEdits, in that order. Pure: the caller resolves the path on disk.

use std::path::Path;

use super::decision::{AskCause, RuleRef, ToolCheck};
use super::guardrail::{read_guardrail, read_guardrail_below, write_guardrail};
use super::rule::{RuleContent, RuleKind};
use super::tool_name::ToolName;
use super::{PermissionContext, PermissionMode, RuleSet, Workspace};

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
    }
    .or_else(|| {
        ctx.workspace
            .own_state_guard(path, access == Access::Write, false)
    });
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

/// What Read rules and the read guardrails say of a read a tool makes beside its own path
/// check (a Bash reader's file, a file Grep would search): a deny rule → Deny, a guardrail or
/// an ask rule → Ask; None when neither applies (workspace confinement is the caller's
/// business). With `below`, anything under the folder `path` counts, over-approximated.
pub fn read_refusal(
    rules: &RuleSet,
    workspace: &Workspace,
    tool: &ToolName,
    path: &Path,
    below: bool,
) -> Option<ToolCheck> {
    let bases = workspace.bases();
    let hit = |rule: &&crate::Rule| match &rule.content {
        Some(RuleContent::Path(pattern)) if below => pattern.may_match_below(path, &bases),
        Some(RuleContent::Path(pattern)) => pattern.matches(path, &bases),
        _ => false,
    };
    // Written only for a refusal: nearly every read the gate checks passes.
    let what = || {
        if below {
            format!("{tool} of {} and everything below it", path.display())
        } else {
            format!("{tool} of {}", path.display())
        }
    };
    if let Some(rule) = rules
        .read_content_rules(RuleKind::Deny)
        .find(hit)
        .map(RuleRef::from)
    {
        return Some(ToolCheck::Deny {
            reason: format!("{} may read files denied by rule {}", what(), rule.rule),
            rule: Some(rule),
        });
    }
    let guardrail = if below {
        read_guardrail_below(path)
    } else {
        read_guardrail(path)
    }
    .or_else(|| workspace.own_state_guard(path, false, below));
    if let Some(guardrail) = guardrail {
        return Some(ToolCheck::Ask {
            reason: format!("{} trips a safety guardrail: {guardrail}", what()),
            cause: AskCause::Guardrail(guardrail),
        });
    }
    rules
        .read_content_rules(RuleKind::Ask)
        .find(hit)
        .map(RuleRef::from)
        .map(|rule| ToolCheck::Ask {
            reason: format!("{} needs approval by rule {}", what(), rule.rule),
            cause: AskCause::ContentRule(rule),
        })
}

fn matching_rule(
    ctx: &PermissionContext,
    kind: RuleKind,
    tool: &ToolName,
    path: &Path,
) -> Option<RuleRef> {
    let bases = ctx.workspace.bases();
    ctx.rules
        .first_path_rule(kind, tool, path, &bases)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, RuleSet, Workspace};

    fn verdict(check: ToolCheck) -> &'static str {
        match check {
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask {
                cause: AskCause::Guardrail(_),
                ..
            } => "guardrail",
            ToolCheck::Ask {
                cause: AskCause::ContentRule(_),
                ..
            } => "ask-rule",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Passthrough { .. } => "passthrough",
        }
    }

    #[test]
    fn file_access_table() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['Edit(src/**)', 'Read(//opt/docs/**)']\n  deny: ['Read(.env)', 'Edit(src/generated/**)']\n  ask: ['Edit(src/api/**)']\n",
            crate::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/etc/tg"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let mut workspace =
            Workspace::new("/ws".into(), vec!["/shared".into()], Some("/home/u".into()));
        workspace.read_only_roots.push("/runs/r1/results".into());
        let cases = [
            (
                ToolName::Read,
                "/ws/README.md",
                PermissionMode::DontAsk,
                "allow",
            ),
            (
                ToolName::Read,
                "/shared/x",
                PermissionMode::DontAsk,
                "allow",
            ),
            (
                ToolName::Read,
                "/etc/passwd",
                PermissionMode::DontAsk,
                "deny",
            ),
            (
                ToolName::Read,
                "/opt/docs/a.md",
                PermissionMode::DontAsk,
                "allow",
            ),
            (
                ToolName::Read,
                "/ws/config/.env",
                PermissionMode::DontAsk,
                "deny",
            ),
            (
                ToolName::Read,
                "/proc/self/environ",
                PermissionMode::BypassPermissions,
                "guardrail",
            ),
            (
                ToolName::Read,
                "/runs/r1/results/toolu_1.txt",
                PermissionMode::DontAsk,
                "allow",
            ),
            (
                ToolName::Write,
                "/runs/r1/results/toolu_1.txt",
                PermissionMode::AcceptEdits,
                "deny",
            ),
            (
                ToolName::Write,
                "/ws/src/lib.rs",
                PermissionMode::DontAsk,
                "allow",
            ),
            (
                ToolName::Edit,
                "/ws/src/generated/a.rs",
                PermissionMode::AcceptEdits,
                "deny",
            ),
            (
                ToolName::Edit,
                "/ws/src/api/v1.rs",
                PermissionMode::AcceptEdits,
                "ask-rule",
            ),
            (
                ToolName::Write,
                "/ws/.env",
                PermissionMode::AcceptEdits,
                "deny",
            ),
            (
                ToolName::Write,
                "/ws/notes.md",
                PermissionMode::DontAsk,
                "passthrough",
            ),
            (
                ToolName::Write,
                "/ws/notes.md",
                PermissionMode::AcceptEdits,
                "allow",
            ),
            (
                ToolName::Write,
                "/tmp/x",
                PermissionMode::AcceptEdits,
                "deny",
            ),
            (
                ToolName::Write,
                "/ws/.git/hooks/pre-commit",
                PermissionMode::AcceptEdits,
                "guardrail",
            ),
            (
                ToolName::Edit,
                "/ws/src/.git/config",
                PermissionMode::DontAsk,
                "guardrail",
            ),
            (
                ToolName::Write,
                "/home/u/.bashrc",
                PermissionMode::AcceptEdits,
                "guardrail",
            ),
            (ToolName::Grep, "/etc", PermissionMode::DontAsk, "deny"),
            (ToolName::Glob, "/ws/src", PermissionMode::Plan, "allow"),
        ];
        for (tool, path, mode, expected) in cases {
            let ctx = PermissionContext {
                disk: None,
                auto_allow_bash: false,
                mode,
                rules: &rules,
                workspace: &workspace,
            };
            let access = if tool.is_file_writer() {
                Access::Write
            } else {
                Access::Read
            };
            let got = verdict(check_path(&ctx, &tool, Path::new(path), access));
            assert_eq!(got, expected, "{tool} {path} in {mode}");
        }
    }
}
