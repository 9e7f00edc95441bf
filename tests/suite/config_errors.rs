//! What a person sees for a bad task, policy or settings file: exit 2, `file:line:col`, the
//! offending line with a caret, a "did you mean" where one fits, each OS error once, and no
//! loader's own wording. Whole stderr compared, so a change of words is a visible change.

use crate::support::Sandbox;

const TASK: &str = "version: 1\nname: t\nprompt: go\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - text: done\n";

/// A task file with `extra` after its first three lines.
fn task(extra: &str) -> String {
    TASK.replacen("prompt: go\n", &format!("prompt: go\n{extra}"), 1)
}

struct Case {
    name: &'static str,
    files: Vec<(&'static str, String)>,
    args: &'static [&'static str],
    stderr: &'static str,
}

fn cases() -> Vec<Case> {
    let check_with = |policy: &'static str| -> &'static [&'static str] {
        Box::leak(Box::new([
            "check",
            "--policy",
            policy,
            "--tool",
            "Read",
            "--input",
            r#"{"file_path":"a"}"#,
        ]))
    };
    vec![
        Case {
            name: "a missing task file says its OS error once",
            files: vec![],
            args: &["run", "missing.yaml"],
            stderr: "tollgate: error: cannot read task file missing.yaml: No such file or directory (os error 2)\n",
        },
        Case {
            name: "a duplicate key, without the loader's option name",
            files: vec![("t.yaml", task("name: u\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:1: `name` is given twice in the same mapping
  |
4 | name: u
  | ^^^^
  |
  = help: keep one of them
",
        },
        Case {
            name: "a negative count is not `invalid u32`",
            files: vec![("t.yaml", task("limits:\n  max_turns: -3\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:5:14: expected a whole number from 0 to 4294967295, found `-3`
  |
5 |   max_turns: -3
  |              ^^
",
        },
        Case {
            name: "a word where a number belongs",
            files: vec![("t.yaml", task("limits: {max_turns: lots}\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:21: expected a whole number from 0 to 4294967295, found `lots`
  |
4 | limits: {max_turns: lots}
  |                     ^^^^
",
        },
        Case {
            name: "an unknown key gets a did-you-mean",
            files: vec![("t.yaml", task("limts:\n  max_turns: 3\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:1: unknown field `limts`
  |
4 | limts:
  | ^^^^^
  |
  = help: did you mean `limits`?
",
        },
        Case {
            name: "a nested unknown key too",
            files: vec![("t.yaml", task("limits:\n  max_trns: 3\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:5:3: unknown field `max_trns`
  |
5 |   max_trns: 3
  |   ^^^^^^^^
  |
  = help: did you mean `max_turns`?
",
        },
        Case {
            name: "an unknown mode names the close one",
            files: vec![("t.yaml", task("mode: dontAks\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:7: unknown value `dontAks`
  |
4 | mode: dontAks
  |       ^^^^^^^
  |
  = help: did you mean `dontAsk`?
",
        },
        Case {
            name: "an unknown tool in tools:",
            files: vec![("t.yaml", task("tools: [Read, Grpe]\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:15: unknown tool `Grpe`
  |
4 | tools: [Read, Grpe]
  |               ^^^^
  |
  = help: did you mean `Grep`?
",
        },
        Case {
            name: "a batch task given to run names tollgate batch",
            files: vec![("t.yaml", task("batch:\n  branch: x\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:1: `batch` is a batch task's key; `tollgate run` runs a single task
  |
4 | batch:
  | ^^^^^
  |
  = help: run a batch task over its repositories with `tollgate batch t.yaml --repos FILE`
",
        },
        Case {
            name: "a workdir that does not exist, shown at its line",
            files: vec![("t.yaml", task("workdir: nowhere\n"))],
            args: &["run", "t.yaml"],
            stderr: "\
tollgate: error: t.yaml:4:10: workdir $SANDBOX/nowhere does not exist or is not a folder
  |
4 | workdir: nowhere
  |          ^^^^^^^
",
        },
        Case {
            name: "a JSONC settings file is told JSON has no comments",
            files: vec![(
                "settings.json",
                "{\n  // what may run\n  \"permissions\": {\"allow\": [\"Read\"]}\n}\n".into(),
            )],
            args: check_with("settings.json"),
            stderr: "\
tollgate: error: settings.json:2:3: `//` starts no comment in JSON
  |
2 |   // what may run
  |   ^^
  |
  = help: JSON has no comments (JSONC, as in an editor's settings, is not JSON): remove them, or write the file as YAML, where `#` starts a comment
",
        },
        Case {
            name: "a trailing comment in a settings file",
            files: vec![(
                "settings.json",
                "{\n  \"permissions\": {\n    \"allow\": [\"Read\"], /* reads */\n    \"deny\": []\n  }\n}\n".into(),
            )],
            args: check_with("settings.json"),
            stderr: "\
tollgate: error: settings.json:3:24: `/*` starts no comment in JSON
  |
3 |     \"allow\": [\"Read\"], /* reads */
  |                        ^^
  |
  = help: JSON has no comments (JSONC, as in an editor's settings, is not JSON): remove them, or write the file as YAML, where `#` starts a comment
",
        },
        Case {
            name: "a settings file with a string where a list belongs",
            files: vec![(
                "settings.json",
                "{\"permissions\": {\"allow\": \"Read\"}}\n".into(),
            )],
            args: check_with("settings.json"),
            stderr: "\
tollgate: error: settings.json:1:27: expected a list, found `\"Read\"`
  |
1 | {\"permissions\": {\"allow\": \"Read\"}}
  |                           ^^^^^^
",
        },
        Case {
            name: "a misspelt key in a settings file",
            files: vec![(
                "settings.json",
                "{\n  \"permissions\": {\n    \"denny\": [\"Bash\"]\n  }\n}\n".into(),
            )],
            args: check_with("settings.json"),
            stderr: "\
tollgate: error: settings.json:3:5: unknown field `denny` in `permissions`
  |
3 |     \"denny\": [\"Bash\"]
  |     ^^^^^^^
  |
  = help: did you mean `deny`?
",
        },
        Case {
            name: "a policy's duplicate key",
            files: vec![(
                "p.yaml",
                "permissions:\n  allow: [Read]\n  allow: [Bash]\n".into(),
            )],
            args: check_with("p.yaml"),
            stderr: "\
tollgate: error: p.yaml:3:3: `allow` is given twice in the same mapping
  |
3 |   allow: [Bash]
  |   ^^^^^
  |
  = help: keep one of them
",
        },
        Case {
            name: "a policy's broken rule",
            files: vec![("p.yaml", "permissions:\n  allow: [Read(]\n".into())],
            args: check_with("p.yaml"),
            stderr: "\
tollgate: error: p.yaml:2:11: `Read(` is not a rule: expected `Tool` or `Tool(content)`
  |
2 |   allow: [Read(]
  |           ^^^^^
",
        },
        Case {
            name: "a policy's misspelt mode",
            files: vec![("p.yaml", "permissions:\n  defaultMode: dontAks\n".into())],
            args: check_with("p.yaml"),
            stderr: "\
tollgate: error: p.yaml:2:16: unknown permission mode `dontAks` (expected one of: default, acceptEdits, plan, bypassPermissions, auto, dontAsk); did you mean `dontAsk`?
  |
2 |   defaultMode: dontAks
  |                ^^^^^^^
",
        },
        Case {
            name: "a missing policy file says its OS error once",
            files: vec![],
            args: check_with("none.yaml"),
            stderr: "tollgate: error: cannot read policy file none.yaml: No such file or directory (os error 2)\n",
        },
    ]
}

#[test]
fn bad_configuration_gets_exit_2_the_line_a_caret_and_plain_words() {
    let mut failures = Vec::new();
    for case in cases() {
        let sandbox = Sandbox::empty();
        for (path, text) in &case.files {
            sandbox.write(path, text);
        }
        let output = sandbox.tollgate(case.args);
        let root = sandbox.path().canonicalize().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr)
            .replace(&root.display().to_string(), "$SANDBOX");
        if output.status.code() != Some(2) || stderr != case.stderr {
            failures.push(format!(
                "{}: exit {:?}\n--- expected\n{}--- got\n{stderr}",
                case.name,
                output.status.code(),
                case.stderr
            ));
        }
        for internal in ["DuplicateKeyPolicy", "invalid u32", "os error 2): No such"] {
            assert!(!stderr.contains(internal), "{}: {stderr}", case.name);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A rule naming no tool tollgate has loads (a Claude Code settings file may name Claude
/// Code's own tools) but never matches: `run` and `check` warn, with the close built-in.
#[test]
fn a_rule_for_an_unknown_tool_is_a_warning_in_run_and_check() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow:\n    - Raed(src/**)\n  deny:\n    - Bsah(rm:*)\n    - WebSearch\n",
    );
    sandbox.write("t.yaml", &task(""));
    let run = sandbox.tollgate(&["run", "t.yaml", "--policy", "p.yaml", "--out", "out"]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let check = sandbox.tollgate(&[
        "check",
        "--policy",
        "p.yaml",
        "--tool",
        "Read",
        "--input",
        r#"{"file_path":"a"}"#,
    ]);
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let expected = [
        "allow rule Raed(src/**) at p.yaml:3 never matches: tollgate has no Raed tool; did you mean `Read`?",
        "deny rule Bsah(rm:*) at p.yaml:5 never matches: tollgate has no Bsah tool; did you mean `Bash`?",
        "deny rule WebSearch at p.yaml:6 never matches: tollgate has no WebSearch tool",
    ];
    for output in [&run, &check] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        for warning in expected {
            assert_eq!(stderr.matches(warning).count(), 1, "{warning}\n{stderr}");
        }
        assert!(!stderr.contains("WebSearch tool; did you mean"), "{stderr}");
    }
    let started = &crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"))[0];
    let warnings = started["policy"]["warnings"].to_string();
    for warning in expected {
        assert!(warnings.contains(warning), "{warnings}");
    }
}
