//! Property test over grammar-shaped scripts: the analyser never panics, stays fast, and an
//! Allow always agrees with an independent walk of the syntax tree.

use std::time::{Duration, Instant};

use crate::support::bash::{analyse, check_consistency, rules};
use proptest::prelude::*;

const WORDS: &[&str] = &[
    "ls",
    "rm",
    "echo",
    "cat",
    "git",
    "status",
    "diff",
    "-rf",
    "x",
    "/etc/passwd",
    "README.md",
    "$(rm x)",
    "`rm x`",
    "'r''m'",
    "\\rm",
    "$HOME",
    "*.txt",
    "~/.bashrc",
    "sudo",
    "xargs",
    "timeout",
    "5",
    "bash",
    "-c",
    "'rm x'",
    "env",
    "FOO=1",
    "LANG=C",
    "curl",
    "sed",
    "-n",
    "1p",
    "-i",
    "find",
    ".",
    "-exec",
    "{}",
    "\\;",
    "grep",
    "foo",
    "../x",
    "\"$(curl y)\"",
    "$'\\x72m'",
    "npm",
    "test",
    "cargo",
    "-c",
    "core.pager=x",
    "r\\m",
    "${x:-$(rm y)}",
    "'",
    "\"",
    "(",
    "{",
];
const OPS: &[&str] = &[" && ", " || ", "; ", " | ", " & ", "\n", " |& ", "\r\n"];
const REDIRECTS: &[&str] = &[
    " > out",
    " >> ~/.bashrc",
    " 2>&1",
    " < /etc/passwd",
    " > /dev/tcp/x/1",
    " > /dev/null",
    " <<< $(rm x)",
    " > $F",
];

fn simple() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(WORDS), 1..5),
        prop::option::of(prop::sample::select(REDIRECTS)),
    )
        .prop_map(|(words, redirect)| format!("{}{}", words.join(" "), redirect.unwrap_or("")))
}

fn script() -> impl Strategy<Value = String> {
    simple().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), prop::sample::select(OPS), inner.clone())
                .prop_map(|(a, op, b)| format!("{a}{op}{b}")),
            inner.clone().prop_map(|s| format!("( {s} )")),
            inner.clone().prop_map(|s| format!("{{ {s}; }}")),
            inner.clone().prop_map(|s| format!("echo $({s})")),
            inner.clone().prop_map(|s| format!("echo \"`{s}`\"")),
            inner.clone().prop_map(|s| format!("if true; then {s}; fi")),
            inner
                .clone()
                .prop_map(|s| format!("for i in a b; do {s}; done")),
            inner.clone().prop_map(|s| format!("f() {{ {s}; }}; f")),
            inner.clone().prop_map(|s| format!("cat <({s})")),
            inner
                .clone()
                .prop_map(|s| format!("bash -c '{}'", s.replace('\'', ""))),
            inner
                .clone()
                .prop_map(|s| format!("cat <<EOF\n$({s})\nEOF")),
            inner.prop_map(|s| format!("x=$({s}); echo $((1 + 2))")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn analysis_is_total_fast_and_consistent(s in script()) {
        let rules = rules();
        let started = Instant::now();
        let analysis = analyse(&s, &rules);
        prop_assert!(started.elapsed() < Duration::from_secs(1), "{s:?} took {:?}", started.elapsed());
        check_consistency(&s, &analysis);
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let rules = rules();
        let analysis = analyse(&s, &rules);
        check_consistency(&s, &analysis);
    }
}
