//! Fuzzes the Bash analyser on arbitrary UTF-8 and on deep nesting of every construct that
//! nests (which random bytes would not reach): no panic or stack overflow, bounded time, an
//! Allow never hides a command named by a deny rule, and nesting past the analyser's bounds
//! is denied.
#![no_main]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tollgate_bash::{BashEnv, BashRules, BashVerdict, CommandPattern, CommandVerdict, evaluate};
use libfuzzer_sys::fuzz_target;

fn rules() -> BashRules {
    let tag = |list: &[&str], base: usize| {
        list.iter()
            .enumerate()
            .filter_map(|(i, s)| CommandPattern::parse(s).ok().map(|p| (p, base + i)))
            .collect()
    };
    BashRules {
        allow: tag(&["git status", "git diff:*", "npm test:*", "ls:*", "echo:*", "cargo test:*"], 0),
        ask: tag(&["git push:*"], 100),
        deny: tag(&["rm:*", "curl:*", "wget:*"], 200),
    }
}

/// Constructs that nest: (open, close). Their bodies are what the fuzzer writes.
const NESTING: &[(&str, &str)] = &[
    ("{a,", "}"),
    ("$(", ")"),
    ("( ", " )"),
    ("$((", "))"),
    ("$[", "]"),
    ("${x:-", "}"),
    ("\"$(", ")\""),
    ("<(", ")"),
    ("{ ", "; }"),
    ("if true; then ", "; fi"),
    ("while x; do ", "; done"),
    ("case x in x) ", ";; esac"),
    ("f() { ", "; }"),
    ("a[", "]"),
    ("x=$(", ")"),
    ("[[ ( ", " ) ]]"),
    ("! ", ""),
    ("true && ", ""),
    ("true | ", ""),
    ("nice ", ""),
    ("env ", ""),
    ("`", "`"),
    ("sh -c '", "'"),
    ("eval \"", "\""),
    ("cat <<E\n$(", ")\nE\n"),
];

/// Input that starts with byte 0xFF is a recipe for deep nesting: the next byte picks a
/// construct, the two after it (big-endian) the depth, and the rest is the innermost script.
/// Returns the script and how many brackets deep it nests at least.
fn nested(data: &[u8]) -> Option<(String, usize)> {
    let [0xFF, pick, high, low, rest @ ..] = data else {
        return None;
    };
    let (open, close) = NESTING[usize::from(*pick) % NESTING.len()];
    let depth = usize::from(u16::from_be_bytes([*high, *low]));
    let inner = std::str::from_utf8(rest).ok()?;
    let script = format!("{}{inner}{}", open.repeat(depth), close.repeat(depth));
    let brackets = if open.contains(['(', '{', '[']) { depth } else { 0 };
    Some((script, brackets))
}

fuzz_target!(|data: &[u8]| {
    let (owned, brackets) = match nested(data) {
        Some(nested) => nested,
        None => match std::str::from_utf8(data) {
            Ok(script) => (script.to_owned(), 0),
            Err(_) => return,
        },
    };
    let script = owned.as_str();
    let roots = [PathBuf::from("/ws")];
    let env = BashEnv {
        cwd: Path::new("/ws"),
        workspace_roots: &roots,
        home: Some(Path::new("/home/u")),
        resolve: &tollgate_base::resolve_without_disk,
        // Every folder holds a file named like an option and a few plain names, so globs
        // expand (and can produce an option) without touching the disk.
        list_dir: &|_| Some(vec!["-rf".into(), "lib.rs".into(), "main.rs".into(), ".env".into()]),
        // No links below any folder: the fuzzer's disk is made up.
        links_below: &|_| Ok(Vec::new()),
    };
    let started = Instant::now();
    let analysis = evaluate(script, &rules(), &env);
    assert!(started.elapsed() < Duration::from_secs(2), "slow input");
    // Past the analyser's bound on brackets (64 deep) a script is refused, whatever it holds.
    if brackets > 64 {
        assert!(
            matches!(analysis.verdict, BashVerdict::Deny { .. }),
            "nested {brackets} brackets deep: {:?}",
            analysis.verdict
        );
    }
    if analysis.verdict == BashVerdict::Allow {
        for r in &analysis.commands {
            assert!(
                matches!(r.verdict, CommandVerdict::AllowedByRule(_) | CommandVerdict::ReadOnly),
                "allowed with an unproven command: {r:?}"
            );
            let name = r.argv.first().map(|a| a.rsplit('/').next().unwrap_or(a));
            assert!(!matches!(name, Some("rm" | "curl" | "wget")), "allowed {r:?}");
        }
    }
});
