//! The rules in force for a run, merged from every loaded policy with managed-only applied,
//! and the lookups the gate and the tools' own checks make.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::file::Policy;
use super::path_index::PathIndex;
use super::path_pattern::PathBases;
use super::rule::{Rule, RuleContent, RuleKind};
use super::tool_name::ToolName;
use tollgate_bash::BashRules;

/// Where a policy came from, highest precedence first (the derive order is the precedence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// `--policy`, else /etc/tollgate/policy.yaml and policy.d/*.yaml.
    Managed,
    /// `--allow`, `--deny`, `--ask`.
    CommandLine,
    /// The task file's `policy:` and `permissions:`.
    Task,
    /// `.tollgate/policy.yaml` in the workdir.
    Project,
    /// `~/.config/tollgate/policy.yaml`.
    User,
}

/// A loaded policy and the source it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySource {
    pub kind: SourceKind,
    pub policy: Policy,
}

/// A source of `kind` parsed from `yaml` as if read from `<kind>.yaml` in `/p`: the unit
/// tests' one fixture for a layer of policy (the main crate's too, through `test-support`).
/// A fixture that does not parse is a broken test: it panics.
#[cfg(any(test, feature = "test-support"))]
#[allow(
    clippy::unwrap_used,
    reason = "a test fixture that does not parse fails the test"
)]
pub fn test_source(kind: SourceKind, yaml: &str) -> PolicySource {
    let file = format!("{kind:?}.yaml");
    let origin = super::file::PolicyOrigin {
        file: Path::new(&file),
        dir: Path::new("/p"),
        home: None,
    };
    let policy = Policy::parse(yaml, origin).unwrap();
    PolicySource { kind, policy }
}

#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Allow and ask rules dropped because the managed policy is managed-only.
    ignored: Vec<Rule>,
    /// The Bash content rules in the analyser's form, tagged with their index in `rules`;
    /// built once, since every Bash call needs them.
    bash: BashRules,
    /// The path rules compiled together, for the file tools' checks.
    paths: PathIndex,
    /// Indexes of the whole-tool rules, which every call consults.
    whole: Vec<usize>,
    /// Indexes of the content rules that apply to Read, by kind (allow, ask, deny), in
    /// policy order: every path a Bash command reads is checked against them.
    reads: [Vec<usize>; 3],
}

impl RuleSet {
    /// Merges every source, highest precedence first, so the first matching rule a lookup
    /// finds is the one that outranks the others. Deny rules are consulted before any allow,
    /// so a deny anywhere wins. If a managed policy is `managed_only`, allow and ask rules
    /// from every other source are ignored (and kept for reporting); their denies still
    /// narrow.
    pub fn from_sources(sources: &[PolicySource]) -> RuleSet {
        let managed_only = sources
            .iter()
            .any(|source| source.kind == SourceKind::Managed && source.policy.managed_only);
        let mut ordered: Vec<&PolicySource> = sources.iter().collect();
        ordered.sort_by_key(|source| source.kind);
        let mut set = RuleSet::default();
        for source in ordered {
            for rule in &source.policy.rules {
                let widens = rule.kind != RuleKind::Deny;
                if managed_only && widens && source.kind != SourceKind::Managed {
                    set.ignored.push(rule.clone());
                } else {
                    set.rules.push(rule.clone());
                }
            }
        }
        set.index();
        set
    }

    /// The same rules less those `drop` picks, and the dropped ones (auto mode drops the
    /// allow rules that would make its classifier moot, and says which).
    pub fn without(&self, drop: impl Fn(&Rule) -> bool) -> (RuleSet, Vec<Rule>) {
        let (dropped, kept): (Vec<Rule>, Vec<Rule>) =
            self.rules.iter().cloned().partition(|rule| drop(rule));
        let mut set = RuleSet {
            rules: kept,
            ignored: self.ignored.clone(),
            ..RuleSet::default()
        };
        set.index();
        (set, dropped)
    }

    /// The lookups built once from `rules`: the Bash patterns in the analyser's form, the
    /// path rules compiled together, the whole-tool rules.
    fn index(&mut self) {
        let set = self;
        for (index, rule) in set.rules.iter().enumerate() {
            let Some(RuleContent::Command(pattern)) = &rule.content else {
                continue;
            };
            if rule.tool != ToolName::Bash {
                continue;
            }
            let list = match rule.kind {
                RuleKind::Allow => &mut set.bash.allow,
                RuleKind::Ask => &mut set.bash.ask,
                RuleKind::Deny => &mut set.bash.deny,
            };
            list.push((pattern.clone(), index));
        }
        set.paths = PathIndex::build(&set.rules);
        set.whole = (0..set.rules.len())
            .filter(|&index| set.rules[index].is_whole_tool())
            .collect();
        let reads = |kind| {
            let rules = &set.rules;
            (0..rules.len())
                .filter(|&index| content_rule_for(&rules[index], kind, &ToolName::Read))
                .collect()
        };
        set.reads = [
            reads(RuleKind::Allow),
            reads(RuleKind::Ask),
            reads(RuleKind::Deny),
        ];
    }

    /// The Bash content rules, for the analyser; ids index `rule_at`.
    pub fn bash_rules(&self) -> &BashRules {
        &self.bash
    }

    pub fn rule_at(&self, index: usize) -> Option<&Rule> {
        self.rules.get(index)
    }

    /// One policy on its own, as the managed policy.
    pub fn from_policy(policy: &Policy) -> RuleSet {
        RuleSet::from_sources(&[PolicySource {
            kind: SourceKind::Managed,
            policy: policy.clone(),
        }])
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn ignored(&self) -> &[Rule] {
        &self.ignored
    }

    /// The first whole-tool rule of `kind` covering `tool`.
    pub fn whole_tool(&self, kind: RuleKind, tool: &ToolName) -> Option<&Rule> {
        self.whole
            .iter()
            .map(|&index| &self.rules[index])
            .find(|rule| rule.kind == kind && applies_to(&rule.tool, rule.kind, tool))
    }

    /// The first path rule of `kind` for `tool` matching `path` (absolute, normalised,
    /// symlinks resolved), by precedence.
    pub fn first_path_rule(
        &self,
        kind: RuleKind,
        tool: &ToolName,
        path: &Path,
        bases: &PathBases,
    ) -> Option<&Rule> {
        self.paths
            .first_match(kind, tool, path, bases, applies_to)
            .and_then(|index| self.rules.get(index))
    }

    /// Content rules of `kind` that apply to `tool`, in policy order.
    pub fn content_rules<'a>(
        &'a self,
        kind: RuleKind,
        tool: &'a ToolName,
    ) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .iter()
            .filter(move |rule| content_rule_for(rule, kind, tool))
    }

    /// [`RuleSet::content_rules`] for Read, from the index.
    pub fn read_content_rules(&self, kind: RuleKind) -> impl Iterator<Item = &Rule> + '_ {
        let indexes = match kind {
            RuleKind::Allow => &self.reads[0],
            RuleKind::Ask => &self.reads[1],
            RuleKind::Deny => &self.reads[2],
        };
        indexes.iter().filter_map(|&index| self.rules.get(index))
    }
}

/// Whether `rule` is a content rule of `kind` that applies to `tool`.
fn content_rule_for(rule: &Rule, kind: RuleKind, tool: &ToolName) -> bool {
    rule.kind == kind && !rule.is_whole_tool() && applies_to(&rule.tool, rule.kind, tool)
}

/// Claude Code's file-rule families: an Edit/Write rule covers every writing tool, a Read
/// rule every reading tool, and a Read deny also forbids writing what may not be read.
fn applies_to(rule_tool: &ToolName, kind: RuleKind, tool: &ToolName) -> bool {
    if rule_tool.is_file_writer() {
        return tool.is_file_writer();
    }
    if *rule_tool == ToolName::Read {
        return tool.is_file_reader() || (kind == RuleKind::Deny && tool.is_file_writer());
    }
    // A deny or ask rule must not miss on case: an MCP server's name may come from the
    // repository's `.mcp.json`, and its tools' names from the server. An allow rule grants
    // only the name it spells.
    if kind == RuleKind::Allow {
        rule_tool.covers(tool)
    } else {
        rule_tool.covers_in_any_case(tool)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::PolicyOrigin;

    fn policy(text: &str) -> Policy {
        Policy::parse(
            text,
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/p"),
                home: None,
            },
        )
        .unwrap()
    }

    fn source(kind: SourceKind, text: &str) -> PolicySource {
        PolicySource {
            kind,
            policy: policy(text),
        }
    }

    #[test]
    fn managed_only_drops_other_allow_and_ask_rules_but_keeps_denies() {
        let managed = source(
            SourceKind::Managed,
            "managed_only: true\npermissions:\n  allow: [Read]\n",
        );
        let task = source(
            SourceKind::Task,
            "permissions:\n  allow: [Bash]\n  ask: [Write]\n  deny: [WebFetch]\n",
        );
        let set = RuleSet::from_sources(&[task.clone(), managed]);
        assert!(set.whole_tool(RuleKind::Allow, &ToolName::Bash).is_none());
        assert!(
            set.whole_tool(RuleKind::Deny, &ToolName::WebFetch)
                .is_some()
        );
        assert_eq!(set.ignored().len(), 2);
        let open = RuleSet::from_sources(&[source(SourceKind::Managed, "permissions: {}\n"), task]);
        assert!(open.whole_tool(RuleKind::Allow, &ToolName::Bash).is_some());
        // managed_only anywhere but in a managed policy locks nothing.
        let self_locked = source(
            SourceKind::Task,
            "managed_only: true\npermissions:\n  allow: [Read]\n",
        );
        let user = source(SourceKind::User, "permissions:\n  allow: [Bash]\n");
        assert!(
            RuleSet::from_sources(&[self_locked, user])
                .ignored()
                .is_empty()
        );
    }

    #[test]
    fn higher_precedence_sources_come_first() {
        let user = source(SourceKind::User, "permissions:\n  allow: [Bash]\n");
        let flags = Policy::from_flags(&["Bash".into()], &[], &[], Path::new("/")).unwrap();
        let cli = PolicySource {
            kind: SourceKind::CommandLine,
            policy: flags,
        };
        let set = RuleSet::from_sources(&[user, cli]);
        let first = set.whole_tool(RuleKind::Allow, &ToolName::Bash).unwrap();
        assert!(
            first
                .source
                .file
                .display()
                .to_string()
                .starts_with("<command line")
        );
    }

    #[test]
    fn the_read_index_lists_what_a_scan_finds() {
        let set = RuleSet::from_policy(&policy(
            "permissions:\n  allow: [Read, 'Read(docs/**)', 'Edit(src/**)']\n  ask: ['Read(~/notes)', 'Bash(git commit:*)']\n  deny: ['Read(.env)', 'read(secrets/**)', 'Edit(.git/**)', 'Bash(rm:*)']\n",
        ));
        for kind in [RuleKind::Allow, RuleKind::Ask, RuleKind::Deny] {
            let indexed: Vec<&str> = set
                .read_content_rules(kind)
                .map(|r| r.text.as_str())
                .collect();
            let scanned: Vec<&str> = set
                .content_rules(kind, &ToolName::Read)
                .map(|r| r.text.as_str())
                .collect();
            assert_eq!(indexed, scanned, "{kind:?}");
            assert!(!indexed.is_empty(), "{kind:?}");
        }
    }

    #[test]
    fn file_rule_families() {
        let set = RuleSet::from_policy(&policy(
            "permissions:\n  allow: ['Edit(src/**)']\n  deny: ['Read(.env)']\n",
        ));
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
