//! Fuzzes the Bash analyser on arbitrary UTF-8: no panic, bounded time, and an Allow never
//! hides a command named by a deny rule.
#![no_main]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tollgate::bash::{BashEnv, BashRules, BashVerdict, CommandPattern, CommandVerdict, evaluate};
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

fuzz_target!(|data: &[u8]| {
    let Ok(script) = std::str::from_utf8(data) else { return };
    let roots = [PathBuf::from("/ws")];
    let identity = |p: &Path| p.to_path_buf();
    let env = BashEnv {
        cwd: Path::new("/ws"),
        workspace_roots: &roots,
        home: Some(Path::new("/home/u")),
        resolve: &identity,
        // Every folder holds a file named like an option and a few plain names, so globs
        // expand (and can produce an option) without touching the disk.
        list_dir: &|_| Some(vec!["-rf".into(), "lib.rs".into(), "main.rs".into(), ".env".into()]),
    };
    let started = Instant::now();
    let analysis = evaluate(script, &rules(), &env);
    assert!(started.elapsed() < Duration::from_secs(2), "slow input");
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
