//! Time from process start to the first model request, for the release binary with a
//! plain-http base URL: `cargo bench --bench startup`. The "server" is a bare loopback
//! socket that notes when the request's first bytes arrive, then drops the connection and
//! stops the run. Prints the median and the range of 21 runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
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
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "process start to first model request: median {:.1} ms (min {:.1}, max {:.1}) over {RUNS} runs",
        ms(times[RUNS / 2]),
        ms(times[0]),
        ms(times[RUNS - 1])
    );
}
