//! What a run sends the model (S7, S8): total request bytes, estimated input tokens and how
//! much of each request is an exact prefix of the next, for the quick start and for a 20-turn
//! run with one 1 MB log. Runs the binary against the fake Anthropic server and reads the
//! request bodies it recorded: `cargo bench --bench economy` (or `cargo test --bench economy`
//! — the figures are bytes, not times, so the profile does not matter). Prints README rows.
//!
//! Tokens are estimated at 4 bytes a token (the fake server is no tokenizer). The prefix share
//! compares each request's body, laid out in the provider's cache order (tools, system,
//! messages) with the moving `cache_control` marker removed, to the next request's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tollgate_test_support::fake_model;
use tollgate_test_support::request_parts;

use std::path::{Path, PathBuf};

use fake_model::{Api, Block, FakeModel, Reply, Tokens, text, tool, turn};
use serde_json::{Value, json};

const KEY: &str = "bench-key";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn reply(blocks: Vec<Block>) -> Reply {
    Reply::Turn(turn(
        blocks,
        Tokens {
            input: 1,
            output: 1,
            cache_write: 0,
            cache_read: 0,
        },
    ))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs `task` (a JSON value, which is YAML too) with its model pointed at `server`.
async fn run(server: &FakeModel, mut task: Value, dir: &Path) {
    task["model"] = json!({
        "provider": "anthropic",
        "name": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "base_url": server.base_url(Api::Anthropic),
        "api_key_env": "BENCH_MODEL_KEY",
    });
    let path = dir.join("task.yaml");
    std::fs::write(&path, serde_json::to_string_pretty(&task).unwrap()).unwrap();
    // `TOLLGATE_BENCH_BIN`: another build to measure, for a before/after in one run.
    let binary = std::env::var("TOLLGATE_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_tollgate").to_string());
    let status = tokio::process::Command::new(binary)
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.join("out"))
        .env_remove("ANTHROPIC_BASE_URL")
        .env("BENCH_MODEL_KEY", KEY)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.code().is_some_and(|code| code <= 1), "{status}");
}

/// The quick start's own script, replayed by the fake server.
async fn quickstart() -> Vec<Value> {
    let text_yaml = std::fs::read_to_string(repo().join("examples/quickstart.yaml")).unwrap();
    let mut task: Value = serde_saphyr::from_str(&text_yaml).unwrap();
    let replies = task["model"]["script"]
        .as_array()
        .unwrap()
        .iter()
        .map(|blocks| {
            reply(
                blocks
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|block| match block.get("text") {
                        Some(said) => text(said.as_str().unwrap()),
                        None => tool(
                            block["tool_use"]["name"].as_str().unwrap(),
                            block["tool_use"]["input"].clone(),
                        ),
                    })
                    .collect(),
            )
        })
        .collect();
    let server = FakeModel::start(KEY, replies).await;
    let dir = tempfile::TempDir::new().unwrap();
    copy_dir(&repo().join("examples/quickstart"), &dir.path().join("ws"));
    task["workdir"] = json!(dir.path().join("ws"));
    task["policy"] = json!(repo().join("policies/ci-default.yaml"));
    task.as_object_mut().unwrap().remove("checks");
    run(&server, task, dir.path()).await;
    server.requests().into_iter().map(|r| r.body).collect()
}

/// 19 tool turns and an answer: the first prints a 1 MB log, the others small outputs.
/// `inline` raises the offload thresholds past the log's size, to measure what offloading saves.
async fn twenty_turns_with_a_log(inline: bool) -> Vec<Value> {
    let mut replies = vec![reply(vec![
        text("Building."),
        tool("Bash", json!({"command": "seq 1 160000"})),
    ])];
    for i in 1..19 {
        replies.push(reply(vec![
            text(&format!("Step {i}.")),
            tool("Bash", json!({"command": format!("echo step {i}")})),
        ]));
    }
    replies.push(reply(vec![text("The build passed.")]));
    let server = FakeModel::start(KEY, replies).await;
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let mut task = json!({
        "version": 1,
        "name": "log",
        "prompt": "Build the project and report.",
        "workdir": dir.path().join("ws"),
        "mode": "dontAsk",
        "tools": ["Read", "Grep", "Bash"],
        "permissions": {"allow": ["Bash"]},
        "limits": {"max_turns": 25},
    });
    if inline {
        task["limits"]["max_result_chars"] = json!({"Bash": 2_000_000});
        task["limits"]["message_result_chars"] = json!(2_000_000);
    }
    run(&server, task, dir.path()).await;
    server.requests().into_iter().map(|r| r.body).collect()
}

/// Ten calls of the everyday kinds, then an answer, with the default tool set (no `tools:`):
/// what a short task costs on the wire.
async fn ten_calls() -> Vec<Value> {
    let calls = [
        tool("Glob", json!({"pattern": "**/*.rs"})),
        tool("Read", json!({"file_path": "src/lib.rs"})),
        tool("Grep", json!({"pattern": "fn add", "path": "src"})),
        tool("Bash", json!({"command": "ls -la"})),
        tool("Read", json!({"file_path": "README.md"})),
        tool(
            "TodoWrite",
            json!({"todos": [
                {"content": "Fix add", "status": "in_progress", "activeForm": "Fixing add"},
                {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
            ]}),
        ),
        tool(
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
        ),
        tool("Bash", json!({"command": "git diff --stat"})),
        tool(
            "Grep",
            json!({"pattern": "add", "path": "README.md", "output_mode": "content"}),
        ),
        tool(
            "Write",
            json!({"file_path": "NOTES.md", "content": "add fixed\n"}),
        ),
    ];
    let mut replies: Vec<Reply> = calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| reply(vec![text(&format!("Step {}.", i + 1)), call]))
        .collect();
    replies.push(reply(vec![text("Fixed add; the tests pass.")]));
    let server = FakeModel::start(KEY, replies).await;
    let dir = tempfile::TempDir::new().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("src/lib.rs"),
        "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    std::fs::write(ws.join("README.md"), "# adder\n\n`add` adds two numbers.\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    let task = json!({
        "version": 1,
        "name": "ten",
        "prompt": "Fix the add function in src/lib.rs and note what you did in NOTES.md.",
        "workdir": ws,
        "mode": "acceptEdits",
        "permissions": {"allow": ["Bash(ls:*)", "Bash(git diff:*)"]},
        "limits": {"max_turns": 15},
    });
    run(&server, task, dir.path()).await;
    server.requests().into_iter().map(|r| r.body).collect()
}

/// What each part of the first request costs, in bytes as sent, against the budget kept in
/// `benches/request-budget.toml` (which `suite::economy` enforces); fails when a part every
/// run sends alike grew past it.
fn first_request_parts(bodies: &[Value]) {
    let budget = request_parts::budget();
    println!("| part of the first request | bytes | budget |\n|---|---|---|");
    let parts = request_parts::first_request(&bodies[0]);
    for (name, bytes) in &parts {
        let limit = budget
            .iter()
            .find(|(part, _)| part == name)
            .map_or("none".to_string(), |(_, limit)| limit.to_string());
        println!("| {name} | {bytes} | {limit} |");
    }
    let reminders: Vec<String> = bodies
        .iter()
        .flat_map(request_parts::reminders)
        .map(|bytes| bytes.to_string())
        .collect();
    println!("reminders sent, bytes each: {}", reminders.join(", "));
    // The budget is set for the suite's run (dontAsk, a 29-byte prompt); this run's mode and
    // prompt make its system prompt and messages differ, so only the parts every run sends
    // alike (the tools and the catalogue) are held to it here. `suite::economy` holds all.
    let (alike, differ): (Vec<request_parts::Part>, Vec<request_parts::Part>) = parts
        .into_iter()
        .partition(|(name, _)| name.starts_with("tool ") || name == "deferred catalogue");
    for problem in request_parts::over_budget(&differ) {
        println!("differs from the budgeted run (its mode and prompt): {problem}");
    }
    let grown = request_parts::over_budget(&alike);
    assert!(
        grown.is_empty(),
        "the request grew past benches/request-budget.toml:\n{}",
        grown.join("\n")
    );
}

/// The body in cache order without the `cache_control` markers.
fn cache_order(body: &Value) -> String {
    let mut body = body.clone();
    strip_markers(&mut body);
    format!("{}{}{}", body["tools"], body["system"], body["messages"])
}

fn strip_markers(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_markers);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_markers),
        _ => {}
    }
}

fn report(name: &str, bodies: &[Value]) {
    let sizes: Vec<usize> = bodies.iter().map(|b| b.to_string().len()).collect();
    let total: usize = sizes.iter().sum();
    let laid: Vec<String> = bodies.iter().map(cache_order).collect();
    let shares: Vec<f64> = laid
        .windows(2)
        .map(|pair| {
            let common = pair[0]
                .bytes()
                .zip(pair[1].bytes())
                .take_while(|(a, b)| a == b)
                .count();
            common as f64 / pair[0].len() as f64
        })
        .collect();
    let min = shares.iter().copied().fold(1.0, f64::min);
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    println!(
        "| {name} | {} | {total} | {} | {} | {:.2}% | {:.2}% |",
        bodies.len(),
        sizes.iter().max().unwrap_or(&0),
        total / 4,
        min * 100.0,
        mean * 100.0
    );
}

/// Bytes each built-in's definition adds to every request that offers it.
fn tool_definitions() {
    println!("| tool | definition bytes |\n|---|---|");
    for name in tollgate::policy::ToolName::BUILTINS {
        if let Some(tool) = tollgate::tools::builtin(&name) {
            let definition = json!({
                "name": tool.name().to_string(),
                "description": tool.description(),
                "input_schema": tool.input_schema(),
            });
            println!("| {name} | {} |", definition.to_string().len());
        }
    }
}

#[tokio::main]
async fn main() {
    tool_definitions();
    println!(
        "| run | requests | request bytes, total | largest request | input tokens (est., bytes/4) | prefix share, min | prefix share, mean |"
    );
    println!("|---|---|---|---|---|---|---|");
    let ten = ten_calls().await;
    report("10 calls, default tools", &ten);
    report("quick start", &quickstart().await);
    report(
        "20 turns, one 1 MB log (Bash)",
        &twenty_turns_with_a_log(false).await,
    );
    report(
        "the same, offload off (thresholds 2,000,000)",
        &twenty_turns_with_a_log(true).await,
    );
    let sizes: Vec<String> = ten
        .iter()
        .map(|b| b.to_string().len().to_string())
        .collect();
    println!("10 calls, each request's bytes: {}", sizes.join(", "));
    // `ECONOMY_DUMP=FILE`: the 10-call run's last request, to see where its bytes go.
    if let Ok(path) = std::env::var("ECONOMY_DUMP")
        && let Some(last) = ten.last()
    {
        std::fs::write(path, serde_json::to_string_pretty(last).unwrap()).unwrap();
    }
    // Last: it fails the bench when a part every run sends alike grew past its budget.
    first_request_parts(&ten);
}
