//! Parked calls and a person's answers: a run parks two calls under a `defer:` rule and ends
//! `parked` (exit 6) with `pending.json`; `tollgate approve` approves one and denies the
//! other; `--resume` runs exactly the approved one and tells the model of the denial. An
//! approval of a changed input, a second resume of the same approval, a tampered approval
//! file and another run's approval are each refused before any model call.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{Isolation, events, transcript};

const KEY: &str = "sk-approvals-test-key";

/// The fake server's key, no managed policy, the operator's state folder in `dir/state`
/// (outside the workspace `dir/ws`), and a person called `tester`.
fn keyed(dir: &Path) -> Isolation {
    Isolation::new()
        .managed("etc")
        .env("TEST_MODEL_KEY", KEY)
        .env("TOLLGATE_STATE_DIR", dir.join("state"))
        .env("USER", "tester")
}

async fn tollgate(dir: &Path, args: &[&str]) -> Output {
    let mut command = keyed(dir).command(dir);
    command.args(args).stdin(Stdio::null());
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One response with two calls the `defer:` rule parks and one that runs.
fn three_calls() -> Reply {
    Reply::Turn(turn(
        vec![
            tool("Bash", json!({"command": "touch approved.txt"})),
            tool("Bash", json!({"command": "echo other work"})),
            tool("Bash", json!({"command": "touch denied.txt"})),
        ],
        Tokens::default(),
    ))
}

fn resume(folder: &str) -> Vec<&str> {
    vec!["run", "task.yaml", "--resume", folder]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parked_calls_one_approved_one_denied_run_exactly_so_once() {
    let replies = vec![
        three_calls(),
        three_calls(),
        Reply::Turn(turn(vec![text("Done.")], Tokens::default())),
    ];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: park\nprompt: Touch two files.\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\npermissions:\n  defer: [\"Bash(touch:*)\"]\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();

    // Run A parks two calls; the third runs.
    let parked = tollgate(
        dir,
        &[
            "run",
            "task.yaml",
            "--out",
            "out",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert_eq!(parked.status.code(), Some(6), "{}", stderr(&parked));
    let result: Value = serde_json::from_slice(&parked.stdout).unwrap();
    assert_eq!(result["outcome"], "parked");
    assert_eq!(result["stop_reason"], "tool_deferred");
    assert_eq!(result["deferred_tool_use"]["name"], "Bash");
    assert_eq!(
        result["deferred_tool_use"]["input"],
        json!({"command": "touch approved.txt"})
    );
    assert!(!dir.join("ws/approved.txt").exists());
    let pending: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/pending.json")).unwrap())
            .unwrap();
    let calls = pending["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{pending:#}");
    let (yes, no) = (
        calls[0]["id"].as_str().unwrap().to_string(),
        calls[1]["id"].as_str().unwrap().to_string(),
    );
    assert_eq!(calls[1]["input"], json!({"command": "touch denied.txt"}));
    assert_eq!(calls[0]["rule"]["rule"], "Bash(touch:*)");
    assert_eq!(calls[0]["hash"].as_str().unwrap().len(), 64);
    let writes = calls[0]["would"]["writes"].to_string();
    assert!(writes.contains("approved.txt"), "{pending:#}");

    // Run B parks the same calls: its answers are no answers for run A.
    let other = tollgate(dir, &["run", "task.yaml", "--out", "outB"]).await;
    assert_eq!(other.status.code(), Some(6), "{}", stderr(&other));
    crate::support::copy_tree(&dir.join("out"), &dir.join("changed"));
    crate::support::copy_tree(&dir.join("out"), &dir.join("foreign"));

    // The person approves one call and denies the other.
    let approved = tollgate(
        dir,
        &[
            "approve",
            "out",
            &yes,
            "--deny",
            &no,
            "--note",
            "not that one",
        ],
    )
    .await;
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let lines = std::fs::read_to_string(dir.join("out/approvals.jsonl")).unwrap();
    let answers: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["verdict"], "approve");
    assert_eq!(answers[0]["approver"]["name"], "tester");
    assert_eq!(answers[0]["run_id"], pending["run_id"]);
    assert_eq!(answers[0]["hash"], calls[0]["hash"]);
    assert_eq!(answers[1]["verdict"], "deny");
    assert_eq!(answers[0]["tag"].as_str().unwrap().len(), 64);
    crate::support::copy_tree(&dir.join("out"), &dir.join("again"));
    crate::support::copy_tree(&dir.join("out"), &dir.join("tampered"));

    // A changed input: the person was shown another command than the one parked.
    let shown = std::fs::read_to_string(dir.join("changed/pending.json"))
        .unwrap()
        .replacen("touch approved.txt", "touch approved.txt.bak", 1);
    std::fs::write(dir.join("changed/pending.json"), shown).unwrap();
    let ok = tollgate(dir, &["approve", "changed", "--all"]).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // A tampered approval file: the denial turned into an approval.
    let edited = std::fs::read_to_string(dir.join("tampered/approvals.jsonl"))
        .unwrap()
        .replacen("\"deny\"", "\"approve\"", 1);
    std::fs::write(dir.join("tampered/approvals.jsonl"), edited).unwrap();
    // Another run's answers, tagged with the same operator's key.
    let ok = tollgate(dir, &["approve", "outB", "--all"]).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    std::fs::copy(
        dir.join("outB/approvals.jsonl"),
        dir.join("foreign/approvals.jsonl"),
    )
    .unwrap();
    for (folder, says) in [
        ("changed", "another input than the one parked"),
        ("tampered", "does not match its integrity tag"),
        ("foreign", "answers a call of another run"),
    ] {
        let refused = tollgate(dir, &resume(folder)).await;
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{folder}: {}",
            stderr(&refused)
        );
        assert!(
            stderr(&refused).contains(says),
            "{folder}: {}",
            stderr(&refused)
        );
    }
    assert_eq!(
        server.requests().len(),
        2,
        "no refused resume asked the model"
    );

    // The resume runs the approved call, refuses the denied one, and goes on.
    let resumed = tollgate(dir, &resume("out")).await;
    // A person's denial is a refused call: `fail_on: [denial]` (a task's default) counts it.
    assert_eq!(resumed.status.code(), Some(3), "{}", stderr(&resumed));
    assert!(dir.join("ws/approved.txt").exists());
    assert!(!dir.join("ws/denied.txt").exists());
    assert_eq!(server.violations(), Vec::<String>::new());
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sent = requests[2].body["messages"].to_string();
    assert!(
        sent.contains("other work"),
        "the recorded result is sent again"
    );
    assert!(sent.contains("denied by tester"), "{sent}");
    assert!(sent.contains("not that one"), "{sent}");
    // The model gets every call's result in call order, in one message, whichever process
    // recorded it (the transcript has the third call's first: it ran before the park).
    let messages = requests[2].body["messages"].as_array().unwrap();
    let answered: Vec<&str> = messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| block["tool_use_id"].as_str().unwrap())
        .collect();
    let asked: Vec<&str> = messages[messages.len() - 2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .map(|block| block["id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, asked);
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let mut results: Vec<&str> = events(&all, "tool_result")
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    results.sort_unstable();
    assert_eq!(results, asked, "each call has one result on record");
    let decisions: Vec<(String, String, String)> = events(&all, "permission_decision")
        .iter()
        .map(|event| {
            (
                event["id"].as_str().unwrap().to_string(),
                event["decision"].as_str().unwrap().to_string(),
                event["layer"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(id, _, _)| *id == yes || *id == no)
        .collect();
    assert_eq!(
        decisions,
        [
            (yes.clone(), "defer".into(), "rule".into()),
            (no.clone(), "defer".into(), "rule".into()),
            (yes.clone(), "allow".into(), "person".into()),
            (no.clone(), "deny".into(), "person".into()),
        ]
    );
    let started: Vec<&str> = events(&all, "tool_started")
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    assert_eq!(started.iter().filter(|id| **id == yes).count(), 1);
    assert!(!started.contains(&no.as_str()));
    let finished = events(&all, "run_finished");
    assert_eq!(finished[0]["outcome"], "parked");
    assert_eq!(
        finished[1]["outcome"], "policy_denied",
        "the person's denial counts"
    );

    // The run's statement matches its transcript; one changed line is found.
    let statement: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/statement.json")).unwrap())
            .unwrap();
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    let record = &statement["predicate"]["record"];
    assert_eq!(record["parked"].as_array().unwrap().len(), 2);
    assert_eq!(record["approved"][0]["id"], yes.as_str());
    assert_eq!(record["denied"][0]["id"], no.as_str());
    let verified = tollgate(dir, &["verify", "out"]).await;
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
    let path = dir.join("out/transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"Done.\"", "\"Dune.\"", 1)).unwrap();
    let found = tollgate(dir, &["verify", "out"]).await;
    assert_eq!(found.status.code(), Some(1), "{}", stderr(&found));
    let said = String::from_utf8_lossy(&found.stdout);
    assert!(said.contains("does not match its integrity tag"), "{said}");
    assert!(said.contains("the transcript's SHA-256"), "{said}");
    std::fs::write(&path, text).unwrap();

    // The same approval once more, from the copy made before it was used.
    let second = tollgate(dir, &resume("again")).await;
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("was used by an earlier resume"),
        "{}",
        stderr(&second)
    );
    assert_eq!(server.requests().len(), 3);
}

/// A PreToolUse hook's `defer` (Claude Code's answer) parks the call, with Claude Code's
/// result fields; an approval given in GitHub Actions records the actor, run and job; the
/// resume asks the hook again, and its `defer` leaves the approval standing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_defer_parks_the_call_and_an_actions_approval_runs_it() {
    let replies = vec![
        Reply::Turn(turn(
            vec![tool("Bash", json!({"command": "touch hooked.txt"}))],
            Tokens::default(),
        )),
        Reply::Turn(turn(vec![text("Touched.")], Tokens::default())),
    ];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: hook\nprompt: Touch a file.\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\npermissions:\n  allow: [Bash]\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("defer.sh"),
        "printf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"defer\",\"permissionDecisionReason\":\"a maintainer decides\"}}'\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.yaml"),
        format!(
            "hooks:\n  - event: PreToolUse\n    matcher: Bash\n    command: \"sh {}\"\n",
            dir.join("defer.sh").display()
        ),
    )
    .unwrap();
    let start = [
        "run",
        "task.yaml",
        "--out",
        "out",
        "--policy",
        "policy.yaml",
        "--output-format",
        "json",
    ];
    let parked = tollgate(dir, &start).await;
    assert_eq!(parked.status.code(), Some(6), "{}", stderr(&parked));
    let result: Value = serde_json::from_slice(&parked.stdout).unwrap();
    assert_eq!(result["stop_reason"], "tool_deferred");
    assert_eq!(
        result["deferred_tool_use"]["input"]["command"],
        "touch hooked.txt"
    );
    assert_eq!(result["deferred"][0]["layer"], "hook");
    assert!(
        result["deferred"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("a maintainer decides"),
        "{result:#}"
    );

    let mut command = keyed(dir).command(dir);
    command
        .args(["approve", "out", "--all", "--note", "looks fine"])
        .envs([
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_ACTOR", "octocat"),
            ("GITHUB_RUN_ID", "4242"),
            ("GITHUB_JOB", "review"),
        ])
        .stdin(Stdio::null());
    let approved = tokio::process::Command::from(command)
        .output()
        .await
        .unwrap();
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let line: Value = serde_json::from_str(
        std::fs::read_to_string(dir.join("out/approvals.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        line["approver"],
        json!({"name": "octocat", "github_run_id": "4242", "github_job": "review"})
    );

    let resumed = tollgate(
        dir,
        &[
            "run",
            "task.yaml",
            "--resume",
            "out",
            "--policy",
            "policy.yaml",
        ],
    )
    .await;
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(dir.join("ws/hooked.txt").exists());
    assert_eq!(server.violations(), Vec::<String>::new());
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let allowed = events(&all, "permission_decision")
        .into_iter()
        .find(|event| event["decision"] == "allow")
        .unwrap();
    assert_eq!(allowed["layer"], "person");
    assert!(
        allowed["reason"]
            .as_str()
            .unwrap()
            .starts_with("approved by octocat (GitHub Actions run 4242, job review)"),
        "{allowed}"
    );
}

/// `--defer-asks` parks every ask only a person could answer; a deny stays a deny.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_asks_parks_the_asks_and_never_a_deny() {
    let replies = vec![Reply::Turn(turn(
        vec![
            tool("Bash", json!({"command": "touch asked.txt"})),
            tool("Bash", json!({"command": "rm -rf build"})),
        ],
        Tokens::default(),
    ))];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: all-asks\nprompt: Touch a file.\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\npermissions:\n  deny: [\"Bash(rm:*)\"]\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
    let parked = tollgate(dir, &["run", "task.yaml", "--out", "out", "--defer-asks"]).await;
    assert_eq!(parked.status.code(), Some(6), "{}", stderr(&parked));
    let pending: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/pending.json")).unwrap())
            .unwrap();
    let calls = pending["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{pending:#}");
    assert_eq!(calls[0]["input"]["command"], "touch asked.txt");
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let decisions: Vec<&str> = events(&all, "permission_decision")
        .iter()
        .map(|event| event["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["defer", "deny"]);
    let finished = events(&all, "run_finished");
    assert_eq!(finished[0]["outcome"], "parked");
    assert_eq!(
        finished[0]["denials"], 1,
        "parked is no denial; the rm is one"
    );
    assert_eq!(server.violations(), Vec::<String>::new());
}
