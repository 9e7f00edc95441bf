//! Walks a script's items in order, keeps what the analysis has found so far (reports, writes,
//! problems, possible working directories) and folds it into one verdict.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::paths::{Cwds, ReadLog, check_read, lexical, locate};
use super::syntax::{Assignment, Item, Redirect};
use super::word::Word;
use super::{BashAnalysis, BashEnv, BashRules, BashVerdict, CommandReport, CommandVerdict, Script};

/// `sh -c 'sh -c …'` deeper than this is not analysed.
pub(crate) const MAX_NESTING: usize = 4;

pub(crate) struct Analyser<'a> {
    pub rules: &'a BashRules,
    pub env: &'a BashEnv<'a>,
    /// The call's parsed script, which also keeps the parses of the scripts found inside it.
    parsed: &'a Script,
    pub reports: Vec<CommandReport>,
    pub writes: Vec<PathBuf>,
    /// Paths commands write through their arguments (see `arg_writes`).
    pub named_writes: Vec<PathBuf>,
    /// Commands that make a repository or unpack files under names not seen here.
    pub unseen_writes: Vec<String>,
    /// Things always refused, whatever the rules (`/dev/tcp/…`).
    pub refusals: Vec<String>,
    /// Script-level reasons the script is not proven safe.
    pub problems: Vec<String>,
    pub cwds: Cwds,
    pub reads: ReadLog,
}

impl<'a> Analyser<'a> {
    pub fn new(rules: &'a BashRules, env: &'a BashEnv<'a>, parsed: &'a Script) -> Analyser<'a> {
        Analyser {
            rules,
            env,
            parsed,
            reports: Vec::new(),
            writes: Vec::new(),
            named_writes: Vec::new(),
            unseen_writes: Vec::new(),
            refusals: Vec::new(),
            problems: Vec::new(),
            cwds: Cwds::new(env.cwd),
            reads: ReadLog::default(),
        }
    }

    pub fn script(&mut self, src: &str, depth: usize) {
        if depth > MAX_NESTING {
            self.problems
                .push("shell scripts are nested too deeply (`sh -c` inside `sh -c` …)".to_owned());
            return;
        }
        let items = self.parsed.items(src);
        let calls: HashMap<&str, Vec<&str>> = items
            .iter()
            .filter_map(|item| match item {
                Item::Function { name, calls } => {
                    Some((name.as_str(), calls.iter().map(String::as_str).collect()))
                }
                _ => None,
            })
            .collect();
        if let Some(name) = recursive_function(&calls) {
            self.problems.push(format!(
                "the shell function `{name}` calls itself (directly or through others): recursion and fork bombs exhaust the machine"
            ));
        }
        let functions: HashSet<String> = calls.keys().map(|n| (*n).to_owned()).collect();
        for item in items.iter() {
            match item {
                Item::Command(cmd) => self.simple_command(cmd, &functions, depth),
                Item::Redirect(r) => self.redirect(r),
                Item::Assign(a) => self.bare_assignment(a),
                Item::Declare {
                    keyword,
                    flags,
                    names,
                    text,
                } => self.declaration(keyword, flags, names, text, depth),
                Item::Unset { flags, names, text } => {
                    self.declaration("unset", flags, names, text, depth)
                }
                Item::Bind { via, name } => {
                    if let Some(reason) = self.binding(via, name, depth) {
                        self.problems.push(reason);
                    }
                }
                Item::Test { text } => {
                    let first = text.split_whitespace().next().unwrap_or("[").to_owned();
                    self.reports.push(CommandReport {
                        text: text.clone(),
                        argv: vec![first],
                        verdict: CommandVerdict::ReadOnly,
                        why: "a test expression only reads".to_owned(),
                    });
                }
                Item::Function { .. } => {}
                Item::Hidden(inner) => self.script(inner, depth + 1),
                Item::Problem(p) => self.problems.push(p.clone()),
            }
        }
    }

    /// A variable set for the rest of the script: only ordinary names, which no program reads
    /// from its environment, are proven harmless (its subscript is the walker's).
    pub(crate) fn bare_assignment(&mut self, a: &Assignment) {
        let name = a.name.split_once('[').map_or(a.name.as_str(), |(n, _)| n);
        if let Err(reason) = super::bindings::judge_name(&a.text, &Word::literal(name)) {
            self.problems.push(reason);
        }
    }

    fn redirect(&mut self, r: &Redirect) {
        let Some(target) = &r.target else { return };
        let op = r.op.as_str();
        let fd_dup = matches!(op, ">&" | "<&" | ">&-" | "<&-")
            && target
                .fixed()
                .is_some_and(|v| v == "-" || v.chars().all(|c| c.is_ascii_digit()));
        if fd_dup || matches!(op, "<<" | "<<-" | "<<<") {
            return;
        }
        let writes = matches!(op, ">" | ">>" | ">|" | "&>" | "&>>" | "<>" | ">&");
        if let Some(v) = target.value.as_deref() {
            let lex = lexical(Path::new(v));
            if is_network(Path::new(v)) || (v.starts_with('/') && is_network(&lex)) {
                self.refusals
                    .push(format!("`{}` opens a network connection", r.text));
                return;
            }
        }
        if target.glob {
            self.problems
                .push(format!("`{}`: a glob as a redirection target", r.text));
            return;
        }
        if !writes {
            if let Err(e) = check_read(target, self.env, &self.cwds, &self.reads) {
                self.problems.push(format!("`{}`: {e}", r.text));
            }
            return;
        }
        match locate(target, self.env, &self.cwds) {
            Ok(paths) => {
                for p in paths {
                    let harmless = matches!(
                        p.to_str(),
                        Some("/dev/null" | "/dev/stdout" | "/dev/stderr")
                    );
                    if !harmless && !self.writes.contains(&p) {
                        self.writes.push(p);
                    }
                }
            }
            Err(e) => self.problems.push(format!(
                "`{}` writes to a file not known statically: {e}",
                r.text
            )),
        }
    }

    pub fn finish(self) -> BashAnalysis {
        let verdict = self.verdict();
        let named_denied = self.named_denied();
        BashAnalysis {
            verdict,
            commands: self.reports,
            writes: self.writes,
            reads: self.reads.into_inner(),
            named_denied,
            named_writes: self.named_writes,
            unseen_writes: self.unseen_writes,
        }
    }

    /// The first deny rule all of whose words appear among the words (split at blanks and
    /// shell punctuation) of a command that is not proven safe: `mywrap 'rm -rf x'` names
    /// `Bash(rm:*)`.
    fn named_denied(&self) -> Option<(usize, String)> {
        let unproven = self.reports.iter().filter(|r| {
            matches!(
                r.verdict,
                CommandVerdict::Unproven | CommandVerdict::AskRule(_)
            )
        });
        for report in unproven {
            let tokens: Vec<&str> = report
                .argv
                .iter()
                .flat_map(|w| w.split(|c: char| c.is_whitespace() || ";|&()<>`'\"$={}".contains(c)))
                .filter(|t| !t.is_empty())
                .map(super::pattern::base)
                .collect();
            for (pattern, id) in &self.rules.deny {
                let words = pattern.words();
                if !words.is_empty()
                    && words
                        .iter()
                        .all(|w| tokens.contains(&super::pattern::base(w)))
                {
                    return Some((
                        *id,
                        format!(
                            "`{}` names a command denied by rule Bash({pattern}), and bypassPermissions does not run what it cannot prove harmless",
                            report.text
                        ),
                    ));
                }
            }
        }
        None
    }

    fn verdict(&self) -> BashVerdict {
        for r in &self.reports {
            if let CommandVerdict::Denied(id) = r.verdict {
                return BashVerdict::Deny {
                    rule: Some(id),
                    reason: r.why.clone(),
                };
            }
        }
        if let Some(reason) = self.refusals.first() {
            return BashVerdict::Deny {
                rule: None,
                reason: reason.clone(),
            };
        }
        for r in &self.reports {
            if let CommandVerdict::AskRule(id) = r.verdict {
                return BashVerdict::Ask {
                    rule: Some(id),
                    reason: r.why.clone(),
                };
            }
        }
        let reasons: Vec<&str> = self
            .problems
            .iter()
            .map(String::as_str)
            .chain(
                self.reports
                    .iter()
                    .filter(|r| r.verdict == CommandVerdict::Unproven)
                    .map(|r| r.why.as_str()),
            )
            .collect();
        match reasons.as_slice() {
            [] => BashVerdict::Allow,
            [one] => BashVerdict::Ask {
                rule: None,
                reason: (*one).to_owned(),
            },
            [first, second, rest @ ..] => {
                let more = if rest.is_empty() {
                    String::new()
                } else {
                    format!(" (and {} more)", rest.len())
                };
                BashVerdict::Ask {
                    rule: None,
                    reason: format!("{first}; {second}{more}"),
                }
            }
        }
    }
}

/// A function that can reach itself through the calls of the script's functions, if any
/// (`f() { f; }`, `a() { b; }; b() { a; }`, `:(){ :|:& };:`).
fn recursive_function<'n>(calls: &HashMap<&'n str, Vec<&'n str>>) -> Option<&'n str> {
    let mut names: Vec<&str> = calls.keys().copied().collect();
    names.sort_unstable();
    names.into_iter().find(|start| {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut stack: Vec<&str> = calls.get(start).cloned().unwrap_or_default();
        while let Some(name) = stack.pop() {
            if name == *start {
                return true;
            }
            if seen.insert(name)
                && let Some(next) = calls.get(name)
            {
                stack.extend(next.iter().copied());
            }
        }
        false
    })
}

/// Bash opens `/dev/tcp/host/port` and `/dev/udp/…` as sockets in redirections.
fn is_network(path: &Path) -> bool {
    path.starts_with("/dev/tcp") || path.starts_with("/dev/udp")
}
