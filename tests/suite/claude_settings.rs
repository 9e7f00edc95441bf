//! The Claude Code settings corpus (`tests/corpus/claude-settings/`): every file loads through
//! the real binary with only the refusals its README justifies, and decides as it says.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Sandbox, repo_root};

fn corpus() -> PathBuf {
    repo_root().join("tests/corpus/claude-settings")
}

/// The refused files, with the key each is refused at.
const REFUSED: &[(&str, &str)] = &[("sandbox-docker.settings.json", "sandbox.excludedCommands")];

/// `check` under `file` as the managed policy: exit code, the decision line, stderr.
fn check(sandbox: &Sandbox, file: &str, tool: &str, input: &str) -> (i32, Value, String) {
    let policy = corpus().join(file);
    let output = sandbox.tollgate(&[
        "check",
        "--policy",
        policy.to_str().unwrap(),
        "--tool",
        tool,
        "--input",
        input,
        "--mode",
        "dontAsk",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let line = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), line, stderr)
}

#[test]
fn every_corpus_file_loads_or_is_refused_with_its_reason() {
    let sandbox = Sandbox::empty();
    sandbox.write("README.md", "hello\n");
    let readme = std::fs::read_to_string(corpus().join("README.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    for file in &files {
        assert!(readme.contains(&format!("`{file}`")), "README lists {file}");
        let (code, line, stderr) = check(&sandbox, file, "Read", r#"{"file_path":"README.md"}"#);
        match REFUSED.iter().find(|(name, _)| name == file) {
            Some((_, key)) => {
                assert_eq!(code, 2, "{file}: {stderr}");
                assert!(stderr.contains(key), "{file}: {stderr}");
                assert!(stderr.contains(&format!("{file}:")), "{file}: {stderr}");
                assert!(readme.contains(key), "README justifies {file}");
            }
            None => {
                assert_eq!(code, 0, "{file}: {stderr}");
                assert!(line["decision"].is_string(), "{file}: {line}");
            }
        }
    }
}

/// Decisions the corpus files must give: their rules take effect as Claude Code reads them.
#[test]
fn corpus_files_decide_as_written() {
    let sandbox = Sandbox::empty();
    let bash = |command: &str| serde_json::json!({ "command": command }).to_string();
    let cases: &[(&str, &str, String, &str)] = &[
        ("wildcards.settings.json", "Bash", bash("lsof -i"), "allow"),
        (
            "wildcards.settings.json",
            "Bash",
            bash("node --version"),
            "allow",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("scripts/release.sh"),
            "allow",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("rm -rf /home"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("ls; rm -rf ./x"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("git push origin main --force-with-lease"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("npm run test:ci"),
            "allow",
        ),
        (
            "node-app.settings.json",
            "Bash",
            bash("npm run test -- --watch"),
            "allow",
        ),
        (
            "node-app.settings.json",
            "Read",
            r#"{"file_path":".env.local"}"#.into(),
            "deny",
        ),
        (
            "managed-settings.json",
            "WebFetch",
            r#"{"url":"https://example.com","prompt":"x"}"#.into(),
            "deny",
        ),
        (
            "agents-and-skills.settings.json",
            "Agent",
            r#"{"subagent_type":"explore","description":"d","prompt":"p"}"#.into(),
            "allow",
        ),
        (
            "agents-and-skills.settings.json",
            "Agent",
            r#"{"subagent_type":"general","description":"d","prompt":"p"}"#.into(),
            "deny",
        ),
        (
            "github-actions.settings.json",
            "Bash",
            bash("gh api repos/x/y -X DELETE"),
            "deny",
        ),
        (
            "github-actions.settings.json",
            "Bash",
            bash("gh pr view 12"),
            "allow",
        ),
    ];
    for (file, tool, input, expected) in cases {
        let (code, line, stderr) = check(&sandbox, file, tool, input);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert_eq!(line["decision"], *expected, "{file} {tool} {input}: {line}");
    }
}

/// `run` warns on stderr about the allow rules that let `rm -rf ~` through when it loads the
/// file, and `--strict` makes them a configuration error before any model call.
#[test]
fn run_warns_about_destructive_allow_rules_and_strict_refuses_them() {
    let settings =
        r#"{"permissions": {"allow": ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"]}}"#;
    let task = "version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";
    let run = crate::support::Run::new()
        .policy(settings)
        .task(task)
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    for rule in ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"] {
        assert!(
            run.stderr.contains(&format!("allow rule {rule}")),
            "{rule}: {}",
            run.stderr
        );
    }
    let warnings = run.policy_warnings();
    assert!(warnings.contains("Bash(rm:*)"), "{warnings}");
    let strict = crate::support::Run::new()
        .policy(settings)
        .task(task)
        .args(["--strict"])
        .finish();
    assert_eq!(strict.code, 2, "{}", strict.stderr);
    assert!(strict.stderr.contains("--strict"), "{}", strict.stderr);
    assert!(!strict.wrote_transcript());
}
