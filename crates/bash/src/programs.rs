//! What the analyser knows of each program: one definition a program. A program it can prove
//! read-only is a [`Program`]: its names, how its arguments are read, the options that write
//! or run something whatever rule allows the program, what it reads in words, and commands it
//! must prove or ask about. Every program, read-only or not ([`OtherProgram`]: `cp`, `tar`,
//! `make`, `env`), has its [`Effects`]: how it reads long options, the paths it writes, the
//! options that make it run in another folder, the options that make its walk follow links,
//! and commands showing each. The proof (`readonly`), the option hazards, the argument writes
//! (`arg_writes`), the folder a command runs in (`chdir`), the link-following walks
//! (`follow`), the tables in `docs/bash.md` and the tests below all read these definitions, so
//! a program is added, documented and tested in one place. Data, its lookup and its rendering
//! only; the readers live in those modules.

use std::fmt::Write as _;
use std::sync::OnceLock;

use super::git;
use super::long_options::LongOptions;
use super::markdown::{cell, code_list};

use Operands::{AtMost, Ignored, Paths, PatternThenPaths};
use Proof::{Binds, Data, Options, Own};

/// One program, or a family that shares every answer (`md5sum`, `sha256sum`, …).
pub(crate) struct Program {
    /// The names it runs under; the first is the one the docs lead with.
    pub names: &'static [&'static str],
    pub proof: Proof,
    pub hazards: Hazards,
    /// What it reads, for the docs: a sentence fragment.
    pub reads: &'static str,
    /// Commands proven read-only in the test workspace without any rule.
    pub proven: &'static [&'static str],
    /// Commands of it that are not proven, so they ask without a rule.
    pub asked: &'static [&'static str],
    pub effects: Effects,
}

/// A program the analyser never proves read-only but knows the effects of, for the commands a
/// rule or the mode runs (`cp`, `tar -x`, `make -C DIR`, `env -C DIR`).
pub(crate) struct OtherProgram {
    /// The names it runs under; the first is the one the docs lead with.
    pub names: &'static [&'static str],
    pub effects: Effects,
}

/// What a program does besides what its proof reads, whatever the verdict: a rule or the mode
/// may run what no proof allowed, and a walk follows links whoever allowed it.
pub(crate) struct Effects {
    /// How it reads `--name`: its hazard, unpacking and link-following options are matched so.
    /// A program whose parser is not known here is read as taking prefixes (fail closed).
    pub long_options: LongOptions,
    /// Its option parser, for the docs; empty when not known.
    pub parser: &'static str,
    pub writes: Writes,
    pub runs_in: RunsIn,
    /// When its walk below its folder operands follows the links it meets.
    pub follows: Option<Follow>,
    /// Its check logs every read before it judges anything (git's logs its operands first),
    /// so a refused check has logged them all; any other stops at what it cannot follow.
    pub logs_reads_first: bool,
    /// Commands of it and what the analyser must find they do, run by the tests below.
    pub examples: &'static [Example],
}

/// What a program writes through its arguments, for a command run by a rule or the mode.
pub(crate) struct Writes {
    /// Its operands are files it creates, changes or removes (`cp a b`, `rm f`, `sed -i`).
    pub operands: bool,
    /// Options whose value is a file it writes (`sort -o`, `curl -o`), matched as written.
    pub output_options: &'static [&'static str],
    /// The language of the program text it runs, which may name files it writes (sed's `w`,
    /// awk's `>`).
    pub script: Option<Script>,
    /// When it writes files whose names only its input knows (archives, patches).
    pub unpacks: Unpacks,
    /// It makes git repositories and writes its work tree from its own content; which
    /// subcommands and options do is `git`'s list.
    pub repositories: bool,
}

/// A language of program text whose reader (`sed`) can tell a write.
#[derive(Clone, Copy)]
pub(crate) enum Script {
    Sed,
    Awk,
}

/// When a program writes files whose names only an archive or a patch knows.
pub(crate) enum Unpacks {
    Never,
    Always,
    /// Unless one of these words is given (`unzip -l` lists).
    Unless(&'static [&'static str]),
    /// With one of `long` (as the program reads long options) or a single-dash cluster holding
    /// one of `letters`; with `bundled`, also a first word without a dash holding one
    /// (`tar xzf a.tgz`).
    Mode {
        long: &'static [&'static str],
        letters: &'static [char],
        bundled: bool,
    },
    /// When its first word is one of these commands (`7z x`).
    Command(&'static [&'static str]),
    /// When its first word, dashes trimmed, holds this letter (`ar x`, `ar -x`).
    Key(char),
}

/// The options by which a program changes folder before it works (`make -C DIR`): relative
/// paths of that command are relative to that folder. Matched as written: short options take
/// their value attached (`-Csub`) or next, long ones after `=` or next.
pub(crate) struct RunsIn {
    pub short: &'static [&'static str],
    pub long: &'static [&'static str],
    /// Ones its own reader follows (git's `-C`), listed for the docs only.
    pub own: &'static [&'static str],
}

/// When a walk below a program's folder operands follows links (`ls -LR`, `cp -rL`).
pub(crate) struct Follow {
    /// An option of each list must be given (`cp`: a recursive one, and `-L`).
    pub all_of: &'static [&'static [&'static str]],
    /// None of these may be given (`zip -y` stores links as links).
    pub unless: &'static [&'static str],
    /// Old-style bundled letters as its first word holding this one count too (`tar chf`).
    pub bundled: Option<char>,
    pub access: Access,
}

/// What a link-following walk does to what it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Reads,
    /// Changes what it reaches (`chmod -R -L`).
    Writes,
}

/// A command and what the analyser must find it does, in the test workspace (`/ws`).
pub(crate) enum Example {
    /// Run by a rule allowing its program, it names exactly these paths as written.
    Writes(&'static str, &'static [&'static str]),
    /// Run by a rule, it writes files whose names are not known (`tar x`, `git init`).
    WritesUnseen(&'static str),
    /// It reads this path: its relative operands are read in the folder it runs in.
    Reads(&'static str, &'static str),
    /// Its walk below `src` follows the link found there (`true`) or not.
    Follows(&'static str, bool),
}

pub(crate) const NO_WRITES: Writes = Writes {
    operands: false,
    output_options: NONE,
    script: None,
    unpacks: Unpacks::Never,
    repositories: false,
};

const NO_FOLDER: RunsIn = RunsIn {
    short: NONE,
    long: NONE,
    own: NONE,
};

/// A program that writes nothing, runs where it is started, follows no link, and whose
/// parser is not known here.
const EFFECTS: Effects = Effects {
    long_options: LongOptions::Prefix,
    parser: "",
    writes: NO_WRITES,
    runs_in: NO_FOLDER,
    follows: None,
    logs_reads_first: false,
    examples: &[],
};

const fn reads_following(all_of: &'static [&'static [&'static str]]) -> Option<Follow> {
    Some(Follow {
        all_of,
        unless: NONE,
        bundled: None,
        access: Access::Reads,
    })
}

const fn runs_in(short: &'static [&'static str], long: &'static [&'static str]) -> RunsIn {
    RunsIn {
        short,
        long,
        own: NONE,
    }
}

const WRITES_OPERANDS: Writes = Writes {
    operands: true,
    ..NO_WRITES
};

const RECURSIVE: &[&str] = &["-r", "-R", "--recursive"];
const GETOPT: &str = "getopt_long";
const ARGP: &str = "argp";
const UNVERIFIED: &str = "its own; whether it takes prefixes is not checked, so a prefix counts";

/// How a program is proven read-only.
pub(crate) enum Proof {
    /// Its arguments are data: no value can make it write, read or run anything.
    Data,
    /// It binds the variables it names (`read`, `mapfile`): proven when every name is
    /// harmless and nothing runs as code (`bindings`).
    Binds,
    /// Its options and operands are read by a table.
    Options(Spec),
    /// A reader of its own, in `readonly` or `git`: its language is more than options.
    Own(Checker),
}

/// The programs whose arguments need a reader of their own.
#[derive(Clone, Copy)]
pub(crate) enum Checker {
    /// `printf -v NAME` binds; any other `printf` prints.
    Printf,
    Git,
    Sed,
    Awk,
    Find,
    Jq,
    Set,
    Date,
    /// Only without arguments: with one it sets the name.
    Hostname,
}

/// How a command's operands are read.
#[derive(Clone, Copy)]
pub(crate) enum Operands {
    /// Files read.
    Paths,
    /// A pattern (unless given by a flag), then files.
    PatternThenPaths,
    /// At most this many files (`uniq in out` writes `out`).
    AtMost(usize),
    /// Not paths: nothing they say can change what the command does.
    Ignored,
}

/// A GNU-style option table. `short` letters take no value, `short_val` letters take one;
/// `long` names take no value (an `=value` is tolerated), `long_val` names need one.
pub(crate) struct Spec {
    pub short: &'static str,
    pub short_val: &'static str,
    pub long: &'static [&'static str],
    pub long_val: &'static [&'static str],
    /// Options (`-f`, `--file`) whose value is a file read.
    pub path_opts: &'static [&'static str],
    /// Options that supply the pattern, so the first operand is a file.
    pub pattern_opts: &'static [&'static str],
    /// `-5` means a count (head, tail, grep context).
    pub numeric: bool,
    pub operands: Operands,
    /// No option of this command writes or runs anything, so a glob or expansion that turns
    /// into an option is harmless.
    pub options_harmless: bool,
    /// Options that take the names of the files to read from a file (`--files0-from`,
    /// `md5sum -c`): what is read then cannot be known here.
    pub names_from_file: &'static [&'static str],
    /// Options that make it read everything below a folder operand (`grep -r`); `&["*"]`
    /// when it always does (`rg`).
    pub recursive: &'static [&'static str],
}

const NONE: &[&str] = &[];

const fn spec(short: &'static str, operands: Operands) -> Spec {
    Spec {
        short,
        short_val: "",
        long: NONE,
        long_val: NONE,
        path_opts: NONE,
        pattern_opts: NONE,
        numeric: false,
        operands,
        options_harmless: true,
        names_from_file: NONE,
        recursive: NONE,
    }
}

/// Options that write files or run programs although a rule allows the program: an allow
/// rule such as `Bash(sort:*)` is taken to allow sorting, not `-o FILE`.
pub(crate) enum Hazards {
    /// It has none; a word that expands to an option is harmless too.
    None,
    Table(OptionHazards),
    /// git's global options and its options after the subcommand (`git` owns both lists).
    Git,
}

/// A program's options that write files or run programs, and how it reads them.
pub(crate) struct OptionHazards {
    /// Short options that take a value, which ends a cluster (`sort -ko` is `-k o`).
    pub valued: &'static str,
    /// `-x` entries are letters of a cluster, `--long` entries are read as the program reads
    /// them, other single-dash words (`find -delete`) are whole words.
    pub options: &'static [&'static str],
}

/// A definition, of a program proven read-only or of another.
#[derive(Clone, Copy)]
enum Definition {
    ReadOnly(&'static Program),
    Other(&'static OtherProgram),
}

impl Definition {
    fn names(self) -> &'static [&'static str] {
        match self {
            Definition::ReadOnly(program) => program.names,
            Definition::Other(program) => program.names,
        }
    }

    fn effects(self) -> &'static Effects {
        match self {
            Definition::ReadOnly(program) => &program.effects,
            Definition::Other(program) => &program.effects,
        }
    }
}

/// Every definition, read-only ones first, in the order the docs list them.
fn definitions() -> impl Iterator<Item = Definition> {
    PROGRAMS
        .iter()
        .map(Definition::ReadOnly)
        .chain(OTHER_PROGRAMS.iter().map(Definition::Other))
}

/// Every name of every definition, sorted: built once, so that a lookup, made for every
/// command of every call, is a binary search that allocates nothing.
fn index() -> &'static [(&'static str, Definition)] {
    static INDEX: OnceLock<Vec<(&'static str, Definition)>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index: Vec<(&'static str, Definition)> = definitions()
            .flat_map(|d| d.names().iter().map(move |name| (*name, d)))
            .collect();
        index.sort_unstable_by_key(|(name, _)| *name);
        index
    })
}

fn definition(name: &str) -> Option<Definition> {
    let index = index();
    let at = index.binary_search_by_key(&name, |(n, _)| *n).ok()?;
    Some(index[at].1)
}

/// The definition of the program called `name` (a base name), if it is one the analyser
/// can prove read-only.
pub(crate) fn lookup(name: &str) -> Option<&'static Program> {
    match definition(name)? {
        Definition::ReadOnly(program) => Some(program),
        Definition::Other(_) => None,
    }
}

/// What the program called `name` (a base name) does besides reading, if the analyser knows.
pub(crate) fn effects(name: &str) -> Option<&'static Effects> {
    definition(name).map(Definition::effects)
}

/// The Markdown table of every program the analyser can prove read-only, for `docs/bash.md`.
pub fn read_only_table() -> String {
    let mut table = String::from(
        "| program | what it reads | refused whatever rule allows it | proven · asked |\n|---|---|---|---|\n",
    );
    for program in PROGRAMS {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} |",
            cell(&code_list(program.names, " ")),
            cell(&reads_text(program)),
            cell(&hazards_text(program)),
            cell(&examples_text(program)),
        );
    }
    table
}

/// What the program reads, with the lists its reader owns.
fn reads_text(program: &Program) -> String {
    match program.proof {
        Proof::Own(Checker::Git) => {
            format!("{}: {}", program.reads, code_list(git::READ_ONLY, ", "))
        }
        _ => program.reads.to_owned(),
    }
}

fn hazards_text(program: &Program) -> String {
    match &program.hazards {
        Hazards::None => "—".to_owned(),
        Hazards::Table(table) => {
            let prefixes = program.effects.long_options == LongOptions::Prefix
                && table.options.iter().any(|o| o.starts_with("--"));
            let mut text = code_list(table.options, ", ");
            if prefixes {
                text.push_str(", and any prefix of a long one");
            }
            text
        }
        Hazards::Git => format!(
            "before the subcommand {}; after it {} and any prefix of them, `git grep -O`",
            code_list(git::DANGEROUS_GLOBAL, ", "),
            code_list(git::DANGEROUS_LONG, ", "),
        ),
    }
}

fn examples_text(program: &Program) -> String {
    let side = |commands: &[&str]| match commands {
        [] => "—".to_owned(),
        commands => code_list(commands, ", "),
    };
    format!("{} · {}", side(program.proven), side(program.asked))
}

/// The Markdown table of what each program writes, where it runs and which walks of it
/// follow links, with commands showing each, for `docs/bash.md`.
pub fn program_effects_table() -> String {
    let mut table = String::from(
        "| program | long options | writes, run by a rule | runs in the folder of | follows links below its folders with | for example |\n|---|---|---|---|---|---|\n",
    );
    for definition in definitions() {
        let effects = definition.effects();
        let (writes, runs_in, follows) = (
            writes_text(&effects.writes),
            runs_in_text(&effects.runs_in),
            follow_text(effects.follows.as_ref()),
        );
        if [&writes, &runs_in, &follows].iter().all(|t| *t == "—") {
            continue;
        }
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&code_list(definition.names(), " ")),
            match effects.parser {
                "" => "not known: in doubt, any prefix",
                _ => syntax_text(effects.long_options),
            },
            cell(&writes),
            cell(&runs_in),
            cell(&follows),
            cell(&effect_examples_text(effects.examples)),
        );
    }
    table
}

/// The Markdown table of how each program whose options the analyser matches reads long
/// options, and which of its options are matched so, for `docs/bash.md`.
pub fn option_syntax_table() -> String {
    let mut table = String::from(
        "| program | its parser | long options | its options matched so |\n|---|---|---|---|\n",
    );
    for definition in definitions() {
        let effects = definition.effects();
        let hazards = match definition {
            Definition::ReadOnly(program) => &program.hazards,
            Definition::Other(_) => &Hazards::None,
        };
        let mut matched: Vec<String> = Vec::new();
        match hazards {
            Hazards::None => {}
            Hazards::Table(table) => matched.push(code_list(table.options, ", ")),
            Hazards::Git => matched.push(format!(
                "after the subcommand {}, `git grep -O` in clusters, the writing options of `git branch` and `git tag`",
                code_list(git::DANGEROUS_LONG, ", ")
            )),
        }
        if effects.writes.repositories {
            matched.push(code_list(git::REPOSITORY_OPTIONS, ", "));
        }
        if let Unpacks::Mode { long, .. } = effects.writes.unpacks {
            matched.push(code_list(long, ", "));
        }
        if let Some(follow) = &effects.follows {
            let options: Vec<&str> = follow
                .all_of
                .iter()
                .chain([&follow.unless])
                .flat_map(|options| options.iter().copied())
                .collect();
            matched.push(code_list(&options, ", "));
        }
        if matched.is_empty() {
            continue;
        }
        let parser = match effects.parser {
            "" => "not known",
            parser => parser,
        };
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} |",
            cell(&code_list(definition.names(), " ")),
            cell(parser),
            syntax_text(effects.long_options),
            cell(&matched.join("; ")),
        );
    }
    table
}

fn syntax_text(syntax: LongOptions) -> &'static str {
    match syntax {
        LongOptions::Exact => "full spellings",
        LongOptions::Prefix => "any unambiguous prefix",
        LongOptions::Words => "whole words",
    }
}

fn writes_text(writes: &Writes) -> String {
    let mut parts: Vec<String> = Vec::new();
    if writes.operands {
        parts.push("its operands".to_owned());
    }
    if !writes.output_options.is_empty() {
        parts.push(format!(
            "the files of {}",
            code_list(writes.output_options, ", ")
        ));
    }
    match writes.script {
        Some(Script::Sed) => parts.push("the files its script names (`w`, `s///w`)".to_owned()),
        Some(Script::Awk) => parts.push("the files its program names (`>`)".to_owned()),
        None => {}
    }
    let unseen = "files only its input names";
    match writes.unpacks {
        Unpacks::Never => {}
        Unpacks::Always => parts.push(unseen.to_owned()),
        Unpacks::Unless(listing) => {
            parts.push(format!("{unseen}, unless {}", code_list(listing, ", ")));
        }
        Unpacks::Mode {
            long,
            letters,
            bundled,
        } => {
            let letters: Vec<String> = letters.iter().map(|l| format!("-{l}")).collect();
            let letters: Vec<&str> = letters.iter().map(String::as_str).collect();
            let mut text = format!(
                "{unseen}, with {} or {} in a cluster",
                code_list(long, ", "),
                code_list(&letters, ", ")
            );
            if bundled {
                text.push_str(" or in bundled letters first");
            }
            parts.push(text);
        }
        Unpacks::Command(commands) => {
            parts.push(format!(
                "{unseen}, with {} first",
                code_list(commands, ", ")
            ));
        }
        Unpacks::Key(letter) => parts.push(format!("{unseen}, with the key `{letter}`")),
    }
    if writes.repositories {
        parts.push(format!(
            "a repository with {} or {}; otherwise the paths it names",
            code_list(git::REPOSITORY_MAKERS, ", "),
            code_list(git::REPOSITORY_OPTIONS, ", ")
        ));
    }
    match parts.is_empty() {
        true => "—".to_owned(),
        false => parts.join("; "),
    }
}

fn runs_in_text(runs_in: &RunsIn) -> String {
    let options: Vec<&str> = runs_in.short.iter().chain(runs_in.long).copied().collect();
    let mut parts: Vec<String> = Vec::new();
    if !options.is_empty() {
        parts.push(code_list(&options, ", "));
    }
    if !runs_in.own.is_empty() {
        parts.push(format!("{} (its own reader)", code_list(runs_in.own, ", ")));
    }
    match parts.is_empty() {
        true => "—".to_owned(),
        false => parts.join("; "),
    }
}

fn follow_text(follow: Option<&Follow>) -> String {
    let Some(follow) = follow else {
        return "—".to_owned();
    };
    let mut text = follow
        .all_of
        .iter()
        .map(|options| code_list(options, " or "))
        .collect::<Vec<_>>()
        .join(", and ");
    if !follow.unless.is_empty() {
        let _ = write!(text, ", not {}", code_list(follow.unless, " or "));
    }
    if let Some(letter) = follow.bundled {
        let _ = write!(text, ", or `{letter}` in bundled letters first");
    }
    if follow.access == Access::Writes {
        text.push_str(" (and changes what it reaches)");
    }
    text
}

fn effect_examples_text(examples: &[Example]) -> String {
    examples
        .iter()
        .map(|example| match example {
            Example::Writes(command, []) => format!("`{command}` names no write"),
            Example::Writes(command, paths) => {
                format!("`{command}` writes {}", code_list(paths, ", "))
            }
            Example::WritesUnseen(command) => format!("`{command}` writes unseen names"),
            Example::Reads(command, path) => format!("`{command}` reads `{path}`"),
            Example::Follows(command, true) => format!("`{command}` follows"),
            Example::Follows(command, false) => format!("`{command}` does not follow"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every program the analyser can prove read-only, in the order the docs list them.
static PROGRAMS: &[Program] = &[
    Program {
        names: &[
            "echo", "sleep", "test", "[", "expr", "exit", "return", "shift", "type", "true",
            "false", ":", "break", "continue",
        ],
        proof: Data,
        hazards: Hazards::None,
        // `break N`/`continue N` take a plain number (Bash's `legal_number`, no arithmetic).
        reads: "nothing: its arguments are data",
        proven: &["echo hi", "test -f src/a.rs", "true"],
        asked: &[],
        effects: EFFECTS,
    },
    Program {
        names: &["read", "mapfile", "readarray", "getopts", "wait"],
        proof: Binds,
        hazards: Hazards::None,
        reads: "nothing; it binds the variables it names, proven when each is harmless and no callback runs",
        proven: &["read -r line", "mapfile -t lines"],
        asked: &["read PATH", "mapfile -C cb lines"],
        effects: EFFECTS,
    },
    Program {
        names: &["printf"],
        proof: Own(Checker::Printf),
        hazards: Hazards::None,
        reads: "nothing; `-v NAME` binds a variable as `read` does",
        proven: &["printf '%s\\n' a", "printf -v out %d 1"],
        asked: &["printf -v PATH x", "printf \"$fmt\" x"],
        effects: EFFECTS,
    },
    Program {
        names: &["cat"],
        proof: Options(Spec {
            long: &[
                "number",
                "number-nonblank",
                "show-all",
                "squeeze-blank",
                "show-ends",
                "show-tabs",
                "show-nonprinting",
            ],
            ..spec("AbeEnstTuv", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["cat -n src/a.rs"],
        asked: &["cat -Z src/a.rs"],
        effects: EFFECTS,
    },
    Program {
        names: &["head", "tail"],
        proof: Options(Spec {
            short_val: "ncs",
            long: &[
                "quiet",
                "silent",
                "verbose",
                "zero-terminated",
                "follow",
                "retry",
            ],
            long_val: &[
                "lines",
                "bytes",
                "pid",
                "sleep-interval",
                "max-unchanged-stats",
            ],
            numeric: true,
            ..spec("qvzfF", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["head -n 5 src/a.rs", "tail -20 src/a.rs"],
        asked: &["head --bogus src/a.rs"],
        effects: EFFECTS,
    },
    Program {
        names: &["wc"],
        proof: Options(Spec {
            long: &["bytes", "chars", "lines", "words", "max-line-length"],
            long_val: &["files0-from", "total"],
            path_opts: &["--files0-from"],
            names_from_file: &["--files0-from"],
            ..spec("clmwL", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files; `--files0-from` asks (the names are in a file)",
        proven: &["wc -l src/a.rs"],
        asked: &["wc --files0-from=list"],
        effects: EFFECTS,
    },
    Program {
        names: &["grep", "egrep", "fgrep"],
        proof: Options(Spec {
            short_val: "efmABCdD",
            long: &[
                "extended-regexp",
                "fixed-strings",
                "basic-regexp",
                "perl-regexp",
                "ignore-case",
                "no-ignore-case",
                "invert-match",
                "word-regexp",
                "line-regexp",
                "count",
                "color",
                "colour",
                "files-without-match",
                "files-with-matches",
                "only-matching",
                "quiet",
                "silent",
                "no-messages",
                "byte-offset",
                "with-filename",
                "no-filename",
                "line-number",
                "no-line-number",
                "initial-tab",
                "null",
                "null-data",
                "text",
                "recursive",
                "line-buffered",
                "binary",
            ],
            long_val: &[
                "regexp",
                "file",
                "max-count",
                "after-context",
                "before-context",
                "context",
                "include",
                "exclude",
                "exclude-dir",
                "exclude-from",
                "label",
                "binary-files",
                "devices",
                "directories",
                "group-separator",
            ],
            path_opts: &["-f", "--file", "--exclude-from"],
            pattern_opts: &["-e", "-f", "--regexp", "--file"],
            recursive: &["-r", "-R", "--recursive", "--dereference-recursive"],
            numeric: true,
            ..spec("EFGPiyvwxcLloqsbHhnTZzaUIr", PatternThenPaths)
        }),
        hazards: Hazards::None,
        reads: "a pattern, then its files (and `-f`'s); the trees below its folders with `-r`",
        proven: &["grep -rn fn src"],
        asked: &["grep x /etc/passwd"],
        effects: Effects {
            parser: GETOPT,
            follows: reads_following(&[&["-R", "--dereference-recursive"]]),
            examples: &[
                Example::Follows("grep -R x src", true),
                Example::Follows("grep -rn x src", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["rg"],
        proof: Options(Spec {
            short_val: "efgtTmABCMjEr",
            long: &[
                "files",
                "files-with-matches",
                "files-without-match",
                "count",
                "count-matches",
                "json",
                "no-heading",
                "heading",
                "hidden",
                "no-ignore",
                "no-ignore-vcs",
                "no-ignore-dot",
                "no-ignore-parent",
                "no-ignore-global",
                "ignore-case",
                "smart-case",
                "case-sensitive",
                "fixed-strings",
                "word-regexp",
                "line-regexp",
                "line-number",
                "no-line-number",
                "column",
                "vimgrep",
                "type-list",
                "multiline",
                "multiline-dotall",
                "pcre2",
                "trim",
                "stats",
                "null",
                "only-matching",
                "passthru",
                "no-messages",
                "invert-match",
                "no-filename",
                "with-filename",
                "unrestricted",
                "text",
                "no-config",
                "byte-offset",
                "quiet",
                "debug",
                "crlf",
                "null-data",
                "one-file-system",
                "sort-files",
                "no-require-git",
                "max-columns-preview",
                "no-unicode",
            ],
            long_val: &[
                "regexp",
                "file",
                "glob",
                "iglob",
                "type",
                "type-not",
                "type-add",
                "max-count",
                "max-depth",
                "max-filesize",
                "context",
                "after-context",
                "before-context",
                "color",
                "colors",
                "replace",
                "sort",
                "sortr",
                "ignore-file",
                "engine",
                "threads",
                "max-columns",
                "path-separator",
                "encoding",
                "context-separator",
                "field-match-separator",
                "field-context-separator",
            ],
            path_opts: &["-f", "--file", "--ignore-file"],
            pattern_opts: &["-e", "-f", "--regexp", "--file"],
            recursive: &["*"],
            numeric: false,
            options_harmless: false,
            ..spec("iISsvwxclnNHhoqpuaUF0.", PatternThenPaths)
        }),
        // ripgrep and tree parse their own flags; whether they take prefixes is not checked
        // here, so a prefix counts as the option.
        hazards: Hazards::Table(OptionHazards {
            valued: "efgtTmABCMjEr",
            options: &["--pre", "--hostname-bin"],
        }),
        reads: "a pattern, then the trees below its folders (the working folder without one)",
        proven: &["rg -n fn src"],
        asked: &["rg --pre cat x src"],
        effects: Effects {
            parser: UNVERIFIED,
            follows: reads_following(&[&["-L", "--follow"]]),
            examples: &[
                Example::Follows("rg -L x src", true),
                Example::Follows("rg x src", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["ls"],
        proof: Options(Spec {
            short_val: "IwT",
            long: &[
                "all",
                "almost-all",
                "long",
                "human-readable",
                "color",
                "classify",
                "recursive",
                "reverse",
                "group-directories-first",
                "directory",
                "inode",
                "size",
                "si",
                "full-time",
                "literal",
                "numeric-uid-gid",
                "no-group",
                "dereference",
                "dereference-command-line",
                "author",
                "escape",
                "file-type",
                "hide-control-chars",
                "show-control-chars",
                "quote-name",
                "context",
                "zero",
            ],
            long_val: &[
                "sort",
                "time",
                "time-style",
                "format",
                "indicator-style",
                "ignore",
                "hide",
                "width",
                "quoting-style",
                "block-size",
                "tabsize",
            ],
            ..spec("aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1", Paths)
        }),
        hazards: Hazards::None,
        reads: "its operands",
        proven: &["ls -la src"],
        asked: &["ls /etc"],
        effects: Effects {
            parser: GETOPT,
            follows: reads_following(&[RECURSIVE, &["-L", "--dereference"]]),
            examples: &[
                Example::Follows("ls -LR src", true),
                Example::Follows("ls -R src", false),
                Example::Follows("ls -lL src", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["tree"],
        proof: Options(Spec {
            short_val: "LIP",
            long: &[
                "noreport",
                "dirsfirst",
                "gitignore",
                "prune",
                "du",
                "si",
                "matchdirs",
                "ignore-case",
                "info",
                "help",
                "version",
            ],
            long_val: &["filelimit", "charset", "sort", "timefmt"],
            options_harmless: false,
            ..spec("adfFisughDrtvUCnAqNQpJx", Paths)
        }),
        // Its own parser, like ripgrep's: a prefix counts as the option.
        hazards: Hazards::Table(OptionHazards {
            valued: "LIP",
            options: &["-o"],
        }),
        reads: "its folders",
        proven: &["tree -L 2 src"],
        asked: &["tree -o out src"],
        effects: Effects {
            parser: UNVERIFIED,
            follows: reads_following(&[&["-l"]]),
            examples: &[
                Example::Follows("tree -l src", true),
                Example::Follows("tree src", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["stat"],
        proof: Options(Spec {
            short_val: "c",
            long: &["dereference", "file-system", "terse"],
            long_val: &["format", "printf", "cached"],
            ..spec("LfZt", Paths)
        }),
        hazards: Hazards::None,
        reads: "its operands",
        proven: &["stat src/a.rs"],
        asked: &["stat /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &["file"],
        proof: Options(Spec {
            short_val: "mfFeP",
            long: &[
                "brief",
                "mime",
                "mime-type",
                "mime-encoding",
                "dereference",
                "no-dereference",
            ],
            path_opts: &["-m", "-f"],
            options_harmless: false,
            // `-f list` reads the files the list names.
            names_from_file: &["-f", "--files-from"],
            ..spec("bcEhiLkNnprsvz0Z", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files, and `-m`'s; `-f` asks (the names are in a file)",
        proven: &["file src/a.rs"],
        asked: &["file -f list"],
        effects: EFFECTS,
    },
    Program {
        names: &["du"],
        proof: Options(Spec {
            short_val: "dBtX",
            long: &[
                "all",
                "apparent-size",
                "bytes",
                "total",
                "human-readable",
                "summarize",
                "si",
                "time",
                "count-links",
                "one-file-system",
                "inodes",
                "null",
                "separate-dirs",
            ],
            long_val: &[
                "max-depth",
                "threshold",
                "block-size",
                "exclude",
                "exclude-from",
            ],
            path_opts: &["-X", "--exclude-from"],
            ..spec("abcDhHklmsSx0", Paths)
        }),
        hazards: Hazards::None,
        reads: "its operands, and `-X`'s",
        proven: &["du -sh src"],
        asked: &["du -sh /"],
        effects: Effects {
            parser: GETOPT,
            follows: reads_following(&[&["-L", "--dereference"]]),
            examples: &[
                Example::Follows("du -L src", true),
                Example::Follows("du -sh src", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["df"],
        proof: Options(Spec {
            short_val: "txB",
            long: &[
                "human-readable",
                "all",
                "inodes",
                "local",
                "portability",
                "print-type",
                "total",
                "si",
                "output",
            ],
            long_val: &["type", "exclude-type", "block-size"],
            ..spec("ahHiklPT", Paths)
        }),
        hazards: Hazards::None,
        reads: "its operands",
        proven: &["df -h ."],
        asked: &["df --bogus"],
        effects: EFFECTS,
    },
    Program {
        names: &["sort"],
        proof: Options(Spec {
            short_val: "ktS",
            long: &[
                "ignore-leading-blanks",
                "dictionary-order",
                "ignore-case",
                "general-numeric-sort",
                "ignore-nonprinting",
                "month-sort",
                "human-numeric-sort",
                "numeric-sort",
                "random-sort",
                "reverse",
                "version-sort",
                "stable",
                "unique",
                "zero-terminated",
                "check",
                "merge",
                "debug",
            ],
            long_val: &[
                "key",
                "field-separator",
                "buffer-size",
                "parallel",
                "sort",
                "random-source",
                "files0-from",
            ],
            path_opts: &["--random-source", "--files0-from"],
            names_from_file: &["--files0-from"],
            options_harmless: false,
            ..spec("bdfgiMhnRrscCmuzV", Paths)
        }),
        // GNU sort uses getopt_long: `sort --comp=cat` is taken.
        hazards: Hazards::Table(OptionHazards {
            valued: "kStT",
            options: &[
                "-o",
                "--output",
                "--compress-program",
                "-T",
                "--temporary-directory",
            ],
        }),
        reads: "its files, and `--random-source`'s; `--files0-from` asks",
        proven: &["sort -u src/a.rs"],
        asked: &["sort -o out src/a.rs"],
        effects: Effects {
            parser: GETOPT,
            writes: Writes {
                output_options: &["-o", "--output"],
                ..NO_WRITES
            },
            examples: &[
                Example::Writes("sort -o .npmrc a", &["/ws/.npmrc"]),
                Example::Writes("sort -o.npmrc a", &["/ws/.npmrc"]),
                Example::Writes("sort --output=.git/x a", &["/ws/.git/x"]),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["uniq"],
        proof: Options(Spec {
            short_val: "fsw",
            long: &[
                "count",
                "repeated",
                "all-repeated",
                "ignore-case",
                "unique",
                "zero-terminated",
                "group",
            ],
            long_val: &["skip-fields", "skip-chars", "check-chars"],
            options_harmless: false,
            ..spec("cdDiuz", AtMost(1))
        }),
        hazards: Hazards::None,
        reads: "at most one file (a second one is written)",
        proven: &["uniq -c src/a.rs"],
        asked: &["uniq src/a.rs out"],
        effects: EFFECTS,
    },
    Program {
        names: &["cut"],
        proof: Options(Spec {
            short_val: "bcdf",
            long: &["complement", "only-delimited", "zero-terminated"],
            long_val: &[
                "bytes",
                "characters",
                "delimiter",
                "fields",
                "output-delimiter",
            ],
            ..spec("nsz", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["cut -d: -f1 src/a.rs"],
        asked: &["cut -f1 /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &["tr"],
        proof: Options(Spec {
            long: &["complement", "delete", "squeeze-repeats", "truncate-set1"],
            ..spec("cCdst", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing: its operands are sets of characters",
        proven: &["tr a-z A-Z"],
        asked: &["tr --bogus a b"],
        effects: EFFECTS,
    },
    Program {
        names: &["diff"],
        proof: Options(Spec {
            short_val: "CUDFILSxXW",
            long: &[
                "brief",
                "recursive",
                "unified",
                "context",
                "ignore-case",
                "ignore-tab-expansion",
                "ignore-trailing-space",
                "ignore-space-change",
                "ignore-all-space",
                "ignore-blank-lines",
                "new-file",
                "unidirectional-new-file",
                "side-by-side",
                "color",
                "text",
                "normal",
                "report-identical-files",
                "suppress-common-lines",
                "minimal",
                "speed-large-files",
                "strip-trailing-cr",
                "expand-tabs",
                "initial-tab",
                "no-dereference",
                "show-c-function",
                "suppress-blank-empty",
                "left-column",
                "ed",
                "rcs",
                "paginate",
            ],
            long_val: &[
                "exclude",
                "exclude-from",
                "label",
                "width",
                "show-function-line",
                "starting-file",
                "from-file",
                "to-file",
                "ignore-matching-lines",
                "horizontal-lines",
                "tabsize",
                "palette",
            ],
            path_opts: &["-X", "--exclude-from", "--from-file", "--to-file"],
            recursive: &["-r", "--recursive"],
            numeric: true,
            options_harmless: false,
            ..spec("abBdeEfHinNpqrsStTuwyZ", Paths)
        }),
        // GNU diff: getopt_long.
        hazards: Hazards::Table(OptionHazards {
            valued: "CUDFILSxXW",
            options: &["--output"],
        }),
        reads: "its files, and those of `-X`, `--from-file`, `--to-file`; the trees below its folders with `-r`",
        proven: &["diff -u src/a.rs src/b.rs"],
        asked: &["diff --output=x src/a.rs src/b.rs"],
        effects: Effects {
            parser: GETOPT,
            ..EFFECTS
        },
    },
    Program {
        names: &["cmp"],
        proof: Options(Spec {
            short_val: "in",
            long: &["print-bytes", "verbose", "quiet", "silent"],
            long_val: &["ignore-initial", "bytes"],
            ..spec("bls", AtMost(4))
        }),
        hazards: Hazards::None,
        reads: "two files, and their skips",
        proven: &["cmp src/a.rs src/b.rs"],
        asked: &["cmp a b c d e"],
        effects: EFFECTS,
    },
    Program {
        names: &["comm"],
        proof: Options(Spec {
            long: &["check-order", "nocheck-order", "total", "zero-terminated"],
            long_val: &["output-delimiter"],
            ..spec("123z", AtMost(2))
        }),
        hazards: Hazards::None,
        reads: "two files",
        proven: &["comm -12 a.txt b.txt"],
        asked: &["comm a b c"],
        effects: EFFECTS,
    },
    Program {
        names: &["nl"],
        proof: Options(Spec {
            short_val: "bdfhilnsvw",
            long_val: &[
                "body-numbering",
                "section-delimiter",
                "footer-numbering",
                "header-numbering",
                "line-increment",
                "join-blank-lines",
                "number-format",
                "number-separator",
                "starting-line-number",
                "number-width",
            ],
            long: &["no-renumber"],
            ..spec("p", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["nl src/a.rs"],
        asked: &["nl /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &[
            "md5sum",
            "sha1sum",
            "sha256sum",
            "sha512sum",
            "b2sum",
            "cksum",
        ],
        proof: Options(Spec {
            long: &[
                "binary",
                "check",
                "tag",
                "text",
                "zero",
                "ignore-missing",
                "quiet",
                "status",
                "strict",
                "warn",
            ],
            names_from_file: &["-c", "--check"],
            ..spec("bctwz", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files; `-c` asks (the names are in a file)",
        proven: &["sha256sum src/a.rs"],
        asked: &["sha256sum -c sums.txt"],
        effects: EFFECTS,
    },
    Program {
        names: &["tac"],
        proof: Options(Spec {
            short_val: "s",
            long: &["before", "regex"],
            long_val: &["separator"],
            ..spec("br", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["tac src/a.rs"],
        asked: &["tac /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &["rev"],
        proof: Options(spec("", Paths)),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["rev src/a.rs"],
        asked: &["rev -x a"],
        effects: EFFECTS,
    },
    Program {
        names: &["paste"],
        proof: Options(Spec {
            short_val: "d",
            long: &["serial", "zero-terminated"],
            long_val: &["delimiters"],
            ..spec("sz", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["paste -d, a.txt b.txt"],
        asked: &["paste /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &["fold"],
        proof: Options(Spec {
            short_val: "w",
            long: &["bytes", "spaces"],
            long_val: &["width"],
            ..spec("bs", Paths)
        }),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["fold -w 80 src/a.rs"],
        asked: &["fold /etc/passwd"],
        effects: EFFECTS,
    },
    Program {
        names: &["readlink"],
        proof: Options(Spec {
            long: &[
                "canonicalize",
                "canonicalize-existing",
                "canonicalize-missing",
                "no-newline",
                "quiet",
                "silent",
                "verbose",
                "zero",
            ],
            ..spec("efmnqsvz", Paths)
        }),
        hazards: Hazards::None,
        reads: "its operands",
        proven: &["readlink -f src/a.rs"],
        asked: &["readlink /etc/x"],
        effects: EFFECTS,
    },
    Program {
        names: &["realpath"],
        proof: Options(Spec {
            long: &[
                "canonicalize-existing",
                "canonicalize-missing",
                "logical",
                "physical",
                "quiet",
                "strip",
                "no-symlinks",
                "zero",
            ],
            long_val: &["relative-to", "relative-base"],
            ..spec("emLPqsz", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing: its operands are names, not read",
        proven: &["realpath ../x"],
        asked: &["realpath --bogus x"],
        effects: EFFECTS,
    },
    Program {
        names: &["basename", "dirname"],
        proof: Options(Spec {
            short_val: "s",
            long: &["multiple", "zero"],
            long_val: &["suffix"],
            ..spec("az", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing: its operands are names",
        proven: &["basename src/a.rs .rs", "dirname src/a.rs"],
        asked: &["basename --bogus x"],
        effects: EFFECTS,
    },
    Program {
        names: &["which"],
        proof: Options(Spec {
            long: &["all", "skip-alias", "skip-functions"],
            ..spec("as", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing: its operands are names",
        proven: &["which cargo"],
        asked: &["which --read-alias cargo"],
        effects: EFFECTS,
    },
    Program {
        names: &["seq"],
        proof: Options(Spec {
            short_val: "fs",
            long: &["equal-width"],
            long_val: &["format", "separator"],
            numeric: true,
            ..spec("w", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing",
        proven: &["seq 1 10"],
        asked: &["seq --bogus 3"],
        effects: EFFECTS,
    },
    Program {
        names: &["pwd"],
        proof: Options(spec("LP", Ignored)),
        hazards: Hazards::None,
        reads: "nothing",
        proven: &["pwd -P"],
        asked: &["pwd --bogus"],
        effects: EFFECTS,
    },
    Program {
        names: &["uname"],
        proof: Options(Spec {
            long: &[
                "all",
                "kernel-name",
                "nodename",
                "kernel-release",
                "kernel-version",
                "machine",
                "processor",
                "hardware-platform",
                "operating-system",
            ],
            ..spec("asnrvmpio", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing",
        proven: &["uname -a"],
        asked: &["uname --bogus"],
        effects: EFFECTS,
    },
    Program {
        names: &["nproc"],
        proof: Options(Spec {
            long: &["all"],
            long_val: &["ignore"],
            ..spec("", Ignored)
        }),
        hazards: Hazards::None,
        reads: "nothing",
        proven: &["nproc"],
        asked: &["nproc -x"],
        effects: EFFECTS,
    },
    Program {
        names: &["whoami", "arch", "tty", "id", "groups", "logname"],
        proof: Options(spec("", Ignored)),
        hazards: Hazards::None,
        reads: "nothing; no option is known",
        proven: &["whoami", "id"],
        asked: &["id -u"],
        effects: EFFECTS,
    },
    Program {
        names: &["git"],
        proof: Own(Checker::Git),
        hazards: Hazards::Git,
        reads: "the repository and the paths named, through the subcommands that only inspect",
        proven: &["git status", "git log -p -- src/a.rs"],
        asked: &["git commit -m x", "git -c core.pager=x log"],
        effects: Effects {
            parser: "parse-options; its global options, before the subcommand, take full spellings only (`git --no-pag` is an error), and `--text`, `--filter` are options of their own",
            writes: Writes {
                output_options: &["--output"],
                repositories: true,
                ..NO_WRITES
            },
            runs_in: RunsIn {
                own: &["-C"],
                ..NO_FOLDER
            },
            logs_reads_first: true,
            examples: &[
                Example::Writes(
                    "git diff --output=.husky/pre-commit",
                    &["/ws/.husky/pre-commit"],
                ),
                Example::WritesUnseen("git diff --output \"$f\""),
                Example::Writes(
                    "git checkout main -- .husky/pre-commit",
                    &["/ws/.husky/pre-commit"],
                ),
                Example::Writes("git log HEAD", &[]),
                Example::WritesUnseen("git init src/x"),
                Example::WritesUnseen("git clone --mirr https://example.org/r.git"),
                Example::WritesUnseen("git worktree add ../w"),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["sed"],
        proof: Own(Checker::Sed),
        // GNU sed uses getopt_long: `sed --in-pl` is taken.
        hazards: Hazards::Table(OptionHazards {
            valued: "efl",
            options: &["-i", "--in-place"],
        }),
        reads: "its files, under a script of print commands only (no `e`, `w`, `W`)",
        proven: &["sed -n 1,5p src/a.rs"],
        asked: &["sed -i s/a/b/ src/a.rs", "sed -n 'w out' src/a.rs"],
        effects: Effects {
            parser: GETOPT,
            writes: Writes {
                operands: true,
                script: Some(Script::Sed),
                ..NO_WRITES
            },
            examples: &[
                Example::Writes("sed -i s/a/b/ .npmrc", &["/ws/s/a/b", "/ws/.npmrc"]),
                Example::WritesUnseen("sed -n 'w src/x' a"),
                Example::WritesUnseen("sed 's/a/b/w out' a"),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["awk", "gawk", "mawk", "nawk"],
        proof: Own(Checker::Awk),
        hazards: Hazards::None,
        reads: "its files, under a program that writes, runs and reads nothing else (no `>`, `|`, `system`, `getline`, `@`, `ENVIRON`, `PROCINFO`)",
        proven: &["awk '{print $1}' src/a.rs"],
        asked: &["awk 'BEGIN{system(\"id\")}'"],
        effects: Effects {
            writes: Writes {
                script: Some(Script::Awk),
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("awk '{print > \"x\"}' a"),
                Example::Writes("awk '{print $1}' a", &[]),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["find"],
        proof: Own(Checker::Find),
        // find's primaries are single-dash words, matched whole.
        hazards: Hazards::Table(OptionHazards {
            valued: "",
            options: &["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"],
        }),
        reads: "the trees below its starting points, with tests and printing actions only (no `-exec`, no `-L`)",
        proven: &["find src -name '*.rs'"],
        asked: &["find src -delete", "find -L src"],
        effects: Effects {
            long_options: LongOptions::Words,
            parser: "its own: primaries are whole words",
            follows: reads_following(&[&["-L", "-follow"]]),
            examples: &[
                Example::Follows("find -L src", true),
                Example::Follows("find src -follow -name x", true),
                Example::Follows("find src -name x", false),
            ],
            ..EFFECTS
        },
    },
    Program {
        names: &["jq"],
        proof: Own(Checker::Jq),
        hazards: Hazards::None,
        reads: "its files, and those of `--rawfile`, `--slurpfile` and `-f`; modules (`-L`, `import`) ask",
        proven: &["jq .name package.json"],
        asked: &["jq -L lib . a.json"],
        effects: Effects {
            long_options: LongOptions::Exact,
            parser: "its own: full spellings only",
            ..EFFECTS
        },
    },
    Program {
        names: &["set"],
        proof: Own(Checker::Set),
        hazards: Hazards::None,
        reads: "nothing; only `-e -u -x -v -f -E -C -T`, and `-o` with `pipefail` or the long name of one of those (`set -k` would turn later words into assignments)",
        proven: &["set -euo pipefail"],
        asked: &["set -k"],
        effects: EFFECTS,
    },
    Program {
        names: &["date"],
        proof: Own(Checker::Date),
        hazards: Hazards::None,
        reads: "nothing; `-s`/`--set` and the file options `-f`, `-r` ask",
        proven: &["date +%s"],
        asked: &["date -s 2020-01-01", "date -r src/a.rs"],
        effects: EFFECTS,
    },
    Program {
        names: &["hostname"],
        proof: Own(Checker::Hostname),
        hazards: Hazards::None,
        reads: "nothing, without arguments (with one it sets the name)",
        proven: &["hostname"],
        asked: &["hostname h"],
        effects: EFFECTS,
    },
];

/// Every program the analyser knows the effects of but never proves read-only, in the order
/// the docs list them.
static OTHER_PROGRAMS: &[OtherProgram] = &[
    OtherProgram {
        names: &["cp"],
        effects: Effects {
            parser: GETOPT,
            writes: WRITES_OPERANDS,
            follows: reads_following(&[
                &["-r", "-R", "--recursive", "-a", "--archive"],
                &["-L", "--dereference"],
            ]),
            examples: &[
                Example::Writes("cp cfg src/x/HEAD", &["/ws/cfg", "/ws/src/x/HEAD"]),
                Example::WritesUnseen("cp a \"$DEST\""),
                Example::Follows("cp -rL src out", true),
                Example::Follows("cp -a --dereference src out", true),
                Example::Follows("cp -r src out", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &[
            "mv", "ln", "link", "install", "mkdir", "touch", "tee", "truncate", "dd", "rm",
            "rmdir", "unlink", "shred", "mkfifo", "mknod",
        ],
        effects: Effects {
            writes: WRITES_OPERANDS,
            examples: &[
                Example::Writes("mkdir -p src/x/.git/hooks", &["/ws/src/x/.git/hooks"]),
                Example::Writes("mv -t src/x HEAD", &["/ws/src/x", "/ws/HEAD"]),
                Example::Writes("touch ~/.bashrc", &["/home/u/.bashrc"]),
                Example::Writes(
                    "dd if=a of=.husky/pre-commit",
                    &[
                        "/ws/if=a",
                        "/ws/a",
                        "/ws/of=.husky/pre-commit",
                        "/ws/.husky/pre-commit",
                    ],
                ),
                Example::WritesUnseen("touch \"$f\""),
                Example::WritesUnseen("tee -a \"$(cat n)\""),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["rsync"],
        effects: Effects {
            writes: WRITES_OPERANDS,
            follows: reads_following(&[&[
                "-L",
                "-k",
                "--copy-links",
                "--copy-unsafe-links",
                "--copy-dirlinks",
            ]]),
            examples: &[
                Example::Follows("rsync -aL src out", true),
                Example::Follows("rsync -a src out", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["chmod", "chown", "chgrp"],
        effects: Effects {
            parser: GETOPT,
            writes: WRITES_OPERANDS,
            follows: Some(Follow {
                all_of: &[RECURSIVE, &["-L"]],
                unless: NONE,
                bundled: None,
                access: Access::Writes,
            }),
            examples: &[
                Example::Follows("chmod -RL u+w src", true),
                Example::Follows("chown -R -L u src", true),
                Example::Follows("chmod -R u+w src", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["gsed"],
        effects: Effects {
            parser: GETOPT,
            writes: Writes {
                script: Some(Script::Sed),
                ..NO_WRITES
            },
            examples: &[Example::WritesUnseen("gsed -n 'w out' a")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["tar", "gtar", "bsdtar"],
        effects: Effects {
            parser: ARGP,
            writes: Writes {
                unpacks: Unpacks::Mode {
                    long: &["--extract", "--get"],
                    letters: &['x'],
                    bundled: true,
                },
                ..NO_WRITES
            },
            runs_in: runs_in(&["-C"], &["--directory"]),
            follows: Some(Follow {
                all_of: &[&["-h", "--dereference"]],
                unless: NONE,
                bundled: Some('h'),
                access: Access::Reads,
            }),
            examples: &[
                Example::WritesUnseen("tar xzf a.tgz"),
                Example::WritesUnseen("tar -C out -xf a.tar"),
                Example::WritesUnseen("tar --extr -f a.tar"),
                Example::Writes("tar -czf out.tgz .github", &[]),
                Example::Reads("tar -C sub -cf - a", "/ws/sub/a"),
                Example::Reads("tar --directory=sub -cf - ../.env", "/ws/.env"),
                Example::Follows("tar -czhf a.tgz src", true),
                Example::Follows("tar --dereference -cf a.tar src", true),
                Example::Follows("tar chf a.tar src", true),
                Example::Follows("tar -czf a.tgz src", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["unzip"],
        effects: Effects {
            writes: Writes {
                unpacks: Unpacks::Unless(&["-l", "-t", "-v", "-Z", "-p", "-z"]),
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("unzip a.zip"),
                Example::Writes("unzip -l a.zip", &[]),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["cpio"],
        effects: Effects {
            parser: ARGP,
            writes: Writes {
                unpacks: Unpacks::Mode {
                    long: &["--extract", "--pass-through"],
                    letters: &['i', 'p'],
                    bundled: false,
                },
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("cpio -id"),
                Example::WritesUnseen("cpio --pass out"),
                Example::Writes("cpio -o", &[]),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["7z", "7za", "7zr"],
        effects: Effects {
            writes: Writes {
                unpacks: Unpacks::Command(&["x", "e"]),
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("7z x a.7z"),
                Example::Writes("7z l a.7z", &[]),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["ar"],
        effects: Effects {
            writes: Writes {
                unpacks: Unpacks::Key('x'),
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("ar x lib.a"),
                Example::Writes("ar t lib.a", &[]),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["patch", "pax"],
        effects: Effects {
            writes: Writes {
                unpacks: Unpacks::Always,
                ..NO_WRITES
            },
            examples: &[Example::WritesUnseen("patch -p1")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["curl"],
        effects: Effects {
            writes: Writes {
                output_options: &[
                    "-o",
                    "--output",
                    "-D",
                    "--dump-header",
                    "-c",
                    "--cookie-jar",
                    "--trace",
                    "--trace-ascii",
                    "--stderr",
                    "--etag-save",
                    "--hsts",
                    "--alt-svc",
                ],
                ..NO_WRITES
            },
            examples: &[Example::Writes(
                "curl -sSo .git/hooks/pre-commit u",
                &["/ws/.git/hooks/pre-commit"],
            )],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["wget"],
        effects: Effects {
            writes: Writes {
                output_options: &[
                    "-O",
                    "--output-document",
                    "-o",
                    "--output-file",
                    "-a",
                    "--append-output",
                ],
                ..NO_WRITES
            },
            examples: &[
                Example::WritesUnseen("wget -O \"$f\" u"),
                Example::Writes("wget --output-document=.npmrc u", &["/ws/.npmrc"]),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["dir", "vdir"],
        effects: Effects {
            parser: GETOPT,
            follows: reads_following(&[RECURSIVE, &["-L", "--dereference"]]),
            examples: &[
                Example::Follows("dir -LR src", true),
                Example::Follows("dir -R src", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["fd", "fdfind"],
        effects: Effects {
            follows: reads_following(&[&["-L", "--follow"]]),
            examples: &[
                Example::Follows("fd -L x src", true),
                Example::Follows("fd x src", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["zip"],
        effects: Effects {
            follows: Some(Follow {
                all_of: &[&["-r", "-R", "--recurse-paths"]],
                unless: &["-y", "--symlinks"],
                bundled: None,
                access: Access::Reads,
            }),
            examples: &[
                Example::Follows("zip -r a.zip src", true),
                Example::Follows("zip -ry a.zip src", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["scp"],
        effects: Effects {
            follows: reads_following(&[&["-r"]]),
            examples: &[
                Example::Follows("scp -r src h:", true),
                Example::Follows("scp src h:", false),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["env"],
        effects: Effects {
            runs_in: runs_in(&["-C"], &["--chdir"]),
            examples: &[
                Example::Reads("env -C sub cat ../.env", "/ws/.env"),
                Example::Reads("env -Csub cat a", "/ws/sub/a"),
                Example::Reads("env --chdir=sub cat a", "/ws/sub/a"),
                Example::Reads("env --chdir sub cat a", "/ws/sub/a"),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["sudo"],
        effects: Effects {
            runs_in: runs_in(&["-D"], &["--chdir"]),
            examples: &[Example::Reads("sudo -D sub cat a", "/ws/sub/a")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["make", "gmake", "bmake"],
        effects: Effects {
            parser: GETOPT,
            runs_in: runs_in(&["-C"], &["--directory"]),
            examples: &[
                Example::Reads("make -C sub -f x.mk", "/ws/sub/x.mk"),
                Example::Reads("make --directory=sub -f x.mk", "/ws/sub/x.mk"),
            ],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["ninja", "meson", "cargo", "go"],
        effects: Effects {
            runs_in: runs_in(&["-C"], NONE),
            examples: &[Example::Reads("ninja -C out x", "/ws/out/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["pnpm"],
        effects: Effects {
            runs_in: runs_in(&["-C"], &["--dir"]),
            examples: &[Example::Reads("pnpm --dir pkg x", "/ws/pkg/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["yarn", "bun"],
        effects: Effects {
            runs_in: runs_in(NONE, &["--cwd"]),
            examples: &[Example::Reads("yarn --cwd pkg x", "/ws/pkg/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["npm", "npx"],
        effects: Effects {
            runs_in: runs_in(NONE, &["--prefix"]),
            examples: &[Example::Reads("npm --prefix pkg x", "/ws/pkg/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["just"],
        effects: Effects {
            runs_in: runs_in(&["-d"], &["--working-directory"]),
            examples: &[Example::Reads("just -d sub x", "/ws/sub/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["uv"],
        effects: Effects {
            runs_in: runs_in(NONE, &["--directory"]),
            examples: &[Example::Reads("uv --directory sub x", "/ws/sub/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["poetry"],
        effects: Effects {
            runs_in: runs_in(&["-C"], &["--directory"]),
            examples: &[Example::Reads("poetry -C sub x", "/ws/sub/x")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["nsenter"],
        effects: Effects {
            runs_in: runs_in(&["-w"], &["--wd"]),
            examples: &[Example::Reads("nsenter -w sub cat a", "/ws/sub/a")],
            ..EFFECTS
        },
    },
    OtherProgram {
        names: &["unshare"],
        effects: Effects {
            runs_in: runs_in(NONE, &["--wd"]),
            examples: &[Example::Reads("unshare --wd sub cat a", "/ws/sub/a")],
            ..EFFECTS
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BashRules, BashVerdict, CommandPattern, evaluate_in_test_workspace};

    fn rules_allowing(pattern: Option<&str>) -> BashRules {
        BashRules {
            allow: pattern
                .map(|p| (CommandPattern::parse(p).unwrap(), 1))
                .into_iter()
                .collect(),
            ask: vec![],
            deny: vec![],
        }
    }

    fn asks(command: &str, rules: &BashRules) -> bool {
        matches!(
            evaluate_in_test_workspace(command, rules).verdict,
            BashVerdict::Ask { .. }
        )
    }

    /// Each definition's own examples: a proven one is allowed without any rule, an asked
    /// one asks; each is a command of the program it stands under.
    #[test]
    fn every_program_proves_and_refuses_what_its_definition_says() {
        let no_rules = rules_allowing(None);
        for program in PROGRAMS {
            for command in program.proven.iter().chain(program.asked) {
                let first = command.split_whitespace().next().unwrap_or("");
                assert!(
                    program.names.contains(&first),
                    "`{command}` is not a command of {:?}",
                    program.names
                );
            }
            for command in program.proven {
                let verdict = evaluate_in_test_workspace(command, &no_rules).verdict;
                assert_eq!(verdict, BashVerdict::Allow, "`{command}`");
            }
            for command in program.asked {
                assert!(asks(command, &no_rules), "`{command}` should ask");
            }
        }
    }

    /// Every option a hazard table names asks under a rule that allows its program, written
    /// out, as a prefix where the program takes prefixes, and as a letter of a cluster.
    #[test]
    fn every_hazard_asks_under_a_rule_allowing_its_program() {
        for program in PROGRAMS {
            for name in program.names {
                let rules = rules_allowing(Some(&format!("{name}:*")));
                let mut commands = Vec::new();
                match &program.hazards {
                    Hazards::None => {}
                    Hazards::Table(table) => {
                        for option in table.options {
                            commands.push(format!("{name} {option} x"));
                            if let Some(long) = option.strip_prefix("--")
                                && program.effects.long_options == LongOptions::Prefix
                            {
                                let prefix = &long[..long.len() - 1];
                                commands.push(format!("{name} --{prefix}=x y"));
                            } else if let Some(letter) =
                                option.strip_prefix('-').filter(|l| l.len() == 1)
                            {
                                commands.push(format!("{name} -n{letter} x"));
                            }
                        }
                    }
                    Hazards::Git => {
                        for option in git::DANGEROUS_GLOBAL {
                            commands.push(format!("{name} {option} x status"));
                        }
                        for option in git::DANGEROUS_LONG {
                            commands.push(format!("{name} log {option}=x"));
                        }
                    }
                }
                for command in commands {
                    assert!(asks(&command, &rules), "`{command}` should ask");
                }
            }
        }
    }

    /// Each definition's effect rows, through the analyser's entry point: what a command run
    /// by a rule allowing its program writes, where its reads are looked for, and whether its
    /// walk follows a link found below `src`.
    #[test]
    fn every_program_does_what_its_effects_say() {
        use std::path::{Path, PathBuf};
        let roots = [PathBuf::from("/ws")];
        let linked = crate::BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: Some(Path::new("/home/u")),
            resolve: &tollgate_base::resolve_without_disk,
            list_dir: &|_| Some(Vec::new()),
            links_below: &|folder| Ok(vec![folder.join("l")]),
        };
        for definition in definitions() {
            for example in definition.effects().examples {
                let (Example::Writes(command, _)
                | Example::WritesUnseen(command)
                | Example::Reads(command, _)
                | Example::Follows(command, _)) = example;
                let first = command.split_whitespace().next().unwrap_or("");
                assert!(
                    definition.names().contains(&first),
                    "`{command}` is not a command of {:?}",
                    definition.names()
                );
                let rules = rules_allowing(Some(&format!("{first}:*")));
                let analysis = evaluate_in_test_workspace(command, &rules);
                match example {
                    Example::Writes(_, paths) => {
                        let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
                        assert_eq!(analysis.named_writes, paths, "`{command}`");
                        assert_eq!(analysis.unseen_writes, Vec::<String>::new(), "`{command}`");
                    }
                    Example::WritesUnseen(_) => {
                        assert!(!analysis.unseen_writes.is_empty(), "`{command}`");
                    }
                    Example::Reads(_, path) => assert!(
                        analysis.reads.iter().any(|r| r.path == Path::new(path)),
                        "`{command}` reads {:?}",
                        analysis.reads
                    ),
                    Example::Follows(_, follows) => {
                        let analysis = crate::evaluate(command, &rules, &linked);
                        let link = Path::new("/ws/src/l");
                        let reached = analysis.reads.iter().any(|r| r.path == link)
                            || analysis.named_writes.iter().any(|w| w == link);
                        assert_eq!(reached, *follows, "`{command}`");
                    }
                }
            }
        }
    }

    #[test]
    fn each_name_has_one_definition() {
        let mut names: Vec<&str> = definitions()
            .flat_map(|d| d.names().iter().copied())
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a name stands under two definitions");
    }
}
