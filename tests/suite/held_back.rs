//! What a run goes without for want of an operator's approval is said — a progress line on
//! stderr, a summary line on stdout, the JSON result's `held_back` and `run_started`'s
//! `policy.held_back` — with the policy lines that would approve it, and those lines, written
//! where they say, do. A server the task needs and cannot have stops the run before its first
//! model request (the fake model counts them); an optional one does not, and the model is
//! told which server it lacks and why. Hooks, plugins, additional directories and `.mcp.json`
//! servers that wait on an approval are said the same way.

use std::path::Path;

use serde_json::Value;

use crate::support::fake_model::{Api, FakeModel, reply, text, tool};
use crate::support::{Finished, Run};

const SERVER: &str = env!("CARGO_BIN_EXE_tollgate-mcp-test-server");
const KEY: &str = "held-back-test-key";

/// A task against `model` in the scratch's `ws/`, with `head` (more keys) and `servers`
/// (entries of its `mcp_servers:`).
fn task(model: &FakeModel, head: &str, servers: &str) -> String {
    format!(
        "version: 1\nname: held\nprompt: go\nworkdir: ws\nmode: dontAsk\n{head}mcp_servers:\n{servers}{}",
        model.model_block(Api::Anthropic, "")
    )
}

/// A run whose user policy folder is the scratch's own `config/` (empty unless written), so
/// nothing of the machine's approves anything.
fn isolated(run: Run) -> Run {
    let config = run.dir().join("config");
    run.env("XDG_CONFIG_HOME", config)
}

/// The progress lines that say something is held back.
fn held_lines(ran: &Finished) -> Vec<&str> {
    ran.stderr
        .lines()
        .filter(|line| line.starts_with("tollgate run: held back: "))
        .collect()
}

/// `yaml` with each of `lines` in place of the key it sets.
fn with_lines(yaml: &str, lines: &[String]) -> String {
    let keys: Vec<&str> = lines
        .iter()
        .map(|line| line.split(':').next().unwrap())
        .collect();
    let mut text: String = yaml
        .lines()
        .filter(|old| !keys.iter().any(|key| old.starts_with(&format!("{key}:"))))
        .map(|old| format!("{old}\n"))
        .collect();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Writes `held`'s approving lines where it says: the managed policy (`managed`, given with
/// `--policy` as `policy.yaml`) or, when either will do, the user's.
fn approve(dir: &Path, managed: Option<&str>, held: &Value) -> Option<String> {
    let lines: Vec<String> = held["approve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap().to_string())
        .collect();
    match (held["approve_in"].as_str().unwrap(), managed) {
        ("managed", Some(yaml)) => Some(with_lines(yaml, &lines)),
        ("managed_or_user", _) => {
            let path = dir.join("config/tollgate/policy.yaml");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, with_lines("", &lines)).unwrap();
            managed.map(str::to_string)
        }
        (other, _) => panic!("approve_in {other} with managed policy {managed:?}"),
    }
}

/// One way a task's server waits on an approval, and the lines that would approve it.
struct Case<'a> {
    label: &'a str,
    /// The managed policy (`--policy`), if any.
    managed: Option<&'a str>,
    /// More keys of the task.
    head: &'a str,
    /// The task's own `mcp_servers:` entries.
    servers: &'a str,
    /// The task's `policy:` file, if it has one.
    task_policy: Option<&'a str>,
    lines: &'a [&'a str],
}

/// A case's run against `model`, before its managed policy.
fn case_run(model: &FakeModel, head: &str, servers: &str, task_policy: Option<&str>) -> Run {
    let run = isolated(Run::new())
        .model(model)
        .task(&task(model, head, servers));
    match task_policy {
        Some(policy) => run.file("task-policy.yaml", policy),
        None => run,
    }
}

/// Every way a server the task names waits on an approval: the repository's unapproved (its
/// own `mcp_servers:` or its `policy:` file's), under the managed policy's `managed_only`
/// and under its `managed_mcp_only`. Each stops the run before the first model request with
/// exit 1 and says the lines; written where they say, those lines let the server start.
#[tokio::test]
async fn a_task_server_held_back_stops_the_run_before_any_model_request_and_its_lines_approve_it() {
    let own = format!("  srv:\n    command: {SERVER}\n");
    let task_file_server = format!("mcp_servers:\n{own}");
    let cases = [
        Case {
            label: "unapproved",
            managed: None,
            head: "",
            servers: &own,
            task_policy: None,
            lines: &["enabledMcpjsonServers: [srv]"],
        },
        Case {
            label: "the task's policy: file",
            managed: Some("permissions: {}\n"),
            head: "policy: task-policy.yaml\n",
            servers: "  other:\n    command: never-started\n    optional: true\n",
            task_policy: Some(&task_file_server),
            lines: &["enabledMcpjsonServers: [srv]"],
        },
        Case {
            label: "managed_only",
            managed: Some("managed_only: true\n"),
            head: "",
            servers: &own,
            task_policy: None,
            lines: &[
                "lower_sources_may_add: [mcp_servers]",
                "enabledMcpjsonServers: [srv]",
            ],
        },
        Case {
            label: "managed_mcp_only",
            managed: Some("managed_mcp_only: true\n"),
            head: "",
            servers: &own,
            task_policy: None,
            lines: &["managed_mcp_only: false", "enabledMcpjsonServers: [srv]"],
        },
    ];
    for Case {
        label,
        managed,
        head,
        servers,
        task_policy,
        lines,
    } in cases
    {
        let model = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
        let run = case_run(&model, head, servers, task_policy);
        let run = match managed {
            Some(managed) => run.policy(managed),
            None => run,
        };
        let ran = run.finish_async().await;
        assert_eq!(ran.code, 1, "{label}: {}\n{}", ran.stdout, ran.stderr);
        assert!(model.requests().is_empty(), "{label}: the model was asked");
        let finished = ran.finished();
        assert_eq!(finished["outcome"], "mcp_start_failed", "{label}");
        let error = finished["error"].as_str().unwrap();
        for line in lines {
            assert!(error.contains(line), "{label}: {error}");
        }
        let held: Vec<&Value> = finished["held_back"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|held| held["name"] == "srv")
            .collect();
        assert_eq!(held.len(), 1, "{label}: {finished}");
        let held = held[0];
        assert_eq!(held["kind"], "mcp_server");
        assert_eq!(held["origin"], "task");
        assert_eq!(held["required"], true, "{label}");
        assert_eq!(held["approve"], serde_json::json!(lines), "{label}");
        let wanted_in = if managed.is_some_and(|m| m.contains("managed")) {
            "managed"
        } else {
            "managed_or_user"
        };
        assert_eq!(held["approve_in"], wanted_in, "{label}");
        // The transcript's start says the same, and lists the server as skipped.
        assert_eq!(
            ran.started()["policy"]["held_back"],
            finished["held_back"],
            "{label}"
        );
        let listed = ran
            .mcp_servers()
            .iter()
            .find(|server| server["name"] == "srv")
            .unwrap();
        assert_eq!(listed["status"], "skipped");
        // One progress line, naming the lines and where they go; the summary says it too.
        let progress = held_lines(&ran);
        let srv: Vec<&&str> = progress
            .iter()
            .filter(|line| line.contains("MCP server `srv`"))
            .collect();
        assert_eq!(srv.len(), 1, "{label}: {}", ran.stderr);
        let approve_with = lines
            .iter()
            .map(|line| format!("`{line}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        assert!(
            srv[0].contains(&format!("approve with {approve_with} in the managed")),
            "{label}: {}",
            srv[0]
        );
        assert!(srv[0].contains("(the task needs it)"), "{}", srv[0]);
        assert!(
            ran.stdout.contains(&format!(
                "  {}",
                srv[0].trim_start_matches("tollgate run: ")
            )),
            "{label}: {}",
            ran.stdout
        );

        // The lines it named, where it said: the server starts and the model is asked.
        let model = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
        let run = case_run(&model, head, servers, task_policy);
        let run = match approve(run.dir(), managed, held) {
            Some(managed) => run.policy(&managed),
            None => run,
        };
        let ran = run.finish_async().await;
        assert_eq!(
            ran.code, 0,
            "{label} approved: {}\n{}",
            ran.stdout, ran.stderr
        );
        assert_eq!(model.requests().len(), 1, "{label}");
        let srv = ran
            .mcp_servers()
            .iter()
            .find(|server| server["name"] == "srv")
            .unwrap();
        assert_eq!(srv["status"], "started", "{label}");
    }
}

/// `--quiet` silences the progress line, as all progress; `--output-format json`'s result
/// still carries `held_back`, under tollgate's and Claude Code's fields.
#[tokio::test]
async fn quiet_json_runs_keep_the_held_back_servers_in_the_result() {
    let model = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
    let ran = case_run(
        &model,
        "",
        &format!("  srv:\n    command: {SERVER}\n"),
        None,
    )
    .args(["--quiet", "--output-format", "json"])
    .finish_async()
    .await;
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(held_lines(&ran).is_empty(), "{}", ran.stderr);
    let result: Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|err| panic!("stdout is not the one result: {err}: {}", ran.stdout));
    assert_eq!(result["type"], "result");
    assert_eq!(result["outcome"], "mcp_start_failed");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["held_back"][0]["name"], "srv");
    assert_eq!(
        result["held_back"][0]["approve"],
        serde_json::json!(["enabledMcpjsonServers: [srv]"])
    );
    assert!(model.requests().is_empty());
}

/// A server the run goes on without — marked `optional`, or with `mcp_start` left out of
/// `fail_on` — is still announced, and the model is told: the system prompt names it with
/// why, and a call to ToolSearch or to one of its tools is refused in those words, not a
/// bare "No such tool".
#[tokio::test]
async fn a_server_the_run_goes_on_without_is_announced_and_the_model_is_told() {
    let told = "srv (it is held back until the operator approves it)";
    // Optional, under the default fail_on: the run goes on and succeeds.
    let model = FakeModel::start(KEY, vec![reply(vec![text("done")])]).await;
    let ran = case_run(
        &model,
        "",
        &format!("  srv:\n    command: {SERVER}\n    optional: true\n"),
        None,
    )
    .finish_async()
    .await;
    ran.assert_code(0);
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let system = requests[0].body["system"].to_string();
    assert!(
        system.contains("MCP servers not running in this run"),
        "{system}"
    );
    assert!(system.contains(told), "{system}");
    assert_eq!(held_lines(&ran).len(), 1, "{}", ran.stderr);
    let held = &ran.finished()["held_back"][0];
    assert_eq!(held["name"], "srv");
    assert!(held.get("required").is_none(), "{held}");
    let listed = &ran.mcp_servers()[0];
    assert_eq!(listed["optional"], true);
    assert!(
        ran.stdout.contains("held back: MCP server `srv`"),
        "{}",
        ran.stdout
    );

    // Not optional, but fail_on without mcp_start: the run goes on; the model that looks
    // for the server's tools is told why they are not there.
    let model = FakeModel::start(
        KEY,
        vec![
            reply(vec![tool(
                "ToolSearch",
                serde_json::json!({"query": "select:mcp__srv__echo"}),
            )]),
            reply(vec![tool(
                "mcp__srv__echo",
                serde_json::json!({"text": "hi"}),
            )]),
            reply(vec![text("the server is not there")]),
        ],
    )
    .await;
    let ran = case_run(
        &model,
        "fail_on: [check, limit]\n",
        &format!("  srv:\n    command: {SERVER}\n"),
        None,
    )
    .finish_async()
    .await;
    ran.assert_code(0);
    ran.assert_every_tool_use_answered_once();
    assert_eq!(model.requests().len(), 3);
    let first_tools: Vec<String> = ran.request_tools(0);
    assert!(
        !first_tools.iter().any(|name| name == "ToolSearch"),
        "{first_tools:?}"
    );
    let search = ran.result("ToolSearch", 0);
    assert_eq!(search["status"], "denied");
    let said = search["content"].as_str().unwrap();
    assert!(
        said.contains("No such tool available: ToolSearch"),
        "{said}"
    );
    assert!(said.contains(told), "{said}");
    let echo = ran.result("mcp__srv__echo", 0);
    let said = echo["content"].as_str().unwrap();
    assert!(
        said.contains(&format!("The MCP server {told} is not running")),
        "{said}"
    );
    assert_eq!(ran.finished()["held_back"][0]["required"], true);
    assert_eq!(held_lines(&ran).len(), 1, "{}", ran.stderr);
}

/// A plugin folder with a PreToolUse hook and an MCP server.
fn plugin(run: Run, at: &str) -> Run {
    run.file(
        &format!("{at}/.claude-plugin/plugin.json"),
        r#"{"name": "kit"}"#,
    )
    .file(
        &format!("{at}/hooks/hooks.json"),
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch kit-hooked"}]}]}}"#,
    )
    .file(
        &format!("{at}/.mcp.json"),
        &format!(r#"{{"mcpServers": {{"kit": {{"command": "{SERVER}"}}}}}}"#),
    )
}

const SCRIPTED: &str = "version: 1\nname: held\nprompt: go\nworkdir: ws\nmode: dontAsk\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";

/// The held-back entries of a run, as `(kind, name, approve)`.
fn held(ran: &Finished) -> Vec<(String, String, Vec<String>)> {
    let listed = ran.started()["policy"]["held_back"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        Value::Array(listed.clone()),
        ran.finished()
            .get("held_back")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()))
    );
    listed
        .iter()
        .map(|held| {
            (
                held["kind"].as_str().unwrap().to_string(),
                held["name"].as_str().unwrap().to_string(),
                held["approve"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|line| line.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// The repository's hooks (its `.tollgate/policy.yaml`'s, its task plugin's), its plugin's
/// server and its `.mcp.json` servers, unapproved: each is held back and said, none runs, and
/// none stops the run (the task names none of them).
#[test]
fn the_repositorys_hooks_plugin_parts_and_mcp_json_servers_are_announced() {
    let run = plugin(isolated(Run::new()), "ws/plugins/kit")
        .task(&format!("{SCRIPTED}plugins: [ws/plugins/kit]\n"))
        .file(
            "ws/.tollgate/policy.yaml",
            "hooks:\n  - {event: PreToolUse, command: touch project-hooked}\n",
        )
        .file(
            "ws/.mcp.json",
            &format!(r#"{{"mcpServers": {{"docs": {{"command": "{SERVER}"}}}}}}"#),
        );
    let ran = run.finish();
    ran.assert_code(0);
    let held = held(&ran);
    let approve = |line: &str| vec![line.to_string()];
    let hook = approve("allow_project_hooks: true");
    assert_eq!(
        held,
        [
            (
                "mcp_server".to_string(),
                "kit".to_string(),
                approve("enabledMcpjsonServers: [kit]")
            ),
            (
                "mcp_server".to_string(),
                "docs".to_string(),
                approve("enabledMcpjsonServers: [docs]")
            ),
            (
                "hook".to_string(),
                "PreToolUse touch kit-hooked".to_string(),
                hook.clone()
            ),
            (
                "hook".to_string(),
                "PreToolUse touch project-hooked".to_string(),
                hook
            ),
        ]
    );
    assert!(
        ran.finished()["held_back"]
            .as_array()
            .unwrap()
            .iter()
            .all(|held| held.get("required").is_none())
    );
    assert_eq!(held_lines(&ran).len(), 4, "{}", ran.stderr);
    assert_eq!(
        ran.stdout.matches("\n  held back: ").count(),
        4,
        "{}",
        ran.stdout
    );
    assert!(!ran.ws.join("kit-hooked").exists());
    assert!(!ran.ws.join("project-hooked").exists());
}

/// Under the managed policy's `managed_only`: the operator's own plugin folder and the user's
/// additional directory are held back with the managed lines that would let them in, and a
/// `.mcp.json` that is not JSON is held back whole without a word of its text; the lines,
/// added to the managed policy, load the plugin and the directory.
#[test]
fn under_managed_only_plugins_directories_and_an_unreadable_mcp_json_are_announced() {
    let managed = "managed_only: true\n";
    let prepare = |run: Run| {
        let extra = run.dir().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        let user = format!(
            "permissions:\n  additional_directories: [{}]\n",
            extra.display()
        );
        plugin(run, "kit")
            .task(SCRIPTED)
            .file("config/tollgate/policy.yaml", &user)
            .args(["--plugin-dir", "kit"])
    };
    let run = prepare(isolated(Run::new()))
        .file("ws/.mcp.json", "{\"mcpServers\": SECRET-LOOKING TEXT")
        .policy(managed);
    let ran = run.finish();
    ran.assert_code(0);
    let held = held(&ran);
    let kinds: Vec<&str> = held.iter().map(|(kind, _, _)| kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["mcp_server", "plugin", "additional_directory"],
        "{held:?}"
    );
    assert_eq!(
        held[0].2,
        [
            "lower_sources_may_add: [mcp_servers]",
            "allow_project_mcp: true"
        ]
    );
    assert!(held[1].1.ends_with("kit"), "{held:?}");
    assert_eq!(held[1].2, [format!("plugins: [{}]", held[1].1)]);
    assert_eq!(
        held[2].2,
        ["lower_sources_may_add: [additional_directories]"]
    );
    assert!(!ran.stdout.contains("SECRET-LOOKING") && !ran.stderr.contains("SECRET-LOOKING"));
    assert!(!ran.read("transcript.jsonl").contains("SECRET-LOOKING"));
    assert_eq!(held_lines(&ran).len(), 3, "{}", ran.stderr);
    let all = held_lines(&ran).join("\n");
    assert!(
        all.contains("in the managed policy") && !all.contains("the user's policy"),
        "{all}"
    );

    // The plugin's and the directory's lines in the managed policy (the folder named in this
    // run's scratch): both are in force.
    let run = prepare(isolated(Run::new()));
    let (before, now) = (
        ran.dir.display().to_string(),
        run.dir().display().to_string(),
    );
    let lines: Vec<String> = held[1..]
        .iter()
        .flat_map(|(_, _, lines)| lines.iter().map(|line| line.replace(&before, &now)))
        .collect();
    let ran = run.policy(&with_lines(managed, &lines)).finish();
    ran.assert_code(0);
    assert!(
        ran.started()["policy"].get("held_back").is_none(),
        "{}",
        ran.started()["policy"]
    );
    assert_eq!(ran.started()["policy"]["plugins"][0]["name"], "kit");
    assert!(held_lines(&ran).is_empty(), "{}", ran.stderr);
}
