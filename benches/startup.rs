//! Time from process start to the first model request, for the release binary with a
//! plain-http base URL: `cargo bench --bench startup`. The "server" is a bare loopback
//! socket that notes when the request's first bytes arrive, then drops the connection and
//! stops the run. Prints the median and the range of 21 runs. Then the CPU time (user +
//! system, the child's `getrusage`) and peak RSS of a whole 0-call run against the suite's
//! fake model server, which answers `end_turn` at once. `TOLLGATE_BENCH_BIN` names another
//! binary to measure (an older build, for a before/after).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tollgate_test_support::fake_model;
use tollgate_test_support::rusage;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 21;

fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::TempDir::new().unwrap();
    let task = format!(
        "version: 1\nname: startup\nprompt: hi\nmode: dontAsk\ntools: [Read, Bash]\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5\n  base_url: http://127.0.0.1:{port}\n  api_key_env: BENCH_KEY\n  retries: {{max: 0}}\n"
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let mut times = Vec::new();
    for run in 0..RUNS {
        let started = Instant::now();
        let mut child = Command::new(binary())
            .arg("run")
            .arg(dir.path().join("task.yaml"))
            .arg("--out")
            .arg(dir.path().join(format!("out{run}")))
            .arg("--workdir")
            .arg(dir.path())
            .env("BENCH_KEY", "bench-key")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).unwrap();
        times.push(started.elapsed());
        drop(stream);
        let _ = child.kill();
        child.wait().unwrap();
    }
    times.sort();
    println!(
        "process start to first model request: median {:.1} ms (min {:.1}, max {:.1}) over {RUNS} runs",
        ms(times[RUNS / 2]),
        ms(times[0]),
        ms(times[RUNS - 1])
    );
    zero_call_runs(dir.path());
}

fn binary() -> std::path::PathBuf {
    std::env::var_os("TOLLGATE_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_tollgate").into())
}

/// Whole runs that make no tool call: CPU per run (median and best) and peak RSS.
fn zero_call_runs(dir: &std::path::Path) {
    use fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let answers: Vec<Reply> = (0..RUNS)
        .map(|_| {
            let tokens = Tokens {
                input: 1,
                output: 1,
                cache_write: 0,
                cache_read: 0,
            };
            Reply::Turn(turn(vec![text("Done.")], tokens))
        })
        .collect();
    let server = runtime.block_on(FakeModel::start("bench-key", answers));
    let task = format!(
        "version: 1\nname: zero\nprompt: hi\nmode: dontAsk\ntools: [Read, Bash]\n{}",
        server.model_block(Api::Anthropic, "  retries: {max: 0}\n")
    );
    std::fs::write(dir.join("zero.yaml"), task).unwrap();
    let mut cpu = Vec::new();
    for run in 0..RUNS {
        let before = rusage::children_cpu();
        let status = Command::new(binary())
            .arg("run")
            .arg(dir.join("zero.yaml"))
            .arg("--out")
            .arg(dir.join(format!("zero{run}")))
            .arg("--workdir")
            .arg(dir)
            .env("TEST_MODEL_KEY", server.key())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "a 0-call run ended with {status}");
        cpu.push(rusage::children_cpu() - before);
    }
    cpu.sort();
    println!(
        "a 0-call run: CPU median {:.2} ms (best {:.2}) over {RUNS} runs; peak RSS of the largest {:.1} MiB",
        ms(cpu[RUNS / 2]),
        ms(cpu[0]),
        rusage::children_peak_rss_kib() as f64 / 1024.0
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
