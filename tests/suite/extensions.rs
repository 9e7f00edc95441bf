//! Custom sub-agents and plugins end to end (S9): the real binary with a scripted model. An
//! agent file's tools only narrow the parent's and its front matter grants nothing;
//! `Agent(name)` and `Task(name)` rules gate it. A plugin folder's skill, agent, hook and MCP
//! server are used together in one run, each where its kind goes: the hook and the server
//! run for an operator's plugin, need approval for a repository's, and nothing loads from
//! a marketplace on the network or against the managed policy's restrictions.

use serde_json::Value;

use crate::support::{Finished, Isolation, Sandbox};

const SERVER: &str = env!("CARGO_BIN_EXE_tollgate-mcp-test-server");

fn call(tool: &str, input: &str) -> String {
    format!("[{{tool_use: {{name: {tool}, input: {input}}}}}]")
}

/// `t.yaml` in the sandbox: a scripted task working in `ws/`, `head` its mode, tools and
/// the rest, the model's turns in order, then `done`.
fn task(sandbox: &Sandbox, head: &str, turns: &[String]) {
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let script: String = turns.iter().map(|turn| format!("    - {turn}\n")).collect();
    sandbox.write(
        "t.yaml",
        &format!(
            "version: 1\nname: ext\nprompt: go\nworkdir: ws\n{head}model:\n  provider: scripted\n  script:\n{script}    - - text: done\n"
        ),
    );
}

/// `tollgate run t.yaml` with the sandbox's own user policy folder (`config/`) and managed
/// folder (`managed/`); S2 holds within each conversation, the run's own and each sub-agent's.
fn run(sandbox: &Sandbox, args: &[&str]) -> Finished {
    let isolation = Isolation::new().user_config("config").managed("managed");
    let ran = sandbox.run(&isolation, args);
    // A configuration error ends the run before it writes any transcript.
    if ran.wrote_transcript() {
        ran.assert_each_conversation_answers_every_tool_use_once();
    }
    ran
}

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews files.\ntools: Read, Grep, Write\ndisallowedTools: Write\nmodel: opus\npermissionMode: bypassPermissions\n---\nYou review. Say REVIEWED at the end.\n";

#[test]
fn a_custom_agent_only_narrows_the_pool_grants_nothing_and_answers_to_its_rules() {
    let sandbox = Sandbox::empty();
    sandbox.write("ws/.claude/agents/reviewer.md", REVIEWER);
    sandbox.write("ws/a.txt", "hello\n");
    let turns = [
        call(
            "Agent",
            "{description: review, prompt: 'Review a.txt', subagent_type: reviewer}",
        ),
        // The sub-agent: a read, then a forged Write and Bash (not in its pool).
        "[{tool_use: {name: Read, input: {file_path: a.txt}}}, {tool_use: {name: Write, input: {file_path: a.txt, content: x}}}, {tool_use: {name: Bash, input: {command: 'rm a.txt'}}}]".to_string(),
        "[{text: 'REVIEWED: a.txt says hello'}]".to_string(),
    ];
    let head = "mode: dontAsk\nfail_on: []\ntools: [Read, Write, Bash, Agent]\npermissions:\n  allow: [Read, Write, Bash, 'Agent(reviewer)']\n";
    task(&sandbox, head, &turns);
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    let started = ran.of_type("subagent_started")[0];
    assert_eq!(started["agent"], "reviewer");
    assert_eq!(started["subagent_type"], "general");
    // Grep is not the parent's; Write is disallowed; Bash was never named.
    assert_eq!(started["tools"], serde_json::json!(["Read"]));
    let results: Vec<String> = ran
        .of_type("tool_result")
        .into_iter()
        .filter(|result| result["agent_id"] == "agent-1")
        .map(|result| result["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(results[0].contains("hello"), "{results:?}");
    assert!(
        results[1].starts_with("No such tool available: Write"),
        "{results:?}"
    );
    assert!(
        results[2].starts_with("No such tool available: Bash"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("ws/a.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(ran.result_text("Agent", 0), "REVIEWED: a.txt says hello");
    // Its instructions are its system prompt's last part; what it cannot set is said.
    let request = ran
        .of_type("model_request")
        .into_iter()
        .find(|request| request["agent_id"] == "agent-1")
        .unwrap();
    assert_eq!(request["tools"], serde_json::json!(["Read"]));
    let warnings = ran.policy_warnings();
    assert!(warnings.contains("permissionMode left aside"), "{warnings}");
    assert!(
        warnings.contains("model `opus` is not applied"),
        "{warnings}"
    );

    // `replay` judges the recorded Agent call by the agent's name under another policy.
    sandbox.write("narrow.yaml", "permissions:\n  deny: ['Task(reviewer)']\n");
    let replayed = sandbox.tollgate(&["replay", "out/transcript.jsonl", "--policy", "narrow.yaml"]);
    let said = String::from_utf8_lossy(&replayed.stderr);
    let row = said
        .lines()
        .find(|line| line.contains("Agent"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(row.contains("allow") && row.contains("deny"), "{said}");

    // Claude Code's older `Task(name)` spelling denies it; `Agent(general)` does not allow it.
    for permissions in [
        "  allow: [Read, 'Agent(*)']\n  deny: ['Task(reviewer)']\n",
        "  allow: [Read, 'Agent(general)']\n",
    ] {
        task(
            &sandbox,
            &format!("mode: dontAsk\ntools: [Read, Agent]\npermissions:\n{permissions}"),
            &turns[..1],
        );
        let ran = run(&sandbox, &[]);
        assert!(ran.of_type("subagent_started").is_empty(), "{permissions}");
        assert!(
            ran.result_text("Agent", 0).starts_with("Permission denied"),
            "{permissions}: {}",
            ran.result_text("Agent", 0)
        );
    }

    // A malformed agent file stops the run before it starts, at its line.
    sandbox.write(
        "ws/.claude/agents/bad.md",
        "---\nname: bad\ndescription: d\ntools: Bash(rm:*)\n---\nGo.\n",
    );
    let ran = run(&sandbox, &[]);
    assert_eq!(ran.code, 2);
    let stderr = &ran.stderr;
    assert!(
        stderr.contains("bad.md:4:8") && stderr.contains("is a rule"),
        "{stderr}"
    );
}

/// A plugin folder: a skill, an agent that uses the plugin's MCP server, a PreToolUse hook
/// on that server's tool (it records its input beside the folder) and the server itself.
fn plugin(sandbox: &Sandbox, at: &str) {
    sandbox.write(
        &format!("{at}/.claude-plugin/plugin.json"),
        r#"{"name": "team-kit", "version": "1.0.0", "description": "Shared setup", "outputStyles": "./styles"}"#,
    );
    sandbox.write(
        &format!("{at}/skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: How we write notes.\n---\nWrite notes in NOTES.md, newest first.\n",
    );
    sandbox.write(
        &format!("{at}/agents/checker.md"),
        "---\nname: checker\ndescription: Checks with the kit server.\ntools: mcp__kit\n---\nAsk the kit server.\n",
    );
    sandbox.write(
        &format!("{at}/hooks/hooks.json"),
        r#"{"description": "records kit calls", "hooks": {"PreToolUse": [{"matcher": "mcp__kit__echo", "hooks": [{"type": "command", "command": "cat > ${CLAUDE_PLUGIN_ROOT}/../hook-input.json"}]}]}}"#,
    );
    sandbox.write(
        &format!("{at}/.mcp.json"),
        &format!(r#"{{"mcpServers": {{"kit": {{"command": "{SERVER}"}}}}}}"#),
    );
    sandbox.write(&format!("{at}/commands/deploy.md"), "Deploy it.\n");
}

fn plugin_turns() -> Vec<String> {
    vec![
        call("Skill", "{skill: notes}"),
        call(
            "Agent",
            "{description: check, prompt: 'Echo hi through the kit', subagent_type: checker}",
        ),
        call("ToolSearch", "{query: 'select:mcp__kit__echo'}"),
        call("mcp__kit__echo", "{text: hi}"),
        "[{text: 'kit said hi'}]".to_string(),
    ]
}

const PLUGIN_HEAD: &str = "mode: dontAsk\nfail_on: []\ntools: [Read, Skill, Agent]\npermissions:\n  allow: ['Skill(notes)', 'Agent(checker)', mcp__kit__echo]\n";

#[test]
fn a_plugins_skill_agent_hook_and_server_are_used_together_in_one_run() {
    let sandbox = Sandbox::empty();
    plugin(&sandbox, "kit/team-kit");
    task(&sandbox, PLUGIN_HEAD, &plugin_turns());
    let ran = run(&sandbox, &["--plugin-dir", "kit/team-kit"]);
    ran.assert_code(0);
    assert!(
        ran.result_text("Skill", 0)
            .contains("Write notes in NOTES.md"),
        "{}",
        ran.result_text("Skill", 0)
    );
    let started = ran.of_type("subagent_started")[0];
    assert_eq!(started["agent"], "checker");
    assert_eq!(started["tools"], serde_json::json!(["ToolSearch"]));
    assert_eq!(ran.result_text("mcp__kit__echo", 0), "echo: hi");
    assert_eq!(ran.result_text("Agent", 0), "kit said hi");
    let server = &ran.started()["mcp_servers"][0];
    assert_eq!(server["name"], "kit");
    assert_eq!(server["status"], "started");
    assert_eq!(server["origin"], "command_line");
    // The hook ran on the server's tool, with Claude Code's input.
    let hook: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.path().join("kit/hook-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(hook["tool_name"], "mcp__kit__echo");
    assert_eq!(hook["tool_input"]["text"], "hi");
    let loaded = &ran.started()["policy"]["plugins"][0];
    assert_eq!(loaded["name"], "team-kit");
    assert_eq!(loaded["enabled_by"], "command_line");
    let warnings = ran.policy_warnings();
    assert!(warnings.contains("commands (slash commands"), "{warnings}");
    assert!(warnings.contains("outputStyles"), "{warnings}");
}

#[test]
fn a_repositorys_plugin_needs_approval_and_the_managed_policy_alone_enables_under_its_restrictions()
{
    let sandbox = Sandbox::empty();
    plugin(&sandbox, "ws/plugins/team-kit");
    // The task's (the repository's) plugin: its skill and agent are text and load; its hook
    // and its server are the repository's and do not run without an operator's approval.
    task(
        &sandbox,
        &format!("{PLUGIN_HEAD}plugins: [ws/plugins/team-kit]\n"),
        &plugin_turns(),
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert!(
        ran.result_text("Skill", 0)
            .contains("Write notes in NOTES.md")
    );
    let server = &ran.started()["mcp_servers"][0];
    assert_eq!(server["status"], "skipped", "{server}");
    assert_eq!(server["origin"], "task");
    assert!(!sandbox.path().join("ws/plugins/hook-input.json").exists());
    assert!(
        ran.started()["policy"]["ignored_hooks"]
            .to_string()
            .contains("hook-input.json"),
        "{}",
        ran.started()["policy"]
    );

    // The user's approval lets both run.
    sandbox.write(
        "config/tollgate/policy.yaml",
        "allow_project_mcp: true\nallow_project_hooks: true\n",
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert_eq!(ran.result_text("mcp__kit__echo", 0), "echo: hi");
    assert!(sandbox.path().join("ws/plugins/hook-input.json").exists());

    // Under the managed policy's managed_only, only the plugins it enables load.
    std::fs::remove_file(sandbox.path().join("config/tollgate/policy.yaml")).unwrap();
    plugin(&sandbox, "kit/team-kit");
    sandbox.write("managed/policy.yaml", "managed_only: true\n");
    task(&sandbox, PLUGIN_HEAD, &plugin_turns()[..1]);
    let ran = run(&sandbox, &["--plugin-dir", "kit/team-kit"]);
    let warnings = ran.policy_warnings();
    assert!(warnings.contains("only it enables plugins"), "{warnings}");
    assert!(
        ran.started()["mcp_servers"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    sandbox.write(
        "managed/policy.yaml",
        &format!(
            "managed_only: true\nplugins: [{}]\npermissions:\n  allow: ['Skill(notes)']\n",
            sandbox.path().join("kit/team-kit").display()
        ),
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert!(
        ran.result_text("Skill", 0)
            .contains("Write notes in NOTES.md")
    );
}

#[test]
fn enabled_plugins_load_from_a_local_marketplace_and_never_from_the_network() {
    let sandbox = Sandbox::empty();
    plugin(&sandbox, "market/plugins/team-kit");
    sandbox.write(
        "market/.claude-plugin/marketplace.json",
        r#"{"name": "team", "owner": {"name": "t"}, "plugins": [{"name": "team-kit", "source": "./plugins/team-kit"}, {"name": "far", "source": {"source": "github", "repo": "acme/far"}}]}"#,
    );
    sandbox.write(
        "config/tollgate/policy.yaml",
        &format!(
            "enabledPlugins:\n  team-kit@team: true\n  far@team: true\n  off@team: false\n  remote@hub: true\n  bare: true\nextraKnownMarketplaces:\n  team: {{source: {{source: directory, path: {}}}}}\n  hub: {{source: {{source: github, repo: acme/hub}}}}\n",
            sandbox.path().join("market").display()
        ),
    );
    task(&sandbox, PLUGIN_HEAD, &plugin_turns());
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert_eq!(ran.result_text("mcp__kit__echo", 0), "echo: hi");
    assert_eq!(ran.started()["mcp_servers"][0]["origin"], "user");
    let warnings = ran.policy_warnings();
    for part in [
        "plugin far@team",
        "gives plugin `far` a github source: tollgate fetches nothing from the network",
        "plugin remote@hub",
        "marketplace `hub` is a github source",
        "plugin bare",
        "names no marketplace",
    ] {
        assert!(warnings.contains(part), "{part}: {warnings}");
    }
    assert!(!warnings.contains("off@team"), "{warnings}");

    // The managed policy switching the entry off keeps it off.
    sandbox.write(
        "managed/policy.yaml",
        "enabledPlugins:\n  team-kit@team: false\npermissions:\n  allow: ['Skill(notes)', 'Agent(checker)', mcp__kit__echo]\n",
    );
    let ran = run(&sandbox, &[]);
    assert!(
        ran.policy_warnings().contains("not loaded: ")
            && ran.policy_warnings().contains("switches it off"),
        "{}",
        ran.policy_warnings()
    );
    assert!(ran.started()["policy"].get("plugins").is_none());
}

/// `tollgate check` judges a custom agent's Agent call by the name it gives, as a run does.
#[test]
fn check_decides_a_custom_agent_by_its_name() {
    let sandbox = Sandbox::empty();
    let input = r#"{"description":"d","prompt":"p","subagent_type":"reviewer"}"#;
    let cases = [
        ("permissions:\n  allow: ['Agent(reviewer)']\n", "allow"),
        (
            "permissions:\n  allow: ['Agent(*)']\n  deny: ['Task(reviewer)']\n",
            "deny",
        ),
        ("permissions:\n  allow: ['Agent(general)']\n", "deny"),
    ];
    for (policy, expected) in cases {
        sandbox.write("p.yaml", policy);
        let output = sandbox.tollgate(&[
            "check", "--policy", "p.yaml", "--tool", "Agent", "--input", input, "--mode", "dontAsk",
        ]);
        let line: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stderr)));
        assert_eq!(line["decision"], expected, "{policy}: {line}");
    }
}
