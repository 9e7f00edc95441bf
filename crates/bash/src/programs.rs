//! What the analyser knows of each program it can prove read-only: one definition a program,
//! holding its names, how its arguments are read, the options that write or run something
//! whatever rule allows the program, what it reads in words, and commands it must prove or
//! ask about. The proof (`readonly`), the option hazards, the table in `docs/bash.md` and
//! the tests below all read these definitions, so a program is added, documented and tested
//! in one place. Data and its rendering only; the readers of options live in `readonly`.

use std::fmt::Write as _;

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
}

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
    pub long_options: LongOptions,
    /// Short options that take a value, which ends a cluster (`sort -ko` is `-k o`).
    pub valued: &'static str,
    /// `-x` entries are letters of a cluster, `--long` entries are read as the program reads
    /// them, other single-dash words (`find -delete`) are whole words.
    pub options: &'static [&'static str],
}

/// The definition of the program called `name` (a base name), if it is one the analyser
/// can prove read-only.
pub(crate) fn lookup(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.names.contains(&name))
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
            cell(&hazards_text(&program.hazards)),
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

fn hazards_text(hazards: &Hazards) -> String {
    match hazards {
        Hazards::None => "—".to_owned(),
        Hazards::Table(table) => {
            let prefixes = table.long_options == LongOptions::Prefix
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
    },
    Program {
        names: &["read", "mapfile", "readarray", "getopts", "wait"],
        proof: Binds,
        hazards: Hazards::None,
        reads: "nothing; it binds the variables it names, proven when each is harmless and no callback runs",
        proven: &["read -r line", "mapfile -t lines"],
        asked: &["read PATH", "mapfile -C cb lines"],
    },
    Program {
        names: &["printf"],
        proof: Own(Checker::Printf),
        hazards: Hazards::None,
        reads: "nothing; `-v NAME` binds a variable as `read` does",
        proven: &["printf '%s\\n' a", "printf -v out %d 1"],
        asked: &["printf -v PATH x", "printf \"$fmt\" x"],
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
            long_options: LongOptions::Prefix,
            valued: "efgtTmABCMjEr",
            options: &["--pre", "--hostname-bin"],
        }),
        reads: "a pattern, then the trees below its folders (the working folder without one)",
        proven: &["rg -n fn src"],
        asked: &["rg --pre cat x src"],
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
            long_options: LongOptions::Prefix,
            valued: "LIP",
            options: &["-o"],
        }),
        reads: "its folders",
        proven: &["tree -L 2 src"],
        asked: &["tree -o out src"],
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
            long_options: LongOptions::Prefix,
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
            long_options: LongOptions::Prefix,
            valued: "CUDFILSxXW",
            options: &["--output"],
        }),
        reads: "its files, and those of `-X`, `--from-file`, `--to-file`; the trees below its folders with `-r`",
        proven: &["diff -u src/a.rs src/b.rs"],
        asked: &["diff --output=x src/a.rs src/b.rs"],
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
    },
    Program {
        names: &["rev"],
        proof: Options(spec("", Paths)),
        hazards: Hazards::None,
        reads: "its files",
        proven: &["rev src/a.rs"],
        asked: &["rev -x a"],
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
    },
    Program {
        names: &["pwd"],
        proof: Options(spec("LP", Ignored)),
        hazards: Hazards::None,
        reads: "nothing",
        proven: &["pwd -P"],
        asked: &["pwd --bogus"],
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
    },
    Program {
        names: &["whoami", "arch", "tty", "id", "groups", "logname"],
        proof: Options(spec("", Ignored)),
        hazards: Hazards::None,
        reads: "nothing; no option is known",
        proven: &["whoami", "id"],
        asked: &["id -u"],
    },
    Program {
        names: &["git"],
        proof: Own(Checker::Git),
        hazards: Hazards::Git,
        reads: "the repository and the paths named, through the subcommands that only inspect",
        proven: &["git status", "git log -p -- src/a.rs"],
        asked: &["git commit -m x", "git -c core.pager=x log"],
    },
    Program {
        names: &["sed"],
        proof: Own(Checker::Sed),
        // GNU sed uses getopt_long: `sed --in-pl` is taken.
        hazards: Hazards::Table(OptionHazards {
            long_options: LongOptions::Prefix,
            valued: "efl",
            options: &["-i", "--in-place"],
        }),
        reads: "its files, under a script of print commands only (no `e`, `w`, `W`)",
        proven: &["sed -n 1,5p src/a.rs"],
        asked: &["sed -i s/a/b/ src/a.rs", "sed -n 'w out' src/a.rs"],
    },
    Program {
        names: &["awk", "gawk", "mawk", "nawk"],
        proof: Own(Checker::Awk),
        hazards: Hazards::None,
        reads: "its files, under a program that writes, runs and reads nothing else (no `>`, `|`, `system`, `getline`, `@`, `ENVIRON`, `PROCINFO`)",
        proven: &["awk '{print $1}' src/a.rs"],
        asked: &["awk 'BEGIN{system(\"id\")}'"],
    },
    Program {
        names: &["find"],
        proof: Own(Checker::Find),
        // find's primaries are single-dash words, matched whole.
        hazards: Hazards::Table(OptionHazards {
            long_options: LongOptions::Exact,
            valued: "",
            options: &["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"],
        }),
        reads: "the trees below its starting points, with tests and printing actions only (no `-exec`, no `-L`)",
        proven: &["find src -name '*.rs'"],
        asked: &["find src -delete", "find -L src"],
    },
    Program {
        names: &["jq"],
        proof: Own(Checker::Jq),
        hazards: Hazards::None,
        reads: "its files, and those of `--rawfile`, `--slurpfile` and `-f`; modules (`-L`, `import`) ask",
        proven: &["jq .name package.json"],
        asked: &["jq -L lib . a.json"],
    },
    Program {
        names: &["set"],
        proof: Own(Checker::Set),
        hazards: Hazards::None,
        reads: "nothing; only `-e -u -x -v -f -E -C -T`, and `-o` with `pipefail` or the long name of one of those (`set -k` would turn later words into assignments)",
        proven: &["set -euo pipefail"],
        asked: &["set -k"],
    },
    Program {
        names: &["date"],
        proof: Own(Checker::Date),
        hazards: Hazards::None,
        reads: "nothing; `-s`/`--set` and the file options `-f`, `-r` ask",
        proven: &["date +%s"],
        asked: &["date -s 2020-01-01", "date -r src/a.rs"],
    },
    Program {
        names: &["hostname"],
        proof: Own(Checker::Hostname),
        hazards: Hazards::None,
        reads: "nothing, without arguments (with one it sets the name)",
        proven: &["hostname"],
        asked: &["hostname h"],
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
                                && table.long_options == LongOptions::Prefix
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

    #[test]
    fn each_name_has_one_definition() {
        let mut names: Vec<&str> = PROGRAMS
            .iter()
            .flat_map(|p| p.names.iter().copied())
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a name stands under two definitions");
    }
}
