//! Faults and bad input (issue 18): a misbehaving provider, a flooding producer, a full
//! disk, two runs on one folder, inputs of unusual size. Each test reproduces one fault
//! against the real binary and asserts the record stays complete and the exit code honest.

use serde_json::{Value, json};

use super::providers::{KEY, done_turn, model_block, read_turn, run_task};
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
        run.assert_key_absent();
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
    assert!(error.contains("authentication_error: invalid x-api-key"), "{error}");
}

/// An Anthropic stream whose one text block arrives as a single `bytes`-long delta.
fn one_huge_event(bytes: usize) -> String {
    let event = |data: Value| format!("event: x\ndata: {data}\n\n");
    let mut body = event(json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}));
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

#[tokio::test]
async fn one_twenty_megabyte_event_is_read_whole() {
    let reply = Reply::Raw {
        content_type: "text/event-stream",
        body: one_huge_event(20 * 1024 * 1024),
    };
    let server = FakeModel::start(KEY, vec![reply]).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let message = run.of_type("assistant_message")[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .len();
    assert_eq!(message, 20 * 1024 * 1024);
}

#[test]
fn check_calls_answers_every_input_line_even_blank_or_binary_ones() {
    let sandbox = crate::support::Sandbox::with_examples();
    let mut calls = Vec::new();
    calls.extend_from_slice(b"{\"id\":1,\"tool\":\"Read\",\"input\":{\"file_path\":\"README.md\"}}\n");
    calls.extend_from_slice(b"\n");
    calls.extend_from_slice(b"{not json\n");
    calls.extend_from_slice(b"\xff\xfe\x00binary\r\n");
    calls.extend_from_slice(b"   \n");
    calls.extend_from_slice(b"{\"id\":6,\"tool\":\"Write\",\"input\":{\"file_path\":\"a\",\"content\":\"x\"}}");
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
    assert!(reasons[2].1.starts_with("line 3 is not a call"), "{reasons:?}");
    assert_eq!(reasons[3], ("deny", "line 4 is not UTF-8 text"));
    assert_eq!(reasons[4], ("deny", "line 5 is blank, not a call"));
    assert_eq!((reasons[5].0, &lines[5]["id"]), ("deny", &json!(6)));
}
