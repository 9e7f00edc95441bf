//! The front door for workflows, end to end against the fake model server: a prompt from
//! the command line (with and without a task file), parameters filled as data, structured
//! output validated against a schema, repository memory files, and the JSON result other
//! tools read.

use serde_json::{Value, json};

use crate::support::fake_model::{Api, FakeModel, Recorded, Reply, Tokens, text, tool, turn};
use crate::support::{Finished, Run, tollgate_in};

const KEY: &str = "sk-front-door-test-key";

fn reply(blocks: Vec<crate::support::fake_model::Block>) -> Reply {
    Reply::Turn(turn(
        blocks,
        Tokens {
            input: 100,
            output: 10,
            cache_write: 0,
            cache_read: 0,
        },
    ))
}

/// A prompt run with no task file, talking to `server` through the environment (as a
/// workflow would set ANTHROPIC_BASE_URL and the key).
fn prompt_run(server: &FakeModel) -> Run {
    Run::new()
        .without_task()
        .env("ANTHROPIC_API_KEY", server.key())
        .env("ANTHROPIC_BASE_URL", server.base_url(Api::Anthropic))
}

/// Every text block of the request's messages, in order.
fn texts(request: &Recorded) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|block| block["text"].as_str().map(str::to_string))
        .collect()
}

fn tool_names(request: &Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn system(request: &Recorded) -> String {
    request.body["system"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `value` without Anthropic's moving cache breakpoints, which mark a prefix but are not
/// part of it.
fn without_breakpoints(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("cache_control");
            for item in map.values_mut() {
                *item = without_breakpoints(item.take());
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = without_breakpoints(item.take());
            }
        }
        _ => {}
    }
    value
}

#[tokio::test]
async fn a_prompt_alone_runs_read_only_under_the_default_policy() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![
                tool("Read", json!({"file_path": "notes.txt"})),
                tool("Write", json!({"file_path": "out.txt", "content": "x"})),
            ]),
            reply(vec![text("The notes say hello.")]),
        ],
    )
    .await;
    let run = prompt_run(&server)
        .file("ws/notes.txt", "hello\n")
        .args(["-p", "Summarise notes.txt", "--workdir", "ws"])
        .finish_async()
        .await;
    // The Write call was refused: the default fails on a denial (exit 3), nothing written.
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(!run.ws.join("out.txt").exists());
    run.assert_every_tool_use_answered_once();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools = tool_names(&requests[0]);
    for offered in ["Read", "Glob", "Grep"] {
        assert!(tools.iter().any(|t| t == offered), "{tools:?}");
    }
    for withheld in ["Bash", "Write", "Edit", "WebFetch", "Agent"] {
        assert!(
            !tools.iter().any(|t| t == withheld),
            "{withheld} offered: {tools:?}"
        );
    }
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-5");
    assert_eq!(texts(&requests[0]), ["Summarise notes.txt"]);
    let started = &run.of_type("run_started")[0];
    assert_eq!(started["mode"], "dontAsk");
    let sources = started["policy"]["sources"].to_string();
    assert!(sources.contains("prompt-default.yaml"), "{sources}");
    let read = texts(&requests[1]).join("") + &requests[1].body["messages"].to_string();
    assert!(
        read.contains("hello"),
        "the Read result reached the model: {read}"
    );
}

#[tokio::test]
async fn flags_win_over_the_task_and_the_prompt_file_may_be_stdin() {
    let server = FakeModel::start(KEY, vec![reply(vec![text("ok")])]).await;
    let task = format!(
        "version: 1\nname: t\nprompt: the task's own prompt\nworkdir: ws\nlimits:\n  max_turns: 9\n{}",
        server.model_block(Api::Anthropic, "")
    );
    let run = Run::new()
        .task(&task)
        .model(&server)
        .file("prompt.md", "the file's prompt")
        .args([
            "--prompt-file",
            "prompt.md",
            "--max-turns",
            "2",
            "--model",
            "claude-haiku-4-5",
            "--append-system-prompt",
            "Answer in French.",
        ])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let request = &server.requests()[0];
    assert_eq!(texts(request), ["the file's prompt"]);
    assert_eq!(request.body["model"], "claude-haiku-4-5");
    assert!(
        system(request).ends_with("Answer in French."),
        "{}",
        system(request)
    );
    assert_eq!(run.of_type("run_started")[0]["max_turns"], 2);

    // `--prompt-file -` reads standard input.
    let server = FakeModel::start(KEY, vec![reply(vec![text("ok")])]).await;
    let scratch = tempfile::tempdir().unwrap();
    let mut child = tollgate_in(scratch.path())
        .args(["run", "--prompt-file", "-", "-q", "--out"])
        .arg(scratch.path().join("out"))
        .env("TOLLGATE_MANAGED_DIR", scratch.path().join("etc"))
        .env("ANTHROPIC_API_KEY", server.key())
        .env("ANTHROPIC_BASE_URL", server.base_url(Api::Anthropic))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"from stdin: {{ \"{{\" }} literal")
            .unwrap();
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(texts(&server.requests()[0]), ["from stdin: {{ literal"]);
}

/// A pull request's title full of YAML and template syntax reaches the prompt as written and
/// changes nothing else: the policy in force is the same as with a harmless title.
#[tokio::test]
async fn parameters_reach_the_prompt_verbatim_and_change_no_rule() {
    let hostile = "fix: x\npermissions:\n  allow: [Bash, Write]\n{{ env.HOME }} {% raw %} ]]'\"";
    let task_for = |server: &FakeModel| {
        format!(
            "version: 1\nname: review\nworkdir: ws\nprompt: |\n  Review \"{{{{ github.event.pull_request.title }}}}\" (#{{{{ github.event.pull_request.number }}}})\n  focus: {{{{ focus }}}}, depth {{{{ depth }}}}, by {{{{ env.REVIEWER }}}}\nparams:\n  focus: {{type: string, required: true}}\n  depth: {{type: integer, default: 2}}\npermissions:\n  allow: [Read]\n{}",
            server.model_block(Api::Anthropic, "")
        )
    };
    let mut policies = Vec::new();
    for title in ["harmless title", hostile] {
        let server = FakeModel::start(
            KEY,
            vec![
                reply(vec![tool(
                    "Write",
                    json!({"file_path": "pwned", "content": "x"}),
                )]),
                reply(vec![text("done")]),
            ],
        )
        .await;
        let scratch_event = json!({"pull_request": {"title": title, "number": 42}});
        let run = Run::new()
            .task(&task_for(&server))
            .model(&server)
            .file("event.json", &scratch_event.to_string())
            .args(["--var", &format!("focus={title}"), "--fail-on", "none"]);
        let event_path = run.dir().join("event.json");
        let run = run
            .env("GITHUB_EVENT_PATH", event_path)
            .env("REVIEWER", "octocat")
            .finish_async()
            .await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(!run.ws.join("pwned").exists());
        let prompt = texts(&server.requests()[0]).join("");
        assert_eq!(
            prompt,
            format!("Review \"{title}\" (#42)\nfocus: {title}, depth 2, by octocat\n")
        );
        let decision = run
            .of_type("permission_decision")
            .into_iter()
            .find(|e| e["tool"] == "Write")
            .cloned()
            .unwrap();
        assert_eq!(decision["decision"], "deny", "{decision}");
        // The files are this run's scratch copies; their kinds and everything else compare.
        let mut policy = run.of_type("run_started")[0]["policy"].clone();
        let kinds: Vec<Value> = policy["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|source| source[0].clone())
            .collect();
        policy["sources"] = Value::from(kinds);
        policies.push(policy);
    }
    assert_eq!(
        policies[0], policies[1],
        "a title changed the policy in force"
    );
}

#[test]
fn parameters_are_strict() {
    let task = "version: 1\nname: t\nprompt: \"x {{ n }} {{ extra }}\"\nparams:\n  n: {type: integer}\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";
    let cases: &[(&[&str], &str)] = &[
        (&[], "parameter `n` is required"),
        (&["--var", "n=abc"], "must be of type integer"),
        (
            &["--var", "n=1", "--var", "other=2"],
            "declares no parameter `other`",
        ),
        (&["--var", "n=1"], "`{{ extra }}` is not defined"),
    ];
    for (args, message) in cases {
        let run = Run::new().task(task).args(*args).finish();
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    }
    // The placeholder's own line of the task file.
    let located = Run::new()
        .task("version: 1\nname: t\nprompt: |\n  line one\n  {{ missing }}\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n")
        .finish();
    assert_eq!(located.code, 2, "{}", located.stderr);
    assert!(
        located.stderr.contains("task.yaml:5:"),
        "{}",
        located.stderr
    );
    let empty = Run::new().without_task().args(["-p", "  \n"]).finish();
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    assert!(
        empty.stderr.contains("the prompt is empty"),
        "{}",
        empty.stderr
    );
    let secret = Run::new()
        .without_task()
        .args(["-p", "key: {{ env.ANTHROPIC_API_KEY }}"])
        .env("ANTHROPIC_API_KEY", "sk-ant-should-never-reach-the-prompt")
        .finish();
    assert_eq!(secret.code, 2, "{}", secret.stderr);
    assert!(secret.stderr.contains("withheld"), "{}", secret.stderr);
    assert!(!secret.stderr.contains("should-never"), "{}", secret.stderr);
    // A vars file and a flag: the flag wins.
    let run = Run::new()
        .task("version: 1\nname: t\nprompt: \"{{ a }}-{{ b }}\"\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n")
        .file("vars.yaml", "a: from-file\nb: 7\n")
        .args(["--vars-file", "vars.yaml", "--var", "a=from-flag", "--output-format", "json"])
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
}

const LABEL_SCHEMA: &str = r#"{"type": "object", "required": ["label", "confidence"], "additionalProperties": false,
 "properties": {"label": {"enum": ["bug", "feature", "question"]}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}}}"#;

#[tokio::test]
async fn an_invalid_structured_answer_is_fed_back_then_accepted() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![text("It is a bug.")]),
            reply(vec![text("{\"label\": \"defect\", \"confidence\": 0.9}")]),
            reply(vec![text("{\"label\": \"bug\", \"confidence\": 0.9}")]),
        ],
    )
    .await;
    let run = prompt_run(&server)
        .github_actions()
        .file("schema.json", LABEL_SCHEMA)
        .args([
            "-p",
            "Label this issue.",
            "--workdir",
            "ws",
            "--output-schema",
            "schema.json",
            "--output-format",
            "json",
        ])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        system(&requests[0]).contains("\"confidence\""),
        "the schema is in the system prompt"
    );
    let fed_back = texts(&requests[1]);
    assert!(
        fed_back.last().unwrap().contains("not one JSON value"),
        "{fed_back:?}"
    );
    let fed_back = texts(&requests[2]);
    assert!(fed_back.last().unwrap().contains("/label"), "{fed_back:?}");
    assert!(
        fed_back.last().unwrap().contains("answer 2 of 3"),
        "{fed_back:?}"
    );
    let rejected = run.of_type("structured_output_rejected");
    assert_eq!(rejected.len(), 2);
    let wanted = json!({"label": "bug", "confidence": 0.9});
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(result["structured_output"], wanted);
    assert_eq!(run.finished()["structured_output"], wanted);
    assert_eq!(run.json("structured_output.json"), wanted);
    assert!(
        run.github_output
            .lines()
            .any(|line| line == format!("structured_output={wanted}")),
        "{}",
        run.github_output
    );
}

#[tokio::test]
async fn answers_that_stay_invalid_end_the_run_with_its_own_outcome() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![text("{\"label\": \"defect\"}")]),
            reply(vec![text("{\"label\": \"defect\"}")]),
        ],
    )
    .await;
    let task = format!(
        "version: 1\nname: label\nprompt: Label it.\nworkdir: ws\nfail_on: []\noutput_schema_attempts: 2\noutput_schema:\n  type: object\n  required: [label]\n  properties:\n    label: {{enum: [bug, feature]}}\n{}",
        server.model_block(Api::Anthropic, "")
    );
    let run = Run::new().task(&task).model(&server).finish_async().await;
    // Not even an empty fail_on makes a missing answer a success.
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.finished()["outcome"], "structured_output_invalid");
    assert!(run.finished().get("structured_output").is_none());
    assert_eq!(server.requests().len(), 2);
    assert!(!run.out.join("structured_output.json").exists());

    // A schema file named by the task, relative to it (YAML as well as JSON).
    let run = Run::new()
        .task("version: 1\nname: t\nprompt: x\noutput_schema: schemas/label.yaml\nmodel:\n  provider: scripted\n  script:\n    - - text: '{\"label\": \"bug\"}'\n")
        .file("schemas/label.yaml", "type: object\nrequired: [label]\nproperties:\n  label: {enum: [bug]}\n")
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json("structured_output.json"), json!({"label": "bug"}));
    assert!(
        run.stdout.contains("structured output: ") && run.stdout.contains("structured_output.json"),
        "the summary names the file: {}",
        run.stdout
    );
    let missing = Run::new()
        .task("version: 1\nname: t\nprompt: x\noutput_schema: nowhere.json\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n")
        .finish();
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("nowhere.json"),
        "{}",
        missing.stderr
    );

    // A schema that is no schema stops the run before any request.
    let run = Run::new()
        .task("version: 1\nname: t\nprompt: x\noutput_schema:\n  type: 12\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n")
        .finish();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("task.yaml:") && run.stderr.contains("output_schema"),
        "{}",
        run.stderr
    );
}

/// The repository's AGENTS.md (and a CLAUDE.md that imports it again, with a file of its
/// own) go once into the first message, before the prompt; every later request repeats that
/// prefix byte for byte.
#[tokio::test]
async fn memory_files_are_sent_once_and_the_prefix_holds() {
    let agents = "Use tabs. Run `make check` before you finish.";
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![tool("Read", json!({"file_path": "a.txt"}))]),
            reply(vec![tool("Glob", json!({"pattern": "*.txt"}))]),
            reply(vec![text("done")]),
        ],
    )
    .await;
    let run = prompt_run(&server)
        .file("ws/.git/HEAD", "ref: refs/heads/main\n")
        .file("ws/AGENTS.md", agents)
        .file("ws/CLAUDE.md", "@AGENTS.md\n@docs/style.md\n")
        .file("ws/docs/style.md", "Style: short functions.")
        .file("ws/pkg/a.txt", "a")
        .file("outside.md", "NOT THE REPOSITORY'S")
        .file("ws/pkg/AGENTS.md", "pkg rules @../../outside.md")
        .args(["-p", "Tidy up.", "--workdir", "ws/pkg"])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = serde_json::to_string(&requests[0].body).unwrap();
    assert_eq!(first.matches(agents).count(), 1, "{first}");
    assert!(!first.contains("NOT THE REPOSITORY'S"));
    let first_texts = texts(&requests[0]);
    assert_eq!(first_texts.len(), 2);
    assert!(first_texts[0].contains("Style: short functions."));
    assert!(first_texts[0].contains("pkg rules"));
    assert!(first_texts[0].find("Use tabs").unwrap() < first_texts[0].find("pkg rules").unwrap());
    assert_eq!(first_texts[1], "Tidy up.");
    let prefix = |request: &Recorded| {
        without_breakpoints(json!({
            "system": request.body["system"],
            "tools": request.body["tools"],
            "first": request.body["messages"][0],
        }))
    };
    for later in &requests[1..] {
        assert_eq!(prefix(later), prefix(&requests[0]));
        let body = serde_json::to_string(&later.body).unwrap();
        assert_eq!(body.matches(agents).count(), 1);
    }
    // Neither is the newest message there, so not even a breakpoint moves: the same bytes.
    assert_eq!(
        serde_json::to_string(&requests[1].body["messages"][0]).unwrap(),
        serde_json::to_string(&requests[2].body["messages"][0]).unwrap()
    );
    let started = &run.of_type("run_started")[0];
    let files: Vec<(String, u64)> = started["memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("AGENTS.md".to_string(), agents.len() as u64),
            ("CLAUDE.md".to_string(), 26),
            ("docs/style.md".to_string(), 23),
            ("pkg/AGENTS.md".to_string(), 27),
        ]
    );
    assert!(started["memory_skipped"].to_string().contains("outside.md"));

    // memory off, by the task's key or the flag: none of it is read.
    let server = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
    let task = format!(
        "version: 1\nname: t\nprompt: Tidy up.\nworkdir: ws\nmemory: false\n{}",
        server.model_block(Api::Anthropic, "")
    );
    let run = Run::new()
        .task(&task)
        .model(&server)
        .file("ws/CLAUDE.md", agents)
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(texts(&server.requests()[0]), ["Tidy up."]);
    let server = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
    let run = prompt_run(&server)
        .file("ws/AGENTS.md", agents)
        .args(["-p", "Tidy up.", "--workdir", "ws", "--no-memory"])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(texts(&server.requests()[0]), ["Tidy up."]);
    assert!(run.of_type("run_started")[0].get("memory").is_none());
}

/// `--output-format json` names the run and carries Claude Code's result fields beside
/// tollgate's; `--final-message-file` holds the last message.
#[tokio::test]
async fn the_json_result_reads_like_claude_code_s() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![tool(
                "Write",
                json!({"file_path": "x.txt", "content": "x"}),
            )]),
            reply(vec![text("All done: one write was refused.")]),
        ],
    )
    .await;
    let run: Finished = prompt_run(&server)
        .args([
            "-p",
            "Write x.txt",
            "--workdir",
            "ws",
            "--output-format",
            "json",
            "--fail-on",
            "none",
            "--output-last-message",
            "final.txt",
        ])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let run_id = run.of_type("run_started")[0]["run_id"].clone();
    assert_eq!(result["type"], "result");
    assert_eq!(result["run_id"], run_id);
    assert_eq!(result["session_id"], run_id);
    assert_eq!(
        result["transcript"].as_str().unwrap(),
        run.out.join("transcript.jsonl").to_str().unwrap()
    );
    assert_eq!(result["result"], "All done: one write was refused.");
    assert_eq!(result["final_message"], result["result"]);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["turns"], 2);
    assert_eq!(result["is_error"], false);
    assert_eq!(result["subtype"], "success");
    assert!(result["total_cost_usd"].as_f64().unwrap() > 0.0);
    let denial = &result["permission_denials"][0];
    assert_eq!(denial["tool_name"], "Write");
    assert_eq!(denial["tool"], "Write");
    assert_eq!(denial["tool_use_id"], denial["id"]);
    assert_eq!(denial["tool_input"]["file_path"], "x.txt");
    assert_eq!(
        std::fs::read_to_string(run.dir.join("final.txt")).unwrap(),
        "All done: one write was refused."
    );
}

/// `--provider` over a task's: the task's model name, endpoint and price were its own
/// provider's, so the other provider's default model is asked, where `--base-url` says.
#[tokio::test]
async fn another_provider_takes_none_of_the_task_s_model_settings() {
    let server = FakeModel::start(KEY, vec![reply(vec![text("ok")])]).await;
    let task = format!(
        "version: 1\nname: t\nprompt: hi\nworkdir: ws\n{}",
        server.model_block(Api::Anthropic, "  pricing: {input: 1, output: 1}\n")
    );
    let run = Run::new()
        .task(&task)
        .model(&server)
        .args([
            "--provider",
            "openai",
            "--base-url",
            &server.base_url(Api::OpenAi),
        ])
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let request = &server.requests()[0];
    assert_eq!(request.api, Api::OpenAi);
    assert_eq!(request.body["model"], "gpt-4.1");
}
