//! Token economy end to end (S3, S7, S8): the binary against the fake Anthropic server. Whole
//! results on disk with previews in the history, the per-message budget, a message history
//! that only ever grows at its end, TodoWrite reminders on their cadence, and ToolSearch
//! loading a deferred tool that the model then calls.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::fake_model::{Api, Block, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{Finished, Run};

use crate::support::request_parts;

const KEY: &str = "sk-economy-test-key";

/// Runs a task whose `rest` sets tools, permissions and limits, against `server`.
async fn run_task(server: &FakeModel, rest: &str) -> Finished {
    Run::new()
        .task(&format!(
            "version: 1\nname: economy\nprompt: Build the project and report.\nworkdir: ws\nmode: dontAsk\n{}{rest}",
            server.model_block(Api::Anthropic, "")
        ))
        .model(server)
        .finish_async()
        .await
}

fn tokens(input: u64, cache_read: u64) -> Tokens {
    Tokens {
        input,
        output: 20,
        cache_write: 0,
        cache_read,
    }
}

fn reply(blocks: Vec<Block>, used: Tokens) -> Reply {
    Reply::Turn(turn(blocks, used))
}

fn bash(command: &str) -> Block {
    tool("Bash", json!({"command": command}))
}

fn todos(statuses: &[&str]) -> Block {
    let list: Vec<Value> = statuses
        .iter()
        .enumerate()
        .map(|(i, status)| json!({"content": format!("step {i}"), "status": status, "activeForm": format!("doing step {i}")}))
        .collect();
    tool("TodoWrite", json!({ "todos": list }))
}

/// The request's messages with the moving `cache_control` marker taken out, each serialised.
fn messages_without_marker(body: &Value) -> Vec<String> {
    let mut messages = body["messages"].as_array().unwrap().clone();
    for message in &mut messages {
        if let Some(blocks) = message["content"].as_array_mut() {
            for block in blocks {
                if let Some(block) = block.as_object_mut() {
                    block.remove("cache_control");
                }
            }
        }
    }
    messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect()
}

/// The text of the tool_result answering `id` in the last request.
fn result_in_history(server: &FakeModel, id: &str) -> String {
    let last = server.requests().last().unwrap().body.clone();
    for message in last["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                return match &block["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
            }
        }
    }
    panic!("no result for {id}");
}

fn reminders_sent(server: &FakeModel) -> Vec<(usize, String)> {
    let last = server.requests().last().unwrap().body.clone();
    let mut found = Vec::new();
    for (index, message) in last["messages"].as_array().unwrap().iter().enumerate() {
        for block in message["content"].as_array().into_iter().flatten() {
            if let Some(text) = block["text"]
                .as_str()
                .filter(|t| t.starts_with("<system-reminder>"))
            {
                found.push((index, text.to_string()));
            }
        }
    }
    found
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// A 20-turn run: one 1 MB log, turns of three ~25k results against a 50k message budget,
/// TodoWrite on some turns. Every request's messages must be the previous request's plus
/// new ones, byte for byte (the `cache_control` marker aside, which moves to the newest).
#[tokio::test]
async fn twenty_turns_only_ever_append_to_the_history() {
    let mut replies = vec![reply(
        vec![todos(&["in_progress", "pending"]), bash("seq 1 160000")],
        tokens(1_000, 0),
    )];
    for i in 1..19u64 {
        let blocks = match i % 4 {
            0 => vec![todos(&["completed", "in_progress"])],
            1 => vec![bash("seq 1 4500"), bash("seq 1 4400"), bash("seq 1 4300")],
            _ => vec![text("Looking."), bash(&format!("echo step {i}"))],
        };
        replies.push(reply(blocks, tokens(100, 1_000 * i)));
    }
    replies.push(reply(vec![text("The build passed.")], tokens(50, 20_000)));
    let server = FakeModel::start(KEY, replies).await;
    let run = run_task(
        &server,
        "tools: [Read, Bash, TodoWrite]\npermissions:\n  allow: [Bash]\nlimits:\n  max_turns: 25\n  message_result_chars: 50000\nreminders:\n  full_every: 3\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.violations(), Vec::<String>::new());
    let requests = server.requests();
    assert_eq!(requests.len(), 20);

    // The history only grows at its end.
    for pair in requests.windows(2) {
        let before = messages_without_marker(&pair[0].body);
        let after = messages_without_marker(&pair[1].body);
        assert!(after.len() > before.len());
        assert_eq!(after[..before.len()], before[..]);
    }
    // So do the system prompt and the tools array: nothing was loaded.
    for request in &requests[1..] {
        assert_eq!(request.body["system"], requests[0].body["system"]);
        assert_eq!(request.body["tools"], requests[0].body["tools"]);
    }

    // The 1 MB log is whole on disk; the history holds its head, tail and path only.
    let log = run.out.join("results/toolu_01_1.txt");
    let expected: String = (1..=160_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(file_size(&log) as usize, expected.trim_end().len());
    assert!(expected.len() > 1_000_000);
    let kept = result_in_history(&server, "toolu_01_1");
    assert!(kept.chars().count() <= 2_300, "{} chars", kept.len());
    assert!(
        kept.starts_with("1\n2\n3\n") && kept.ends_with("159999\n160000"),
        "{kept}"
    );
    assert!(kept.contains(&log.display().to_string()));

    // Three ~21k results against a 50k budget: the largest is replaced, the others kept.
    let budget = run.of_type("message_budget");
    assert_eq!(budget.len(), 5, "turns 2, 6, 10, 14, 18");
    assert_eq!(budget[0]["replaced"].as_array().unwrap().len(), 1);
    assert_eq!(budget[0]["replaced"][0]["id"], "toolu_02_0");
    assert_eq!(
        budget[0]["replaced"][0]["content"].as_str().unwrap(),
        result_in_history(&server, "toolu_02_0")
    );
    assert!(budget[0]["chars_before"].as_u64().unwrap() > 50_000);
    assert!(budget[0]["chars_after"].as_u64().unwrap() <= 50_000);
    assert!(result_in_history(&server, "toolu_02_0").contains("output too large"));
    assert!(result_in_history(&server, "toolu_02_1").ends_with("4400"));
    assert!(result_in_history(&server, "toolu_02_2").ends_with("4300"));
    assert_eq!(
        std::fs::read_to_string(run.out.join("results/toolu_02_0.txt")).unwrap(),
        (1..=4500)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Reminders: full when the list changed (turns 1, 5, 9, 13, 17) and every third,
    // sparse in between; none was sent before the list existed.
    let sent = reminders_sent(&server);
    assert_eq!(sent.len(), 19, "one per tool-result message");
    let full: Vec<usize> = sent
        .iter()
        .enumerate()
        .filter(|(_, (_, text))| text.contains("Your todo list (keep it current"))
        .map(|(turn, _)| turn + 1)
        .collect();
    assert_eq!(full, vec![1, 4, 5, 8, 9, 12, 13, 16, 17]);
    assert!(
        sent[1]
            .1
            .contains("1 pending, 1 in progress, 0 completed (unchanged)")
    );

    // The final list and the cache share are in run_finished and the JUnit report.
    let finished = run.finished();
    assert_eq!(finished["todos"][1]["status"], "in_progress");
    let share = finished["cache_read_share"].as_f64().unwrap();
    let read: f64 = (1..19).map(|i| 1_000.0 * i as f64).sum::<f64>() + 20_000.0;
    let fresh = 1_000.0 + 18.0 * 100.0 + 50.0;
    assert!((share - read / (read + fresh)).abs() < 1e-9, "{share}");
    let junit = std::fs::read_to_string(run.out.join("junit.xml")).unwrap();
    assert!(junit.contains("- [in_progress] step 1"), "{junit}");
}

/// A deferred tool is listed by name only; ToolSearch loads it, the next request carries
/// it at the end of the tools array, and the model's call to it runs.
#[tokio::test]
async fn tool_search_loads_a_deferred_tool_for_the_next_turn() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(
                vec![tool("ToolSearch", json!({"query": "select:TodoWrite"}))],
                tokens(100, 0),
            ),
            reply(vec![todos(&["in_progress"])], tokens(100, 0)),
            reply(vec![text("Planned.")], tokens(100, 0)),
        ],
    )
    .await;
    let run = run_task(
        &server,
        "tools: [Read, Grep, TodoWrite]\ndeferred_tools: [TodoWrite]\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    let names = |index: usize| -> Vec<String> {
        requests[index].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(0), ["Read", "Grep", "ToolSearch"]);
    assert_eq!(names(1), ["Read", "Grep", "ToolSearch", "TodoWrite"]);
    assert_eq!(names(2), names(1));
    let system = requests[0].body["system"][0]["text"].as_str().unwrap();
    assert!(
        system.contains("\n- TodoWrite: Replaces your todo list"),
        "{system}"
    );
    let found = result_in_history(&server, "toolu_01_0");
    assert!(
        found.contains("<function>{") && found.contains("\"name\":\"TodoWrite\""),
        "{found}"
    );
    let receipt = result_in_history(&server, "toolu_02_0");
    assert!(
        receipt.starts_with("Todo list updated: 0 pending, 1 in progress"),
        "{receipt}"
    );
}

/// Before it is loaded, a deferred tool is no tool at all: the call is refused.
#[tokio::test]
async fn a_deferred_tool_called_before_it_is_loaded_is_refused() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![todos(&["pending"])], tokens(100, 0)),
            reply(vec![text("Stopped.")], tokens(100, 0)),
        ],
    )
    .await;
    run_task(
        &server,
        "tools: [Read, TodoWrite]\ndeferred_tools: [TodoWrite]\n",
    )
    .await;
    let refused = result_in_history(&server, "toolu_01_0");
    assert!(
        refused.starts_with("No such tool available: TodoWrite"),
        "{refused}"
    );
    assert!(
        refused.ends_with(
            "TodoWrite is deferred: load it with ToolSearch (query \"select:TodoWrite\") first"
        ),
        "{refused}"
    );
}

/// A small site on 127.0.0.1: an HTML page, a same-host redirect to it, and a redirect to
/// another host name (`localhost`). Counts every request it gets.
async fn site() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use axum::http::{StatusCode, Uri, header};
    use axum::response::IntoResponse;
    let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = hits.clone();
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(uri.path().to_string());
            match uri.path() {
                "/page" => (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8".to_string())],
                    "<html><head><title>T</title><script>var x = 1;</script></head><body><h1>Release notes</h1><p>Version <b>2.1</b> fixes the <a href=\"/bug\">cache bug</a>.</p><ul><li>one</li><li>two</li></ul></body></html>".to_string(),
                )
                    .into_response(),
                "/moved" => (
                    StatusCode::MOVED_PERMANENTLY,
                    [(header::LOCATION, "/page".to_string())],
                    String::new(),
                )
                    .into_response(),
                "/away" => (
                    StatusCode::FOUND,
                    [(header::LOCATION, format!("http://localhost:{}/page", addr.port()))],
                    String::new(),
                )
                    .into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, hits)
}

/// WebFetch is deferred; once loaded it fetches an allowed host, follows a redirect on that
/// host, hands a redirect to another host back to the model, and a host no rule allows is
/// refused before any connection is made.
#[tokio::test]
async fn web_fetch_is_gated_by_domain_before_connecting() {
    let (addr, hits) = site().await;
    let port = addr.port();
    let fetch = |url: String| {
        tool(
            "WebFetch",
            json!({"url": url, "prompt": "Which version fixes the cache bug?"}),
        )
    };
    let server = FakeModel::start(
        KEY,
        vec![
            reply(
                vec![tool("ToolSearch", json!({"query": "fetch url"}))],
                tokens(100, 0),
            ),
            reply(
                vec![fetch(format!("http://127.0.0.1:{port}/moved"))],
                tokens(100, 0),
            ),
            reply(
                vec![fetch(format!("http://127.0.0.1:{port}/away"))],
                tokens(100, 0),
            ),
            reply(
                vec![fetch(format!("http://localhost:{port}/page"))],
                tokens(100, 0),
            ),
            reply(vec![text("Version 2.1.")], tokens(100, 0)),
        ],
    )
    .await;
    run_task(
        &server,
        "tools: [Read, WebFetch]\npermissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\n",
    )
    .await;
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[0].body["tools"].as_array().unwrap().len(),
        2,
        "Read, ToolSearch"
    );
    let page = result_in_history(&server, "toolu_02_0");
    assert!(
        page.starts_with(&format!("Fetched http://127.0.0.1:{port}/page (HTTP 200). Answer this from the page below: Which version")),
        "{page}"
    );
    assert!(page.contains("# Release notes"), "{page}");
    assert!(
        page.contains("Version **2.1** fixes the [cache bug](/bug)."),
        "{page}"
    );
    assert!(!page.contains("var x"), "{page}");
    let away = result_in_history(&server, "toolu_03_0");
    assert!(
        away.contains(&format!("to another origin: http://localhost:{port}/page")),
        "{away}"
    );
    let refused = result_in_history(&server, "toolu_04_0");
    assert!(refused.starts_with("Permission denied:"), "{refused}");
    assert!(refused.contains("WebFetch(domain:localhost)"), "{refused}");
    assert_eq!(*hits.lock().unwrap(), ["/moved", "/page", "/away"]);
}

/// Pages built to break an HTML converter: nesting without end, a huge attribute, deep
/// tables and lists. Each becomes a result (the text, or an error result) and the run goes
/// on to its end, reports and all; none takes the process down.
#[tokio::test]
async fn hostile_pages_end_as_results_and_the_run_goes_on() {
    use axum::http::{Uri, header};
    use axum::response::IntoResponse;
    fn nested(open: &str, n: usize) -> String {
        open.repeat(n) + "deepest words"
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|uri: Uri| async move {
        let body = match uri.path() {
            "/divs" => nested("<div>", 5_000),
            "/many-divs" => nested("<div>", 100_000),
            "/attribute" => format!("<p title=\"{}\">deepest words</p>", "a".repeat(4 << 20)),
            "/tables" => nested("<table><tr><td>", 20_000),
            "/lists" => nested("<ul><li>", 20_000),
            _ => nested("<div><b id=x>", 20_000),
        };
        ([(header::CONTENT_TYPE, "text/html")], body).into_response()
    });
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let paths = [
        "/divs",
        "/many-divs",
        "/attribute",
        "/tables",
        "/lists",
        "/formatting",
    ];
    let fetches: Vec<Block> = paths
        .iter()
        .map(|path| {
            tool(
                "WebFetch",
                json!({"url": format!("http://127.0.0.1:{port}{path}"), "prompt": "What is deepest?"}),
            )
        })
        .collect();
    let server = FakeModel::start(
        KEY,
        vec![
            reply(
                vec![tool("ToolSearch", json!({"query": "select:WebFetch"}))],
                tokens(100, 0),
            ),
            reply(fetches, tokens(100, 0)),
            reply(vec![text("Read them all.")], tokens(100, 0)),
        ],
    )
    .await;
    let run = run_task(
        &server,
        "tools: [WebFetch]\npermissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "success");
    for (index, path) in paths.iter().enumerate() {
        let page = result_in_history(&server, &format!("toolu_02_{index}"));
        assert!(page.contains("deepest words"), "{}: {page:.300}", path);
    }
}

/// The first request of a run with the default tools, part by part, and the reminders a
/// two-item todo list adds (full, then sparse), against `benches/request-budget.toml`: a part
/// that grows past its budget fails here until the budget is raised on purpose.
#[tokio::test]
async fn the_first_request_and_the_reminders_stay_within_their_budget() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![todos(&["in_progress", "pending"])], tokens(10, 0)),
            reply(vec![tool("Glob", json!({"pattern": "*"}))], tokens(10, 0)),
            reply(vec![tool("Glob", json!({"pattern": "*"}))], tokens(10, 0)),
            reply(vec![text("Done.")], tokens(10, 0)),
        ],
    )
    .await;
    let run = run_task(&server, "").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    let mut measured = request_parts::first_request(&requests[0].body);
    let reminders: Vec<usize> = requests[1..3]
        .iter()
        .flat_map(|request| request_parts::reminders(&request.body))
        .collect();
    assert_eq!(reminders.len(), 2, "a full reminder, then a sparse one");
    measured.push(("reminder, full (two items)".into(), reminders[0]));
    measured.push(("reminder, sparse".into(), reminders[1]));
    let problems = request_parts::over_budget(&measured);
    assert!(
        problems.is_empty(),
        "the request grew past benches/request-budget.toml (raise a budget there only if the \
         growth is meant):\n{}\nmeasured: {measured:?}",
        problems.join("\n")
    );
}

/// A task without `tools:` is offered WebFetch (deferred, so with ToolSearch and a line of
/// the system prompt) only where some call of it could run: an allow rule, a mode that
/// allows without one, or a PreToolUse hook in force that runs for it (the operator's; a
/// task file's hooks do not run unless the operator allows them). A task that names
/// WebFetch gets it whatever the policy says.
#[tokio::test]
async fn web_fetch_is_offered_only_where_a_call_of_it_could_run() {
    let hook = |matcher: &str| {
        format!("hooks:\n  - {{event: PreToolUse, matcher: '{matcher}', command: 'true'}}\n")
    };
    // (the task's mode, the rest of the task, the operator's policy or `project:` and the
    // repository's, whether offered)
    let cases = [
        ("dontAsk", String::new(), String::new(), false),
        (
            "dontAsk",
            "permissions:\n  allow: ['WebFetch(domain:example.com)']\n".into(),
            String::new(),
            true,
        ),
        (
            "acceptEdits",
            "permissions:\n  allow: ['Bash(ls:*)']\n  deny: ['WebFetch(domain:evil.example)']\n"
                .into(),
            String::new(),
            false,
        ),
        ("bypassPermissions", String::new(), String::new(), true),
        ("dontAsk", String::new(), hook("WebFetch|Bash"), true),
        ("dontAsk", String::new(), hook("Bash"), false),
        (
            "dontAsk",
            String::new(),
            format!("project:{}", hook("*")),
            false,
        ),
        (
            "dontAsk",
            "tools: [Read, WebFetch]\n".into(),
            String::new(),
            true,
        ),
    ];
    for (mode, rest, policy, offered) in cases {
        let server = FakeModel::start(KEY, vec![reply(vec![text("Done.")], tokens(10, 0))]).await;
        let mut run = Run::new().task(&format!(
            "version: 1\nname: economy\nprompt: go\nworkdir: ws\nmode: {mode}\n{}{rest}",
            server.model_block(Api::Anthropic, "")
        ));
        if let Some(project) = policy.strip_prefix("project:") {
            run = run.file("ws/.tollgate/policy.yaml", project);
        } else if !policy.is_empty() {
            run = run.policy(&policy);
        }
        let run = run.model(&server).finish_async().await;
        let case = format!("{mode} / {rest} / {policy}");
        assert_eq!(run.code, 0, "{case}: {}", run.stderr);
        let body = &server.requests()[0].body;
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        let system = body["system"][0]["text"].as_str().unwrap();
        assert_eq!(tools.contains(&"ToolSearch"), offered, "{case}: {tools:?}");
        assert_eq!(system.contains("- WebFetch:"), offered, "{case}: {system}");
        assert!(tools.contains(&"Read"), "{case}: {tools:?}");
    }
}
