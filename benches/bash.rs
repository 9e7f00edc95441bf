//! Analyses per second of the Bash analyser: a short command, a typical CI compound, a 2 KB
//! script. Criterion's median is the p50 reported in the README.

#![allow(
    clippy::unwrap_used,
    reason = "test and bench support: a failure should panic"
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tollgate::bash::{BashEnv, BashRules, CommandPattern, evaluate};

fn rules() -> BashRules {
    let tag = |list: &[&str], base: usize| {
        list.iter()
            .enumerate()
            .map(|(i, s)| (CommandPattern::parse(s).unwrap(), base + i))
            .collect()
    };
    BashRules {
        allow: tag(
            &[
                "git status",
                "git diff:*",
                "npm test:*",
                "ls:*",
                "echo:*",
                "cargo test:*",
                "cargo fmt:*",
                "cargo clippy:*",
                "make:*",
            ],
            0,
        ),
        ask: tag(&["git push:*"], 100),
        deny: tag(&["rm:*", "curl:*", "wget:*"], 200),
    }
}

/// The same rules with Claude Code's wildcards anywhere beside them (`ls*`, `* --version`,
/// `rm -rf /*`): what matching a glob against every simple command costs.
fn glob_rules() -> BashRules {
    let mut rules = rules();
    let tag = |s: &str, id| (CommandPattern::parse(s).unwrap(), id);
    rules.allow.extend([
        tag("ls*", 10),
        tag("* --version", 11),
        tag("scripts/*", 12),
        tag("git * main:*", 13),
    ]);
    rules.deny.extend([
        tag("rm -rf /*", 210),
        tag("git push * --force*", 211),
        tag("npm run *:deploy", 212),
    ]);
    rules
}

fn script_2k() -> String {
    let block = "set -euo pipefail\n\
        if [ -f Cargo.toml ]; then\n  cargo fmt --check && cargo clippy -- -D warnings 2>&1 | tail -n 50\nfi\n\
        for f in src/*.rs; do\n  wc -l \"$f\" | sort -n > /dev/null\ndone\n\
        git status --short | grep -v '^??' || echo clean\n\
        find . -name '*.rs' -type f | head -20\n\
        cat README.md | sed -n '1,10p'\n";
    let mut s = String::new();
    while s.len() < 2048 {
        s.push_str(block);
    }
    s
}

fn bench(c: &mut Criterion) {
    let rules = rules();
    let roots = [PathBuf::from("/ws")];
    let env = BashEnv {
        cwd: Path::new("/ws"),
        workspace_roots: &roots,
        home: Some(Path::new("/home/u")),
        resolve: &tollgate::base::resolve_without_disk,
        // Every folder holds the same few names, so globs expand without disk access.
        list_dir: &|_| Some(vec!["lib.rs".into(), "main.rs".into(), "mod.rs".into()]),
        links_below: &|_| Ok(Vec::new()),
    };
    let long = script_2k();
    let cases = [
        ("short", "git status".to_owned()),
        (
            "compound",
            "cargo fmt --check && cargo clippy -- -D warnings 2>&1 | tail -n 50".to_owned(),
        ),
        ("script_2k", long),
        (
            "expansions",
            "ls -l {src,tests} && x=src; for f in $x/*.rs; do wc -l \"$f\"; done".to_owned(),
        ),
    ];
    let mut group = c.benchmark_group("bash_evaluate");
    for (name, script) in &cases {
        group.throughput(Throughput::Elements(1));
        group.bench_function(*name, |b| {
            b.iter(|| evaluate(black_box(script), &rules, &env))
        });
    }
    let globs = glob_rules();
    for (name, script) in &cases {
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{name}_glob_rules"), |b| {
            b.iter(|| evaluate(black_box(script), &globs, &env))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
