//! Long and interrupted runs against the fake model server: an output folder that never loses
//! a run, denial loops that stop by default, a fallback model for an overloaded one,
//! compaction of a history that outgrows the window, and resuming a run from its transcript.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::fake_model::{
    Api, FakeModel, Reply, SUMMARY_REQUEST, Tokens, text, tool, turn,
};
use crate::support::{Isolation, events, transcript};

const KEY: &str = "sk-long-runs-test-key";
/// A run of the task in `out/` under `policy.yaml`.
const START_OUT: [&str; 6] = [
    "run",
    "task.yaml",
    "--out",
    "out",
    "--policy",
    "policy.yaml",
];
/// The task given again (a resume takes it from the command line), going on in `out/`.
const RESUME_OUT: [&str; 6] = [
    "run",
    "task.yaml",
    "--resume",
    "out",
    "--policy",
    "policy.yaml",
];

/// The fake server's key, no managed policy (`dir/etc/` is absent).
fn keyed() -> Isolation {
    Isolation::new().managed("etc").env("TEST_MODEL_KEY", KEY)
}

/// `tollgate ARGS` in `dir`, `keyed`, stdin closed.
async fn tollgate(dir: &Path, args: &[&str]) -> Output {
    let mut command = keyed().command(dir);
    command.args(args).stdin(Stdio::null());
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}

/// The transcript's lines are numbered one after another, resumes and dropped lines included.
fn assert_seqs_consecutive(all: &[Value]) {
    let seqs: Vec<u64> = all
        .iter()
        .map(|line| line["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "{seqs:?}"
    );
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn done(words: &str) -> Reply {
    Reply::Turn(turn(vec![text(words)], Tokens::default()))
}

/// A task in `dir` (workspace `ws/`) for `server`, with `rest` appended.
fn write_task(dir: &Path, server: &FakeModel, rest: &str) {
    write_task_for(dir, server, Api::Anthropic, "", rest);
}

/// `write_task` for `server`'s `api`, with `model_extra` in its `model:` block.
fn write_task_for(dir: &Path, server: &FakeModel, api: Api, model_extra: &str, rest: &str) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: long\nprompt: Summarise notes.txt.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, TodoWrite]\n{}{rest}",
            server.model_block(api, model_extra)
        ),
    )
    .unwrap();
}

/// A task in `dir` (workspace `ws/`) for `server` whose one tool is Bash, allowed.
fn write_bash_task(dir: &Path, server: &FakeModel, prompt: &str) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: bash\nprompt: {prompt}\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\npermissions:\n  allow: [Bash]\n{}",
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
/// defaults, and each verbatim repeat gets the first refusal back, counted. A batch of
/// refused calls in one response is answered whole (the defaults apply between turns).
#[tokio::test]
async fn a_denial_loop_stops_by_default_and_a_verbatim_repeat_gets_the_earlier_refusal() {
    let rm = || calling("Bash", json!({"command": "rm -rf build"}));
    let replies = (0..24).map(|_| rm()).collect();
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
        finished["turns"], 20,
        "the default max_consecutive_denials is 20"
    );
    assert_eq!(finished["denials"], 20);
    assert!(
        finished["error"]
            .as_str()
            .unwrap()
            .contains("limits.max_consecutive_denials defaults to 20"),
        "{finished}"
    );
    // Every refusal is recorded; the repeats carry the first one's reason and say so.
    let decisions = events(&all, "permission_decision");
    assert_eq!(decisions.len(), 20);
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
    assert_eq!(server.replies_left(), 4);
    assert_eq!(server.violations(), Vec::<String>::new());

    // Twenty-four different refused calls in one response: each is judged and answered, then the
    // run stops before asking the model again.
    let sweep: Vec<_> = (0..24)
        .map(|i| tool("Bash", json!({"command": format!("rm -rf build{i}")})))
        .collect();
    let server = FakeModel::start(
        KEY,
        vec![
            Reply::Turn(turn(sweep, Tokens::default())),
            done("never asked"),
        ],
    )
    .await;
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: sweep\nprompt: Clean up.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Bash]\nfail_on: []\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
    let run = tollgate(dir, &["run", "task.yaml", "--out", "sweep"]).await;
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    let all = transcript(&dir.join("sweep/transcript.jsonl"));
    let statuses: Vec<&Value> = events(&all, "tool_result")
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, vec![&json!("denied"); 24]);
    assert_eq!(events(&all, "run_finished")[0]["outcome"], "denial_limit");
    assert_eq!(server.replies_left(), 1);
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

/// The request's messages with the moving `cache_control` marker taken out.
fn unmarked(body: &Value) -> Vec<Value> {
    let mut messages = body["messages"].as_array().unwrap().clone();
    for message in &mut messages {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            if let Some(block) = block.as_object_mut() {
                block.remove("cache_control");
            }
        }
    }
    messages
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string()
        .contains(SUMMARY_REQUEST)
}

fn plan(statuses: &[&str]) -> crate::support::fake_model::Block {
    let todos: Vec<Value> = statuses
        .iter()
        .enumerate()
        .map(|(i, status)| json!({"content": format!("step {i} of the plan"), "status": status, "activeForm": format!("doing step {i}")}))
        .collect();
    tool("TodoWrite", json!({ "todos": todos }))
}

/// A 60-turn run over a small window: the history is compacted several times, the system
/// prompt and tools never change, the plan and the task survive each compaction, the
/// history after one only ever grows at its end again, and the run finishes.
#[tokio::test]
async fn a_sixty_turn_run_over_a_small_window_compacts_keeps_the_plan_and_finishes() {
    let mut replies = vec![Reply::Turn(turn(
        vec![
            text("Planning."),
            plan(&["in_progress", "pending", "pending"]),
        ],
        Tokens::default(),
    ))];
    for _ in 1..59 {
        replies.push(calling("Read", json!({"file_path": "notes.txt"})));
    }
    replies.push(done("All three steps are done."));
    let server = FakeModel::start(KEY, replies).await;
    server.answer_summaries(turn(
        vec![text("Read notes.txt many times; it is unchanged.")],
        Tokens::default(),
    ));
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_task(
        dir,
        &server,
        "limits: {max_turns: 100}\ncompaction: {context_window: 40000, threshold: 0.5, keep_recent: 3}\n",
    );
    std::fs::write(
        dir.join("ws/notes.txt"),
        "a line of notes to read again\n".repeat(60),
    )
    .unwrap();
    std::fs::write(
        dir.join("pre-compact.sh"),
        "cat > ../pre-compact.json\nprintf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"PreCompact\",\"additionalContext\":\"Notes from the hook: notes.txt is the only input.\"}}'\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.yaml"),
        "hooks:\n  - event: PreCompact\n    matcher: auto\n    command: bash ../pre-compact.sh\n",
    )
    .unwrap();
    let run = tollgate(dir, &START_OUT).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(server.violations(), Vec::<String>::new());
    let all = transcript(&dir.join("out/transcript.jsonl"));
    crate::support::assert_every_tool_use_answered_once(&all);
    let finished = events(&all, "run_finished")[0];
    assert_eq!(finished["outcome"], "success");
    assert_eq!(finished["turns"], 60);
    assert_eq!(finished["final_message"], "All three steps are done.");
    assert_eq!(finished["todos"].as_array().unwrap().len(), 3);
    let compactions = events(&all, "compaction");
    assert!(compactions.len() >= 2, "{} compactions", compactions.len());
    assert!(
        compactions
            .iter()
            .all(|c| c["outcome"] == "compacted" && c["trigger"] == "threshold")
    );
    assert!(
        compactions
            .iter()
            .all(|c| !c["dropped_tool_uses"].as_array().unwrap().is_empty())
    );
    let totals = finished["compactions"].as_array().unwrap();
    assert_eq!(totals.len(), compactions.len());
    for total in totals {
        let (before, after) = (
            total["tokens_before"].as_u64().unwrap(),
            total["tokens_after"].as_u64().unwrap(),
        );
        assert!(before > 20_000 && after < before / 2, "{total}");
    }
    // The hook saw Claude Code's input and its text reached the compacted history.
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("pre-compact.json")).unwrap())
            .unwrap();
    assert_eq!(
        (&input["hook_event_name"], &input["trigger"]),
        (&json!("PreCompact"), &json!("auto"))
    );

    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|request| request.body)
        .collect();
    let (summaries, turns): (Vec<&Value>, Vec<&Value>) =
        requests.iter().partition(|body| is_summary_request(body));
    assert_eq!(summaries.len(), compactions.len());
    assert_eq!(turns.len(), 60);
    // System prompt and tools byte-identical in every request, the summaries' included.
    for body in &requests {
        assert_eq!(body["system"], turns[0]["system"]);
        assert_eq!(body["tools"], turns[0]["tools"]);
    }
    let mut compacted_turns = 0;
    for pair in turns.windows(2) {
        let (before, after) = (unmarked(pair[0]), unmarked(pair[1]));
        if after.len() >= before.len() && after[..before.len()] == before[..] {
            // The history only grew at its end: the cached prefix holds.
            continue;
        }
        // Compacted between these two: the task, the summary, the hook's note and the whole
        // plan stand first, and the history is shorter.
        compacted_turns += 1;
        let first = after[0].to_string();
        assert!(first.contains("<compacted-history>"), "{first}");
        assert!(first.contains("Summarise notes.txt."), "{first}");
        assert!(first.contains("Read notes.txt many times"), "{first}");
        assert!(first.contains("notes.txt is the only input"), "{first}");
        assert!(
            first.contains("[in_progress] step 0 of the plan"),
            "{first}"
        );
        assert!(first.contains("[pending] step 2 of the plan"), "{first}");
        assert!(after.len() < before.len());
    }
    assert_eq!(compacted_turns, compactions.len());
}

/// The provider's "prompt is too long" compacts the history and sends the request once more;
/// a second refusal ends the run as before.
#[tokio::test]
async fn prompt_is_too_long_compacts_and_retries_once() {
    let too_long = || Reply::Status {
        status: 400,
        headers: vec![],
        kind: "invalid_request_error",
        message: "prompt is too long: 210345 tokens > 200000 maximum".into(),
    };
    let read = || calling("Read", json!({"file_path": "notes.txt"}));
    for (tail, code, compacted) in [
        (vec![too_long(), done("Done.")], 0, 1),
        (vec![too_long(), too_long()], 4, 1),
    ] {
        let mut replies = vec![read(), read(), read()];
        replies.extend(tail);
        let server = FakeModel::start(KEY, replies).await;
        server.answer_summaries(turn(
            vec![text("Read the notes three times.")],
            Tokens::default(),
        ));
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        write_task(dir, &server, "");
        std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
        let run = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
        assert_eq!(run.status.code(), Some(code), "{}", stderr(&run));
        let all = transcript(&dir.join("out/transcript.jsonl"));
        let compactions = events(&all, "compaction");
        assert_eq!(compactions.len(), compacted);
        assert_eq!(compactions[0]["trigger"], "context_overflow");
        assert_eq!(compactions[0]["outcome"], "compacted");
        let requests = server.requests();
        let retried = &requests.last().unwrap().body;
        assert!(
            retried["messages"][0]
                .to_string()
                .contains("<compacted-history>")
        );
        if code == 4 {
            let error = events(&all, "run_finished")[0]["error"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(error.contains("prompt is too long"), "{error}");
        }
        assert_eq!(server.violations(), Vec::<String>::new());
    }
}

/// SIGTERM while a command runs, then `--resume`: the conversation is rebuilt from the
/// transcript, and the model's next request is the one the run would have sent next — the
/// last request's messages byte for byte, then the interrupted turn and its answers — with
/// the same system prompt and tools. The transcript grows with `run_resumed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_by_sigterm_resumes_with_the_request_it_would_have_sent() {
    let replies = vec![
        Reply::Turn(turn(
            vec![
                text("Planning."),
                plan(&["in_progress", "pending"]),
                tool("Read", json!({"file_path": "notes.txt"})),
            ],
            Tokens::default(),
        )),
        calling("Bash", json!({"command": "sleep 30"})),
        done("Resumed and done."),
    ];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
    std::fs::write(
        dir.join("task.yaml"),
        format!(
            "version: 1\nname: resume\nprompt: Summarise notes.txt, then wait.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Bash, TodoWrite]\n{}",
            server.model_block(Api::Anthropic, "")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.yaml"),
        "permissions:\n  allow: ['Bash(sleep:*)']\n",
    )
    .unwrap();
    let mut command = keyed().command(dir);
    command
        .args(START_OUT)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let mut child = tokio::process::Command::from(command).spawn().unwrap();
    let transcript_path = dir.join("out/transcript.jsonl");
    let bash_allowed = || {
        std::fs::read_to_string(&transcript_path)
            .unwrap_or_default()
            .lines()
            .any(|line| line.contains("\"permission_decision\"") && line.contains("\"Bash\""))
            .then_some(())
    };
    crate::support::poll_until(std::time::Duration::from_secs(20), bash_allowed)
        .expect("the Bash call was never allowed");
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(child.wait().await.unwrap().code(), Some(143));
    assert_eq!(server.requests().len(), 2);

    // The task is the command line's, never the transcript's: without it, no resume (and
    // the folder keeps its record).
    let no_task = tollgate(dir, &["run", "--resume", "out", "--policy", "policy.yaml"]).await;
    assert_eq!(no_task.status.code(), Some(2), "{}", stderr(&no_task));
    assert!(
        stderr(&no_task).contains("give the task file again"),
        "{}",
        stderr(&no_task)
    );

    let resumed = tollgate(dir, &RESUME_OUT).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(server.violations(), Vec::<String>::new());
    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|request| request.body)
        .collect();
    assert_eq!(requests.len(), 3);
    let (last, next) = (&requests[1], &requests[2]);
    assert_eq!(next["system"], last["system"]);
    assert_eq!(next["tools"], last["tools"]);
    let (before, after) = (unmarked(last), unmarked(next));
    assert_eq!(after.len(), before.len() + 2);
    assert_eq!(
        after[..before.len()],
        before[..],
        "the history sent before changed"
    );
    let all = transcript(&transcript_path);
    let interrupted = events(&all, "assistant_message")[1]["content"].clone();
    assert_eq!(after[before.len()]["content"], interrupted);
    let answers = after[before.len() + 1]["content"].as_array().unwrap();
    assert_eq!(answers[0]["type"], "tool_result");
    assert_eq!(answers[0]["is_error"], true);
    assert_eq!(
        answers.last().unwrap()["text"],
        "[Request interrupted by user]"
    );

    crate::support::assert_every_tool_use_answered_once(&all);
    let resumed_event = events(&all, "run_resumed")[0];
    assert_eq!(resumed_event["messages"], 5);
    assert_eq!(resumed_event["requests"], 2);
    assert_eq!(resumed_event["todos"].as_array().unwrap().len(), 2);
    let finished = events(&all, "run_finished");
    assert_eq!(
        (
            finished[0]["outcome"].clone(),
            finished[1]["outcome"].clone()
        ),
        (json!("terminated"), json!("success"))
    );
    assert_eq!(finished[1]["turns"], 3);
    assert_eq!(finished[1]["todos"].as_array().unwrap().len(), 2);
    assert_seqs_consecutive(&all);

    // A run that ended with the model's answer has nothing to go on from without a prompt.
    let again = tollgate(dir, &RESUME_OUT).await;
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("nothing to go on from"),
        "{}",
        stderr(&again)
    );
}

/// `--continue` finds the run tollgate last recorded for this workdir; a run stopped by
/// `max_turns` after its tools goes on with the request it would have sent.
#[tokio::test]
async fn continue_takes_the_latest_run_of_this_workdir() {
    let server = FakeModel::start(
        KEY,
        vec![
            calling("Read", json!({"file_path": "notes.txt"})),
            done("Read them."),
        ],
    )
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_task(dir, &server, "limits: {max_turns: 1}\n");
    std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
    let first = tollgate(dir, &["run", "task.yaml"]).await;
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    // Another workdir has no run to continue.
    std::fs::create_dir(dir.join("elsewhere")).unwrap();
    let none = tollgate(dir, &["run", "--continue", "--workdir", "elsewhere"]).await;
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    assert!(
        stderr(&none).contains("no run of the workdir"),
        "{}",
        stderr(&none)
    );

    let next = tollgate(
        dir,
        &[
            "run",
            "task.yaml",
            "--continue",
            "--workdir",
            "ws",
            "--max-turns",
            "3",
            "-p",
            "Also say how long they are.",
        ],
    )
    .await;
    assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
    let requests = server.requests();
    let (before, after) = (unmarked(&requests[0].body), unmarked(&requests[1].body));
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after.len(), before.len() + 2);
    // The new message joins the results the run had for the model: roles alternate.
    let last = after.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last.last().unwrap()["text"], "Also say how long they are.");
    let runs: Vec<_> = std::fs::read_dir(dir.join(".tollgate/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1, "the run went on in its own folder");
    assert_eq!(server.violations(), Vec::<String>::new());
}

/// `tollgate ARGS` in `dir` with its own state folder (the transcript key), stdin closed,
/// started in the background.
fn spawn_keyed(dir: &Path, args: &[&str]) -> tokio::process::Child {
    let mut command = keyed()
        .env("TOLLGATE_STATE_DIR", dir.join("state"))
        .command(dir);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    tokio::process::Command::from(command).spawn().unwrap()
}

fn sigkill(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: signals the child this test started.
        unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL) };
    }
}

async fn finish(child: tokio::process::Child) -> Output {
    child.wait_with_output().await.unwrap()
}

/// SIGKILL while the second of three commands of one turn runs, and a last line cut short:
/// the resumed run drops that line (and says so), sends the first command's recorded
/// result, tells the model the second started and its result was lost, runs the third —
/// which never started — now, and numbers its turn on. Each command ran exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_inside_a_turn_resumes_inside_it() {
    let bash = |command: &str| tool("Bash", json!({ "command": command }));
    let replies = vec![
        Reply::Turn(turn(
            vec![
                bash("echo a >> log.txt"),
                bash("echo b >> log.txt; sleep 30"),
                bash("echo c >> log.txt"),
            ],
            Tokens::default(),
        )),
        done("All three ran."),
    ];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_bash_task(dir, &server, "Log three letters.");
    let child = spawn_keyed(dir, &["run", "task.yaml", "--out", "out"]);
    let log = dir.join("ws/log.txt");
    crate::support::poll_until(std::time::Duration::from_secs(20), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains('b')
            .then_some(())
    })
    .expect("the second command never ran");
    sigkill(&child);
    finish(child).await;
    // What a kill during a write leaves: a last line cut short.
    let transcript_path = dir.join("out/transcript.jsonl");
    let torn = "{\"seq\":99,\"time\":\"2026-12-06T01:00:00.000Z\",\"type\":\"tool_re";
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript_path)
        .unwrap();
    std::io::Write::write_all(&mut file, torn.as_bytes()).unwrap();
    drop(file);

    let resumed = finish(spawn_keyed(dir, &["run", "task.yaml", "--resume", "out"])).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(
        stderr(&resumed).contains("cut short"),
        "{}",
        stderr(&resumed)
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "a\nb\nc\n",
        "each command ran exactly once"
    );
    assert_eq!(server.violations(), Vec::<String>::new());
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "no request for the turn it went on inside"
    );
    let answers = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    let contents: Vec<String> = answers
        .iter()
        .map(|block| block["content"].to_string())
        .collect();
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert!(contents[1].contains("its result was lost"), "{contents:?}");
    assert!(
        contents[1].contains("may have taken effect"),
        "{contents:?}"
    );
    assert_eq!(answers[1]["is_error"], true);
    assert_ne!(answers[2]["is_error"], true);

    let all = transcript(&transcript_path);
    crate::support::assert_every_tool_use_answered_once(&all);
    let started: Vec<&str> = events(&all, "tool_started")
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    assert_eq!(started.len(), 3, "{started:?}");
    let statuses: Vec<&str> = events(&all, "tool_result")
        .iter()
        .map(|event| event["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["success", "lost", "success"]);
    let resumed_event = events(&all, "run_resumed")[0];
    assert_eq!(resumed_event["dropped_torn_bytes"], torn.len());
    assert_eq!(resumed_event["turns"], 1);
    let turns: Vec<u64> = events(&all, "model_request")
        .iter()
        .map(|event| event["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2], "turns are numbered on");
    let finished = events(&all, "run_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["outcome"], "success");
    assert_eq!(finished[0]["turns"], 2);
    assert_eq!(finished[0]["tool_calls"], 3);
    assert_seqs_consecutive(&all);
}

/// SIGKILL while a PreToolUse hook decides the call (announced, not yet started), then while
/// a Stop hook judges the final answer: each resume goes on from there — the call is judged
/// and run once, the final answer is concluded without another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_announced_but_not_started_runs_once_and_an_unconcluded_answer_is_concluded() {
    let replies = vec![
        calling("Bash", json!({"command": "echo once >> log.txt"})),
        done("Logged."),
    ];
    let server = FakeModel::start(KEY, replies).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_bash_task(dir, &server, "Log once.");
    // Each hook waits the first time only, so the test can kill the run there.
    std::fs::write(
        dir.join("policy.yaml"),
        "hooks:\n  - event: PreToolUse\n    matcher: Bash\n    command: \"if [ ! -e ../pre-waited ]; then touch ../pre-waited; sleep 30; fi\"\n  - event: Stop\n    command: \"if [ ! -e ../stop-waited ]; then touch ../stop-waited; sleep 30; fi\"\n",
    )
    .unwrap();
    let child = spawn_keyed(dir, &START_OUT);
    let waited = |name: &str| {
        let path = dir.join(name);
        crate::support::poll_until(std::time::Duration::from_secs(20), || {
            path.exists().then_some(())
        })
    };
    waited("pre-waited").expect("the PreToolUse hook never ran");
    sigkill(&child);
    finish(child).await;
    let child = spawn_keyed(dir, &RESUME_OUT);
    waited("stop-waited").expect("the Stop hook never ran");
    sigkill(&child);
    finish(child).await;
    let resumed = finish(spawn_keyed(dir, &RESUME_OUT)).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/log.txt")).unwrap(),
        "once\n"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.violations(), Vec::<String>::new());
    let all = transcript(&dir.join("out/transcript.jsonl"));
    crate::support::assert_every_tool_use_answered_once(&all);
    assert_eq!(
        events(&all, "tool_call").len(),
        2,
        "announced again on resume"
    );
    assert_eq!(events(&all, "tool_started").len(), 1);
    let finished = events(&all, "run_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["outcome"], "success");
    assert_eq!(finished[0]["final_message"], "Logged.");
    assert_eq!(finished[0]["tool_calls"], 1, "counted once");
    assert_eq!(finished[0]["turns"], 2);
}

/// Every shape of "too long for the context" the providers and gateways send compacts the
/// history and sends the request once more.
#[tokio::test]
async fn every_overflow_shape_compacts() {
    let anthropic = Reply::Status {
        status: 400,
        headers: vec![],
        kind: "invalid_request_error",
        message: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again".into(),
    };
    let gateway = |body: Value| Reply::StatusBody { status: 400, body };
    let shapes = [
        ("anthropic context limit", Api::Anthropic, anthropic),
        (
            "openai code",
            Api::OpenAi,
            gateway(
                json!({"error": {"message": "Your input is larger than this model accepts.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            ),
        ),
        (
            "litellm",
            Api::OpenAi,
            gateway(
                json!({"error": {"message": "litellm.ContextWindowExceededError: litellm.BadRequestError: prompt has 9000 tokens", "type": null, "param": null, "code": "400"}}),
            ),
        ),
        (
            "vllm",
            Api::OpenAi,
            gateway(
                json!({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).", "type": "BadRequestError", "param": null, "code": 400}),
            ),
        ),
        (
            "llama.cpp",
            Api::OpenAi,
            gateway(
                json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}),
            ),
        ),
        (
            "openrouter",
            Api::OpenAi,
            gateway(
                json!({"error": {"message": "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens. Please reduce the length of either one.", "code": 400}}),
            ),
        ),
    ];
    for (name, api, overflow) in shapes {
        let read = || calling("Read", json!({"file_path": "notes.txt"}));
        let server = FakeModel::start(KEY, vec![read(), read(), overflow, done("Done.")]).await;
        server.answer_summaries(turn(vec![text("Read the notes.")], Tokens::default()));
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        write_task_for(dir, &server, api, "", "");
        std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
        let run = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
        assert_eq!(run.status.code(), Some(0), "{name}: {}", stderr(&run));
        let all = transcript(&dir.join("out/transcript.jsonl"));
        let compactions = events(&all, "compaction");
        assert_eq!(compactions.len(), 1, "{name}");
        assert_eq!(compactions[0]["trigger"], "context_overflow", "{name}");
        assert_eq!(compactions[0]["outcome"], "compacted", "{name}");
        assert_eq!(server.violations(), Vec::<String>::new(), "{name}");
    }
}

/// A summary endpoint that hangs: each attempt ends at the provider's clock, the threshold
/// backs off after each failure, at most three are made in the run, and the provider's
/// overflow after that ends the run as `context_overflow` (exit 4).
#[tokio::test]
async fn a_failing_compaction_backs_off_and_the_run_ends_as_context_overflow() {
    let mut replies: Vec<Reply> = (0..25)
        .map(|_| calling("Read", json!({"file_path": "notes.txt"})))
        .collect();
    replies.push(Reply::Status {
        status: 400,
        headers: vec![],
        kind: "invalid_request_error",
        message: "prompt is too long: 210345 tokens > 200000 maximum".into(),
    });
    let server = FakeModel::start(KEY, replies).await;
    server.answer_summaries_with(Reply::StallAfter {
        turn: turn(vec![text("never")], Tokens::default()),
        events: 0,
    });
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_task_for(
        dir,
        &server,
        Api::Anthropic,
        "  timeouts: {first_event: 1}\n  retries: {max: 0}\n",
        "limits: {max_turns: 40}\ncompaction: {context_window: 2000, threshold: 0.1}\n",
    );
    std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
    let run = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
    assert_eq!(run.status.code(), Some(4), "{}", stderr(&run));
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let asked: Vec<&Value> = events(&all, "compaction")
        .into_iter()
        .filter(|event| event["reason"] != "too few turns to compact")
        .collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked.iter().all(|event| event["outcome"] == "failed"));
    let turns: Vec<u64> = asked
        .iter()
        .map(|event| event["turn"].as_u64().unwrap())
        .collect();
    assert!(
        turns[1] >= turns[0] + 5 && turns[2] >= turns[1] + 10,
        "backed off: {turns:?}"
    );
    let summaries = server
        .requests()
        .iter()
        .filter(|request| is_summary_request(&request.body))
        .count();
    assert_eq!(summaries, 3);
    let finished = events(&all, "run_finished")[0];
    assert_eq!(finished["outcome"], "context_overflow");
    assert_eq!(finished["turns"], 26);
    let error = finished["error"].as_str().unwrap();
    assert!(error.contains("prompt is too long"), "{error}");
    assert!(error.contains("failed already"), "{error}");
}

/// A summary past a quarter of the window is refused and asked for once more, shorter; a
/// second one past it fails the compaction, and the overflow ends the run.
#[tokio::test]
async fn a_summary_over_its_cap_is_asked_for_again_then_refused() {
    let read = || calling("Read", json!({"file_path": "notes.txt"}));
    let overflow = Reply::Status {
        status: 400,
        headers: vec![],
        kind: "invalid_request_error",
        message: "prompt is too long: 50000 tokens > 40000 maximum".into(),
    };
    let server = FakeModel::start(KEY, vec![read(), read(), read(), overflow]).await;
    // 60 kB: over a quarter of a 40000-token window at 4 bytes a token.
    server.answer_summaries(turn(
        vec![text(&"a summary that never ends ".repeat(2400))],
        Tokens::default(),
    ));
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    write_task(dir, &server, "compaction: {context_window: 40000}\n");
    std::fs::write(dir.join("ws/notes.txt"), "notes\n").unwrap();
    let run = tollgate(dir, &["run", "task.yaml", "--out", "out"]).await;
    assert_eq!(run.status.code(), Some(4), "{}", stderr(&run));
    let all = transcript(&dir.join("out/transcript.jsonl"));
    let compaction = events(&all, "compaction")[0];
    assert_eq!(compaction["outcome"], "failed");
    assert_eq!(compaction["responses"], 2);
    let reason = compaction["reason"].as_str().unwrap();
    assert!(
        reason.contains("too long") && reason.contains("10000"),
        "{reason}"
    );
    let summaries: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|request| request.body)
        .filter(is_summary_request)
        .collect();
    assert_eq!(summaries.len(), 2);
    assert!(
        summaries[1]["messages"]
            .to_string()
            .contains("That summary was too long"),
        "the second request asks for a shorter one"
    );
    assert_eq!(
        events(&all, "run_finished")[0]["outcome"],
        "context_overflow"
    );
}

/// Seeds of the slow kill test: `TOLLGATE_KILL_SEEDS` (default 20, which CI runs).
fn kill_seeds() -> u64 {
    std::env::var("TOLLGATE_KILL_SEEDS")
        .ok()
        .and_then(|seeds| seeds.parse().ok())
        .unwrap_or(20)
}

/// A small deterministic generator (splitmix64), so a failing seed can be run again.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The scripted task of the kill test: four turns of two commands each, every command
/// appending its own id to `log.txt`, then a final answer.
const KILL_TURNS: usize = 4;

fn kill_task() -> String {
    let mut script = String::new();
    for turn in 1..=KILL_TURNS {
        script.push_str(&format!(
            "    - - tool_use: {{name: Bash, input: {{command: \"echo c{turn}a >> log.txt\"}}}}\n      - tool_use: {{name: Bash, input: {{command: \"echo c{turn}b >> log.txt; sleep 0.05\"}}}}\n"
        ));
    }
    script.push_str("    - - text: all logged\n");
    format!(
        "version: 1\nname: killed\nprompt: Log every id.\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\npermissions:\n  allow: [Bash]\nmodel:\n  provider: scripted\n  script:\n{script}"
    )
}

/// A scripted run killed with SIGKILL at random points and resumed each time until it
/// finishes: every command ran exactly once, except one killed while it ran, which the
/// record says started with its result lost (it ran at most once). The scripted model goes
/// on at its next turn, so no tool_use id repeats and every one is answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_run_killed_at_random_points_runs_each_command_once() {
    let (mut kills, mut lost_total) = (0, 0);
    for seed in 0..kill_seeds() {
        let (killed, lost) = killed_and_resumed(seed).await;
        kills += killed;
        lost_total += lost;
    }
    eprintln!(
        "{} seeds: {kills} kills, {lost_total} calls started with their result lost",
        kill_seeds()
    );
}

async fn killed_and_resumed(seed: u64) -> (u32, usize) {
    let mut rng = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5eed;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(dir.join("task.yaml"), kill_task()).unwrap();
    let transcript_path = dir.join("out/transcript.jsonl");
    let mut kills = 0;
    let mut finished = None;
    for attempt in 0..40 {
        let text = std::fs::read_to_string(&transcript_path).unwrap_or_default();
        // Killed after its end was recorded (while writing its reports): it is finished.
        if text.contains("\"type\":\"run_finished\"") {
            finished = Some(attempt);
            break;
        }
        // Nothing of the run is on record before its first message: it starts again.
        let recorded = text.contains("\"type\":\"user_message\"");
        let args: &[&str] = if recorded {
            &["run", "task.yaml", "--resume", "out"]
        } else {
            &["run", "task.yaml", "--out", "out", "--force"]
        };
        let mut child = spawn_keyed(dir, args);
        // Late attempts run to the end, so every seed finishes.
        let delay = (attempt < 25).then(|| splitmix(&mut rng) % 400);
        let exited = match delay {
            Some(ms) => tokio::time::timeout(std::time::Duration::from_millis(ms), child.wait())
                .await
                .ok(),
            None => Some(child.wait().await),
        };
        if exited.is_none() {
            sigkill(&child);
            kills += 1;
        }
        let output = finish(child).await;
        if exited.is_some() {
            assert_eq!(
                output.status.code(),
                Some(0),
                "seed {seed}, attempt {attempt}: {}",
                stderr(&output)
            );
            finished = Some(attempt);
            break;
        }
    }
    assert!(finished.is_some(), "seed {seed}: never finished");
    let all = transcript(&transcript_path);
    crate::support::assert_every_tool_use_answered_once(&all);
    let commands: std::collections::HashMap<&str, String> = events(&all, "tool_call")
        .iter()
        .map(|event| {
            let command = event["input"]["command"].as_str().unwrap();
            let id = command.split_whitespace().nth(1).unwrap().to_string();
            (event["id"].as_str().unwrap(), id)
        })
        .collect();
    let lost: Vec<&String> = events(&all, "tool_result")
        .iter()
        .filter(|event| event["status"] == "lost")
        .map(|event| &commands[event["id"].as_str().unwrap()])
        .collect();
    let log = std::fs::read_to_string(dir.join("ws/log.txt")).unwrap_or_default();
    for turn in 1..=KILL_TURNS {
        for half in ["a", "b"] {
            let id = format!("c{turn}{half}");
            let ran = log.lines().filter(|line| *line == id).count();
            if lost.contains(&&id) {
                assert!(ran <= 1, "seed {seed}: {id} ran {ran} times:\n{log}");
            } else {
                assert_eq!(ran, 1, "seed {seed}: {id} ran {ran} times:\n{log}");
            }
        }
    }
    let turns: Vec<u64> = events(&all, "model_request")
        .iter()
        .map(|event| event["turn"].as_u64().unwrap())
        .collect();
    assert!(
        turns.windows(2).all(|pair| pair[1] > pair[0]),
        "seed {seed}: turns {turns:?}"
    );
    let ended = events(&all, "run_finished");
    assert_eq!(ended.last().unwrap()["outcome"], "success", "seed {seed}");
    (kills, lost.len())
}
