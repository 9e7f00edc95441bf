//! Per-command flag validators that prove a command read-only inside the workspace.
//! Flags are allowlisted (an unknown or abbreviated flag is refused); every path must be inside.

use super::BashEnv;
use super::long_options::{self, LongOptions};
use super::paths::{Cwds, ReadLog, check_read, check_read_below};
use super::sed::{check_awk_program, check_sed_script};
use super::unproven::Unproven;
use super::word::Word;

/// What the validators may know: the world and where the script may be.
pub(crate) struct Ctx<'a> {
    pub env: &'a BashEnv<'a>,
    pub cwds: &'a Cwds,
    /// Where every path read is recorded, for the caller's Read rules and guardrails.
    pub reads: &'a ReadLog,
}

/// How a command's operands are read.
#[derive(Clone, Copy)]
enum Operands {
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
struct Spec {
    short: &'static str,
    short_val: &'static str,
    long: &'static [&'static str],
    long_val: &'static [&'static str],
    /// Options (`-f`, `--file`) whose value is a file read.
    path_opts: &'static [&'static str],
    /// Options that supply the pattern, so the first operand is a file.
    pattern_opts: &'static [&'static str],
    /// `-5` means a count (head, tail, grep context).
    numeric: bool,
    operands: Operands,
    /// No option of this command writes or runs anything, so a glob or expansion that turns
    /// into an option is harmless.
    options_harmless: bool,
    /// Options that take the names of the files to read from a file (`--files0-from`,
    /// `md5sum -c`): what is read then cannot be known here.
    names_from_file: &'static [&'static str],
    /// Options that make it read everything below a folder operand (`grep -r`); `&["*"]`
    /// when it always does (`rg`).
    recursive: &'static [&'static str],
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

fn spec_for(name: &str) -> Option<Spec> {
    use Operands::*;
    Some(match name {
        "cat" => Spec {
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
        },
        "head" | "tail" => Spec {
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
        },
        "wc" => Spec {
            long: &["bytes", "chars", "lines", "words", "max-line-length"],
            long_val: &["files0-from", "total"],
            path_opts: &["--files0-from"],
            names_from_file: &["--files0-from"],
            ..spec("clmwL", Paths)
        },
        "grep" | "egrep" | "fgrep" => Spec {
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
        },
        "rg" => Spec {
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
        },
        "ls" => Spec {
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
        },
        "tree" => Spec {
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
        },
        "stat" => Spec {
            short_val: "c",
            long: &["dereference", "file-system", "terse"],
            long_val: &["format", "printf", "cached"],
            ..spec("LfZt", Paths)
        },
        "file" => Spec {
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
        },
        "du" => Spec {
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
        },
        "df" => Spec {
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
        },
        "sort" => Spec {
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
        },
        "uniq" => Spec {
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
        },
        "cut" => Spec {
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
        },
        "tr" => Spec {
            long: &["complement", "delete", "squeeze-repeats", "truncate-set1"],
            ..spec("cCdst", Ignored)
        },
        "diff" => Spec {
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
        },
        "cmp" => Spec {
            short_val: "in",
            long: &["print-bytes", "verbose", "quiet", "silent"],
            long_val: &["ignore-initial", "bytes"],
            ..spec("bls", AtMost(4))
        },
        "comm" => Spec {
            long: &["check-order", "nocheck-order", "total", "zero-terminated"],
            long_val: &["output-delimiter"],
            ..spec("123z", AtMost(2))
        },
        "nl" => Spec {
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
        },
        "md5sum" | "sha1sum" | "sha256sum" | "sha512sum" | "b2sum" | "cksum" => Spec {
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
        },
        "tac" => Spec {
            short_val: "s",
            long: &["before", "regex"],
            long_val: &["separator"],
            ..spec("br", Paths)
        },
        "rev" => spec("", Paths),
        "paste" => Spec {
            short_val: "d",
            long: &["serial", "zero-terminated"],
            long_val: &["delimiters"],
            ..spec("sz", Paths)
        },
        "fold" => Spec {
            short_val: "w",
            long: &["bytes", "spaces"],
            long_val: &["width"],
            ..spec("bs", Paths)
        },
        "readlink" => Spec {
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
        },
        "realpath" => Spec {
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
        },
        "basename" | "dirname" => Spec {
            short_val: "s",
            long: &["multiple", "zero"],
            long_val: &["suffix"],
            ..spec("az", Ignored)
        },
        "which" => Spec {
            long: &["all", "skip-alias", "skip-functions"],
            ..spec("as", Ignored)
        },
        "seq" => Spec {
            short_val: "fs",
            long: &["equal-width"],
            long_val: &["format", "separator"],
            numeric: true,
            ..spec("w", Ignored)
        },
        "pwd" => spec("LP", Ignored),
        "uname" => Spec {
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
        },
        "nproc" => Spec {
            long: &["all"],
            long_val: &["ignore"],
            ..spec("", Ignored)
        },
        "whoami" | "arch" | "tty" | "id" | "groups" | "logname" => spec("", Ignored),
        _ => return None,
    })
}

/// Whether `name` is a command whose reads [`check`] knows how to find.
pub(crate) fn known(name: &str) -> bool {
    matches!(
        name,
        "echo"
            | "sleep"
            | "test"
            | "["
            | "expr"
            | "exit"
            | "return"
            | "wait"
            | "shift"
            | "type"
            | "true"
            | "false"
            | ":"
            | "printf"
            | "git"
            | "sed"
            | "awk"
            | "gawk"
            | "mawk"
            | "nawk"
            | "find"
            | "jq"
            | "set"
            | "date"
            | "hostname"
            | "read"
            | "mapfile"
            | "readarray"
            | "getopts"
            | "break"
            | "continue"
    ) || spec_for(name).is_some()
}

/// Proves `name args…` read-only, or says why not.
/// Whether [`check`] of this program has logged every read it makes, whatever its verdict:
/// git's logs its operands before it judges anything; the others stop at the first thing they
/// cannot follow (`cat -Z .env` stops at `-Z`), and only a passed check has logged them all.
pub(crate) fn logged_every_read(name: &str, checked: &Result<(), Unproven>) -> bool {
    checked.is_ok() || name == "git"
}

pub(crate) fn check(name: &str, args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    match name {
        // Their arguments are data: no value can make them write, read or run anything.
        // `break N`/`continue N` take a plain number (Bash's `legal_number`, no arithmetic).
        "echo" | "sleep" | "test" | "[" | "expr" | "exit" | "return" | "shift" | "type"
        | "true" | "false" | ":" | "break" | "continue" => Ok(()),
        "read" | "mapfile" | "readarray" | "getopts" | "wait" => binds(name, args),
        "printf" => match args.first().map(|w| w.fixed()) {
            Some(Some(v)) if v.starts_with("-v") => binds(name, args),
            Some(None) => Err(Unproven::PrintfMayBeV),
            _ => Ok(()),
        },
        "git" => super::git::check(args, ctx.env, ctx.cwds, ctx.reads),
        "sed" => sed(args, ctx),
        "awk" | "gawk" | "mawk" | "nawk" => awk(args, ctx),
        "find" => find(args, ctx),
        "jq" => jq(args, ctx),
        "set" => set(args),
        "date" => date(args),
        "hostname" if args.is_empty() => Ok(()),
        _ => match spec_for(name) {
            Some(spec) => run_spec(name, &spec, args, ctx),
            None => Err(Unproven::UnknownCommand(name.to_owned())),
        },
    }
}

fn run_spec(name: &str, spec: &Spec, args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let mut operands: Vec<&Word> = Vec::new();
    let mut pattern_given = false;
    let mut options_done = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        if options_done {
            operands.push(w);
            continue;
        }
        let Some(v) = w.fixed() else {
            if w.may_be_flag && !spec.options_harmless {
                return Err(Unproven::MayBeOption {
                    word: w.raw.clone(),
                    command: name.to_owned(),
                });
            }
            operands.push(w);
            continue;
        };
        if v == "--" {
            options_done = true;
            continue;
        }
        if v == "-" || !v.starts_with('-') {
            operands.push(w);
            continue;
        }
        let mut value_of = |opt: String, inline: Option<Word>| -> Result<(), Unproven> {
            let value = match inline {
                Some(v) => v,
                None => {
                    let next = args.get(i).ok_or_else(|| Unproven::NeedsValue {
                        command: name.to_owned(),
                        option: opt.clone(),
                    })?;
                    i += 1;
                    next.clone()
                }
            };
            if spec.path_opts.contains(&opt.as_str()) {
                check_read(&value, ctx.env, ctx.cwds, ctx.reads)?;
            }
            if spec.pattern_opts.contains(&opt.as_str()) {
                pattern_given = true;
            }
            Ok(())
        };
        if let Some(long) = v.strip_prefix("--") {
            let (opt, inline) = match long.split_once('=') {
                Some((o, val)) => (o, Some(Word::literal(val))),
                None => (long, None),
            };
            let from_file = spec.names_from_file.contains(&format!("--{opt}").as_str());
            if spec.long.contains(&opt) && !from_file {
                continue;
            }
            if spec.long_val.contains(&opt) {
                value_of(format!("--{opt}"), inline)?;
            }
            if from_file {
                return Err(Unproven::NamesFromFile {
                    command: name.to_owned(),
                    option: format!("--{opt}"),
                });
            }
            if spec.long_val.contains(&opt) {
                continue;
            }
            return Err(Unproven::NotReadOnly {
                command: name.to_owned(),
                option: format!("--{opt}"),
            });
        }
        let letters = &v[1..];
        if spec.numeric && letters.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        for (j, c) in letters.char_indices() {
            if spec.names_from_file.contains(&format!("-{c}").as_str()) {
                return Err(Unproven::NamesFromFile {
                    command: name.to_owned(),
                    option: format!("-{c}"),
                });
            }
            if spec.short.contains(c) {
                continue;
            }
            if spec.short_val.contains(c) {
                let rest = &letters[j + c.len_utf8()..];
                let inline = (!rest.is_empty()).then(|| Word::literal(rest));
                value_of(format!("-{c}"), inline)?;
                break;
            }
            return Err(Unproven::NotReadOnly {
                command: name.to_owned(),
                option: format!("-{c}"),
            });
        }
    }
    let below = reads_below(spec, args);
    match spec.operands {
        Operands::Ignored => Ok(()),
        Operands::Paths => paths_below(&operands, below, ctx),
        Operands::PatternThenPaths => {
            let files = if pattern_given {
                &operands[..]
            } else {
                operands.get(1..).unwrap_or(&[])
            };
            let here = Word::literal(".");
            // `grep -r x` and `rg x` without a folder search the working directory.
            let files = if below && files.is_empty() {
                vec![&here]
            } else {
                files.to_vec()
            };
            paths_below(&files, below, ctx)
        }
        Operands::AtMost(n) if operands.len() > n => Err(Unproven::TooManyOperands {
            command: name.to_owned(),
            most: n,
        }),
        Operands::AtMost(_) => paths(&operands, ctx),
    }
}

/// Whether the options make the command read below its folder operands (over-approximated:
/// a cluster holding the letter counts, `--directories=recurse` too).
fn reads_below(spec: &Spec, args: &[Word]) -> bool {
    spec.recursive.contains(&"*")
        || args.iter().filter_map(Word::fixed).any(|v| {
            spec.recursive.contains(&v)
                || v.ends_with("recurse")
                || (!v.starts_with("--")
                    && v.starts_with('-')
                    && spec
                        .recursive
                        .iter()
                        .filter_map(|r| r.strip_prefix('-').filter(|l| l.len() == 1))
                        .any(|letter| v[1..].contains(letter)))
        })
}

fn paths(words: &[&Word], ctx: &Ctx) -> Result<(), Unproven> {
    paths_below(words, false, ctx)
}

/// Every operand is logged before the first one outside is reported.
fn paths_below(words: &[&Word], below: bool, ctx: &Ctx) -> Result<(), Unproven> {
    let results: Vec<Result<(), Unproven>> = words
        .iter()
        .map(|w| check_read_below(w, below, ctx.env, ctx.cwds, ctx.reads))
        .collect();
    results.into_iter().collect()
}

fn sed(args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let mut scripts: Vec<&Word> = Vec::new();
    let mut operands: Vec<&Word> = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let Some(v) = w.fixed() else {
            if w.may_be_flag {
                return Err(Unproven::SedMayBeOption(w.raw.clone()));
            }
            operands.push(w);
            continue;
        };
        match v {
            "-n" | "--quiet" | "--silent" | "-E" | "-r" | "--regexp-extended" | "-z"
            | "--null-data" | "-s" | "--separate" | "-u" | "--unbuffered" | "--posix"
            | "--debug" | "--sandbox" | "--" => {}
            "-e" | "--expression" => {
                scripts.push(args.get(i).ok_or(Unproven::SedNeedsScript)?);
                i += 1;
            }
            "-l" | "--line-length" => i += 1,
            v if v.starts_with("--expression=") => {}
            v if v.starts_with("--line-length=") => {}
            v if v.starts_with('-') && v.len() > 1 => {
                let letters = &v[1..];
                if letters.chars().all(|c| "nErzsu".contains(c)) {
                    continue;
                }
                if let Some(rest) = letters
                    .strip_prefix('e')
                    .or_else(|| letters.strip_prefix('n').and_then(|l| l.strip_prefix('e')))
                    && !rest.is_empty()
                {
                    return Ok(check_sed_script(rest)?);
                }
                return Err(Unproven::SedOption(v.to_owned()));
            }
            _ => operands.push(w),
        }
    }
    for inline in args.iter().filter_map(|w| w.fixed()) {
        if let Some(s) = inline.strip_prefix("--expression=") {
            check_sed_script(s)?;
        }
    }
    if scripts.is_empty()
        && !args
            .iter()
            .any(|w| w.fixed().is_some_and(|v| v.starts_with("--expression=")))
    {
        if operands.is_empty() {
            return Err(Unproven::SedWithoutScript);
        }
        scripts.push(operands.remove(0));
    }
    for s in scripts {
        let text = s
            .fixed()
            .ok_or_else(|| Unproven::SedScriptNotStatic(s.raw.clone()))?;
        check_sed_script(text)?;
    }
    paths(&operands, ctx)
}

fn awk(args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let mut program: Option<&Word> = None;
    let mut operands: Vec<&Word> = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let v = w.fixed().ok_or_else(|| Unproven::ArgumentNotStatic {
            command: "awk",
            word: w.raw.clone(),
        })?;
        if program.is_none() {
            match v {
                "-F" | "-v" | "--field-separator" | "--assign" => {
                    i += 1;
                    continue;
                }
                "--" => continue,
                v if v.starts_with("-F") || v.starts_with("-v") => continue,
                v if v.starts_with('-') => {
                    return Err(Unproven::NotReadOnly {
                        command: "awk".to_owned(),
                        option: v.to_owned(),
                    });
                }
                _ => {
                    program = Some(w);
                    continue;
                }
            }
        }
        let assignment = v
            .split_once('=')
            .is_some_and(|(n, _)| super::wrappers::is_name(n));
        if !assignment {
            operands.push(w);
        }
    }
    let program = program
        .and_then(Word::fixed)
        .ok_or(Unproven::AwkWithoutProgram)?;
    check_awk_program(program)?;
    paths(&operands, ctx)
}

/// `find` tests and actions that only read, with how many words each takes.
fn find_primary(p: &str) -> Option<usize> {
    Some(match p {
        "-print"
        | "-print0"
        | "-ls"
        | "-prune"
        | "-quit"
        | "-true"
        | "-false"
        | "-empty"
        | "-readable"
        | "-writable"
        | "-executable"
        | "-nouser"
        | "-nogroup"
        | "-depth"
        | "-xdev"
        | "-mount"
        | "-noleaf"
        | "-daystart"
        | "-not"
        | "!"
        | "("
        | ")"
        | "-a"
        | "-o"
        | "-and"
        | "-or"
        | ","
        | "-ignore_readdir_race"
        | "-noignore_readdir_race" => 0,
        "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-iwholename" | "-regex"
        | "-iregex" | "-type" | "-xtype" | "-maxdepth" | "-mindepth" | "-size" | "-mtime"
        | "-mmin" | "-atime" | "-amin" | "-ctime" | "-cmin" | "-newer" | "-anewer" | "-cnewer"
        | "-perm" | "-user" | "-group" | "-uid" | "-gid" | "-links" | "-inum" | "-samefile"
        | "-lname" | "-ilname" | "-fstype" | "-regextype" | "-printf" | "-used" | "-context" => 1,
        p if p.starts_with("-newer") && p.len() == 8 => 1,
        _ => return None,
    })
}

fn find(args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let mut i = 0;
    let mut roots: Vec<&Word> = Vec::new();
    while let Some(w) = args.get(i) {
        let v = w.fixed().ok_or_else(|| Unproven::ArgumentNotStatic {
            command: "find",
            word: w.raw.clone(),
        })?;
        match v {
            "-P" | "-H" => {}
            "-L" | "-follow" => {
                return Err(Unproven::FindFollowsLinks);
            }
            v if v.starts_with('-') || v == "(" || v == "!" => break,
            _ => roots.push(w),
        }
        i += 1;
    }
    while let Some(w) = args.get(i) {
        let v = w.fixed().ok_or_else(|| Unproven::ArgumentNotStatic {
            command: "find",
            word: w.raw.clone(),
        })?;
        match v {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                return Err(Unproven::FindRuns(v.to_owned()));
            }
            "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                return Err(Unproven::FindWrites(v.to_owned()));
            }
            _ => match find_primary(v) {
                Some(n) => i += 1 + n,
                None => {
                    return Err(Unproven::NotReadOnly {
                        command: "find".to_owned(),
                        option: v.to_owned(),
                    });
                }
            },
        }
    }
    paths(&roots, ctx)
}

fn jq(args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let modules = args
        .iter()
        .filter_map(Word::fixed)
        .any(|v| v.contains("import") || v.contains("include") || v.starts_with("-L"));
    if modules {
        return Err(Unproven::JqModules);
    }
    let mut filter_given = false;
    let mut operands: Vec<&Word> = Vec::new();
    // After `--args`/`--jsonargs` the operands are strings, not files; but jq keeps reading
    // options wherever they stand (`--args --rawfile e FILE` reads FILE), up to `--`.
    let mut positional_args = false;
    let mut options_done = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let v = w.fixed().ok_or_else(|| Unproven::ArgumentNotStatic {
            command: "jq",
            word: w.raw.clone(),
        })?;
        if !options_done && v == "--" {
            options_done = true;
            continue;
        }
        if options_done || v == "-" || !v.starts_with('-') {
            if !filter_given {
                filter_given = true;
            } else if !positional_args {
                operands.push(w);
            }
            continue;
        }
        match v {
            "-r"
            | "-j"
            | "-a"
            | "-c"
            | "-n"
            | "-e"
            | "-s"
            | "-S"
            | "-C"
            | "-M"
            | "-R"
            | "-g"
            | "--raw-output"
            | "--raw-output0"
            | "--join-output"
            | "--ascii-output"
            | "--compact-output"
            | "--null-input"
            | "--exit-status"
            | "--slurp"
            | "--sort-keys"
            | "--color-output"
            | "--monochrome-output"
            | "--raw-input"
            | "--tab"
            | "--seq"
            | "--stream"
            | "--unbuffered" => {}
            "--args" | "--jsonargs" => positional_args = true,
            "--indent" => i += 1,
            "--arg" | "--argjson" => i += 2,
            "--slurpfile" | "--rawfile" => {
                let file = args.get(i + 1).ok_or(Unproven::JqMissingFile)?;
                check_read(file, ctx.env, ctx.cwds, ctx.reads)?;
                i += 2;
            }
            "-f" | "--from-file" => {
                let file = args.get(i).ok_or(Unproven::JqMissingFile)?;
                check_read(file, ctx.env, ctx.cwds, ctx.reads)?;
                filter_given = true;
                i += 1;
            }
            v if v.starts_with('-') && v.len() > 1 => {
                if v[1..].chars().all(|c| "rjacnesSCMRg".contains(c)) && !v.starts_with("--") {
                    continue;
                }
                return Err(Unproven::NotReadOnly {
                    command: "jq".to_owned(),
                    option: v.to_owned(),
                });
            }
            _ => {
                return Err(Unproven::NotReadOnly {
                    command: "jq".to_owned(),
                    option: v.to_owned(),
                });
            }
        }
    }
    paths(&operands, ctx)
}

/// `set -euo pipefail` and friends; `set -k` would turn later words into assignments.
fn set(args: &[Word]) -> Result<(), Unproven> {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let v = w.fixed().ok_or(Unproven::SomeArgumentNotStatic("set"))?;
        if v == "--" {
            return Ok(());
        }
        let letters = v
            .strip_prefix('-')
            .or_else(|| v.strip_prefix('+'))
            .ok_or_else(|| Unproven::SetNotUnderstood(v.to_owned()))?;
        for c in letters.chars() {
            match c {
                'e' | 'u' | 'x' | 'v' | 'f' | 'E' | 'C' | 'T' => {}
                'o' => {
                    let name = args.get(i).and_then(Word::fixed).unwrap_or("");
                    i += 1;
                    if !matches!(
                        name,
                        "pipefail"
                            | "errexit"
                            | "nounset"
                            | "xtrace"
                            | "verbose"
                            | "noglob"
                            | "errtrace"
                            | "noclobber"
                            | "functrace"
                    ) {
                        return Err(Unproven::NotHarmless {
                            command: "set",
                            option: format!("-o {name}"),
                        });
                    }
                }
                other => {
                    return Err(Unproven::NotHarmless {
                        command: "set",
                        option: format!("-{other}"),
                    });
                }
            }
        }
    }
    Ok(())
}

fn date(args: &[Word]) -> Result<(), Unproven> {
    for w in args {
        let v = w.fixed().ok_or(Unproven::SomeArgumentNotStatic("date"))?;
        if v.starts_with("-s") || v.starts_with("--s") || v.starts_with("--set") {
            return Err(Unproven::DateSetsClock);
        }
        if v.starts_with("-f")
            || v.starts_with("-r")
            || v.starts_with("--f")
            || v.starts_with("--r")
        {
            return Err(Unproven::DateReadsFile);
        }
    }
    Ok(())
}

/// Flags that make a command write files or run programs, whatever rule allowed it: an allow
/// rule such as `git diff:*` is taken to allow the command, not `--output=FILE` or `-c`.
pub(crate) fn hazard(name: &str, args: &[Word]) -> Option<String> {
    // A word whose expansion is not known may be any of the options below.
    // (After an option known to take a value, `git commit -m "$msg"`, it is that value.)
    let takes_value = |w: &Word| {
        name == "git"
            && matches!(
                w.fixed(),
                Some(
                    "-m" | "--message"
                        | "-F"
                        | "--file"
                        | "--author"
                        | "-b"
                        | "-B"
                        | "--format"
                        | "--pretty"
                        | "-n"
                        | "--grep"
                        | "-S"
                        | "-G"
                )
            )
    };
    let before_end = args
        .iter()
        .position(|w| w.fixed() == Some("--"))
        .unwrap_or(args.len());
    if matches!(
        name,
        "git" | "sed" | "sort" | "rg" | "diff" | "tree" | "find"
    ) && let Some(w) = args[..before_end].iter().enumerate().find_map(|(i, w)| {
        let value = i > 0 && takes_value(&args[i - 1]);
        (w.fixed().is_none() && w.may_be_flag && !value).then_some(w)
    }) {
        return Some(format!(
            "`{}` may expand to an option of `{name}` that writes files or runs programs",
            w.raw
        ));
    }
    if name == "git" {
        return git_hazard(args);
    }
    let hazards = option_hazards(name)?;
    let flags = args
        .iter()
        .filter_map(Word::fixed)
        .take_while(|v| *v != "--")
        .filter(|v| v.starts_with('-'));
    for v in flags {
        if long_options::any_of(v, hazards.options, hazards.long_options, hazards.valued) {
            return Some(format!("`{name} {v}` writes files or runs programs"));
        }
    }
    None
}

/// A program's options that write files or run programs, and how it reads them.
struct OptionHazards {
    long_options: LongOptions,
    /// Short options that take a value, which ends a cluster (`sort -ko` is `-k o`).
    valued: &'static str,
    /// `-x` entries are letters of a cluster, `--long` entries are read as the program reads
    /// them, other single-dash words (`find -delete`) are whole words.
    options: &'static [&'static str],
}

fn option_hazards(name: &str) -> Option<OptionHazards> {
    use LongOptions::Prefix;
    Some(match name {
        // GNU sed and sort use getopt_long: `sed --in-pl`, `sort --comp=cat` are taken.
        "sed" => OptionHazards {
            long_options: Prefix,
            valued: "efl",
            options: &["-i", "--in-place"],
        },
        "sort" => OptionHazards {
            long_options: Prefix,
            valued: "kStT",
            options: &[
                "-o",
                "--output",
                "--compress-program",
                "-T",
                "--temporary-directory",
            ],
        },
        // ripgrep and tree parse their own flags; whether they take prefixes is not checked
        // here, so a prefix counts as the option.
        "rg" => OptionHazards {
            long_options: Prefix,
            valued: "efgtTmABCMjEr",
            options: &["--pre", "--hostname-bin"],
        },
        "tree" => OptionHazards {
            long_options: Prefix,
            valued: "LIP",
            options: &["-o"],
        },
        // GNU diff: getopt_long.
        "diff" => OptionHazards {
            long_options: Prefix,
            valued: "CUDFILSxXW",
            options: &["--output"],
        },
        // find's primaries are single-dash words, matched whole.
        "find" => OptionHazards {
            long_options: LongOptions::Exact,
            valued: "",
            options: &["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"],
        },
        _ => return None,
    })
}

fn git_hazard(args: &[Word]) -> Option<String> {
    let mut global = true;
    let mut sub = None;
    for v in args.iter().filter_map(Word::fixed) {
        if v == "--" {
            break;
        }
        if !v.starts_with('-') {
            global = false;
            sub = sub.or(Some(v));
            continue;
        }
        let name = v.split('=').next().unwrap_or(v);
        // git's global options take full spellings only (`git --no-pag` is an error); after
        // the subcommand, parse-options takes any unambiguous prefix.
        let bad = if global {
            matches!(
                name,
                "-c" | "-p" | "--paginate" | "--config-env" | "--exec-path"
            )
        } else {
            // `git grep -O[PAGER]`, also inside a cluster (`-nO`), is `--open-files-in-pager`.
            super::git::dangerous_long(name)
                || (sub == Some("grep") && long_options::cluster_has(v, 'O', "efABCm"))
        };
        if bad {
            return Some(format!("`git {v}` can write files or run programs"));
        }
    }
    None
}

/// `read`, `mapfile`, `wait -p`, `printf -v` and `getopts` bind the variables they name:
/// proven only when every name is harmless and nothing runs as code (see `bindings`).
fn binds(name: &str, args: &[Word]) -> Result<(), Unproven> {
    let bound = super::bindings::builtin_bindings(name, args)
        .ok_or_else(|| Unproven::UnknownCommand(name.to_owned()))?;
    if let Some(problem) = bound.problem {
        return Err(Unproven::Binding(problem));
    }
    if let Some(callback) = bound.code.first() {
        return Err(Unproven::Binding(format!(
            "`{name}` runs `{}` as shell code",
            callback.raw
        )));
    }
    for n in &bound.names {
        super::bindings::judge_name(name, n).map_err(Unproven::Binding)?;
    }
    Ok(())
}
