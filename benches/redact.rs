//! How fast the redactor rewrites what tollgate writes: 1 MiB of command output holding a
//! few secrets and tokens, and one typical transcript line, with 20 secret values known.
//! Also how long building a redactor takes (once per process). `cargo bench --bench redact`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tollgate::redact::Redactor;

fn secrets() -> Vec<(String, String)> {
    (0..20)
        .map(|i| {
            (
                format!("SECRET_{i}_TOKEN"),
                format!("s3cr3t-value-{i:02}-abcdefgh"),
            )
        })
        .collect()
}

fn output() -> String {
    let mut text = String::with_capacity(1 << 20);
    let mut line = 0;
    while text.len() < 1 << 20 {
        line += 1;
        match line % 500 {
            0 => text.push_str("export TOKEN=s3cr3t-value-07-abcdefgh\n"),
            250 => text.push_str("auth: ghp_0123456789abcdefghijABCDEFGHIJ0123456789\n"),
            _ => text.push_str("test suite::module::case_name ... ok (0.01 s) the usual line\n"),
        }
    }
    text
}

fn bench(c: &mut Criterion) {
    let redactor = Redactor::with_vars(secrets());
    let text = output();
    let line = r#"{"seq":12,"event":"tool_result","id":"toolu_01","content":"src/lib.rs:12: pub fn greet() -> String","is_error":false}"#;
    let mut group = c.benchmark_group("redact");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("1MiB_output", |b| b.iter(|| redactor.redact(&text)));
    group.finish();
    c.bench_function("redact/transcript_line", |b| {
        b.iter(|| redactor.redact(line))
    });
    c.bench_function("redact/build", |b| {
        b.iter(|| Redactor::with_vars(secrets()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
