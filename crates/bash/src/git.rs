//! Proves a git invocation read-only: global options that change what git runs are refused,
//! only inspecting subcommands pass, and their writing or executing options are refused. Also
//! git's lists that its definition in `programs` points to: the inspecting subcommands, the
//! dangerous options, and the subcommands and options that make a repository.

use super::BashEnv;
use super::long_options;
use super::paths::{Cwds, ReadLog, check_read, log_read};
use super::unproven::Unproven;
use super::word::Word;

/// Git subcommands that create a repository (or a git directory for one).
pub(crate) const REPOSITORY_MAKERS: &[&str] = &["init", "clone", "worktree", "submodule"];

/// Git options that create a repository or put its git directory somewhere of their choosing.
pub(crate) const REPOSITORY_OPTIONS: &[&str] = &["--bare", "--mirror", "--separate-git-dir"];

/// Git global options whose value is the next word.
pub(crate) const GLOBAL_OPTIONS_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
];

/// Long options that write files, run programs or read outside the repository. Git's
/// parse-options accepts any unambiguous abbreviation (`git grep --open=`), so an option that
/// is a prefix of one of these is refused too; `git log` and `git diff` take only full
/// spellings today, which the prefix reading covers as well.
pub(crate) const DANGEROUS_LONG: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--filters",
    "--open-files-in-pager",
    "--no-index",
    "--exec",
    "--paginate",
    "--upload-pack",
    "--receive-pack",
    "--contents",
    // `git log --help` is `git help log`: it starts man, info or a browser (help.format).
    "--help",
];

/// Global options (before the subcommand) that run programs or read configuration from
/// elsewhere. git takes their full spellings only (`git --no-pag` is an error).
pub(crate) const DANGEROUS_GLOBAL: &[&str] =
    &["-c", "-p", "--paginate", "--config-env", "--exec-path"];

/// Options that take the next word as their value, so a word there that may expand to
/// anything is that value, not an option (`git commit -m "$msg"`).
pub(crate) const VALUED: &[&str] = &[
    "-m",
    "--message",
    "-F",
    "--file",
    "--author",
    "-b",
    "-B",
    "--format",
    "--pretty",
    "-n",
    "--grep",
    "-S",
    "-G",
];

/// git options that are prefixes of a [`DANGEROUS_LONG`] entry but options of their own
/// (parse-options prefers an exact match): `git diff --text` is not `--textconv`.
pub(crate) const NOT_ABBREVIATIONS: &[&str] = &["--text", "--filter"];

/// Whether git may read the long option `written` as one of [`DANGEROUS_LONG`].
pub(crate) fn dangerous_long(written: &str) -> bool {
    let name = written.split_once('=').map_or(written, |(name, _)| name);
    !NOT_ABBREVIATIONS.contains(&name)
        && DANGEROUS_LONG
            .iter()
            .any(|d| long_options::spells(name, d, long_options::LongOptions::Prefix))
}

/// The subcommands that only inspect (their writing options are refused by `check`).
pub(crate) const READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "rev-parse",
    "ls-files",
    "blame",
    "grep",
    "describe",
    "rev-list",
    "ls-tree",
    "cat-file",
    "show-ref",
    "merge-base",
    "for-each-ref",
    "shortlog",
    "tag",
    "remote",
    "stash",
    "reflog",
    "version",
    "diff-tree",
    "check-ignore",
    "name-rev",
    "count-objects",
    "whatchanged",
];

pub(crate) fn check(
    args: &[Word],
    env: &BashEnv,
    cwds: &Cwds,
    log: &ReadLog,
) -> Result<(), Unproven> {
    log_operands(args, env, cwds, log);
    let mut i = 0;
    let mut chdir = false;
    let sub = loop {
        let Some(w) = args.get(i) else {
            return Err(Unproven::GitWithoutSubcommand);
        };
        let Some(v) = w.fixed() else {
            return Err(Unproven::ArgumentNotStatic {
                command: "git",
                word: w.raw.clone(),
            });
        };
        i += 1;
        match v {
            "--no-pager"
            | "-P"
            | "--no-optional-locks"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-replace-objects" => {}
            "-C" => {
                let dir = args.get(i).ok_or(Unproven::GitCNeedsDirectory)?;
                check_read(dir, env, cwds, log)?;
                chdir = true;
                i += 1;
            }
            "-c" | "--config-env" | "--exec-path" | "-p" | "--paginate" | "--git-dir"
            | "--work-tree" | "--bare" | "--namespace" | "--super-prefix" => {
                return Err(Unproven::GitRedirects(v.to_owned()));
            }
            v if v.starts_with('-') => {
                return Err(Unproven::GitOption(v.to_owned()));
            }
            v => break v,
        }
    };
    if !READ_ONLY.contains(&sub) {
        return Err(Unproven::GitNotReadOnly(sub.to_owned()));
    }
    let rest = &args[i..];
    options(sub, rest)?;
    listing_only(sub, rest)?;
    paths(rest, chdir, env, cwds, log)
}

fn options(sub: &str, rest: &[Word]) -> Result<(), Unproven> {
    for w in rest {
        let Some(v) = w.fixed() else {
            if w.may_be_flag {
                return Err(Unproven::GitMayBeOption(w.raw.clone()));
            }
            continue;
        };
        if v == "--" {
            break;
        }
        if let Some(name) = v
            .strip_prefix("--")
            .map(|n| n.split('=').next().unwrap_or(n))
        {
            let name = format!("--{name}");
            if dangerous_long(&name) {
                return Err(Unproven::GitWritesOrRuns {
                    sub: sub.to_owned(),
                    option: v.to_owned(),
                });
            }
        } else if sub == "grep" && v.starts_with('-') && v.contains('O') {
            return Err(Unproven::GitGrepPager);
        }
    }
    Ok(())
}

/// Subcommands whose first word picks what they do, with the picks that only list or show
/// (`git stash list`, `git stash show`): whatever options follow, those change nothing. The
/// read-only proof accepts them, and `policy lint` never calls a rule that names one a risk
/// to uncommitted work, so the two read the same table.
const LISTING_ACTIONS: &[(&str, &[&str])] = &[("stash", &["list", "show"])];

/// Whether `action`, the word after git's subcommand `sub`, picks one of its listing forms.
pub(crate) fn listing_action(sub: &str, action: Option<&str>) -> bool {
    LISTING_ACTIONS
        .iter()
        .any(|(name, listing)| *name == sub && action.is_some_and(|word| listing.contains(&word)))
}

/// `git branch x` creates a branch, `git tag x` a tag, `git stash` stashes: only their
/// listing forms are read-only.
fn listing_only(sub: &str, rest: &[Word]) -> Result<(), Unproven> {
    let values: Vec<&str> = rest.iter().map(|w| w.fixed().unwrap_or("")).collect();
    let has = |names: &[&str]| values.iter().any(|v| names.contains(v));
    match sub {
        "branch" | "tag" => {
            const BRANCH_WRITING: &[&str] = &[
                "-d",
                "-D",
                "-m",
                "-M",
                "-c",
                "-C",
                "-f",
                "-u",
                "-t",
                "--delete",
                "--move",
                "--copy",
                "--force",
                "--set-upstream-to",
                "--unset-upstream",
                "--edit-description",
                "--track",
                "--no-track",
                "--create-reflog",
            ];
            const TAG_WRITING: &[&str] = &[
                "-a",
                "-s",
                "-u",
                "-d",
                "-f",
                "-m",
                "-F",
                "-e",
                "-v",
                "--annotate",
                "--sign",
                "--local-user",
                "--delete",
                "--force",
                "--message",
                "--file",
                "--edit",
                "--verify",
                "--create-reflog",
            ];
            let writing = if sub == "branch" {
                BRANCH_WRITING
            } else {
                TAG_WRITING
            };
            // git takes `--set-upstream-t` for `--set-upstream-to` and `-vd` for `-v -d`.
            let changes =
                |v: &&str| long_options::any_of(v, writing, long_options::LongOptions::Prefix, "");
            if let Some(v) = values.iter().find(|v| changes(v)) {
                return Err(Unproven::GitNotListing {
                    sub: sub.to_owned(),
                    option: (*v).to_owned(),
                });
            }
            let positional = values.iter().any(|v| !v.is_empty() && !v.starts_with('-'));
            let listing = has(&[
                "-l",
                "--list",
                "--contains",
                "--no-contains",
                "--merged",
                "--no-merged",
                "--points-at",
            ]);
            if positional && !listing {
                return Err(Unproven::GitCreates(sub.to_owned()));
            }
            Ok(())
        }
        "remote" => match values.as_slice() {
            [] | ["-v"] | ["--verbose"] | ["get-url", ..] => Ok(()),
            _ => Err(Unproven::GitRemote),
        },
        "stash" if listing_action(sub, values.first().copied()) => Ok(()),
        "stash" => Err(Unproven::GitStash),
        "reflog" => match values.first() {
            None | Some(&"show") => Ok(()),
            Some(v) if v.starts_with('-') => Ok(()),
            _ => Err(Unproven::GitReflog),
        },
        _ => Ok(()),
    }
}

/// Revisions and paths look alike; a word that can only be a path outside (absolute, `~`, a
/// `..` component) is checked. `git diff a b` with a path outside the repository reads it.
fn paths(
    rest: &[Word],
    chdir: bool,
    env: &BashEnv,
    cwds: &Cwds,
    log: &ReadLog,
) -> Result<(), Unproven> {
    for w in rest {
        let Some(v) = w.value.as_deref() else {
            continue;
        };
        let pathish = v.starts_with('/') || w.tilde || v.split('/').any(|c| c == "..");
        if !pathish || v.starts_with('-') {
            continue;
        }
        if chdir {
            return Err(Unproven::GitOutsideC(v.to_owned()));
        }
        check_read(w, env, cwds, log)?;
    }
    Ok(())
}

/// git's global options (before the subcommand) that take the next word as their value.
const GLOBAL_VALUED: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--attr-source",
    "--super-prefix",
    "--exec-path",
    "--list-cmds",
];

/// git's global options that take no value (`--opt=value` forms of the valued ones are one
/// word too).
const GLOBAL_FLAGS: &[&str] = &[
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--no-replace-objects",
    "--bare",
    "--literal-pathspecs",
    "--no-literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
    "--html-path",
    "--man-path",
    "--info-path",
];

/// The ways `git GLOBAL-OPTIONS… sub args…` may be read as `git sub args…`, for rules to match
/// (`git -C . push` is `git push` to a `Bash(git push:*)` rule). An option not known to git is
/// read both as a flag and as taking a value, so that neither reading escapes a rule; a
/// `-c alias.NAME=VALUE` naming the subcommand also yields the command it stands for.
pub(crate) fn rule_views(argv: &[Word]) -> Vec<Vec<Word>> {
    let mut views = Vec::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    skip_globals(argv, 1, &mut aliases, &mut views);
    let mut expanded = Vec::new();
    for view in &views {
        let Some(sub) = view.get(1).and_then(Word::fixed) else {
            continue;
        };
        for (_, value) in aliases.iter().filter(|(name, _)| name == sub) {
            // `!cmd` aliases run a shell command: the analyser reads those as scripts.
            if value.starts_with('!') {
                continue;
            }
            let mut alias_view = vec![view[0].clone()];
            alias_view.extend(value.split_whitespace().map(Word::literal));
            alias_view.extend(view[2..].iter().cloned());
            expanded.push(alias_view);
        }
    }
    views.extend(expanded);
    views
}

fn skip_globals(
    argv: &[Word],
    mut i: usize,
    aliases: &mut Vec<(String, String)>,
    views: &mut Vec<Vec<Word>>,
) {
    const MAX_VIEWS: usize = 16;
    while let Some(w) = argv.get(i) {
        if views.len() >= MAX_VIEWS {
            return;
        }
        let Some(v) = w.fixed() else { break };
        if !v.starts_with('-') || v == "-" {
            break;
        }
        let name = v.split('=').next().unwrap_or(v);
        if v == "-c" {
            if let Some(setting) = argv.get(i + 1).and_then(Word::fixed)
                && let Some((key, value)) = setting.split_once('=')
                && let Some(alias) = key.strip_prefix("alias.")
            {
                aliases.push((alias.to_owned(), value.to_owned()));
            }
            i += 2;
        } else if GLOBAL_VALUED.contains(&v) {
            // `--exec-path` and `--list-cmds` alone take no value.
            i += if matches!(v, "--exec-path" | "--list-cmds") {
                1
            } else {
                2
            };
        } else if GLOBAL_FLAGS.contains(&v)
            || (GLOBAL_VALUED.contains(&name) && v.contains('='))
            || ((v.starts_with("-C") || v.starts_with("-c")) && v.len() > 2)
        {
            i += 1;
        } else {
            // Unknown to this table: try it both as a flag and with a value.
            let mut with_value = argv[..i].to_vec();
            with_value.extend(argv.get(i + 2..).unwrap_or(&[]).iter().cloned());
            skip_globals(&with_value, i, aliases, views);
            i += 1;
        }
    }
    let mut view = vec![argv[0].clone()];
    view.extend(argv.get(i..).unwrap_or(&[]).iter().cloned());
    if !views.contains(&view) {
        views.push(view);
    }
}

/// Every `-c name=value` given to git, as a script: many settings (`core.pager`,
/// `core.sshCommand`, `core.fsmonitor`, `diff.external`, filters, `!` aliases) are commands
/// git runs, so deny rules must reach them whatever the setting's name.
pub(crate) fn config_scripts(argv: &[Word]) -> Vec<String> {
    let mut scripts = Vec::new();
    let mut i = 1;
    while let Some(v) = argv.get(i).and_then(Word::fixed) {
        if !v.starts_with('-') {
            break;
        }
        let setting = if v == "-c" {
            i += 1;
            argv.get(i).and_then(Word::fixed)
        } else {
            v.strip_prefix("-c").filter(|s| s.contains('='))
        };
        if let Some((_, value)) = setting.and_then(|s| s.split_once('=')) {
            scripts.push(value.trim_start_matches('!').to_owned());
        }
        i += 1;
    }
    scripts
}

/// Logs what a git command's operands may read: each word after the subcommand as a path
/// (pathspecs, `--no-index` files) and the path of `REV:path` (a blob's content), from the
/// working directory and from each workspace root (`REV:path` is relative to the repository's
/// top). Done before any check, so that what git reads is known even when it is refused.
fn log_operands(args: &[Word], env: &BashEnv, cwds: &Cwds, log: &ReadLog) {
    let mut i = 0;
    let mut chdir: Option<&str> = None;
    while let Some(v) = args.get(i).and_then(Word::fixed) {
        if !v.starts_with('-') {
            break;
        }
        if v == "-C" {
            chdir = args.get(i + 1).and_then(Word::fixed);
        }
        i += if GLOBAL_VALUED.contains(&v) && !matches!(v, "--exec-path" | "--list-cmds") {
            2
        } else {
            1
        };
    }
    let base = |path: &str| match chdir {
        Some(dir) if !path.starts_with('/') => format!("{dir}/{path}"),
        _ => path.to_owned(),
    };
    let sub = args.get(i).and_then(Word::fixed);
    // `git grep` searches every tracked file below its pathspecs, or below here when only
    // the pattern is given.
    let search = sub == Some("grep");
    let operands = args
        .iter()
        .skip(i + 1)
        .filter(|w| !w.value.as_deref().is_some_and(|v| v.starts_with('-')))
        .count();
    if search && operands <= 1 {
        log_read(&Word::literal(&base(".")), true, env, cwds, log);
    }
    for w in args.iter().skip(i + 1) {
        let Some(v) = w.value.as_deref() else {
            continue;
        };
        if v.starts_with('-') {
            continue;
        }
        match v.split_once(':') {
            Some((_, blob)) if !blob.is_empty() => {
                let blob = blob.trim_start_matches("./");
                let mut word = w.clone();
                word.value = Some(base(blob));
                log_read(&word, false, env, cwds, log);
                for root in env.workspace_roots {
                    let mut at_root = Word::literal(&format!("{}/{blob}", root.display()));
                    at_root.glob = w.glob;
                    log_read(&at_root, false, env, cwds, log);
                }
            }
            // Without `-C` the word names itself: logged as it is, not copied.
            _ if chdir.is_none() || v.starts_with('/') => log_read(w, search, env, cwds, log),
            _ => {
                let mut word = w.clone();
                word.value = Some(base(v));
                log_read(&word, search, env, cwds, log);
            }
        }
    }
}
