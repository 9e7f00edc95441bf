//! Walks a script's items in order, keeps what the analysis has found so far (reports, writes,
//! problems, possible working directories) and folds it into one verdict.

use std::path::{Path, PathBuf};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::bindings::{builtin_bindings, code_in, evaluated_part, judge_name};
use super::paths::{Cwds, ReadLog, check_read, escape_through_link, lexical, locate};
use super::syntax::{Assignment, Item, Redirect};
use super::word::{Value, Word};
use super::{BashAnalysis, BashEnv, BashRules, BashVerdict, CommandReport, CommandVerdict, Script};

use super::bounds::MAX_ANALYSED_BYTES;
pub(crate) use super::bounds::MAX_NESTING;

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
    /// Writes and walks a committed link leads out of the workspace (see `BashAnalysis`).
    pub link_escapes: Vec<String>,
    /// Things always refused, whatever the rules (`/dev/tcp/…`).
    pub refusals: Vec<String>,
    /// Script-level reasons the script is not proven safe.
    pub problems: Vec<String>,
    pub cwds: Cwds,
    /// Where the script is while one command runs in a folder of its own (`env -C`).
    pub shifted_from: Option<Cwds>,
    pub reads: ReadLog,
    /// Bytes of script analysed so far, hidden ones included (see `bounds`).
    analysed_bytes: usize,
    /// Whether the call may change how globs match (see `glob_options_may_change`).
    glob_options: std::cell::OnceCell<bool>,
    /// Variables of the script being walked whose value is known here (see `trackable`).
    pub vars: HashMap<String, Value>,
    /// The names whose every binding in the script is one the analyser sees the value of.
    tracked: HashSet<String>,
    /// `IFS` is the default, so unquoted references split at blanks.
    pub split: bool,
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
            link_escapes: Vec::new(),
            refusals: Vec::new(),
            problems: Vec::new(),
            cwds: Cwds::new(env.cwd),
            shifted_from: None,
            reads: ReadLog::default(),
            analysed_bytes: 0,
            glob_options: std::cell::OnceCell::new(),
            vars: HashMap::new(),
            tracked: HashSet::new(),
            split: true,
        }
    }

    pub fn script(&mut self, src: &str, depth: usize) {
        if depth > MAX_NESTING || tollgate_base::stack_is_low() {
            self.refuse(format!(
                "shell scripts are nested too deep to analyse (more than {MAX_NESTING} scripts inside scripts: `sh -c` inside `sh -c`, substitutions in evaluated text …; or more than the stack holds)"
            ));
            return;
        }
        self.analysed_bytes += src.len();
        if self.analysed_bytes > MAX_ANALYSED_BYTES {
            self.refuse(format!(
                "the command holds more than {MAX_ANALYSED_BYTES} bytes of scripts in all, nested ones counted at each level; the rest is not analysed"
            ));
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
        // Each shell (this script, `sh -c …` inside it) has its own variables.
        let outer = (
            std::mem::take(&mut self.vars),
            std::mem::replace(&mut self.tracked, trackable(src, &items)),
            std::mem::replace(&mut self.split, !src.contains("IFS")),
        );
        for item in items.iter() {
            match item {
                Item::Command(cmd) => self.simple_command(cmd, &functions, depth),
                Item::Redirect(r) => self.redirect(r),
                Item::Assign(a) => {
                    self.bare_assignment(a);
                    self.bind(a);
                }
                Item::LoopVar(a) => self.bind(a),
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
                        reads_only: true,
                    });
                }
                Item::Function { .. } => {}
                Item::Hidden(inner) => {
                    self.in_subshell(|analyser| analyser.script(inner, depth + 1))
                }
                Item::Problem(p) => self.problems.push(p.clone()),
                Item::Refused(reason) => self.refuse(reason.clone()),
            }
        }
        (self.vars, self.tracked, self.split) = outer;
    }

    /// A refusal for something past the analyser's bounds: a deny in every mode, given once
    /// however often the bound is met.
    pub(crate) fn refuse(&mut self, reason: String) {
        if !self.refusals.contains(&reason) {
            self.refusals.push(reason);
        }
    }

    /// Analyses a script that may run in another shell process (a substitution, `sh -c`) or
    /// is another reading of this one (a script that does not parse, read piece by piece):
    /// the folders it may move to count as places this shell may be too, but where it loses
    /// track (`v=$(cd "$d" && pwd)`), this shell has not moved.
    pub(crate) fn in_subshell(&mut self, analyse: impl FnOnce(&mut Self)) {
        let before = self.cwds.clone();
        analyse(self);
        if matches!(self.cwds, Cwds::Unknown) {
            self.cwds = before;
        }
    }

    /// The call may change how globs match (`shopt`, `GLOBIGNORE`, `BASHOPTS`): asked for
    /// every command, the source is searched once.
    pub(crate) fn glob_options_may_change(&self) -> bool {
        *self.glob_options.get_or_init(|| {
            let source = self.parsed.source();
            ["shopt", "GLOBIGNORE", "BASHOPTS"]
                .iter()
                .any(|name| source.contains(name))
        })
    }

    /// Records what a binding leaves in its variable: the value when it is known and the
    /// name tracked, else nothing (later references stay unknown).
    fn bind(&mut self, a: &Assignment) {
        match &a.value {
            Some(v) if self.tracked.contains(&a.name) => {
                self.vars.insert(a.name.clone(), v.clone());
            }
            _ => {
                self.vars.remove(&a.name);
            }
        }
    }

    /// A variable set for the rest of the script: only ordinary names, which no program reads
    /// from its environment, are proven harmless (its subscript is the walker's).
    pub(crate) fn bare_assignment(&mut self, a: &Assignment) {
        let name = a.name.split_once('[').map_or(a.name.as_str(), |(n, _)| n);
        if let Err(reason) = judge_name(&a.text, &Word::literal(name)) {
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
            // Bash writes to the one name it matches, a committed dangling link included.
            let why = format!("`{}`: a glob as a redirection target", r.text);
            if writes {
                self.unseen_writes.push(why.clone());
            }
            self.problems.push(why);
            return;
        }
        if !writes {
            if let Err(e) = check_read(target, self.env, &self.cwds, &self.reads) {
                self.problems.push(format!("`{}`: {e}", r.text));
            }
            return;
        }
        if let Some(escape) = escape_through_link(target, self.env, &self.cwds) {
            self.link_escapes
                .push(format!("`{}` writes {escape}", r.text));
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
            // Where such a write lands, a committed link may lead it (`f=src/dang; echo x >
            // "$f"`): no mode's say-so reaches it, as for a file an archive names.
            Err(e) => {
                let why = format!("`{}` writes to a file not known statically: {e}", r.text);
                self.unseen_writes.push(why.clone());
                self.problems.push(why);
            }
        }
    }

    pub fn finish(mut self) -> BashAnalysis {
        let (reads, read_escapes) = std::mem::take(&mut self.reads).into_parts();
        self.link_escapes.extend(read_escapes);
        let verdict = self.verdict();
        let named_denied = self.named_denied();
        let only_reads = self.refusals.is_empty()
            && self.problems.is_empty()
            && self.writes.is_empty()
            && self.reports.iter().all(|report| report.reads_only);
        BashAnalysis {
            only_reads,
            verdict,
            commands: self.reports,
            writes: self.writes,
            reads,
            named_denied,
            named_writes: self.named_writes,
            unseen_writes: self.unseen_writes,
            link_escapes: self.link_escapes,
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

/// Builtins that can bind a variable whose name the analyser may not see (`read`, `eval`,
/// `printf -v`, `declare "$n"=…`), or run code later (`trap`, `source`).
const BINDERS: &[&str] = &[
    "eval",
    "source",
    ".",
    "read",
    "mapfile",
    "readarray",
    "printf",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "let",
    "getopts",
    "wait",
    "unset",
    "builtin",
    "command",
    "exec",
    "enable",
    "trap",
    "shopt",
    "alias",
    "coproc",
    "time",
    "select",
];

/// The variables of `src` whose values the analyser may know: every binding of each is an
/// assignment or `for` head with a literal value, seen in order. Nothing is tracked in a
/// script with functions (their bodies run later), declarations, arithmetic, indirection,
/// hidden scripts or a command that may bind names it computes.
fn trackable(src: &str, items: &[Item]) -> HashSet<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for item in items {
        match item {
            Item::Function { .. } | Item::Declare { .. } | Item::Unset { .. } | Item::Hidden(_) => {
                return HashSet::new();
            }
            Item::Command(cmd) => {
                if let Some(first) = cmd.words.first()
                    && first
                        .fixed()
                        .is_none_or(|name| BINDERS.contains(&super::pattern::base(name)))
                {
                    return HashSet::new();
                }
            }
            Item::Assign(a) | Item::LoopVar(a) if a.value.is_some() => {
                *counts.entry(a.name.as_str()).or_default() += 1;
            }
            _ => {}
        }
    }
    if counts.is_empty() || src.contains("((") || src.contains("${!") {
        return HashSet::new();
    }
    counts
        .into_iter()
        .filter(|(name, count)| binding_occurrences(src, name) == *count)
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// How often `name` appears in `src` other than as a plain reference (`$x`, `${x}`,
/// `${x[@]}`, `${x[*]}`): every binding, and anything else that merely spells it.
fn binding_occurrences(src: &str, name: &str) -> usize {
    let b = src.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut count = 0;
    let mut from = 0;
    while let Some(pos) = src.get(from..).and_then(|rest| rest.find(name)) {
        let i = from + pos;
        from = i + name.len();
        if (i > 0 && ident(b[i - 1])) || b.get(from).is_some_and(|&c| ident(c)) {
            continue;
        }
        let after = &src[from..];
        let read = (i > 0 && b[i - 1] == b'$')
            || (i > 1
                && b[i - 1] == b'{'
                && b[i - 2] == b'$'
                && (after.starts_with('}')
                    || after.starts_with("[@]}")
                    || after.starts_with("[*]}")));
        if !read {
            count += 1;
        }
    }
    count
}

/// Bash opens `/dev/tcp/host/port` and `/dev/udp/…` as sockets in redirections.
fn is_network(path: &Path) -> bool {
    path.starts_with("/dev/tcp") || path.starts_with("/dev/udp")
}

/// Variable bindings: the table and the reading of subscripts are `bindings`'; what a
/// subscript or a callback would run is analysed here.
impl Analyser<'_> {
    /// Judges one bound name: what its subscript (or a name not known statically) would run
    /// is analysed, so deny rules reach it; returns why the binding is not proven harmless.
    pub(crate) fn binding(&mut self, via: &str, name: &Word, depth: usize) -> Option<String> {
        if let Some(text) = evaluated_part(name) {
            for script in code_in(&text) {
                self.script(&script, depth + 1);
            }
        }
        judge_name(via, name).err()
    }

    /// Why a call of a variable-binding builtin (`read`, `mapfile -C`, `wait -p`, `printf -v`,
    /// `getopts`) is not proven harmless; the code it would run is analysed.
    pub(crate) fn builtin_bindings(&mut self, argv: &[Word], depth: usize) -> Vec<String> {
        let Some(name) = argv.first().and_then(Word::fixed).map(super::pattern::base) else {
            return Vec::new();
        };
        let Some(bound) = builtin_bindings(name, &argv[1..]) else {
            return Vec::new();
        };
        let mut reasons: Vec<String> = bound.problem.into_iter().collect();
        for callback in &bound.code {
            reasons.push(format!(
                "`{name} -C {}` runs its callback as shell code",
                callback.raw
            ));
            match callback.fixed() {
                Some(script) => self.script(script, depth + 1),
                None => {
                    for script in code_in(callback.template()) {
                        self.script(&script, depth + 1);
                    }
                }
            }
        }
        for bound_name in &bound.names {
            reasons.extend(self.binding(name, bound_name, depth));
        }
        reasons
    }
}
