//! The readers that prove a command read-only inside the workspace, each driven by its
//! program's definition in `programs`: an option table, or a reader of the program's own
//! language (sed, awk, find, jq, git). Flags are allowlisted (an unknown or abbreviated flag
//! is refused); every path must be inside. Also the hazard check: options that write or run
//! something whatever rule allows the program.

use super::BashEnv;
use super::git;
use super::long_options;
use super::paths::{Cwds, ReadLog, check_read, check_read_below};
use super::programs::{self, Checker, Hazards, Operands, Proof, Spec};
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

/// Whether `name` is a command whose reads [`check`] knows how to find.
pub(crate) fn known(name: &str) -> bool {
    programs::lookup(name).is_some()
}

/// Whether [`check`] of this program has logged every read it makes, whatever its verdict:
/// one that logs its reads first says so in its definition (git's); the others stop at the
/// first thing they cannot follow (`cat -Z .env` stops at `-Z`), and only a passed check has
/// logged them all.
pub(crate) fn logged_every_read(name: &str, checked: &Result<(), Unproven>) -> bool {
    checked.is_ok() || programs::effects(name).is_some_and(|e| e.logs_reads_first)
}

/// Proves `name args…` read-only, or says why not.
pub(crate) fn check(name: &str, args: &[Word], ctx: &Ctx) -> Result<(), Unproven> {
    let program =
        programs::lookup(name).ok_or_else(|| Unproven::UnknownCommand(name.to_owned()))?;
    match &program.proof {
        Proof::Data => Ok(()),
        Proof::Binds => binds(name, args),
        Proof::Options(spec) => run_spec(name, spec, args, ctx),
        Proof::Own(checker) => match checker {
            Checker::Printf => match args.first().map(|w| w.fixed()) {
                Some(Some(v)) if v.starts_with("-v") => binds(name, args),
                Some(None) => Err(Unproven::PrintfMayBeV),
                _ => Ok(()),
            },
            Checker::Git => git::check(args, ctx.env, ctx.cwds, ctx.reads),
            Checker::Sed => sed(args, ctx),
            Checker::Awk => awk(args, ctx),
            Checker::Find => find(args, ctx),
            Checker::Jq => jq(args, ctx),
            Checker::Set => set(args),
            Checker::Date => date(args),
            Checker::Hostname if args.is_empty() => Ok(()),
            Checker::Hostname => Err(Unproven::UnknownCommand(name.to_owned())),
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
    let program = programs::lookup(name)?;
    let hazards = &program.hazards;
    if matches!(hazards, Hazards::None) {
        return None;
    }
    // A word whose expansion is not known may be any of the options below.
    // (After an option known to take a value, `git commit -m "$msg"`, it is that value.)
    let takes_value = |w: &Word| {
        matches!(hazards, Hazards::Git) && w.fixed().is_some_and(|v| git::VALUED.contains(&v))
    };
    let before_end = args
        .iter()
        .position(|w| w.fixed() == Some("--"))
        .unwrap_or(args.len());
    if let Some(w) = args[..before_end].iter().enumerate().find_map(|(i, w)| {
        let value = i > 0 && takes_value(&args[i - 1]);
        (w.fixed().is_none() && w.may_be_flag && !value).then_some(w)
    }) {
        return Some(format!(
            "`{}` may expand to an option of `{name}` that writes files or runs programs",
            w.raw
        ));
    }
    let table = match hazards {
        Hazards::None => return None,
        Hazards::Git => return git_hazard(args),
        Hazards::Table(table) => table,
    };
    let flags = args
        .iter()
        .filter_map(Word::fixed)
        .take_while(|v| *v != "--")
        .filter(|v| v.starts_with('-'));
    for v in flags {
        if long_options::any_of(v, table.options, program.effects.long_options, table.valued) {
            return Some(format!("`{name} {v}` writes files or runs programs"));
        }
    }
    None
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
            git::DANGEROUS_GLOBAL.contains(&name)
        } else {
            // `git grep -O[PAGER]`, also inside a cluster (`-nO`), is `--open-files-in-pager`.
            git::dangerous_long(name)
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
