//! Faults and bad input (issue 18): a misbehaving provider, a flooding producer, a full
//! disk, two runs on one folder, inputs of unusual size. Each test reproduces one fault
//! against the real binary and asserts the record stays complete and the exit code honest.

use serde_json::{Value, json};

use super::providers::{KEY, assert_key_absent, done_turn, model_block, read_turn, run_task};
use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};

fn two_reads() -> crate::support::fake_model::Turn {
    turn(
        vec![
            text("Reading twice."),
            tool("Read", json!({"file_path": "notes.txt"})),
            tool("Read", json!({"file_path": "missing.txt"})),
        ],
        Tokens::default(),
    )
}

#[tokio::test]
async fn a_repeated_tool_use_id_is_a_protocol_error_that_is_retried() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let replies = vec![Reply::SameIds(two_reads()), read_turn(), done_turn()];
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 0, "{api:?}: {}\n{}", run.stdout, run.stderr);
        assert_eq!(run.retries(), vec![(json!("protocol"), Value::Null)]);
        let retry = run.of_type("api_retry")[0]["message"].as_str().unwrap();
        assert!(retry.contains("more than once"), "{retry}");
        // The refused response ran nothing: only the retried turn's one call.
        assert_eq!(run.of_type("tool_call").len(), 1);
        assert_eq!(server.violations(), Vec::<String>::new());
    }
}

#[tokio::test]
async fn repeated_ids_on_every_attempt_end_in_exit_4() {
    let replies = (0..4).map(|_| Reply::SameIds(two_reads())).collect();
    let server = FakeModel::start(KEY, replies).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "provider_error");
    assert!(run.of_type("tool_call").is_empty());
}

#[tokio::test]
async fn an_error_body_with_http_200_says_what_the_provider_said() {
    for (api, body) in [
        (
            Api::Anthropic,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"}}),
        ),
        (
            Api::OpenAi,
            json!({"error": {"message": "prompt is too long: 210000 tokens", "type": "invalid_request_error", "code": null}}),
        ),
    ] {
        let reply = Reply::Raw {
            content_type: "application/json",
            body: body.to_string(),
        };
        let server = FakeModel::start(KEY, vec![reply]).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 4, "{api:?}: {}", run.stderr);
        // Not retried: the provider said the request itself is wrong.
        assert_eq!(run.retries(), vec![]);
        let error = run.finished()["error"].as_str().unwrap();
        assert!(
            error.contains("invalid_request_error: prompt is too long: 210000 tokens"),
            "{error}"
        );
        assert!(run.stdout.contains("prompt is too long"), "{}", run.stdout);
        assert_key_absent(&run);
    }
}

#[tokio::test]
async fn an_html_page_with_http_200_is_named_by_its_title_and_retried() {
    let page = || Reply::Raw {
        content_type: "text/html",
        body: "<html><head><title>Captive portal: sign in</title></head><body>…</body></html>"
            .into(),
    };
    let server = FakeModel::start(KEY, (0..4).map(|_| page()).collect()).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(run.retries().len(), 3);
    assert_eq!(run.retries()[0].0, json!("not_event_stream"));
    let error = run.finished()["error"].as_str().unwrap();
    assert!(error.contains("Captive portal: sign in"), "{error}");
    // A JSON error body whose content type claims a stream is still read as an error.
    let body = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let reply = Reply::Raw {
        content_type: "text/event-stream",
        body: body.to_string(),
    };
    let server = FakeModel::start(KEY, vec![reply]).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    let error = run.finished()["error"].as_str().unwrap();
    assert!(
        error.contains("authentication_error: invalid x-api-key"),
        "{error}"
    );
}

/// An Anthropic stream whose one text block arrives as a single `bytes`-long delta.
fn one_huge_event(bytes: usize) -> String {
    let event = |data: Value| format!("event: x\ndata: {data}\n\n");
    let mut body = event(
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
    );
    body += &event(
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &event(
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "y".repeat(bytes)}}),
    );
    body += &event(json!({"type": "content_block_stop", "index": 0}));
    body += &event(
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
    );
    body + &event(json!({"type": "message_stop"}))
}

/// 8 MB: large enough that the old quadratic reader took seconds of CPU, small enough for
/// a debug build; `benches/faults.rs` measures 20 MB.
#[tokio::test]
async fn an_eight_megabyte_event_is_read_whole() {
    let reply = Reply::Raw {
        content_type: "text/event-stream",
        body: one_huge_event(8 * 1024 * 1024),
    };
    let server = FakeModel::start(KEY, vec![reply]).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let message = run.of_type("assistant_message")[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .len();
    assert_eq!(message, 8 * 1024 * 1024);
}

#[test]
fn check_calls_answers_every_input_line_even_blank_or_binary_ones() {
    let sandbox = crate::support::Sandbox::with_examples();
    let mut calls = Vec::new();
    calls.extend_from_slice(
        b"{\"id\":1,\"tool\":\"Read\",\"input\":{\"file_path\":\"README.md\"}}\n",
    );
    calls.extend_from_slice(b"\n");
    calls.extend_from_slice(b"{not json\n");
    calls.extend_from_slice(b"\xff\xfe\x00binary\r\n");
    calls.extend_from_slice(b"   \n");
    calls.extend_from_slice(
        b"{\"id\":6,\"tool\":\"Write\",\"input\":{\"file_path\":\"a\",\"content\":\"x\"}}",
    );
    std::fs::write(sandbox.path().join("calls.jsonl"), calls).unwrap();
    let output = sandbox.tollgate(&[
        "check",
        "--policy",
        "policies/read-only.yaml",
        "--mode",
        "dontAsk",
        "--calls",
        "calls.jsonl",
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let reasons: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["decision"].as_str().unwrap(),
                line["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 6, "{reasons:#?}");
    assert_eq!(reasons[0].0, "allow");
    assert_eq!(reasons[1], ("deny", "line 2 is blank, not a call"));
    assert!(
        reasons[2].1.starts_with("line 3 is not a call"),
        "{reasons:?}"
    );
    assert_eq!(reasons[3], ("deny", "line 4 is not UTF-8 text"));
    assert_eq!(reasons[4], ("deny", "line 5 is blank, not a call"));
    assert_eq!((reasons[5].0, &lines[5]["id"]), ("deny", &json!(6)));
}

/// A scripted task whose one answer is `answer`, with its workdir beside it.
fn scripted_task(sandbox: &crate::support::Sandbox, answer: &str) -> String {
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let task = json!({
        "version": 1, "name": "faults", "prompt": "Say something.", "workdir": "ws",
        "tools": ["Read"], "mode": "dontAsk",
        "model": {"provider": "scripted", "name": "script", "script": [[{"text": answer}]]},
    });
    sandbox.write("task.yaml", &task.to_string());
    "task.yaml".into()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_second_run_on_a_locked_output_folder_refuses_at_start() {
    let sandbox = crate::support::Sandbox::empty();
    let task = scripted_task(&sandbox, "Done.");
    let out = sandbox.path().join("out");
    let (_, lock) = tollgate::out_dir::claim(&out).unwrap();
    let output = sandbox.tollgate(&["run", &task, "--out", "out"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(&out.canonicalize().unwrap().display().to_string())
            && message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    assert!(!out.join("transcript.jsonl").exists());
    drop(lock);
    let output = sandbox.tollgate(&["run", &task, "--out", "out"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn a_report_that_cannot_be_written_exits_5_naming_the_file_once() {
    let sandbox = crate::support::Sandbox::empty();
    let task = scripted_task(&sandbox, "Done.");
    // A folder where the report belongs: its rename fails as on a read-only or full disk.
    std::fs::create_dir_all(sandbox.path().join("out/junit.xml/occupied")).unwrap();
    let output = sandbox.tollgate(&["run", &task, "--out", "out"]);
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.matches("junit.xml").count(), 1, "{message}");
    assert_eq!(message.matches("tollgate: error").count(), 1, "{message}");
    let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_eq!(all.last().unwrap()["type"], "run_finished");
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.path().join("out"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

/// A shell line that runs the rest of its arguments under a file-size limit of 64 blocks
/// (32–64 KiB); exit 99 when the shell cannot set one. SIGXFSZ keeps its default action:
/// tollgate itself must turn the limit into a failed write, not a death.
const FILE_SIZE_LIMIT: &str = "ulimit -f 64 || exit 99; exec \"$0\" \"$@\"";

/// `tollgate run TASK --out out` in the sandbox, started by the shell line `shell`.
fn run_under(sandbox: &crate::support::Sandbox, shell: &str, task: &str) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(shell)
        .arg(env!("CARGO_BIN_EXE_tollgate"))
        .args(["run", task, "--out", "out"])
        .current_dir(sandbox.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn a_full_disk_keeps_the_transcript_valid_and_exits_5() {
    let sandbox = crate::support::Sandbox::empty();
    // 64 blocks of file size (32–64 KiB): enough for the run's start, not for the answer.
    let task = scripted_task(&sandbox, &"word ".repeat(40_000));
    let output = run_under(&sandbox, FILE_SIZE_LIMIT, &task);
    if output.status.code() == Some(99) {
        return crate::support::skip::skip("this shell cannot set a file-size limit (ulimit -f)");
    }
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.matches("transcript.jsonl").count(), 1, "{message}");
    assert_eq!(message.matches("(os error").count(), 1, "{message}");
    let text = std::fs::read_to_string(sandbox.path().join("out/transcript.jsonl")).unwrap();
    assert!(text.ends_with('\n'));
    let types: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["type"].clone())
        .collect();
    assert_eq!(types[0], "run_started");
    assert!(!types.contains(&json!("assistant_message")), "{types:?}");
}

#[test]
fn a_producer_that_never_stops_ends_at_max_turns_with_bad_lines_recorded() {
    use std::io::{BufRead, Write};
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    // The first call waits for `gate`, made once stdin's bad lines were read: the run cannot
    // finish before its input is queued, however the threads are scheduled. It is made beside
    // the workspace: made inside, the call's effect ledger would see a file appear during a
    // read-only call.
    let wait = json!([{"tool_use": {"name": "Bash", "input": {"command": "until [ -e ../gate ]; do sleep 0.02; done"}}}]);
    let answer = || json!([{"text": "Noted."}]);
    let mut script = vec![wait];
    script.extend((0..4).map(|_| answer()));
    let task = json!({
        "version": 1, "name": "flood", "prompt": "Wait for messages.", "workdir": "ws",
        "tools": ["Bash"], "mode": "bypassPermissions", "limits": {"max_turns": 3},
        "model": {"provider": "scripted", "name": "script", "script": script},
    });
    sandbox.write("task.yaml", &task.to_string());
    let mut child = crate::support::tollgate_in(sandbox.path())
        .args([
            "run",
            "task.yaml",
            "--out",
            "out",
            "--input-format",
            "stream-json",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // `yes` after three lines: it stops only when the run has gone and the pipe breaks.
    let producer = std::thread::spawn(move || {
        stdin
            .write_all(b"{\"type\":\"user\",\"content\":\"first\"}\n\xff\xfe not text\n{broken\n")
            .unwrap();
        let line = b"{\"type\":\"user\",\"content\":\"more\"}\n".repeat(100);
        while stdin.write_all(&line).is_ok() {}
    });
    let mut log = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("stdin line 3: skipped") {
            std::fs::write(sandbox.path().join("gate"), "").unwrap();
        }
    }
    let status = child.wait().unwrap();
    producer.join().unwrap();
    // The model stopping when the queue is momentarily empty ends the run as designed; a
    // queue that never empties reaches max_turns. Either way the exit is a normal one.
    let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
    let finished = all.last().unwrap();
    assert_eq!(finished["type"], "run_finished");
    let ended = (status.code(), finished["outcome"].as_str().unwrap());
    assert!(
        ended == (Some(1), "max_turns") || ended == (Some(0), "success"),
        "{ended:?}\n{log}"
    );
    let skipped: Vec<(u64, &str)> = crate::support::events(&all, "input_skipped")
        .iter()
        .map(|e| (e["line"].as_u64().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(skipped[0], (2, "not UTF-8 text"));
    assert_eq!(skipped[1].0, 3);
    let queued = crate::support::events(&all, "queued_message");
    assert_eq!(queued[0]["content"], "first");
    // Bounded by the read-ahead, not by how fast the producer writes.
    assert!(queued.len() <= 3 * 64, "{} messages queued", queued.len());
}

#[test]
fn a_megabyte_path_is_refused_with_a_sentence() {
    let sandbox = crate::support::Sandbox::with_examples();
    let call = json!({"id": 1, "tool": "Read", "input": {"file_path": "a/".repeat(500_000)}});
    sandbox.write("calls.jsonl", &format!("{call}\n"));
    let output = sandbox.tollgate(&[
        "check",
        "--mode",
        "bypassPermissions",
        "--calls",
        "calls.jsonl",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["decision"], "deny");
    assert_eq!(
        line["reason"],
        "the path is 1000000 bytes long, over the 4096-byte limit"
    );
}

/// The quickstart's transcript: a real run with most kinds of events in it.
fn quickstart_transcript(sandbox: &crate::support::Sandbox) -> String {
    let output = sandbox.tollgate(&["run", "examples/quickstart.yaml", "--out", "run"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::read_to_string(sandbox.path().join("run/transcript.jsonl")).unwrap()
}

#[test]
fn every_transcript_event_reads_back_as_the_same_typed_event() {
    let sandbox = crate::support::Sandbox::with_examples();
    let text = quickstart_transcript(&sandbox);
    for line in text.lines() {
        let mut original: Value = serde_json::from_str(line).unwrap();
        // The line's integrity tag seals the event; it is no part of it.
        let tag = original.as_object_mut().and_then(|line| line.remove("tag"));
        assert!(tag.is_some_and(|tag| tag.as_str().is_some_and(|tag| tag.len() == 64)));
        let typed: tollgate::transcript::RecordedLine =
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
        let again = tollgate::transcript::TranscriptLine {
            seq: typed.seq,
            time: typed.time.clone(),
            agent_id: typed.agent_id.as_deref(),
            event: &typed.event,
        };
        assert_eq!(serde_json::to_value(&again).unwrap(), original);
    }
}

fn replay_lines(run_started: &str, events: &[Value]) -> String {
    let mut text = format!("{run_started}\n");
    for (seq, event) in events.iter().enumerate() {
        let mut event = event.clone();
        event["seq"] = json!(seq + 2);
        event["time"] = json!("2026-11-30T00:00:00.000Z");
        text.push_str(&format!("{event}\n"));
    }
    text
}

fn call(id: &str, tool: &str, input: Value) -> Value {
    json!({"type": "tool_call", "id": id, "tool": tool, "input": input})
}

fn decided(id: &str, tool: &str, decision: &str) -> Value {
    json!({"type": "permission_decision", "id": id, "tool": tool, "decision": decision, "step": "1d", "layer": "rule", "reason": "recorded"})
}

#[test]
fn replay_pairs_decisions_by_position_and_refuses_ambiguous_transcripts() {
    let sandbox = crate::support::Sandbox::with_examples();
    let recorded = quickstart_transcript(&sandbox);
    let started = recorded.lines().next().unwrap();
    sandbox.write("wide.yaml", "permissions:\n  allow: ['Bash(rm:*)', Read]\n");
    let rm = json!({"command": "rm -rf build"});
    let readme = json!({"file_path": "README.md"});
    // One id for two calls in turn: paired by id alone, the later allow would hide that the
    // refused rm is now allowed.
    let reused = replay_lines(
        started,
        &[
            call("toolu_x", "Bash", rm.clone()),
            decided("toolu_x", "Bash", "deny"),
            call("toolu_x", "Read", readme.clone()),
            decided("toolu_x", "Read", "allow"),
        ],
    );
    sandbox.write("reused.jsonl", &reused);
    let output = sandbox.tollgate(&["replay", "reused.jsonl", "--policy", "wide.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let change: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (change["call"].clone(), change["widened"].clone()),
        (json!(1), json!(true))
    );
    // Two undecided calls with one id: which decision is whose cannot be known.
    let ambiguous = replay_lines(
        started,
        &[
            call("toolu_y", "Bash", rm),
            call("toolu_y", "Read", readme),
            decided("toolu_y", "Bash", "deny"),
            decided("toolu_y", "Read", "allow"),
        ],
    );
    sandbox.write("ambiguous.jsonl", &ambiguous);
    let output = sandbox.tollgate(&["replay", "ambiguous.jsonl", "--policy", "wide.yaml"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("ambiguous.jsonl:3: the tool_use id \"toolu_y\""),
        "{}",
        stderr(&output)
    );
}

/// A Skill call is judged again like any other, not skipped: a policy that now allows a
/// refused skill is a widening, and an agent-mode skill of the workdir still answers to the
/// Agent rules.
#[test]
fn replay_judges_skill_calls_again() {
    let sandbox = crate::support::Sandbox::with_examples();
    let recorded = quickstart_transcript(&sandbox);
    let started = recorded.lines().next().unwrap();
    sandbox.write(
        "ws/skills/fixer/SKILL.md",
        "---\nname: fixer\ndescription: Fixes.\nmode: agent\n---\nFix it.\n",
    );
    let transcript = replay_lines(
        started,
        &[
            call("toolu_a", "Skill", json!({"skill": "notes"})),
            decided("toolu_a", "Skill", "deny"),
            call("toolu_b", "Skill", json!({"skill": "fixer"})),
            decided("toolu_b", "Skill", "deny"),
        ],
    );
    sandbox.write("skills.jsonl", &transcript);
    let cases = [
        ("permissions:\n  allow: ['Skill(notes)']\n", 1, vec![1]),
        ("permissions:\n  allow: ['Skill(*)']\n", 1, vec![1, 2]),
        (
            "permissions:\n  allow: ['Skill(*)']\n  deny: ['Agent(general)']\n",
            1,
            vec![1],
        ),
        ("permissions:\n  allow: ['Skill(other)']\n", 0, vec![]),
    ];
    for (policy, code, widened) in cases {
        sandbox.write("p.yaml", policy);
        let output = sandbox.tollgate(&[
            "replay",
            "skills.jsonl",
            "--policy",
            "p.yaml",
            "--workdir",
            "ws",
        ]);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{policy}{}",
            stderr(&output)
        );
        let calls: Vec<u64> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|change| change["widened"] == json!(true))
            .map(|change| change["call"].as_u64().unwrap())
            .collect();
        assert_eq!(calls, widened, "{policy}");
    }
}

/// A call replay has no tool for, or whose input its tool rejects, is refused as the run and
/// `check` refuse it (step 0, the pool), not skipped: a recorded allow of it is a change. An MCP
/// call is judged by its stand-in, as `check` judges it, so a policy that now allows it is a
/// widening.
#[test]
fn replay_refuses_an_unknown_tool_and_an_invalid_input_as_run_and_check_do() {
    let sandbox = crate::support::Sandbox::with_examples();
    let recorded = quickstart_transcript(&sandbox);
    let started = recorded.lines().next().unwrap();
    let transcript = replay_lines(
        started,
        &[
            call("toolu_a", "Teleport", json!({})),
            decided("toolu_a", "Teleport", "allow"),
            call("toolu_b", "Read", json!({"path": "README.md"})),
            decided("toolu_b", "Read", "allow"),
            call("toolu_c", "mcp__docs__search", json!({"q": "x"})),
            decided("toolu_c", "mcp__docs__search", "deny"),
        ],
    );
    sandbox.write("odd.jsonl", &transcript);
    sandbox.write("p.yaml", "permissions:\n  allow: [mcp__docs__search]\n");
    let output = sandbox.tollgate(&["replay", "odd.jsonl", "--policy", "p.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let changes: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let after = |index: usize| {
        let after = &changes[index]["after"];
        (
            after["decision"].as_str().unwrap().to_string(),
            after["step"].as_str().unwrap().to_string(),
            after["reason"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(changes.len(), 3, "{changes:?}");
    let (decision, step, reason) = after(0);
    assert_eq!((decision.as_str(), step.as_str()), ("deny", "0"));
    assert_eq!(reason, "No such tool available: Teleport");
    let (decision, step, reason) = after(1);
    assert_eq!((decision.as_str(), step.as_str()), ("deny", "0"));
    assert!(reason.starts_with("invalid input for Read"), "{reason}");
    assert_eq!(changes[2]["widened"], json!(true));
    // `check` says the same of the same calls.
    for (tool, input, said) in [
        ("Teleport", r#"{}"#, reason_of(&changes[0])),
        ("Read", r#"{"path": "README.md"}"#, reason_of(&changes[1])),
    ] {
        let output = sandbox.tollgate(&["check", "--tool", tool, "--input", input]);
        let checked: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            (checked["step"].as_str(), checked["reason"].as_str()),
            (Some("0"), Some(said.as_str())),
            "{tool}"
        );
    }
}

fn reason_of(change: &Value) -> String {
    change["after"]["reason"].as_str().unwrap().to_string()
}

#[test]
fn file_tools_refuse_a_fifo_at_once_instead_of_waiting_on_it() {
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let pipe = std::ffi::CString::new(
        sandbox
            .path()
            .join("ws/pipe")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path it is given.
    assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o600) }, 0);
    let calls = json!([
        {"tool_use": {"name": "Read", "input": {"file_path": "pipe"}}},
        {"tool_use": {"name": "Grep", "input": {"pattern": "x", "path": "pipe"}}},
        {"tool_use": {"name": "Edit", "input": {"file_path": "pipe", "old_string": "a", "new_string": "b"}}},
    ]);
    let task = json!({
        "version": 1, "name": "fifo", "prompt": "Read the pipe.", "workdir": "ws",
        "tools": ["Read", "Grep", "Edit"], "mode": "bypassPermissions",
        "model": {"provider": "scripted", "name": "script", "script": [calls, [{"text": "Done."}]]},
    });
    sandbox.write("task.yaml", &task.to_string());
    let output = sandbox.tollgate(&["run", "task.yaml", "--out", "out"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
    let results: Vec<(&str, &str)> = crate::support::events(&all, "tool_result")
        .iter()
        .map(|e| (e["tool"].as_str().unwrap(), e["content"].as_str().unwrap()))
        .collect();
    // A blocked open would show as the tool timeout's error instead (Write is refused on a
    // file it has not read before it opens anything; its open is tested in the library).
    assert_eq!(results.len(), 3, "{results:?}");
    for (tool, content) in results {
        assert!(
            content.contains("is a FIFO, not a regular file"),
            "{tool}: {content}"
        );
    }
}

/// Makes the results folder unwritable `how`; returns the shell line the run starts under.
fn unwritable_results(sandbox: &crate::support::Sandbox, how: &str) -> &'static str {
    match how {
        // The transcript fits the limit, the offloaded result not.
        "file-size limit" => FILE_SIZE_LIMIT,
        // A file where the folder belongs, as when the folder is removed and replaced.
        _ => {
            std::fs::create_dir_all(sandbox.path().join("out")).unwrap();
            std::fs::write(sandbox.path().join("out/results"), "not a folder").unwrap();
            "exec \"$0\" \"$@\""
        }
    }
}

#[test]
fn a_result_file_that_cannot_be_written_ends_the_run_with_exit_5_and_its_record() {
    for how in ["file-size limit", "folder replaced by a file"] {
        let sandbox = crate::support::Sandbox::empty();
        std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
        // About 110 KB of output: over Bash's offload threshold and the file-size limit. The
        // command's own write over the limit must still end it by SIGXFSZ (128 + 25), which
        // tollgate ignores for itself only.
        let command = "seq 1 20000; head -c 100000 /dev/zero > big; echo \"exit $?\"";
        let call = json!([{"tool_use": {"name": "Bash", "input": {"command": command}}}]);
        let task = json!({
            "version": 1, "name": "offload", "prompt": "Count.", "workdir": "ws",
            "tools": ["Bash"], "mode": "bypassPermissions",
            "model": {"provider": "scripted", "name": "script", "script": [call, [{"text": "Counted."}]]},
        });
        sandbox.write("task.yaml", &task.to_string());
        let shell = unwritable_results(&sandbox, how);
        let output = run_under(&sandbox, shell, "task.yaml");
        if output.status.code() == Some(99) {
            crate::support::skip::skip(&format!(
                "{how}: this shell cannot set a file-size limit (ulimit -f)"
            ));
            continue;
        }
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(5), "{how}: {message}");
        assert_eq!(
            message.matches("tollgate: error").count(),
            1,
            "{how}: {message}"
        );
        assert_eq!(message.matches("results/").count(), 1, "{how}: {message}");
        assert_eq!(message.matches("(os error").count(), 1, "{how}: {message}");
        let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
        crate::support::assert_every_tool_use_answered_once(&all);
        let result = crate::support::events(&all, "tool_result")[0]["content"]
            .as_str()
            .unwrap();
        assert!(result.contains("could not be saved"), "{how}: {result}");
        let ended = if how == "file-size limit" {
            "exit 153"
        } else {
            "exit 0"
        };
        assert!(result.lines().any(|line| line == ended), "{how}: {result}");
        // The run stopped at that batch: no further request, a whole record, the reports.
        assert_eq!(
            crate::support::events(&all, "model_request").len(),
            1,
            "{how}"
        );
        let finished = all.last().unwrap();
        assert_eq!(
            (
                &finished["type"],
                &finished["outcome"],
                &finished["exit_code"]
            ),
            (&json!("run_finished"), &json!("output_failed"), &json!(5)),
            "{how}"
        );
        let junit = std::fs::read_to_string(sandbox.path().join("out/junit.xml")).unwrap();
        assert!(junit.contains("output_failed"), "{how}: {junit}");
    }
}

// ---- Faults that must end in a whole record: extreme values, endless bodies, no usage,
// ---- closed stdout, SIGHUP, batch output and journals, checks on the run's clock.

/// A `429` whose `retry-after` no `Duration` can hold, in every spelling, from either API:
/// the backoff applies and the run goes on.
#[tokio::test]
async fn a_retry_after_past_any_clock_falls_back_to_the_backoff() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let limited = |name: &'static str, value: &'static str| Reply::Status {
            status: 429,
            headers: vec![(name, value)],
            kind: "rate_limit_error",
            message: "slow down".into(),
        };
        let replies = vec![
            limited("retry-after", "1e20"),
            limited("retry-after-ms", "18446744073709551615000"),
            limited("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
            done_turn(),
        ];
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 0, "{api:?}: {}", run.stderr);
        assert_eq!(run.retries().len(), 3, "{api:?}");
        for retry in run.of_type("api_retry") {
            assert!(retry["delay_ms"].as_u64().unwrap() <= 60_000, "{retry}");
        }
        assert_eq!(run.finished()["outcome"], "success");
    }
}

/// Every numeric knob of a task at the extremes: a value past its documented maximum is a
/// config error at its line (exit 2); one that is harmless however large runs (exit 0).
#[test]
fn every_numeric_knob_at_its_extremes_is_refused_at_load_or_harmless() {
    let huge = "1e19";
    let u32_max = "4294967295";
    let u64_max = "18446744073709551615";
    let model = |extra: &str| {
        format!("model:\n  provider: scripted\n  name: s\n{extra}  script: [[{{text: done}}]]\n")
    };
    let limits = |line: &str| format!("limits:\n  {line}\n");
    let check = |line: &str| format!("checks:\n  - name: c\n    run: 'true'\n    {line}\n");
    let refused: Vec<(String, &str)> = vec![
        (limits(&format!("timeout: {huge}")), "limits.timeout"),
        (
            limits(&format!("tool_timeout: {huge}")),
            "limits.tool_timeout",
        ),
        (limits("timeout: -1"), "limits.timeout"),
        (limits("timeout: .nan"), "limits.timeout"),
        (limits("timeout: .inf"), "limits.timeout"),
        (
            limits(&format!("max_parallel_tools: {u64_max}")),
            "max_parallel_tools",
        ),
        (limits("max_cost_usd: .inf"), "max_cost_usd"),
        (
            model(&format!("  timeouts: {{connect: {huge}}}\n")),
            "timeouts.connect",
        ),
        (
            model(&format!("  timeouts: {{first_event: {huge}}}\n")),
            "timeouts.first_event",
        ),
        (
            model(&format!("  timeouts: {{idle: {huge}}}\n")),
            "timeouts.idle",
        ),
        (
            model(&format!("  timeouts: {{request: {huge}}}\n")),
            "timeouts.request",
        ),
        (
            model(&format!("  retries: {{base_delay: {huge}}}\n")),
            "retries.base_delay",
        ),
        (
            model(&format!("  retries: {{max_delay: {huge}}}\n")),
            "retries.max_delay",
        ),
        (
            model(&format!("  retries: {{max: {u32_max}}}\n")),
            "retries.max",
        ),
        (
            check(&format!("retry: {{max_attempts: {u32_max}}}")),
            "retry.max_attempts",
        ),
        (check(&format!("timeout: {u64_max}")), "timeout"),
    ];
    let harmless: Vec<String> = vec![
        limits(&format!("max_turns: {u32_max}")),
        limits(&format!("max_input_tokens: {u64_max}")),
        limits(&format!("max_output_tokens: {u64_max}")),
        limits(&format!("max_denials: {u32_max}")),
        limits(&format!("max_consecutive_denials: {u32_max}")),
        limits(&format!("message_result_chars: {u64_max}")),
        limits(&format!("max_result_chars: {{Bash: {u64_max}}}")),
        limits("timeout: 604800"),
        limits("tool_timeout: 86400"),
        model("  max_tokens: 4294967295\n"),
        model(
            "  timeouts: {connect: 86400, first_event: 86400, idle: 86400, request: 86400}\n  retries: {max: 100, base_delay: 3600, max_delay: 3600}\n",
        ),
        format!("reminders:\n  full_every: {u32_max}\n"),
        format!("subagents:\n  max_turns: {u32_max}\n"),
        check("retry: {max_attempts: 100}"),
    ];
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let head =
        "version: 1\nname: knobs\nprompt: go\nworkdir: ws\nmode: dontAsk\ntools: [Read, Bash]\n";
    let task = |block: &str| {
        let model_given = block.starts_with("model:");
        let default_model = if model_given {
            String::new()
        } else {
            model("")
        };
        format!("{head}{default_model}{block}")
    };
    for (block, key) in &refused {
        sandbox.write("task.yaml", &task(block));
        let output = sandbox.tollgate(&["run", "task.yaml", "--out", "out"]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{block}{message}");
        assert!(message.contains("task.yaml:"), "{block}{message}");
        assert!(message.contains(key), "{block}{message}");
        assert!(!message.contains("panicked"), "{block}{message}");
    }
    for block in &harmless {
        sandbox.write("task.yaml", &task(block));
        let _ = std::fs::remove_dir_all(sandbox.path().join("out"));
        let output = sandbox.tollgate(&["run", "task.yaml", "--out", "out"]);
        assert_eq!(output.status.code(), Some(0), "{block}{}", stderr(&output));
    }
}

/// A 500 whose body never ends: its first 64 KiB are read, the message says it was cut,
/// and the run does not hold the body (nor wait for it to end).
#[tokio::test]
async fn an_endless_error_body_is_cut_and_named() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let replies = (0..4).map(|_| Reply::EndlessBody { status: 500 }).collect();
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 4, "{api:?}: {}", run.stderr);
        let error = run.finished()["error"].as_str().unwrap();
        assert!(error.contains("HTTP 500"), "{error}");
        assert!(error.contains("the body was cut at 64 KiB"), "{error}");
        assert!(error.len() < 2000, "{} bytes", error.len());
        assert_eq!(run.retries().len(), 3);
    }
}

/// A model block with these timeouts and no retry.
fn model_with_timeouts(api: Api, server: &FakeModel, timeouts: &str) -> String {
    let block = model_block(api, server, "");
    let head = block.split("  timeouts:").next().unwrap().to_string();
    format!("{head}  timeouts: {timeouts}\n  retries: {{max: 0}}\n")
}

/// `: keepalive` comments or a line that never ends are not events: `first_event` and
/// `idle` still end the request, long before `request`.
#[tokio::test]
async fn keepalives_and_partial_lines_do_not_reset_the_event_timeouts() {
    let every = std::time::Duration::from_millis(50);
    let cases = [
        (0, ": keepalive\n\n", "first_event"),
        (0, "d", "first_event"),
        (3, ": keepalive\n\n", "idle"),
        (3, "x", "idle"),
    ];
    for api in [Api::Anthropic, Api::OpenAi] {
        for (events, chunk, which) in cases {
            let reply = Reply::Drip {
                turn: turn(vec![text("Reading the notes slowly.")], Tokens::default()),
                events,
                chunk,
                every,
            };
            let server = FakeModel::start(KEY, vec![reply]).await;
            let model = model_with_timeouts(
                api,
                &server,
                "{connect: 2, first_event: 1, idle: 1, request: 20}",
            );
            let started = std::time::Instant::now();
            let run = run_task(&model, "", &[]).await;
            assert_eq!(run.code, 4, "{api:?} {chunk:?}: {}", run.stderr);
            let error = run.finished()["error"].as_str().unwrap();
            assert!(
                error.contains(&format!("timeouts.{which}")),
                "{api:?} {chunk:?}: {error}"
            );
            // Not a timed assertion of speed: `request` (20 s) must not be what ended it.
            assert!(!error.contains("timeouts.request"), "{error}");
            assert!(started.elapsed() < std::time::Duration::from_secs(15));
        }
    }
}

/// A priced model whose stream carries no usage: each request is charged the estimate, the
/// budget stops the run, and every report says the usage was estimated.
#[tokio::test]
async fn a_budget_holds_when_the_provider_sends_no_usage() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let reading = || {
            Reply::NoUsage(turn(
                vec![
                    text("Reading the notes again."),
                    tool("Read", json!({"file_path": "notes.txt"})),
                ],
                Tokens::default(),
            ))
        };
        let server = FakeModel::start(KEY, (0..12).map(|_| reading()).collect()).await;
        // $10 per million tokens either way: each request's estimate is a few thousand
        // tokens of prompt, so the $0.05 holds a few requests, not twelve.
        let model = model_block(api, &server, "  pricing: {input: 10, output: 10}\n");
        let run = run_task(&model, "limits:\n  max_cost_usd: 0.05\n", &[]).await;
        assert_eq!(run.code, 1, "{api:?}: {}\n{}", run.stdout, run.stderr);
        let finished = run.finished();
        assert_eq!(finished["outcome"], "max_budget_usd", "{finished}");
        let requests = server.requests().len();
        assert!(requests < 12, "{api:?}: {requests} requests");
        let messages = run.of_type("assistant_message");
        assert_eq!(messages.len(), requests);
        for message in &messages {
            assert_eq!(message["usage_source"], "estimated", "{message}");
            assert!(message["usage"]["input_tokens"].as_u64().unwrap() > 0);
            assert!(message["cost_usd"].as_f64().unwrap() > 0.0);
        }
        let cost = finished["total_cost_usd"].as_f64().unwrap();
        assert!(cost > 0.0 && cost <= 0.05, "{cost}");
        assert!(
            run.read("junit.xml")
                .contains("name=\"usage\" value=\"estimated ("),
            "{}",
            run.read("junit.xml")
        );
        assert!(run.stdout.contains("usage estimated ("), "{}", run.stdout);
        assert!(!run.stdout.contains("cost $0.0000"), "{}", run.stdout);
    }
}

/// `tollgate run … | true`: stdout is closed before the summary (and, under GitHub
/// Actions, before the annotations); the run keeps its own exit code and its record.
#[test]
fn a_closed_stdout_keeps_the_runs_exit_code_and_record() {
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    // One refused call: exit 3, and an annotation to print under GitHub Actions.
    let task = json!({
        "version": 1, "name": "closed", "prompt": "Write.", "workdir": "ws",
        "tools": ["Write"], "mode": "dontAsk",
        "model": {"provider": "scripted", "name": "script", "script": [
            [{"tool_use": {"name": "Write", "input": {"file_path": "a", "content": "x"}}}],
            [{"text": "Refused."}],
        ]},
    });
    sandbox.write("task.yaml", &task.to_string());
    for github in [false, true] {
        let _ = std::fs::remove_dir_all(sandbox.path().join("out"));
        let mut command = crate::support::tollgate_in(sandbox.path());
        command
            .args(["run", "task.yaml", "--out", "out"])
            .current_dir(sandbox.path())
            .env_remove("RUST_LOG")
            .env_remove("GITHUB_STEP_SUMMARY")
            .env_remove("GITHUB_OUTPUT")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if github {
            command.env("GITHUB_ACTIONS", "true");
        } else {
            command.env_remove("GITHUB_ACTIONS");
        }
        let mut child = command.spawn().unwrap();
        // The read end closed before the run writes anything: every write gets EPIPE.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(3), "github {github}: {message}");
        assert!(!message.contains("panicked"), "{message}");
        let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
        assert_eq!(all.last().unwrap()["type"], "run_finished");
        assert!(sandbox.path().join("out/junit.xml").is_file());
    }
}

#[test]
fn a_batch_with_a_closed_stdout_keeps_its_exit_code() {
    let fleet = super::batch::Fleet::new(2, &[1]);
    let mut child = fleet
        .command("out")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"));
    assert!(fleet.path().join("out/junit.xml").is_file());
}

/// SIGHUP (a closed terminal, a runner ending the session) ends the run as SIGTERM does:
/// the running command is stopped, `run_finished` and the reports are written, exit 143.
#[test]
fn sighup_ends_the_run_like_sigterm_with_its_whole_record() {
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let task = json!({
        "version": 1, "name": "hangup", "prompt": "Wait.", "workdir": "ws",
        "tools": ["Bash"], "mode": "bypassPermissions",
        "model": {"provider": "scripted", "name": "script", "script": [
            [{"tool_use": {"name": "Bash", "input": {"command": "sleep 60"}}}],
            [{"text": "never reached"}],
        ]},
    });
    sandbox.write("task.yaml", &task.to_string());
    let mut child = crate::support::tollgate_in(sandbox.path())
        .args(["run", "task.yaml", "--out", "out"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let transcript_path = sandbox.path().join("out/transcript.jsonl");
    crate::support::wait_for_text(&transcript_path, "\"permission_decision\"");
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    let all = crate::support::transcript(&transcript_path);
    crate::support::assert_every_tool_use_answered_once(&all);
    let aborted = crate::support::events(&all, "query_aborted");
    assert_eq!(aborted[0]["by"], "sighup", "{aborted:?}");
    let finished = all.last().unwrap();
    assert_eq!(
        (&finished["type"], &finished["outcome"]),
        (&json!("run_finished"), &json!("terminated"))
    );
    assert!(sandbox.path().join("out/junit.xml").is_file());
}

/// A batch whose merged report cannot be written exits 5 naming the file once, leaves no
/// 0-byte or temp file, keeps the journals; the same command then finishes the job.
#[test]
fn a_batch_whose_report_cannot_be_written_exits_5_and_resumes() {
    let fleet = super::batch::Fleet::new(2, &[]);
    // A folder where the report belongs: its rename fails as on a read-only or full disk.
    std::fs::create_dir_all(fleet.path().join("out/junit.xml/occupied")).unwrap();
    let output = fleet.batch("out", &[]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(5), "{message}");
    assert_eq!(message.matches("junit.xml").count(), 1, "{message}");
    assert_eq!(message.matches("tollgate: error").count(), 1, "{message}");
    let names: Vec<String> = std::fs::read_dir(fleet.path().join("out"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|name| !name.ends_with(".tmp")),
        "{names:?}"
    );
    for name in ["tollgate.sarif", "summary.md", "report.html"] {
        let len = std::fs::metadata(fleet.path().join("out").join(name))
            .unwrap()
            .len();
        assert!(len > 0, "{name} is empty");
    }
    let run_id = fleet.journal("out", "r00")["run"]["run_id"].clone();
    std::fs::remove_dir_all(fleet.path().join("out/junit.xml")).unwrap();
    let output = fleet.batch("out", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(fleet.path().join("out/junit.xml").is_file());
    // Resumed, not redone: the finished repositories kept their runs.
    assert_eq!(fleet.journal("out", "r00")["run"]["run_id"], run_id);
}

/// A run folder inside the batch whose report cannot be written: that repository's record
/// is incomplete, and the batch says so with exit 5.
#[test]
fn a_repository_whose_run_report_cannot_be_written_makes_the_batch_exit_5() {
    let fleet = super::batch::Fleet::new(2, &[]);
    std::fs::create_dir_all(fleet.path().join("out/repos/r01/run/junit.xml/occupied")).unwrap();
    let output = fleet.batch("out", &[]);
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    let journal = fleet.journal("out", "r01");
    assert_eq!(journal["run"]["exit_code"], 5, "{journal}");
    assert!(
        journal["reason"].as_str().unwrap().contains("junit.xml"),
        "{journal}"
    );
    assert_eq!(fleet.journal("out", "r00")["outcome"], "changed");
}

/// A journal cut short (a full disk, a kill mid-copy) stops the batch at load with exit 2
/// naming the file and the byte; nothing runs again until the user says how to start over.
#[test]
fn a_journal_that_does_not_parse_stops_the_batch_naming_the_byte() {
    let fleet = super::batch::Fleet::new(2, &[]);
    let output = fleet.batch("out", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let path = fleet.path().join("out/repos/r00/journal.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..40]).unwrap();
    let transcript = fleet.path().join("out/repos/r00/run/transcript.jsonl");
    let before = std::fs::read_to_string(&transcript).unwrap();
    let output = fleet.batch("out", &[]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("r00/journal.json:"), "{message}");
    assert!(message.contains("at byte 40"), "{message}");
    assert!(message.contains("--rerun all"), "{message}");
    assert_eq!(std::fs::read_to_string(&transcript).unwrap(), before);
    let output = fleet.batch("out", &["--rerun", "all"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(fleet.journal("out", "r00")["outcome"], "changed");
}

/// A forge whose `Retry-After` is u64::MAX seconds: the repository fails saying so, the
/// batch ends with its reports, no panic.
#[tokio::test(flavor = "multi_thread")]
async fn a_forge_retry_after_past_any_clock_fails_the_repo_not_the_batch() {
    use super::batch::{Fleet, batch_async, git, publishing_task};
    let fleet = Fleet::new(1, &[]);
    let bare = fleet.path().join("remotes/r00.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    git(
        &fleet.path().join("r00"),
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    let forge = crate::support::fake_forge::FakeForge::start(u64::MAX).await;
    std::fs::write(fleet.path().join("task.yaml"), publishing_task(&forge)).unwrap();
    let output = batch_async(&fleet, &[]).await;
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    let journal = fleet.journal("out", "r00");
    assert_eq!(journal["outcome"], "failed");
    assert!(
        journal["reason"]
            .as_str()
            .unwrap()
            .contains("over the 3600s cap"),
        "{journal}"
    );
    assert!(fleet.path().join("out/junit.xml").is_file());
}

/// `limits.timeout` covers the checks: a check that would run longer than what is left of
/// the run's clock is stopped at the deadline and the run ends as timed out.
#[test]
fn the_checks_run_inside_the_runs_clock() {
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let task = json!({
        "version": 1, "name": "clock", "prompt": "Done.", "workdir": "ws",
        "tools": ["Read"], "mode": "dontAsk", "limits": {"timeout": 2},
        "checks": [{"name": "slow", "run": "sleep 30", "timeout": 60,
                    "retry": {"max_attempts": 100}}],
        "model": {"provider": "scripted", "name": "script", "script": [[{"text": "Done."}]]},
    });
    sandbox.write("task.yaml", &task.to_string());
    let output = sandbox.tollgate(&["run", "task.yaml", "--out", "out"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let all = crate::support::transcript(&sandbox.path().join("out/transcript.jsonl"));
    let finished = all.last().unwrap();
    assert_eq!(finished["outcome"], "timeout", "{finished}");
    let checks = crate::support::events(&all, "check_result");
    assert_eq!(checks.len(), 1, "{checks:?}");
    let output = checks[0]["output"].as_str().unwrap();
    assert!(output.contains("limits.timeout ran out"), "{output}");
}

/// A task's missing `workdir` is a config error at its line and column, and a 3 MB value is
/// not echoed whole.
#[test]
fn a_missing_workdir_is_located_and_not_echoed_whole() {
    let sandbox = crate::support::Sandbox::empty();
    // 3 MiB: under the task file's 4 MiB cap, far over what an error may echo.
    for workdir in ["missing".to_string(), "w".repeat(3 * 1024 * 1024)] {
        let task = format!(
            "version: 1\nname: w\nprompt: go\nmode: dontAsk\nworkdir: {workdir}\nmodel:\n  provider: scripted\n  script: [[{{text: done}}]]\n"
        );
        sandbox.write("task.yaml", &task);
        let output = sandbox.tollgate(&["run", "task.yaml", "--out", "out"]);
        let message = stderr(&output);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{}",
            &message[..message.len().min(500)]
        );
        assert!(
            message.contains("task.yaml:5:10: workdir"),
            "{}",
            &message[..message.len().min(500)]
        );
        assert!(message.len() < 4096, "{} bytes of error", message.len());
    }
}
