//! tollgate's own cost per model round trip and its peak memory, measured by running the
//! release binary against the fake model server: `cargo bench --bench round_trip`.
//!
//! Overhead per round trip = (wall time − the server's scripted delay) / round trips, for a
//! 20-turn run (19 Read calls and a final answer) and a 1-turn run; the difference between
//! the two is the marginal cost of one more turn without process start-up. Peak RSS is the
//! children's `ru_maxrss`. Prints README table rows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

// The bench uses the fake's server and turn builders, not its fault cases.
use tollgate_test_support::fake_model;

use std::time::{Duration, Instant};

use fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use serde_json::json;

const KEY: &str = "bench-key";
/// No think time (the whole wall time is tollgate's and the fake's), and a model-like one.
const DELAYS: [Duration; 2] = [Duration::ZERO, Duration::from_millis(20)];
const RUNS: usize = 7;

fn replies(turns: usize, delay: Duration) -> Vec<Reply> {
    let tokens = Tokens {
        input: 1000,
        output: 100,
        cache_write: 0,
        cache_read: 0,
    };
    (0..turns)
        .map(|i| {
            let blocks = if i + 1 < turns {
                vec![
                    text("Reading the notes again."),
                    tool("Read", json!({"file_path": "notes.txt"})),
                ]
            } else {
                vec![text("Done.")]
            };
            Reply::Delayed {
                delay,
                reply: Box::new(Reply::Turn(turn(blocks, tokens))),
            }
        })
        .collect()
}

/// One run of the binary; returns its wall time and the peak RSS of the children so far (KiB).
async fn run_once(api: Api, turns: usize, delay: Duration) -> (Duration, i64) {
    let server = FakeModel::start(KEY, replies(turns, delay)).await;
    let dir = tempfile::TempDir::new().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "the build is green\n".repeat(50)).unwrap();
    let (provider, name) = match api {
        Api::Anthropic => ("anthropic", "claude-sonnet-4-5"),
        Api::OpenAi => ("openai", "gpt-4.1"),
    };
    let task = format!(
        "version: 1\nname: bench\nprompt: Read notes.txt.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, Grep]\nlimits: {{max_turns: 30}}\nmodel:\n  provider: {provider}\n  name: {name}\n  base_url: {}\n  api_key_env: BENCH_KEY\n",
        server.base_url(api)
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let started = Instant::now();
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("run")
        .arg(dir.path().join("task.yaml"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .env("BENCH_KEY", KEY)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    let wall = started.elapsed();
    assert!(status.success(), "the bench run failed");
    assert_eq!(server.requests().len(), turns);
    (wall, peak_rss_of_children())
}

fn peak_rss_of_children() -> i64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage.ru_maxrss
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    println!("median of {RUNS} runs; overhead = wall time - the server's scripted delay");
    for delay in DELAYS {
        let ms = delay.as_secs_f64() * 1000.0;
        for api in [Api::Anthropic, Api::OpenAi] {
            let mut one = Vec::new();
            let mut twenty = Vec::new();
            let mut rss = 0;
            for _ in 0..RUNS {
                let (wall, _) = run_once(api, 1, delay).await;
                one.push(wall.as_secs_f64() * 1000.0 - ms);
                let (wall, peak) = run_once(api, 20, delay).await;
                twenty.push(wall.as_secs_f64() * 1000.0 - 20.0 * ms);
                rss = rss.max(peak);
            }
            let one = median(one);
            let twenty = median(twenty);
            println!(
                "| {api:?} | {ms:.0} ms | {one:.1} ms | {twenty:.1} ms | {:.2} ms | {:.2} ms | {:.1} MiB |",
                twenty / 20.0,
                (twenty - one) / 19.0,
                rss as f64 / 1024.0
            );
        }
    }
}
