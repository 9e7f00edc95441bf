//! `policy lint`: what a reviewer should know about a policy before it guards a run — allow
//! rules that hand out more than they seem to, and rules that can never match.

use super::file::Policy;
use super::rule::{Rule, RuleContent, RuleKind};
use super::tool_name::ToolName;
use crate::bash::CommandPattern;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintWarning {
    pub rule: String,
    pub source: String,
    pub message: String,
}

/// `implemented` says whether tollgate has a tool of that name.
pub fn lint(policy: &Policy, implemented: &dyn Fn(&ToolName) -> bool) -> Vec<LintWarning> {
    let mut warnings = Vec::new();
    for rule in &policy.rules {
        let mut warn = |message: String| {
            warnings.push(LintWarning {
                rule: rule.text.clone(),
                source: rule.source.to_string(),
                message,
            })
        };
        if let Some(danger) = danger(rule) {
            warn(format!("dangerous allow rule: {danger}"));
        }
        if rule.kind == RuleKind::Deny {
            continue;
        }
        let is_mcp = matches!(rule.tool, ToolName::Mcp { .. });
        if !is_mcp && !implemented(&rule.tool) {
            let close = rule
                .tool
                .close_builtin()
                .map(|close| format!("; did you mean `{close}`?"))
                .unwrap_or_default();
            warn(format!(
                "never matches: tollgate has no {} tool{close}",
                rule.tool
            ));
            continue;
        }
        if let Some(denied) = policy.rules.iter().find(|other| {
            other.kind == RuleKind::Deny && other.is_whole_tool() && other.tool.covers(&rule.tool)
        }) {
            warn(format!(
                "never matches: {} is denied whole by {} at {}",
                rule.tool, denied.text, denied.source
            ));
            continue;
        }
        if let Some(RuleContent::Literal(content)) = &rule.content
            && !matches!(rule.tool, ToolName::Agent | ToolName::Skill)
        {
            warn(format!(
                "never matches: {} takes no `{content}` content",
                rule.tool
            ));
        }
        if let Some(twin) = policy.rules.iter().find(|other| {
            other.kind == RuleKind::Deny && other.tool == rule.tool && other.content == rule.content
        }) {
            warn(format!(
                "never matches: the same rule is denied at {}",
                twin.source
            ));
        }
    }
    warnings
}

/// Why an allow rule hands out more than it seems to, if it does (checked at load and by lint).
pub fn danger(rule: &Rule) -> Option<&'static str> {
    if rule.kind != RuleKind::Allow || rule.tool != ToolName::Bash {
        return None;
    }
    match &rule.content {
        None => Some("allows every command"),
        Some(RuleContent::Command(pattern)) => CommandPattern::danger(pattern),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::policy::PolicyOrigin;

    #[test]
    fn lint_finds_dangerous_and_dead_rules() {
        let policy = Policy::parse(
            "permissions:\n  allow: [Bash, 'Bash(python:*)', 'Bash(npm test:*)', WebSearch, 'Read(src/**)', 'Grep(x)', WebFetch, 'TodoWrite(x)']\n  ask: ['Bash(rm:*)']\n  deny: ['Bash(rm:*)', WebFetch, Nope]\n",
            PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let implemented =
            |tool: &ToolName| !matches!(tool, ToolName::Other(_) | ToolName::TodoWrite);
        let found: Vec<(String, String)> = lint(&policy, &implemented)
            .into_iter()
            .map(|w| {
                (
                    w.rule,
                    w.message.split(':').next().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("Bash(rm:*)", "never matches"),
            ("Bash", "dangerous allow rule"),
            ("Bash(python:*)", "dangerous allow rule"),
            ("WebSearch", "never matches"),
            ("WebFetch", "never matches"),
            ("TodoWrite(x)", "never matches"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(found, expected);
    }
}
