//! Walks a script's items in order, keeps what the analysis has found so far (reports, writes,
//! problems, possible working directories) and folds it into one verdict.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::paths::{Cwds, check_read, lexical, locate};
use super::syntax::{self, Assignment, Item, Redirect};
use super::{BashAnalysis, BashEnv, BashRules, BashVerdict, CommandReport, CommandVerdict};

/// `sh -c 'sh -c …'` deeper than this is not analysed.
pub(crate) const MAX_NESTING: usize = 4;

pub(crate) struct Analyser<'a> {
    pub rules: &'a BashRules,
    pub env: &'a BashEnv<'a>,
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
}

impl<'a> Analyser<'a> {
    pub fn new(rules: &'a BashRules, env: &'a BashEnv<'a>) -> Analyser<'a> {
        Analyser {
            rules,
            env,
            reports: Vec::new(),
            writes: Vec::new(),
            named_writes: Vec::new(),
            unseen_writes: Vec::new(),
            refusals: Vec::new(),
            problems: Vec::new(),
            cwds: Cwds::new(env.cwd),
        }
    }

    pub fn script(&mut self, src: &str, depth: usize) {
        if depth > MAX_NESTING {
            self.problems
                .push("shell scripts are nested too deeply (`sh -c` inside `sh -c` …)".to_owned());
            return;
        }
        let items = syntax::items(src);
        let functions: HashSet<String> = items
            .iter()
            .filter_map(|item| match item {
                Item::Function { name } => Some(name.clone()),
                _ => None,
            })
            .collect();
        for item in items {
            match item {
                Item::Command(cmd) => self.simple_command(&cmd, &functions, depth),
                Item::Redirect(r) => self.redirect(&r),
                Item::Assign(a) => self.bare_assignment(&a),
                Item::Declare {
                    keyword,
                    flags,
                    names,
                    text,
                } => self.declaration(&keyword, &flags, &names, &text),
                Item::Unset { flags, names, text } => {
                    self.declaration("unset", &flags, &names, &text)
                }
                Item::Test { text } => {
                    let first = text.split_whitespace().next().unwrap_or("[").to_owned();
                    self.reports.push(CommandReport {
                        text,
                        argv: vec![first],
                        verdict: CommandVerdict::ReadOnly,
                        why: "a test expression only reads".to_owned(),
                    });
                }
                Item::Function { .. } => {}
                Item::Hidden(inner) => self.script(&inner, depth + 1),
                Item::Problem(p) => self.problems.push(p),
            }
        }
    }

    /// A variable set for the rest of the script: only ordinary names, which no program reads
    /// from its environment, are proven harmless.
    pub(crate) fn bare_assignment(&mut self, a: &Assignment) {
        if !super::command::bare_variable_ok(&a.name) {
            self.problems.push(format!(
                "`{}` sets `{}`, which can change what later commands do",
                a.text, a.name
            ));
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
            if let Err(e) = check_read(target, self.env, &self.cwds) {
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
        BashAnalysis {
            verdict,
            commands: self.reports,
            writes: self.writes,
            named_writes: self.named_writes,
            unseen_writes: self.unseen_writes,
        }
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

/// Bash opens `/dev/tcp/host/port` and `/dev/udp/…` as sockets in redirections.
fn is_network(path: &Path) -> bool {
    path.starts_with("/dev/tcp") || path.starts_with("/dev/udp")
}
