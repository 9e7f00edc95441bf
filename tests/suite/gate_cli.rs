//! The gate from the outside: policy sources and managed-only, self-tests, lint, replay,
//! `check --calls`/`--explain`, and denial limits.

use serde_json::Value;

use crate::support::{Isolation, Sandbox, events, junit, transcript};

const TASK_HEAD: &str = "version: 1\nname: t\nprompt: go\nmode: dontAsk\nworkdir: ws\n";

/// A managed-policy folder (`etc/`) and a home (`home/`) of the sandbox's own, so no policy of
/// the machine's leaks in: every command here runs `sandbox.tollgate_with(&own_config(), ..)`.
fn own_config() -> Isolation {
    Isolation::new().managed("etc").home("home")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn touch_task(sandbox: &Sandbox, extra: &str) {
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    sandbox.write(
        "t.yaml",
        &format!("{TASK_HEAD}{extra}model:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: touch made.txt}}}}\n    - - text: done\n"),
    );
}

fn bash_status(sandbox: &Sandbox, out: &str) -> String {
    let all = transcript(&sandbox.path().join(out).join("transcript.jsonl"));
    events(&all, "tool_result")[0]["status"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_task_cannot_widen_a_managed_only_policy() {
    let sandbox = Sandbox::empty();
    touch_task(&sandbox, "permissions:\n  allow: [Bash]\n");
    // Without a managed-only policy, the task's own allow rule lets `touch made.txt` run.
    let output = sandbox.tollgate_with(&own_config(), &["run", "t.yaml", "--out", "open"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(bash_status(&sandbox, "open"), "success");
    // The managed policy in /etc/tollgate (here: the sandbox's etc/) locks it down.
    sandbox.write(
        "etc/policy.yaml",
        "managed_only: true\npermissions:\n  allow: [Read]\n",
    );
    let output = sandbox.tollgate_with(&own_config(), &["run", "t.yaml", "--out", "locked"]);
    // A refused call fails the run (default `fail_on`).
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    assert_eq!(bash_status(&sandbox, "locked"), "denied");
    let all = transcript(&sandbox.path().join("locked/transcript.jsonl"));
    let ignored = &all[0]["policy"]["ignored_rules"];
    assert_eq!(ignored[0]["rule"], "Bash", "{ignored}");
    assert_eq!(
        (
            ignored[0]["source"]["file"].as_str(),
            ignored[0]["source"]["line"].as_u64()
        ),
        (Some("t.yaml"), Some(7)),
        "{ignored}"
    );
    // Project and user policies cannot widen it either, and the drop-in folder merges in.
    sandbox.write(
        "ws/.tollgate/policy.yaml",
        "permissions:\n  allow: [Bash]\n",
    );
    sandbox.write(
        "home/.config/tollgate/policy.yaml",
        "permissions:\n  allow: ['Bash(echo:*)']\n",
    );
    sandbox.write(
        "etc/policy.d/10-deny.yaml",
        "permissions:\n  deny: ['Bash(curl:*)']\n",
    );
    let output = sandbox.tollgate_with(
        &own_config(),
        &[
            "check",
            "--tool",
            "Bash",
            "--input",
            r#"{"command":"touch made.txt"}"#,
            "--workdir",
            "ws",
            "--explain",
        ],
    );
    let explained = text(&output.stdout);
    assert!(explained.contains("decision: deny"), "{explained}");
    assert!(
        explained.contains("ignored: allow rule Bash at"),
        "{explained}"
    );
    assert!(explained.contains("10-deny.yaml"), "{explained}");
    assert!(
        explained.contains("project") && explained.contains("user"),
        "{explained}"
    );
}

#[test]
fn command_line_rules_rank_above_the_task() {
    let sandbox = Sandbox::empty();
    touch_task(&sandbox, "permissions:\n  allow: ['Bash(touch:*)']\n");
    let output = sandbox.tollgate_with(
        &own_config(),
        &["run", "t.yaml", "--out", "o", "--deny", "Bash(touch:*)"],
    );
    assert_eq!(
        output.status.code(),
        Some(3),
        "a refused call fails the run"
    );
    assert_eq!(bash_status(&sandbox, "o"), "denied");
    let all = transcript(&sandbox.path().join("o/transcript.jsonl"));
    let decision = events(&all, "permission_decision")[0];
    assert_eq!(decision["rule"]["source"]["file"], "<command line --deny>");
    assert_eq!(decision["rule"]["source"]["line"], 1);
}

#[test]
fn disabled_modes_refuse_to_start() {
    let sandbox = Sandbox::empty();
    touch_task(&sandbox, "");
    sandbox.write(
        "etc/policy.yaml",
        "disable_bypass_mode: true\ndisable_auto_mode: true\n",
    );
    for mode in ["bypassPermissions", "auto"] {
        let output = sandbox.tollgate_with(&own_config(), &["run", "t.yaml", "--mode", mode]);
        assert_eq!(output.status.code(), Some(2), "{mode}");
        assert!(
            text(&output.stderr).contains(&format!("{mode} mode is disabled by")),
            "{}",
            text(&output.stderr)
        );
    }
}

#[test]
fn a_failing_policy_self_test_refuses_to_start() {
    let sandbox = Sandbox::empty();
    touch_task(&sandbox, "");
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow: ['Bash(rm:*)']\ntests:\n  - name: never delete\n    tool: Bash\n    input: {command: rm -rf /}\n    expect: deny\n",
    );
    let output = sandbox.tollgate_with(
        &own_config(),
        &["run", "t.yaml", "--policy", "p.yaml", "--out", "o"],
    );
    assert_eq!(output.status.code(), Some(2));
    let message = text(&output.stderr);
    assert!(message.contains("never delete (p.yaml:4)"), "{message}");
    assert!(
        message.contains("expected deny, got allow at step 1c"),
        "{message}"
    );
    assert!(!sandbox.path().join("o/transcript.jsonl").exists());

    let output = sandbox.tollgate_with(&own_config(), &["policy", "test", "p.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stdout).contains("0 passed, 1 failed"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn shipped_policies_pass_their_tests_and_lint_clean() {
    let sandbox = Sandbox::with_examples();
    for policy in [
        "policies/read-only.yaml",
        "policies/ci-default.yaml",
        "policies/codemod.yaml",
    ] {
        let output = sandbox.tollgate_with(&own_config(), &["policy", "test", policy]);
        let report = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{policy}:\n{report}");
        assert!(report.contains(", 0 failed"), "{report}");
        assert!(!report.starts_with("0 passed"), "{policy} has no tests");
        let output = sandbox.tollgate_with(&own_config(), &["policy", "lint", policy]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{policy}: {}",
            text(&output.stdout)
        );
    }
    sandbox.write("bad.yaml", "permissions:\n  allow: ['Bash(python:*)', WebSearch]\n  deny: [Write]\n  ask: ['Write(src/**)']\n");
    let output = sandbox.tollgate_with(&own_config(), &["policy", "lint", "bad.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let report = text(&output.stdout);
    assert!(
        report.contains("bad.yaml:2: Bash(python:*): dangerous allow rule"),
        "{report}"
    );
    assert!(report.contains("WebSearch: never matches"), "{report}");
    assert!(
        report.contains("Write(src/**): never matches: Write is denied whole"),
        "{report}"
    );
}

#[test]
fn replay_reports_a_widened_decision_with_exit_1() {
    let sandbox = Sandbox::with_examples();
    let output = sandbox.tollgate_with(
        &own_config(),
        &["run", "examples/quickstart.yaml", "--out", "run"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    let transcript = "run/transcript.jsonl";
    let same = sandbox.tollgate_with(
        &own_config(),
        &["replay", transcript, "--policy", "policies/ci-default.yaml"],
    );
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    assert!(same.stdout.is_empty());
    let wider = sandbox.tollgate_with(
        &own_config(),
        &[
            "replay",
            transcript,
            "--policy",
            "policies/ci-default.yaml",
            "--allow",
            "Bash(rm:*)",
        ],
    );
    // A command-line allow ranks below the managed deny: nothing widens.
    assert_eq!(wider.status.code(), Some(0), "{}", text(&wider.stdout));
    sandbox.write(
        "wide.yaml",
        "permissions:\n  allow: ['Bash(rm:*)', Read, Glob, Grep, 'Edit(src/**)', 'Bash(ls:*)']\n",
    );
    let wide = sandbox.tollgate_with(
        &own_config(),
        &["replay", transcript, "--policy", "wide.yaml"],
    );
    assert_eq!(wide.status.code(), Some(1));
    let changes: Vec<Value> = text(&wide.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0]["input"]["command"], "rm -rf build");
    assert_eq!(
        (
            changes[0]["before"]["decision"].as_str(),
            changes[0]["after"]["decision"].as_str()
        ),
        (Some("deny"), Some("allow"))
    );
    assert!(text(&wide.stderr).contains("1 newly allowed"));
}

/// Many runs replayed at once (a folder of run folders), with a SARIF of the calls that
/// would flip from refused to allowed, each at its transcript line; a folder holding no
/// transcript is an error, never "nothing changed".
#[test]
fn replay_over_many_runs_writes_a_sarif_of_the_flips() {
    let sandbox = Sandbox::with_examples();
    for out in ["runs/a", "runs/b"] {
        let output = sandbox.tollgate_with(
            &own_config(),
            &["run", "examples/quickstart.yaml", "--out", out],
        );
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    }
    sandbox.write(
        "wide.yaml",
        "permissions:\n  allow: ['Bash(rm:*)', Read, Glob, Grep, 'Edit(src/**)', 'Bash(ls:*)']\n",
    );
    let wide = sandbox.tollgate_with(
        &own_config(),
        &[
            "replay",
            "runs",
            "--policy",
            "wide.yaml",
            "--sarif",
            "flips.sarif",
        ],
    );
    assert_eq!(wide.status.code(), Some(1), "{}", text(&wide.stderr));
    assert_eq!(text(&wide.stdout).lines().count(), 2);
    assert!(
        text(&wide.stderr).contains("2 transcripts replayed; 2 calls newly allowed"),
        "{}",
        text(&wide.stderr)
    );
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(sandbox.path().join("flips.sarif")).unwrap())
            .unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let places: Vec<(String, bool)> = results
        .iter()
        .map(|result| {
            let location = &result["locations"][0]["physicalLocation"];
            (
                location["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .nth(1)
                    .unwrap()
                    .to_string(),
                location["region"]["startLine"].as_i64().unwrap() > 1,
            )
        })
        .collect();
    assert_eq!(places, [("a".into(), true), ("b".into(), true)]);
    assert_eq!(results[0]["ruleId"], "replay/newly-allowed");
    assert!(
        results[0]["message"]["text"]
            .as_str()
            .unwrap()
            .contains("rm -rf build"),
        "{sarif:#}"
    );
    // Under the same policy nothing flips, and the SARIF says so with no result.
    let same = sandbox.tollgate_with(
        &own_config(),
        &[
            "replay",
            "runs/a",
            "runs/b/transcript.jsonl",
            "--sarif",
            "none.sarif",
        ],
    );
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    let none: Value =
        serde_json::from_str(&std::fs::read_to_string(sandbox.path().join("none.sarif")).unwrap())
            .unwrap();
    assert_eq!(none["runs"][0]["results"], serde_json::json!([]));
    std::fs::create_dir_all(sandbox.path().join("empty")).unwrap();
    let empty = sandbox.tollgate_with(&own_config(), &["replay", "empty"]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(
        text(&empty.stderr).contains("holds no transcript"),
        "{}",
        text(&empty.stderr)
    );
}

#[test]
fn check_calls_decides_a_100k_line_stream_in_one_process() {
    let sandbox = Sandbox::with_examples();
    let kinds = [
        r#""tool":"Bash","input":{"command":"cargo test --all"}"#,
        r#""tool":"Bash","input":{"command":"rm -rf /"}"#,
        r#""tool":"Read","input":{"file_path":"README.md"}"#,
        r#""tool":"Write","input":{"file_path":"src/x.rs","content":""}"#,
        r#""tool":"Edit","input":{"file_path":".git/config","old_string":"a","new_string":"b"}"#,
    ];
    let mut calls = String::new();
    for index in 0..100_000 {
        calls.push_str(&format!(
            "{{\"id\":{index},{}}}\n",
            kinds[index % kinds.len()]
        ));
    }
    calls.push_str("this line is not json\n");
    sandbox.write("calls.jsonl", &calls);
    let output = sandbox.tollgate_with(
        &own_config(),
        &[
            "check",
            "--policy",
            "policies/ci-default.yaml",
            "--calls",
            "calls.jsonl",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let out = text(&output.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 100_001);
    let decisions: Vec<String> = lines[..5]
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            format!(
                "{}:{}",
                v["decision"].as_str().unwrap(),
                v["step"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        decisions,
        ["allow:1c", "deny:1d", "allow:1c", "allow:1c", "deny:1g"]
    );
    let last: Value = serde_json::from_str(lines[100_000]).unwrap();
    assert_eq!(last["decision"], "deny");
    assert!(last["reason"].as_str().unwrap().contains("line 100001"));
    let middle: Value = serde_json::from_str(lines[99_999]).unwrap();
    assert_eq!(middle["id"], 99_999);
}

#[test]
fn denial_limits_stop_the_run_with_exit_3() {
    let sandbox = Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let denied = "    - - tool_use: {name: Bash, input: {command: curl http://127.0.0.1:9}}\n";
    sandbox.write(
        "t.yaml",
        &format!("{TASK_HEAD}limits: {{max_consecutive_denials: 2}}\nmodel:\n  provider: scripted\n  script:\n{denied}{denied}{denied}    - - text: never\n"),
    );
    let output = sandbox.tollgate_with(&own_config(), &["run", "t.yaml", "--out", "o"]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stdout));
    let all = transcript(&sandbox.path().join("o/transcript.jsonl"));
    let finished = all.last().unwrap();
    assert_eq!(finished["outcome"], "denial_limit");
    assert_eq!(finished["turns"], 2);
    assert_eq!(finished["denials_by_layer"]["mode"], 2);
    let report = junit(&sandbox.path().join("o/junit.xml"));
    assert_eq!(report.properties["denials_mode"], "2");
    assert_eq!(report.failures, 1);

    // A batch that crosses the limit still answers every tool_use.
    let batch = "    - - tool_use: {name: Bash, input: {command: curl a}}\n      - tool_use: {name: Bash, input: {command: curl b}}\n      - tool_use: {name: Bash, input: {command: curl c}}\n";
    sandbox.write("b.yaml", &format!("{TASK_HEAD}limits: {{max_denials: 2}}\nmodel:\n  provider: scripted\n  script:\n{batch}"));
    let output = sandbox.tollgate_with(&own_config(), &["run", "b.yaml", "--out", "b"]);
    assert_eq!(output.status.code(), Some(3));
    let all = transcript(&sandbox.path().join("b/transcript.jsonl"));
    crate::support::assert_every_tool_use_answered_once(&all);
    let statuses: Vec<&str> = events(&all, "tool_result")
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["denied", "denied", "cancelled"]);
}

/// `check --calls` reads the disk once for the whole stream (each folder listed once, each
/// link resolved once): every line must be decided as `check` decides it alone — links out
/// of the workspace, links back into it, names of another case, missing names, globs — and a
/// path asked about twice must be decided the same both times.
#[test]
fn check_calls_decides_each_line_as_check_decides_it_alone() {
    let sandbox = Sandbox::with_examples();
    sandbox.write("src/lib.rs", "fn a() {}\n");
    sandbox.write("Docs/Readme.md", "# r\n");
    std::os::unix::fs::symlink("/etc", sandbox.path().join("out")).unwrap();
    std::os::unix::fs::symlink("..", sandbox.path().join("src/up")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", sandbox.path().join("src/dangling")).unwrap();
    let calls = [
        ("Read", r#"{"file_path":"out/passwd"}"#),
        ("Read", r#"{"file_path":"OUT/passwd"}"#),
        ("Read", r#"{"file_path":"src/up/out/hostname"}"#),
        ("Read", r#"{"file_path":"src/up/src/lib.rs"}"#),
        ("Read", r#"{"file_path":"docs/readme.md"}"#),
        ("Read", r#"{"file_path":"Docs/Readme.md"}"#),
        ("Read", r#"{"file_path":"src/dangling"}"#),
        ("Bash", r#"{"command":"cat out/hostname"}"#),
        ("Bash", r#"{"command":"cat src/up/out/passwd | head -1"}"#),
        ("Bash", r#"{"command":"ls src/*.rs && cat Docs/*.md"}"#),
        ("Bash", r#"{"command":"wc -l out/*"}"#),
        (
            "Bash",
            r#"{"command":"cat src/missing/deeper.rs src/lib.rs"}"#,
        ),
        ("Write", r#"{"file_path":"out/new.txt","content":"x"}"#),
        ("Write", r#"{"file_path":"src/new.rs","content":"x"}"#),
        (
            "Edit",
            r#"{"file_path":"src/up/src/lib.rs","old_string":"a","new_string":"b"}"#,
        ),
        ("Grep", r#"{"pattern":"fn","path":"out"}"#),
        ("Glob", r#"{"pattern":"*.md","path":"src/up/Docs"}"#),
    ];
    let mut stream = String::new();
    for round in 0..2 {
        for (index, (tool, input)) in calls.iter().enumerate() {
            let id = round * calls.len() + index;
            stream.push_str(&format!(
                "{{\"id\":{id},\"tool\":\"{tool}\",\"input\":{input}}}\n"
            ));
        }
    }
    sandbox.write("calls.jsonl", &stream);
    let policy = ["--policy", "policies/ci-default.yaml"];
    let output = sandbox.tollgate_with(
        &own_config(),
        &[&["check"][..], &policy, &["--calls", "calls.jsonl"]].concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let streamed: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(streamed.len(), 2 * calls.len());
    let fields =
        |v: &Value| ["decision", "step", "layer", "rule", "reason"].map(|f| v[f].to_string());
    for (index, (tool, input)) in calls.iter().enumerate() {
        let alone = sandbox.tollgate_with(
            &own_config(),
            &[&["check"][..], &policy, &["--tool", tool, "--input", input]].concat(),
        );
        let alone: Value = serde_json::from_str(text(&alone.stdout).trim()).unwrap();
        for round in 0..2 {
            let line = &streamed[round * calls.len() + index];
            assert_eq!(
                fields(line),
                fields(&alone),
                "{tool} {input}, round {round}"
            );
        }
    }
    // The view resolves links: a read through a link out of the workspace is not allowed.
    for index in [0, 2, 7, 8] {
        assert_ne!(streamed[index]["decision"], "allow", "{}", streamed[index]);
    }
    assert_eq!(streamed[3]["decision"], "allow", "{}", streamed[3]);
}
