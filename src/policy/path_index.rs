//! Path rules compiled once into glob sets, one per (kind, rule tool, anchor): a decision asks
//! each group's set once instead of every rule's own matcher in turn, so load and decision
//! costs grow with the groups, not the rules. It only finds matches; which rule wins is
//! still policy order (the lowest rule index).

use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::path_pattern::{Anchor, PathBases};
use super::rule::{Rule, RuleContent, RuleKind};
use super::tool_name::ToolName;

#[derive(Debug, Clone, Default)]
pub struct PathIndex {
    groups: Vec<PathGroup>,
}

#[derive(Debug, Clone)]
struct PathGroup {
    kind: RuleKind,
    tool: ToolName,
    anchor: Anchor,
    matcher: Matcher,
    /// For each glob of the matcher, in order, the index of its rule in the rule set.
    rules: Vec<usize>,
}

/// Globs compiled into one set at most. A set's regex compiles in time and memory that grow
/// faster than its size, so large groups are split: load stays linear in the rules, and a
/// decision asks one small set per chunk.
const GLOBS_PER_SET: usize = 512;

/// Rules share a glob set when they share all of these.
type GroupKey<'a> = (RuleKind, &'a ToolName, &'a Anchor);

#[derive(Debug, Clone)]
enum Matcher {
    Set(GlobSet),
    /// One rule whose globs parsed but could not be compiled (a regex size limit): fail
    /// closed — a deny or ask rule matches every path under its anchor, an allow none.
    Uncompiled,
}

impl PathIndex {
    /// Indexes every path rule of `rules`; positions in `rules` are the ids lookups return.
    pub fn build(rules: &[Rule]) -> PathIndex {
        let mut keyed: Vec<(GroupKey, Vec<(&Glob, usize)>)> = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let Some(RuleContent::Path(pattern)) = &rule.content else {
                continue;
            };
            let key = (rule.kind, &rule.tool, pattern.anchor());
            let globs = pattern.globs().iter().map(|glob| (glob, index));
            match keyed.iter_mut().find(|(other, _)| *other == key) {
                Some((_, list)) => list.extend(globs),
                None => keyed.push((key, globs.collect())),
            }
        }
        let mut groups = Vec::new();
        for ((kind, tool, anchor), globs) in keyed {
            for (matcher, rules) in globs.chunks(GLOBS_PER_SET).flat_map(compile) {
                groups.push(PathGroup {
                    kind,
                    tool: tool.clone(),
                    anchor: anchor.clone(),
                    matcher,
                    rules,
                });
            }
        }
        PathIndex { groups }
    }

    /// The index of the first rule of `kind` whose pattern matches `path` for `tool`, where
    /// `applies` says whether a rule naming one tool covers another.
    pub fn first_match(
        &self,
        kind: RuleKind,
        tool: &ToolName,
        path: &Path,
        bases: &PathBases,
        applies: impl Fn(&ToolName, RuleKind, &ToolName) -> bool,
    ) -> Option<usize> {
        let mut first: Option<usize> = None;
        let mut hits = Vec::new();
        for group in &self.groups {
            if group.kind != kind || !applies(&group.tool, kind, tool) {
                continue;
            }
            let Some(relative) = group.anchor.relative(path, bases) else {
                continue;
            };
            let found = match &group.matcher {
                Matcher::Set(set) => {
                    set.matches_into(relative, &mut hits);
                    hits.iter().map(|&hit| group.rules[hit]).min()
                }
                Matcher::Uncompiled if kind == RuleKind::Allow => None,
                Matcher::Uncompiled => group.rules.first().copied(),
            };
            first = match (first, found) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        first
    }
}

/// One set for all the globs if it compiles, else halves until each part does; a rule that
/// cannot compile on its own is kept as `Uncompiled`.
fn compile(globs: &[(&Glob, usize)]) -> Vec<(Matcher, Vec<usize>)> {
    let mut builder = GlobSetBuilder::new();
    for (glob, _) in globs {
        builder.add((*glob).clone());
    }
    let rules = globs.iter().map(|(_, rule)| *rule).collect();
    match builder.build() {
        Ok(set) => vec![(Matcher::Set(set), rules)],
        Err(err) if globs.len() <= 2 => {
            tracing::warn!(
                "a path rule could not be compiled, so it is applied fail-closed: {err}"
            );
            vec![(Matcher::Uncompiled, rules)]
        }
        Err(_) => {
            let (left, right) = globs.split_at(globs.len() / 2);
            let mut parts = compile(left);
            parts.extend(compile(right));
            parts
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::policy::{Policy, PolicyOrigin, RuleSet};

    /// The index must agree with matching each rule on its own, in policy order.
    #[test]
    fn the_index_finds_what_rule_by_rule_matching_finds() {
        let policy = Policy::parse(
            "permissions:\n  deny: ['Read(*.env)', 'Edit(//etc/**)', 'Read(/secrets/**)']\n  ask: ['Write(~/notes/*.md)']\n  allow: ['Read(src/**)', 'Edit(./src/*.rs)', 'Read(src/a/**)', 'Read', 'Read(~/**)']\n",
            PolicyOrigin {
                file: Path::new("/p/policy.yaml"),
                dir: Path::new("/p"),
                home: Some(Path::new("/home/u")),
            },
        )
        .unwrap();
        let set = RuleSet::from_policy(&policy);
        let bases = PathBases {
            workdir: Path::new("/ws"),
            home: Some(Path::new("/home/u")),
        };
        let paths = [
            "/ws/src/a/b.rs",
            "/ws/src/lib.rs",
            "/ws/deep/prod.env",
            "/etc/passwd",
            "/p/secrets/key",
            "/home/u/notes/a.md",
            "/home/u/x",
            "/elsewhere",
        ];
        let tools = [
            ToolName::Read,
            ToolName::Edit,
            ToolName::Write,
            ToolName::Grep,
        ];
        let mut found = 0;
        for kind in [RuleKind::Deny, RuleKind::Ask, RuleKind::Allow] {
            for tool in &tools {
                for path in paths {
                    let path = PathBuf::from(path);
                    let naive = set.content_rules(kind, tool).find(|rule| {
                        let Some(RuleContent::Path(pattern)) = &rule.content else {
                            return false;
                        };
                        pattern
                            .anchor()
                            .relative(&path, &bases)
                            .is_some_and(|relative| {
                                pattern
                                    .globs()
                                    .iter()
                                    .any(|glob| glob.compile_matcher().is_match(relative))
                            })
                    });
                    let indexed = set.first_path_rule(kind, tool, &path, &bases);
                    assert_eq!(
                        indexed.map(|rule| &rule.text),
                        naive.map(|rule| &rule.text),
                        "{kind} {tool} {}",
                        path.display()
                    );
                    found += usize::from(indexed.is_some());
                }
            }
        }
        assert!(found > 10, "the table tests too little: {found} matches");
    }
}
