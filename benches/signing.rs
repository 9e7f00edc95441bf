//! What a cloud platform's per-request signature costs: SigV4 over a Bedrock request (the
//! body's SHA-256, the canonical request, four HMACs) for a first turn's body and a long
//! run's, beside the body's size; and the RS256 JWT a Google service account signs once per
//! access token (about hourly, not per request). `cargo bench --bench signing`.

use std::time::SystemTime;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use tollgate::model::cloud::aws::{AwsKeys, sign_request};

const URL: &str = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke";

fn bench(c: &mut Criterion) {
    let keys = AwsKeys::new(
        "ASIAEXAMPLEEXAMPLE01",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some("IQoJb3JpZ2luX2VjEXAMPLE-session-token"),
    );
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut group = c.benchmark_group("sigv4");
    // A first request (system prompt and tools: ~20 KB) and a long run's (~1 MB of history).
    for (name, size) in [("20KB_body", 20 << 10), ("1MB_body", 1 << 20)] {
        let body = vec![b'x'; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                sign_request(
                    &keys,
                    "us-east-1",
                    "bedrock",
                    URL,
                    &body,
                    &headers,
                    SystemTime::now(),
                )
            })
        });
    }
    group.finish();
    // A 2048-bit RSA signature over the assertion's header and claims.
    let key = tollgate::model::cloud::google::private_key(include_str!(
        "../tests/fixtures/cloud/service-account.pem"
    ))
    .unwrap_or_else(|err| panic!("{err}"));
    c.bench_function("rs256_service_account_assertion", |b| {
        b.iter(|| {
            tollgate::model::cloud::google::assertion(
                &key,
                Some("k1"),
                "tollgate-ci@my-project.iam.gserviceaccount.com",
                "https://oauth2.googleapis.com/token",
                SystemTime::now(),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
