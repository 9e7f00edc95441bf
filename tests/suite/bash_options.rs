//! Options as programs parse them: hazard tables match every prefix of a long option for the
//! programs that take abbreviations, and short options inside clusters; jq's options are read
//! wherever they stand. The claim each table makes about its program's syntax is checked
//! against the real program on this machine.

use std::path::Path;
use std::process::{Command, Output};

use tempfile::TempDir;
use tollgate::bash::{BashRules, BashVerdict, CommandPattern};

use crate::support::bash::{analyse, rules};

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

// ---- the syntax each table claims, checked against the real programs ----

fn run(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_EDITOR", "true")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap_or_else(|e| {
            panic!("`{program}` is needed to check its option syntax (.ci/run installs it): {e}")
        })
}

fn ok(output: &Output) -> bool {
    output.status.success()
}

#[test]
fn each_tables_option_syntax_is_the_real_programs() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    std::fs::write(d.join("f"), "b\na\n").unwrap();

    // git after the subcommand (parse-options): prefixes.
    assert!(ok(&run(d, "git", &["init", "-q", "-b", "main"])));
    assert!(ok(&run(
        d,
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i"
        ]
    )));
    assert!(ok(&run(d, "git", &["branch", "other"])));
    assert!(ok(&run(
        d,
        "git",
        &["branch", "--set-upstream-t=main", "other"]
    )));
    let merge = run(d, "git", &["config", "branch.other.merge"]);
    assert_eq!(
        String::from_utf8_lossy(&merge.stdout).trim(),
        "refs/heads/main"
    );
    assert!(
        ok(&run(d, "git", &["branch", "--edit-desc"])),
        "git branch --edit-desc"
    );
    assert!(ok(&run(d, "git", &["add", "f"])));
    let marker = d.join("opened");
    let pager = format!("touch {}; true", marker.display());
    run(d, "git", &["grep", &format!("--open={pager}"), "a"]);
    assert!(marker.exists(), "git grep --open= ran no pager");
    // git's global options: full spellings only.
    assert_eq!(
        run(d, "git", &["--no-pag", "status"]).status.code(),
        Some(129)
    );

    // GNU sort, sed, grep, diff, tar: getopt_long prefixes, short clusters.
    assert!(ok(&run(d, "sort", &["--o=out1", "f"])));
    assert!(d.join("out1").exists(), "sort --o=");
    assert!(ok(&run(d, "sort", &["-ro", "out2", "f"])));
    assert!(d.join("out2").exists(), "sort -ro");
    assert!(ok(&run(d, "sort", &["--comp=cat", "f"])), "sort --comp=");
    assert!(ok(&run(d, "sed", &["--in-pl=.bak", "s/a/A/", "f"])));
    assert!(d.join("f.bak").exists(), "sed --in-pl=");
    assert!(
        ok(&run(d, "grep", &["--fixed-str", "A", "f"])),
        "grep --fixed-str"
    );
    assert_eq!(
        run(d, "grep", &["--fil=f", "A", "f"]).status.code(),
        Some(2),
        "an ambiguous prefix is an error"
    );
    assert!(ok(&run(d, "diff", &["--brie", "f", "f"])), "diff --brie");
    assert!(ok(&run(d, "tar", &["-cf", "a.tar", "f"])));
    std::fs::create_dir(d.join("x")).unwrap();
    assert!(ok(&run(d, "tar", &["--extr", "-f", "a.tar", "-C", "x"])));
    assert!(d.join("x/f").exists(), "tar --extr");

    // curl takes prefixes too (`--versio`): it is judged by its name (a deny rule), and no
    // table allows its options.
    assert!(ok(&run(d, "curl", &["--versio"])), "curl --versio");

    // jq: full spellings only, and options after `--args`.
    assert!(
        !ok(&run(d, "jq", &["-n", "--raw-out", "1"])),
        "jq --raw-out"
    );
    let read = run(d, "jq", &["-rn", "$e", "--args", "--rawfile", "e", "f"]);
    assert!(
        String::from_utf8_lossy(&read.stdout).contains("A"),
        "jq reads --rawfile after --args: {read:?}"
    );

    // cargo (clap): full spellings only.
    let cargo = run(
        d,
        "cargo",
        &["metadata", "--no-dep", "--format-version", "1"],
    );
    assert!(
        String::from_utf8_lossy(&cargo.stderr).contains("unexpected argument"),
        "{cargo:?}"
    );
}
