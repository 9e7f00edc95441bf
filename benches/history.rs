//! Whether a turn costs more as the history grows (S3: the history is append-only, so a
//! message sent once should never be encoded again). Runs the binary through long runs of
//! Glob calls against a small model server of its own — one that keeps no request, so its
//! cost does not grow with the history either — and prints, per run length, tollgate's CPU
//! time (the child's `getrusage`) and the wall time of its early and late turns:
//! `cargo bench --bench history`. `TOLLGATE_BENCH_BIN` names another binary to measure (an
//! older build, for a before/after in one run); `TOLLGATE_BENCH_TURNS` the run lengths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tollgate_test_support::rusage;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

#[derive(Clone)]
struct Server {
    turns: usize,
    arrivals: Arc<Mutex<Vec<(Instant, usize)>>>,
}

fn event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A Glob call until the last turn, then an answer; each request's arrival and size kept.
async fn messages(State(server): State<Server>, body: Bytes) -> Response {
    let number = {
        let mut arrivals = server.arrivals.lock().unwrap();
        arrivals.push((Instant::now(), body.len()));
        arrivals.len()
    };
    let usage = serde_json::json!({"input_tokens": 10, "output_tokens": 5});
    let mut sse = event(
        "message_start",
        serde_json::json!({"type": "message_start", "message": {"id": format!("msg_{number}"), "type": "message", "role": "assistant", "content": [], "model": "m", "usage": usage}}),
    );
    if number < server.turns {
        sse += &event(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{number}"), "name": "Glob", "input": {}}}),
        );
        sse += &event(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\": \"*.none\"}"}}),
        );
    } else {
        sse += &event(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        );
        sse += &event(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}),
        );
    }
    let stop = if number < server.turns {
        "tool_use"
    } else {
        "end_turn"
    };
    sse += &event(
        "content_block_stop",
        serde_json::json!({"type": "content_block_stop", "index": 0}),
    );
    sse += &event(
        "message_delta",
        serde_json::json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}}),
    );
    sse += &event("message_stop", serde_json::json!({"type": "message_stop"}));
    ([("content-type", "text/event-stream")], sse).into_response()
}

struct Measured {
    cpu: Duration,
    /// Median gap between consecutive requests over the first and the last 100 turns.
    early: Duration,
    late: Duration,
    last_request_bytes: usize,
}

async fn run(binary: &str, turns: usize) -> Measured {
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .with_state(Server {
            turns,
            arrivals: arrivals.clone(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let task = format!(
        "version: 1\nname: history\nprompt: Look for .none files.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, Grep]\nlimits: {{max_turns: {}}}\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5\n  base_url: http://{address}\n  api_key_env: BENCH_KEY\n",
        turns + 1
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let before = rusage::children_cpu();
    let status = tokio::process::Command::new(binary)
        .arg("run")
        .arg(dir.path().join("task.yaml"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .env("BENCH_KEY", "bench-key")
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    let cpu = rusage::children_cpu() - before;
    server.abort();
    assert!(status.success(), "the bench run failed: {status}");
    let arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), turns);
    let gaps: Vec<Duration> = arrivals
        .windows(2)
        .map(|pair| pair[1].0 - pair[0].0)
        .collect();
    let median = |gaps: &[Duration]| {
        let mut gaps = gaps.to_vec();
        gaps.sort();
        gaps.get(gaps.len() / 2).copied().unwrap_or_default()
    };
    let window = gaps.len().min(100);
    Measured {
        cpu,
        early: median(&gaps[..window]),
        late: median(&gaps[gaps.len() - window..]),
        last_request_bytes: arrivals.last().map_or(0, |(_, bytes)| *bytes),
    }
}

#[tokio::main]
async fn main() {
    let binary = std::env::var("TOLLGATE_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_tollgate").to_string());
    let lengths: Vec<usize> = std::env::var("TOLLGATE_BENCH_TURNS")
        .unwrap_or_else(|_| "200,2000".into())
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    println!("{binary}");
    println!(
        "| turns | CPU (user + sys) | CPU per turn | turn gap, first 100 (median) | turn gap, last 100 (median) | last request |"
    );
    println!("|---|---|---|---|---|---|");
    for turns in lengths {
        let measured = run(&binary, turns).await;
        println!(
            "| {turns} | {:.0} ms | {:.0} µs | {:.0} µs | {:.0} µs | {} KB |",
            measured.cpu.as_secs_f64() * 1e3,
            measured.cpu.as_secs_f64() * 1e6 / turns as f64,
            measured.early.as_secs_f64() * 1e6,
            measured.late.as_secs_f64() * 1e6,
            measured.last_request_bytes / 1000
        );
    }
}
