//! `tollgate check`: one decision as one JSON line, nothing executed.

use serde_json::Value;

use crate::support::Sandbox;

fn decide(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let output = sandbox.tollgate(&all);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn read_only_policy_denies_a_write() {
    let sandbox = Sandbox::with_examples();
    let line = decide(
        &sandbox,
        &[
            "--policy",
            "policies/read-only.yaml",
            "--tool",
            "Write",
            "--input",
            r#"{"file_path":"a","content":"x"}"#,
            "--mode",
            "dontAsk",
        ],
    );
    assert_eq!(line["decision"], "deny");
    assert_eq!(line["step"], "1a");
    assert_eq!(line["rule"], "Write");
    assert!(
        line["source"]
            .as_str()
            .unwrap()
            .starts_with("policies/read-only.yaml:")
    );
    assert!(!sandbox.path().join("a").exists());
}

#[test]
fn decisions_across_modes_and_tools() {
    let sandbox = Sandbox::with_examples();
    let policy = "policies/ci-default.yaml";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "Bash",
            r#"{"command":"cargo test --all"}"#,
            "dontAsk",
            "allow",
            "1c",
        ),
        (
            "Bash",
            r#"{"command":"rm -rf /"}"#,
            "bypassPermissions",
            "deny",
            "1d",
        ),
        (
            "Bash",
            r#"{"command":"git commit -m x"}"#,
            "bypassPermissions",
            "deny",
            "1f",
        ),
        ("Bash", r#"{"command":"ls; rm x"}"#, "dontAsk", "deny", "1d"),
        (
            "Bash",
            r#"{"command":"cargo test && make deploy"}"#,
            "dontAsk",
            "deny",
            "1c",
        ),
        (
            "Bash",
            r#"{"command":"cat README.md | wc -l"}"#,
            "dontAsk",
            "allow",
            "1c",
        ),
        (
            "Write",
            r#"{"file_path":".git/config","content":""}"#,
            "bypassPermissions",
            "deny",
            "1g",
        ),
        (
            "Write",
            r#"{"file_path":"notes.md","content":""}"#,
            "dontAsk",
            "deny",
            "3",
        ),
        (
            "Write",
            r#"{"file_path":"notes.md","content":""}"#,
            "acceptEdits",
            "allow",
            "1c",
        ),
        (
            "Read",
            r#"{"file_path":"/etc/passwd"}"#,
            "bypassPermissions",
            "deny",
            "1d",
        ),
        (
            "WebFetch",
            r#"{"url":"https://example.com"}"#,
            "bypassPermissions",
            "deny",
            "0",
        ),
        ("Read", r#"{"nope":1}"#, "dontAsk", "deny", "0"),
    ];
    for (tool, input, mode, decision, step) in cases {
        let line = decide(
            &sandbox,
            &[
                "--policy", policy, "--tool", tool, "--input", input, "--mode", mode,
            ],
        );
        assert_eq!(
            (
                line["decision"].as_str().unwrap(),
                line["step"].as_str().unwrap()
            ),
            (*decision, *step),
            "{tool} {input} {mode}: {line}"
        );
    }
}

#[test]
fn bad_arguments_exit_2() {
    let sandbox = Sandbox::with_examples();
    let output = sandbox.tollgate(&[
        "check",
        "--policy",
        "policies/ci-default.yaml",
        "--tool",
        "Bash",
        "--input",
        "{not json",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let output = sandbox.tollgate(&[
        "check",
        "--policy",
        "policies/ci-default.yaml",
        "--tool",
        "Bash",
        "--input",
        "{}",
        "--mode",
        "yolo",
    ]);
    assert_eq!(output.status.code(), Some(2));
}

/// `--exit-code` lets a script branch on the decision: 0 allow, 3 deny; without the flag
/// every decision exits 0. A stream exits with its strongest line.
#[test]
fn exit_code_says_the_decision() {
    let sandbox = Sandbox::with_examples();
    let policy = "policies/ci-default.yaml";
    let cases: &[(&str, &str, bool, i32)] = &[
        ("Read", r#"{"file_path":"README.md"}"#, true, 0),
        ("Bash", r#"{"command":"rm -rf build"}"#, true, 3),
        ("Bash", r#"{"command":"curl https://example.com"}"#, true, 3),
        ("Bash", r#"{"command":"rm -rf build"}"#, false, 0),
    ];
    for (tool, input, flag, code) in cases {
        let mut args = vec![
            "check", "--policy", policy, "--tool", tool, "--input", input, "--mode", "dontAsk",
        ];
        if *flag {
            args.push("--exit-code");
        }
        let output = sandbox.tollgate(&args);
        assert_eq!(output.status.code(), Some(*code), "{tool} {input} {flag}");
    }
    let calls = sandbox.path().join("calls.jsonl");
    let stream = |lines: &str| {
        std::fs::write(&calls, lines).unwrap();
        let calls = calls.to_str().unwrap();
        let args = ["check", "--policy", policy, "--calls", calls, "--exit-code"];
        sandbox.tollgate(&args).status.code()
    };
    let read = r#"{"tool":"Read","input":{"file_path":"README.md"}}"#;
    let rm = r#"{"tool":"Bash","input":{"command":"rm -rf build"}}"#;
    assert_eq!(stream(&format!("{read}\n{read}\n")), Some(0));
    assert_eq!(stream(&format!("{read}\n{rm}\n{read}\n")), Some(3));
    assert_eq!(
        stream("not json\n"),
        Some(3),
        "a line that is not a call is a deny"
    );
}

/// A settings file whose allow rules let `check` allow `rm -rf ~`: the decision is what the
/// rules say, the load warns on stderr about each destructive or networked allow rule, and
/// `--strict` makes the warnings a configuration error (exit 2) before anything is decided.
#[test]
fn destructive_allow_rules_warn_and_strict_refuses_them() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "settings.json",
        r#"{"permissions": {"allow": ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"]}}"#,
    );
    let args = [
        "check",
        "--policy",
        "settings.json",
        "--tool",
        "Bash",
        "--input",
        r#"{"command":"rm -rf ~"}"#,
        "--mode",
        "dontAsk",
    ];
    let output = sandbox.tollgate(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["decision"], "allow", "{line}");
    for rule in ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"] {
        assert!(
            stderr.contains(&format!("allow rule {rule} at settings.json:1")),
            "{rule}: {stderr}"
        );
    }
    assert!(stderr.contains("rm -rf ~"), "{stderr}");
    let mut strict = args.to_vec();
    strict.push("--strict");
    let output = sandbox.tollgate(&strict);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(
        stderr.contains("settings.json:1") && stderr.contains("--strict"),
        "{stderr}"
    );
}
