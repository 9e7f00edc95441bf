//! Commands that run another command (`env`, `timeout`, `xargs`, `sudo`, …) and commands that
//! run a script given inline (`sh -c`, `eval`, `su -c`): finds what they really run.

use super::unproven::Unproven;
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
fn skip_opts(argv: &[Word], mut i: usize, opts: &Opts, name: &str) -> Result<usize, Unproven> {
    while let Some(w) = argv.get(i) {
        let Some(v) = w.fixed() else {
            return Err(Unproven::WrapperArgument {
                wrapper: name.to_owned(),
                word: w.raw.clone(),
            });
        };
        if v == "--" {
            return Ok(i + 1);
        }
        if !v.starts_with('-') || v == "-" {
            return Ok(i);
        }
        i += 1 + option_width(v, argv.get(i + 1), opts).ok_or_else(|| Unproven::WrapperOption {
            wrapper: name.to_owned(),
            option: v.to_owned(),
        })?;
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

fn opaque_or(result: Result<usize, Unproven>, f: impl FnOnce(usize) -> Unwrap) -> Unwrap {
    match result {
        Ok(i) => f(i),
        Err(e) => Unwrap::Opaque(e.to_string()),
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
        "ionice" => ionice(argv),
        "setsid" => {
            let opts = Opts {
                flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
                valued: &[],
            };
            opaque_or(skip_opts(argv, 1, &opts, name), inner)
        }
        "flock" => flock(argv),
        "chrt" => chrt(argv),
        "taskset" => taskset(argv),
        "unbuffer" => {
            let opts = Opts {
                flags: &["-p"],
                valued: &[],
            };
            opaque_or(skip_opts(argv, 1, &opts, name), inner)
        }
        "unshare" | "nsenter" => namespaces(name, argv),
        "watch" => watch(argv),
        "parallel" if parallel_options(argv).is_err() => {
            Unwrap::Opaque("`parallel` has options not analysed here".to_owned())
        }
        "busybox" => Unwrap::Inner {
            start: 1,
            assignments: Vec::new(),
            problem: None,
            forced: Some("`busybox` runs any applet it is given"),
        },
        n if OPAQUE_RUNNERS.contains(&n) => Unwrap::Opaque(format!(
            "`{n}` runs a command given in its arguments, with options not analysed here"
        )),
        _ => Unwrap::No,
    }
}

/// Programs that run a command given among their arguments but whose own options are not
/// parsed here: the command is unknown (ask), and deny rules are matched against every tail
/// of the arguments.
const OPAQUE_RUNNERS: &[&str] = &[
    "chroot",
    "runuser",
    "setpriv",
    "prlimit",
    "strace",
    "ltrace",
    "valgrind",
    "fakeroot",
    "faketime",
    "firejail",
    "systemd-run",
    "dbus-run-session",
    "torsocks",
    "proxychains",
    "proxychains4",
    "chronic",
    "ifne",
    "rlwrap",
    "numactl",
    "cpulimit",
    "eatmydata",
    "nocache",
    "catchsegv",
    "gosu",
    "su-exec",
    "tini",
    "dumb-init",
    "setarch",
    "linux32",
    "linux64",
    "sg",
    "daemonize",
    "start-stop-daemon",
    "pkexec",
    "tsp",
    "nq",
    "sem",
];

/// `ionice [-c class] [-n level] [-t] command…`; with `-p`, `-P` or `-u` the operands are
/// process ids and nothing is run.
fn ionice(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &["-t", "--ignore"],
        valued: &["-c", "--class", "-n", "--classdata"],
    };
    let targets_processes = argv.iter().skip(1).filter_map(Word::fixed).any(|v| {
        matches!(v, "-p" | "-P" | "-u" | "--pid" | "--pgid" | "--uid")
            || (v.starts_with('-') && !v.starts_with("--") && v.contains(['p', 'P', 'u']))
    });
    if targets_processes {
        return Unwrap::Nothing {
            read_only: false,
            why: "`ionice -p/-P/-u` changes the priority of other processes",
        };
    }
    opaque_or(skip_opts(argv, 1, &opts, "ionice"), inner)
}

/// `flock [options] FILE command…` or `flock [options] FILE -c 'script'` (the script is read
/// by [`inline_script`]); `flock [options] FD` runs nothing. The lock file is created.
fn flock(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &[
            "-s",
            "--shared",
            "-x",
            "-e",
            "--exclusive",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "-F",
            "--no-fork",
            "--verbose",
        ],
        valued: &[
            "-w",
            "--wait",
            "--timeout",
            "-E",
            "--conflict-exit-code",
            "-c",
            "--command",
        ],
    };
    if flock_script(argv).is_some() {
        return Unwrap::Nothing {
            read_only: false,
            why: "`flock -c` runs a script",
        };
    }
    match skip_opts(argv, 1, &opts, "flock") {
        Ok(i) if i + 1 >= argv.len() => Unwrap::Nothing {
            read_only: false,
            why: "`flock` on a lock file or descriptor without a command",
        },
        Ok(i) => Unwrap::Inner {
            start: i + 1,
            assignments: Vec::new(),
            problem: Some(format!("`flock` creates its lock file `{}`", argv[i].raw)),
            forced: None,
        },
        Err(e) => Unwrap::Opaque(e.to_string()),
    }
}

/// The script of `flock … -c SCRIPT` / `--command=SCRIPT`, wherever the option stands.
fn flock_script(argv: &[Word]) -> Option<Option<&Word>> {
    for (i, w) in argv.iter().enumerate().skip(1) {
        match w.fixed() {
            Some("-c" | "--command") => return Some(argv.get(i + 1)),
            Some(v) if v.starts_with("--command=") => return Some(Some(w)),
            Some("--") | None => return None,
            _ => {}
        }
    }
    None
}

/// `chrt [options] [priority] command…`; `-p` (a process) and `-m` (limits) run nothing.
fn chrt(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &[
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-v",
            "--verbose",
        ],
        valued: &[
            "-T",
            "--sched-runtime",
            "-P",
            "--sched-period",
            "-D",
            "--sched-deadline",
        ],
    };
    if argv
        .iter()
        .skip(1)
        .filter_map(Word::fixed)
        .any(|v| matches!(v, "-p" | "--pid" | "-m" | "--max"))
    {
        return Unwrap::Nothing {
            read_only: false,
            why: "`chrt -p` changes another process's scheduling",
        };
    }
    opaque_or(skip_opts(argv, 1, &opts, "chrt"), |i| {
        let numeric = argv
            .get(i)
            .and_then(Word::fixed)
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()));
        inner(if numeric { i + 1 } else { i })
    })
}

/// `taskset [options] MASK command…`; `-p` works on a running process.
fn taskset(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: &["-a", "--all-tasks", "-c", "--cpu-list"],
        valued: &[],
    };
    if argv
        .iter()
        .skip(1)
        .filter_map(Word::fixed)
        .any(|v| v == "--pid" || (v.starts_with('-') && !v.starts_with("--") && v.contains('p')))
    {
        return Unwrap::Nothing {
            read_only: false,
            why: "`taskset -p` changes a running process",
        };
    }
    // The first operand is the mask or CPU list.
    opaque_or(skip_opts(argv, 1, &opts, "taskset"), |i| inner(i + 1))
}

/// `unshare` and `nsenter`: their namespace options may carry an attached value (`-m=FILE`,
/// `--mount=FILE`), a few take the next word; without a command they start a shell.
fn namespaces(name: &str, argv: &[Word]) -> Unwrap {
    const VALUED: &[&str] = &[
        "-t",
        "--target",
        "-S",
        "--setuid",
        "-G",
        "--setgid",
        "-R",
        "--root",
        "-w",
        "--wd",
        "-W",
        "--wdns",
        "--propagation",
        "--setgroups",
        "--map-user",
        "--map-group",
        "--map-users",
        "--map-groups",
        "--monotonic",
        "--boottime",
    ];
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        let Some(v) = w.fixed() else {
            return Unwrap::Opaque(format!(
                "`{name}` has an argument `{}` that is not known",
                w.raw
            ));
        };
        if v == "--" {
            i += 1;
            break;
        }
        if !v.starts_with('-') || v == "-" {
            break;
        }
        i += if VALUED.contains(&v) { 2 } else { 1 };
    }
    if i >= argv.len() {
        return Unwrap::Nothing {
            read_only: false,
            why: "it starts a shell in new namespaces",
        };
    }
    Unwrap::Inner {
        start: i,
        assignments: Vec::new(),
        problem: None,
        forced: Some("it runs the command in other namespaces (as root inside them)"),
    }
}

/// `watch -x command…` runs the command itself; without `-x` the words are joined and run
/// by `sh -c` (see [`inline_script`]).
fn watch(argv: &[Word]) -> Unwrap {
    let opts = Opts {
        flags: WATCH_OPTS.0,
        valued: WATCH_OPTS.1,
    };
    match skip_opts(argv, 1, &opts, "watch") {
        Ok(i) if watch_exec(argv) => Unwrap::Inner {
            start: i,
            assignments: Vec::new(),
            problem: None,
            forced: None,
        },
        Ok(_) => Unwrap::No,
        Err(e) => Unwrap::Opaque(e.to_string()),
    }
}

fn watch_exec(argv: &[Word]) -> bool {
    argv.iter()
        .skip(1)
        .filter_map(Word::fixed)
        .take_while(|v| v.starts_with('-'))
        .any(|v| v == "--exec" || (!v.starts_with("--") && v.contains('x')))
}

const PRIVILEGED: &str = "it runs commands as another user";

fn privileged(result: Result<usize, Unproven>) -> Unwrap {
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
        if v.starts_with("-S") || v.starts_with("--s") {
            return split_string(argv, i);
        }
        // `-iS STRING`: the flags before `S` stay, the rest is the string.
        if !v.starts_with("--")
            && let Some(at) = v.find('S')
        {
            let mut split = argv.to_vec();
            split[i] = Word::literal(&v[..at]);
            split.insert(i + 1, Word::literal(&format!("-{}", &v[at..])));
            return split_string(&split, i + 1);
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

/// `env -S STRING rest…` is `env WORDS-OF-STRING rest…`: the string is split the way env
/// splits it (blanks, quotes, backslashes), and env's own parsing goes on over the result.
fn split_string(argv: &[Word], i: usize) -> Unwrap {
    let v = argv[i].fixed().unwrap_or("");
    let (string, used) = if let Some(s) = v.strip_prefix("-S").filter(|s| !s.is_empty()) {
        (Some(s), 1)
    } else if let Some((_, s)) = v.split_once('=') {
        (Some(s), 1)
    } else {
        (argv.get(i + 1).and_then(Word::fixed), 2)
    };
    let Some(string) = string else {
        return Unwrap::Opaque("`env -S` with a string not known statically".to_owned());
    };
    let mut built: Vec<Word> = argv[..i].to_vec();
    for word in split_env_string(string) {
        built.push(if word.contains('$') {
            Word::dynamic(&word)
        } else {
            Word::literal(&word)
        });
    }
    built.extend(argv.get(i + used..).unwrap_or(&[]).iter().cloned());
    Unwrap::Built {
        argv: built,
        problem: None,
    }
}

/// Splits like `env -S`: blanks separate words; single quotes are literal; double quotes and
/// backslash escape the next character; `\_` is a blank inside a word; `#` at a word's start
/// ends the string.
fn split_env_string(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current: Option<String> = None;
    let mut chars = s.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), c) => current.get_or_insert_default().push(c),
            (_, '\\') => {
                let escaped = match chars.next() {
                    Some('_') => ' ',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some(other) => other,
                    None => break,
                };
                current.get_or_insert_default().push(escaped);
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                current.get_or_insert_default();
            }
            (None, '#') if current.is_none() => break,
            (None, c) if c.is_whitespace() => {
                if let Some(word) = current.take() {
                    words.push(word);
                }
            }
            (_, c) => current.get_or_insert_default().push(c),
        }
    }
    words.extend(current);
    words
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
        "flock" => match flock_script(argv) {
            Some(Some(w)) => match w.fixed().and_then(|v| v.strip_prefix("--command=")) {
                Some(script) => Inline::Script(script.to_owned()),
                None => script_word(Some(w)),
            },
            Some(None) => Inline::Unknown("`flock -c` without a script".to_owned()),
            None => Inline::No,
        },
        "script" => script_command(argv),
        "watch" if !watch_exec(argv) => joined_words("watch", argv, WATCH_OPTS),
        "parallel" => parallel(argv),
        _ => Inline::No,
    }
}

/// `watch`'s options, to find where its command starts.
const WATCH_OPTS: (&[&str], &[&str]) = (
    &[
        "-b",
        "--beep",
        "-c",
        "--color",
        "-C",
        "--no-color",
        "-d",
        "--differences",
        "-e",
        "--errexit",
        "-g",
        "--chgexit",
        "-p",
        "--precise",
        "-r",
        "--no-rerun",
        "-t",
        "--no-title",
        "-w",
        "--no-wrap",
        "-x",
        "--exec",
    ],
    &["-n", "--interval", "-q", "--equexit", "-s", "--shotsfile"],
);

/// The command words after the options, joined by spaces as the program does before handing
/// them to `sh -c`.
fn joined_words(
    name: &str,
    argv: &[Word],
    (flags, valued): (&'static [&'static str], &'static [&'static str]),
) -> Inline {
    let opts = Opts { flags, valued };
    match skip_opts(argv, 1, &opts, name) {
        Ok(i) if i < argv.len() => {
            let words: Option<Vec<&str>> = argv[i..].iter().map(Word::fixed).collect();
            match words {
                Some(words) => Inline::Script(words.join(" ")),
                None => Inline::Unknown(format!("`{name}` runs a command not known statically")),
            }
        }
        Ok(_) => Inline::Unknown(format!("`{name}` without a command")),
        Err(e) => Inline::Unknown(e.to_string()),
    }
}

/// `script -c COMMAND [file]` runs COMMAND with the shell; without `-c` it starts an
/// interactive shell. Either way it writes its typescript file.
fn script_command(argv: &[Word]) -> Inline {
    let mut it = argv.iter().skip(1);
    while let Some(w) = it.next() {
        match w.fixed() {
            Some("-c" | "--command") => return script_word(it.next()),
            Some(v) if v.starts_with("--command=") => {
                return Inline::Script(v["--command=".len()..].to_owned());
            }
            Some(v) if v.starts_with('-') && !v.starts_with("--") => {
                // A cluster (`-qc CMD`, `-qcCMD`): letters up to the first that takes a value.
                for (j, c) in v.char_indices().skip(1) {
                    if c == 'c' {
                        let rest = &v[j + 1..];
                        return if rest.is_empty() {
                            script_word(it.next())
                        } else {
                            Inline::Script(rest.to_owned())
                        };
                    }
                    if "EIOBTmo".contains(c) {
                        if j + 1 == v.len() {
                            it.next();
                        }
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Inline::Unknown("`script` starts a shell and writes a typescript file".to_owned())
}

/// Where `parallel`'s command starts, or Err for an option it does not know (the command
/// cannot then be located: see [`unwrap`], which treats it as opaque).
fn parallel_options(argv: &[Word]) -> Result<usize, ()> {
    const FLAGS: &[&str] = &[
        "-k",
        "--keep-order",
        "-0",
        "--null",
        "-X",
        "-m",
        "--will-cite",
        "--tag",
        "--line-buffer",
        "--lb",
        "--bar",
        "--eta",
        "--progress",
        "-v",
        "--verbose",
        "--dry-run",
        "-u",
        "--ungroup",
        "--group",
        "--no-notice",
        "--halt-on-error",
        "-r",
        "--no-run-if-empty",
        "--xargs",
        "--shuf",
        "--citation",
        "--silent",
    ];
    const VALUED: &[&str] = &[
        "-j",
        "--jobs",
        "-P",
        "--max-procs",
        "-n",
        "--max-args",
        "-N",
        "-L",
        "--max-lines",
        "-I",
        "--colsep",
        "-d",
        "--delimiter",
        "-a",
        "--arg-file",
        "--halt",
        "--timeout",
        "--delay",
        "--retries",
        "--joblog",
        "--results",
        "--tmpdir",
        "--memfree",
        "--load",
        "-E",
        "--eof",
        "--tagstring",
    ];
    let mut i = 1;
    while let Some(v) = argv.get(i).and_then(Word::fixed) {
        if v.starts_with(":::") || !v.starts_with('-') {
            break;
        }
        if v == "--" {
            return Ok(i + 1);
        }
        let name = v.split('=').next().unwrap_or(v);
        i += if FLAGS.contains(&v) || (VALUED.contains(&name) && v.contains('=')) {
            1
        } else if VALUED.contains(&v) {
            2
        } else if v.len() > 2
            && !v.starts_with("--")
            && v.get(..2).is_some_and(|flag| VALUED.contains(&flag))
        {
            1
        } else {
            return Err(());
        };
    }
    Ok(i)
}

/// GNU `parallel [options] command ::: args`: the command words are joined and run by a
/// shell once per argument (the arguments replace `{}` or are appended); without command
/// words it runs the lines it reads as commands.
fn parallel(argv: &[Word]) -> Inline {
    let Ok(i) = parallel_options(argv) else {
        return Inline::Unknown("`parallel` has options not analysed here".to_owned());
    };
    let mut words = Vec::new();
    let mut rest = argv.iter().skip(i);
    for w in rest.by_ref() {
        match w.fixed() {
            Some(v) if v.starts_with(":::") => break,
            Some(v) => words.push(v.to_owned()),
            None => {
                return Inline::Unknown(
                    "`parallel` runs a command not known statically".to_owned(),
                );
            }
        }
    }
    if words.is_empty() {
        // `parallel ::: 'cmd1' 'cmd2'`: the arguments are the commands.
        let commands: Option<Vec<&str>> = rest.map(Word::fixed).collect();
        return match commands {
            Some(commands)
                if !commands.is_empty() && argv[i..].iter().any(|w| w.fixed() == Some(":::")) =>
            {
                Inline::Script(commands.join("\n"))
            }
            _ => Inline::Unknown("`parallel` runs the commands it reads".to_owned()),
        };
    }
    Inline::Script(words.join(" "))
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
        let Unwrap::Built { argv, .. } = unwrap(
            "env",
            &[
                Word::literal("env"),
                Word::literal("-S"),
                Word::literal("-i 'rm -f' \"a b\"\\_c # x"),
                Word::literal("d"),
            ],
        ) else {
            panic!("env -S builds the command");
        };
        let built: Vec<&str> = argv.iter().filter_map(Word::fixed).collect();
        assert_eq!(built, ["env", "-i", "rm -f", "a b c", "d"]);
    }

    #[test]
    fn new_wrappers_find_the_command() {
        let cases = [
            ("ionice -c 3 -n7 rm x", Some(4)),
            ("ionice -p 12", None),
            ("setsid -f rm x", Some(2)),
            ("flock -w 5 /tmp/l rm x", Some(4)),
            ("chrt -f 10 rm x", Some(3)),
            ("chrt --idle rm x", Some(2)),
            ("taskset -c 0,1 rm x", Some(3)),
            ("taskset -p 1 12", None),
            ("unbuffer -p rm x", Some(2)),
            ("unshare -r --mount rm x", Some(3)),
            ("nsenter -t 1 -m rm x", Some(4)),
            ("watch -x -n 1 rm x", Some(4)),
        ];
        for (line, expected) in cases {
            let argv = words(line);
            assert_eq!(
                start(&unwrap(&line[..line.find(' ').unwrap()], &argv)),
                expected,
                "{line}"
            );
        }
        for (line, script) in [
            ("flock /tmp/l -c ls", "ls"),
            ("script -qc ls /dev/null", "ls"),
            ("watch -n 1 ls -l", "ls -l"),
            ("parallel -j 2 rm ::: a b", "rm"),
        ] {
            let argv = words(line);
            let name = &line[..line.find(' ').unwrap()];
            assert!(
                matches!(inline_script(name, &argv), Inline::Script(s) if s == script),
                "{line}"
            );
        }
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
