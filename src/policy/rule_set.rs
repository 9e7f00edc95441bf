//! The rules in force for a run, merged from every loaded policy with managed-only applied,
//! and the lookups the gate and the tools' own checks make.

use super::file::Policy;
use super::rule::{Rule, RuleKind};
use super::tool_name::ToolName;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Allow and ask rules dropped because the managed policy is managed-only.
    ignored: Vec<Rule>,
}

impl RuleSet {
    /// Merges the managed policy (if any) with the others. With `managed_only`, only the
    /// managed policy's allow and ask rules count; deny rules from anywhere still narrow.
    pub fn merge(managed: Option<&Policy>, others: &[&Policy]) -> RuleSet {
        let managed_only = managed.is_some_and(|policy| policy.managed_only);
        let mut set = RuleSet::default();
        if let Some(policy) = managed {
            set.rules.extend(policy.rules.iter().cloned());
        }
        for rule in others.iter().flat_map(|policy| policy.rules.iter()) {
            if managed_only && rule.kind != RuleKind::Deny {
                set.ignored.push(rule.clone());
            } else {
                set.rules.push(rule.clone());
            }
        }
        set
    }

    pub fn from_rules(rules: Vec<Rule>) -> RuleSet {
        RuleSet {
            rules,
            ignored: Vec::new(),
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn ignored(&self) -> &[Rule] {
        &self.ignored
    }

    /// The first whole-tool rule of `kind` covering `tool`.
    pub fn whole_tool(&self, kind: RuleKind, tool: &ToolName) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|rule| rule.kind == kind && rule.is_whole_tool() && applies_to(rule, tool))
    }

    /// Content rules of `kind` that apply to `tool`, in policy order.
    pub fn content_rules<'a>(
        &'a self,
        kind: RuleKind,
        tool: &'a ToolName,
    ) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules.iter().filter(move |rule| {
            rule.kind == kind && !rule.is_whole_tool() && applies_to(rule, tool)
        })
    }
}

/// Claude Code's file-rule families: an Edit/Write rule covers every writing tool, a Read
/// rule every reading tool, and a Read deny also forbids writing what may not be read.
fn applies_to(rule: &Rule, tool: &ToolName) -> bool {
    if rule.tool.is_file_writer() {
        return tool.is_file_writer();
    }
    if rule.tool == ToolName::Read {
        return tool.is_file_reader() || (rule.kind == RuleKind::Deny && tool.is_file_writer());
    }
    rule.tool.covers(tool)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::parse(text, Path::new("p.yaml"), Path::new("/p"), None).unwrap()
    }

    #[test]
    fn managed_only_drops_other_allow_and_ask_rules_but_keeps_denies() {
        let managed = policy("managed_only: true\npermissions:\n  allow: [Read]\n");
        let task = policy("permissions:\n  allow: [Bash]\n  ask: [Write]\n  deny: [WebFetch]\n");
        let set = RuleSet::merge(Some(&managed), &[&task]);
        assert!(set.whole_tool(RuleKind::Allow, &ToolName::Bash).is_none());
        assert!(
            set.whole_tool(RuleKind::Deny, &ToolName::WebFetch)
                .is_some()
        );
        assert_eq!(set.ignored().len(), 2);
        let open = RuleSet::merge(Some(&policy("permissions: {}\n")), &[&task]);
        assert!(open.whole_tool(RuleKind::Allow, &ToolName::Bash).is_some());
    }

    #[test]
    fn file_rule_families() {
        let set = RuleSet::merge(
            Some(&policy(
                "permissions:\n  allow: ['Edit(src/**)']\n  deny: ['Read(.env)']\n",
            )),
            &[],
        );
        assert_eq!(
            set.content_rules(RuleKind::Allow, &ToolName::Write).count(),
            1
        );
        assert_eq!(
            set.content_rules(RuleKind::Allow, &ToolName::Read).count(),
            0
        );
        assert_eq!(
            set.content_rules(RuleKind::Deny, &ToolName::Edit).count(),
            1
        );
        assert_eq!(
            set.content_rules(RuleKind::Deny, &ToolName::Grep).count(),
            1
        );
    }
}
