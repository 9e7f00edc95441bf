//! The real providers end to end: the tollgate binary against the fake model server, for
//! both APIs — long runs with usage and cost, each injected fault, the limits, and the key.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_model::{Api, Block, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{Finished, Run};

pub(super) const KEY: &str = "sk-planted-5f3a9c1e-never-print-me";

/// Fast timeouts and retries so fault tests take milliseconds.
const FAST: &str = "  timeouts: {connect: 2, first_event: 2, idle: 0.5, request: 10}
  retries: {max: 3, base_delay: 0.005, max_delay: 0.02}
";

/// Every file the run wrote, and its stdout and stderr, are free of the key.
pub(super) fn assert_key_absent(run: &Finished) {
    // The trace-level log really covers the HTTP exchange, so its silence means something.
    assert!(run.stderr.contains("127.0.0.1"), "{}", run.stderr);
    assert!(!run.stdout.contains(KEY), "stdout has the key");
    assert!(!run.stderr.contains(KEY), "stderr has the key");
    let mut files = 0;
    visit(&run.dir, &mut |path| {
        files += 1;
        let bytes = std::fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(KEY), "{} has the key", path.display());
    });
    assert!(files >= 3, "expected transcript, junit and the task");
}

pub(super) fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, f);
        } else {
            f(&path);
        }
    }
}

pub(super) fn model_block(api: Api, server: &FakeModel, extra: &str) -> String {
    server.model_block(api, &format!("{FAST}{extra}"))
}

const READ_ONLY: &str = "mode: dontAsk\ntools: [Read, Glob, Grep]\n";

/// Runs the binary on a task with `model` and `limits` blocks; the key is in the environment.
pub(super) async fn run_task(model: &str, limits: &str, env: &[(&str, &str)]) -> Finished {
    run_task_with(READ_ONLY, model, limits, env, &[]).await
}

/// As `run_task`, with `preamble` for the task's mode and tools, and extra `run` flags.
pub(super) async fn run_task_with(
    preamble: &str,
    model: &str,
    limits: &str,
    env: &[(&str, &str)],
    flags: &[&str],
) -> Finished {
    Run::new()
        .file("ws/notes.txt", "the build is green\n")
        .task(&format!(
            "version: 1\nname: providers\nprompt: Read notes.txt and summarise it.\nworkdir: ws\n{preamble}{model}{limits}"
        ))
        .args(flags)
        .env("TEST_MODEL_KEY", KEY)
        // Everything the HTTP stack logs, so a key in a log line would be caught.
        .env("RUST_LOG", "trace")
        .envs(env)
        .finish_async()
        .await
}

fn tokens(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Tokens {
    Tokens {
        input,
        output,
        cache_write,
        cache_read,
    }
}

pub(super) fn read_turn() -> Reply {
    Reply::Turn(turn(
        vec![
            text("Reading the notes."),
            tool("Read", json!({"file_path": "notes.txt"})),
        ],
        tokens(100, 20, 0, 0),
    ))
}

pub(super) fn done_turn() -> Reply {
    Reply::Turn(turn(
        vec![text("The notes say the build is green.")],
        tokens(150, 10, 0, 0),
    ))
}

fn junit_property(junit: &str, name: &str) -> String {
    let doc = roxmltree::Document::parse(junit).unwrap();
    doc.descendants()
        .find(|node| node.has_tag_name("property") && node.attribute("name") == Some(name))
        .and_then(|node| node.attribute("value"))
        .unwrap_or_default()
        .to_string()
}

/// A 20-turn run: 19 tool turns and a final answer, with known usage; totals and cost must
/// add up, every request must pass the protocol checks.
async fn twenty_turns(api: Api) {
    let mut replies = Vec::new();
    let mut expected = Tokens::default();
    for i in 0..20u64 {
        let used = tokens(200 + i, 30 + i, 50, 1000 * i);
        expected.input += used.input;
        expected.output += used.output;
        expected.cache_write += used.cache_write;
        expected.cache_read += used.cache_read;
        let blocks = if i < 19 {
            vec![
                text(&format!("Step {i}: reading again.")),
                tool("Read", json!({"file_path": "notes.txt"})),
            ]
        } else {
            vec![text("Done: the build is green.")]
        };
        replies.push(Reply::Turn(turn(blocks, used)));
    }
    let server = FakeModel::start(KEY, replies).await;
    let run = run_task(
        &model_block(api, &server, ""),
        "limits: {max_turns: 25}\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(server.violations(), Vec::<String>::new());
    assert_eq!(server.requests().len(), 20);
    let finished = run.finished();
    assert_eq!(finished["outcome"], "success");
    assert_eq!(finished["turns"], 20);
    assert_eq!(finished["tool_calls"], 19);
    // OpenAI has no cache-write count: its prompt tokens are input + cached reads.
    let (cache_write, price) = match api {
        Api::Anthropic => (expected.cache_write, (3.0, 15.0, 3.75, 0.30)),
        Api::OpenAi => (0, (2.0, 8.0, 2.0, 0.50)),
    };
    let input = expected.input;
    assert_eq!(
        finished["usage"],
        json!({
            "input_tokens": input,
            "output_tokens": expected.output,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": expected.cache_read,
        })
    );
    let cost = (input as f64 * price.0
        + expected.output as f64 * price.1
        + cache_write as f64 * price.2
        + expected.cache_read as f64 * price.3)
        / 1e6;
    let reported = finished["total_cost_usd"].as_f64().unwrap();
    assert!((reported - cost).abs() < 1e-9, "{reported} != {cost}");
    let per_request: f64 = run
        .of_type("assistant_message")
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((per_request - cost).abs() < 1e-9);
    assert_eq!(
        junit_property(&run.read("junit.xml"), "total_cost_usd"),
        format!("{cost:.6}")
    );
    assert_eq!(
        junit_property(&run.read("junit.xml"), "cache_read_input_tokens"),
        expected.cache_read.to_string()
    );
    let summary_line = format!("cost ${cost:.4}");
    assert!(
        run.stdout.contains(&summary_line),
        "{summary_line} missing from:\n{}",
        run.stdout
    );
    assert_key_absent(&run);
}

#[tokio::test]
async fn anthropic_twenty_turns_add_up() {
    twenty_turns(Api::Anthropic).await;
}

#[tokio::test]
async fn openai_twenty_turns_add_up() {
    twenty_turns(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_requests_carry_headers_tools_and_cache_breakpoints() {
    let server = FakeModel::start(KEY, vec![read_turn(), done_turn()]).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    let second = &requests[1];
    assert_eq!(second.api, Api::Anthropic);
    assert_eq!(second.headers["anthropic-version"], "2023-06-01");
    assert_eq!(second.body["model"], "claude-sonnet-4-5");
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(second.body["system"][0]["cache_control"], ephemeral);
    let tools = second.body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[2]["cache_control"], ephemeral);
    assert!(tools[0]["input_schema"].is_object());
    let last = second.body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["cache_control"], ephemeral);
    assert!(
        last["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("the build is green")
    );
}

/// A fault, then a good turn: one `api_retry` of the expected kind, then success.
async fn recovers_from(api: Api, fault: Reply, category: &str, status: Value) -> Finished {
    let server = FakeModel::start(KEY, vec![fault, done_turn()]).await;
    let run = run_task(&model_block(api, &server, ""), "", &[]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.finished()["outcome"], "success");
    assert_eq!(
        run.retries(),
        vec![(json!(category), status)],
        "{:?}",
        run.of_type("api_retry")
    );
    let retry = run.of_type("api_retry")[0];
    assert_eq!(retry["attempt"], 1);
    assert_eq!(retry["max"], 3);
    assert_eq!(retry["turn"], 1);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.violations(), Vec::<String>::new());
    // The fault's half message, if any, was never applied.
    assert_eq!(run.of_type("assistant_message").len(), 1);
    assert_key_absent(&run);
    run
}

fn status(status: u16, kind: &'static str, headers: Vec<(&'static str, &'static str)>) -> Reply {
    Reply::Status {
        status,
        headers,
        kind,
        message: format!("injected {status}"),
    }
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let fault = status(
        429,
        "rate_limit_error",
        vec![("retry-after-ms", "40"), ("retry-after", "1")],
    );
    let run = recovers_from(Api::Anthropic, fault, "rate_limited", json!(429)).await;
    assert_eq!(run.of_type("api_retry")[0]["delay_ms"], 40);
}

#[tokio::test]
async fn overloaded_529_is_retried() {
    let fault = status(529, "overloaded_error", vec![]);
    let run = recovers_from(Api::Anthropic, fault, "overloaded", json!(529)).await;
    let delay = run.of_type("api_retry")[0]["delay_ms"].as_u64().unwrap();
    assert!(delay <= 5, "backoff from base_delay 5ms, got {delay}");
}

#[tokio::test]
async fn server_error_500_is_retried() {
    recovers_from(
        Api::OpenAi,
        status(500, "server_error", vec![]),
        "server_error",
        json!(500),
    )
    .await;
}

#[tokio::test]
async fn overloaded_error_event_mid_stream_is_retried() {
    recovers_from(
        Api::Anthropic,
        Reply::OverloadedEvent,
        "overloaded",
        Value::Null,
    )
    .await;
}

#[tokio::test]
async fn a_stream_cut_mid_message_is_retried_from_the_start() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let cut = Reply::CutAfter {
            turn: turn(
                vec![text("The notes say the build is green.")],
                tokens(150, 10, 0, 0),
            ),
            events: 3,
        };
        let run = recovers_from(api, cut, "stream_cut", Value::Null).await;
        // The cut came mid-body, after part of the message had arrived.
        let retry = run.of_type("api_retry")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(retry.starts_with("the stream broke off"), "{retry}");
        let message = run.of_type("assistant_message")[0];
        assert_eq!(
            message["content"][0]["text"],
            "The notes say the build is green."
        );
    }
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout_and_is_retried() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let stall = Reply::StallAfter {
            turn: turn(vec![text("The notes say")], tokens(150, 10, 0, 0)),
            events: 2,
        };
        recovers_from(api, stall, "idle_timeout", Value::Null).await;
    }
}

#[tokio::test]
async fn invalid_tool_json_becomes_an_error_result_and_the_run_goes_on() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let garbled = Reply::Turn(turn(
            vec![Block::RawTool {
                name: "Read".into(),
                json: "{\"file_path\": \"notes.txt".into(),
            }],
            tokens(100, 20, 0, 0),
        ));
        let server = FakeModel::start(KEY, vec![garbled, read_turn(), done_turn()]).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(server.violations(), Vec::<String>::new());
        let results = run.of_type("tool_result");
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["is_error"], true);
        assert_eq!(results[0]["status"], "error");
        assert!(
            results[0]["content"]
                .as_str()
                .unwrap()
                .contains("not valid JSON"),
            "{}",
            results[0]
        );
        assert_eq!(results[1]["is_error"], false);
        // The model was told, in the protocol's own terms.
        let second = &server.requests()[1].body;
        let told = second.to_string();
        assert!(told.contains("not valid JSON"), "{told}");
        assert_eq!(run.finished()["tool_errors"], 1);
    }
}

#[tokio::test]
async fn unauthorised_fails_at_once_with_the_api_message_and_never_the_key() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let server = FakeModel::start(KEY, vec![Reply::EchoKey]).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 4, "{}", run.stdout);
        assert_eq!(run.finished()["outcome"], "provider_error");
        assert_eq!(run.retries(), vec![]);
        assert_eq!(server.requests().len(), 1);
        let error = run.finished()["error"].as_str().unwrap();
        assert!(error.contains("HTTP 401"), "{error}");
        assert!(error.contains("invalid x-api-key: "), "{error}");
        assert!(error.contains("[REDACTED]"), "{error}");
        assert!(run.stdout.contains("invalid x-api-key"));
        assert_key_absent(&run);
    }
}

#[tokio::test]
async fn retries_run_out_into_a_provider_error() {
    let faults = (0..4).map(|_| status(503, "api_error", vec![])).collect();
    let server = FakeModel::start(KEY, faults).await;
    let run = run_task(&model_block(Api::Anthropic, &server, ""), "", &[]).await;
    assert_eq!(run.code, 4);
    assert_eq!(run.retries().len(), 3);
    let attempts: Vec<_> = run
        .of_type("api_retry")
        .iter()
        .map(|e| e["attempt"].clone())
        .collect();
    assert_eq!(attempts, vec![json!(1), json!(2), json!(3)]);
    let error = run.finished()["error"].as_str().unwrap();
    assert!(
        error.contains("after 4 attempt(s)") && error.contains("injected 503"),
        "{error}"
    );
    assert_eq!(server.replies_left(), 0);
    assert!(run.read("junit.xml").contains("provider_error"));
}

#[tokio::test]
async fn the_budget_stops_the_run_before_it_is_overshot() {
    // $10 / $20 per million: each turn costs 1000 × 10 + 500 × 20 = $0.02.
    let replies = (0..20)
        .map(|_| {
            Reply::Turn(turn(
                vec![tool("Read", json!({"file_path": "notes.txt"}))],
                tokens(1000, 500, 0, 0),
            ))
        })
        .collect();
    let server = FakeModel::start(KEY, replies).await;
    let pricing = "  pricing: {input: 10, output: 20}\n";
    let run = run_task(
        &model_block(Api::OpenAi, &server, pricing),
        "limits:\n  max_cost_usd: 0.1\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let finished = run.finished();
    assert_eq!(finished["outcome"], "max_budget_usd");
    let spent = finished["total_cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.1, "{spent}");
    // Each request's worst case is about $0.03, so it stops with less than that left.
    assert!(spent > 0.1 - 0.04, "{spent}");
    let turns = finished["turns"].as_u64().unwrap();
    assert_eq!(server.requests().len() as u64, turns);
    assert!(finished["error"].as_str().unwrap().contains("max_cost_usd"));
    assert_eq!(
        junit_property(&run.read("junit.xml"), "outcome"),
        "max_budget_usd"
    );
    assert_eq!(
        junit_property(&run.read("junit.xml"), "total_cost_usd"),
        format!("{spent:.6}")
    );
    // Every tool_use of the last turn was answered before the run stopped.
    assert_eq!(run.of_type("tool_result").len() as u64, turns);
}

#[tokio::test]
async fn a_slow_first_byte_hits_the_first_event_timeout_and_is_retried() {
    let slow = Reply::Delayed {
        delay: Duration::from_secs(5),
        reply: Box::new(done_turn()),
    };
    let server = FakeModel::start(KEY, vec![slow, done_turn()]).await;
    let model = model_block(Api::OpenAi, &server, "").replace("first_event: 2", "first_event: 0.5");
    let run = run_task(&model, "", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.retries(),
        vec![(json!("first_event_timeout"), Value::Null)]
    );
}

#[tokio::test]
async fn the_output_token_limit_lowers_max_tokens_then_stops() {
    let spend = |output| {
        Reply::Turn(turn(
            vec![tool("Read", json!({"file_path": "notes.txt"}))],
            tokens(100, output, 0, 0),
        ))
    };
    let replies = vec![spend(500), spend(500), spend(30), spend(1)];
    let server = FakeModel::start(KEY, replies).await;
    let run = run_task(
        &model_block(Api::Anthropic, &server, ""),
        "limits:\n  max_output_tokens: 1030\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(run.finished()["outcome"], "max_output_tokens");
    let asked: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.body["max_tokens"].clone())
        .collect();
    assert_eq!(asked, vec![json!(1000), json!(530), json!(30)]);
    assert_eq!(run.finished()["usage"]["output_tokens"], 1030);
}

#[tokio::test]
async fn the_wall_clock_limit_ends_a_stalled_run() {
    let stall = Reply::StallAfter {
        turn: turn(vec![text("thinking")], tokens(1, 1, 0, 0)),
        events: 1,
    };
    let server = FakeModel::start(KEY, vec![stall]).await;
    let slow_idle = "  timeouts: {idle: 30}\n";
    let run = run_task(
        &model_block(Api::Anthropic, &server, "").replace(FAST, slow_idle),
        "limits:\n  timeout: 0.5\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "timeout");
    assert!(run.finished()["duration_ms"].as_u64().unwrap() < 5000);
    assert!(run.read("junit.xml").contains("timeout"));
}

#[tokio::test]
async fn a_missing_key_is_a_config_error_before_any_request() {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let model =
        model_block(Api::Anthropic, &server, "").replace("  api_key_env: TEST_MODEL_KEY\n", "");
    let run = run_task(&model, "", &[]).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("ANTHROPIC_API_KEY"), "{}", run.stderr);
    assert_eq!(server.requests().len(), 0);
}

#[tokio::test]
async fn the_gateway_base_url_comes_from_the_environment() {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let model = model_block(Api::Anthropic, &server, "")
        .replace(
            &format!("  base_url: {}\n", server.base_url(Api::Anthropic)),
            "",
        )
        .replace("  api_key_env: TEST_MODEL_KEY\n", "");
    let base = server.base_url(Api::Anthropic);
    let run = run_task(
        &model,
        "",
        &[
            ("ANTHROPIC_BASE_URL", base.as_str()),
            ("ANTHROPIC_API_KEY", KEY),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests().len(), 1);
    assert_key_absent(&run);
}

#[tokio::test]
async fn a_cut_off_answer_is_continued_and_a_refusal_ends_the_run() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let mut cut = turn(vec![text("The notes say the")], tokens(100, 1000, 0, 0));
        cut.stop = Some("max_tokens");
        let mut refusal = turn(vec![text("I can't help with that.")], tokens(100, 5, 0, 0));
        refusal.stop = Some("refusal");
        let server = FakeModel::start(KEY, vec![Reply::Turn(cut), Reply::Turn(refusal)]).await;
        let run = run_task(&model_block(api, &server, ""), "", &[]).await;
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(server.violations(), Vec::<String>::new());
        let finished = run.finished();
        assert_eq!(finished["outcome"], "refusal");
        assert_eq!(finished["final_message"], "I can't help with that.");
        // The second request carried the cut-off answer and asked the model to go on.
        let second = server.requests()[1].body.to_string();
        assert!(second.contains("The notes say the"), "{second}");
        assert!(
            second.contains("cut off at the max_tokens limit"),
            "{second}"
        );
    }
}

#[tokio::test]
async fn the_fake_server_rejects_what_the_apis_reject() {
    tollgate::model::install_crypto_provider();
    let server = FakeModel::start(KEY, vec![]).await;
    let client = reqwest::Client::new();
    let orphan_tool_use = json!({"stream": true, "model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "no result"}]},
    ]});
    let assistant_first = json!({"stream": true, "model": "m", "max_tokens": 5, "messages": [
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]});
    let orphan_call = json!({"stream": true, "stream_options": {"include_usage": true}, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        ]},
        {"role": "user", "content": "no result"},
    ]});
    let anthropic = format!("{}/v1/messages", server.base_url(Api::Anthropic));
    let openai = format!("{}/chat/completions", server.base_url(Api::OpenAi));
    for (url, body) in [
        (&anthropic, orphan_tool_use),
        (&anthropic, assistant_first),
        (&openai, orphan_call),
    ] {
        let response = client
            .post(url)
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .bearer_auth(KEY)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
    }
    let violations = server.violations();
    assert_eq!(violations.len(), 3, "{violations:?}");
    assert!(
        violations[0].contains("without tool_result"),
        "{}",
        violations[0]
    );
    assert!(
        violations[1].contains("expected role user"),
        "{}",
        violations[1]
    );
    assert!(violations[2].contains("tool_call_id"), "{}", violations[2]);
}

#[tokio::test]
async fn tool_calls_are_bounded_by_the_tool_and_run_timeouts() {
    let sleeper = || {
        Reply::Turn(turn(
            vec![tool("Bash", json!({"command": "sleep 5"}))],
            tokens(100, 20, 0, 0),
        ))
    };
    let preamble = "mode: bypassPermissions\ntools: [Bash]\n";

    // tool_timeout: the call fails, the model hears why, the run goes on.
    let server = FakeModel::start(KEY, vec![sleeper(), done_turn()]).await;
    let model = model_block(Api::Anthropic, &server, "");
    let run = run_task_with(preamble, &model, "limits: {tool_timeout: 0.2}\n", &[], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result = run.of_type("tool_result")[0];
    assert_eq!(result["is_error"], true);
    assert!(result["duration_ms"].as_u64().unwrap() < 4000, "{result}");
    assert_eq!(server.violations(), Vec::<String>::new());

    // The run's own clock cuts a call in flight and ends the run.
    let server = FakeModel::start(KEY, vec![sleeper(), done_turn()]).await;
    let model = model_block(Api::Anthropic, &server, "");
    let run = run_task_with(preamble, &model, "limits: {timeout: 1.5}\n", &[], &[]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "timeout");
    let result = run.of_type("tool_result")[0];
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("limits.timeout"),
        "{result}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn the_max_cost_flag_caps_the_task_budget() {
    let replies = (0..20)
        .map(|_| {
            Reply::Turn(turn(
                vec![tool("Read", json!({"file_path": "notes.txt"}))],
                tokens(1000, 500, 0, 0),
            ))
        })
        .collect();
    let server = FakeModel::start(KEY, replies).await;
    let model = model_block(Api::OpenAi, &server, "  pricing: {input: 10, output: 20}\n");
    let limits = "limits:\n  max_cost_usd: 100\n";
    let run = run_task_with(READ_ONLY, &model, limits, &[], &["--max-cost", "0.07"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "max_budget_usd");
    assert!(run.finished()["total_cost_usd"].as_f64().unwrap() <= 0.07);

    // A cap on a model without a price cannot be kept: refused before any request.
    let unpriced = model_block(Api::OpenAi, &server, "").replace("gpt-4.1", "my-local-model");
    let requests = server.requests().len();
    let run = run_task_with(READ_ONLY, &unpriced, "", &[], &["--max-cost", "1"]).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("my-local-model"), "{}", run.stderr);
    assert_eq!(server.requests().len(), requests);
}

/// A server on 127.0.0.1 that answers every request with `307` to `to` and counts them;
/// returns its address (`http://127.0.0.1:port`).
pub(super) async fn redirector(
    to: String,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let to = to.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response() }
    });
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), hits)
}

/// The key and the request never follow a redirect to another origin (another port is
/// another origin): the run fails as a provider error and the other server sees nothing.
#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let elsewhere = FakeModel::start(
            KEY,
            vec![Reply::Turn(turn(vec![text("done")], tokens(10, 5, 0, 0)))],
        )
        .await;
        let (provider, name, endpoint) = match api {
            Api::Anthropic => ("anthropic", "claude-sonnet-4-5", "/v1/messages"),
            Api::OpenAi => ("openai", "gpt-4.1", "/v1/chat/completions"),
        };
        let target = format!("{}{endpoint}", elsewhere.base_url(Api::Anthropic));
        let (front, hits) = redirector(target.clone()).await;
        let base = match api {
            Api::Anthropic => front,
            Api::OpenAi => format!("{front}/v1"),
        };
        let model = format!(
            "model:\n  provider: {provider}\n  name: {name}\n  max_tokens: 1000\n  base_url: {base}\n  api_key_env: TEST_MODEL_KEY\n{FAST}"
        );
        let run = run_task(&model, "", &[]).await;
        assert_eq!(run.code, 4, "{provider}: {}", run.stderr);
        assert!(
            elsewhere.requests().is_empty(),
            "{provider}: the other origin was reached"
        );
        assert_eq!(
            hits.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "{provider}: not retried"
        );
        let error = run.finished()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            error.contains("redirect") && error.contains(&target),
            "{provider}: {error}"
        );
        assert_key_absent(&run);
    }
}

/// A model the price table knows only by its family (`claude-opus-4-6` under
/// `claude-opus-4`) is priced, and warned about, in `run_started`, the summary and JUnit;
/// the model itself (or the task's own price) is not; the table's date is recorded.
#[tokio::test]
async fn a_price_found_by_family_prefix_only_is_a_warning() {
    let done = || Reply::Turn(turn(vec![text("done")], tokens(10, 5, 0, 0)));
    let cases: [(&[&str], &str, Option<&str>); 3] = [
        (&["--model", "claude-opus-4-6"], "", Some("family")),
        (&[], "", Some("table")),
        (
            &["--model", "claude-opus-4-6"],
            "  pricing: {input: 1, output: 2}\n",
            Some("task"),
        ),
    ];
    for (flags, pricing, source) in cases {
        let server = FakeModel::start(KEY, vec![done()]).await;
        let model = model_block(Api::Anthropic, &server, pricing);
        let run = run_task_with(READ_ONLY, &model, "", &[], flags).await;
        assert_eq!(run.code, 0, "{flags:?}: {}", run.stderr);
        let started = run.of_type("run_started")[0];
        let price = &started["model"]["price"];
        assert_eq!(price["source"].as_str(), source, "{started}");
        let warning = started["model"]["price_warning"].as_str();
        if source == Some("family") {
            assert_eq!(price["prefix"], "claude-opus-4");
            assert!(price["as_of"].as_str().unwrap().len() == 10, "{price}");
            let warning = warning.unwrap();
            assert!(
                warning.starts_with("model `claude-opus-4-6` is not in the price table (of "),
                "{warning}"
            );
            assert!(
                run.stdout.contains(&format!("  warning: {warning}\n")),
                "{}",
                run.stdout
            );
            assert!(run.stderr.contains(warning), "{}", run.stderr);
            assert_eq!(
                run.junit()
                    .properties
                    .get("price_warning")
                    .map(String::as_str),
                Some(warning)
            );
        } else {
            assert_eq!(warning, None, "{started}");
            assert!(!run.stdout.contains("warning:"), "{}", run.stdout);
            assert!(!run.junit().properties.contains_key("price_warning"));
        }
    }
}
