//! Reasoning effort end to end: `--effort`, `model.effort` and the action's `effort` input
//! reach the request body as each API's own setting (checked by the fake model as the real
//! APIs check it), and a word a provider does not take stops the run (exit 2) before any
//! request.

use serde_json::{Value, json};

use crate::suite::providers::{KEY, done_turn, model_block, run_task, run_task_with};
use crate::support::fake_model::{Api, FakeModel};

const READ_ONLY: &str = "mode: dontAsk\ntools: [Read, Glob, Grep]\n";

/// The server's model block with `extra`; a `thinking_budget` needs more room than
/// model_block's 1000 max_tokens (the API's floor is 1024), so it gets 4000.
fn block(api: Api, server: &FakeModel, extra: &str) -> String {
    let block = model_block(api, server, extra);
    if extra.contains("thinking_budget") {
        block.replace("max_tokens: 1000", "max_tokens: 4000")
    } else {
        block
    }
}

/// The one request a successful one-turn run sent.
async fn one_request(api: Api, extra: &str, flags: &[&str]) -> Value {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task_with(READ_ONLY, &block(api, &server, extra), "", &[], flags).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    requests[0].body.clone()
}

#[tokio::test]
async fn anthropic_effort_becomes_a_thinking_budget_above_the_answers_room() {
    // The task's max_tokens (1000, model_block's) stays the answer's: the budget is added.
    for (flags, effort_line, budget) in [
        (&["--effort", "low"][..], "", 4_000),
        (&["--effort", "high"][..], "", 31_999),
        (&[][..], "  effort: medium\n", 10_000),
        // The flag wins over the task's effort and over its thinking_budget.
        (&["--effort", "low"][..], "  effort: high\n", 4_000),
    ] {
        let body = one_request(Api::Anthropic, effort_line, flags).await;
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": budget}),
            "{flags:?} {effort_line}"
        );
        assert_eq!(body["max_tokens"], json!(1000 + budget));
        assert!(body.get("reasoning_effort").is_none());
    }
    let body = one_request(
        Api::Anthropic,
        "  thinking_budget: 2048\n",
        &["--effort", "medium"],
    )
    .await;
    assert_eq!(body["thinking"]["budget_tokens"], json!(10_000));
    assert_eq!(body["max_tokens"], json!(4000 + 10_000));
    // The task's own thinking_budget is sent as it is, inside its max_tokens.
    let body = one_request(Api::Anthropic, "  thinking_budget: 2048\n", &[]).await;
    assert_eq!(body["thinking"]["budget_tokens"], json!(2048));
    assert_eq!(body["max_tokens"], json!(4000));
    // Without an effort nothing is sent.
    let body = one_request(Api::Anthropic, "", &[]).await;
    assert!(body.get("thinking").is_none(), "{body}");
    assert_eq!(body["max_tokens"], json!(1000));
}

#[tokio::test]
async fn openai_effort_is_sent_as_reasoning_effort() {
    for (flags, effort_line, word) in [
        (&["--effort", "minimal"][..], "", "minimal"),
        (&["--effort", "xhigh"][..], "", "xhigh"),
        (&[][..], "  effort: none\n", "none"),
        (&["--effort", "high"][..], "  effort: low\n", "high"),
    ] {
        let body = one_request(Api::OpenAi, effort_line, flags).await;
        assert_eq!(body["reasoning_effort"], json!(word), "{flags:?}");
        assert_eq!(
            body["max_tokens"],
            json!(1000),
            "openai's limit is unchanged"
        );
        assert!(body.get("thinking").is_none());
    }
    let body = one_request(Api::OpenAi, "", &[]).await;
    assert!(body.get("reasoning_effort").is_none(), "{body}");
}

/// A refused effort: exit 2, `message` on stderr, nothing sent.
async fn refused(api: Api, extra: &str, flags: &[&str], message: &str) {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task_with(READ_ONLY, &block(api, &server, extra), "", &[], flags).await;
    assert_eq!(run.code, 2, "{flags:?} {extra}: {}", run.stderr);
    assert!(
        run.stderr.contains(message),
        "{flags:?} {extra}: expected {message:?} in {}",
        run.stderr
    );
    assert!(server.requests().is_empty(), "a request was sent");
}

#[tokio::test]
async fn an_effort_a_provider_does_not_take_stops_the_run_before_any_request() {
    for word in ["none", "minimal", "xhigh"] {
        refused(
            Api::Anthropic,
            "",
            &["--effort", word],
            &format!(
                "--effort {word}: effort `{word}` is not one the anthropic provider takes: low, medium or high"
            ),
        )
        .await;
    }
    // In the task file too.
    refused(
        Api::Anthropic,
        "  effort: minimal\n",
        &[],
        "effort `minimal` is not one the anthropic provider takes",
    )
    .await;
    refused(
        Api::Anthropic,
        "  effort: medium\n  thinking_budget: 2048\n",
        &[],
        "effort and thinking_budget both set Anthropic's thinking",
    )
    .await;
    refused(
        Api::OpenAi,
        "  effort: maximal\n",
        &[],
        "`maximal` is not an effort",
    )
    .await;
    // An unknown word on the command line is clap's usage error, also exit 2.
    refused(
        Api::OpenAi,
        "",
        &["--effort", "max"],
        "`max` is not an effort",
    )
    .await;
    // --provider switches an anthropic task's effort to a provider that refuses it.
    refused(
        Api::OpenAi,
        "  effort: xhigh\n",
        &["--provider", "anthropic"],
        "effort `xhigh` is not one the anthropic provider takes",
    )
    .await;
}

#[tokio::test]
async fn the_task_files_refused_effort_names_its_line_and_column() {
    let server = FakeModel::start(KEY, vec![done_turn()]).await;
    let run = run_task(
        &model_block(Api::Anthropic, &server, "  effort: xhigh\n"),
        "",
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let line = run
        .stderr
        .lines()
        .find(|line| line.contains("effort `xhigh`"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    // task.yaml:LINE:COL — the value's position, after the key.
    let position = line.split("task.yaml:").nth(1).unwrap_or_default();
    let mut parts = position.split(':');
    let (row, column): (u32, u32) = (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    assert!(row > 6 && column == 11, "{line}");
    assert!(server.requests().is_empty());
}
