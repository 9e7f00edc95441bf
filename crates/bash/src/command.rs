//! Judges one simple command: its assignments, the rules on every wrapper level, what it runs
//! inline (`sh -c`, `find -exec`), and whether it is proven read-only.

use std::borrow::Cow;
use std::path::PathBuf;

use foldhash::HashSet;

use super::analyser::{Analyser, MAX_NESTING};
use super::bindings::harmless_in_environment;
use super::evaluated::{inert_variable_name, runs_code, substitutions_loose};
use super::paths::{Cwds, check_glob_listing, inside_workspace, locate};
use super::pattern::{Match, base};
use super::readonly::{self, Ctx};
use super::syntax::SimpleCommand;
use super::unproven::Unproven;
use super::word::Word;
use super::wrappers::{self, Inline, Unwrap};
use super::{CommandReport, CommandVerdict};

/// Wrappers inside wrappers deeper than this are not looked through: the command is refused.
const MAX_UNWRAP: usize = 16;

/// `NAME` of a word written `NAME=…` or `NAME+=…` (an assignment when it leads a command).
fn assignment_name(raw: &str) -> Option<&str> {
    let end = raw.find('=')?;
    let name = raw[..end].strip_suffix('+').unwrap_or(&raw[..end]);
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some(name)
}

/// System folders whose programs are the real ones: elsewhere `./ls` is not `ls`.
const SYSTEM_BIN: &[&str] = &["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

fn system_program(name: &str) -> bool {
    match name.rsplit_once('/') {
        None => true,
        Some((dir, _)) => SYSTEM_BIN.contains(&dir),
    }
}

/// The first matching rule of each kind, found while looking through wrappers.
#[derive(Default)]
struct RuleHits {
    deny: Option<(usize, String, bool)>,
    ask: Option<(usize, String)>,
}

impl Analyser<'_> {
    fn match_rules(&self, argv: &[Word], hits: &mut RuleHits) {
        self.match_view(argv, hits);
        // Only git with options before its subcommand reads differently to a rule.
        let global_options = argv
            .get(1)
            .is_some_and(|w| w.fixed().is_none_or(|v| v.starts_with('-')));
        if global_options && argv.first().and_then(Word::fixed).map(base) == Some("git") {
            for view in super::git::rule_views(argv) {
                self.match_view(&view, hits);
            }
        }
    }

    fn match_view(&self, argv: &[Word], hits: &mut RuleHits) {
        if hits.deny.is_none() {
            for (p, id) in &self.rules.deny {
                match p.match_words(argv, true) {
                    Match::Yes => hits.deny = Some((*id, p.to_string(), false)),
                    Match::Maybe => hits.deny = Some((*id, p.to_string(), true)),
                    Match::No => continue,
                }
                break;
            }
        }
        if hits.ask.is_none() {
            hits.ask = self
                .rules
                .ask
                .iter()
                .find(|(p, _)| p.match_words(argv, true) != Match::No)
                .map(|(p, id)| (*id, p.to_string()));
        }
    }

    /// The first allow rule that matches, with how many of the command's words it spells out.
    fn allow_rule(&self, argv: &[Word]) -> Option<(usize, String, usize)> {
        let base_ok = argv
            .first()
            .and_then(Word::fixed)
            .is_some_and(system_program);
        self.rules
            .allow
            .iter()
            .find(|(p, _)| p.match_words(argv, base_ok) == Match::Yes)
            .map(|(p, id)| (*id, p.to_string(), p.words().len()))
    }

    /// Judges one simple command; a folder it alone runs in (`env -C`, `make -C`) holds for
    /// it and what it runs, not for the commands after it.
    pub(crate) fn simple_command(
        &mut self,
        cmd: &SimpleCommand,
        functions: &HashSet<String>,
        depth: usize,
    ) {
        let outer = self.shifted_from.take();
        self.judge_simple_command(cmd, functions, depth);
        if let Some(cwds) = self.shifted_from.take() {
            self.cwds = cwds;
        }
        self.shifted_from = outer;
    }

    /// This command runs in `dir` (relative to where the script may be), or somewhere unknown.
    fn shift_cwds(&mut self, dir: Option<&Word>) {
        let located = dir.map(|dir| locate(dir, self.env, &self.cwds));
        let shifted = match (located, &self.cwds) {
            (Some(Ok(paths)), Cwds::Known(_)) => {
                let mut cwds = self.cwds.clone();
                cwds.add(paths);
                cwds
            }
            _ => Cwds::Unknown,
        };
        let before = std::mem::replace(&mut self.cwds, shifted);
        self.shifted_from.get_or_insert(before);
    }

    fn judge_simple_command(
        &mut self,
        cmd: &SimpleCommand,
        functions: &HashSet<String>,
        depth: usize,
    ) {
        if cmd.words.is_empty() {
            for a in &cmd.assignments {
                self.bare_assignment(a);
            }
            return;
        }
        let builtin = cmd
            .words
            .first()
            .and_then(Word::fixed)
            .filter(|name| !functions.contains(*name));
        let unproven = cmd
            .assignments
            .iter()
            .filter(|a| {
                !harmless_in_environment(&a.name)
                    && !builtin.is_some_and(|b| super::bindings::scoped_to_builtin(&a.name, b))
            })
            .map(|a| format!("it sets `{}` for the command", a.name))
            .collect();
        let job = Job {
            text: &cmd.text,
            functions: Some(functions),
            repeated: cmd.repeated,
            subshell: cmd.subshell,
            depth,
        };
        let mut words = self.expand_variables(&cmd.words);
        if self.glob_options_may_change() {
            // `shopt -s dotglob`, `GLOBIGNORE`: globs may match what the listing model
            // does not, so they are not expanded (their folders count as read whole).
            for w in words.to_mut().iter_mut().filter(|w| w.glob) {
                *w = Word::dynamic(&w.raw);
            }
        }
        self.judge(&job, words, unproven);
    }

    /// The words after the variables known here are expanded (`x=rm; $x -f y` is
    /// `rm -f y`); words that vanish leave the command as written, unknown.
    fn expand_variables<'w>(&self, words: &'w [Word]) -> Cow<'w, [Word]> {
        if self.vars.is_empty() || !words.iter().any(Word::refers_to_variables) {
            return Cow::Borrowed(words);
        }
        let lookup = |name: &str| self.vars.get(name).cloned();
        let expanded: Vec<Word> = words
            .iter()
            .flat_map(|w| {
                w.substitute(&lookup, self.split)
                    .unwrap_or_else(|| vec![w.clone()])
            })
            .collect();
        if expanded.is_empty() {
            Cow::Borrowed(words)
        } else {
            Cow::Owned(expanded)
        }
    }

    /// `words` are the command's as the parse holds them (copied only where the judging
    /// changes them: most commands are judged on the parse's own words).
    fn judge(&mut self, job: &Job, words: Cow<'_, [Word]>, mut unproven: Vec<String>) {
        for word in words.iter().filter(|w| w.glob) {
            if let Err(e) = check_glob_listing(word, self.env, &self.cwds, &self.reads) {
                unproven.push(format!("`{}`: the folders this glob lists: {e}", word.raw));
            }
        }
        let mut argv = words;
        // A reserved word in command position means tree-sitter-bash misread the syntax
        // (`! if …` parses as a command `if`); Bash runs what follows it.
        let mut keywords = 0;
        while let Some(word) = argv.get(keywords).and_then(Word::fixed) {
            if !reserved_word(word) {
                break;
            }
            // `function NAME {`: the name is syntax too.
            keywords += if word == "function" { 2 } else { 1 };
        }
        let keywords = keywords.min(argv.len());
        if keywords > 0 {
            unproven.push(format!(
                "`{}` is shell syntax the parser read as a command",
                argv[0].raw
            ));
            argv = without_first(argv, keywords);
            // After the misread keyword, `NAME=value` words are the command's assignments
            // (`then LANG=C touch f`): the command is what follows them.
            let assignments = argv
                .iter()
                .take_while(|word| assignment_name(&word.raw).is_some())
                .count();
            for word in &argv[..assignments] {
                if let Some(name) = assignment_name(&word.raw)
                    && !harmless_in_environment(name)
                {
                    unproven.push(format!("it sets `{name}` for the command"));
                }
            }
            argv = without_first(argv, assignments);
            if argv.is_empty() {
                self.reports.push(CommandReport {
                    text: job.text.to_owned(),
                    argv: Vec::new(),
                    verdict: CommandVerdict::Unproven,
                    why: format!("`{}`: {}", job.text, unproven.join("; ")),
                    reads_only: false,
                });
                return;
            }
        }
        let mut through: Vec<String> = Vec::new();
        let mut hits = RuleHits::default();
        let mut forced: Option<&'static str> = None;
        let mut runs_nothing: Option<(bool, &'static str)> = None;
        for step in 0..=MAX_UNWRAP {
            self.match_rules(&argv, &mut hits);
            let Some(name) = argv.first().and_then(Word::fixed).map(str::to_owned) else {
                break;
            };
            let name = base(&name).to_owned();
            let unwrapped = wrappers::unwrap(&name, &argv);
            if step == MAX_UNWRAP && !matches!(unwrapped, Unwrap::No) {
                // What the innermost wrapper runs is not looked at, so no deny rule reaches it.
                self.refuse(format!(
                    "`{}` runs commands through more than {MAX_UNWRAP} wrappers in a row; deeper ones are not analysed",
                    job.text
                ));
                break;
            }
            // `env -C sub cat ../.env`, `make -C sub`: this command's relative paths are
            // relative to that folder.
            let own_options = match &unwrapped {
                Unwrap::Inner { start, .. } => &argv[1..(*start).min(argv.len())],
                Unwrap::No => &argv[1..],
                _ => &[],
            };
            for dir in super::chdir::directories(&name, own_options) {
                self.shift_cwds(dir.as_ref());
            }
            // A wrapper may read its own operands (`xargs -a FILE`, `flock FILE`).
            if !matches!(unwrapped, Unwrap::No) {
                self.log_reads(&argv);
            }
            match unwrapped {
                Unwrap::No => break,
                Unwrap::Inner {
                    start,
                    assignments,
                    problem,
                    forced: f,
                } => {
                    unproven.extend(
                        assignments
                            .iter()
                            .filter(|a| !harmless_in_environment(a))
                            .map(|a| format!("`{name}` sets `{a}` for the command")),
                    );
                    unproven.extend(problem);
                    forced = forced.or(f);
                    through.push(name);
                    if start >= argv.len() {
                        runs_nothing = Some((false, "it has no command to run"));
                        break;
                    }
                    argv = without_first(argv, start);
                }
                Unwrap::Built {
                    argv: inner,
                    problem,
                } => {
                    unproven.extend(problem);
                    // `env -S` rebuilds its own argv: env is read again, not run twice.
                    if inner.first().and_then(Word::fixed).map(base) != Some(name.as_str()) {
                        through.push(name);
                    }
                    argv = Cow::Owned(inner);
                }
                Unwrap::Nothing { read_only, why } => {
                    runs_nothing = Some((read_only, why));
                    break;
                }
                Unwrap::Opaque(reason) => {
                    unproven.push(reason);
                    // The inner command cannot be located, but deny rules still reach any
                    // command-looking tail.
                    for k in 1..argv.len() {
                        if hits.deny.is_some() {
                            break;
                        }
                        let tail = RuleHits::default();
                        let mut tail_hits = tail;
                        self.match_rules(&argv[k..], &mut tail_hits);
                        hits.deny = tail_hits.deny;
                    }
                    // A word holding several words may be a script the program hands to a
                    // shell (`sg wheel -c 'rm x'`): analysed as one, so deny rules reach it.
                    let scripts: Vec<String> = argv[1..]
                        .iter()
                        .filter_map(Word::fixed)
                        .filter(|v| v.contains(char::is_whitespace))
                        .map(str::to_owned)
                        .collect();
                    for script in scripts {
                        self.script(&script, job.depth + 1);
                    }
                    break;
                }
            }
        }
        unproven.extend(self.evaluated_operands(job, &argv));
        unproven.extend(self.builtin_bindings(&argv, job.depth));
        let exec_reason = self.nested(job, &argv);
        // Where a `cd` takes the script decides what every later relative path names, whatever
        // allowed the `cd` (a rule, the mode) or refused it.
        let moved = self.follow_directory_change(job, &argv, through.is_empty());
        let mut proved = false;
        let mut reads_only = false;
        // The proof's reader check passed, having logged every read: no need to log them again.
        let mut reads_logged = false;
        let (verdict, why) = if let Some((id, pattern, maybe)) = hits.deny {
            let why = if maybe {
                format!(
                    "`{}` may run a command denied by rule Bash({pattern}): some of its words are not known statically",
                    job.text
                )
            } else {
                format!("`{}` is denied by rule Bash({pattern})", job.text)
            };
            (CommandVerdict::Denied(id), why)
        } else if let Some((id, pattern)) = hits.ask {
            (
                CommandVerdict::AskRule(id),
                format!("`{}` needs approval by rule Bash({pattern})", job.text),
            )
        } else {
            unproven.extend(forced.map(str::to_owned));
            if let Some(name) = argv.first().and_then(Word::fixed) {
                unproven.extend(readonly::hazard(base(name), &argv[1..]));
            }
            let allowed = self.allow_rule(&argv);
            let covered = allowed.as_ref().map_or(1, |(_, _, len)| *len);
            // Whether the command only reads is its own property, whatever rule allows it: the
            // runner options a rule's words cover (`Bash(npm --prefix x:*)`) still count.
            let rule_covers_hazards =
                covered > 1 && super::runners::hazard(&argv, 1, self.env, &self.cwds).is_some();
            unproven.extend(super::runners::hazard(&argv, covered, self.env, &self.cwds));
            let proof = (unproven.is_empty() && !rule_covers_hazards).then(|| {
                match (exec_reason, runs_nothing) {
                    (Some(r), _) => Err(r),
                    (None, Some((true, why))) => Ok(why.to_owned()),
                    (None, Some((false, why))) => Err(why.to_owned()),
                    (None, None) => match moved {
                        Some(moved) => moved,
                        None => {
                            let (proof, logged) =
                                self.prove_read_only(job, &argv, through.is_empty());
                            reads_logged = logged;
                            proof
                        }
                    }
                    .map_err(|unproven| unproven.to_string()),
                }
            });
            reads_only = proof.as_ref().is_some_and(Result::is_ok);
            match (unproven.is_empty(), allowed) {
                (false, _) => (
                    CommandVerdict::Unproven,
                    format!("`{}`: {}", job.text, unproven.join("; ")),
                ),
                (true, Some((id, pattern, _))) => (
                    CommandVerdict::AllowedByRule(id),
                    format!("allowed by rule Bash({pattern})"),
                ),
                // Nothing unproven and no rule: the proof was made.
                (true, None) => match proof {
                    Some(Ok(why)) => {
                        proved = true;
                        (CommandVerdict::ReadOnly, why)
                    }
                    Some(Err(r)) => (CommandVerdict::Unproven, format!("`{}`: {r}", job.text)),
                    None => (
                        CommandVerdict::Unproven,
                        format!("`{}`: not proven", job.text),
                    ),
                },
            }
        };
        if !matches!(
            verdict,
            CommandVerdict::ReadOnly | CommandVerdict::Denied(_)
        ) {
            self.argument_writes(job.text, &argv);
        }
        // Proven read-only or not, a walk that follows links reaches what they lead to.
        if !matches!(verdict, CommandVerdict::Denied(_)) {
            self.followed_links(job.text, &argv);
        }
        // A proof logged what the command reads; otherwise it is logged here, whatever the
        // verdict.
        if !proved && !reads_logged {
            self.log_reads(&argv);
        }
        let why = if through.is_empty() {
            why
        } else {
            format!("{why} (run through `{}`)", through.join("`, `"))
        };
        self.reports.push(CommandReport {
            text: job.text.to_owned(),
            argv: argv.iter().map(Word::display).collect(),
            verdict,
            why,
            reads_only,
        });
    }

    /// Logs what a known reader reads whatever its verdict (allowed by a rule, refused for a
    /// flag, run in bypassPermissions): Read rules and read guardrails reach it all the same.
    fn log_reads(&self, argv: &[Word]) {
        let Some(name) = argv.first().and_then(Word::fixed).map(base) else {
            return;
        };
        let ctx = Ctx {
            env: self.env,
            cwds: &self.cwds,
            reads: &self.reads,
        };
        if readonly::known(name)
            && readonly::logged_every_read(name, &readonly::check(name, &argv[1..], &ctx))
        {
            return;
        }
        // Any other program may read any word it is given (`cp .env x`, `xxd .env`,
        // `xargs -a .env`): each plain word, and the value of `--opt=value`, counts as a read.
        // So may a known reader whose check stopped before it logged them all.
        for word in &argv[1..] {
            let Some(v) = word.fixed() else { continue };
            let path = match v.split_once('=') {
                Some((opt, value)) if opt.starts_with('-') => value,
                // `-a.env`: a short option with its value attached.
                // Past the dash and the option letter, which may be any character (`-é`).
                _ if v.starts_with('-') && !v.starts_with("--") && v.chars().count() > 2 => {
                    let mut rest = v.chars();
                    rest.nth(1);
                    rest.as_str()
                }
                _ if v.starts_with('-') => continue,
                _ => v,
            };
            let mut candidate = Word::literal(path);
            candidate.tilde = word.tilde && path == v;
            super::paths::log_read(&candidate, false, self.env, &self.cwds, &self.reads);
        }
    }

    /// Analyses what the command runs inline, so that deny rules reach it whatever this
    /// command's own verdict; returns why the command itself needs an explicit allow rule.
    fn nested(&mut self, job: &Job, argv: &[Word]) -> Option<String> {
        let name = base(argv.first()?.fixed()?).to_owned();
        if name == "find" {
            self.find_exec(job, argv);
            return None;
        }
        if name == "git" {
            for script in super::git::config_scripts(argv) {
                self.script(&script, job.depth + 1);
            }
            return None;
        }
        match wrappers::inline_script(&name, argv) {
            Inline::No => None,
            // `eval`'s `cd` moves this shell, another shell's that shell.
            Inline::Script(script) if name == "eval" => {
                self.script(&script, job.depth + 1);
                Some("it runs a script; it needs an allow rule that names it".to_owned())
            }
            Inline::Script(script) => {
                self.in_subshell(|analyser| analyser.script(&script, job.depth + 1));
                Some("it runs a script; it needs an allow rule that names it".to_owned())
            }
            Inline::Unknown(reason) => Some(reason),
        }
    }

    /// Operands Bash evaluates as arithmetic: the names after `test -v`/`-R` (their
    /// subscripts) and every argument of `let`. What a literal operand would run is analysed
    /// (deny rules reach it); any operand not proven inert is a reason to ask.
    fn evaluated_operands(&mut self, job: &Job, argv: &[Word]) -> Vec<String> {
        let Some(name) = argv.first().and_then(Word::fixed).map(base) else {
            return Vec::new();
        };
        let operands: Vec<&Word> = match name {
            "test" | "[" => argv
                .windows(2)
                .filter(|w| matches!(w[0].fixed(), Some("-v" | "-R")))
                .map(|w| &w[1])
                .collect(),
            "let" => argv[1..].iter().collect(),
            // `trap ACTION SIGNAL…` runs ACTION later: a script like `eval`'s.
            "trap" => {
                let action = argv[1..]
                    .iter()
                    .find(|w| !w.fixed().is_some_and(|v| v.starts_with('-')));
                if let Some(script) = action.and_then(Word::fixed) {
                    self.script(script, job.depth + 1);
                }
                return Vec::new();
            }
            _ => return Vec::new(),
        };
        let mut reasons = Vec::new();
        for operand in operands {
            if name != "let" && operand.fixed().is_some_and(inert_variable_name) {
                continue;
            }
            reasons.push(format!(
                "`{name}` evaluates `{}` as arithmetic, which can run commands hidden in it",
                operand.raw
            ));
            if runs_code(operand.template()) {
                self.script(&format!(": {}", operand.template()), job.depth + 1);
            }
            for inner in substitutions_loose(operand.template()) {
                self.script(&inner, job.depth + 1);
            }
        }
        reasons
    }

    /// `find … -exec cmd {} ;`: each command is checked, with `{}` unknown.
    fn find_exec(&mut self, job: &Job, argv: &[Word]) {
        if job.depth > MAX_NESTING {
            self.refuse(format!(
                "`find -exec` is nested more than {MAX_NESTING} deep; deeper commands are not analysed"
            ));
            return;
        }
        let mut i = 1;
        while i < argv.len() {
            let is_exec = matches!(
                argv[i].fixed(),
                Some("-exec" | "-execdir" | "-ok" | "-okdir")
            );
            i += 1;
            if !is_exec {
                continue;
            }
            let mut inner = Vec::new();
            while let Some(w) = argv.get(i) {
                i += 1;
                if matches!(w.fixed(), Some(";" | "+")) {
                    break;
                }
                inner.push(if w.value.as_deref().is_some_and(|v| v.contains("{}")) {
                    Word::dynamic(&w.raw)
                } else {
                    w.clone()
                });
            }
            if inner.is_empty() {
                continue;
            }
            let nested = Job {
                text: job.text,
                functions: None,
                repeated: true,
                subshell: true,
                depth: job.depth + 1,
            };
            self.judge(&nested, Cow::Owned(inner), Vec::new());
        }
    }

    /// Proves the command read-only by its program's own check, and says whether that check
    /// logged every read the command makes.
    fn prove_read_only(
        &self,
        job: &Job,
        argv: &[Word],
        direct: bool,
    ) -> (Result<String, Unproven>, bool) {
        let name = match self.provable_name(job, argv, direct) {
            Ok(Provable::Program(name)) => name,
            Ok(Provable::Function(why)) => return (Ok(why), false),
            Err(unproven) => return (Err(unproven), false),
        };
        let ctx = Ctx {
            env: self.env,
            cwds: &self.cwds,
            reads: &self.reads,
        };
        let checked = readonly::check(name, &argv[1..], &ctx);
        let logged = readonly::logged_every_read(name, &checked);
        (checked.map(|()| "read-only".to_owned()), logged)
    }

    /// The program whose own check can prove the command read-only, or why the command is
    /// read-only without one (a function of the script, whose body is checked) or is not.
    fn provable_name<'w>(
        &self,
        job: &Job,
        argv: &'w [Word],
        direct: bool,
    ) -> Result<Provable<'w>, Unproven> {
        let first = argv.first().ok_or(Unproven::NoCommand)?;
        let name = first
            .fixed()
            .filter(|_| !first.tilde)
            .ok_or_else(|| Unproven::DynamicName(first.raw.clone()))?;
        if !system_program(name) {
            return Err(Unproven::OutsideBinFolders(name.to_owned()));
        }
        if direct && job.functions.is_some_and(|f| f.contains(name)) {
            return Ok(Provable::Function(format!(
                "calls `{name}`, a function defined in this script (its body is checked)"
            )));
        }
        Ok(Provable::Program(base(name)))
    }

    /// Follows a command that may change the shell's directory: `None` when it cannot (or a
    /// function of the script shadows it, which leaves the directory unknown), else whether
    /// the move is proven harmless. (A command whose name is not known statically is not
    /// followed: it is unproven, and like an interpreter it could read anything anyway.)
    fn follow_directory_change(
        &mut self,
        job: &Job,
        argv: &[Word],
        direct: bool,
    ) -> Option<Result<String, Unproven>> {
        let name = argv
            .first()
            .and_then(|first| first.fixed().filter(|_| !first.tilde))
            .map(base)?;
        if !matches!(name, "cd" | "pushd" | "popd") {
            return None;
        }
        if direct && job.functions.is_some_and(|f| f.contains(name)) {
            self.cwds = super::paths::Cwds::Unknown;
            return None;
        }
        if job.subshell {
            // Its folders count as places the script may be; where it loses track, the
            // commands after the subshell have not moved.
            let mut moved = None;
            self.in_subshell(|analyser| {
                moved = Some(analyser.change_dir(name, &argv[1..], job.repeated));
            });
            return moved;
        }
        Some(self.change_dir(name, &argv[1..], job.repeated))
    }

    /// A `cd` inside the workspace is harmless, but later relative paths must then be checked
    /// from the new directory as well as the old (the `cd` may fail). Whatever the answer, the
    /// directories later commands may run in are updated: a `cd` that a rule allows, or that
    /// leaves the workspace, moves the script all the same.
    fn change_dir(
        &mut self,
        name: &str,
        args: &[Word],
        repeated: bool,
    ) -> Result<String, Unproven> {
        if name == "popd" {
            // Where it returns only the directory stack knows.
            self.cwds = super::paths::Cwds::Unknown;
            return Ok("returns to an earlier directory".to_owned());
        }
        let (reached, verdict) = match self.directory_change(name, args) {
            Ok(paths) => (Some(paths), Ok(())),
            Err((paths, unproven)) => (paths, Err(unproven)),
        };
        match reached {
            Some(paths) if !repeated => self.cwds.add(paths),
            _ => self.cwds = super::paths::Cwds::Unknown,
        }
        verdict.map(|()| "changes directory inside the workspace".to_owned())
    }

    /// The folders a `cd`/`pushd` may move the script to: `Ok` when all are inside the
    /// workspace; else why it is not proven, with the folders when they are known.
    fn directory_change(
        &self,
        name: &str,
        args: &[Word],
    ) -> Result<Vec<PathBuf>, (Option<Vec<PathBuf>>, Unproven)> {
        let targets: Vec<&Word> = args
            .iter()
            .filter(|w| !matches!(w.fixed(), Some("-L" | "-P" | "-e" | "-@" | "--" | "-n")))
            .collect();
        let [target] = targets.as_slice() else {
            return Err((None, Unproven::DirectoryCount(name.to_owned())));
        };
        if target
            .fixed()
            .is_some_and(|v| v == "-" || v.starts_with('+') || v.starts_with('-'))
        {
            return Err((
                None,
                Unproven::UnknownDirectory {
                    name: name.to_owned(),
                    target: target.raw.clone(),
                },
            ));
        }
        let paths = locate(target, self.env, &self.cwds).map_err(|unproven| (None, unproven))?;
        if let Some(outside) = paths.iter().find(|p| !inside_workspace(p, self.env)) {
            let unproven = Unproven::LeavesWorkspace {
                name: name.to_owned(),
                outside: outside.clone(),
            };
            return Err((Some(paths), unproven));
        }
        Ok(paths)
    }

    /// `export`, `declare`, `local`, `readonly`, `typeset` and `unset`.
    pub(crate) fn declaration(
        &mut self,
        keyword: &str,
        flags: &[Word],
        names: &[String],
        text: &str,
        depth: usize,
    ) {
        let mut argv = vec![Word::literal(keyword)];
        argv.extend(flags.iter().cloned());
        argv.extend(names.iter().map(|n| Word::literal(n)));
        let mut hits = RuleHits::default();
        self.match_rules(&argv, &mut hits);
        let allowed_flags = if keyword == "unset" {
            "vfn"
        } else {
            "aArxglup"
        };
        let mut reasons: Vec<String> = Vec::new();
        for f in flags {
            let letters = f.fixed().map(|v| &v[1..]).unwrap_or("?");
            if let Some(bad) = letters.chars().find(|c| !allowed_flags.contains(*c)) {
                reasons.push(format!("`{keyword} -{bad}` is not known to be harmless"));
            }
        }
        for n in names {
            reasons.extend(self.binding(keyword, &Word::literal(n), depth));
        }
        let (verdict, why) = match (hits.deny, hits.ask) {
            (Some((id, p, _)), _) => (
                CommandVerdict::Denied(id),
                format!("`{text}` is denied by rule Bash({p})"),
            ),
            (None, Some((id, p))) => (
                CommandVerdict::AskRule(id),
                format!("`{text}` needs approval by rule Bash({p})"),
            ),
            (None, None) if reasons.is_empty() => (
                CommandVerdict::ReadOnly,
                "only sets shell variables".to_owned(),
            ),
            (None, None) => (
                CommandVerdict::Unproven,
                format!("`{text}`: {}", reasons.join("; ")),
            ),
        };
        self.reports.push(CommandReport {
            text: text.to_owned(),
            argv: argv.iter().map(Word::display).collect(),
            reads_only: verdict == CommandVerdict::ReadOnly,
            verdict,
            why,
        });
    }
}

/// Bash's reserved words: never a command name in a correct parse. tree-sitter-bash can glue
/// several into one word (`{ {`).
fn reserved_word(word: &str) -> bool {
    !word.trim().is_empty() && word.split_whitespace().all(reserved)
}

pub(super) fn reserved(word: &str) -> bool {
    matches!(
        word,
        "if" | "then"
            | "else"
            | "elif"
            | "fi"
            | "do"
            | "done"
            | "case"
            | "esac"
            | "while"
            | "until"
            | "for"
            | "in"
            | "select"
            | "function"
            | "{"
            | "}"
            | "!"
            | "[["
            | "]]"
    )
}

/// The command being judged and where it stands.
struct Job<'j> {
    text: &'j str,
    /// Functions defined in the script, for direct calls; `None` when run by another program
    /// (`find -exec f` cannot call a shell function).
    functions: Option<&'j HashSet<String>>,
    repeated: bool,
    /// See [`SimpleCommand::subshell`].
    subshell: bool,
    depth: usize,
}

/// The words after the first `n`: a borrowed list is cut, not copied.
fn without_first(words: Cow<'_, [Word]>, n: usize) -> Cow<'_, [Word]> {
    match words {
        Cow::Borrowed(words) => Cow::Borrowed(words.get(n..).unwrap_or_default()),
        Cow::Owned(mut words) => {
            words.drain(..n.min(words.len()));
            Cow::Owned(words)
        }
    }
}

/// What a read-only proof rests on (see `provable_name`).
enum Provable<'w> {
    /// The base name of a program in a system folder, checked by its own rules.
    Program(&'w str),
    /// A function of the script: the reason, since its body is checked as it is walked.
    Function(String),
}
