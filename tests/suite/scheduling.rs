//! S6 end to end: a hard stop with calls queued, a queued stdin message drained while a
//! `block` tool runs, and the json/stream-json outputs of the quickstart.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    Run, Sandbox, assert_every_tool_use_answered_once, events, tollgate_in, transcript,
    wait_for_text,
};

const TASK_HEAD: &str = "version: 1\nname: t\nprompt: go\nmode: dontAsk\nworkdir: ws\n";

#[test]
fn sigterm_with_calls_queued_answers_each_and_records_the_interrupt() {
    let sandbox = Sandbox::empty();
    std::fs::create_dir(sandbox.path().join("ws")).unwrap();
    sandbox.write("ws/b.txt", "b\n");
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow: ['Bash(sleep:*)', Write, Read]\n",
    );
    sandbox.write(
        "t.yaml",
        &format!(
            "{TASK_HEAD}model:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: sleep 60}}}}\n      - tool_use: {{name: Write, input: {{file_path: a.txt, content: x}}}}\n      - tool_use: {{name: Read, input: {{file_path: b.txt}}}}\n    - - text: never reached\n"
        ),
    );
    let mut child = tollgate_in(sandbox.path())
        .args(["run", "t.yaml", "--policy", "p.yaml", "--out", "out"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let transcript_path = sandbox.path().join("out/transcript.jsonl");
    // The Write waits for the running Bash: only one decision is written before the stop.
    wait_for_text(&transcript_path, "\"permission_decision\"");
    let started = Instant::now();
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "sleep 60 was not killed"
    );

    let all = transcript(&transcript_path);
    assert_every_tool_use_answered_once(&all);
    let results = events(&all, "tool_result");
    assert!(
        results.iter().all(|r| r["status"] == "cancelled"),
        "{results:?}"
    );
    for queued in &results[1..] {
        assert!(
            queued["content"]
                .as_str()
                .unwrap()
                .contains("interrupted by user")
                && queued["content"].as_str().unwrap().contains("not run"),
            "{queued}"
        );
    }
    assert_eq!(
        events(&all, "permission_decision").len(),
        1,
        "queued calls were decided"
    );
    assert!(
        !sandbox.path().join("ws/a.txt").exists(),
        "the queued Write ran"
    );
    let aborted = events(&all, "query_aborted");
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0]["by"], "sigterm");
    assert_eq!(aborted[0]["reason"], "aborted_tools");
    assert_eq!(aborted[0]["message"], "[Request interrupted by user]");
    assert_eq!(all.last().unwrap()["outcome"], "terminated");
    assert!(sandbox.path().join("out/junit.xml").exists());
}

#[test]
fn a_message_queued_while_a_block_tool_runs_goes_into_the_next_round() {
    let sandbox = Sandbox::empty();
    std::fs::create_dir(sandbox.path().join("ws")).unwrap();
    let fifo = sandbox.path().join("ws/pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    sandbox.write("p.yaml", "permissions:\n  allow: ['Bash(cat:*)']\n");
    sandbox.write(
        "t.yaml",
        &format!(
            "{TASK_HEAD}model:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: cat pipe}}}}\n    - - text: done\n"
        ),
    );
    let mut child = tollgate_in(sandbox.path())
        .args([
            "run",
            "t.yaml",
            "--policy",
            "p.yaml",
            "--out",
            "out",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .env("RUST_LOG", "tollgate=info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let transcript_path = sandbox.path().join("out/transcript.jsonl");
    // Bash is a `block` tool: while `cat` waits on the FIFO, the message must only queue.
    wait_for_text(&transcript_path, "\"permission_decision\"");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"type":"user","message":{{"role":"user","content":"also count the lines"}}}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("queued the user message") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no message was queued"
        );
    }
    std::fs::write(&fifo, "hello\n").unwrap();
    drop(stdin);
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{stdout}");

    let all = transcript(&transcript_path);
    assert_every_tool_use_answered_once(&all);
    let queued = events(&all, "queued_message");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["disposition"], "drained");
    assert_eq!(queued[0]["content"], "also count the lines");
    assert!(events(&all, "query_aborted").is_empty());
    assert_eq!(events(&all, "tool_result")[0]["content"], "hello");
    // Same query: the message rides with the tool result into the second request.
    assert_eq!(events(&all, "model_request").len(), 2);

    let streamed: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect();
    let kinds: Vec<&str> = streamed
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "init",
            "assistant",
            "tool_use",
            "permission_decision",
            "progress",
            "tool_result",
            "queued_message",
            "assistant",
            "result"
        ]
    );
    assert_eq!(streamed[4]["lines"], serde_json::json!(["hello"]));
    assert_eq!(streamed.last().unwrap()["outcome"], "success");
}

#[test]
fn json_output_is_the_result_alone_and_stream_json_parses_line_by_line() {
    for (format, expect_one) in [("json", true), ("stream-json", false)] {
        let sandbox = Sandbox::with_examples();
        let output = sandbox.tollgate(&[
            "run",
            "examples/quickstart.yaml",
            "--out",
            "out",
            "--output-format",
            format,
        ]);
        assert_eq!(output.status.code(), Some(0));
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
            .collect();
        let last = lines.last().unwrap();
        assert_eq!(last["type"], "result");
        assert_eq!(last["outcome"], "success");
        assert!(last["turns"].as_u64().unwrap() >= 1);
        assert!(
            last["permission_denials"].as_array().unwrap().len() == 1,
            "{last}"
        );
        if expect_one {
            assert_eq!(lines.len(), 1);
        } else {
            assert_eq!(lines[0]["type"], "init");
            assert!(lines[0]["tools"].is_array() && lines[0]["policy"].is_object());
        }
    }
}

/// Each Bash result records how its command ended as a type beside the model's text; a
/// failed command cancels the rest of the turn, which ran no command of its own.
#[test]
fn tool_results_record_the_command_outcome() {
    let run = Run::new()
        .policy("permissions:\n  allow: ['Bash(touch:*)', 'Bash(sleep:*)']\n")
        .task(&format!(
            "{TASK_HEAD}model:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: echo out}}}}\n    - - tool_use: {{name: Bash, input: {{command: ls missing}}}}\n      - tool_use: {{name: Bash, input: {{command: touch made}}}}\n    - - tool_use: {{name: Bash, input: {{command: sleep 5, timeout: 300}}}}\n    - - text: done\n"
        ))
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_every_tool_use_answered_once();
    let results = run.of_type("tool_result");
    let commands: Vec<&Value> = results.iter().map(|r| &r["command"]).collect();
    assert_eq!(
        commands,
        [
            &serde_json::json!({"ending": "exited", "code": 0}),
            &serde_json::json!({"ending": "exited", "code": 2}),
            &Value::Null,
            &serde_json::json!({"ending": "timed_out", "timeout_ms": 300}),
        ]
    );
    assert_eq!(results[0]["content"], "out");
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .ends_with("\n[exit code 2]"),
        "{}",
        results[1]
    );
    assert_eq!(results[2]["status"], "cancelled");
    assert!(
        results[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("[sibling_error: this call was not run"),
        "{}",
        results[2]
    );
    assert!(!run.ws.join("made").exists());
    assert_eq!(
        results[3]["content"],
        "[timed out after 0.3s; the command and its children were killed]"
    );
}
