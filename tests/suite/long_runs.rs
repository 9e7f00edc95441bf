//! Long and interrupted runs against the fake model server: an output folder that never loses
//! a run, denial loops that stop by default, a fallback model for an overloaded one,
//! compaction of a history that outgrows the window, and resuming a run from its transcript.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{events, tollgate_in, transcript};

const KEY: &str = "sk-long-runs-test-key";

/// `tollgate ARGS` in `dir` with the fake server's key, no managed policy, stdin closed.
async fn tollgate(dir: &Path, args: &[&str]) -> Output {
    let mut command = tollgate_in(dir);
    command
        .args(args)
        .env("TEST_MODEL_KEY", KEY)
        .env("TOLLGATE_MANAGED_DIR", dir.join("etc"))
        .stdin(Stdio::null());
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn done(words: &str) -> Reply {
    Reply::Turn(turn(vec![text(words)], Tokens::default()))
}

/// A task in `dir` (workspace `ws/`) for `server`, with `rest` appended.
fn write_task(dir: &Path, server: &FakeModel, rest: &str) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: long\nprompt: Summarise notes.txt.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, TodoWrite]\n{}{rest}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn an_output_folder_holding_a_run_is_refused_unless_forced_or_named_by_run_id() {
    let server = FakeModel::start(
        KEY,
        vec![done("first"), done("forced"), done("a"), done("b")],
    )
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_task(dir, &server, "");
    let first = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let kept = std::fs::read_to_string(dir.join("out/transcript.jsonl")).unwrap();

    // The second cron run of the day: refused before any model call, the first run intact.
    let second = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    let said = stderr(&second);
    assert!(
        said.contains("already holds a run (finished: success)") && said.contains("/out"),
        "{said}"
    );
    assert!(
        said.contains("--force") && said.contains("{run_id}"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("out/transcript.jsonl")).unwrap(),
        kept
    );
    assert_eq!(server.requests().len(), 1);

    let forced = tollgate(dir, &["run", "task.yaml", "--out", "out", "--force"]).await;
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    let replaced = transcript(&dir.join("out/transcript.jsonl"));
    assert_eq!(
        events(&replaced, "run_finished")[0]["final_message"],
        "forced"
    );

    // `{run_id}` gives every run its own folder under one root.
    for _ in 0..2 {
        let run = tollgate(dir, &["run", "task.yaml", "--out", "runs/{run_id}"]).await;
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    }
    let folders: Vec<_> = std::fs::read_dir(dir.join("runs")).unwrap().collect();
    assert_eq!(folders.len(), 2);
    assert_eq!(server.violations(), Vec::<String>::new());
}

fn calling(name: &str, input: Value) -> Reply {
    Reply::Turn(turn(vec![tool(name, input)], Tokens::default()))
}

/// No limit in the task: a model that keeps retrying a refused call is stopped by the
/// defaults, and each verbatim repeat gets the first refusal back, counted.
#[tokio::test]
async fn a_denial_loop_stops_by_default_and_a_verbatim_repeat_gets_the_earlier_refusal() {
    let rm = || calling("Bash", json!({"command": "rm -rf build"}));
    let replies = (0..12).map(|_| rm()).collect();
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: loop\nprompt: Clean up.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Bash]\nfail_on: []\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
    let run = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let finished = events(&all, "run_finished")[0];
    assert_eq!(finished["outcome"], "denial_limit");
    assert_eq!(
        finished["turns"], 5,
        "the default max_consecutive_denials is 5"
    );
    assert_eq!(finished["denials"], 5);
    assert!(
        finished["error"]
            .as_str()
            .unwrap()
            .contains("limits.max_consecutive_denials = 5"),
        "{finished}"
    );
    // Every refusal is recorded; the repeats carry the first one's reason and say so.
    let decisions = events(&all, "permission_decision");
    assert_eq!(decisions.len(), 5);
    assert!(
        decisions
            .iter()
            .all(|d| d["reason"] == decisions[0]["reason"])
    );
    let results: Vec<&str> = events(&all, "tool_result")
        .iter()
        .map(|r| r["content"].as_str().unwrap())
        .collect();
    let first = format!(
        "Permission denied: {}",
        decisions[0]["reason"].as_str().unwrap()
    );
    assert_eq!(results[0], first);
    for repeat in &results[1..] {
        assert!(repeat.starts_with(&first), "{repeat}");
        assert!(repeat.contains("refused before"), "{repeat}");
    }
    // What the model was sent is the same refusal.
    let last = server.requests().last().unwrap().body["messages"].clone();
    let sent = last.as_array().unwrap().last().unwrap()["content"][0]["content"].clone();
    assert_eq!(sent, json!(results[3]));
    assert_eq!(server.replies_left(), 7);
    assert_eq!(server.violations(), Vec::<String>::new());
}

fn unavailable(status: u16) -> Reply {
    let kind = if status == 529 {
        "overloaded_error"
    } else {
        "api_error"
    };
    Reply::Status {
        status,
        headers: vec![],
        kind,
        message: "Overloaded".into(),
    }
}

/// After the retries for an overloaded (529) or unavailable (503) model, the run goes on
/// with the fallback for the rest of the run, priced at the fallback's rates.
#[tokio::test]
async fn an_overloaded_model_hands_the_rest_of_the_run_to_the_fallback() {
    let fast = "  retries: {max: 1, base_delay: 0.005, max_delay: 0.01}\n";
    // (API, the model's status, where the fallback is named, the fallback, its $/M in and out)
    let cases = [
        (Api::Anthropic, 529, "task", "claude-haiku-4-5", (1.0, 5.0)),
        (Api::OpenAi, 503, "flag", "gpt-4.1-mini", (0.40, 1.60)),
    ];
    for (api, status, named, fallback, (input_price, output_price)) in cases {
        let used = Tokens {
            input: 1000,
            output: 100,
            ..Tokens::default()
        };
        let replies = vec![
            unavailable(status),
            unavailable(status),
            Reply::Turn(turn(
                vec![tool("Read", json!({"file_path": "notes.txt"}))],
                used,
            )),
            Reply::Turn(turn(vec![text("The notes are short.")], used)),
        ];
        let server = FakeModel::start(KEY, replies).await;
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::create_dir(dir.join("ws")).unwrap();
        std::fs::write(dir.join("ws/notes.txt"), "short\n").unwrap();
        let in_task = if named == "task" {
            format!("  fallback: {fallback}\n")
        } else {
            String::new()
        };
        std::fs::write(
            dir.join("task.yaml"),
            format!(
                "version: 1\nname: fallback\nprompt: Summarise notes.txt.\nworkdir: ws\nmode: dontAsk\ntools: [Read]\n{}",
                server.model_block(api, &format!("{fast}{in_task}"))
            ),
        )
        .unwrap();
        let mut args = vec!["run", "task.yaml", "--out", "out"];
        if named == "flag" {
            args.extend(["--fallback-model", fallback]);
        }
        let run = tollgate(dir, &args).await;
        assert_eq!(run.status.code(), Some(0), "{api:?}: {}", stderr(&run));
        let models: Vec<Value> = server
            .requests()
            .iter()
            .map(|request| request.body["model"].clone())
            .collect();
        let first = if api == Api::Anthropic {
            "claude-sonnet-4-5"
        } else {
            "gpt-4.1"
        };
        assert_eq!(
            models,
            [json!(first), json!(first), json!(fallback), json!(fallback)]
        );
        let all = transcript(&dir.join("out/transcript.jsonl"));
        let switched = events(&all, "model_fallback");
        assert_eq!(switched.len(), 1, "{api:?}");
        assert_eq!(
            (&switched[0]["from"], &switched[0]["to"]),
            (&json!(first), &json!(fallback))
        );
        assert_eq!(switched[0]["turn"], 1);
        assert!(
            switched[0]["error"]
                .as_str()
                .unwrap()
                .contains(&status.to_string())
        );
        let per_request = (1000.0 * input_price + 100.0 * output_price) / 1e6;
        for message in events(&all, "assistant_message") {
            let cost = message["cost_usd"].as_f64().unwrap();
            assert!(
                (cost - per_request).abs() < 1e-12,
                "{api:?}: {cost} vs {per_request}"
            );
        }
        let total = events(&all, "run_finished")[0]["total_cost_usd"]
            .as_f64()
            .unwrap();
        assert!((total - 2.0 * per_request).abs() < 1e-12, "{total}");
        assert_eq!(server.violations(), Vec::<String>::new());
    }
}
