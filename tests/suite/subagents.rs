//! Sub-agents and Skills end to end (issue 15 items 4–5): the binary against the fake
//! Anthropic server, which records every request. An explore sub-agent is not offered Write
//! and a forged Write or `rm` from it is refused whatever the policy allows; a general one
//! edits; its events carry its id; its cost is in the run's; `Agent(…)` and `Skill(…)` rules
//! gate; a malformed SKILL.md stops the run before it starts.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::fake_model::{Api, Block, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{
    Finished, Run, assert_each_conversation_answers_every_tool_use_once, conversations, events,
};

const KEY: &str = "sk-subagent-test-key";

/// Writes `files` into a fresh workspace, then runs a task whose `rest` sets mode, tools and
/// permissions against `server`.
async fn run_task(server: &FakeModel, files: &[(&str, &str)], rest: &str) -> Finished {
    let run = files.iter().fold(Run::new(), |run, (name, content)| {
        run.file(&format!("ws/{name}"), content)
    });
    run.task(&format!(
        "version: 1\nname: subagents\nprompt: Look, then fix.\nworkdir: ws\n{}{rest}",
        server.model_block(Api::Anthropic, "")
    ))
    .model(server)
    .finish_async()
    .await
}

fn reply(blocks: Vec<Block>, input: u64) -> Reply {
    Reply::Turn(turn(
        blocks,
        Tokens {
            input,
            output: 50,
            cache_write: 0,
            cache_read: 0,
        },
    ))
}

fn agent(kind: &str, prompt: &str) -> Block {
    tool(
        "Agent",
        json!({"description": format!("{kind} job"), "prompt": prompt, "subagent_type": kind}),
    )
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect()
}

/// The tool_result text answering `id` in `request`'s history.
fn result_of(request: &Value, id: &str) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == id)
        .map(|block| match &block["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| panic!("no result for {id} in {request}"))
}

/// The tool_use id the fake server gave the `index`-th call of the `reply`-th reply.
fn id_of(run: &Finished, reply: usize, index: usize) -> String {
    let message = run.of_type("assistant_message")[reply];
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .nth(index)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The run had a sub-agent, and S2 holds within each conversation.
fn every_conversation_answers_each_call_once(all: &[Value]) {
    assert!(conversations(all).len() > 1, "no sub-agent events");
    assert_each_conversation_answers_every_tool_use_once(all);
}

#[tokio::test]
async fn an_explore_subagent_is_not_offered_write_and_its_forged_writes_are_refused() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![agent("explore", "Find what a.txt says.")], 100),
            // The sub-agent: a read, a forged Write, an rm and a redirection — all in one turn.
            reply(
                vec![
                    tool("Read", json!({"file_path": "a.txt"})),
                    tool("Write", json!({"file_path": "a.txt", "content": "pwned"})),
                    tool("Bash", json!({"command": "rm a.txt"})),
                    tool("Bash", json!({"command": "echo pwned > a.txt"})),
                    tool("Bash", json!({"command": "cat a.txt"})),
                ],
                200,
            ),
            reply(vec![text("a.txt says hello")], 300),
            reply(vec![text("The explorer says a.txt says hello.")], 400),
        ],
    )
    .await;
    // Bypass mode and allow rules for everything: the explore limit must hold regardless.
    let run = run_task(
        &server,
        &[("a.txt", "hello\n")],
        "mode: bypassPermissions\ntools: [Read, Write, Edit, Bash, Glob, Grep, Agent]\n\
         permissions:\n  allow: [Write, Edit, Bash, 'Agent(explore)']\nfail_on: []\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    assert_eq!(
        std::fs::read_to_string(run.ws.join("a.txt")).unwrap(),
        "hello\n"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(
        tool_names(&requests[0].body),
        ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "Agent"]
    );
    // The sub-agent's own requests: its tools, its prompt, its own history.
    for sub in &requests[1..3] {
        assert_eq!(tool_names(&sub.body), ["Read", "Bash", "Glob", "Grep"]);
        assert_eq!(
            sub.body["messages"][0]["content"][0]["text"],
            "Find what a.txt says."
        );
        let system = sub.body["system"][0]["text"].as_str().unwrap();
        assert!(system.contains("You are an explore sub-agent"), "{system}");
    }
    let sub_ids: Vec<String> = (0..5).map(|index| id_of(&run, 1, index)).collect();
    let second_sub = &requests[2].body;
    assert!(result_of(second_sub, &sub_ids[0]).contains("hello"));
    assert!(result_of(second_sub, &sub_ids[1]).starts_with("No such tool available: Write"));
    for id in &sub_ids[2..4] {
        assert_eq!(
            result_of(second_sub, id),
            "Permission denied: the explore sub-agent only reads, and this Bash call is not proven read-only"
        );
    }
    assert!(result_of(second_sub, &sub_ids[4]).contains("hello"));
    // Its final message is the Agent call's result in the parent's next request.
    assert_eq!(
        result_of(&requests[3].body, &id_of(&run, 0, 0)),
        "a.txt says hello"
    );

    // The transcript: the sub-agent's events carry its id and sit between its start and end.
    let started = run.of_type("subagent_started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["subagent_type"], "explore");
    assert_eq!(started[0]["parent_id"], id_of(&run, 0, 0));
    let all = run.events();
    let tagged: Vec<&Value> = all
        .iter()
        .filter(|event| event["agent_id"] == "agent-1")
        .collect();
    let kinds: Vec<&str> = tagged.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "model_request").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "tool_call").count(), 5);
    assert_eq!(kinds.iter().filter(|k| **k == "tool_result").count(), 5);
    let denied: Vec<&Value> = tagged
        .iter()
        .copied()
        .filter(|e| e["type"] == "permission_decision" && e["decision"] == "deny")
        .collect();
    assert_eq!(denied.len(), 3);
    assert!(denied.iter().all(|e| e["step"] == "0"));
    every_conversation_answers_each_call_once(run.events());
    let finished = run.finished();
    assert_eq!(finished["turns"], 2, "the run's own turns");
    assert_eq!(finished["denials"], 3);

    // replay under the same permissive policy widens nothing: the explore refusals hold.
    let replay = crate::support::tollgate_in(&run.dir)
        .arg("replay")
        .arg(run.out.join("transcript.jsonl"))
        .args([
            "--mode",
            "bypassPermissions",
            "--allow",
            "Write",
            "--allow",
            "Bash",
        ])
        .args(["--allow", "Agent(explore)", "--workdir"])
        .arg(&run.ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{stderr}");
    // (after the load's warning that `Bash` allows every command)
    assert!(
        stderr.contains("6 calls replayed under bypassPermissions mode; 0 changed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_general_subagent_edits_and_its_cost_is_in_the_runs() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![agent("general", "Change 1 to 2 in n.txt.")], 1000),
            reply(vec![tool("Read", json!({"file_path": "n.txt"}))], 2000),
            reply(
                vec![tool(
                    "Edit",
                    json!({"file_path": "n.txt", "old_string": "1", "new_string": "2"}),
                )],
                3000,
            ),
            reply(vec![text("n.txt now says 2")], 4000),
            reply(vec![text("Done.")], 5000),
        ],
    )
    .await;
    let run = run_task(
        &server,
        &[("n.txt", "1\n")],
        "mode: acceptEdits\ntools: [Read, Edit, Agent, TodoWrite]\npermissions:\n  allow: ['Agent(general)']\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(run.ws.join("n.txt")).unwrap(),
        "2\n"
    );
    let requests = server.requests();
    assert_eq!(tool_names(&requests[1].body), ["Read", "Edit", "TodoWrite"]);
    assert_eq!(
        result_of(&requests[4].body, &id_of(&run, 0, 0)),
        "n.txt now says 2"
    );

    // Cost: every request's cost, the sub-agent's included, is in the run's total.
    let costs: Vec<f64> = run
        .of_type("assistant_message")
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), 5);
    let total = run.finished()["total_cost_usd"].as_f64().unwrap();
    assert!(
        (total - costs.iter().sum::<f64>()).abs() < 1e-12,
        "{total} vs {costs:?}"
    );
    let sub = run.of_type("subagent_finished")[0];
    assert_eq!(sub["outcome"], "success");
    assert_eq!(sub["turns"], 3);
    assert_eq!(sub["usage"]["input_tokens"], 2000 + 3000 + 4000);
    let sub_cost = sub["cost_usd"].as_f64().unwrap();
    assert!((sub_cost - costs[1..4].iter().sum::<f64>()).abs() < 1e-12);
    assert!(sub_cost > 0.0);
    assert_eq!(run.finished()["usage"]["input_tokens"], 15000);
    // The sub-agent's own tool calls are attributed to it.
    let edit_call = run
        .of_type("tool_call")
        .into_iter()
        .find(|e| e["tool"] == "Edit")
        .unwrap();
    assert_eq!(edit_call["agent_id"], "agent-1");
}

#[tokio::test]
async fn an_agent_deny_rule_refuses_the_subagent_whatever_its_case() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![agent("explore", "Look around.")], 10),
            reply(vec![text("I could not start it.")], 10),
        ],
    )
    .await;
    let run = run_task(
        &server,
        &[],
        "mode: bypassPermissions\ntools: [Read, Agent]\npermissions:\n  allow: [Agent]\n  deny: ['Agent(Explore)']\nfail_on: []\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests().len(), 2, "no sub-agent request was made");
    assert!(run.of_type("subagent_started").is_empty());
    let decision = run.of_type("permission_decision")[0];
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["step"], "1d");
    assert_eq!(decision["rule"]["rule"], "Agent(Explore)");
}

const INJECTED: &str = "---\nname: lint\ndescription: Fixes lint warnings in one file.\n---\nRun the linter, then fix each warning.\n";
const DELEGATED: &str = "---\nname: survey\ndescription: Surveys the repository read-only.\nmode: agent\nagent: explore\n---\nList the files and say what each does.\n";
const SECRET: &str =
    "---\nname: secret\ndescription: Not for this run.\n---\nDo the secret thing.\n";

#[tokio::test]
async fn skills_are_listed_injected_or_delegated_and_gated_by_name() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(
                vec![
                    tool("Skill", json!({"skill": "lint", "arguments": "src/a.rs"})),
                    tool("Skill", json!({"skill": "secret"})),
                    tool("Skill", json!({"skill": "survey"})),
                ],
                10,
            ),
            // The survey skill's explore sub-agent.
            reply(vec![tool("Glob", json!({"pattern": "*.txt"}))], 10),
            reply(vec![text("one file: a.txt")], 10),
            reply(vec![text("Done.")], 10),
        ],
    )
    .await;
    let run = run_task(
        &server,
        &[
            ("a.txt", "x\n"),
            ("skills/lint/SKILL.md", INJECTED),
            ("skills/survey/SKILL.md", DELEGATED),
            ("skills/secret/SKILL.md", SECRET),
        ],
        "mode: dontAsk\ntools: [Read, Glob, Skill]\npermissions:\n  allow: ['Skill(lint)', 'Skill(survey)', 'Skill(secret)']\n  deny: ['Skill(secret)']\nfail_on: []\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = server.requests();
    let skill_tool = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "Skill")
        .unwrap();
    let description = skill_tool["description"].as_str().unwrap();
    assert!(description.ends_with(
        "Skills:\n- lint: Fixes lint warnings in one file.\n- secret: Not for this run.\n- survey: Surveys the repository read-only."
    ), "{description}");
    // The delegated skill runs as an explore sub-agent on the skill's instructions.
    assert_eq!(tool_names(&requests[1].body), ["Read", "Glob"]);
    assert_eq!(
        requests[1].body["messages"][0]["content"][0]["text"],
        "List the files and say what each does."
    );
    let last = &requests[3].body;
    assert_eq!(
        result_of(last, &id_of(&run, 0, 0)),
        "Skill `lint` loaded. Follow these instructions:\n\nRun the linter, then fix each warning.\n\nApply it to: src/a.rs"
    );
    assert_eq!(
        result_of(last, &id_of(&run, 0, 1)),
        "Permission denied: Skill(secret) is denied by rule Skill(secret)"
    );
    assert_eq!(result_of(last, &id_of(&run, 0, 2)), "one file: a.txt");
    assert_eq!(
        run.of_type("subagent_started")[0]["description"],
        "skill survey"
    );
}

#[tokio::test]
async fn a_malformed_skill_stops_the_run_before_it_starts() {
    let server = FakeModel::start(KEY, vec![reply(vec![text("never")], 10)]).await;
    let run = run_task(
        &server,
        &[(
            "skills/bad/SKILL.md",
            "---\nname: bad\ndescription: x\nmode: sometimes\n---\nDo it.\n",
        )],
        "tools: [Read, Skill]\n",
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let want = format!(
        "{}:4:7: mode `sometimes`: use inject or agent",
        Path::new("skills/bad/SKILL.md").display()
    );
    assert!(run.stderr.contains(&want), "{}", run.stderr);
    assert!(server.requests().is_empty());
    // A whole-tool deny takes Skill out of the pool: the skills are not even read.
    let run = run_task(
        &server,
        &[("skills/bad/SKILL.md", "not a skill\n")],
        "tools: [Read, Skill]\npermissions:\n  deny: [Skill]\n",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn the_cost_limit_applies_to_the_sum_and_a_subagent_reaching_it_stops_the_run() {
    let server = FakeModel::start(
        KEY,
        vec![
            reply(vec![agent("explore", "Read a.txt.")], 1000),
            reply(vec![tool("Read", json!({"file_path": "a.txt"}))], 5000),
            reply(vec![text("never asked for")], 10),
        ],
    )
    .await;
    let run = run_task(
        &server,
        &[("a.txt", "x\n")],
        "mode: dontAsk\ntools: [Read, Agent]\npermissions:\n  allow: ['Agent(explore)']\nlimits:\n  max_cost_usd: 0.03\n",
    )
    .await;
    // $3 / $15 per million: the parent's turn cost $0.00375 and the sub-agent's first
    // $0.01575; its next request could cost $0.03 more, past the run's limit.
    assert_eq!(server.requests().len(), 2);
    let finished = run.finished();
    assert_eq!(finished["outcome"], "max_budget_usd", "{}", run.stderr);
    assert!(finished["total_cost_usd"].as_f64().unwrap() <= 0.03);
    let sub = run.of_type("subagent_finished")[0];
    assert_eq!(sub["outcome"], "max_budget_usd");
    let agent_result = run
        .of_type("tool_result")
        .into_iter()
        .find(|e| e["tool"] == "Agent")
        .unwrap();
    assert_eq!(agent_result["is_error"], true);
    assert!(
        agent_result["content"]
            .as_str()
            .unwrap()
            .starts_with("The explore sub-agent stopped: stopped before a request")
    );
    every_conversation_answers_each_call_once(run.events());
}

/// The shipped example runs offline as its comment says.
#[test]
fn the_subagents_example_runs_as_documented() {
    let sandbox = crate::support::Sandbox::with_examples();
    let finished =
        crate::support::runs::run_task(&sandbox.path().join("examples/subagents.yaml"), &[], &[]);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let all = finished.events();
    let started = events(all, "subagent_started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["subagent_type"], "explore");
    let refused: Vec<&Value> = events(all, "permission_decision")
        .into_iter()
        .filter(|e| e["decision"] == "deny")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["tool"], "Bash");
    assert_eq!(refused[0]["agent_id"], "agent-1");
    assert!(
        sandbox
            .path()
            .join("examples/quickstart/build/output.txt")
            .exists()
    );
    let skill = events(all, "tool_result")
        .into_iter()
        .find(|e| e["tool"] == "Skill")
        .unwrap();
    assert!(
        skill["content"]
            .as_str()
            .unwrap()
            .contains("every public function has a doc comment")
    );
}

/// SIGTERM while a sub-agent's command runs: the command is killed, the sub-agent's
/// conversation and its parent's both record the stop, every call of each has its result.
#[test]
fn sigterm_inside_a_subagent_stops_both_conversations_cleanly() {
    let sandbox = crate::support::Sandbox::empty();
    std::fs::create_dir(sandbox.path().join("ws")).unwrap();
    sandbox.write(
        "t.yaml",
        "version: 1\nname: t\nprompt: p\nworkdir: ws\nmode: dontAsk\ntools: [Bash, Agent]\n\
         permissions:\n  allow: ['Bash(sleep:*)', 'Agent(general)']\n\
         model:\n  provider: scripted\n  script:\n\
         \x20   - - tool_use: {name: Agent, input: {description: wait, prompt: wait, subagent_type: general}}\n\
         \x20   - - tool_use: {name: Bash, input: {command: sleep 60}}\n\
         \x20   - - text: never reached\n",
    );
    let mut child = crate::support::tollgate_in(sandbox.path())
        .args(["run", "t.yaml", "--out", "out"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let transcript_path = sandbox.path().join("out/transcript.jsonl");
    crate::support::wait_for_text(
        &transcript_path,
        "\"agent_id\":\"agent-1\",\"type\":\"permission_decision\"",
    );
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let all = crate::support::transcript(&transcript_path);
    every_conversation_answers_each_call_once(&all);
    let aborted = events(&all, "query_aborted");
    assert_eq!(aborted.len(), 2, "{aborted:?}");
    assert_eq!(aborted[0]["agent_id"], "agent-1");
    assert_eq!(aborted[1].get("agent_id"), None);
    assert_eq!(
        events(&all, "subagent_finished")[0]["outcome"],
        "terminated"
    );
    let agent_result = events(&all, "tool_result")
        .into_iter()
        .find(|e| e["tool"] == "Agent")
        .unwrap();
    assert_eq!(agent_result["is_error"], true);
    assert!(
        agent_result["content"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    assert_eq!(all.last().unwrap()["outcome"], "terminated");
}

/// The explore limit in every headless mode, with allow rules for everything: forged tools
/// in any spelling (outside its pool, deferred, delegating, unknown) and one Bash command of
/// each writing class are refused, and the workspace is as it was.
#[tokio::test]
async fn an_explore_subagent_writes_nothing_in_any_mode_by_any_route() {
    let forged = [
        tool("Write", json!({"file_path": "a.txt", "content": "pwned"})),
        tool("write", json!({"file_path": "a.txt", "content": "pwned"})),
        tool("Write ", json!({"file_path": "a.txt", "content": "pwned"})),
        tool(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "hello", "new_string": "pwned"}),
        ),
        tool("TodoWrite", json!({"todos": []})),
        tool(
            "WebFetch",
            json!({"url": "http://127.0.0.1:9/", "prompt": "p"}),
        ),
        tool("ToolSearch", json!({"query": "select:Write"})),
        tool(
            "Agent",
            json!({"description": "d", "prompt": "write", "subagent_type": "general"}),
        ),
        tool("Skill", json!({"skill": "x"})),
        tool("mcp__srv__write", json!({})),
    ];
    let commands = [
        "echo pwned >| a.txt",
        "tee a.txt < /dev/null",
        "sed -i s/hello/pwned/ a.txt",
        "find . -name a.txt -delete",
        "cd sub && echo pwned > b.txt",
        "ls | xargs rm",
        "cat <<EOF > a.txt\npwned\nEOF",
        "env rm a.txt",
        "cat <(rm a.txt)",
        "exec > a.txt",
        "git stash",
        "git log --help",
        "ln -s a.txt b.txt",
    ];
    let modes = [
        "dontAsk",
        "default",
        "acceptEdits",
        "plan",
        "bypassPermissions",
    ];
    for mode in modes {
        let mut calls: Vec<Block> = forged.to_vec();
        calls.extend(
            commands
                .iter()
                .map(|command| tool("Bash", json!({ "command": command }))),
        );
        let count = calls.len();
        let server = FakeModel::start(
            KEY,
            vec![
                reply(vec![agent("explore", "Change a.txt.")], 100),
                reply(calls, 200),
                reply(vec![text("done")], 300),
                reply(vec![text("The explorer is done.")], 400),
            ],
        )
        .await;
        let run = run_task(
            &server,
            &[("a.txt", "hello\n"), ("sub/keep", "")],
            &format!(
                "mode: {mode}\ntools: [Read, Write, Edit, Bash, Glob, Grep, TodoWrite, WebFetch, Agent]\n\
                 permissions:\n  allow: [Write, Edit, Bash, TodoWrite, WebFetch, ToolSearch, Skill, Agent, 'Agent(explore)']\n\
                 fail_on: []\n\
                 limits: {{max_denials: 100, max_consecutive_denials: 100}}\n"
            ),
        )
        .await;
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
        assert_eq!(
            std::fs::read_to_string(run.ws.join("a.txt")).unwrap(),
            "hello\n",
            "{mode}"
        );
        assert!(!run.ws.join("b.txt").exists() && !run.ws.join("sub/b.txt").exists());
        let requests = server.requests();
        assert_eq!(requests.len(), 4, "{mode}");
        for index in 0..count {
            let result = result_of(&requests[2].body, &id_of(&run, 1, index));
            assert!(
                result.starts_with("No such tool available")
                    || result.starts_with("Permission denied"),
                "{mode}: call {index}: {result}"
            );
        }
    }
}

/// One budget for the run: three Agent calls in one turn under `max_turns: 2` make at most
/// two model requests in all, each sub-agent's turns counted as the run's.
#[tokio::test]
async fn subagents_turns_count_towards_the_runs_max_turns() {
    let mut replies = vec![reply(
        vec![
            agent("general", "Look at a."),
            agent("general", "Look at b."),
            agent("general", "Look at c."),
        ],
        100,
    )];
    // Sub-agents that would read forever.
    for _ in 0..40 {
        replies.push(reply(
            vec![tool("Read", json!({"file_path": "a.txt"}))],
            100,
        ));
    }
    let server = FakeModel::start(KEY, replies).await;
    for (limits, most) in [
        ("limits:\n  max_turns: 2\n", 2),
        ("limits:\n  max_turns: 5\n", 5),
    ] {
        let run = run_task(
            &server,
            &[("a.txt", "hello\n")],
            &format!(
                "mode: bypassPermissions\ntools: [Read, Agent]\n{limits}subagents:\n  max_turns: 3\nfail_on: []\n"
            ),
        )
        .await;
        let made = run.of_type("model_request").len();
        assert!(made <= most, "{limits}: {made} requests\n{}", run.stderr);
        assert_eq!(
            run.finished()["outcome"],
            "max_turns",
            "{limits}: {}",
            run.stderr
        );
    }
}

/// At most `subagents.max_per_turn` (default 3) sub-agents per turn: the calls past it are
/// error results, never conversations.
#[tokio::test]
async fn agent_calls_past_the_per_turn_cap_are_not_run() {
    for (setting, cap) in [("", 3usize), ("subagents:\n  max_per_turn: 1\n", 1)] {
        let mut replies = vec![reply(
            (0..5)
                .map(|n| agent("general", &format!("Job {n}.")))
                .collect(),
            100,
        )];
        for n in 0..cap {
            replies.push(reply(vec![text(&format!("done {n}"))], 100));
        }
        replies.push(reply(vec![text("All done.")], 100));
        let server = FakeModel::start(KEY, replies).await;
        let run = run_task(
            &server,
            &[],
            &format!("mode: bypassPermissions\ntools: [Read, Agent]\n{setting}fail_on: []\n"),
        )
        .await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.of_type("subagent_started").len(), cap);
        assert_eq!(server.requests().len(), cap + 2);
        let last = &server.requests()[cap + 1].body;
        for index in cap..5 {
            let id = id_of(&run, 0, index);
            assert!(
                result_of(last, &id).contains("at most"),
                "{}",
                result_of(last, &id)
            );
        }
    }
}
