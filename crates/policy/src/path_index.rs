//! Path rules indexed once per (kind, rule tool, anchor): each glob is filed under what every
//! path it matches must contain (a literal folder, a file name, an extension), so a decision
//! runs only the few globs its path can match — a handful of hash lookups per path component
//! whatever the number of rules — and nothing is compiled at load. The rare globs with
//! classes, braces or escapes go to globset's sets, compiled on the first lookup that needs
//! them. It only finds matches; which rule wins is still policy order (the lowest rule index).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use foldhash::HashMap;
use globset::{Glob, GlobSet, GlobSetBuilder};

use super::path_glob::{GlobKey, PathGlob};
use super::path_pattern::{Anchor, PathBases, PatternGlob};
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
    table: GlobTable,
    /// The globset globs of the group's rules that `PathGlob` does not read, with their
    /// rule's index.
    globset: Vec<(Glob, usize)>,
    /// `globset` compiled, on the first lookup that reaches this group.
    compiled: OnceLock<Vec<(Matcher, Vec<usize>)>>,
}

/// A group's step globs by key. Every list is in rule order, so the first match in a list
/// is its best.
#[derive(Debug, Clone, Default)]
struct GlobTable {
    /// The first rule whose glob is `**`.
    everything: Option<usize>,
    /// Literal globs: the first rule for each.
    exact: HashMap<Box<[u8]>, usize>,
    /// By the literal folder a match starts with; the empty folder holds the globs nothing
    /// narrows, looked at for every path.
    folder: HashMap<Box<[u8]>, Vec<(usize, PathGlob)>>,
    /// `**/name…` globs by the name some component of a match equals.
    name: HashMap<Box<[u8]>, Vec<(usize, PathGlob)>>,
    /// `**/*.ext…` globs by the extension some component of a match has.
    extension: HashMap<Box<[u8]>, Vec<(usize, PathGlob)>>,
}

/// Globs compiled into one set at most. A set's regex compiles in time and memory that grow
/// faster than its size, so large groups are split: load stays linear in the rules, and a
/// decision asks one small set per chunk.
const GLOBS_PER_SET: usize = 512;

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
        let mut groups: Vec<PathGroup> = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let Some(RuleContent::Path(pattern)) = &rule.content else {
                continue;
            };
            let same = |group: &&mut PathGroup| {
                group.kind == rule.kind
                    && group.tool == rule.tool
                    && group.anchor == *pattern.anchor()
            };
            let group = match groups.iter_mut().position(|group| same(&group)) {
                Some(at) => &mut groups[at],
                None => {
                    groups.push(PathGroup {
                        kind: rule.kind,
                        tool: rule.tool.clone(),
                        anchor: pattern.anchor().clone(),
                        table: GlobTable::default(),
                        globset: Vec::new(),
                        compiled: OnceLock::new(),
                    });
                    let last = groups.len() - 1;
                    &mut groups[last]
                }
            };
            match pattern.glob() {
                PatternGlob::Steps(glob) => group.table.insert(index, glob),
                PatternGlob::Globset { globs, .. } => group
                    .globset
                    .extend(globs.iter().map(|glob| (glob.clone(), index))),
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
        for group in &self.groups {
            if group.kind != kind || !applies(&group.tool, kind, tool) {
                continue;
            }
            let Some(relative) = group.anchor.relative(path, bases) else {
                continue;
            };
            first = group
                .table
                .first_match(relative.as_os_str().as_bytes(), first);
            if !group.globset.is_empty() {
                first = earliest(first, group.globset_match(kind, relative));
            }
        }
        first
    }
}

impl PathGroup {
    fn globset_match(&self, kind: RuleKind, relative: &Path) -> Option<usize> {
        let compiled = self.compiled.get_or_init(|| {
            self.globset
                .chunks(GLOBS_PER_SET)
                .flat_map(compile)
                .collect()
        });
        let mut first = None;
        let mut hits = Vec::new();
        for (matcher, rules) in compiled {
            let found = match matcher {
                Matcher::Set(set) => {
                    set.matches_into(relative, &mut hits);
                    hits.iter().map(|&hit| rules[hit]).min()
                }
                Matcher::Uncompiled if kind == RuleKind::Allow => None,
                Matcher::Uncompiled => rules.first().copied(),
            };
            first = earliest(first, found);
        }
        first
    }
}

impl GlobTable {
    fn insert(&mut self, rule: usize, glob: &PathGlob) {
        let entry = (rule, glob.clone());
        match glob.key() {
            GlobKey::Everything => {
                self.everything.get_or_insert(rule);
            }
            GlobKey::Exact(bytes) => {
                self.exact.entry(bytes.into()).or_insert(rule);
            }
            GlobKey::Folder(bytes) => self.folder.entry(bytes.into()).or_default().push(entry),
            GlobKey::Name(bytes) => self.name.entry(bytes.into()).or_default().push(entry),
            GlobKey::Extension(bytes) => {
                self.extension.entry(bytes.into()).or_default().push(entry);
            }
        }
    }

    /// The earlier of `first` and the first rule here whose glob matches `relative` (the
    /// path below the group's anchor). Looks only where `PathGlob::key` files a glob that
    /// can match: the empty folder, each folder `relative` lies in, `relative` itself, and
    /// each of its components' names and extensions.
    fn first_match(&self, relative: &[u8], mut first: Option<usize>) -> Option<usize> {
        first = earliest(first, self.everything);
        let run = |list: Option<&Vec<(usize, PathGlob)>>, first: Option<usize>| {
            let Some(list) = list else {
                return first;
            };
            let found = list
                .iter()
                .take_while(|(rule, _)| first.is_none_or(|best| *rule < best))
                .find(|(_, glob)| glob.matches(relative))
                .map(|(rule, _)| *rule);
            earliest(first, found)
        };
        first = run(self.folder.get(&[][..]), first);
        let cuts = relative
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'/')
            .map(|(at, _)| &relative[..at])
            .chain([relative])
            .filter(|cut| !cut.is_empty());
        for cut in cuts {
            first = earliest(first, self.exact.get(cut).copied());
            first = run(self.folder.get(cut), first);
        }
        if self.name.is_empty() && self.extension.is_empty() {
            return first;
        }
        for part in relative.split(|byte| *byte == b'/') {
            first = run(self.name.get(part), first);
            if let Some(dot) = part.iter().rposition(|byte| *byte == b'.') {
                first = run(self.extension.get(&part[dot + 1..]), first);
            }
        }
        first
    }
}

fn earliest(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One set for all the globs if it compiles, else halves until each part does; a rule that
/// cannot compile on its own is kept as `Uncompiled`.
fn compile(globs: &[(Glob, usize)]) -> Vec<(Matcher, Vec<usize>)> {
    let mut builder = GlobSetBuilder::new();
    for (glob, _) in globs {
        builder.add(glob.clone());
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
    use crate::{Policy, PolicyOrigin, RuleSet};

    /// The index must agree with matching each rule on its own, in policy order.
    #[test]
    fn the_index_finds_what_rule_by_rule_matching_finds() {
        let policy = Policy::parse(
            "permissions:\n  deny: ['Read(*.env)', 'Edit(//etc/**)', 'Read(/secrets/**)', 'Read(**/node_modules/**)', 'Read(*.tar.gz)', 'Edit(src/{a,b}/*.rs)']\n  ask: ['Write(~/notes/*.md)', 'Read(docs)', 'Edit(**/id_*)']\n  allow: ['Read(src/**)', 'Edit(./src/*.rs)', 'Read(src/a/**)', 'Read', 'Read(~/**)', 'Edit(src/[ab]/**)', 'Read(./**)', 'Write(.git)']\n",
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
            "/ws/web/node_modules/x/index.js",
            "/ws/dist/out.tar.gz",
            "/ws/docs/guide.md",
            "/ws/docs",
            "/ws/src/b/x.rs",
            "/ws/src/c/x.rs",
            "/ws/home/id_rsa.pub",
            "/ws/.git/config",
            "/ws",
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
                        pattern.globset_matches(&path, &bases)
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
