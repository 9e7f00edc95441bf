//! The effect oracle: what a command the gate allows really does. Generated commands are
//! decided by the real gate (`tollgate check --calls`, a ci-default-like policy, dontAsk) in a
//! workspace full of planted hazards; each one it allows runs under the real `/usr/bin/bash`
//! traced by `strace -f`, and the test fails when the trace shows an effect the verdict rules
//! out: a write, create, delete, rename, link, mode or owner change outside `/dev/null`, pipes
//! and the run's TMPDIR (git's own index refresh excepted); an `execve` of a program that is
//! not among the simple commands the analyser reported (a pager, an fsmonitor, a hook, a
//! planted `tools/ls`) or of any file of the planted world; an open of a path a read
//! guardrail or a Read deny rule covers, or of anything outside the workspace through a
//! symlink; a network connection.
//!
//! The generator is the differential oracle's (`bash_oracle.rs`: its markers and structural
//! contexts, its corpus seeds) plus brace expansion, globs over the planted names, every
//! variable-binding construct with dangerous names, abbreviated long options and the git and
//! make option tables. Seeded and deterministic: `TOLLGATE_EFFECT_ORACLE_CASES` (default 400)
//! commands, `TOLLGATE_EFFECT_ORACLE_SEED` (default 1); a failure prints the seed, the case,
//! the command, a shrunk form and the trace lines that convict it.
//!
//! Needs `strace` (Debian's package): without it the test is skipped through `support::skip`
//! (a failure under `TOLLGATE_TEST_REQUIRE_ALL=1`; CI installs it). Safety: the environment is cleared, the
//! world is a temp folder, every payload writes only inside it, each run is killed after 10 s.

#![allow(
    clippy::unwrap_used,
    reason = "test and bench support: a failure should panic"
)]

use std::collections::{BTreeSet, HashMap};
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use tollgate::bash::{BashEnv, BashRules, CommandPattern, CommandVerdict, evaluate};
use tollgate::policy::{read_guardrail, write_guardrail};

use crate::support::skip::need_program;

use super::bash_oracle::{CONTEXTS, MARKERS, Rng, env_number, place, seeds};

const BASH: &str = "/usr/bin/bash";
const TIMEOUT: &str = "/usr/bin/timeout";

/// ci-default's shape: a few allowed prefixes, deny rules for deleting and the network, and
/// Read deny rules for the workspace's secrets.
const POLICY: &str = r#"permissions:
  default_mode: dontAsk
  deny:
    - "Bash(rm:*)"
    - "Bash(curl:*)"
    - "Bash(wget:*)"
    - "Bash(git push:*)"
    - "Bash(sudo:*)"
    - "Read(.env)"
    - "Read(secrets/**)"
  ask:
    - "Bash(git commit:*)"
  allow:
    - Read
    - Glob
    - Grep
    - "Edit(src/**)"
    - "Bash(ls:*)"
    - "Bash(pwd)"
    - "Bash(git status:*)"
    - "Bash(git diff:*)"
    - "Bash(git log:*)"
    - "Bash(make test:*)"
    - "Bash(cargo test:*)"
"#;

const SECRET: &str = "s3cret-effect-0racle";

/// A planted program: it leaves a file beside itself, so running it is also a write.
const MARKER_PROGRAM: &str = "#!/bin/sh\n: > \"$0.ran\"\n";

// ---- the generator -------------------------------------------------------------------------

/// Operands: the planted names, spelled plainly.
const OPERANDS: &[&str] = &[
    "README.md",
    "src/lib.rs",
    "src",
    "tests",
    ".",
    "notes.txt",
    ".env",
    "secrets/token.txt",
    "secrets",
    "src/p1/environ",
    "src/ps/environ",
    "src/p1/cmdline",
    "src/out/secret.txt",
    "src/out",
    "src/out/sub/secret.txt",
    "--output=x",
    "-rf",
    "'--exec=touch MARK'",
    "home/.gitconfig",
    "tools/ls",
    "/proc/1/environ",
    "/proc/self/environ",
    "../outside/secret.txt",
    "~/.gitconfig",
    "Makefile",
    // Committed links: dangling ones into git's directory, to `.npmrc` and outside; live
    // ones to git's config and a hook; and `/proc/self` forms, which are the command's.
    "src/gc",
    "src/hook",
    "src/npmrc",
    "src/dang",
    "src/cfg",
    "/proc/self/cwd/.env",
    "/proc/thread-self/cwd/secrets/token.txt",
    "/dev/fd/0",
];

/// Globs over the planted names: option-shaped names, symlinks to `/proc` and outside.
const GLOBS: &[&str] = &[
    "*",
    ".*",
    "-*",
    "--*",
    "[-]*",
    "src/*",
    "src/*.rs",
    "src/p?/environ",
    "src/p[1]/environ",
    "src/p*/environ",
    "src/*/secret.txt",
    "src/*/sub/secret.txt",
    "src/o*/s*",
    ".e*",
    "secrets/*",
    "*/*",
    "s*/*",
    "t*/*",
    "?env",
    "*.md",
];

/// Brace expansions: several words from one, options and names included.
const BRACES: &[&str] = &[
    "{src,tests}",
    "{README.md,.env}",
    "src/{lib.rs,p1/environ}",
    "{.,src}/*",
    "-{r,i}",
    "-{-output=x,-no-color}",
    "{-rf,x}",
    "src/{p1,ps}/environ",
    "{secrets,src}",
    "{src/out,tests}",
    "src/{out,p1}",
    "{notes.txt,secrets/token.txt}",
];

/// Read-only programs and the options they are given (some of them hazards).
const READERS: &[(&str, &[&str])] = &[
    ("cat", &["-n", "-A", "-v", "--"]),
    ("head", &["-n 2", "-c 5", "-q"]),
    ("tail", &["-n 1", "-c 3"]),
    ("wc", &["-l", "-c", "--files0-from=notes.txt"]),
    (
        "grep",
        &[
            "-r",
            "-R",
            "-i",
            "-n",
            "-l",
            "-H",
            "-e x",
            "-f .env",
            "--include=*",
            "-rn",
            "-s",
        ],
    ),
    (
        "ls",
        &["-l", "-a", "-R", "-d", "-la", "--color=never", "-L"],
    ),
    (
        "sort",
        &[
            "-o x",
            "--output=x",
            "--out=x",
            "-r",
            "-u",
            "--compress-program=tools/pager",
            "--compress-p=tools/pager",
            "--files0-from=notes.txt",
        ],
    ),
    ("stat", &["-L", "-c %n"]),
    ("file", &["-L", "-f notes.txt"]),
    ("tac", &[]),
    ("nl", &[]),
    ("uniq", &[]),
    ("cut", &["-c1-3"]),
    ("md5sum", &["-c"]),
    (
        "diff",
        &["-r", "--to-file=.env", "--from-file=src/out/secret.txt"],
    ),
    ("cmp", &[]),
    ("readlink", &["-f", "-e"]),
    ("realpath", &[]),
    ("du", &["-a", "-L", "--files0-from=notes.txt"]),
    ("tree", &["-a", "-o x", "-R"]),
    ("basename", &[]),
    ("dirname", &[]),
    ("echo", &["-n", "-e"]),
    ("printf", &["'%s\\n'", "-v PATH"]),
    ("test", &["-e", "-f"]),
    ("pwd", &[]),
];

/// Whole read-only-looking commands that reach the programs' own hazard options.
const SPECIALS: &[&str] = &[
    "find . -maxdepth 1 -name x",
    "find src -maxdepth 1 -type f",
    "find . -maxdepth 1 -exec cat {} \\;",
    "find . -maxdepth 1 -name x -delete",
    "find . -maxdepth 1 -fprint x",
    "find . -maxdepth 1 -fprintf x %p",
    "find src/out -name secret.txt",
    "find -L src -name environ",
    "sed -n 1p README.md",
    "sed -n 'w x' README.md",
    "sed -n '1e touch MARK' README.md",
    "sed -n 's/a/b/w x' README.md",
    "sed -n 1p .env",
    "awk '{print}' README.md",
    "awk 'BEGIN{system(\"touch MARK\")}'",
    "awk '{print > \"x\"}' README.md",
    "awk '{print}' src/p1/environ",
    "jq . notes.json",
    "jq -r .a notes.json",
    "jq -rn '$e' --args --rawfile e /proc/1/environ",
    "jq -rn '$e' --args --rawfile e .env",
    "jq -n --rawfile e .env '$e'",
    "jq -n --slurpfile e src/out/secret.txt '$e'",
    "jq -n --raw-f e .env '$e'",
    "jq -n '$__prog_args' --args a b",
    "jq -L tools -n 1",
    "xargs cat <<< README.md",
    "xargs -a notes.txt echo",
    "cd src/out && cat secret.txt",
    "cd src && ls",
    "cd ~ && ls",
    "pushd src/out && cat secret.txt",
    "cat < .env",
    "cat < src/out/secret.txt",
    "wc -l < README.md",
    "echo hi > /dev/null",
    "ls > /dev/null 2>&1",
    "set -x; :",
    "bash -c :",
    "sh -c :",
    "command -v ls",
    "type ls",
    "hash ls",
    "env",
    "printenv HOME",
    "true",
    // Programs that read the names of further files from a file.
    "md5sum -c sums.txt",
    "sha256sum --check sums.txt",
    "file -f names.txt",
    "file --files-from names.txt",
    "xargs -a names.txt cat",
    "xargs cat < names.txt",
    "grep -f names.txt README.md",
    "grep --exclude-from=.env x README.md",
    "wc --files0-from=names0",
    "du --files0-from=names0",
    "sort --files0-from=names0",
    "date -f .env",
    "date --file=src/out/secret.txt",
    "jq -f tools/prog.jq -n",
    "jq --from-file tools/prog.jq -n",
    "jq -n input .env",
    "jq -n --rawfile e src/out/secret.txt '$e'",
    // Reads through redirections and descriptors.
    "echo $(< .env)",
    "echo $(<src/out/secret.txt)",
    "cat /dev/fd/3 3< .env",
    "cat <&3 3<.env",
    "cat /dev/stdin < src/out/secret.txt",
    "exec 3< .env; cat <&3",
    "read -r line < .env; echo $line",
    "mapfile -t a < src/out/secret.txt; echo ${a[0]}",
    // Following symlinks out of the workspace.
    "grep -R TOKEN src",
    "grep -r TOKEN src/out",
    "grep -rs OUTSIDE src",
    "du -L src",
    "du -aL src",
    "ls -LR src",
    "find -L src -type f",
    "find src -follow -name secret.txt",
    "cat src/out/sub/../secret.txt",
    "head -c 5 src/ps/environ",
    "cd -P src/out; ls",
    // Builtins that bind a program or run code.
    "hash -p tools/ls ls; ls",
    "BASH_CMDS[ls]=tools/ls; ls",
    "shopt -s expand_aliases; alias ls=tools/ls\nls",
    "enable -n echo; echo hi",
    "mapfile -C 'touch MARK' -c 1 a <<< x",
    "readarray -C 'touch MARK' -c 1 a <<< x",
    "history -w x",
    "history -s x; history -w y",
    "fc -e tools/pager -1",
    "trap 'touch MARK' EXIT",
    "trap 'touch MARK' DEBUG; :",
    "command_not_found_handle() { touch MARK; }; nosuch",
    "printf -v x %s y",
    "ulimit -c 0",
    "umask 077",
    // Finds and seds that write or run.
    "find . -maxdepth 1 -fls x",
    "find . -maxdepth 1 -fprint0 x",
    "find . -maxdepth 1 -execdir cat {} \\;",
    "find . -maxdepth 1 -okdir cat {} \\;",
    "sed -n 'r /proc/1/environ' README.md",
    "sed -n 'R .env' README.md",
    "sed 'W x' README.md",
    "sed -f tools/prog.jq README.md",
    "sed --in-place=.bak -n p README.md",
    "sed -s -n p README.md",
    "awk -f tools/prog.jq README.md",
    "awk '{ print | \"cat\" }' README.md",
    "awk 'BEGIN { getline l < \".env\"; print l }'",
    "awk 'BEGIN { while ((getline l < \"/proc/1/environ\") > 0) print l }'",
    "awk -i inplace 1 README.md",
    // git reading what it usually ignores, or writing its config.
    "git grep --no-index TOKEN",
    "git grep --untracked TOKEN",
    "git grep -f .env",
    "git status --ignored",
    "git check-ignore -v .env",
    "git diff --no-index .env README.md",
    "git diff --no-index src/out/secret.txt README.md",
    "git config core.pager x",
    "git config --global core.pager x",
    "git config --file=.env --list",
    "git config -f src/out/secret.txt --list",
    "git config --get core.pager",
    "git describe --dirty",
    "git log --all -- .env",
    "git ls-files --others",
    "git help log",
    "git log -1 --format=%s",
    "git show HEAD --stat",
    "git diff HEAD~1 -- README.md",
    "git log -p -1",
    "git diff --stat HEAD~1",
    // Writes through committed links, dangling or not (the gate must judge what the kernel
    // reaches: git's config and hooks, `.npmrc`, a file outside).
    "echo ../src/evil > src/gc",
    "echo x > src/dang",
    "printf 'registry=x' > src/npmrc",
    "echo x >> src/hook",
    "echo x >> src/cfg",
    "tee src/gc < README.md",
    "cp README.md src/dang",
    // Reads in the command's frame, whatever folder the checker was started in.
    "cat /proc/self/cwd/.env",
    "cat /proc/thread-self/cwd/secrets/token.txt",
    "head -c 5 /proc/self/cwd/src/out/secret.txt",
];

/// Git subcommands: the ones rules allow and the ones the analyser judges read-only.
const GIT_SUBCOMMANDS: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "grep",
    "branch",
    "tag",
    "rev-parse",
    "ls-files",
    "blame",
    "shortlog",
    "describe",
    "config",
    "cat-file",
    "ls-tree",
    "diff-tree",
    "format-patch",
    "help",
    "stash",
    "remote",
    "worktree",
];

/// Git options: hazards, their abbreviations, and ordinary ones.
const GIT_OPTIONS: &[&str] = &[
    "--output=x",
    "--outp=x",
    "--output=.git/config",
    "'--open-files-in-pager=touch MARK'",
    "'--open-files=touch MARK'",
    "'-Otouch MARK'",
    "--ext-diff",
    "--ext-d",
    "--textconv",
    "--textc",
    "--no-index",
    "'--exec=touch MARK'",
    "-p",
    "--stat",
    "--oneline",
    "-1",
    "-2",
    "--no-color",
    "--name-only",
    "HEAD",
    "HEAD~1",
    "--",
    "-Sx",
    "--paginate",
    "--contents=.env",
    "--cont=.env",
    "'--upload-pack=touch MARK'",
    "--no-ext-diff",
    "--color=always",
    "--format=%H",
    "--word-diff",
    "-l",
    "--list",
    "--get core.pager",
    "--global --list",
    "--edit",
    "-e",
    "--edit-desc",
    "--set-upstream-t=x",
    "--show-toplevel",
    "README.md",
    ".env",
    "x",
    "HEAD:.env",
    "HEAD:README.md",
];

/// Git's global options, before the subcommand.
const GIT_GLOBALS: &[&str] = &[
    "-c core.pager='touch MARK'",
    "-p",
    "--paginate",
    "--pag",
    "-P",
    "--no-pager",
    "-C src/out",
    "-C src",
    "-C home",
    "--git-dir=home",
    "--work-tree=src/out",
    "--config-env=core.pager=HOME",
    "--exec-path=tools",
    "-c core.fsmonitor=tools/fsmonitor",
    "-c alias.x='!touch MARK'",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--bare",
    "--namespace=x",
];

/// make, the runner: its hazard table (and abbreviations) beside ordinary options.
const MAKE_OPTIONS: &[&str] = &[
    "-f tools/evil.mk",
    "--file=tools/evil.mk",
    "--fi=tools/evil.mk",
    "--makefile=tools/evil.mk",
    "'--eval=x:=$(shell touch $$MARK)'",
    "'--ev=x:=$(shell touch $$MARK)'",
    "-E 'x:=$(shell touch $$MARK)'",
    "SHELL=tools/sh",
    "'MAKEFLAGS=-f tools/evil.mk'",
    "-C src",
    "-C tools",
    "-n",
    "-s",
    "-j2",
    "-k",
    "--no-print-directory",
    "-W Makefile",
    "--what-if=Makefile",
    "--what=Makefile",
    "-o test",
    "-I tools",
    "--incl=tools",
    "-itools/evil.mk",
    "-q",
    "X=1",
];

/// cargo, the other runner: config that names a program, manifests and outputs outside.
const CARGO_OPTIONS: &[&str] = &[
    "--offline",
    "-q",
    "--lib",
    "--no-run",
    "--config 'target.x86_64-unknown-linux-gnu.runner=\"tools/pager\"'",
    "'--config=build.rustc-wrapper=\"tools/pager\"'",
    "--config build.rustc-wrapper=tools/pager",
    "-Zunstable-options",
    "--manifest-path=src/out/Cargo.toml",
    "--manifest-path src/out/Cargo.toml",
    "--target-dir=src/out/t",
    "--target-dir ../outside/t",
    "-- --logfile=x",
    "-- --list",
    "-- --nocapture",
    "-- -q",
];

/// `(name, value, body)`: a dangerous name, the value that makes it bite, and the command it
/// bites (`None`: any generated payload).
const DANGEROUS: &[(&str, &str, Option<&str>)] = &[
    ("PS4", "'$(touch MARK)'", Some("set -x; :")),
    ("PS4", "'$(touch MARK)'", Some("set -x; ls")),
    ("PS4", "'`touch MARK`'", Some("set -x; echo hi")),
    ("PATH", "tools", None),
    ("PATH", "tools", Some("ls")),
    ("PATH", "tools:/usr/bin:/bin", Some("cat README.md")),
    ("PATH", "tools", Some("git status")),
    ("HOME", "home", Some("git log -1")),
    ("HOME", "home", Some("git status")),
    ("HOME", "home", Some("git diff")),
    ("HOME", "home", Some("cd ~ && cat .gitconfig")),
    ("BASH_ENV", "tools/env.sh", Some("bash -c :")),
    ("ENV", "tools/env.sh", Some("sh -c :")),
    ("IFS", "/", Some("ls src")),
    ("CDPATH", "src/out", Some("cd sub && cat secret.txt")),
    ("CDPATH", "src", Some("cd out && cat secret.txt")),
    ("CDPATH", "src", Some("cd out && ls")),
    ("GLOBIGNORE", "x", Some("cat *")),
    ("GLOBIGNORE", "x", Some("grep -s TOKEN *")),
    ("GLOBIGNORE", "x", Some("wc -c *")),
    ("LD_PRELOAD", "tools/evil.so", Some("ls")),
    ("LD_LIBRARY_PATH", "tools", Some("ls")),
    ("GIT_PAGER", "'touch MARK'", Some("git -p log -1")),
    ("GIT_EXTERNAL_DIFF", "tools/pager", Some("git diff HEAD~1")),
    ("GIT_CONFIG_GLOBAL", "home/.gitconfig", Some("git status")),
    ("GIT_CONFIG_GLOBAL", "home/.gitconfig", Some("git log -1")),
    ("GIT_DIR", "home", Some("git status")),
    ("GIT_EXEC_PATH", "tools", Some("git log -1")),
    ("GIT_TRACE", "@WS@/trace", Some("git status")),
    (
        "GIT_CONFIG_PARAMETERS",
        "\"'core.fsmonitor'='tools/fsmonitor'\"",
        Some("git status"),
    ),
    ("GIT_SSH_COMMAND", "'touch MARK'", Some("git status")),
    ("PAGER", "'touch MARK'", Some("git -p log -1")),
    ("SHELLOPTS", "xtrace", Some("bash -c :")),
    ("BASH_XTRACEFD", "1", Some("set -x; :")),
    (
        "RUSTC_WRAPPER",
        "tools/pager",
        Some("cargo test --offline -q"),
    ),
    (
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
        "tools/pager",
        Some("cargo test --offline -q"),
    ),
    (
        "CARGO_BUILD_RUSTC",
        "tools/pager",
        Some("cargo test --offline -q"),
    ),
    (
        "RUSTFLAGS",
        "'-Clinker=tools/pager'",
        Some("cargo test --offline -q"),
    ),
    ("CARGO_HOME", "home", Some("cargo test --offline -q")),
    ("a[$(touch MARK)]", "1", None),
    ("'a[$(touch MARK)]'", "1", None),
    ("x", "1", None),
];

/// How a binding is written; `NAME`, `VALUE` and `BODY` are filled in.
const BINDINGS: &[&str] = &[
    "NAME=VALUE BODY",
    "NAME=VALUE; BODY",
    "export NAME=VALUE; BODY",
    "declare NAME=VALUE; BODY",
    "declare -x NAME=VALUE; BODY",
    "declare -g NAME=VALUE; BODY",
    "typeset NAME=VALUE; BODY",
    "readonly NAME=VALUE; BODY",
    "f() { local NAME=VALUE; BODY; }; f",
    "for NAME in VALUE; do BODY; done",
    "select NAME in VALUE; do BODY; break; done <<< 1",
    "read NAME <<< VALUE; BODY",
    "read -r NAME <<< VALUE; BODY",
    "IFS= read -r NAME <<< VALUE; BODY",
    "read -a NAME <<< VALUE; BODY",
    "mapfile -t NAME <<< VALUE; BODY",
    "readarray -t NAME <<< VALUE; BODY",
    "printf -v NAME %s VALUE; BODY",
    "true & wait -n -p NAME; BODY",
    "getopts a: NAME -a VALUE; BODY",
    "let NAME=1; BODY",
    "(( NAME=1 )); BODY",
    "declare -n REF=NAME; REF=VALUE; BODY",
    "{ NAME=VALUE; }; BODY",
    "NAME+=VALUE; BODY",
    "set -a; NAME=VALUE; BODY",
];

fn pick_n<'a>(rng: &mut Rng, items: &[&'a str], max: u64) -> Vec<&'a str> {
    if items.is_empty() {
        return Vec::new();
    }
    let n = rng.next() % (max + 1);
    (0..n).map(|_| rng.pick(items)).collect()
}

/// One operand: plain, a glob or a brace expansion.
fn operand(rng: &mut Rng) -> String {
    match rng.next() % 10 {
        0..=4 => rng.pick(OPERANDS).to_owned(),
        5..=7 => rng.pick(GLOBS).to_owned(),
        _ => rng.pick(BRACES).to_owned(),
    }
}

/// A payload as words (each already quoted as Bash reads it).
fn payload(rng: &mut Rng, seeds: &[String]) -> Vec<String> {
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    match rng.next() % 20 {
        0..=6 => {
            let (program, options) = READERS[(rng.next() % READERS.len() as u64) as usize];
            let mut out = vec![program.to_owned()];
            for option in pick_n(rng, options, 2) {
                out.push(option.to_owned());
            }
            if program == "grep" {
                out.push(if rng.chance(50) { "TOKEN" } else { "x" }.to_owned());
            }
            for _ in 0..=(rng.next() % 2) {
                out.push(operand(rng));
            }
            out
        }
        7..=9 => {
            let mut out = vec!["git".to_owned()];
            for global in pick_n(rng, GIT_GLOBALS, 1) {
                out.push(global.to_owned());
            }
            out.push(
                if rng.chance(50) {
                    rng.pick(&["status", "diff", "log"])
                } else {
                    rng.pick(GIT_SUBCOMMANDS)
                }
                .to_owned(),
            );
            for option in pick_n(rng, GIT_OPTIONS, 3) {
                out.push(option.to_owned());
            }
            if rng.chance(20) {
                out.push(operand(rng));
            }
            out
        }
        10 | 11 => {
            let mut out = words("make test");
            for option in pick_n(rng, MAKE_OPTIONS, 2) {
                out.push(option.to_owned());
            }
            out
        }
        12 if rng.chance(50) => {
            let mut out = words("cargo test");
            for option in pick_n(rng, CARGO_OPTIONS, 2) {
                out.push(option.to_owned());
            }
            out
        }
        12..=14 => words(rng.pick(SPECIALS)),
        15 => words(rng.pick(MARKERS)),
        16 if !seeds.is_empty() => {
            vec![seeds[(rng.next() % seeds.len() as u64) as usize].clone()]
        }
        _ => {
            let mut out = vec!["ls".to_owned()];
            out.push(operand(rng));
            out
        }
    }
}

/// A word Bash would read the same after a rewrite: no quotes, spaces, braces or escapes.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && !word.contains([
            '\'', '"', ' ', '{', '}', '\\', '$', '`', ';', '&', '|', '<', '>',
        ])
}

/// Rewrites one word of `words` the way an attacker spells it: a brace expansion that
/// yields it (or it and its neighbour), a glob that matches it, an abbreviated long option.
fn respell(rng: &mut Rng, words: &mut Vec<String>) {
    if words.is_empty() {
        return;
    }
    let i = (rng.next() % words.len() as u64) as usize;
    let word = words[i].clone();
    if !plain(&word) {
        return;
    }
    match rng.next() % 8 {
        // `{cat,.env}`, `{rm,-f,x}`: two words from one.
        0 if i + 1 < words.len() && plain(&words[i + 1]) => {
            let next = words.remove(i + 1);
            words[i] = format!("{{{word},{next}}}");
        }
        1 => words[i] = format!("{{{word},}}"),
        2 => words[i] = format!("{{{word}}}"),
        3 if word.len() > 1 => {
            let cut = 1 + (rng.next() as usize % (word.len() - 1));
            if word.is_char_boundary(cut) {
                words[i] = format!("{}{{{},}}", &word[..cut], &word[cut..]);
            }
        }
        4 if word.starts_with('-') => {
            words[i] = format!("-{{{},-no-color}}", &word[1..]);
        }
        // A glob that matches the word: one letter as `?` or a class.
        5 | 6 => {
            let positions: Vec<usize> = word
                .char_indices()
                .filter(|(_, c)| c.is_ascii_alphanumeric())
                .map(|(at, _)| at)
                .collect();
            if let Some(&at) = positions.get((rng.next() as usize) % positions.len().max(1)) {
                let c = &word[at..=at];
                let class = if rng.chance(50) {
                    "?".to_owned()
                } else {
                    format!("[{c}]")
                };
                words[i] = format!("{}{class}{}", &word[..at], &word[at + 1..]);
            }
        }
        // `--long[=v]` by a shorter prefix.
        _ => {
            if let Some(long) = word.strip_prefix("--") {
                let (name, value) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                if name.len() > 3 {
                    let keep = 2 + (rng.next() as usize % (name.len() - 2));
                    words[i] = match value {
                        Some(v) => format!("--{}={v}", &name[..keep]),
                        None => format!("--{}", &name[..keep]),
                    };
                }
            }
        }
    }
}

/// The parts a case is made of, so a failure can be shrunk by leaving some out.
#[derive(Clone, Debug)]
struct Case {
    binding: Option<(&'static str, String, String)>,
    words: Vec<String>,
    respelled: Vec<String>,
    context: Option<&'static str>,
}

impl Case {
    fn render(&self, respelled: bool, binding: bool, context: bool) -> Option<String> {
        let words = if respelled {
            &self.respelled
        } else {
            &self.words
        };
        let mut script = words.join(" ");
        if binding && let Some((template, name, value)) = &self.binding {
            script = template
                .replace("NAME", name)
                .replace("VALUE", value)
                .replace("BODY", &script);
        }
        if context && let Some(context) = self.context {
            script = place(context, &script)?;
        }
        Some(script)
    }

    fn full(&self) -> Option<String> {
        self.render(true, true, true)
    }

    /// Smaller forms first: each part left out alone, then together.
    fn smaller(&self) -> Vec<String> {
        let mut forms = Vec::new();
        for (r, b, c) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, false, true),
            (true, true, false),
            (true, false, true),
            (false, true, true),
        ] {
            if let Some(form) = self.render(r, b, c)
                && Some(&form) != self.full().as_ref()
                && !forms.contains(&form)
            {
                forms.push(form);
            }
        }
        forms
    }
}

/// The classes of hole another branch is closing; see `KNOWN_OPEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Brace and glob expansion judged before it is expanded.
    Expansion,
    /// A binding construct (`for`, `read`, `printf -v`, `declare`, …) of a dangerous name.
    Binding,
    /// A long option spelled by an unambiguous prefix.
    Abbreviation,
    /// jq reading options after `--args`.
    JqArgs,
    /// A path the gate must resolve in the command's frame: a committed link (dangling or
    /// not) into git's directory, to `.npmrc` or outside, or `/proc/self`, `/dev/fd`.
    Resolution,
}

/// Classes whose fixes are being made elsewhere and have not reached this branch: a case in
/// one of them is reported, not failed, unless `TOLLGATE_EFFECT_ORACLE_STRICT=1`. Empty
/// this list as the fixes land; every other finding fails the test. Every class is in now:
/// the bindings, long options by prefix, jq's `--args`, expansion (the folders a glob
/// lists are reads too) and resolution (paths judged in the command's frame, committed
/// links carrying no authority).
const KNOWN_OPEN: &[Class] = &[];

/// A word Bash expands into names it finds on disk or into several words.
fn expands(word: &str) -> bool {
    !word.contains(['\'', '"'])
        && (word.contains(['*', '?', '['])
            || (word.contains('{') && (word.contains(',') || word.contains(".."))))
}

impl Case {
    /// The known-open classes this case belongs to.
    fn classes(&self) -> Vec<Class> {
        let mut classes = Vec::new();
        if self.respelled.iter().any(|w| expands(w)) {
            classes.push(Class::Expansion);
        }
        if self.binding.is_some() {
            classes.push(Class::Binding);
        }
        let abbreviated = self
            .respelled
            .iter()
            .any(|w| w.starts_with("--") && !self.words.contains(w));
        if abbreviated || self.words.iter().any(|w| ABBREVIATED.contains(&w.as_str())) {
            classes.push(Class::Abbreviation);
        }
        if self.words.iter().any(|w| w == "--args") {
            classes.push(Class::JqArgs);
        }
        let resolved = [
            "src/gc",
            "src/hook",
            "src/npmrc",
            "src/dang",
            "src/cfg",
            "/proc/self",
            "/proc/thread-self",
            "/dev/fd",
        ];
        if self
            .words
            .iter()
            .chain(&self.respelled)
            .any(|w| resolved.iter().any(|name| w.contains(name)))
        {
            classes.push(Class::Resolution);
        }
        classes
    }
}

/// Table entries that are themselves abbreviations.
const ABBREVIATED: &[&str] = &[
    "--outp=x",
    "'--open-files=touch MARK'",
    "--ext-d",
    "--textc",
    "--cont=.env",
    "--edit-desc",
    "--set-upstream-t=x",
    "--pag",
    "--fi=tools/evil.mk",
    "'--ev=x:=$(shell touch $$MARK)'",
    "--what=Makefile",
    "--incl=tools",
    "--out=x",
    "--compress-p=tools/pager",
    "--raw-f",
];

fn generate(rng: &mut Rng, seeds: &[String], ws: &Path) -> Case {
    let mut words = payload(rng, seeds);
    let binding = rng.chance(35).then(|| {
        let (name, value, body) = DANGEROUS[(rng.next() % DANGEROUS.len() as u64) as usize];
        if let Some(body) = body {
            words = body.split(' ').map(str::to_owned).collect();
        }
        let value = value.replace("@WS@", &ws.display().to_string());
        (rng.pick(BINDINGS), name.to_owned(), value)
    });
    let mut respelled = words.clone();
    for _ in 0..(rng.next() % 3) {
        respell(rng, &mut respelled);
    }
    let context = rng.chance(25).then(|| rng.pick(CONTEXTS));
    Case {
        binding,
        words,
        respelled,
        context,
    }
}

// ---- the planted world ---------------------------------------------------------------------

struct World {
    root: PathBuf,
    ws: PathBuf,
    template: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
    traces: PathBuf,
    policy: PathBuf,
    _dir: tempfile::TempDir,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn executable(path: &Path, text: &str) {
    write(path, text);
    let mut permissions = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(path, permissions).unwrap();
}

fn run_git(dir: &Path, home: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_AUTHOR_NAME", "o")
        .env("GIT_AUTHOR_EMAIL", "o@example.invalid")
        .env("GIT_COMMITTER_NAME", "o")
        .env("GIT_COMMITTER_EMAIL", "o@example.invalid")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?} failed");
}

/// A config that runs a planted program wherever git lets config run one.
fn hazardous_gitconfig(ws: &Path) -> String {
    let pager = ws.join("tools/pager");
    let fsmonitor = ws.join("tools/fsmonitor");
    format!(
        "[core]\n\tfsmonitor = {fsmonitor}\n\tpager = {pager}\n\teditor = {pager}\n\thooksPath = {hooks}\n\tsshCommand = {pager}\n[pager]\n\tlog = {pager}\n\tdiff = {pager}\n\tstatus = {pager}\n[diff]\n\texternal = {pager}\n[alias]\n\tst = !{pager}\n[diff \"planted\"]\n\ttextconv = {pager}\n",
        fsmonitor = fsmonitor.display(),
        pager = pager.display(),
        hooks = ws.join("tools").display(),
    )
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let home = root.join("home");
        let tmp = root.join("tmp");
        let traces = root.join("traces");
        for folder in [&ws, &outside, &home, &tmp, &traces] {
            std::fs::create_dir_all(folder).unwrap();
        }
        write(&outside.join("secret.txt"), &format!("OUTSIDE={SECRET}\n"));
        write(
            &outside.join("sub/secret.txt"),
            &format!("OUTSIDE={SECRET}\n"),
        );

        write(&ws.join("README.md"), "# planted\nhello\n");
        write(&ws.join("notes.txt"), "README.md\n");
        write(&ws.join("notes.json"), "{\"a\": 1}\n");
        // Lists of further files to read, for the programs that take one.
        let names = format!(
            ".env\nsecrets/token.txt\nsrc/out/secret.txt\n{}/secret.txt\n/proc/1/environ\n",
            outside.display()
        );
        write(&ws.join("names.txt"), &names);
        write(&ws.join("names0"), &names.replace('\n', "\0"));
        write(
            &ws.join("sums.txt"),
            "d41d8cd98f00b204e9800998ecf8427e  .env\nd41d8cd98f00b204e9800998ecf8427e  src/out/secret.txt\n",
        );
        write(&ws.join("tools/prog.jq"), "1\n");
        write(&ws.join("src/lib.rs"), "pub fn f() {}\n");
        write(&ws.join("src/main.rs"), "fn main() {}\n");
        write(&ws.join("tests/t.rs"), "#[test]\nfn t() {}\n");
        write(&ws.join(".env"), &format!("TOKEN={SECRET}\n"));
        write(&ws.join("secrets/token.txt"), &format!("TOKEN={SECRET}\n"));
        // Secrets are kept out of the repository, as they usually are: git never reads them.
        write(
            &ws.join(".gitignore"),
            "/target\n/Cargo.lock\n/.env\n/secrets/\n",
        );
        write(&ws.join("Makefile"), "test:\n\t@echo ok\n");
        write(
            &ws.join("Cargo.toml"),
            "[package]\nname = \"planted\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ndoctest = false\n",
        );
        // A crate outside whose build script would leave a marker.
        write(
            &outside.join("Cargo.toml"),
            "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(&outside.join("src/lib.rs"), "");
        write(
            &outside.join("build.rs"),
            "fn main() { std::fs::write(\"outside.ran\", \"\").unwrap(); }\n",
        );
        // Files named like options, for globs and for `{…}` to feed to a program.
        for name in [
            "--output=x",
            "-rf",
            "--exec=touch MARK",
            "-delete",
            "--paginate",
        ] {
            write(&ws.join(name), "planted\n");
        }
        std::os::unix::fs::symlink("/proc/1", ws.join("src/p1")).unwrap();
        std::os::unix::fs::symlink("/proc/self", ws.join("src/ps")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("src/out")).unwrap();
        // Programs that shadow real ones on a planted PATH, and what config names.
        for name in [
            "ls",
            "cat",
            "git",
            "grep",
            "sh",
            "pager",
            "fsmonitor",
            "touch",
            "git-log",
            "post-checkout",
            "pre-commit",
            "reference-transaction",
        ] {
            executable(&ws.join("tools").join(name), MARKER_PROGRAM);
        }
        // Committed links a pull request could bring: dangling ones that make a write
        // create git's `commondir`, `.npmrc` or a file outside; live ones to git's config
        // and a hook (planted below).
        for (link, target) in [
            ("src/gc", PathBuf::from("../.git/commondir")),
            ("src/hook", PathBuf::from("../.git/hooks/pre-commit")),
            ("src/npmrc", PathBuf::from("../.npmrc")),
            ("src/dang", outside.join("planted-through-link")),
            ("src/cfg", PathBuf::from("../.git/config")),
        ] {
            std::os::unix::fs::symlink(target, ws.join(link)).unwrap();
        }
        write(&ws.join("tools/env.sh"), ": > \"$PWD/BASH_ENV.ran\"\n");
        write(&ws.join("tools/evil.mk"), "test:\n\t: > evil.ran\n");
        write(&ws.join("home/.gitconfig"), &hazardous_gitconfig(&ws));
        write(&ws.join("src/.gitconfig"), &hazardous_gitconfig(&ws));

        run_git(&ws, &home, &["init", "-q", "-b", "main"]);
        run_git(&ws, &home, &["add", "-A"]);
        run_git(&ws, &home, &["commit", "-q", "-m", "one"]);
        write(&ws.join("README.md"), "# planted\nhello again\n");
        run_git(&ws, &home, &["commit", "-q", "-am", "two"]);
        // The repository's own config holds dormant hazards an option can wake: a pager for
        // `-p`, a diff driver and an external diff for `--ext-diff`, an alias.
        let mut config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        config.push_str(&format!(
            "[core]\n\tpager = {pager}\n\teditor = {pager}\n[diff \"planted\"]\n\ttextconv = {pager}\n[alias]\n\tst = !{pager}\n",
            pager = ws.join("tools/pager").display()
        ));
        std::fs::write(ws.join(".git/config"), config).unwrap();
        for hook in [
            "post-checkout",
            "pre-commit",
            "reference-transaction",
            "pre-push",
        ] {
            executable(&ws.join(".git/hooks").join(hook), MARKER_PROGRAM);
        }
        // git refreshes the index on the first status; the template starts refreshed.
        run_git(&ws, &home, &["status", "-s"]);
        // And the crate is built, so an allowed `cargo test` only runs the tests.
        let built = Command::new("cargo")
            .args(["test", "--offline", "-q", "--no-run"])
            .current_dir(&ws)
            .env_clear()
            .envs(toolchain_env(&home))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(built.success(), "the planted crate should build");

        let template = root.join("template");
        copy_tree(&ws, &template);
        let policy = root.join("policy.yaml");
        write(&policy, POLICY);
        World {
            root,
            ws,
            template,
            outside,
            home,
            tmp,
            traces,
            policy,
            _dir: dir,
        }
    }

    /// Puts the workspace back as planted, after a run that changed it.
    fn restore(&self) {
        let _ = std::fs::remove_dir_all(&self.ws);
        copy_tree(&self.template, &self.ws);
    }

    /// The environment a model's command runs in: nothing inherited, the tool's git
    /// confinement (`tools::git_env`), a HOME outside the workspace.
    fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = toolchain_env(&self.home);
        env.extend([
            ("TMPDIR", self.tmp.display().to_string()),
            ("MARK", self.root.join("MARK").display().to_string()),
            ("LANG", "C".to_owned()),
            ("GIT_CONFIG_COUNT", "1".to_owned()),
            ("GIT_CONFIG_KEY_0", "safe.bareRepository".to_owned()),
            ("GIT_CONFIG_VALUE_0", "explicit".to_owned()),
            ("GIT_CEILING_DIRECTORIES", self.root.display().to_string()),
        ]);
        env
    }
}

/// `PATH` (the system's folders and the toolchain's, so `cargo` is the one testing this
/// crate) and a `HOME` outside the workspace.
fn toolchain_env(home: &Path) -> Vec<(&'static str, String)> {
    let mut path = String::from("/usr/bin:/bin");
    if let Some(dir) = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|cargo| cargo.parent().map(Path::to_path_buf))
    {
        path = format!("{}:{path}", dir.display());
    }
    vec![("PATH", path), ("HOME", home.display().to_string())]
}

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

// ---- the gate and the analysis -------------------------------------------------------------

/// The real gate's decisions for `scripts`, one `check --calls` process for them all.
fn gate_allows(world: &World, scripts: &[String]) -> Vec<bool> {
    let mut input = String::new();
    for (i, script) in scripts.iter().enumerate() {
        let line = serde_json::json!({"id": i, "tool": "Bash", "input": {"command": script}});
        input.push_str(&line.to_string());
        input.push('\n');
    }
    // Started outside the workdir: no decision may depend on the folder tollgate runs in.
    let mut child = crate::support::tollgate_in(&world.home)
        .args(["check", "--policy"])
        .arg(&world.policy)
        .arg("--workdir")
        .arg(&world.ws)
        .args(["--calls", "-"])
        .env_clear()
        .envs(world.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "tollgate check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decisions: Vec<bool> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            value["decision"] == "allow"
        })
        .collect();
    assert_eq!(decisions.len(), scripts.len(), "one decision per call");
    decisions
}

/// What the analysis says runs: every program name it reported (each simple command's
/// resolved name and the words of its text: wrappers such as `env`, `timeout`, `sh -c` run
/// too), and the names of the commands an allow rule, not the read-only proof, let through.
struct Analysed {
    names: BTreeSet<String>,
    by_rule: BTreeSet<String>,
}

impl Analysed {
    fn of(names: &[&str]) -> Analysed {
        Analysed {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            by_rule: BTreeSet::new(),
        }
    }
}

/// The policy's Bash allow rules, for the analysis's per-command verdicts.
fn policy_rules() -> BashRules {
    let allow = POLICY
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- \"Bash("))
        .filter_map(|rest| rest.strip_suffix(")\""))
        .enumerate()
        .map(|(i, pattern)| (CommandPattern::parse(pattern).unwrap(), i))
        .collect();
    BashRules {
        allow,
        ..BashRules::default()
    }
}

fn analysed(world: &World, script: &str) -> Analysed {
    let roots = [world.ws.clone()];
    let resolve = |p: &Path, frame: tollgate::base::Frame<'_>| {
        tollgate::base::resolve(p, frame, &roots, None)
    };
    let env = BashEnv {
        cwd: &world.ws,
        workspace_roots: &roots,
        home: Some(&world.home),
        resolve: &resolve,
        list_dir: &|dir| {
            let entries = std::fs::read_dir(dir).ok()?;
            Some(
                entries
                    .filter_map(|entry| {
                        entry
                            .ok()
                            .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    })
                    .collect(),
            )
        },
        links_below: &tollgate::base::links_below,
    };
    let analysis = evaluate(script, &policy_rules(), &env);
    let mut names = BTreeSet::new();
    let mut by_rule = BTreeSet::new();
    for command in &analysis.commands {
        if matches!(command.verdict, CommandVerdict::AllowedByRule(_))
            && let Some(name) = command.argv.first().and_then(|n| n.rsplit('/').next())
        {
            by_rule.insert(name.to_owned());
        }
        let words = command
            .argv
            .iter()
            .map(String::as_str)
            .chain(command.text.split_whitespace());
        for word in words {
            let word = word.trim_matches(|c: char| "'\"\\{}()$;|&<>`!".contains(c));
            if let Some(name) = word.rsplit('/').next()
                && !name.is_empty()
            {
                // Debian's egrep and fgrep are scripts that run grep.
                if matches!(name, "egrep" | "fgrep") {
                    names.insert("grep".to_owned());
                }
                names.insert(name.to_owned());
            }
        }
    }
    Analysed { names, by_rule }
}

/// Symlinks resolved in the longest prefix of `path` that exists.
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut head = normalise(path);
    loop {
        if let Ok(real) = head.canonicalize() {
            let mut out = real;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return out;
        }
        match (head.file_name().map(ToOwned::to_owned), head.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                head = parent.to_path_buf();
            }
            _ => return normalise(path),
        }
    }
}

fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

// ---- the trace -----------------------------------------------------------------------------

/// One syscall line of a per-process trace, split into its arguments and result.
struct Call<'a> {
    name: &'a str,
    args: Vec<String>,
    result: &'a str,
    line: &'a str,
}

/// Splits `name(args) = result`, unquoting string arguments (strace's C escapes).
fn parse_call(line: &str) -> Option<Call<'_>> {
    let open = line.find('(')?;
    let name = &line[..open];
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // strace pads the result to a column: `mkdir("d", 0777)          = 0`.
    let eq = line.rfind(" = ")?;
    let result = line[eq + 3..].trim();
    let close = line[..eq].trim_end().strip_suffix(')')?.len();
    let inner = &line[open + 1..close];
    let mut args = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => current.push('\n'),
                            Some('t') => current.push('\t'),
                            Some(d @ '0'..='7') => {
                                let mut value = d.to_digit(8).unwrap();
                                while let Some(&d) = chars.peek() {
                                    if d.is_digit(8) {
                                        value = value * 8 + d.to_digit(8).unwrap();
                                        chars.next();
                                    } else {
                                        break;
                                    }
                                }
                                current.push(char::from_u32(value).unwrap_or('?'));
                            }
                            Some('x') => {
                                let hex: String = chars.by_ref().take(2).collect();
                                let value = u32::from_str_radix(&hex, 16).unwrap_or(63);
                                current.push(char::from_u32(value).unwrap_or('?'));
                            }
                            Some(other) => current.push(other),
                            None => {}
                        },
                        other => current.push(other),
                    }
                }
            }
            '[' | '{' | '(' => {
                depth += 1;
                current.push(c);
            }
            ']' | '}' | ')' => {
                depth -= 1;
                current.push(c);
            }
            ',' if depth == 0 => {
                args.push(current.trim().to_owned());
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        args.push(current.trim().to_owned());
    }
    Some(Call {
        name,
        args,
        result,
        line,
    })
}

/// The path in `fd</path>` (strace -y), if any.
fn fd_path(text: &str) -> Option<PathBuf> {
    let start = text.find('<')?;
    let end = text.rfind('>')?;
    (end > start).then(|| PathBuf::from(&text[start + 1..end]))
}

/// What one process did, as far as the oracle cares.
#[derive(Default)]
struct Process {
    execs: Vec<(PathBuf, String)>,
    children: Vec<u32>,
    /// (path, what, line)
    writes: Vec<(PathBuf, String)>,
    /// (path, line, how many programs the process had run by then)
    reads: Vec<(PathBuf, String, usize)>,
    connects: Vec<String>,
}

const WRITE_FLAGS: &[&str] = &["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"];

/// Syscalls that change the file system, with the index of their first path argument and
/// whether it is preceded by a directory fd.
const MUTATIONS: &[(&str, usize, bool)] = &[
    ("unlink", 0, false),
    ("unlinkat", 1, true),
    ("rename", 0, false),
    ("renameat", 1, true),
    ("renameat2", 1, true),
    ("mkdir", 0, false),
    ("mkdirat", 1, true),
    ("rmdir", 0, false),
    ("symlink", 1, false),
    ("symlinkat", 2, true),
    ("link", 1, false),
    ("linkat", 3, true),
    ("truncate", 0, false),
    ("chmod", 0, false),
    ("fchmodat", 1, true),
    ("chown", 0, false),
    ("lchown", 0, false),
    ("fchownat", 1, true),
    ("mknod", 0, false),
    ("mknodat", 1, true),
    ("utimes", 0, false),
    ("utimensat", 1, true),
    ("setxattr", 0, false),
    ("lsetxattr", 0, false),
    ("removexattr", 0, false),
];

/// Syscalls on an fd that change its file.
const FD_MUTATIONS: &[&str] = &["ftruncate", "fchmod", "fchown", "fsetxattr", "fremovexattr"];

const TRACED: &str = "execve,execveat,clone,clone3,fork,vfork,open,openat,openat2,creat,\
unlink,unlinkat,rename,renameat,renameat2,mkdir,mkdirat,rmdir,symlink,symlinkat,link,linkat,\
truncate,ftruncate,chmod,fchmod,fchmodat,chown,fchown,lchown,fchownat,mknod,mknodat,utimes,\
utimensat,setxattr,lsetxattr,fsetxattr,removexattr,fremovexattr,connect";

fn parse_process(text: &str, start: &Path) -> Process {
    let mut process = Process::default();
    // A process starts where the run does (bash's `cd` shows in the next `AT_FDCWD<…>`).
    let mut cwd: Option<PathBuf> = Some(start.to_path_buf());
    for line in text.lines() {
        let Some(call) = parse_call(line) else {
            continue;
        };
        let ok = !call.result.starts_with('-') && !call.result.starts_with('?');
        let at = |dirfd: Option<&String>, path: &str, cwd: &Option<PathBuf>| -> PathBuf {
            // `utimensat(fd, NULL, …)` acts on the fd itself.
            if path == "NULL"
                && let Some(own) = dirfd.and_then(|d| fd_path(d))
            {
                return own;
            }
            if path.starts_with('/') {
                return PathBuf::from(path);
            }
            let base = dirfd
                .and_then(|d| fd_path(d))
                .or_else(|| cwd.clone())
                .unwrap_or_default();
            base.join(path)
        };
        if let Some(first) = call.args.first()
            && first.starts_with("AT_FDCWD<")
        {
            cwd = fd_path(first);
        }
        match call.name {
            "execve" | "execveat" if ok => {
                let index = usize::from(call.name == "execveat");
                if let Some(path) = call.args.get(index) {
                    let dirfd = (index == 1).then(|| call.args.first()).flatten();
                    process
                        .execs
                        .push((at(dirfd, path, &cwd), call.line.to_owned()));
                }
            }
            "clone" | "clone3" | "fork" | "vfork" if ok => {
                if let Ok(pid) = call.result.split_whitespace().next().unwrap_or("").parse() {
                    process.children.push(pid);
                }
            }
            "open" | "openat" | "openat2" | "creat" => {
                let (dirfd, path, flags) = match call.name {
                    "open" => (None, call.args.first(), call.args.get(1)),
                    "creat" => (None, call.args.first(), None),
                    _ => (call.args.first(), call.args.get(1), call.args.get(2)),
                };
                let Some(path) = path else { continue };
                let opened = if ok { fd_path(call.result) } else { None };
                let target = opened.unwrap_or_else(|| at(dirfd, path, &cwd));
                let writes = call.name == "creat"
                    || flags.is_some_and(|f| WRITE_FLAGS.iter().any(|w| f.contains(w)));
                // An attempt counts whatever its result, but a name that does not exist was
                // not read, and a folder missing for a write is no write.
                let absent = call.result.contains("ENOENT") || call.result.contains("ENOTDIR");
                if writes && !absent {
                    process.writes.push((target.clone(), call.line.to_owned()));
                }
                if !absent {
                    let ran = process.execs.len();
                    process.reads.push((target, call.line.to_owned(), ran));
                }
            }
            "connect" => {
                if call.line.contains("AF_INET") {
                    process.connects.push(call.line.to_owned());
                }
            }
            name if FD_MUTATIONS.contains(&name) && ok => {
                if let Some(path) = call.args.first().and_then(|fd| fd_path(fd)) {
                    process.writes.push((path, call.line.to_owned()));
                }
            }
            name => {
                let Some(&(_, index, has_dirfd)) = MUTATIONS.iter().find(|m| m.0 == name) else {
                    continue;
                };
                if !ok {
                    continue;
                }
                let dirfd = has_dirfd.then(|| call.args.get(index - 1)).flatten();
                if let Some(path) = call.args.get(index) {
                    process
                        .writes
                        .push((at(dirfd, path, &cwd), call.line.to_owned()));
                }
                // rename's second path is a write too.
                let second = match name {
                    "rename" => Some((None, 1)),
                    "renameat" | "renameat2" => Some((call.args.get(2), 3)),
                    _ => None,
                };
                if let Some((dirfd, index)) = second
                    && let Some(path) = call.args.get(index)
                {
                    process
                        .writes
                        .push((at(dirfd, path, &cwd), call.line.to_owned()));
                }
            }
        }
    }
    process
}

/// Programs whose children the oracle does not hold to the analysed names: a rule that
/// allows a runner allows what it runs (make's recipes). Their writes and the planted
/// programs still count.
const RUNNERS: &[&str] = &["make", "cargo"];

/// Why a run convicts the verdict, one line each (empty: nothing the verdict rules out).
fn judge(world: &World, analysed: &Analysed, procs: &HashMap<u32, Process>) -> Vec<String> {
    let names = &analysed.names;
    let mut findings = Vec::new();
    let children: BTreeSet<u32> = procs.values().flat_map(|p| p.children.clone()).collect();
    let roots: Vec<u32> = procs
        .keys()
        .copied()
        .filter(|pid| !children.contains(pid))
        .collect();
    // Walk from the root (strace's child, `timeout`), whose first child is the Bash run.
    // (pid, depth, below a runner, the program it runs until it runs another)
    let mut stack: Vec<(u32, usize, bool, String)> = roots
        .iter()
        .map(|&pid| (pid, 0, false, String::new()))
        .collect();
    let git_allowed = names.contains("git");
    let cargo_allowed = names.contains("cargo");
    while let Some((pid, depth, relaxed, inherited)) = stack.pop() {
        let Some(process) = procs.get(&pid) else {
            continue;
        };
        let mut relaxed_below = relaxed;
        for (n, (path, line)) in process.execs.iter().enumerate() {
            let launcher = n == 0
                && ((depth == 0 && path == Path::new(TIMEOUT))
                    || (depth == 1 && path == Path::new(BASH)));
            if launcher {
                continue;
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // What a runner built (`cargo test`'s test binaries) is not planted.
            let built = relaxed && path.starts_with(world.ws.join("target"));
            if path.starts_with(&world.root) && !built {
                findings.push(format!("ran a planted program {}: {line}", path.display()));
            } else if !relaxed && !names.contains(&name) {
                findings.push(format!(
                    "ran `{name}`, which is not among the analysed commands {names:?}: {line}"
                ));
            }
            if RUNNERS.contains(&name.as_str()) {
                relaxed_below = true;
            }
        }
        for (path, line) in &process.writes {
            let raw = path.to_string_lossy();
            if raw.starts_with("pipe:") || raw.starts_with("socket:") {
                continue;
            }
            let path = normalise(path);
            let harmless = path == Path::new("/dev/null")
                || path.starts_with("/dev/tty")
                || path.starts_with("/dev/pts")
                || path.starts_with(&world.tmp)
                || path.starts_with(&world.traces)
                || (git_allowed
                    && (path == world.ws.join(".git/index.lock")
                        || path == world.ws.join(".git/index")))
                // What an allowed `cargo test` builds (ci-default lets it write target/).
                || (cargo_allowed
                    && (path.starts_with(world.ws.join("target"))
                        || path == world.ws.join("Cargo.lock")
                        || path.starts_with(world.home.join(".cargo"))))
                // A runner an allow rule lets run writes the workspace as its options say
                // (`cargo test -- --logfile=x`), never where the write guardrails forbid.
                || (relaxed
                    && path.starts_with(&world.ws)
                    && write_guardrail(&path, Some(&world.home)).is_none());
            if !harmless {
                findings.push(format!("wrote {}: {line}", path.display()));
            }
        }
        let program = |ran: usize| {
            ran.checked_sub(1)
                .and_then(|n| process.execs.get(n))
                .and_then(|(path, _)| path.file_name())
                .map_or_else(|| inherited.clone(), |n| n.to_string_lossy().into_owned())
        };
        for (path, line, ran) in &process.reads {
            let real = canonical_prefix(path);
            // The Read deny rules cover `.env` and what is below `secrets/`; listing the folder
            // itself shows names, not contents.
            let denied = real == world.ws.join(".env")
                || (real.starts_with(world.ws.join("secrets")) && !real.is_dir());
            // A process's `/proc/self/…` is its own (the runtime reads its maps and cgroup);
            // the kernel names it by pid, which the guardrail reads as another process's.
            // strace names the file by pid; the name the process opened is the line's first
            // quoted string.
            let opened = line.split('"').nth(1).map(Path::new);
            // Its `cwd` and `root` lead to places, judged where they lead (`real`).
            let own = opened.filter(|name| {
                let mut parts = name.components().skip(2);
                let own_process =
                    name.starts_with("/proc/self") || name.starts_with("/proc/thread-self");
                let place = matches!(
                    parts.nth(1).and_then(|part| part.as_os_str().to_str()),
                    Some("cwd" | "root")
                );
                own_process && !place
            });
            let guarded = match own {
                Some(name) => read_guardrail(name).is_some(),
                None => {
                    read_guardrail(&real).is_some() || read_guardrail(&normalise(path)).is_some()
                }
            };
            // An allow rule covers the paths its own command reads, outside too (`ls:*`
            // allows `ls ../..`); a command proven read-only stays in the workspace.
            let outside =
                real.starts_with(&world.outside) && !analysed.by_rule.contains(&program(*ran));
            if denied || guarded || outside {
                findings.push(format!("opened {}: {line}", real.display()));
            }
        }
        for line in &process.connects {
            findings.push(format!("connected: {line}"));
        }
        let last = program(process.execs.len());
        for &child in &process.children {
            stack.push((child, depth + 1, relaxed_below, last.clone()));
        }
    }
    findings
}

/// Runs `script` in the workspace under strace; the processes it made, by pid.
fn traced_run(world: &World, script: &str) -> HashMap<u32, Process> {
    let _ = std::fs::remove_dir_all(&world.traces);
    std::fs::create_dir_all(&world.traces).unwrap();
    let prefix = world.traces.join("t");
    let _ = Command::new("strace")
        .args(["-ff", "-qq", "-y", "-s", "4096", "-e", "signal=none", "-e"])
        .arg(format!("trace={TRACED}"))
        .arg("-o")
        .arg(&prefix)
        .args([
            "--",
            TIMEOUT,
            "-s",
            "KILL",
            "10",
            BASH,
            "--norc",
            "--noprofile",
            "-c",
        ])
        .arg(script)
        .current_dir(&world.ws)
        .env_clear()
        .envs(world.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let mut procs = HashMap::new();
    for entry in std::fs::read_dir(&world.traces).unwrap() {
        let path = entry.unwrap().path();
        let Some(pid) = path
            .extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u32>().ok())
        else {
            continue;
        };
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        procs.insert(pid, parse_process(&text, &world.ws));
    }
    procs
}

/// The findings for `script` if the gate allows it; `None` when it does not.
fn check_one(world: &World, script: &str) -> Option<Vec<String>> {
    if !gate_allows(world, &[script.to_owned()])[0] {
        return None;
    }
    let findings = judge(world, &analysed(world, script), &traced_run(world, script));
    world.restore();
    Some(findings)
}

fn strace_or_skip() -> bool {
    need_program("strace", "Debian: apt-get install strace").is_some()
}

#[test]
fn allowed_commands_have_no_effect_the_verdict_rules_out() {
    if !strace_or_skip() {
        return;
    }
    let cases = env_number("TOLLGATE_EFFECT_ORACLE_CASES", 400);
    let seed = env_number("TOLLGATE_EFFECT_ORACLE_SEED", 1);
    let world = World::new();
    let corpus = seeds();
    let mut rng = Rng(seed);
    let generated: Vec<(u64, Case, String)> = (0..cases)
        .filter_map(|i| {
            let case = generate(&mut rng, &corpus, &world.ws);
            case.full().map(|script| (i, case, script))
        })
        .collect();
    let scripts: Vec<String> = generated.iter().map(|(_, _, s)| s.clone()).collect();
    let allowed = gate_allows(&world, &scripts);
    let strict = std::env::var("TOLLGATE_EFFECT_ORACLE_STRICT").as_deref() == Ok("1");
    let mut ran = 0;
    let mut failures = Vec::new();
    let mut known = Vec::new();
    for ((i, case, script), allowed) in generated.iter().zip(allowed) {
        if !allowed {
            continue;
        }
        ran += 1;
        let analysis = analysed(&world, script);
        let findings = judge(&world, &analysis, &traced_run(&world, script));
        if findings.is_empty() {
            continue;
        }
        world.restore();
        let shrunk = case
            .smaller()
            .into_iter()
            .find(|form| check_one(&world, form).is_some_and(|f| !f.is_empty()));
        let open: Vec<Class> = case
            .classes()
            .into_iter()
            .filter(|c| KNOWN_OPEN.contains(c))
            .collect();
        let list = if open.is_empty() || strict {
            &mut failures
        } else {
            &mut known
        };
        list.push(format!(
            "case {i} {open:?}: {script:?}\n  smallest failing form: {}\n  analysed commands: {:?}\n  {}",
            shrunk
                .as_deref()
                .map_or("(none smaller)".to_owned(), |s| format!("{s:?}")),
            analysis.names,
            findings.join("\n  ")
        ));
    }
    println!(
        "effect oracle: {} commands generated (seed {seed}, {} corpus seeds), the gate allowed {ran}, {} had an effect the verdict rules out, {} more in a class still open elsewhere ({KNOWN_OPEN:?})",
        generated.len(),
        corpus.len(),
        failures.len(),
        known.len()
    );
    if !known.is_empty() {
        // Straight to stderr: a passing test's captured output would hide them.
        let _ = writeln!(
            std::io::stderr(),
            "effect oracle: known open, not failed (TOLLGATE_EFFECT_ORACLE_STRICT=1 fails them):\n{}",
            known.join("\n")
        );
    }
    assert!(
        failures.is_empty(),
        "allowed commands had effects their verdict rules out (TOLLGATE_EFFECT_ORACLE_SEED={seed} TOLLGATE_EFFECT_ORACLE_CASES={cases}):\n{}",
        failures.join("\n")
    );
    assert!(
        ran * 10 > generated.len(),
        "the gate allowed only {ran} of {} commands: the generator is broken",
        generated.len()
    );
}

/// The oracle must be able to fail: each of these runs a planted program, writes, or reads
/// a secret, and the trace must say so.
#[test]
fn the_effect_oracle_sees_each_effect() {
    if !strace_or_skip() {
        return;
    }
    let world = World::new();
    let cases: &[(&str, &[&str], &str)] = &[
        ("PATH=tools; ls", &["ls"], "ran a planted program"),
        (
            "git grep -Otools/pager hello",
            &["git"],
            "ran a planted program",
        ),
        ("echo x > y", &["echo"], "wrote"),
        ("touch y", &["touch"], "wrote"),
        ("mkdir d", &["mkdir"], "wrote"),
        ("mv notes.txt n2", &["mv"], "wrote"),
        ("cat .env", &["cat"], "opened"),
        ("cat src/p1/environ", &["cat"], "opened"),
        ("cat src/out/secret.txt", &["cat"], "opened"),
        ("cat README.md | sort", &["cat"], "not among the analysed"),
        // Through the committed links and the command's own `/proc/self`.
        ("echo x > src/dang", &["echo"], "wrote"),
        ("echo ../src/evil > src/gc", &["echo"], "wrote"),
        ("cat /proc/self/cwd/.env", &["cat"], "opened"),
    ];
    for (script, names, expected) in cases {
        let findings = judge(&world, &Analysed::of(names), &traced_run(&world, script));
        world.restore();
        assert!(
            findings.iter().any(|f| f.contains(expected)),
            "{script:?}: expected a finding `{expected}`, got {findings:?}"
        );
    }
    // And a command that only reads the workspace is clean.
    let findings = judge(
        &world,
        &Analysed::of(&["cat", "grep"]),
        &traced_run(&world, "cat README.md | grep hello"),
    );
    assert!(findings.is_empty(), "{findings:?}");
}
