//! Hooks end to end: real hook scripts in a policy, wired into a real run.

use crate::support::Run;

#[test]
fn hooks_deny_allow_and_withhold_within_the_rules() {
    // PreToolUse: allows `touch`, denies anything mentioning `secret`, no opinion otherwise.
    let pre_hook = "#!/bin/bash\ninput=$(cat)\ncase \"$input\" in\n  *secret*) echo 'no secrets here' >&2; exit 2 ;;\n  *'\"command\":\"touch '*) printf '{\"permissionDecision\":\"allow\",\"reason\":\"touching is harmless\"}' ;;\nesac\n";
    // PostToolUse: withholds any result that shows a token.
    let post_hook = "#!/bin/bash\nif grep -q TOKEN; then printf '{\"permissionDecision\":\"deny\",\"reason\":\"the output shows a token\"}'; fi\n";
    let run = Run::new()
        .file("ws/notes.txt", "api TOKEN=abc\n")
        .file("ws/plain.txt", "nothing here\n")
        .file("pre.sh", pre_hook)
        .file("post.sh", post_hook);
    let pre = run.dir().join("pre.sh");
    let post = run.dir().join("post.sh");
    let run = run.policy(
        &format!(
            "permissions:\n  deny: ['Bash(rm:*)']\nhooks:\n  - {{event: PreToolUse, matcher: Bash, command: 'bash {}'}}\n  - {{event: PostToolUse, matcher: Read, command: 'bash {}'}}\n",
            pre.display(),
            post.display()
        ),
    );
    let calls = [
        "{name: Bash, input: {command: touch made.txt}}",
        "{name: Bash, input: {command: echo secret}}",
        "{name: Bash, input: {command: rm -rf x}}",
        "{name: Bash, input: {command: make all}}",
        "{name: Read, input: {file_path: notes.txt}}",
        "{name: Read, input: {file_path: plain.txt}}",
    ];
    let script: String = calls
        .iter()
        .map(|call| format!("      - tool_use: {call}\n"))
        .collect();
    let run = run
        .task(&format!("version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    -\n{script}    - - text: done\n"))
        .finish();
    // Refused calls fail the run by default (`fail_on` includes `denial`).
    assert_eq!(run.code, 3, "{}", run.stderr);
    run.assert_every_tool_use_answered_once();
    let results: Vec<(String, String)> = run
        .of_type("tool_result")
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap().to_string(),
                e["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // The hook's allow lifts the mode's refusal of `touch made.txt`…
    assert_eq!(results[0].0, "success");
    assert!(run.ws.join("made.txt").exists());
    // …its deny stops `echo secret`, with its stderr as the reason…
    assert_eq!(results[1].0, "denied");
    assert!(results[1].1.contains("no secrets here"), "{}", results[1].1);
    // …a deny rule is final (the hook is not even asked), no opinion leaves the mode's deny…
    assert_eq!(results[2].0, "denied");
    assert_eq!(results[3].0, "denied");
    // …and PostToolUse withholds the token but not the plain file.
    assert_eq!(results[4].0, "error");
    assert!(!results[4].1.contains("abc"), "{}", results[4].1);
    assert!(results[4].1.contains("the output shows a token"));
    assert_eq!(results[5].0, "success");
    let decisions: Vec<String> = run
        .of_type("permission_decision")
        .iter()
        .map(|e| e["layer"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(decisions, ["hook", "hook", "rule", "mode", "tool", "tool"]);
    let hook_runs = run.of_type("hook_run");
    assert_eq!(
        hook_runs.len(),
        5,
        "pre for touch, echo secret, make; post for two reads"
    );
    assert_eq!(run.events().last().unwrap()["denials_by_layer"]["hook"], 1);
}

/// A hook answer that says two things — a key given twice (the model's text appended after
/// the hook's own key by `printf`), or forms that disagree — denies: it would otherwise lift
/// dontAsk's refusal of a command no rule allows.
#[test]
fn an_ambiguous_hook_answer_denies_instead_of_allowing() {
    for answer in [
        r#"{"permissionDecision":"deny","permissionDecision":"allow"}"#,
        r#"{"decision":"block","permissionDecision":"allow"}"#,
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"},"permissionDecision":"allow"}"#,
    ] {
        let task = "version: 1\nname: t\nprompt: go\nworkdir: ws\nmode: dontAsk\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: touch made.txt}}\n    - - text: done\n";
        let run = Run::new().file("answer.json", answer);
        let answer_path = run.dir().join("answer.json");
        let run = run
            .policy(&format!(
                "hooks:\n  - {{event: PreToolUse, matcher: Bash, command: 'cat {}', on_error: ignore}}\n",
                answer_path.display()
            ))
            .task(task)
            .finish();
        assert!(
            !run.ws.join("made.txt").exists(),
            "{answer}: {}",
            run.stderr
        );
        assert_eq!(run.code, 3, "{answer}");
        let decision = run.of_type("permission_decision")[0];
        assert_eq!(decision["layer"], "hook", "{decision}");
        assert!(
            decision["reason"].as_str().unwrap().contains("ambiguous"),
            "{decision}"
        );
    }
}

/// Claude Code's lifecycle events as a settings file writes them, with real hook scripts:
/// SessionStart and UserPromptSubmit add context the model sees in its first request, a
/// Stop hook sends the model back once (told why, `stop_hook_active` set the second time),
/// and SessionEnd is told the run is over. Each moment's runs are in the transcript.
#[tokio::test]
async fn lifecycle_hooks_add_context_continue_the_run_and_see_it_end() {
    use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
    let reply = |words: &str| {
        Reply::Turn(turn(
            vec![text(words)],
            Tokens {
                input: 100,
                output: 10,
                ..Tokens::default()
            },
        ))
    };
    let model = FakeModel::start("k", vec![reply("done"), reply("really done")]).await;
    // Stop: blocks while no `stopped-once` file exists, then lets the run end.
    let stop = "#!/bin/bash\ninput=$(cat)\necho \"$input\" >> stop-inputs.jsonl\nif [ -e stopped-once ]; then exit 0; fi\ntouch stopped-once\nprintf '{\"decision\":\"block\",\"reason\":\"run the tests first\"}'\n";
    let run = Run::new()
        .file("session.sh", "#!/bin/bash\ncat > session-input.json\necho 'branch: main, 2 files changed'\n")
        .file("prompt.sh", "#!/bin/bash\ncat > prompt-input.json\nprintf '{\"hookSpecificOutput\":{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"ticket ABC-1\"}}'\n")
        .file("stop.sh", stop)
        .file("end.sh", "#!/bin/bash\ncat > end-input.json\n");
    let dir = run.dir().to_path_buf();
    let script = |name: &str| format!("bash {}", dir.join(name).display());
    let settings = serde_json::json!({
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": script("session.sh")}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": script("prompt.sh")}]}],
            "Stop": [{"description": "tests must pass", "hooks": [{"type": "command", "command": script("stop.sh")}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": script("end.sh")}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "touch notified"}]}]
        }
    });
    let run = run
        .policy(&settings.to_string())
        .model(&model)
        .task(&format!(
            "version: 1\nname: t\nprompt: fix the bug\nworkdir: ws\n{}",
            model.model_block(Api::Anthropic, "")
        ))
        .finish_async()
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].body["messages"][0].to_string();
    assert!(first.contains("fix the bug"), "{first}");
    assert!(first.contains("branch: main, 2 files changed"), "{first}");
    assert!(first.contains("ticket ABC-1"), "{first}");
    let second = requests[1].body["messages"].to_string();
    assert!(second.contains("run the tests first"), "{second}");
    // Claude Code's input, as its hook scripts read it.
    let session: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.ws.join("session-input.json")).unwrap())
            .unwrap();
    assert_eq!(session["hook_event_name"], "SessionStart");
    assert_eq!(session["source"], "startup");
    let prompt: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.ws.join("prompt-input.json")).unwrap())
            .unwrap();
    assert_eq!(prompt["prompt"], "fix the bug");
    let stops: Vec<serde_json::Value> = std::fs::read_to_string(run.ws.join("stop-inputs.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[1]["stop_hook_active"], true);
    let end: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.ws.join("end-input.json")).unwrap())
            .unwrap();
    assert_eq!(end["hook_event_name"], "SessionEnd");
    assert!(!run.ws.join("notified").exists());
    let moments: Vec<(String, String)> = run
        .of_type("event_hooks")
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("SessionStart", "proceed"),
        ("UserPromptSubmit", "proceed"),
        ("Stop", "block"),
        ("Stop", "proceed"),
        ("SessionEnd", "proceed"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(moments, expected);
    let started = &run.of_type("run_started")[0];
    assert!(
        started["policy"]["ignored_keys"]
            .to_string()
            .contains("hooks.Notification"),
        "{started}"
    );
}

/// A hook that ends the run: a blocked prompt, `continue: false` at SessionStart, a failing
/// SessionStart hook (fail closed), and a Stop hook that never lets go (bounded). None of
/// them lets a model call through that should not happen, and each ends as `hook_stopped`.
#[test]
fn lifecycle_hooks_that_stop_the_run_fail_closed() {
    let cases: &[(&str, &str, &str, usize)] = &[
        (
            "UserPromptSubmit",
            "echo 'prompts may not name production' >&2; exit 2",
            "prompts may not name production",
            0,
        ),
        (
            "SessionStart",
            "printf '{\"continue\":false,\"stopReason\":\"maintenance window\"}'",
            "maintenance window",
            0,
        ),
        ("SessionStart", "exit 7", "exited with code 7", 0),
        ("SessionStart", "sleep 5", "timed out after 1 s", 0),
        (
            "Stop",
            "printf '{\"decision\":\"block\",\"reason\":\"not yet\"}'",
            "still blocking after 8 continuations",
            9,
        ),
    ];
    for (event, command, says, model_turns) in cases {
        let policy = format!(
            "hooks:\n  - {{event: {event}, command: {}, timeout: 1}}\n",
            serde_json::json!(command)
        );
        let script: String = (0..10).map(|_| "    - - text: done\n").collect();
        let run = Run::new()
            .policy(&policy)
            .task(&format!(
                "version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n{script}"
            ))
            .finish();
        assert_eq!(run.code, 1, "{event} {command}: {}", run.stderr);
        let finished = run.finished();
        assert_eq!(finished["outcome"], "hook_stopped", "{finished}");
        assert!(
            finished["error"].as_str().unwrap().contains(says),
            "{event}: {finished}"
        );
        assert_eq!(
            run.of_type("model_request").len(),
            *model_turns,
            "{event} {command}"
        );
    }
}

/// PermissionRequest answers what a person would have been asked (default mode, headless:
/// otherwise denied), and PermissionDenied is told of each denial and may add context; in
/// dontAsk nobody is asked, so PermissionRequest is not run. A rule's deny is final.
#[test]
fn permission_request_answers_asks_and_permission_denied_sees_denials() {
    let request = "#!/bin/bash\ninput=$(cat)\ncase \"$input\" in\n  *touch*) printf '{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\"}}}' ;;\n  *) printf '{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"not on the list\"}}}' ;;\nesac\n";
    let denied = "#!/bin/bash\ncat >> denied.jsonl\necho >> denied.jsonl\nprintf '{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionDenied\",\"additionalContext\":\"ask in the ticket instead\"}}'\n";
    for (mode, touched) in [("default", true), ("dontAsk", false)] {
        let run = Run::new()
            .file("request.sh", request)
            .file("denied.sh", denied);
        let dir = run.dir().to_path_buf();
        let run = run
            .policy(&format!(
                "allowed_modes: [default, dontAsk]\npermissions:\n  deny: ['Bash(rm:*)']\nhooks:\n  - {{event: PermissionRequest, matcher: Bash, command: 'bash {}'}}\n  - {{event: PermissionDenied, command: 'bash {}'}}\n",
                dir.join("request.sh").display(),
                dir.join("denied.sh").display()
            ))
            .task(&format!(
                "version: 1\nname: t\nprompt: go\nworkdir: ws\nmode: {mode}\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: touch made.txt}}}}\n      - tool_use: {{name: Bash, input: {{command: make all}}}}\n      - tool_use: {{name: Bash, input: {{command: rm -rf x}}}}\n    - - text: done\n"
            ))
            .finish();
        run.assert_every_tool_use_answered_once();
        assert_eq!(
            run.ws.join("made.txt").exists(),
            touched,
            "{mode}: {}",
            run.stderr
        );
        let results: Vec<(String, String)> = run
            .of_type("tool_result")
            .iter()
            .map(|e| {
                (
                    e["status"].as_str().unwrap().to_string(),
                    e["content"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        if touched {
            assert_eq!(results[0].0, "success", "{results:?}");
            assert!(results[1].1.contains("not on the list"), "{results:?}");
        } else {
            assert_eq!(results[0].0, "denied", "{results:?}");
        }
        for (status, content) in &results[1..] {
            assert_eq!(status, "denied");
            assert!(content.contains("ask in the ticket instead"), "{content}");
        }
        // The rule's deny is final: PermissionRequest is never asked about `rm`.
        assert!(results[2].1.contains("Bash(rm:*)"), "{results:?}");
        let requested = run
            .of_type("hook_run")
            .iter()
            .filter(|e| e["event"] == "PermissionRequest")
            .count();
        assert_eq!(requested, if touched { 2 } else { 0 }, "{mode}");
        let denials = std::fs::read_to_string(run.ws.join("denied.jsonl")).unwrap();
        assert_eq!(
            denials.matches("PermissionDenied").count(),
            results.iter().filter(|r| r.0 == "denied").count()
        );
        assert!(denials.contains("\"tool_use_id\""), "{denials}");
    }
}

/// SubagentStop sends a sub-agent back to work once, as Stop does for the run: the
/// sub-agent's second answer is the one its parent gets.
#[test]
fn a_subagent_stop_hook_sends_the_subagent_back_once() {
    let hook = "#!/bin/bash\ncat >> sub-inputs.jsonl\necho >> sub-inputs.jsonl\nif [ -e once ]; then exit 0; fi\ntouch once\necho 'cite the file you read' >&2\nexit 2\n";
    let run = Run::new().file("sub.sh", hook);
    let path = run.dir().join("sub.sh");
    let run = run
        .policy(&format!(
            "permissions:\n  allow: ['Agent(general)']\nhooks:\n  - {{event: SubagentStop, command: 'bash {}'}}\n",
            path.display()
        ))
        .task("version: 1\nname: t\nprompt: go\nworkdir: ws\ntools: [Agent, Read]\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Agent, input: {description: d, prompt: look around, subagent_type: general}}\n    - - text: first answer\n    - - text: second answer, citing a.txt\n    - - text: done\n")
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_every_tool_use_answered_once();
    let result = &run.of_type("tool_result")[0];
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("second answer, citing a.txt"),
        "{result}"
    );
    let verdicts: Vec<String> = run
        .of_type("event_hooks")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["event"].as_str().unwrap(),
                e["verdict"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(verdicts, ["SubagentStop block", "SubagentStop proceed"]);
    let inputs = std::fs::read_to_string(run.ws.join("sub-inputs.jsonl")).unwrap();
    assert!(inputs.contains("\"agent_type\":\"general\""), "{inputs}");
    assert!(inputs.contains("\"stop_hook_active\":true"), "{inputs}");
}
