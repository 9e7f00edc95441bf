//! Bounded cost under unusual input, as figures for the README: SSE parse of one 20 MB
//! event, a response of 160k content blocks through each API's parser (`blocks`),
//! confinement of a 1 MB path, policy load time and memory and per-decision cost
//! at 1k/10k/100k path rules, and `replay`'s memory on a 200 MB transcript. Inputs are made
//! at bench time. Run with `cargo bench --bench faults` (or name one section: `sse`, `path`,
//! `policy`, `replay`). Memory is each case's peak RSS, measured in a child process of its own.

use tollgate_test_support::rusage;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tollgate::model::sse::SseDecoder;
use tollgate::model::{AnthropicStream, OpenAiStream, SseParser};
use tollgate::policy::{
    Access, PermissionContext, PermissionMode, Policy, PolicyOrigin, RuleSet, ToolName, Workspace,
    check_path,
};
use tollgate::transcript::PolicySummary;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; a child is started with `child <case> <n>`.
    if args.first().map(String::as_str) == Some("child") {
        child(&args[1], args[2].parse().unwrap_or(0));
        return;
    }
    let only: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.contains(&name);
    if wanted("sse") {
        sse();
    }
    if wanted("blocks") {
        blocks(160_000);
    }
    if wanted("path") {
        path();
    }
    if wanted("policy") {
        for rules in [1_000, 10_000, 100_000] {
            in_child("policy", rules);
        }
    }
    if wanted("replay") {
        in_child("replay", 200);
    }
}

fn in_child(case: &str, n: usize) {
    let exe = std::env::current_exe().unwrap_or_else(|err| panic!("{err}"));
    let status = Command::new(exe)
        .args(["child", case, &n.to_string()])
        .status()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(status.success(), "{case} {n} failed");
}

fn child(case: &str, n: usize) {
    match case {
        "policy" => policy(n),
        "replay" => replay(n),
        other => panic!("no case {other}"),
    }
}

/// Peak resident memory of this process, from /proc (Linux), in MB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn sse() {
    let size = 20 * 1024 * 1024;
    let data = format!(
        "{{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}",
        "y".repeat(size)
    );
    let stream = format!("event: content_block_delta\ndata: {data}\n\n").into_bytes();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let mut decoder = SseDecoder::default();
        let mut events = 0;
        // 16 KiB chunks, as a TLS stream hands them over.
        for chunk in stream.chunks(16 * 1024) {
            events += decoder
                .feed(chunk)
                .unwrap_or_else(|err| panic!("{err}"))
                .len();
        }
        assert_eq!(events, 1);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "sse: one {} MB event in 16 KiB chunks: {:.1} ms ({:.0} MB/s)",
        size / (1024 * 1024),
        best * 1e3,
        (size as f64 / (1024.0 * 1024.0)) / best
    );
}

/// One response of `n` content blocks (Anthropic: text blocks, each started, given a delta
/// and stopped; OpenAI: tool calls by index), fed event by event to the API's parser.
fn blocks(n: u64) {
    let mut anthropic =
        vec![r#"{"type":"message_start","message":{"usage":{"input_tokens":1}}}"#.to_string()];
    for index in 0..n {
        anthropic.push(format!(r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#));
        anthropic.push(format!(r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":"b"}}}}"#));
        anthropic.push(format!(
            r#"{{"type":"content_block_stop","index":{index}}}"#
        ));
    }
    anthropic.push(r#"{"type":"message_stop"}"#.to_string());
    let mut openai = Vec::new();
    for index in 0..n {
        openai.push(format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"id":"call_{index}","type":"function","function":{{"name":"Read","arguments":"{{}}"}}}}]}},"finish_reason":null}}]}}"#));
    }
    openai.push(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#.to_string());
    openai.push(r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#.to_string());
    openai.push("[DONE]".to_string());
    fn feed(mut parser: impl SseParser, events: &[String]) -> usize {
        for event in events {
            if let Some(response) = parser.event(event).unwrap_or_else(|err| panic!("{err:?}")) {
                return response.content.len();
            }
        }
        panic!("the stream did not end")
    }
    for (api, events) in [("anthropic", &anthropic), ("openai", &openai)] {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            let content = match api {
                "anthropic" => feed(AnthropicStream::default(), events),
                _ => feed(OpenAiStream::default(), events),
            };
            assert_eq!(content as u64, n);
            best = best.min(started.elapsed().as_secs_f64());
        }
        println!(
            "blocks: {api}: one response of {n} content blocks parsed in {:.0} ms",
            best * 1e3
        );
    }
}

fn path() {
    let dir = std::env::temp_dir();
    let raw = "a/".repeat(500_000);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let resolved = tollgate::tools::resolve_path(&raw, &dir, None);
        assert!(resolved.as_os_str().len() > raw.len() / 2);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "path: resolve a {} KB path of 500k parts: {:.1} ms",
        raw.len() / 1000,
        best * 1e3
    );
}

/// A policy of `n` path rules across the anchors and kinds, as a large organisation's might.
fn policy_text(n: usize) -> String {
    let mut allow = Vec::new();
    let mut deny = Vec::new();
    let mut ask = Vec::new();
    for i in 0..n {
        match i % 5 {
            0 => allow.push(format!("Read(src/module{i}/**)")),
            1 => deny.push(format!("Edit(//etc/app{i}/*.conf)")),
            2 => ask.push(format!("Write(~/project{i}/**/*.txt)")),
            3 => deny.push(format!("Read(*.secret{i})")),
            _ => allow.push(format!("Edit(./generated/part{i}/**)")),
        }
    }
    let list = |rules: &[String]| {
        rules
            .iter()
            .map(|rule| format!("    - '{rule}'\n"))
            .collect::<String>()
    };
    format!(
        "permissions:\n  allow:\n{}  deny:\n{}  ask:\n{}",
        list(&allow),
        list(&deny),
        list(&ask)
    )
}

fn policy(n: usize) {
    let text = policy_text(n);
    let file = PathBuf::from("/bench/policy.yaml");
    let before = peak_rss_mb();
    let started = Instant::now();
    let policy = Policy::parse(
        &text,
        PolicyOrigin {
            file: &file,
            dir: Path::new("/bench"),
            home: Some(Path::new("/home/u")),
        },
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let parsed = started.elapsed().as_secs_f64();
    let rules = RuleSet::from_policy(&policy);
    let load = started.elapsed().as_secs_f64();
    let memory = peak_rss_mb() - before;
    let workspace = Workspace::new(PathBuf::from("/ws"), vec![], Some(PathBuf::from("/home/u")));
    let ctx = PermissionContext {
        mode: PermissionMode::DontAsk,
        rules: &rules,
        workspace: &workspace,
        disk: None,
        auto_allow_bash: false,
    };
    let paths: Vec<(ToolName, PathBuf, Access)> = (0..1000)
        .map(|k| match k % 4 {
            0 => (
                ToolName::Read,
                PathBuf::from(format!("/ws/src/module{}/lib.rs", (k * 37) % n)),
                Access::Read,
            ),
            1 => (
                ToolName::Edit,
                PathBuf::from(format!("/ws/generated/part{}/a.rs", (k * 11) % n)),
                Access::Write,
            ),
            2 => (
                ToolName::Read,
                PathBuf::from(format!("/ws/deep/x/y/z/key.secret{}", (k * 7) % n)),
                Access::Read,
            ),
            _ => (
                ToolName::Write,
                PathBuf::from("/ws/nothing/matches/here.md"),
                Access::Write,
            ),
        })
        .collect();
    let rounds = if n >= 100_000 { 2 } else { 20 };
    let started = Instant::now();
    for _ in 0..rounds {
        for (tool, path, access) in &paths {
            std::hint::black_box(check_path(&ctx, tool, path, *access));
        }
    }
    let per_decision = started.elapsed().as_secs_f64() / (rounds * paths.len()) as f64;
    println!(
        "policy: {n} path rules: load {:.0} ms (YAML and rule parsing {:.0} ms), +{:.0} MB peak RSS, {:.1} µs a decision",
        load * 1e3,
        parsed * 1e3,
        memory,
        per_decision * 1e6
    );
}

/// A transcript of about `mb` MB (tool calls and decisions, large results), replayed by the
/// real binary; its peak RSS is read from the kernel's accounting of the waited-for child.
fn replay(mb: usize) {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let transcript = dir.path().join("transcript.jsonl");
    write_transcript(&transcript, mb * 1024 * 1024);
    std::fs::write(
        dir.path().join("policy.yaml"),
        "permissions:\n  allow: [Read]\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("replay")
        .arg(&transcript)
        .args(["--policy", "policy.yaml", "--workdir", "."])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("{err}"));
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        status.success(),
        "replay refused the generated transcript: {status}"
    );
    println!(
        "replay: {mb} MB transcript: {:.1} s, peak RSS {:.0} MB",
        elapsed,
        rusage::children_peak_rss_kib() as f64 / 1024.0
    );
}

fn write_transcript(path: &Path, bytes: usize) {
    use std::io::Write;
    let file = std::fs::File::create(path).unwrap_or_else(|err| panic!("{err}"));
    let mut out = std::io::BufWriter::new(file);
    let mut written = 0;
    let mut seq = 0;
    let filler = "x".repeat(100_000);
    let mut line = |out: &mut std::io::BufWriter<std::fs::File>, value: serde_json::Value| {
        seq += 1;
        let mut value = value;
        value["seq"] = seq.into();
        value["time"] = "2026-11-30T00:00:00.000Z".into();
        let text = value.to_string();
        writeln!(out, "{text}").unwrap_or_else(|err| panic!("{err}"));
        text.len() + 1
    };
    // The typed summary, so a field added to it cannot leave the bench replaying a
    // transcript `replay` refuses.
    let policy = serde_json::to_value(PolicySummary {
        sources: Vec::new(),
        managed_only: false,
        rules: 1,
        ignored_rules: Vec::new(),
        ignored_hooks: Vec::new(),
        ignored_additional_directories: Vec::new(),
        ignored_keys: Vec::new(),
        warnings: Vec::new(),
        dropped_for_auto: Vec::new(),
        plugins: Vec::new(),
        held_back: Vec::new(),
    })
    .unwrap_or_else(|err| panic!("{err}"));
    written += line(
        &mut out,
        serde_json::json!({"type": "run_started", "run_id": "bench", "tollgate_version": "0", "task": {"name": "bench", "file": "t.yaml"}, "mode": "dontAsk", "policy": policy, "model": {"provider": "scripted", "name": "s"}, "workdir": ".", "tools": ["Read"], "max_turns": 100000}),
    );
    let mut call = 0;
    while written < bytes {
        call += 1;
        let id = format!("toolu_{call}");
        written += line(
            &mut out,
            serde_json::json!({"type": "tool_call", "id": id, "tool": "Read", "input": {"file_path": format!("src/f{call}.rs")}}),
        );
        written += line(
            &mut out,
            serde_json::json!({"type": "permission_decision", "id": id, "tool": "Read", "decision": "allow", "step": "1c", "layer": "rule", "rule": null, "reason": "allowed"}),
        );
        written += line(
            &mut out,
            serde_json::json!({"type": "tool_result", "id": id, "tool": "Read", "status": "success", "is_error": false, "content": filler, "duration_ms": 1}),
        );
    }
    out.flush().unwrap_or_else(|err| panic!("{err}"));
}
