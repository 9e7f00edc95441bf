//! Honest endings (issues 47 and 48): a request the server will always refuse is not retried
//! as if transient, a fallback model is another model, a small budget still sends a first
//! request that fits, an empty final answer is said (and fails a prompt run), and an MCP
//! server that cannot be reached says why in the operator's terms.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::providers::{KEY, done_turn, model_block, run_task, run_task_with};
use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
use crate::support::runs::{Finished, Run};

/// llama-cpp-python's answer to an assistant message with `"content": null`: HTTP 500 with
/// pydantic's validation error as the message.
const VALIDATION: &str = "1 validation error for CreateChatCompletionRequest\nmessages.2.typed-dict.content\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]";

fn status(status: u16, kind: &'static str, message: &str) -> Reply {
    Reply::Status {
        status,
        headers: Vec::new(),
        kind,
        message: message.into(),
    }
}

/// A 5xx whose body is a validation error is sent twice at most (one retry), on both APIs;
/// a 4xx other than 408/409/429 once; the server's own words reach the transcript's error
/// and the summary. A plain 500 is still retried as a transient.
#[tokio::test]
async fn a_request_the_server_will_always_refuse_is_not_retried_as_transient() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let replies = (0..4)
            .map(|_| status(500, "internal_server_error", VALIDATION))
            .collect();
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 4, "{api:?}: {}", run.stderr);
        assert_eq!(server.requests().len(), 2, "{api:?}: one retry at most");
        assert_eq!(run.retries().len(), 1, "{api:?}");
        assert_eq!(run.retries()[0].0, "rejected_request", "{api:?}");
        let error = run.finished()["error"].as_str().unwrap();
        assert!(
            error.contains("Input should be a valid string") && error.contains("500"),
            "{api:?}: {error}"
        );
        assert!(
            run.stdout.contains("Input should be a valid string"),
            "{api:?}: {}",
            run.stdout
        );

        // 422 and 405: not retried at all.
        for code in [422, 405] {
            let replies = (0..3)
                .map(|_| status(code, "invalid_request_error", "messages: bad shape"))
                .collect();
            let server = FakeModel::start(KEY, replies).await;
            let run = run_task(&model_block(api, &server, ""), "", &[]).await;
            assert_eq!(run.code, 4, "{api:?} {code}: {}", run.stderr);
            assert_eq!(server.requests().len(), 1, "{api:?} {code}");
            let error = run.finished()["error"].as_str().unwrap();
            assert!(error.contains("messages: bad shape"), "{error}");
        }

        // A 500 that says nothing of the request is a transient: retried, then answered.
        let replies = vec![
            status(500, "api_error", "Internal server error"),
            status(500, "api_error", "Internal server error"),
            done_turn(),
        ];
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 0, "{api:?}: {}", run.stderr);
        assert_eq!(server.requests().len(), 3);
        assert_eq!(run.retries()[0].0, "server_error");
    }
}

/// `--fallback-model ''` and `--fallback-model` naming the run's own model: exit 2 with the
/// reason, before any request.
#[tokio::test]
async fn a_fallback_model_must_be_another_model() {
    let server = FakeModel::start(KEY, Vec::new()).await;
    for (name, said) in [
        ("", "the name is empty"),
        ("  ", "the name is empty"),
        ("claude-sonnet-4-5", "is the run's own model"),
    ] {
        let run = run_task_with(
            "mode: dontAsk\n",
            &model_block(Api::Anthropic, &server, ""),
            "",
            &[],
            &["--fallback-model", name],
        )
        .await;
        assert_eq!(run.code, 2, "{name:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("--fallback-model") && run.stderr.contains(said),
            "{name:?}: {}",
            run.stderr
        );
    }
    assert!(server.requests().is_empty());
}

fn expensive_model(server: &FakeModel) -> String {
    format!(
        "model:\n  provider: anthropic\n  name: claude-sonnet-4-5\n  max_tokens: 32000\n  base_url: {}\n  api_key_env: TEST_MODEL_KEY\n  retries: {{max: 0}}\n",
        server.base_url(Api::Anthropic)
    )
}

/// `max_cost_usd: 0.05` with `max_tokens: 32000` (a worst case of $0.48 at $15 per million
/// output tokens): the first request is sent with `max_tokens` lowered to what the budget
/// pays for. A budget too small for even 1024 output tokens stops before any request, saying
/// what the request could cost and what budget would send it.
#[tokio::test]
async fn a_small_budget_sends_a_first_request_that_fits() {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task(
        &expensive_model(&server),
        "limits:\n  max_cost_usd: 0.05\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sent = server.requests()[0].body["max_tokens"].as_u64().unwrap();
    assert!((1024..32000).contains(&sent), "max_tokens {sent}");
    let cost = run.finished()["total_cost_usd"].as_f64().unwrap();
    assert!(cost <= 0.05, "{cost}");

    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task(
        &expensive_model(&server),
        "limits:\n  max_cost_usd: 0.001\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "max_budget_usd");
    assert!(server.requests().is_empty());
    let error = run.finished()["error"].as_str().unwrap();
    assert!(
        error.contains("could cost $")
            && error.contains("1024 output tokens")
            && error.contains("raise limits.max_cost_usd (or --max-cost) to at least $"),
        "{error}"
    );
}

fn empty_turn(answer: &str) -> Reply {
    Reply::Turn(turn(
        vec![text(answer)],
        Tokens {
            input: 50,
            output: 1,
            ..Tokens::default()
        },
    ))
}

fn warnings(run: &Finished) -> Vec<String> {
    run.finished()["warnings"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `tollgate run -p …` (no task file) against `server`, with `args`.
async fn prompt_run(server: &FakeModel, args: &[&str]) -> Finished {
    Run::new()
        .without_task()
        .env("ANTHROPIC_API_KEY", server.key())
        .env("ANTHROPIC_BASE_URL", server.base_url(Api::Anthropic))
        .args(["-p", "Say something."])
        .args(args)
        .finish_async()
        .await
}

/// An empty or whitespace-only final answer: a prompt run fails with `empty_answer` (exit
/// 1), said in the summary, `run_finished` and the JSON result; a task run is warned and
/// passes unless its `fail_on` names `empty_answer`; `--fail-on` without it lets a prompt
/// run pass with the warning.
#[tokio::test]
async fn an_empty_final_answer_is_said_and_fails_a_prompt_run() {
    for answer in ["", "  \n\t "] {
        let server = FakeModel::start(KEY, vec![empty_turn(answer)]).await;
        let run = prompt_run(&server, &["--output-format", "json"]).await;
        assert_eq!(run.code, 1, "{answer:?}: {}", run.stderr);
        assert_eq!(run.finished()["outcome"], "empty_answer");
        assert!(
            warnings(&run)[0].contains("final answer is empty"),
            "{answer:?}"
        );
        let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(result["outcome"], "empty_answer");
        assert_eq!(result["is_error"], true);
        assert!(
            result["warnings"][0]
                .as_str()
                .unwrap()
                .contains("final answer is empty")
        );
    }

    // The text summary says it too; without `empty_answer` in --fail-on the run passes.
    let server = FakeModel::start(KEY, vec![empty_turn(" ")]).await;
    let run = prompt_run(&server, &["--fail-on", "denial,check,limit"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "success");
    assert!(
        run.stdout
            .contains("warning: the model's final answer is empty"),
        "{}",
        run.stdout
    );

    // A task run: warned, passes by default; fails when its fail_on names empty_answer.
    // On a runner it is an annotation: a warning here, as fail_on does not count it.
    let server = FakeModel::start(KEY, vec![empty_turn("")]).await;
    let run = run_task(
        &model_block(Api::OpenAi, &server, ""),
        "",
        &[("GITHUB_ACTIONS", "true")],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(warnings(&run).len(), 1);
    assert!(
        run.stdout
            .lines()
            .any(|line| line.starts_with("::warning")
                && line.contains("title=tollgate%3A empty answer")),
        "{}",
        run.stdout
    );
    let server = FakeModel::start(KEY, vec![empty_turn("")]).await;
    let run = run_task(
        &model_block(Api::OpenAi, &server, ""),
        "fail_on: [denial, empty_answer]\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "empty_answer");
    // An answer with words has no warning.
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task(&model_block(Api::OpenAi, &server, ""), "", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(warnings(&run).is_empty());
}

/// A 127.0.0.1 HTTP server that answers every request with `status` and an HTML body.
async fn answering(status: &'static str) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), socket.read(&mut buf)).await;
                let body = "<html><title>oops</title></html>";
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, task)
}

/// The MCP server entry's status as `run_started` lists it, from a run whose operator's
/// policy names `entry` (a `url:` or `command:`).
async fn mcp_start(entry: &str) -> (Finished, Value) {
    let model = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = Run::new()
        .file("ws/notes.txt", "hi\n")
        .task(&format!(
            "version: 1\nname: mcp\nprompt: Go.\nworkdir: ws\nmode: dontAsk\n{}",
            model_block(Api::Anthropic, &model, "")
        ))
        .env("TEST_MODEL_KEY", KEY)
        .policy(&format!(
            "permissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\nmcp_servers:\n  far:\n    {entry}\n    startup_timeout: 20\n"
        ))
        .finish_async()
        .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "mcp_start_failed");
    assert!(model.requests().is_empty());
    let status = run.mcp_servers()[0].clone();
    (run, status)
}

fn assert_in_user_terms(error: &str) {
    for internal in ["rmcp::", "Transport [", "WorkerTransport", "reqwest::"] {
        assert!(!error.contains(internal), "{error}");
    }
}

/// A refused port, a server answering HTTP 500 or 404, and a command that does not exist:
/// each says the URL (or command) and what happened, not the SDK's type names.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_that_cannot_be_reached_says_why() {
    // A port nobody listens on: bound, then closed.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (_, status) = mcp_start(&format!("url: {url}")).await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("cannot start the session at {url}"))
            && error.contains("could not connect")
            && error.contains("Connection refused"),
        "{error}"
    );
    assert_in_user_terms(error);

    for (line, said) in [
        (
            "500 Internal Server Error",
            "HTTP 500 Internal Server Error",
        ),
        ("404 Not Found", "404"),
    ] {
        let (port, server) = answering(line).await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        let (_, status) = mcp_start(&format!("url: {url}")).await;
        server.abort();
        let error = status["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("cannot start the session at {url}"))
                && error.contains("the server answered")
                && error.contains(said),
            "{line}: {error}"
        );
        assert_in_user_terms(error);
    }

    // TLS to a server that speaks plain HTTP: the handshake fails, and says so.
    let (port, server) = answering("200 OK").await;
    let url = format!("https://127.0.0.1:{port}/mcp");
    let (_, status) = mcp_start(&format!("url: {url}")).await;
    server.abort();
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("cannot start the session at {url}"))
            && error.contains("could not connect"),
        "{error}"
    );
    assert_in_user_terms(error);

    let (_, status) = mcp_start("command: /nonexistent/mcp-server").await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains("/nonexistent/mcp-server") && error.contains("No such file or directory"),
        "{error}"
    );
}
