//! What auto mode's classifier adds per judged action, measured against the fake model server
//! over real HTTP: `cargo bench --bench classifier`. Each action is judged once on a miss
//! (one model call) and again on a hit (the run's cache answers, no model call); prints the
//! README's rows: calls, cache hits, mean latency per judged action, cost per judged action
//! (claude-haiku-4-5's price on the fake's fixed 400 input / 30 output tokens).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tollgate_test_support::fake_model;

use std::time::{Duration, Instant};

use fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
use serde_json::json;
use tollgate::classifier::{Action, Classifier, ClassifierSetup, Judgement};
use tollgate::model::{
    AnthropicModel, ApiKey, HttpSettings, Provider, RetryPolicy, Timeouts, install_crypto_provider,
    pricing,
};
use tollgate::settings::AutoModeProse;

const KEY: &str = "bench-key";
const ACTIONS: usize = 50;
const MODEL: &str = "claude-haiku-4-5";

fn verdict(index: usize) -> Reply {
    let answer = json!({"decision": if index.is_multiple_of(5) { "deny" } else { "allow" }, "reason": "bench", "risk": "low"});
    Reply::Turn(turn(
        vec![text(&answer.to_string())],
        Tokens {
            input: 400,
            output: 30,
            cache_write: 0,
            cache_read: 0,
        },
    ))
}

fn classifier(server: &FakeModel) -> Classifier {
    let settings = HttpSettings {
        base_url: server.base_url(Api::Anthropic),
        api_key: Some(ApiKey::new(KEY)),
        timeouts: Timeouts::default(),
        retries: RetryPolicy::default(),
    };
    Classifier::new(ClassifierSetup {
        provider: Provider::Anthropic(
            AnthropicModel::new(settings, MODEL.into(), None, None).unwrap(),
        ),
        provider_name: "anthropic".into(),
        model: MODEL.into(),
        pricing: pricing::lookup(MODEL),
        max_tokens: 1024,
        two_stage: false,
        max_cost_usd: None,
        prose: AutoModeProse {
            environment: vec!["a CI runner".into()],
            allow: vec!["running the project's linters and tests".into()],
            soft_deny: vec![],
            hard_deny: vec!["publishing anything".into()],
        },
        cache_dir: None,
    })
}

/// Judges every action once; returns the wall time, model calls, cache hits and cost.
async fn pass(judge: &mut Classifier, actions: &[Action]) -> (Duration, u32, u32, f64) {
    let (mut calls, mut hits, mut cost) = (0, 0, 0.0);
    let started = Instant::now();
    for action in actions {
        let judged = judge.judge("Fix the lint errors in src/", action).await;
        assert!(!matches!(judged.judgement, Judgement::Unavailable { .. }));
        for call in &judged.calls {
            if call.cache_hit {
                hits += 1;
            } else {
                calls += 1;
            }
        }
        cost += judged.cost_usd().unwrap();
    }
    (started.elapsed(), calls, hits, cost)
}

#[tokio::main]
async fn main() {
    install_crypto_provider();
    let server = FakeModel::start(KEY, (0..ACTIONS).map(verdict).collect()).await;
    let mut judge = classifier(&server);
    let actions: Vec<Action> = (0..ACTIONS)
        .map(|i| Action {
            tool: "Bash".into(),
            input: json!({"command": format!("make target-{i}")}),
        })
        .collect();
    println!("{ACTIONS} judged actions against the fake server (no think time)");
    println!(
        "| pass | model calls | cache hits | latency per judged action | cost per judged action |"
    );
    println!("|---|---|---|---|---|");
    for name in ["first (misses)", "again (run cache)"] {
        let (wall, calls, hits, cost) = pass(&mut judge, &actions).await;
        let n = ACTIONS as f64;
        println!(
            "| {name} | {calls} | {hits} | {:.2} ms | ${:.6} |",
            wall.as_secs_f64() * 1000.0 / n,
            cost / n
        );
    }
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}
