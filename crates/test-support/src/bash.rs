//! The fixed policy and world the Bash analyser's integration tests run under.
//! Rules follow the settings of the Claude Code decisions recorded in `bash_corpus.rs`, plus
//! typical CI commands.

#![allow(
    clippy::unwrap_used,
    reason = "test and bench support: a failure should panic"
)]

use std::path::{Path, PathBuf};

use tollgate_bash::{BashAnalysis, BashEnv, BashRules, CommandPattern, evaluate};

pub const ALLOW: &[&str] = &[
    "git status",
    "git diff:*",
    "npm test:*",
    "ls:*",
    "echo:*",
    "cargo test:*",
    "cargo fmt:*",
    "cargo clippy:*",
    "cargo build:*",
    "cargo check:*",
    "make:*",
    "npm ci",
    "go test:*",
    "pytest:*",
];
pub const ASK: &[&str] = &["git push:*"];
pub const DENY: &[&str] = &["rm:*", "curl:*", "wget:*"];

/// Ids: allow rules 0.., ask rules 100.., deny rules 200..
pub fn rules() -> BashRules {
    let tag = |list: &[&str], base: usize| {
        list.iter()
            .enumerate()
            .map(|(i, s)| (CommandPattern::parse(s).unwrap(), base + i))
            .collect()
    };
    BashRules {
        allow: tag(ALLOW, 0),
        ask: tag(ASK, 100),
        deny: tag(DENY, 200),
    }
}

/// Runs `f` with the workspace `/ws`, home `/home/u`, on a disk without links (paths are
/// resolved by the walk's lexical rules alone).
pub fn analyse(script: &str, rules: &BashRules) -> BashAnalysis {
    let roots = [PathBuf::from("/ws")];
    let env = BashEnv {
        cwd: Path::new("/ws"),
        workspace_roots: &roots,
        home: Some(Path::new("/home/u")),
        resolve: &tollgate_base::resolve_without_disk,
        list_dir: &|_| Some(Vec::new()),
        links_below: &|_| Ok(Vec::new()),
    };
    evaluate(script, rules, &env)
}

/// Command names the independent walker accepts in an allowed script: the allow rules' first
/// words, the read-only commands, the wrappers that are looked through, and builtins.
const ACCEPTABLE: &[&str] = &[
    "git",
    "npm",
    "ls",
    "echo",
    "cargo",
    "make",
    "go",
    "pytest",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "tree",
    "stat",
    "file",
    "du",
    "df",
    "pwd",
    "printf",
    "true",
    "false",
    "test",
    "[",
    "basename",
    "dirname",
    "realpath",
    "which",
    "sort",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "comm",
    "nl",
    "jq",
    "sed",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "cd",
    "pushd",
    "popd",
    "env",
    "command",
    "builtin",
    "exec",
    "nice",
    "nohup",
    "timeout",
    "time",
    "stdbuf",
    "xargs",
    "coproc",
    "ionice",
    "setsid",
    "chrt",
    "taskset",
    "unbuffer",
    "watch",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "tac",
    "rev",
    "paste",
    "fold",
    "readlink",
    "seq",
    "uname",
    "nproc",
    "whoami",
    "arch",
    "tty",
    "id",
    "groups",
    "logname",
    "sleep",
    "expr",
    "exit",
    "return",
    "wait",
    "shift",
    "type",
    ":",
    "set",
    "date",
    "hostname",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "break",
    "continue",
];

/// A deliberately simple second walker: every `command` node of the tree, its name with
/// quotes and backslashes dropped. It shares no code with the analyser.
pub fn independent_command_names(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap();
    let Some(tree) = parser.parse(script, None) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind() == "command"
            && let Some(name) = node.child_by_field_name("name")
        {
            let raw = &script[name.byte_range()];
            names.push(
                raw.chars()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect(),
            );
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    names
}

/// Function names a script defines (calls to them are checked through their bodies).
fn defined_functions(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap();
    let Some(tree) = parser.parse(script, None) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind() == "function_definition"
            && let Some(name) = node.child_by_field_name("name")
        {
            names.push(script[name.byte_range()].to_owned());
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    names
}

/// The property shared by the sweep and the property test: an allowed script has every
/// reported command allowed and no command, found independently, that is denied, unknown or
/// dynamic; and a script running a denied command by name is never allowed.
pub fn check_consistency(script: &str, analysis: &BashAnalysis) {
    use tollgate_bash::{BashVerdict, CommandVerdict};
    // tree-sitter-bash's scanner reads out of bounds on code points above U+00FF, so the
    // analyser never parses such a script, and neither may this walker: it must be refused.
    if script.chars().any(|c| u32::from(c) > 0xFF) {
        assert!(
            analysis.verdict != BashVerdict::Allow,
            "{script:?} was allowed unparsed"
        );
        return;
    }
    let names = independent_command_names(script);
    let denied = |n: &str| {
        DENY.iter()
            .any(|d| d.trim_end_matches(":*") == n.rsplit('/').next().unwrap_or(n))
    };
    if names.iter().any(|n| denied(n)) {
        assert!(
            analysis.verdict != BashVerdict::Allow,
            "{script:?} runs a denied command but was allowed"
        );
    }
    if analysis.verdict != BashVerdict::Allow {
        return;
    }
    for r in &analysis.commands {
        assert!(
            matches!(
                r.verdict,
                CommandVerdict::AllowedByRule(_) | CommandVerdict::ReadOnly
            ),
            "{script:?} allowed but {r:?} is not"
        );
    }
    let functions = defined_functions(script);
    for n in &names {
        let base = n.rsplit('/').next().unwrap_or(n);
        let system = !n.contains('/')
            || [
                "/bin/",
                "/usr/bin/",
                "/usr/local/bin/",
                "/sbin/",
                "/usr/sbin/",
            ]
            .iter()
            .any(|d| n.starts_with(d) && !n[d.len()..].contains('/'));
        assert!(
            system && (ACCEPTABLE.contains(&base) || functions.contains(n)),
            "{script:?} allowed but runs `{n}`, which the independent walker does not accept"
        );
        assert!(
            !n.contains(['$', '`', '*', '?', '~']),
            "{script:?} allowed with a dynamic command name `{n}`"
        );
    }
    assert!(
        analysis.commands.len() >= names.len(),
        "{script:?}: {} command nodes but only {} reports",
        names.len(),
        analysis.commands.len()
    );
}
