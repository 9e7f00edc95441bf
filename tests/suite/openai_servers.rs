//! OpenAI-compatible servers as they are (issue 48): the binary against the fake server
//! behaving as llama-cpp-python's does (its recorded exchange replayed, its refusals
//! enforced), and against the plain fake server answering each way a server shows that it
//! cannot stream tool calls. Every run must make its tool call and finish; the switch to
//! whole responses is said once, in the transcript and on stderr.

use serde_json::{Value, json};

use super::providers::{KEY, done_turn, model_block, read_turn, run_task_with};
use crate::support::Finished;
use crate::support::fake_model::{Api, FakeModel, Reply};

const READ_ONLY: &str = "mode: dontAsk\ntools: [Read, Glob, Grep]\n";

async fn run(server: &FakeModel, extra: &str, flags: &[&str]) -> Finished {
    run_task_with(
        READ_ONLY,
        &model_block(Api::OpenAi, server, extra),
        "limits: {max_turns: 6}\n",
        &[],
        flags,
    )
    .await
}

/// The run read notes.txt through its tool call and ended with the model's answer.
fn assert_read_and_finished(run: &Finished) {
    run.assert_code(0);
    assert_eq!(run.finished()["outcome"], "success");
    assert_eq!(
        run.result("Read", 0)["status"],
        "success",
        "{:#?}",
        run.events()
    );
    assert!(run.result_text("Read", 0).contains("the build is green"));
    run.assert_every_tool_use_answered_once();
}

/// Exactly one `streaming_off`, in turn 1, and the warning line on stderr once.
fn assert_fell_back_once(run: &Finished) -> String {
    let off = run.of_type("streaming_off");
    assert_eq!(off.len(), 1, "{:#?}", run.events());
    assert_eq!(off[0]["turn"], 1);
    let warnings = run.stderr.matches("cannot stream tool calls").count();
    // The warning, and the progress line saying the same in the run's turn.
    assert!(
        (1..=2).contains(&warnings),
        "{warnings} mentions: {}",
        run.stderr
    );
    assert!(run.stderr.contains("stream: false"), "{}", run.stderr);
    off[0]["reason"].as_str().unwrap().to_string()
}

fn streamed(request: &Value) -> bool {
    request["stream"] == json!(true)
}

#[tokio::test]
async fn a_llama_cpp_python_server_gets_tool_calls_and_the_run_finishes() {
    let server = FakeModel::llama_cpp_python(KEY).await;
    let run = run(&server, "", &[]).await;
    assert_read_and_finished(&run);
    let reason = assert_fell_back_once(&run);
    assert!(reason.contains("broke off"), "{reason}");
    assert_eq!(server.violations(), Vec::<String>::new());
    let requests: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    // Tried streamed once, then whole for the rest of the run, tools offered with
    // tool_choice each time.
    assert_eq!(
        requests.iter().map(streamed).collect::<Vec<_>>(),
        [true, false, false]
    );
    for request in &requests {
        assert_eq!(request["tool_choice"], "auto");
    }
    // The tool call went back with an empty string for its content, which that server's
    // schema takes; a null was its HTTP 500.
    let assistant = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "assistant")
        .unwrap();
    assert_eq!(assistant["content"], "");
    assert_eq!(
        assistant["tool_calls"][0]["id"],
        "call__0_Read_cmpl-5b0e0a32-8c0e-4e8f-9b55-2f1f0f6a7d11"
    );
    // Usage came from the whole responses: counted, not estimated.
    let messages = run.of_type("assistant_message");
    assert_eq!(messages[0]["usage"]["input_tokens"], 1187);
    assert!(messages[0].get("usage_source").is_none());
    assert!(run.retries().is_empty(), "{:?}", run.retries());
}

#[tokio::test]
async fn stream_false_never_streams_and_says_nothing() {
    for (extra, flags) in [
        ("  stream: false\n", &[][..]),
        ("", &["--stream", "false"][..]),
    ] {
        let server = FakeModel::llama_cpp_python(KEY).await;
        let run = run(&server, extra, flags).await;
        assert_read_and_finished(&run);
        assert!(run.of_type("streaming_off").is_empty());
        assert!(!run.stderr.contains("cannot stream tool calls"));
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert!(requests.iter().all(|r| !streamed(&r.body)));
        assert_eq!(server.violations(), Vec::<String>::new());
    }
}

/// Each way a server shows it cannot stream tool calls, then the plain fake's whole
/// responses: one switch, the tool call made, the run finished.
#[tokio::test]
async fn every_sign_of_a_server_that_cannot_stream_tools_switches_once() {
    let signs = [
        // An empty 200 that ends cleanly (a gateway that swallowed the error).
        Reply::Raw {
            content_type: "text/event-stream",
            body: String::new(),
        },
        // An empty 200 that names no type at all.
        Reply::Raw {
            content_type: "application/json",
            body: String::new(),
        },
        // llama.cpp's server before it streamed tool calls.
        Reply::Status {
            status: 500,
            headers: vec![],
            kind: "server_error",
            message: "Cannot use tools with stream".into(),
        },
        // llama-cpp-python's own text, passed on by a gateway.
        Reply::Status {
            status: 400,
            headers: vec![],
            kind: "invalid_request_error",
            message: "Automatic streaming tool choice is not supported".into(),
        },
    ];
    for sign in signs {
        let server = FakeModel::start(KEY, vec![sign.clone(), read_turn(), done_turn()]).await;
        let run = run(&server, "", &[]).await;
        assert_read_and_finished(&run);
        assert_fell_back_once(&run);
        assert!(run.retries().is_empty(), "{sign:?}: {:?}", run.retries());
        let streams: Vec<bool> = server
            .requests()
            .iter()
            .map(|r| streamed(&r.body))
            .collect();
        assert_eq!(streams, [true, false, false], "{sign:?}");
        assert_eq!(server.violations(), Vec::<String>::new());
    }
}

/// `stream: true` is a promise: a server that cannot stream is retried as any failure, and
/// the run ends with the provider's error, never switching.
#[tokio::test]
async fn stream_true_never_switches() {
    let empty = || Reply::Raw {
        content_type: "text/event-stream",
        body: String::new(),
    };
    let server = FakeModel::start(KEY, vec![empty(), empty(), empty(), empty()]).await;
    let run = run(&server, "  stream: true\n", &[]).await;
    run.assert_code(4);
    assert_eq!(run.finished()["outcome"], "provider_error");
    assert!(run.of_type("streaming_off").is_empty());
    assert_eq!(run.retries().len(), 3);
    assert!(server.requests().iter().all(|r| streamed(&r.body)));
}

/// A server that streams tool calls is never switched.
#[tokio::test]
async fn a_server_that_streams_stays_streamed() {
    let server = FakeModel::start(KEY, vec![read_turn(), done_turn()]).await;
    let run = run(&server, "", &[]).await;
    assert_read_and_finished(&run);
    assert!(run.of_type("streaming_off").is_empty());
    assert!(server.requests().iter().all(|r| streamed(&r.body)));
}

/// The fake server really is as strict as llama-cpp-python: what tollgate sent before this
/// issue is refused the way that server refuses it.
#[tokio::test]
async fn the_llama_cpp_python_fake_refuses_what_that_server_refuses() {
    let server = FakeModel::llama_cpp_python(KEY).await;
    tollgate::model::install_crypto_provider();
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url(Api::OpenAi));
    let post = |body: Value| client.post(&url).bearer_auth(KEY).json(&body).send();
    let tools = json!([{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}]);
    // content: null beside a tool call: HTTP 500, its validation error as the message.
    let null = post(json!({"model": "m", "stream": false, "tool_choice": "auto", "tools": tools,
        "messages": [{"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "x"}]}))
    .await
    .unwrap();
    assert_eq!(null.status(), 500);
    let body: Value = null.json().await.unwrap();
    assert_eq!(body["error"]["type"], "internal_server_error");
    // Streamed with tool_choice auto: HTTP 200, then the connection closes before a byte.
    let streamed = post(
        json!({"model": "m", "stream": true, "tool_choice": "auto", "tools": tools,
        "messages": [{"role": "user", "content": "go"}]}),
    )
    .await
    .unwrap();
    assert_eq!(streamed.status(), 200);
    assert!(streamed.bytes().await.is_err());
    // Tools without tool_choice: the model never sees them and answers in text.
    let unseen = post(json!({"model": "m", "stream": false, "tools": tools,
        "messages": [{"role": "user", "content": "go"}]}))
    .await
    .unwrap();
    let body: Value = unseen.json().await.unwrap();
    assert!(body["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let violations = server.violations();
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(violations[0].contains("not a string"));
    assert!(violations[1].contains("not rendered"));
}

#[tokio::test]
async fn model_stream_is_checked_where_it_is_written() {
    let server = FakeModel::start(KEY, vec![]).await;
    let bad = run(&server, "  stream: sometimes\n", &[]).await;
    bad.assert_code(2);
    assert!(
        bad.stderr
            .contains("model.stream must be true, false or auto"),
        "{}",
        bad.stderr
    );
    assert!(bad.stderr.contains(":15:"), "{}", bad.stderr);
    let flag = run(&server, "", &["--stream", "sometimes"]).await;
    flag.assert_code(2);
    assert!(server.requests().is_empty());
}
