//! Hazard tables for the runners and builders that allow rules name (`npm test:*`,
//! `cargo test:*`, `go test:*`, `pytest:*`, `make:*`, …): options that point the runner at other
//! code, config, shells or output outside the workspace. A prefix rule allows more arguments,
//! not these; a rule that spells the option out does. One definition a runner (its names,
//! option syntax, hazards and example commands under a rule), the option reader, and the
//! table `docs/bash.md` shows, rendered from the definitions.

use std::fmt::Write as _;

use super::BashEnv;
use super::markdown::{cell, code_list};
use super::paths::{Cwds, inside_workspace, locate};
use super::pattern::base;
use super::word::Word;

/// How a runner spells its options.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// `--long[=v]`, `-s`, clusters `-abc`, `-Cdir`; long names exact (clap, most CLIs).
    Gnu,
    /// As Gnu, and any unambiguous prefix of a long name is accepted (getopt_long, argparse,
    /// nopt): `--pre` is `--prefix`.
    GnuAbbrev,
    /// Go's flag package: `-name` or `--name`, `=value` or the next word; no clusters.
    Go,
}

/// What makes an option a hazard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A flag that is a hazard by itself.
    Flag,
    /// An option whose every value is a hazard.
    Always,
    /// An option whose value is a path: a hazard outside the workspace or when not known.
    PathOutside,
    /// An option (`-Dkey=value`, make's `NAME=value`) whose value may name a program: only a
    /// number or a boolean word is harmless.
    Simple,
}

struct Hazard {
    names: &'static [&'static str],
    value: Value,
    why: &'static str,
}

const fn h(names: &'static [&'static str], value: Value, why: &'static str) -> Hazard {
    Hazard { names, value, why }
}

struct Runner {
    /// The names it runs under.
    names: &'static [&'static str],
    /// The modules that start it as `python -m MODULE`.
    modules: &'static [&'static str],
    syntax: Syntax,
    /// Short options that take a value, so that a cluster (`-kC dir`) is read as the runner
    /// reads it; a hazard letter is found anywhere before such a letter.
    short_valued: &'static str,
    /// Long options of the runner that are not abbreviations of a hazard although they are
    /// prefixes of one (`pytest --co`).
    exact: &'static [&'static str],
    /// After this word the arguments belong to another program (`cargo test -- …`).
    end: &'static [&'static str],
    hazards: &'static [Hazard],
    /// Hazards after `end` (libtest's `--logfile`).
    after_end: &'static [Hazard],
    /// Option prefixes that set any setting of the runner (pnpm's `--config.KEY=VALUE`).
    any_setting: &'static [&'static str],
    /// `NAME=value` operands override the build file's variables (make).
    variables: bool,
    /// `+NAME` as its first word selects another toolchain (rustup's `cargo +nightly`).
    toolchain: bool,
    /// An allow rule of the kind users write for it, for the examples below.
    rule: &'static str,
    /// Commands the rule allows.
    allowed: &'static [&'static str],
    /// Commands that ask although the rule matches them.
    refused: &'static [&'static str],
}

use Value::{Always, Flag, PathOutside, Simple};

const CODE: &str = "it makes the runner load code or configuration from elsewhere";
const SHELL: &str = "it replaces the shell or interpreter the runner starts";
const OUTSIDE: &str = "it points the runner at files outside the workspace";
const WRITES: &str = "it makes the runner write files its build file names";

const NODE_PM: &[Hazard] = &[
    h(&["--prefix", "-C", "--dir", "--cwd"], Always, OUTSIDE),
    h(&["--script-shell", "--shell"], Always, SHELL),
    h(
        &["--node-options", "--node-gyp", "--node-path", "--npm-path"],
        Always,
        SHELL,
    ),
    h(
        &[
            "--userconfig",
            "--globalconfig",
            "--use-yarnrc",
            "--rc-filename",
            "--init-module",
            "--onload-script",
            "--config",
        ],
        Always,
        CODE,
    ),
    h(
        &["--editor", "--browser", "--viewer", "--git"],
        Always,
        SHELL,
    ),
    h(
        &[
            "--cache",
            "--cache-dir",
            "--cache-folder",
            "--global-folder",
            "--modules-folder",
            "--store-dir",
            "--virtual-store-dir",
            "--global-dir",
            "--tmp",
        ],
        PathOutside,
        OUTSIDE,
    ),
    h(
        &["--workspace", "-w", "--filter", "-F", "--filter-prod"],
        PathOutside,
        OUTSIDE,
    ),
    h(&["--global", "-g"], Flag, OUTSIDE),
    h(&["--location"], Always, OUTSIDE),
    h(
        &["--registry", "--call", "-c", "--package", "-p"],
        Always,
        CODE,
    ),
];

const NODE: Runner = Runner {
    names: &["npm", "pnpm", "yarn", "npx", "pnpx", "yarnpkg", "corepack"],
    modules: &[],
    syntax: Syntax::GnuAbbrev,
    short_valued: "wCc",
    exact: &[
        "--ci",
        "--color",
        "--cpu",
        "--save",
        "--save-dev",
        "--silent",
        "--if-present",
        "--include",
        "--ignore-scripts",
    ],
    end: &["--"],
    hazards: NODE_PM,
    after_end: &[],
    any_setting: &["--config."],
    variables: false,
    toolchain: false,
    rule: "npm test:*",
    allowed: &["npm test --silent", "npm test -w packages/a"],
    refused: &[
        "npm test --prefix /x",
        "npm test --pref /x",
        "pnpm test --config.script-shell=/x",
    ],
};

const CARGO: Runner = Runner {
    names: &["cargo"],
    modules: &[],
    syntax: Syntax::Gnu,
    short_valued: "pjFZC",
    exact: &[],
    end: &["--"],
    hazards: &[
        h(&["--config", "-Z", "-C"], Always, CODE),
        h(
            &[
                "--manifest-path",
                "--target-dir",
                "--artifact-dir",
                "--out-dir",
                "--lockfile-path",
                "--root",
                "--path",
            ],
            PathOutside,
            OUTSIDE,
        ),
    ],
    after_end: &[h(&["--logfile"], PathOutside, OUTSIDE)],
    any_setting: &[],
    variables: false,
    toolchain: true,
    rule: "cargo test:*",
    allowed: &["cargo test --release", "cargo test -- --nocapture"],
    refused: &[
        "cargo test --config x",
        "cargo test --target-dir /tmp/t",
        "cargo test -- --logfile /tmp/l",
    ],
};

const GO: Runner = Runner {
    names: &["go"],
    modules: &[],
    syntax: Syntax::Go,
    short_valued: "",
    exact: &[],
    end: &["-args", "--args"],
    hazards: &[
        h(
            &[
                "exec", "toolexec", "vettool", "C", "overlay", "modfile", "pgo", "compiler",
            ],
            Always,
            CODE,
        ),
        h(
            &["ldflags", "gccgoflags", "asmflags", "gcflags"],
            Simple,
            CODE,
        ),
        h(
            &[
                "o",
                "pkgdir",
                "coverprofile",
                "cpuprofile",
                "memprofile",
                "blockprofile",
                "mutexprofile",
                "trace",
                "outputdir",
                "fuzzcachedir",
                "test.coverprofile",
            ],
            PathOutside,
            OUTSIDE,
        ),
    ],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "go test:*",
    allowed: &["go test ./...", "go test -ldflags=-s ./..."],
    refused: &["go test -exec=x ./...", "go test -o /tmp/t.test"],
};

const PYTEST: Runner = Runner {
    names: &["pytest", "py.test"],
    modules: &["pytest"],
    syntax: Syntax::GnuAbbrev,
    short_valued: "pcoWmkr",
    exact: &["--co", "--cov", "--capture"],
    end: &[],
    hazards: &[
        h(&["-p"], Simple, CODE),
        h(&["--pyargs"], Flag, CODE),
        h(
            &[
                "-c",
                "--config-file",
                "--inifile",
                "-o",
                "--override-ini",
                "--pdbcls",
                "--confcutdir",
            ],
            Always,
            CODE,
        ),
        h(
            &[
                "--rootdir",
                "--basetemp",
                "--junitxml",
                "--junit-xml",
                "--junit-prefix",
                "--log-file",
                "--resultlog",
                "--result-log",
                "--debug",
                "--cache-dir",
                "--html",
                "--cov-report",
            ],
            PathOutside,
            OUTSIDE,
        ),
    ],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "pytest:*",
    allowed: &["pytest -q", "pytest -p no:cacheprovider"],
    refused: &["pytest -p evil", "pytest --rootd=/x"],
};

const MAKE: Runner = Runner {
    names: &["make", "gmake"],
    modules: &[],
    syntax: Syntax::GnuAbbrev,
    short_valued: "CfIjloWE",
    exact: &[],
    end: &[],
    hazards: &[
        h(
            &[
                "-f",
                "--file",
                "--makefile",
                "-C",
                "--directory",
                "-I",
                "--include-dir",
                "-E",
                "--eval",
            ],
            Always,
            CODE,
        ),
        // Touches the targets' files instead of running their recipes: writes files
        // that only the build file names.
        h(&["-t", "--touch"], Flag, WRITES),
        h(
            &[
                "-o",
                "--old-file",
                "--assume-old",
                "-W",
                "--what-if",
                "--new-file",
                "--assume-new",
            ],
            Always,
            CODE,
        ),
    ],
    after_end: &[],
    any_setting: &[],
    variables: true,
    toolchain: false,
    rule: "make:*",
    allowed: &["make -j 4 test", "make test V=1"],
    refused: &["make -f x.mk", "make test CC=/x/cc", "make test --tou"],
};

const GRADLE: Runner = Runner {
    names: &["gradle", "gradlew"],
    modules: &[],
    syntax: Syntax::Gnu,
    short_valued: "IcbpgDPx",
    exact: &[],
    end: &[],
    hazards: &[
        h(
            &[
                "-I",
                "--init-script",
                "-c",
                "--settings-file",
                "-b",
                "--build-file",
                "-p",
                "--project-dir",
                "--include-build",
                "-g",
                "--gradle-user-home",
                "--project-cache-dir",
            ],
            Always,
            CODE,
        ),
        h(
            &["-D", "--system-prop", "-P", "--project-prop"],
            Simple,
            CODE,
        ),
    ],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "gradle test:*",
    allowed: &["gradle test -Dci=true"],
    refused: &["gradle test -I /x/init.gradle"],
};

const MAVEN: Runner = Runner {
    names: &["mvn", "mvnw"],
    modules: &[],
    syntax: Syntax::Gnu,
    short_valued: "sftDl",
    exact: &[],
    end: &[],
    hazards: &[
        h(
            &[
                "-s",
                "--settings",
                "-gs",
                "--global-settings",
                "-f",
                "--file",
                "-t",
                "--toolchains",
                "-gt",
                "--global-toolchains",
                "-l",
                "--log-file",
            ],
            Always,
            CODE,
        ),
        h(&["-D", "--define"], Simple, CODE),
    ],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "mvn test:*",
    allowed: &["mvn test -DskipTests=true"],
    refused: &["mvn test -s /x/settings.xml"],
};

const TOX: Runner = Runner {
    names: &["tox"],
    modules: &["tox"],
    syntax: Syntax::GnuAbbrev,
    short_valued: "cxe",
    exact: &[],
    end: &["--"],
    hazards: &[h(
        &[
            "-c",
            "--conf",
            "-x",
            "--override",
            "--installpkg",
            "--force-dep",
            "--root",
            "--workdir",
            "--discover",
        ],
        Always,
        CODE,
    )],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "tox:*",
    allowed: &["tox -e py312"],
    refused: &["tox -c /x/tox.ini"],
};

const RUBY: Runner = Runner {
    names: &["rake", "rspec", "bundle"],
    modules: &[],
    syntax: Syntax::GnuAbbrev,
    short_valued: "rIfRCeEpgO",
    exact: &[],
    end: &["--"],
    hazards: &[
        h(
            &[
                "-r",
                "--require",
                "-I",
                "--libdir",
                "-f",
                "--rakefile",
                "-R",
                "--rakelibdir",
                "-C",
                "--directory",
                "-e",
                "--execute",
                "-E",
                "--execute-continue",
                "-p",
                "--execute-print",
                "-O",
                "--options",
                "--gemfile",
            ],
            Always,
            CODE,
        ),
        h(&["-g", "--system"], Flag, CODE),
    ],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "rake test:*",
    allowed: &["rake test"],
    refused: &["rake test -r /x/evil.rb"],
};

const JS_TEST: Runner = Runner {
    names: &["jest", "vitest", "mocha"],
    modules: &[],
    syntax: Syntax::Gnu,
    short_valued: "cr",
    exact: &[],
    end: &["--"],
    hazards: &[h(
        &[
            "-c",
            "--config",
            "--rootDir",
            "--root",
            "--setupFiles",
            "--setupFilesAfterEnv",
            "--globalSetup",
            "--globalTeardown",
            "--testRunner",
            "--transform",
            "--reporters",
            "--resolver",
            "--require",
            "-r",
            "--loader",
            "--import",
            "--environment",
            "--testEnvironment",
            "--dir",
        ],
        Always,
        CODE,
    )],
    after_end: &[],
    any_setting: &[],
    variables: false,
    toolchain: false,
    rule: "jest:*",
    allowed: &["jest src"],
    refused: &["jest --config /x/jest.config.js"],
};

/// Every runner, in the order the docs list them.
static RUNNERS: &[&Runner] = &[
    &NODE, &CARGO, &GO, &PYTEST, &MAKE, &GRADLE, &MAVEN, &TOX, &RUBY, &JS_TEST,
];

/// The runner `argv` starts and where its own arguments begin.
fn runner(argv: &[Word]) -> Option<(&'static Runner, usize)> {
    let name = base(argv.first()?.fixed()?);
    if let Some(runner) = RUNNERS.iter().find(|r| r.names.contains(&name)) {
        return Some((runner, 1));
    }
    if !name.starts_with("python") {
        return None;
    }
    let m = argv.iter().position(|w| w.fixed() == Some("-m"))?;
    let module = argv.get(m + 1)?.fixed()?;
    let runner = RUNNERS.iter().find(|r| r.modules.contains(&module))?;
    Some((runner, m + 2))
}

/// The Markdown table of every runner's hazards, for `docs/bash.md`.
pub fn runner_hazards_table() -> String {
    let mut table = String::from(
        "| runner | long options | refused after a prefix rule | allowed · refused under the rule |\n|---|---|---|---|\n",
    );
    for runner in RUNNERS {
        let mut names = code_list(runner.names, " ");
        for module in runner.modules {
            let _ = write!(names, " `python -m {module}`");
        }
        let syntax = match runner.syntax {
            Syntax::Gnu => "full spellings",
            Syntax::GnuAbbrev => "any unambiguous prefix",
            Syntax::Go => "`-name` or `--name`, full spellings",
        };
        let _ = writeln!(
            table,
            "| {} | {syntax} | {} | {} |",
            cell(&names),
            cell(&refused_text(runner)),
            cell(&format!(
                "`Bash({})`: {} · {}",
                runner.rule,
                code_list(runner.allowed, ", "),
                code_list(runner.refused, ", ")
            )),
        );
    }
    table
}

/// What a prefix rule does not allow of `runner`, in words.
fn refused_text(runner: &Runner) -> String {
    let mut parts = Vec::new();
    if runner.toolchain {
        parts.push("`+toolchain`".to_owned());
    }
    parts.extend(hazards_text(runner, runner.hazards));
    if !runner.after_end.is_empty() {
        let after = hazards_text(runner, runner.after_end).join("; ");
        parts.push(format!("after {}: {after}", code_list(runner.end, " or ")));
    }
    if !runner.any_setting.is_empty() {
        let settings: Vec<String> = runner.any_setting.iter().map(|p| format!("{p}…")).collect();
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        parts.push(code_list(&settings, ", "));
    }
    if runner.variables {
        parts.push("`NAME=value` with a value that may name a program".to_owned());
    }
    parts.join("; ")
}

/// A hazard table in words, its options grouped by what makes them hazards.
fn hazards_text(runner: &Runner, hazards: &[Hazard]) -> Vec<String> {
    // Go's table holds bare names, which its flag package takes after `-` or `--`.
    let dash = if runner.syntax == Syntax::Go { "-" } else { "" };
    let spelled: Vec<(Value, String)> = hazards
        .iter()
        .flat_map(|hz| hz.names.iter().map(|n| (hz.value, format!("{dash}{n}"))))
        .collect();
    let names = |wanted: &[Value]| -> Vec<&str> {
        spelled
            .iter()
            .filter(|(value, _)| wanted.contains(value))
            .map(|(_, name)| name.as_str())
            .collect()
    };
    let mut parts = Vec::new();
    let always = names(&[Always, Flag]);
    if !always.is_empty() {
        parts.push(code_list(&always, ", "));
    }
    let simple = names(&[Simple]);
    if !simple.is_empty() {
        parts.push(format!(
            "{} with a value that may name a program",
            code_list(&simple, ", ")
        ));
    }
    let outside = names(&[PathOutside]);
    if !outside.is_empty() {
        parts.push(format!(
            "{} outside the workspace",
            code_list(&outside, ", ")
        ));
    }
    parts
}

/// Whether `argv` (a command report's resolved words) starts a runner of these tables.
pub(crate) fn is_runner(argv: &[String]) -> bool {
    let words: Vec<Word> = argv.iter().map(|word| Word::literal(word)).collect();
    runner(&words).is_some()
}

/// The first hazardous option among `argv[covered..]` (words before `covered` are spelled out
/// by the allow rule that matched), or None.
pub(crate) fn hazard(argv: &[Word], covered: usize, env: &BashEnv, cwds: &Cwds) -> Option<String> {
    let (runner, start) = runner(argv)?;
    let name = base(argv.first()?.fixed()?);
    let from = covered.max(start);
    if runner.toolchain
        && let Some(v) = argv
            .get(1)
            .and_then(Word::fixed)
            .filter(|v| v.starts_with('+'))
        && from <= 1
    {
        return Some(format!("`cargo {v}` selects another toolchain"));
    }
    let mut table = runner.hazards;
    let mut i = start;
    while let Some(w) = argv.get(i) {
        let checked = i >= from;
        i += 1;
        let Some(v) = w.fixed() else {
            if checked && w.may_be_flag && !table.is_empty() {
                return Some(format!(
                    "`{}` may expand to an option of `{name}` that points it elsewhere",
                    w.raw
                ));
            }
            continue;
        };
        if runner.end.contains(&v) {
            table = runner.after_end;
            continue;
        }
        if runner.variables && !v.starts_with('-') {
            if let Some((var, value)) = v.split_once('=')
                && checked
                && !simple(value)
            {
                return Some(format!(
                    "`{name} {var}=…` overrides a variable the build file may run as a program"
                ));
            }
            continue;
        }
        if !v.starts_with('-') || v == "-" {
            continue;
        }
        let found = match_option(runner, table, v, argv.get(i));
        if let Some((hazard, value, consumed)) = found {
            i += consumed;
            if !checked {
                continue;
            }
            let bad = match hazard.value {
                Flag | Always => true,
                Simple => !value.is_some_and(|val| val.fixed().is_some_and(simple_setting)),
                PathOutside => !value.is_some_and(|val| stays_inside(&val, env, cwds)),
            };
            if bad {
                return Some(format!("`{name} {v}`: {}", hazard.why));
            }
        } else if checked && runner.any_setting.iter().any(|p| v.starts_with(p)) {
            return Some(format!("`{name} {v}` sets any setting of the runner"));
        }
    }
    None
}

/// The values of the runner's path options (`--logfile`, `--target-dir`, `-coverprofile`,
/// `--junitxml`…) in `argv`: the runner writes there, so even inside the workspace each is
/// held to the write guardrails (`cargo test -- --logfile=.git/config`).
pub(crate) fn path_values(argv: &[Word]) -> Vec<Word> {
    let Some((runner, start)) = runner(argv) else {
        return Vec::new();
    };
    let mut table = runner.hazards;
    let mut values = Vec::new();
    let mut i = start;
    while let Some(v) = argv.get(i).and_then(Word::fixed) {
        i += 1;
        if runner.end.contains(&v) {
            table = runner.after_end;
            continue;
        }
        if !v.starts_with('-') || v == "-" {
            continue;
        }
        if let Some((hazard, value, consumed)) = match_option(runner, table, v, argv.get(i)) {
            i += consumed;
            if hazard.value == PathOutside {
                values.extend(value);
            }
        }
    }
    values
}

/// Finds the hazard `v` spells, with its value and how many further words it consumed.
fn match_option(
    runner: &Runner,
    table: &'static [Hazard],
    v: &str,
    next: Option<&Word>,
) -> Option<(&'static Hazard, Option<Word>, usize)> {
    let takes_value = |hz: &Hazard| hz.value != Flag;
    if runner.syntax == Syntax::Go || v.starts_with("--") {
        let body = if runner.syntax == Syntax::Go {
            v.trim_start_matches('-')
        } else {
            v
        };
        let (opt, inline) = match body.split_once('=') {
            Some((o, val)) => (o, Some(Word::literal(val))),
            None => (body, None),
        };
        let abbreviates = |full: &str| {
            runner.syntax == Syntax::GnuAbbrev
                && opt.len() > 2
                && full.starts_with("--")
                && full.starts_with(opt)
                && !runner.exact.contains(&opt)
        };
        let hazard = table
            .iter()
            .find(|hz| hz.names.iter().any(|n| *n == opt || abbreviates(n)))?;
        return Some(match inline {
            Some(val) => (hazard, Some(val), 0),
            None if takes_value(hazard) => (hazard, next.cloned(), 1),
            None => (hazard, None, 0),
        });
    }
    // A cluster of short options: the first letter that takes a value ends it.
    let letters = &v[1..];
    for (j, c) in letters.char_indices() {
        let rest = &letters[j + c.len_utf8()..];
        let is_short = |n: &&str| n.len() == 2 && n.starts_with('-') && n.ends_with(c);
        if let Some(hazard) = table.iter().find(|hz| hz.names.iter().any(is_short)) {
            return Some(if rest.is_empty() {
                (
                    hazard,
                    next.cloned(),
                    usize::from(takes_value(hazard) && next.is_some()),
                )
            } else {
                (hazard, Some(Word::literal(rest.trim_start_matches('='))), 0)
            });
        }
        if runner.short_valued.contains(c) {
            return None;
        }
    }
    // Multi-letter single-dash names (`mvn -gs`).
    table
        .iter()
        .find(|hz| hz.names.contains(&v))
        .map(|hz| (hz, next.cloned(), 1))
}

/// `-Dkey=value`, `-p name`, `-ldflags=…`: harmless only when it cannot name a program or a
/// file: `-p no:plugin` (disabling a plugin), numbers and booleans, go's `-s -w -X k=v`.
fn simple_setting(setting: &str) -> bool {
    if let Some(plugin) = setting.strip_prefix("no:") {
        return !plugin.is_empty();
    }
    let value = setting.split_once('=').map_or(setting, |(_, v)| v);
    if simple(value) {
        return true;
    }
    let mut words = setting.split_whitespace();
    let mut ok = true;
    while let Some(word) = words.next() {
        ok &= match word {
            "-s" | "-w" | "-trimpath" | "-N" | "-l" => true,
            "-X" => words.next().is_some_and(|kv| kv.contains('=')),
            kv if kv.starts_with("-X=") || kv.starts_with("all=-") => true,
            _ => false,
        };
    }
    ok
}

fn simple(value: &str) -> bool {
    (!value.is_empty() && value.chars().all(|c| c.is_ascii_digit() || c == '.'))
        || matches!(
            value.to_ascii_lowercase().as_str(),
            "" | "true" | "false" | "yes" | "no" | "on" | "off"
        )
}

fn stays_inside(word: &Word, env: &BashEnv, cwds: &Cwds) -> bool {
    // `--cov-report=xml:PATH`: the path follows a format name; pnpm's `--filter {../x}...`
    // wraps a folder in selector syntax (`!`, `^...`, `{…}`, `...`).
    let word = match word.fixed() {
        Some(v) => {
            let v = v.split_once(':').map_or(v, |(_, path)| path);
            let v = v.trim_start_matches('!');
            let v = v
                .strip_prefix("^...")
                .or_else(|| v.strip_prefix("..."))
                .unwrap_or(v);
            let v = v.strip_suffix("...").unwrap_or(v);
            let v = v
                .strip_prefix('{')
                .and_then(|v| v.strip_suffix('}'))
                .unwrap_or(v);
            Word::literal(if v.is_empty() { "." } else { v })
        }
        None => word.clone(),
    };
    locate(&word, env, cwds).is_ok_and(|paths| paths.iter().all(|p| inside_workspace(p, env)))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn hazard_of(line: &str, covered: usize) -> Option<String> {
        let roots = [PathBuf::from("/ws")];
        let env = BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: None,
            resolve: &tollgate_base::resolve_without_disk,
            list_dir: &|_| Some(Vec::new()),
            links_below: &|_| Ok(Vec::new()),
        };
        let argv: Vec<Word> = line.split_whitespace().map(Word::literal).collect();
        hazard(&argv, covered, &env, &Cwds::new(env.cwd))
    }

    /// Each definition's own examples under its rule: the allowed commands are allowed, the
    /// refused ones ask; each is a command of the runner it stands under.
    #[test]
    fn every_runner_allows_and_refuses_what_its_definition_says() {
        use crate::{BashRules, BashVerdict, CommandPattern, evaluate_in_test_workspace};
        for runner in RUNNERS {
            let rules = BashRules {
                allow: vec![(CommandPattern::parse(runner.rule).unwrap(), 1)],
                ask: vec![],
                deny: vec![],
            };
            for command in runner.allowed.iter().chain(runner.refused) {
                let argv: Vec<Word> = command.split_whitespace().map(Word::literal).collect();
                assert!(
                    super::runner(&argv).is_some_and(|(r, _)| r.names == runner.names),
                    "`{command}` is not a command of {:?}",
                    runner.names
                );
            }
            for command in runner.allowed {
                let verdict = evaluate_in_test_workspace(command, &rules).verdict;
                assert_eq!(
                    verdict,
                    BashVerdict::Allow,
                    "`{command}` under {}",
                    runner.rule
                );
            }
            for command in runner.refused {
                let verdict = evaluate_in_test_workspace(command, &rules).verdict;
                assert!(
                    matches!(verdict, BashVerdict::Ask { .. }),
                    "`{command}` under {}: {verdict:?}",
                    runner.rule
                );
            }
        }
    }

    #[test]
    fn each_name_has_one_runner() {
        let mut names: Vec<&str> = RUNNERS
            .iter()
            .flat_map(|r| r.names.iter().copied())
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a name stands under two runners");
    }

    #[test]
    fn hazard_table() {
        let cases = [
            ("npm test --prefix /x", 2, true),
            ("npm test --prefix=/x", 2, true),
            ("npm test --pref /x", 2, true),
            ("npm test -C/x", 2, true),
            ("npm test -sC /x", 2, true),
            ("pnpm test --config.script-shell=/x", 2, true),
            ("pnpm test --dir /x", 2, true),
            ("pnpm test --filter {/x}", 2, true),
            ("pnpm test --filter=../x...", 2, true),
            ("pnpm test --filter web", 2, false),
            ("npm test -w packages/a", 2, false),
            ("cargo test --target-dir ./target/ci", 2, false),
            ("npm test --silent", 2, false),
            ("npm test -- --prefix", 2, false),
            ("npx --package=evil jest", 1, true),
            ("npx -c evil", 1, true),
            ("cargo +nightly test", 1, true),
            ("cargo test --config x", 2, true),
            ("cargo test --config x --lib", 4, false),
            ("cargo test -Zbuild-std", 2, true),
            ("cargo test --target-dir /tmp/t", 2, true),
            ("cargo test --target-dir=target/t", 2, false),
            ("cargo test -- --logfile /tmp/l", 2, true),
            ("cargo test -- --nocapture", 2, false),
            ("go test -exec=x ./...", 2, true),
            ("go test --toolexec x ./...", 2, true),
            ("go test -C=/x ./...", 2, true),
            ("go test -o /tmp/t.test", 2, true),
            ("go test -o t.test", 2, false),
            ("go test -ldflags=-s ./...", 2, false),
            ("go test ./... -args -exec x", 2, false),
            ("pytest -p evil", 1, true),
            ("pytest -p no:cacheprovider", 1, false),
            ("pytest -qc /x/pytest.ini", 1, true),
            ("pytest --rootd=/x", 1, true),
            ("pytest --co", 1, false),
            ("pytest --pyargs pkg", 1, true),
            ("python3 -m pytest -p evil", 3, true),
            ("python -m pytest -q", 3, false),
            ("make -f x.mk", 1, true),
            ("make -kf x.mk", 1, true),
            ("make --dir=/x", 1, true),
            ("make --eval=x", 1, true),
            ("make -j 4 test", 1, false),
            ("make test CC=/x/cc", 2, true),
            ("make test V=1", 2, false),
            ("make test -t", 2, true),
            ("make test --touch", 2, true),
            ("make test --tou", 2, true),
            ("make test -it", 2, true),
            ("make test -itools/x.mk", 2, true),
            ("make test -k", 2, false),
            ("gmake test SHELL=/x/sh", 2, true),
            ("./gradlew test -I /x/init.gradle", 2, true),
            (
                "gradle test -Dorg.gradle.jvmargs=-javaagent:/x.jar",
                2,
                true,
            ),
            ("gradle test -Dci=true", 2, false),
            ("mvn test -s /x/settings.xml", 2, true),
            ("mvn test -DskipTests=true", 2, false),
            ("tox -c /x/tox.ini", 1, true),
            ("rake test -r /x/evil.rb", 2, true),
        ];
        for (line, covered, hazardous) in cases {
            assert_eq!(
                hazard_of(line, covered).is_some(),
                hazardous,
                "{line}: {:?}",
                hazard_of(line, covered)
            );
        }
    }
}
