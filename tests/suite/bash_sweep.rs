//! No-panic, no-hang sweep over tree-sitter-bash's own corpus and example scripts: every
//! snippet is analysed and every Allow is explained by allowed commands only.

#![allow(
    clippy::unwrap_used,
    reason = "test and bench support: a failure should panic"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::bash::{analyse, check_consistency, rules};

/// tree-sitter-bash's corpus and example scripts, in the repository (its README says where
/// they come from, its LICENSE under which terms).
const CORPUS_DIR: &str = "tests/corpus/tree-sitter-bash";

/// Splits a tree-sitter corpus file into its cases' sources: a name between `===` lines, the
/// source, a `---` line, then the expected tree.
fn corpus_cases(text: &str) -> Vec<String> {
    let mut cases = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !line.starts_with("===") {
            continue;
        }
        // The name, then the closing `===` line.
        lines.next();
        lines.next();
        let mut source = Vec::new();
        for l in lines.by_ref() {
            if l.starts_with("---") {
                break;
            }
            source.push(l);
        }
        cases.push(source.join("\n"));
        while lines.peek().is_some_and(|l| !l.starts_with("===")) {
            lines.next();
        }
    }
    cases
}

/// The corpus folder.
pub(crate) fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS_DIR)
}

pub(crate) fn snippets(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for sub in ["test-corpus", "examples"] {
        let entries = std::fs::read_dir(dir.join(sub))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(sub).display()));
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".txt") {
                for (i, case) in corpus_cases(&text).into_iter().enumerate() {
                    out.push((format!("{name}#{i}"), case));
                }
            } else {
                out.push((name, text));
            }
        }
    }
    out
}

#[test]
fn tree_sitter_corpus_sweep() {
    let rules = rules();
    let snippets = snippets(&corpus_dir());
    assert!(
        snippets.len() > 100,
        "only {} snippets found",
        snippets.len()
    );
    let mut allowed = 0;
    for (name, source) in &snippets {
        let started = Instant::now();
        let analysis = analyse(source, &rules);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{name} took {:?}",
            started.elapsed()
        );
        check_consistency(source, &analysis);
        allowed += usize::from(analysis.verdict == tollgate::bash::BashVerdict::Allow);
    }
    println!("swept {} snippets, {allowed} allowed", snippets.len());
}
