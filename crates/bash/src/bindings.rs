//! Every construct that binds a shell variable — `NAME=value` words, `for`/`select`, `read`,
//! `mapfile`/`readarray`, `printf -v`, `wait -p`, `getopts`, the declaration builtins and
//! `unset` — judged by one table of names and one reading of subscripts. Data and pure checks;
//! the analyser calls them and analyses what a subscript would run.

use super::evaluated::{plain_number, runs_code, substitutions_loose};
use super::word::Word;

/// Names whose binding changes what later commands do, with why. A trailing `*` matches any
/// suffix. Whatever the table says, only the names [`harmless_shell_variable`] accepts are
/// proven harmless: the table names the reason, the allowlist decides (fail closed).
const DANGEROUS: &[(&str, &str)] = &[
    ("PS0", PROMPT),
    ("PS1", PROMPT),
    ("PS2", PROMPT),
    ("PS3", PROMPT),
    (
        "PS4",
        "with `set -x` Bash expands it before every traced command, running the substitutions in it",
    ),
    (
        "PROMPT_COMMAND",
        "Bash runs it as a command before each prompt",
    ),
    (
        "PATH",
        "it decides which program a command name runs (a committed `tools/ls` would run as `ls`)",
    ),
    (
        "HOME",
        "programs find their configuration through it (git reads `$HOME/.gitconfig`, whose `core.fsmonitor` runs a program), and `~` and `cd` follow it",
    ),
    (
        "XDG_*",
        "programs read their configuration from the folders it names (git reads `$XDG_CONFIG_HOME/git/config`)",
    ),
    ("BASH_ENV", STARTUP),
    ("ENV", STARTUP),
    (
        "IFS",
        "it changes how later unquoted expansions split into words, so the words analysed are not the words that run",
    ),
    ("CDPATH", "it makes `cd DIR` go to a folder elsewhere"),
    (
        "GLOBIGNORE",
        "it changes what later globs match (and turns on `dotglob`)",
    ),
    ("BASHOPTS", SHELL_OPTIONS),
    ("SHELLOPTS", SHELL_OPTIONS),
    ("BASH_COMPAT", SHELL_OPTIONS),
    ("POSIXLY_CORRECT", SHELL_OPTIONS),
    (
        "BASH_XTRACEFD",
        "it sends the `set -x` trace to a file descriptor of its choosing",
    ),
    (
        "BASH_CMDS",
        "it fills Bash's table of command locations, so a name runs another program",
    ),
    ("BASH_ALIASES", "it defines aliases"),
    (
        "BASH_FUNC_*",
        "a bash started later defines the exported function it holds",
    ),
    (
        "BASH_LOADABLES_PATH",
        "`enable -f` loads builtins from the folders it names",
    ),
    (
        "EXECIGNORE",
        "command lookup skips the programs it matches, so a name resolves elsewhere",
    ),
    (
        "HISTFILE",
        "an interactive shell writes its history to the file it names",
    ),
    (
        "MAIL*",
        "Bash reads the files it names and prints their messages",
    ),
    (
        "TMPDIR",
        "programs create their temporary files in the folder it names, which may be outside the workspace",
    ),
    ("LD_*", LOADER),
    ("GCONV_PATH", LOADER),
    ("GLIBC_TUNABLES", LOADER),
    ("LOCPATH", LOADER),
    (
        "GIT_*",
        "git reads its configuration, pager, editor, ssh command and directories from `GIT_*` variables",
    ),
    ("PAGER", RUNS),
    ("MANPAGER", RUNS),
    ("SYSTEMD_PAGER", RUNS),
    ("EDITOR", RUNS),
    ("VISUAL", RUNS),
    ("BROWSER", RUNS),
    ("SHELL", RUNS),
    ("CONFIG_SHELL", RUNS),
    ("SSH_*", RUNS),
    ("SUDO_*", RUNS),
    (
        "LESS*",
        "less runs `LESSOPEN`/`LESSCLOSE` as input filters and reads its options and keys from `LESS*`",
    ),
    ("PYTHON*", INTERPRETER),
    ("NODE_*", INTERPRETER),
    ("PERL5*", INTERPRETER),
    ("PERLLIB", INTERPRETER),
    ("RUBY*", INTERPRETER),
    ("GEM_*", INTERPRETER),
    ("CARGO_*", BUILDER),
    ("RUSTC*", BUILDER),
    ("RUSTFLAGS", BUILDER),
    ("RUSTDOC*", BUILDER),
    ("MAKEFLAGS", BUILDER),
    ("CC", BUILDER),
    ("CXX", BUILDER),
    (
        "TERMINFO*",
        "programs load terminal descriptions from the folders it names",
    ),
    (
        "TZDIR",
        "programs read time-zone files from the folder it names",
    ),
    ("npm_config_*", BUILDER),
    ("yarn_*", BUILDER),
    ("pnpm_*", BUILDER),
];

const PROMPT: &str = "Bash expands prompt strings, running the substitutions in them";
const STARTUP: &str = "every bash (or sh) started later first runs the file it names";
const SHELL_OPTIONS: &str = "it changes the options of this shell or of every bash started later";
const LOADER: &str = "the dynamic loader reads libraries or settings from it in every program";
const RUNS: &str = "programs run the command it names";
const INTERPRETER: &str = "the interpreter loads code or options from it";
const BUILDER: &str =
    "the build tool or runner reads settings from it, some of which name programs";
const PROXY: &str = "programs send their network traffic through the proxy it names";

/// Why binding `name` (no subscript) changes what later commands do, when the table knows.
pub(crate) fn danger(name: &str) -> Option<&'static str> {
    if name.to_ascii_lowercase().ends_with("_proxy") {
        return Some(PROXY);
    }
    DANGEROUS.iter().find_map(|(pattern, why)| {
        let hit = match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pattern,
        };
        hit.then_some(*why)
    })
}

/// Bash expands the value of these later as a prompt (or runs it), so quoted text bound to
/// them is code.
pub(crate) fn expanded_later(name: &str) -> bool {
    matches!(
        name,
        "PS0" | "PS1" | "PS2" | "PS3" | "PS4" | "PROMPT_COMMAND"
    )
}

/// Variables a command may be given in its environment (`LANG=C git status`): they change
/// formatting, never what runs. `TZ` may name a zone file, which is only parsed as one.
pub(crate) fn harmless_in_environment(name: &str) -> bool {
    name.starts_with("LC_")
        || matches!(
            name,
            "LANG"
                | "LANGUAGE"
                | "TZ"
                | "NO_COLOR"
                | "FORCE_COLOR"
                | "CLICOLOR"
                | "CLICOLOR_FORCE"
                | "COLUMNS"
                | "CI"
                | "RUST_LOG"
                | "RUST_BACKTRACE"
                | "CARGO_TERM_COLOR"
                | "TERM"
        )
}

/// A variable set for one builtin that only that builtin reads: `IFS= read -r line` splits
/// the line read and nothing else (the assignment ends with the builtin).
pub(crate) fn scoped_to_builtin(name: &str, builtin: &str) -> bool {
    name == "IFS" && builtin == "read"
}

/// A shell variable the script may bind: the script's own lower-case names (no program reads
/// them from its environment unless they are exported, and none of those is in the table), and
/// the formatting variables.
pub(crate) fn harmless_shell_variable(name: &str) -> bool {
    let own = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    harmless_in_environment(name) || (own && danger(name).is_none())
}

/// Why binding the (possibly subscripted) name `word` through `via` is not proven harmless.
/// A subscript is arithmetic to Bash (an associative array's key is expanded), so only a
/// plain number is inert; the caller analyses what any other subscript would run.
pub(crate) fn judge_name(via: &str, word: &Word) -> Result<(), String> {
    let Some(text) = word.fixed() else {
        return Err(format!(
            "`{via}` binds `{}`, a name not known statically",
            word.raw
        ));
    };
    let (name, subscript) = match text.split_once('[') {
        None => (text, None),
        Some((name, rest)) => (name, Some(rest.strip_suffix(']').unwrap_or(rest))),
    };
    if let Some(index) = subscript
        && !plain_number(index)
    {
        return Err(format!(
            "`{via}` binds `{text}`, whose subscript Bash evaluates (it can run commands hidden in it)"
        ));
    }
    if harmless_shell_variable(name) {
        return Ok(());
    }
    Err(match danger(name) {
        Some(why) => format!("`{via}` binds `{name}`: {why}"),
        None => format!("`{via}` binds `{name}`, which can change what later commands do"),
    })
}

/// The text Bash would evaluate when binding `word`: its subscript, or the whole word when
/// it is not known statically (its value may be `a[$(cmd)]`).
pub(crate) fn evaluated_part(word: &Word) -> Option<String> {
    let text = word.template();
    runs_code(text).then(|| text.to_owned())
}

/// Commands (and `$(…)` bodies) Bash would run while binding `text`.
pub(crate) fn code_in(text: &str) -> Vec<String> {
    let mut scripts = vec![format!(": {text}")];
    scripts.extend(substitutions_loose(text));
    scripts
}

/// Whether a command with these words may bind a variable named in them (a name may hold a
/// subscript, or come from a variable whose value holds one): the walker then treats the
/// script as evaluating data. Over-approximated from the words alone (`builtin read`).
pub(crate) fn may_bind(words: &[&str]) -> bool {
    const BINDERS: &[&str] = &[
        "read",
        "mapfile",
        "readarray",
        "getopts",
        "let",
        "unset",
        "declare",
        "typeset",
        "local",
        "readonly",
        "export",
    ];
    let option_with = |letter: char| {
        words
            .iter()
            .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains(letter))
    };
    words.iter().any(|w| BINDERS.contains(w))
        || (words.contains(&"printf") && option_with('v'))
        || (words.contains(&"wait") && option_with('p'))
}

/// What a binding builtin's arguments bind and run.
pub(crate) struct Bound {
    /// The names bound, as written.
    pub names: Vec<Word>,
    /// Values Bash runs as shell code (`mapfile -C CALLBACK`).
    pub code: Vec<Word>,
    /// Why the arguments cannot be read as Bash reads them, if so.
    pub problem: Option<String>,
}

/// Bash's builtin option syntax for one builtin: flag letters, letters that take a value.
struct Letters {
    flags: &'static str,
    valued: &'static str,
}

/// The names (and code) a call of a variable-binding builtin binds, or None when `name` is
/// not one (`let` and the declarations are judged where their syntax is read).
pub(crate) fn builtin_bindings(name: &str, args: &[Word]) -> Option<Bound> {
    let letters = match name {
        "read" => Letters {
            flags: "ersE",
            valued: "adinNptu",
        },
        "mapfile" | "readarray" => Letters {
            flags: "t",
            valued: "dnOsucC",
        },
        "wait" => Letters {
            flags: "fn",
            valued: "p",
        },
        "printf" => Letters {
            flags: "",
            valued: "v",
        },
        "getopts" => Letters {
            flags: "",
            valued: "",
        },
        _ => return None,
    };
    let mut bound = Bound {
        names: Vec::new(),
        code: Vec::new(),
        problem: None,
    };
    let Parsed { options, operands } = match builtin_options(name, args, &letters) {
        Ok(parsed) => parsed,
        Err(problem) => {
            bound.problem = Some(problem);
            return Some(bound);
        }
    };
    for (letter, value) in options {
        match (name, letter) {
            ("read", 'a') | ("wait", 'p') | ("printf", 'v') => bound.names.push(value),
            ("mapfile" | "readarray", 'C') => bound.code.push(value),
            _ => {}
        }
    }
    match name {
        "read" => bound.names.extend(operands.iter().cloned()),
        "mapfile" | "readarray" => bound.names.extend(operands.first().cloned()),
        "getopts" => bound.names.extend(operands.get(1).cloned()),
        // `wait ID…` and `printf FORMAT ARG…` take data.
        _ => {}
    }
    Some(bound)
}

/// A builtin's arguments split into its options (each letter with its value) and operands.
struct Parsed<'w> {
    options: Vec<(char, Word)>,
    operands: &'w [Word],
}

/// Splits `args` as Bash's builtins read options: letters clustered after one `-`, a valued
/// letter taking the rest of the word or the next word, options ending at `--` or at the
/// first word that is not one.
fn builtin_options<'w>(
    name: &str,
    args: &'w [Word],
    letters: &Letters,
) -> Result<Parsed<'w>, String> {
    let mut options = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(v) = w.fixed() else {
            if w.may_be_flag {
                return Err(format!(
                    "`{name} {}`: an argument not known statically may be an option",
                    w.raw
                ));
            }
            break;
        };
        if v == "--" {
            i += 1;
            break;
        }
        let Some(cluster) = v.strip_prefix('-').filter(|c| !c.is_empty()) else {
            break;
        };
        i += 1;
        for (j, c) in cluster.char_indices() {
            if letters.flags.contains(c) {
                continue;
            }
            if !letters.valued.contains(c) {
                return Err(format!("`{name} -{c}` is not known to be harmless"));
            }
            let rest = &cluster[j + c.len_utf8()..];
            if rest.is_empty() {
                let value = args
                    .get(i)
                    .ok_or_else(|| format!("`{name} -{c}` needs a value"))?;
                i += 1;
                options.push((c, value.clone()));
            } else {
                // `-vNAME`, `-t5`: the value is the rest of the word.
                options.push((c, Word::literal(rest)));
            }
            break;
        }
    }
    Ok(Parsed {
        options,
        operands: &args[i.min(args.len())..],
    })
}
