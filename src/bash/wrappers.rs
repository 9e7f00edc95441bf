//! Commands that run another command (`env`, `timeout`, `xargs`, `sudo`, …) and commands that
//! run a script given inline (`sh -c`, `eval`, `su -c`): finds what they really run.

use super::word::Word;

/// What a wrapper runs.
#[derive(Debug)]
pub(crate) enum Unwrap {
    /// Not a wrapper: the command itself is what runs.
    No,
    /// The real command is `argv[start..]`.
    Inner {
        start: usize,
        /// Variables the wrapper sets for it (`env NAME=v`).
        assignments: Vec<String>,
        /// Something about the wrapper's own options that makes it unprovable.
        problem: Option<String>,
        /// The wrapper can never be allowed without asking (`sudo`).
        forced: Option<&'static str>,
    },
    /// A new argv built from the wrapper's arguments (`xargs cmd` + the items it reads).
    Built {
        argv: Vec<Word>,
        problem: Option<String>,
    },
    /// It runs no command (`command -v x`, `exec` with only redirections, `env` alone).
    Nothing { read_only: bool, why: &'static str },
    /// Options that are not understood: the inner command cannot be found.
    Opaque(String),
}

/// An option table: flags alone, and options that take a value (attached or next word).
struct Opts {
    flags: &'static [&'static str],
    valued: &'static [&'static str],
}

/// Skips options from `i`; returns the index of the first operand. `--` is consumed.
fn skip_opts(argv: &[Word], mut i: usize, opts: &Opts, name: &str) -> Result<usize, String> {
    while let Some(w) = argv.get(i) {
        let Some(v) = w.fixed() else {
            return Err(format!(
                "`{name}` has an argument `{}` that is not known",
                w.raw
            ));
        };
        if v == "--" {
            return Ok(i + 1);
        }
        if !v.starts_with('-') || v == "-" {
            return Ok(i);
        }
        i += 1 + option_width(v, argv.get(i + 1), opts)
            .ok_or_else(|| format!("`{name}` option `{v}` is not understood"))?;
    }
    Ok(i)
}

/// How many extra words an option consumes (0 or 1), or None if unknown.
fn option_width(v: &str, next: Option<&Word>, opts: &Opts) -> Option<usize> {
    if opts.flags.contains(&v) {
        return Some(0);
    }
    if opts.valued.contains(&v) {
        return next.map(|_| 1);
    }
    if let Some((name, _)) = v.split_once('=')
        && name.starts_with("--")
        && opts.valued.contains(&name)
    {
        return Some(0);
    }
    if !v.starts_with("--") {
        // A cluster of short flags, the last of which may take a value (`-n5`, `-kn 5`).
        let chars: Vec<char> = v.chars().skip(1).collect();
        for (j, c) in chars.iter().enumerate() {
            let opt = format!("-{c}");
            if opts.flags.contains(&opt.as_str()) {
                continue;
            }
            if opts.valued.contains(&opt.as_str()) {
                return if j + 1 < chars.len() {
                    Some(0)
                } else {
                    next.map(|_| 1)
                };
            }
            return None;
        }
        return Some(0);
    }
    None
}

fn inner(start: usize) -> Unwrap {
    Unwrap::Inner {
        start,
        assignments: Vec::new(),
        problem: None,
        forced: None,
    }
}

fn opaque_or(result: Result<usize, String>, f: impl FnOnce(usize) -> Unwrap) -> Unwrap {
    match result {
        Ok(i) => f(i),
        Err(e) => Unwrap::Opaque(e),
    }
}

/// Looks at `argv` (whose command base name is `name`) as a wrapper.
pub(crate) fn unwrap(name: &str, argv: &[Word]) -> Unwrap {
    match name {
        "env" => env(argv),
        "command" => {
            // Only options before the command name count: `command rm -v x` runs `rm`.
            if argv
                .iter()
                .skip(1)
                .take_while(|w| w.fixed().is_some_and(|v| v.starts_with('-')))
                .any(|w| matches!(w.fixed(), Some("-v" | "-V" | "-pv" | "-vp")))
            {
                return Unwrap::Nothing {
                    read_only: true,
                    why: "`command -v` only describes commands",
                };
            }
            let opts = Opts {
                flags: &["-p"],
                valued: &[],
            };
            opaque_or(skip_opts(argv, 1, &opts, name), inner)
        }
        "builtin" | "coproc" | "nohup" => {
            let opts = Opts {
                flags: &[],
                valued: &[],
            };
            opaque_or(skip_opts(argv, 1, &opts, name), inner)
        }
        "exec" => {
            let opts = Opts {
                flags: &["-c", "-l"],
                valued: &["-a"],
            };
            match skip_opts(argv, 1, &opts, name) {
                Ok(i) if i >= argv.len() => Unwrap::Nothing {
                    read_only: true,
                    why: "`exec` without a command only applies its redirections",
                },
                other => opaque_or(other, inner),
            }
        }
        "nice" => {
            let opts = Opts {
                flags: &[],
                valued: &["-n", "--adjustment"],
            };
            // `nice -5 cmd` is the old spelling of `-n 5`.
            let start = match argv.get(1).and_then(Word::fixed) {
                Some(v) if v.len() > 1 && v[1..].chars().all(|c| c.is_ascii_digit()) => 2,
                _ => 1,
            };
            opaque_or(skip_opts(argv, start, &opts, name), inner)
        }
        "timeout" => {
            let opts = Opts {
                flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
                valued: &["-s", "--signal", "-k", "--kill-after"],
            };
            // The first operand is the duration.
            opaque_or(skip_opts(argv, 1, &opts, name), |i| inner(i + 1))
        }
        "time" => {
            let opts = Opts {
                flags: &[
                    "-p",
                    "-a",
                    "--append",
                    "-v",
                    "--verbose",
                    "-q",
                    "--quiet",
                    "--portability",
                ],
                valued: &["-f", "--format", "-o", "--output"],
            };
            let writes = argv
                .iter()
                .skip(1)
                .filter_map(Word::fixed)
                .take_while(|v| v.starts_with('-'))
                .any(|v| v.starts_with("-o") || v.starts_with("--o"));
            opaque_or(skip_opts(argv, 1, &opts, name), |start| Unwrap::Inner {
                start,
                assignments: Vec::new(),
                problem: writes.then(|| "`time -o` writes its report to a file".to_owned()),
                forced: None,
            })
        }
        "stdbuf" => {
            let opts = Opts {
                flags: &[],
                valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
            };
            opaque_or(skip_opts(argv, 1, &opts, name), inner)
        }
        "xargs" => xargs(argv),
        "sudo" => {
            let opts = Opts {
                flags: &[
                    "-A",
                    "-b",
                    "-E",
                    "-H",
                    "-K",
                    "-k",
                    "-n",
                    "-P",
                    "-S",
                    "-B",
                    "-N",
                    "-i",
                    "-s",
                    "--preserve-env",
                    "--login",
                    "--shell",
                    "--non-interactive",
                    "--background",
                    "--askpass",
                    "--stdin",
                    "--set-home",
                    "--reset-timestamp",
                ],
                valued: &[
                    "-u",
                    "--user",
                    "-g",
                    "--group",
                    "-p",
                    "--prompt",
                    "-C",
                    "--close-from",
                    "-D",
                    "--chdir",
                    "-h",
                    "--host",
                    "-r",
                    "--role",
                    "-t",
                    "--type",
                    "-T",
                    "--command-timeout",
                    "-U",
                    "--other-user",
                ],
            };
            privileged(skip_opts(argv, 1, &opts, name))
        }
        "doas" => {
            let opts = Opts {
                flags: &["-n", "-s", "-L"],
                valued: &["-u", "-C"],
            };
            privileged(skip_opts(argv, 1, &opts, name))
        }
        "busybox" => Unwrap::Inner {
            start: 1,
            assignments: Vec::new(),
            problem: None,
            forced: Some("`busybox` runs any applet it is given"),
        },
        _ => Unwrap::No,
    }
}

const PRIVILEGED: &str = "it runs commands as another user";

fn privileged(result: Result<usize, String>) -> Unwrap {
    match result {
        Ok(start) => Unwrap::Inner {
            start,
            assignments: Vec::new(),
            problem: None,
            forced: Some(PRIVILEGED),
        },
        Err(e) => Unwrap::Opaque(format!("{e}; {PRIVILEGED}")),
    }
}

fn env(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
        ],
        valued: &["-u", "--unset", "-C", "--chdir"],
    };
    let mut problem = None;
    let mut i = 1;
    while let Some(v) = argv.get(i).and_then(Word::fixed) {
        if v == "--" {
            i += 1;
            break;
        }
        if !v.starts_with('-') {
            break;
        }
        if v.starts_with("-S") || v.starts_with("--split-string") || v.starts_with("--s") {
            return Unwrap::Opaque("`env -S` builds the command from a string".to_owned());
        }
        if v.starts_with("-C") || v.starts_with("--chdir") {
            problem = Some("`env -C` runs the command in another directory".to_owned());
        }
        match option_width(v, argv.get(i + 1), &opts) {
            Some(extra) => i += 1 + extra,
            None => return Unwrap::Opaque(format!("`env` option `{v}` is not understood")),
        }
    }
    let mut assignments = Vec::new();
    while let Some(w) = argv.get(i) {
        match w.value.as_deref().and_then(|v| v.split_once('=')) {
            Some((name, _)) if is_name(name) => {
                assignments.push(name.to_owned());
                i += 1;
            }
            _ => break,
        }
    }
    if i >= argv.len() {
        return Unwrap::Nothing {
            read_only: false,
            why: "`env` without a command prints the environment, which may hold secrets",
        };
    }
    if argv[i].value.is_none() {
        return Unwrap::Opaque(format!("`env` runs `{}`, which is not known", argv[i].raw));
    }
    Unwrap::Inner {
        start: i,
        assignments,
        problem,
        forced: None,
    }
}

pub(crate) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn xargs(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &[
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-x",
            "--exit",
            "-p",
            "--interactive",
            "-o",
            "--open-tty",
        ],
        valued: &[
            "-L",
            "--max-lines",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "-d",
            "--delimiter",
            "-E",
            "--eof",
            "--process-slot-var",
            "-I",
            "-a",
            "--arg-file",
        ],
    };
    let mut replace: Option<String> = None;
    let mut problem = None;
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        let Some(v) = w.fixed() else {
            return Unwrap::Opaque(format!(
                "`xargs` has an argument `{}` that is not known",
                w.raw
            ));
        };
        if v == "--" {
            i += 1;
            break;
        }
        if !v.starts_with('-') {
            break;
        }
        if v == "-I" {
            replace = argv.get(i + 1).and_then(|w| w.value.clone());
        } else if let Some(r) = v.strip_prefix("-I") {
            replace = Some(r.to_owned());
        } else if v == "-i" || v == "--replace" {
            replace = Some("{}".to_owned());
            i += 1;
            continue;
        } else if let Some(r) = v
            .strip_prefix("--replace=")
            .or_else(|| v.strip_prefix("-i"))
        {
            replace = Some(r.to_owned());
            i += 1;
            continue;
        } else if v.starts_with("-a") || v.starts_with("--arg-file") {
            problem = Some("`xargs -a` reads its items from a file".to_owned());
        } else if v.starts_with("-e") || v.starts_with("-l") {
            // Old optional-value spellings (`-eEOF`, `-l1`).
            i += 1;
            continue;
        }
        match option_width(v, argv.get(i + 1), &opts) {
            Some(extra) => i += 1 + extra,
            None => return Unwrap::Opaque(format!("`xargs` option `{v}` is not understood")),
        }
    }
    let mut inner: Vec<Word> = if i < argv.len() {
        argv[i..].to_vec()
    } else {
        vec![Word::literal("echo")]
    };
    match replace {
        Some(r) if !r.is_empty() => {
            for w in inner.iter_mut() {
                if w.value.as_deref().is_some_and(|v| v.contains(r.as_str())) {
                    *w = Word::dynamic(&w.raw);
                }
            }
        }
        _ => inner.push(Word::dynamic("<items read by xargs>")),
    }
    Unwrap::Built {
        argv: inner,
        problem,
    }
}

/// What a shell-like command runs as a script.
#[derive(Debug)]
pub(crate) enum Inline {
    /// Not a shell, `eval` or `su`.
    No,
    /// The literal script it runs.
    Script(String),
    /// It runs code that cannot be read here (a script file, stdin, an expansion).
    Unknown(String),
}

pub(crate) const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

pub(crate) fn inline_script(name: &str, argv: &[Word]) -> Inline {
    match name {
        n if SHELLS.contains(&n) => shell(argv),
        "eval" => {
            let parts: Option<Vec<&str>> = argv.iter().skip(1).map(|w| w.fixed()).collect();
            match parts {
                Some(parts) => Inline::Script(parts.join(" ")),
                None => Inline::Unknown("`eval` of text that is not known statically".to_owned()),
            }
        }
        "su" => {
            let mut it = argv.iter().skip(1);
            while let Some(w) = it.next() {
                match w.fixed() {
                    Some("-c" | "--command") => return script_word(it.next()),
                    Some(v) if v.starts_with("--command=") => {
                        return Inline::Script(v["--command=".len()..].to_owned());
                    }
                    _ => {}
                }
            }
            Inline::Unknown("`su` starts a login shell".to_owned())
        }
        _ => Inline::No,
    }
}

fn script_word(word: Option<&Word>) -> Inline {
    match word.and_then(Word::fixed) {
        Some(s) => Inline::Script(s.to_owned()),
        None => Inline::Unknown("the inline script is not known statically".to_owned()),
    }
}

fn shell(argv: &[Word]) -> Inline {
    let mut command_string = false;
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        let Some(v) = w.fixed() else { break };
        if v == "--" || v == "-" {
            i += 1;
            break;
        }
        if !(v.starts_with('-') || v.starts_with('+')) {
            break;
        }
        i += 1;
        if v.starts_with("--") {
            if matches!(v, "--rcfile" | "--init-file") {
                i += 1;
            }
            continue;
        }
        let letters = &v[1..];
        if letters.contains('c') {
            command_string = true;
        }
        // `-o name`, `-O name` take the option name as the next word.
        if letters.ends_with('o') || letters.ends_with('O') {
            i += 1;
        }
    }
    match (command_string, argv.get(i)) {
        (true, w) => script_word(w),
        (false, Some(w)) => Inline::Unknown(format!("it runs the script file `{}`", w.raw)),
        (false, None) => Inline::Unknown("it runs commands read from its input".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Word> {
        s.split_whitespace().map(Word::literal).collect()
    }

    fn start(u: &Unwrap) -> Option<usize> {
        match u {
            Unwrap::Inner { start, .. } => Some(*start),
            _ => None,
        }
    }

    #[test]
    fn finds_the_wrapped_command() {
        assert_eq!(
            start(&unwrap("timeout", &words("timeout -s KILL 5 rm x"))),
            Some(4)
        );
        assert_eq!(start(&unwrap("nice", &words("nice -n 5 rm x"))), Some(3));
        assert_eq!(start(&unwrap("nice", &words("nice -5 rm x"))), Some(2));
        assert_eq!(start(&unwrap("env", &words("env -i FOO=1 rm x"))), Some(3));
        assert_eq!(start(&unwrap("stdbuf", &words("stdbuf -oL rm x"))), Some(2));
        assert_eq!(start(&unwrap("sudo", &words("sudo -u root rm x"))), Some(3));
        assert!(matches!(
            unwrap("env", &words("env -S x")),
            Unwrap::Opaque(_)
        ));
    }

    #[test]
    fn xargs_appends_its_items() {
        let Unwrap::Built { argv, .. } = unwrap("xargs", &words("xargs -0 -n 1 rm -f")) else {
            panic!("xargs is a wrapper");
        };
        assert_eq!(argv.len(), 3);
        assert_eq!(argv[0].value.as_deref(), Some("rm"));
        assert_eq!(argv[2].value, None);
    }

    #[test]
    fn finds_inline_scripts() {
        assert!(
            matches!(inline_script("bash", &words("bash -ec ls")), Inline::Script(s) if s == "ls")
        );
        assert!(matches!(
            inline_script("sh", &words("sh x.sh")),
            Inline::Unknown(_)
        ));
        assert!(
            matches!(inline_script("eval", &words("eval rm x")), Inline::Script(s) if s == "rm x")
        );
    }
}
