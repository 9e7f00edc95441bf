//! One budget for many runs (issue 51): twenty runs at once against the fake server, each
//! willing to spend far more than the fleet may, share one ledger file; together they never
//! spend more than its cap, the ledger's account equals what the runs' own records say they
//! spent, and the runs the cap stopped say so. A ledger holding another cap is refused before
//! any request.

use serde_json::{Value, json};

use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::runs::{Finished, Run};

const KEY: &str = "sk-shared-budget-test-key";

/// $0.0105 a request at claude-sonnet-4-5's price: 2000 tokens in at $3 per million, 300 out
/// at $15.
fn busy_turn() -> Reply {
    Reply::Turn(turn(
        vec![
            text("Looking again."),
            tool("Glob", json!({"pattern": "*.txt"})),
        ],
        Tokens {
            input: 2000,
            output: 300,
            ..Tokens::default()
        },
    ))
}

fn run(server: &FakeModel, ledger: &std::path::Path, cap: &str) -> Run {
    Run::new()
        .file("ws/notes.txt", "notes\n")
        .task(&format!(
            "version: 1\nname: fleet\nprompt: Keep looking.\nworkdir: ws\nmode: dontAsk\ntools: [Glob]\nlimits: {{max_turns: 40}}\n{}",
            server.model_block(Api::Anthropic, "  retries: {max: 0}\n")
        ))
        .env("TEST_MODEL_KEY", KEY)
        .args([
            "--shared-budget",
            ledger.to_str().unwrap(),
            "--shared-max-cost",
            cap,
        ])
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_runs_at_once_never_spend_more_than_the_shared_cap() {
    let cap = 0.30;
    let server = FakeModel::start(KEY, (0..400).map(|_| busy_turn()).collect()).await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("fleet-budget.json");
    let runs: Vec<Finished> = futures_util::future::join_all(
        (0..20).map(|_| run(&server, &ledger, &cap.to_string()).finish_async()),
    )
    .await;
    let mut spent = 0.0;
    let mut stopped = 0;
    for run in &runs {
        let finished = run.finished();
        spent += finished["total_cost_usd"].as_f64().unwrap_or(0.0);
        assert_eq!(finished["outcome"], "max_budget_usd", "{}", run.stderr);
        let error = finished["error"].as_str().unwrap_or_default();
        assert!(error.contains("the shared budget"), "{error}");
        stopped += 1;
    }
    assert_eq!(stopped, 20);
    assert!(spent <= cap + 1e-9, "the runs spent ${spent} of ${cap}");
    // Each request answered is one the fake served; none was sent past the cap.
    let answered: usize = runs
        .iter()
        .map(|run| run.of_type("assistant_message").len())
        .sum();
    assert_eq!(server.requests().len(), answered);
    assert!(answered >= 10, "only {answered} requests were sent");
    // The ledger, read back: what was settled is what the runs recorded, nothing is left
    // reserved, and the cap is the one the first run named.
    let book: Value = serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(book["max_cost_usd"], json!(cap));
    let settled = book["spent_usd"].as_f64().unwrap();
    assert!(
        (settled - spent).abs() < 1e-9,
        "ledger {settled} vs runs {spent}"
    );
    assert_eq!(book["leases"], json!([]));
    assert_eq!(book["expired_usd"], json!(0.0));
    let holders = book["holders"].as_object().unwrap();
    assert!(holders.len() <= 20 && !holders.is_empty(), "{holders:?}");

    // Another cap for the same ledger is refused before any request.
    let before = server.requests().len();
    let refused = run(&server, &ledger, "5").finish_async().await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("holds max_cost_usd 0.3"),
        "{}",
        refused.stderr
    );
    assert_eq!(server.requests().len(), before);
}
