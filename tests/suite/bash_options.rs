//! Options as programs parse them: hazard tables match every prefix of a long option for the
//! programs that take abbreviations, and short options inside clusters; jq's options are read
//! wherever they stand. The syntax each table assumes is a table recorded from the real
//! programs (`OBSERVED`): the analyser is checked against it everywhere, and it is checked
//! against the programs on this machine where they are installed.

use std::path::Path;
use std::process::{Command, Output};

use tempfile::TempDir;
use tollgate::bash::{BashRules, BashVerdict, CommandPattern};

use crate::support::bash::{analyse, rules};
use crate::support::skip::{on_path, skip};

/// Allow rules that name the programs whose hazard tables are under test: the rule allows the
/// program, not its writing or executing options.
fn allowing() -> BashRules {
    let allow = [
        "sort:*",
        "sed:*",
        "rg:*",
        "diff:*",
        "tree:*",
        "git grep:*",
        "git log:*",
        "git diff:*",
        "git show:*",
        "git clone:*",
        "git init:*",
        "tar:*",
        "make:*",
        "pytest:*",
        "npm test:*",
        "cargo test:*",
    ];
    BashRules {
        allow: allow
            .iter()
            .enumerate()
            .map(|(id, p)| (CommandPattern::parse(p).unwrap(), id))
            .collect(),
        ..rules()
    }
}

#[test]
fn hazard_tables_match_abbreviations_and_clusters() {
    let rules = allowing();
    // (command, refused)
    let cases = [
        // sort: getopt_long.
        ("sort -o x f", true),
        ("sort --output=x f", true),
        ("sort --outp x f", true),
        ("sort --o=x f", true),
        ("sort -ro x f", true),
        ("sort -rno x f", true),
        ("sort --compress-program=cat f", true),
        ("sort --comp=cat f", true),
        ("sort --compress=cat f", true),
        ("sort -T /tmp f", true),
        ("sort --temp=/tmp f", true),
        ("sort --reverse f", false),
        ("sort -rn f", false),
        ("sort -to f", false),
        ("sort -k2 -t, f", false),
        // sed: getopt_long.
        ("sed -i s/a/b/ f", true),
        ("sed --in-place s/a/b/ f", true),
        ("sed --in-pl=.bak s/a/b/ f", true),
        ("sed --in s/a/b/ f", true),
        ("sed -ni p f", true),
        ("sed -Ei s/a/b/ f", true),
        ("sed -i.bak s/a/b/ f", true),
        ("sed -n p f", false),
        ("sed -ei f", false),
        ("sed -E s/a/b/ f", false),
        // rg and tree: a prefix counts as the option.
        ("rg --pre=cat x", true),
        ("rg --pr cat x", true),
        ("rg --hostname-b=x x", true),
        ("rg --pre-glob '*.gz' x", false),
        ("tree -o out", true),
        ("tree -ao out", true),
        ("tree -a", false),
        // git after its subcommand: parse-options.
        ("git grep --open-files-in-pager='touch M #' x", true),
        ("git grep --open='touch M #' x", true),
        ("git grep --open-f=vi x", true),
        ("git grep -O x", true),
        ("git grep -nOvi x", true),
        ("git grep -n x", false),
        ("git log --output=x", true),
        ("git log --outp=x", true),
        ("git log --o=x", true),
        ("git diff --o x", true),
        ("git diff --ext-d", true),
        ("git diff --textc", true),
        ("git diff --no-ind a b", true),
        ("git show --exe=x", true),
        ("git log --oneline", false),
        ("git diff --text", false),
        ("git diff --no-ext-diff", false),
        ("git log --filter=blob:none", false),
        // git's global options: full spellings only.
        ("git --no-pager log", false),
        ("git -p log", true),
        ("git --paginate log", true),
        // Runners: nopt, getopt_long and argparse take prefixes; clap (cargo) does not.
        ("npm test --pre /x", true),
        ("npm test --script-sh=/bin/sh", true),
        ("make --fil=x.mk", true),
        ("make --dir=/x", true),
        ("pytest --confc=/x", true),
        ("pytest --rootd=/x", true),
        ("cargo test --config=x", true),
        ("cargo test --manifest-pat /x", false),
    ];
    let mut wrong = Vec::new();
    for (command, refused) in cases {
        let verdict = analyse(command, &rules).verdict;
        if matches!(verdict, BashVerdict::Allow) == refused {
            wrong.push(format!(
                "{command}: want refused={refused}, got {verdict:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn abbreviated_repository_and_unpacking_options_are_unseen_writes() {
    let rules = allowing();
    let cases = [
        ("tar --extract -f a.tar", true),
        ("tar --extr -f a.tar", true),
        ("tar --ext -f a.tar", true),
        ("tar --get -f a.tar", true),
        ("tar -xf a.tar", true),
        ("tar --list -f a.tar", false),
        ("tar -tf a.tar", false),
        ("git clone --mirror https://example.org/r.git", true),
        ("git clone --mirr https://example.org/r.git", true),
        ("git clone --ba https://example.org/r.git", true),
        ("git init --separate-git=../g", true),
        ("git log --oneline", false),
    ];
    for (command, unseen) in cases {
        let analysis = analyse(command, &rules);
        assert_eq!(
            !analysis.unseen_writes.is_empty(),
            unseen,
            "{command}: {:?}",
            analysis.unseen_writes
        );
    }
}

#[test]
fn git_listing_forms_refuse_abbreviated_and_clustered_writers() {
    let rules = rules();
    let cases = [
        ("git branch --set-upstream-to=origin/main", false),
        ("git branch --set-upstream-t=origin/main", false),
        ("git branch --set-up origin/main", false),
        ("git branch --edit-description", false),
        ("git branch --edit-desc", false),
        ("git branch --unset-up", false),
        ("git branch --del x", false),
        ("git branch -l -vd x", false),
        ("git branch -l --mov x y", false),
        ("git tag -l --del v1", false),
        ("git tag -l --mes=x", false),
        ("git branch -a", true),
        ("git branch -vv", true),
        ("git branch --list 'x*'", true),
        ("git branch --show-current", true),
        ("git tag -l -n5", true),
    ];
    for (command, allowed) in cases {
        let verdict = analyse(command, &rules).verdict;
        assert_eq!(
            matches!(verdict, BashVerdict::Allow),
            allowed,
            "{command}: {verdict:?}"
        );
    }
}

/// jq reads options after `--args`/`--jsonargs` (up to `--`): its file-reading options are
/// judged wherever they stand; positional strings after `--args` are not files.
#[test]
fn jq_options_are_read_wherever_they_stand() {
    let rules = rules();
    let cases = [
        ("jq -rn '$e' --args --rawfile e /proc/1/environ", false),
        ("jq -rn '$e' --args x --rawfile e /proc/1/environ", false),
        ("jq -n '$x' --args a --slurpfile x /etc/passwd", false),
        ("jq -n '$x' --jsonargs 1 --rawfile x /etc/passwd", false),
        ("jq . --args x -f /etc/passwd", false),
        ("jq . --args x --from-file /etc/passwd", false),
        ("jq . --args x -L /tmp", false),
        ("jq . --args x --indent 2 -c --seq", true),
        ("jq . package.json /etc/passwd", false),
        ("jq -n '$ARGS' --args a b", true),
        ("jq -n '$ARGS' --args a /etc/passwd", true),
        ("jq -n '$ARGS' --args -- --rawfile e /etc/passwd", true),
        ("jq -r '.name' package.json", true),
        ("jq --arg x 1 -n '$x'", true),
        ("jq -n '$x' --rawfile x package.json", true),
    ];
    for (command, allowed) in cases {
        let verdict = analyse(command, &rules).verdict;
        assert_eq!(
            matches!(verdict, BashVerdict::Allow),
            allowed,
            "{command}: {verdict:?}"
        );
    }
}

// ---- the syntax each table claims: recorded from the real programs, re-checked when present ----

/// What a program did with one command line.
#[derive(Debug, Clone, Copy)]
enum Did {
    Succeeded,
    Failed,
    Exited(i32),
    /// Succeeded and the file (relative to the scratch folder) now exists.
    Created(&'static str),
    /// Its stdout held the text.
    Printed(&'static str),
    /// Its stderr held the text.
    Complained(&'static str),
}

/// What an observation means for the analyser.
#[derive(Debug, Clone, Copy)]
enum Claim {
    /// Refused under the suite's rules and under rules that allow the program itself.
    Refused(&'static str),
    /// Allowed under rules that allow the program.
    Allowed(&'static str),
    /// Seen as a write the analysis cannot name.
    UnseenWrite(&'static str),
}

/// One command line of a real program, what it did, and what that means for the hazard tables.
struct Observed {
    program: &'static str,
    args: &'static [&'static str],
    did: Did,
    so: &'static [Claim],
}

/// The programs as the table was recorded (on Debian 12). Re-recording: run the suite where
/// the programs are installed; a row a newer version contradicts fails
/// `recorded_option_syntax_still_holds_for_the_programs_here`.
const RECORDED_WITH: &[(&str, &str)] = &[
    ("git", "git 2.47.3"),
    ("sort", "GNU coreutils 9.1"),
    ("sed", "GNU sed 4.9"),
    ("grep", "GNU grep 3.8"),
    ("diff", "GNU diffutils 3.8"),
    ("tar", "GNU tar 1.34"),
    ("curl", "curl 7.88.1"),
    ("jq", "jq 1.6"),
    ("cargo", "cargo 1.95.0"),
];

fn recorded_with(program: &str) -> &'static str {
    RECORDED_WITH
        .iter()
        .find(|(name, _)| *name == program)
        .map(|(_, version)| *version)
        .unwrap_or_else(|| panic!("no version recorded for {program}"))
}

/// Run in order in one scratch folder that starts with `f` ("b\na\n") and an empty `x/`.
const OBSERVED: &[Observed] = &[
    // git after the subcommand (parse-options): prefixes of long options.
    Observed {
        program: "git",
        args: &["init", "-q", "-b", "main"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "git",
        args: &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i",
        ],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "git",
        args: &["branch", "other"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "git",
        args: &["branch", "--set-upstream-t=main", "other"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "git",
        args: &["config", "branch.other.merge"],
        did: Did::Printed("refs/heads/main"),
        so: &[
            Claim::Refused("git branch --set-upstream-t=origin/main"),
            Claim::Refused("git branch --set-up origin/main"),
        ],
    },
    Observed {
        program: "git",
        args: &["branch", "--edit-desc"],
        did: Did::Succeeded,
        so: &[Claim::Refused("git branch --edit-desc")],
    },
    Observed {
        program: "git",
        args: &["add", "f"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "git",
        args: &["grep", "--open=touch opened; true", "a"],
        did: Did::Created("opened"),
        so: &[
            Claim::Refused("git grep --open='touch M #' x"),
            Claim::Refused("git grep --open-f=vi x"),
        ],
    },
    // git's global options: full spellings only.
    Observed {
        program: "git",
        args: &["--no-pag", "status"],
        did: Did::Exited(129),
        so: &[],
    },
    // GNU sort, sed, grep, diff, tar: getopt_long prefixes, short clusters.
    Observed {
        program: "sort",
        args: &["--o=out1", "f"],
        did: Did::Created("out1"),
        so: &[
            Claim::Refused("sort --o=x f"),
            Claim::Refused("sort --outp x f"),
        ],
    },
    Observed {
        program: "sort",
        args: &["-ro", "out2", "f"],
        did: Did::Created("out2"),
        so: &[
            Claim::Refused("sort -ro x f"),
            Claim::Refused("sort -rno x f"),
        ],
    },
    Observed {
        program: "sort",
        args: &["--comp=cat", "f"],
        did: Did::Succeeded,
        so: &[Claim::Refused("sort --comp=cat f")],
    },
    Observed {
        program: "sed",
        args: &["--in-pl=.bak", "s/a/A/", "f"],
        did: Did::Created("f.bak"),
        so: &[
            Claim::Refused("sed --in-pl=.bak s/a/b/ f"),
            Claim::Refused("sed --in s/a/b/ f"),
        ],
    },
    Observed {
        program: "grep",
        args: &["--fixed-str", "b", "f"],
        did: Did::Succeeded,
        so: &[],
    },
    // An ambiguous prefix is an error.
    Observed {
        program: "grep",
        args: &["--fil=f", "b", "f"],
        did: Did::Exited(2),
        so: &[],
    },
    Observed {
        program: "diff",
        args: &["--brie", "f", "f"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "tar",
        args: &["-cf", "a.tar", "f"],
        did: Did::Succeeded,
        so: &[],
    },
    Observed {
        program: "tar",
        args: &["--extr", "-f", "a.tar", "-C", "x"],
        did: Did::Created("x/f"),
        so: &[
            Claim::UnseenWrite("tar --extr -f a.tar"),
            Claim::UnseenWrite("tar --ext -f a.tar"),
        ],
    },
    // curl takes prefixes too: it is judged by its name (a deny rule), and no table allows
    // its options.
    Observed {
        program: "curl",
        args: &["--versio"],
        did: Did::Succeeded,
        so: &[Claim::Refused("curl --versio")],
    },
    // jq: full spellings only, and options after `--args`.
    Observed {
        program: "jq",
        args: &["-n", "--raw-out", "1"],
        did: Did::Failed,
        so: &[],
    },
    Observed {
        program: "jq",
        args: &["-rn", "$e", "--args", "--rawfile", "e", "f"],
        did: Did::Printed("b"),
        so: &[
            Claim::Refused("jq -rn '$e' --args --rawfile e /proc/1/environ"),
            Claim::Refused("jq -n '$x' --jsonargs 1 --rawfile x /etc/passwd"),
        ],
    },
    // cargo (clap): full spellings only.
    Observed {
        program: "cargo",
        args: &["metadata", "--no-dep", "--format-version", "1"],
        did: Did::Complained("unexpected argument"),
        so: &[Claim::Allowed("cargo test --manifest-pat /x")],
    },
];

/// Needs nothing: what the recorded syntax means, the analyser does.
#[test]
fn each_tables_option_syntax_is_the_recorded_programs() {
    let (suite, allowing) = (rules(), allowing());
    let mut wrong = Vec::new();
    for observed in OBSERVED {
        recorded_with(observed.program);
        for claim in observed.so {
            let holds = match *claim {
                Claim::Refused(command) => [&suite, &allowing]
                    .iter()
                    .all(|rules| !matches!(analyse(command, rules).verdict, BashVerdict::Allow)),
                Claim::Allowed(command) => {
                    matches!(analyse(command, &allowing).verdict, BashVerdict::Allow)
                }
                Claim::UnseenWrite(command) => {
                    !analyse(command, &allowing).unseen_writes.is_empty()
                }
            };
            if !holds {
                wrong.push(format!(
                    "{} {:?} {:?}, so {claim:?} — but the analyser disagrees",
                    observed.program, observed.args, observed.did
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn run(dir: &Path, program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_EDITOR", "true")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

/// The recorded table against the programs on this machine; a program that is not here is
/// skipped (one line each, through `support::skip`).
#[test]
fn recorded_option_syntax_still_holds_for_the_programs_here() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    std::fs::write(d.join("f"), "b\na\n").unwrap();
    std::fs::create_dir(d.join("x")).unwrap();
    let mut missing: Vec<&str> = Vec::new();
    let mut wrong = Vec::new();
    for observed in OBSERVED {
        if missing.contains(&observed.program) {
            continue;
        }
        let Some(program) = on_path(observed.program) else {
            missing.push(observed.program);
            skip(&format!(
                "no `{}` on PATH: its option syntax as recorded ({}) is not checked again here \
                 (Debian: apt-get install {})",
                observed.program,
                recorded_with(observed.program),
                observed.program
            ));
            continue;
        };
        let output = run(d, &program, observed.args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let holds = match observed.did {
            Did::Succeeded => output.status.success(),
            Did::Failed => !output.status.success(),
            Did::Exited(code) => output.status.code() == Some(code),
            Did::Created(file) => output.status.success() && d.join(file).exists(),
            Did::Printed(text) => stdout.contains(text),
            Did::Complained(text) => stderr.contains(text),
        };
        if !holds {
            wrong.push(format!(
                "{} {:?}: recorded {:?} ({}), now {:?}\nstdout: {stdout}\nstderr: {stderr}",
                observed.program,
                observed.args,
                observed.did,
                recorded_with(observed.program),
                output.status
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
