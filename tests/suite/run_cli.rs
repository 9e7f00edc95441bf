//! `tollgate run` end to end: the quickstart, limits, checks and configuration errors.

use crate::support::{Sandbox, assert_every_tool_use_answered_once, events, junit, transcript};

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn quickstart_edits_refuses_rm_and_reports() {
    let sandbox = Sandbox::with_examples();
    let out = sandbox.path().join("out");
    let output = sandbox.tollgate(&[
        "run",
        "examples/quickstart.yaml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&output),
        stderr(&output)
    );

    let workspace = sandbox.path().join("examples/quickstart");
    let review = std::fs::read_to_string(workspace.join("src/review.md")).unwrap();
    assert!(
        review.contains("status: reviewed"),
        "the edit did not happen: {review}"
    );
    assert!(
        workspace.join("build/output.txt").exists(),
        "the denied rm -rf ran"
    );

    let all = transcript(&out.join("transcript.jsonl"));
    assert_eq!(all.first().unwrap()["type"], "run_started");
    assert_eq!(all.last().unwrap()["type"], "run_finished");
    assert_every_tool_use_answered_once(&all);
    let denials: Vec<_> = events(&all, "permission_decision")
        .into_iter()
        .filter(|e| e["decision"] == "deny")
        .collect();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0]["tool"], "Bash");
    assert_eq!(denials[0]["step"], "1d");
    assert_eq!(denials[0]["rule"]["rule"], "Bash(rm:*)");
    let finished = all.last().unwrap();
    assert_eq!(finished["outcome"], "success");
    assert_eq!(finished["denials"], 1);
    assert_eq!(finished["checks_passed"], 2);
    let tool_results = events(&all, "tool_result");
    assert_eq!(finished["tool_calls"], tool_results.len());

    let report = junit(&out.join("junit.xml"));
    assert_eq!(report.tests, 3);
    assert_eq!(report.failures, 0);
    assert_eq!(report.testcases.len(), 3);
    assert_eq!(report.properties["denials"], "1");
    assert_eq!(report.properties["turns"], finished["turns"].to_string());
    assert!(
        report.system_out.contains("rm -rf build"),
        "{}",
        report.system_out
    );

    let summary = stdout(&output);
    assert!(
        summary.contains("quickstart — success (exit 0)"),
        "{summary}"
    );
    assert!(summary.contains("denied Bash `rm -rf build`"), "{summary}");
}

#[test]
fn quickstart_runs_again_in_the_same_workspace() {
    let sandbox = Sandbox::with_examples();
    for run in ["one", "two"] {
        let output = sandbox.tollgate(&["run", "examples/quickstart.yaml", "--out", run]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "run {run}: {}",
            stdout(&output)
        );
    }
}

const TASK_HEAD: &str = "version: 1\nname: t\nprompt: go\nmode: dontAsk\n";

#[test]
fn malformed_task_exits_2_with_line_and_column_before_any_model_call() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "bad.yaml",
        &format!("{TASK_HEAD}modle:\n  provider: scripted\n"),
    );
    let output = sandbox.tollgate(&["run", "bad.yaml", "--out", "out"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("bad.yaml:5:1: unknown field `modle`"),
        "{message}"
    );
    assert!(
        !sandbox.path().join("out/transcript.jsonl").exists(),
        "a run started despite the bad task"
    );

    sandbox.write(
        "worse.yaml",
        &format!("{TASK_HEAD}model:\n  provider: scripted\n  script: [[{{txt: hi}}]]\n"),
    );
    let output = sandbox.tollgate(&["run", "worse.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("worse.yaml:7:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn malformed_policy_exits_2_naming_the_rule_line() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow:\n    - Read\n    - Bash(npm test\n",
    );
    sandbox.write(
        "t.yaml",
        &format!("{TASK_HEAD}model:\n  provider: scripted\n  script: [[{{text: hi}}]]\n"),
    );
    let output = sandbox.tollgate(&["run", "t.yaml", "--policy", "p.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("p.yaml:4:7:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn max_turns_stops_the_run_with_exit_1_and_a_complete_transcript() {
    let sandbox = Sandbox::empty();
    sandbox.write("ws/a.txt", "hello\n");
    let turn = "    - - tool_use: {name: Read, input: {file_path: a.txt}}\n";
    sandbox.write("t.yaml", &format!("{TASK_HEAD}workdir: ws\nlimits: {{max_turns: 2}}\nmodel:\n  provider: scripted\n  script:\n{turn}{turn}{turn}"));
    let output = sandbox.tollgate(&["run", "t.yaml", "--out", "out"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_every_tool_use_answered_once(&all);
    let finished = all.last().unwrap();
    assert_eq!(finished["outcome"], "max_turns");
    assert_eq!(finished["turns"], 2);
    let report = junit(&sandbox.path().join("out/junit.xml"));
    assert_eq!(report.failures, 1);
}

#[test]
fn failing_check_exits_1_and_fails_its_testcase() {
    let sandbox = Sandbox::empty();
    std::fs::create_dir(sandbox.path().join("ws")).unwrap();
    sandbox.write(
        "t.yaml",
        &format!("{TASK_HEAD}workdir: ws\nmodel:\n  provider: scripted\n  script: [[{{text: done}}]]\nchecks:\n  - name: ok\n    run: 'true'\n  - name: missing-file\n    run: test -f never.txt\n"),
    );
    let output = sandbox.tollgate(&["run", "t.yaml", "--out", "out"]);
    assert_eq!(output.status.code(), Some(1));
    let report = junit(&sandbox.path().join("out/junit.xml"));
    assert_eq!(
        report.testcases,
        vec![
            ("agent run".into(), false),
            ("check: ok".into(), false),
            ("check: missing-file".into(), true)
        ]
    );
    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_eq!(all.last().unwrap()["outcome"], "checks_failed");
}

#[test]
fn bad_tool_calls_become_error_results_and_the_run_goes_on() {
    let sandbox = Sandbox::empty();
    sandbox.write("ws/a.txt", "x\n");
    sandbox.write(
        "t.yaml",
        &format!(
            "{TASK_HEAD}workdir: ws\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Read, input: {{path: a.txt}}}}\n      - tool_use: {{name: Teleport, input: {{}}}}\n      - tool_use: {{name: Read, input: {{file_path: /etc/hostname}}}}\n      - tool_use: {{name: Bash, input: {{command: 'echo $(touch x)'}}}}\n    - - text: done\n"
        ),
    );
    let output = sandbox.tollgate(&["run", "t.yaml", "--out", "out"]);
    // The unknown tool and the calls outside the workspace are refused: exit 3.
    assert_eq!(output.status.code(), Some(3), "{}", stdout(&output));
    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_every_tool_use_answered_once(&all);
    let statuses: Vec<String> = events(&all, "tool_result")
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["error", "denied", "denied", "denied"]);
    let results = events(&all, "tool_result");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("invalid input for Read")
    );
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("No such tool available: Teleport")
    );
    assert!(
        results[2]["content"]
            .as_str()
            .unwrap()
            .contains("outside the workspace")
    );
    assert!(results.iter().all(|r| r["is_error"] == true));
}

#[test]
fn sigterm_during_a_command_kills_it_and_still_writes_everything() {
    use std::time::{Duration, Instant};
    let sandbox = Sandbox::empty();
    std::fs::create_dir(sandbox.path().join("ws")).unwrap();
    sandbox.write("p.yaml", "permissions:\n  allow: ['Bash(sleep:*)']\n");
    sandbox.write(
        "t.yaml",
        &format!("{TASK_HEAD}workdir: ws\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: sleep 60}}}}\n    - - text: never reached\n"),
    );
    let mut child = crate::support::tollgate_in(sandbox.path())
        .args(["run", "t.yaml", "--policy", "p.yaml", "--out", "out"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let transcript_path = sandbox.path().join("out/transcript.jsonl");
    // Wait (bounded) until the command has been allowed and started: the gate's decision is
    // written right before the call.
    crate::support::wait_for_text(&transcript_path, "\"permission_decision\"");
    let started = Instant::now();
    let pid = i32::try_from(child.id()).unwrap();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "sleep 60 was not killed"
    );
    let all = transcript(&transcript_path);
    assert_every_tool_use_answered_once(&all);
    let result = events(&all, "tool_result")[0];
    assert!(
        result["content"].as_str().unwrap().contains("interrupted"),
        "{result}"
    );
    assert_eq!(all.last().unwrap()["outcome"], "terminated");
    assert_eq!(junit(&sandbox.path().join("out/junit.xml")).failures, 1);
}
