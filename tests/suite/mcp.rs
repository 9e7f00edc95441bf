//! MCP servers end to end (S9): the real binary starts the test server of
//! `tests/mcp_server/` (and, when installed, `@modelcontextprotocol/server-everything`), finds
//! its tools through ToolSearch, gates them by `mcp__…` rules in every mode, and survives a
//! crashing, a slow, a hanging and a silent server. After every run, no server process and
//! nothing it started is left (scanned in /proc by pid and process group).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    Finished, Isolation, Sandbox, assert_every_tool_use_answered_once, events, poll_until,
    transcript,
};

const SERVER: &str = env!("CARGO_BIN_EXE_tollgate-mcp-test-server");

/// A `mcp_servers:` entry for the test server named `name`, with extra keys.
fn server(name: &str, extra: &str) -> String {
    format!("  {name}:\n    command: {SERVER}\n{extra}")
}

/// The task file comes with the repository: its servers start once the user's own policy
/// (under `config/`, see [`only_our_config`]) approves them.
fn approve_task_servers(sandbox: &Sandbox) {
    sandbox.write("config/tollgate/policy.yaml", "allow_project_mcp: true\n");
}

/// A task in `ws/` whose scripted model makes `turns` (YAML lists of blocks), then stops;
/// its servers approved.
fn task(sandbox: &Sandbox, head: &str, servers: &str, turns: &[&str]) {
    approve_task_servers(sandbox);
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    let mut script = String::new();
    for turn in turns {
        script.push_str(&format!("    - {turn}\n"));
    }
    sandbox.write(
        "t.yaml",
        &format!(
            "version: 1\nname: mcp\nprompt: go\nworkdir: ws\n{head}mcp_servers:\n{servers}model:\n  provider: scripted\n  script:\n{script}    - - text: done\n"
        ),
    );
}

fn call(tool: &str, input: &str) -> String {
    format!("{{tool_use: {{name: {tool}, input: {input}}}}}")
}

/// Only the sandbox's `config/` is the user's policy folder, so only what the test wrote
/// there approves anything.
fn only_our_config() -> Isolation {
    Isolation::new().user_config("config")
}

/// `tollgate run t.yaml` under `only_our_config`.
fn run(sandbox: &Sandbox, args: &[&str]) -> Finished {
    run_with(sandbox, &only_our_config(), args)
}

/// A run of this suite: every tool_use of it answered once.
fn run_with(sandbox: &Sandbox, isolation: &Isolation, args: &[&str]) -> Finished {
    let ran = sandbox.run(isolation, args);
    ran.assert_every_tool_use_answered_once();
    ran
}

/// The pids of the servers the run started.
fn server_pids(ran: &Finished) -> Vec<u32> {
    ran.mcp_servers()
        .iter()
        .filter_map(|server| server["pid"].as_u64())
        .map(|pid| u32::try_from(pid).unwrap())
        .collect()
}

/// Processes still running (not zombies) whose pid or process group is one of `pids`, or
/// whose pid is one of `also`.
fn survivors(pids: &[u32], also: &[u32]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (state, group) = (fields[0], fields[2].parse::<u32>().unwrap_or(0));
        if state != "Z" && (pids.contains(&pid) || pids.contains(&group) || also.contains(&pid)) {
            found.push(format!("{pid} (group {group}): {stat}"));
        }
    }
    found
}

/// `tollgate run t.yaml` in the background, to be signalled.
fn spawn_run(sandbox: &Sandbox) -> std::process::Child {
    only_our_config()
        .command(sandbox.path())
        .args(["run", "t.yaml", "--out", "out"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// What `find` finds, polled (bounded) while a background run gets there.
#[track_caller]
fn poll<T>(what: &str, find: impl FnMut() -> Option<T>) -> T {
    match poll_until(Duration::from_secs(30), find) {
        Some(found) => found,
        None => panic!("{what} never happened"),
    }
}

/// Killed processes may take a moment to leave /proc: bounded polling, no assertion on time.
#[track_caller]
fn assert_none_survive(pids: &[u32], also: &[u32]) {
    assert!(!pids.is_empty(), "no server pid to check");
    let gone = || survivors(pids, also).is_empty().then_some(());
    if poll_until(Duration::from_secs(10), gone).is_none() {
        panic!("still running: {:#?}", survivors(pids, also));
    }
}

#[test]
fn deferred_tools_are_found_by_tool_search_called_and_the_server_ends_with_the_run() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__t__echo, 'mcp__t__fail']\n",
        &server("t", ""),
        &[
            &format!(
                "[{}]",
                call("ToolSearch", "{query: 'select:mcp__t__echo,mcp__t__fail'}")
            ),
            &format!(
                "[{}, {}]",
                call("mcp__t__echo", "{text: hi}"),
                call("mcp__t__fail", "{}")
            ),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    let status = &ran.mcp_servers()[0];
    assert_eq!(status["name"], "t");
    assert_eq!(status["status"], "started");
    assert_eq!(status["origin"], "task");
    assert_eq!(status["tools"], 9);
    // Deferred: only ToolSearch on the first request, the loaded two appended after it.
    let first = ran.request_tools(0);
    assert!(first.contains(&"ToolSearch".to_string()), "{first:?}");
    assert!(
        !first.iter().any(|name| name.starts_with("mcp__")),
        "{first:?}"
    );
    let second = ran.request_tools(1);
    assert_eq!(second[second.len() - 2..], ["mcp__t__echo", "mcp__t__fail"]);
    let echo = ran.result("mcp__t__echo", 0);
    assert_eq!(echo["content"], "echo: hi");
    assert_eq!(echo["is_error"], false);
    let fail = ran.result("mcp__t__fail", 0);
    assert_eq!(fail["is_error"], true);
    assert!(
        fail["content"]
            .as_str()
            .unwrap()
            .contains("it failed on purpose")
    );
    assert_none_survive(&server_pids(&ran), &[]);
}

/// S4 for MCP names: `mcp__srv__tool`, `mcp__srv__*` and `mcp__srv` rules; an unruled MCP tool
/// is an ask, and every headless mode turns that into a deny; MCP tools are never read-only
/// unless a trusted policy entry believes the server's hint.
#[test]
fn mcp_tools_pass_the_gate_by_their_rules_in_every_mode() {
    // (mode, allow, ask, deny, tool, expected status)
    let table: &[(&str, &str, &str, &str, &str, &str)] = &[
        ("dontAsk", "mcp__t__echo", "", "", "mcp__t__echo", "success"),
        ("dontAsk", "mcp__t__echo", "", "", "mcp__t__peek", "denied"),
        ("dontAsk", "mcp__t__*", "", "", "mcp__t__peek", "success"),
        (
            "dontAsk",
            "mcp__t",
            "",
            "mcp__t__echo",
            "mcp__t__echo",
            "denied",
        ),
        (
            "dontAsk",
            "mcp__t",
            "mcp__t__echo",
            "",
            "mcp__t__echo",
            "denied",
        ),
        ("dontAsk", "mcp__other", "", "", "mcp__t__echo", "denied"),
        ("default", "", "", "", "mcp__t__echo", "denied"),
        ("acceptEdits", "", "", "", "mcp__t__echo", "denied"),
        ("auto", "", "", "", "mcp__t__echo", "denied"),
        ("bypassPermissions", "", "", "", "mcp__t__echo", "success"),
        (
            "bypassPermissions",
            "",
            "mcp__t__echo",
            "",
            "mcp__t__echo",
            "denied",
        ),
        (
            "bypassPermissions",
            "",
            "",
            "mcp__t",
            "mcp__t__echo",
            "denied",
        ),
        // Plan mode: a rule allows, but the server's read-only hint is not believed from a
        // task file, so the call may write and is denied.
        ("plan", "mcp__t", "", "", "mcp__t__peek", "denied"),
    ];
    for (mode, allow, ask, deny, tool, expected) in table {
        let sandbox = Sandbox::empty();
        let rules = format!("permissions:\n  allow: [{allow}]\n  ask: [{ask}]\n  deny: [{deny}]\n");
        task(
            &sandbox,
            &format!("mode: {mode}\n{rules}"),
            &server("t", "    defer: false\n"),
            &[&format!("[{}]", call(tool, "{text: x}"))],
        );
        let ran = run(&sandbox, &["--fail-on", "check"]);
        let case = format!("{mode} allow [{allow}] ask [{ask}] deny [{deny}] {tool}");
        assert_eq!(ran.code, 0, "{case}: {}", ran.stderr);
        assert_eq!(ran.result(tool, 0)["status"], *expected, "{case}");
        if *deny == "mcp__t" || deny == tool {
            // A whole-tool deny takes the tool out of the pool: not even offered.
            assert!(!ran.request_tools(0).contains(&tool.to_string()), "{case}");
        }
        assert_none_survive(&server_pids(&ran), &[]);
    }
}

/// A server entry in the managed policy that trusts the server's hints: `peek` (readOnlyHint)
/// then passes plan mode when a rule allows it; `echo` (no hint) does not.
#[test]
fn a_trusted_read_only_hint_passes_plan_mode() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "p.yaml",
        &format!(
            "permissions:\n  allow: [mcp__t]\nmcp_servers:\n{}",
            server("t", "    defer: false\n    trust_read_only_hint: true\n")
        ),
    );
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    sandbox.write(
        "t.yaml",
        &format!(
            "version: 1\nname: mcp\nprompt: go\nworkdir: ws\nmode: plan\nmodel:\n  provider: scripted\n  script:\n    - [{}, {}]\n    - - text: done\n",
            call("mcp__t__peek", "{}"),
            call("mcp__t__echo", "{}")
        ),
    );
    let ran = run(&sandbox, &["--policy", "p.yaml", "--fail-on", "check"]);
    ran.assert_code(0);
    assert_eq!(ran.mcp_servers()[0]["origin"], "managed");
    assert_eq!(ran.result("mcp__t__peek", 0)["status"], "success");
    assert_eq!(ran.result("mcp__t__echo", 0)["status"], "denied");
    assert_none_survive(&server_pids(&ran), &[]);
}

/// A server that exits mid-call, one that does not answer in time and one that starts a
/// grandchild and hangs: each call gets an is_error result, the run goes on and ends, and
/// nothing of any server is left running.
#[test]
fn crash_timeout_and_hang_give_error_results_and_leave_nothing_behind() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__crashy, mcp__stuck]\n",
        &format!(
            "{}{}",
            server("crashy", "    defer: false\n"),
            server("stuck", "    defer: false\n    call_timeout: 1\n")
        ),
        &[
            &format!("[{}]", call("mcp__crashy__crash", "{}")),
            &format!(
                "[{}, {}]",
                call("mcp__crashy__echo", "{text: after}"),
                call("mcp__stuck__hang", "{}")
            ),
            &format!("[{}]", call("mcp__stuck__slow", "{seconds: 30}")),
            &format!("[{}]", call("mcp__stuck__echo", "{text: still here}")),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    let crash = ran.result("mcp__crashy__crash", 0);
    assert_eq!(crash["is_error"], true);
    let text = crash["content"].as_str().unwrap();
    assert!(
        text.contains("exited with code 3 mid-call") && text.contains("crashing on purpose"),
        "{text}"
    );
    let after = ran.result("mcp__crashy__echo", 0);
    assert_eq!(after["is_error"], true);
    assert!(
        after["content"]
            .as_str()
            .unwrap()
            .contains("before the call"),
        "{after}"
    );
    for tool in ["mcp__stuck__hang", "mcp__stuck__slow"] {
        let result = ran.result(tool, 0);
        assert_eq!(result["is_error"], true, "{tool}");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("call_timeout of 1s"),
            "{result}"
        );
    }
    // The server still answers after a call of it timed out.
    assert_eq!(
        ran.result("mcp__stuck__echo", 0)["content"],
        "echo: still here"
    );
    let grandchild: u32 = std::fs::read_to_string(sandbox.path().join("ws/grandchild.pid"))
        .unwrap()
        .parse()
        .unwrap();
    assert_none_survive(&server_pids(&ran), &[grandchild]);
}

/// A server that prints a line without end past the client's cap: the call is an error
/// result instead of the runner's memory growing, the run goes on, and the server ends with it.
#[test]
fn a_line_without_end_from_a_server_is_an_error_result_not_unbounded_memory() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__flooder]\n",
        &server("flooder", "    defer: false\n"),
        &[
            &format!("[{}]", call("mcp__flooder__flood", "{}")),
            &format!("[{}]", call("mcp__flooder__echo", "{text: after}")),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    let flood = ran.result("mcp__flooder__flood", 0);
    assert_eq!(flood["is_error"], true, "{flood}");
    let said = |result: &Value| result["content"].as_str().unwrap().to_string();
    assert!(
        said(flood).contains("sent a line longer than 16777216 bytes"),
        "{flood}"
    );
    // The session is closed: later calls say why instead of waiting for a timeout.
    let after = ran.result("mcp__flooder__echo", 0);
    assert_eq!(after["is_error"], true);
    assert!(said(after).contains("sent a line longer than"), "{after}");
    assert_none_survive(&server_pids(&ran), &[]);
}

/// A listing without end (every page names a next one, 50 tools of 10 000 characters each):
/// the server starts with its first 512 tools, long descriptions cut, instead of being listed
/// until its start-up timeout.
#[test]
fn an_endless_tool_listing_is_cut_at_512_tools() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__many]\n",
        &server(
            "many",
            "    args: [--endless-pages]\n    startup_timeout: 60\n",
        ),
        &[&format!(
            "[{}]",
            call("ToolSearch", "{query: 'select:mcp__many__t10_11'}")
        )],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    let status = &ran.mcp_servers()[0];
    assert_eq!(status["status"], "started", "{status}");
    assert_eq!(status["tools"], 512, "{status}");
    let found = ran.result("ToolSearch", 0)["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(found.contains("mcp__many__t10_11"), "{found}");
    assert!(found.contains("[description cut by tollgate]"), "{found}");
    assert!(found.len() < 4000, "{} characters", found.len());
    assert_none_survive(&server_pids(&ran), &[]);
}

/// A server that exits at start and one that never answers `initialize`: both are listed
/// with their errors in `run_started` and stream-json's `init`; the run goes on without them
/// unless `fail_on` has `mcp_start` (the default), which stops it before any model call.
#[test]
fn servers_that_do_not_start_are_reported_and_fail_on_mcp_start_stops_the_run() {
    let sandbox = Sandbox::empty();
    let servers = format!(
        "{}{}{}",
        server("gone", "    args: [--exit-at-start]\n"),
        server(
            "mute",
            "    args: [--silent-at-start]\n    startup_timeout: 0.5\n"
        ),
        server("fine", "")
    );
    task(&sandbox, "mode: dontAsk\n", &servers, &[]);
    let ran = run(&sandbox, &["--output-format", "stream-json"]);
    assert_eq!(ran.code, 1);
    let finished = ran.events().last().unwrap();
    assert_eq!(finished["outcome"], "mcp_start_failed");
    assert!(
        finished["error"].as_str().unwrap().contains("gone"),
        "{finished}"
    );
    assert!(ran.of_type("model_request").is_empty());
    let by_name = |name: &str| -> Value {
        ran.mcp_servers()
            .iter()
            .find(|server| server["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by_name("fine")["status"], "started");
    let gone = by_name("gone");
    assert_eq!(gone["status"], "failed");
    let why = gone["error"].as_str().unwrap();
    assert!(
        why.contains("exited with code 9") && why.contains("refusing to start"),
        "{why}"
    );
    let mute = by_name("mute");
    assert_eq!(mute["status"], "failed");
    assert!(
        mute["error"]
            .as_str()
            .unwrap()
            .contains("startup_timeout of 0.5s"),
        "{mute}"
    );
    // stream-json's init carries the same list.
    let stdout = &ran.stdout;
    let init: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(init["type"], "init");
    assert_eq!(init["mcp_servers"], ran.started()["mcp_servers"]);
    assert_none_survive(&server_pids(&ran), &[]);

    // Without `mcp_start` in fail_on the run goes on with the server that started.
    task(
        &sandbox,
        "mode: dontAsk\nfail_on: [denial]\npermissions:\n  allow: [mcp__fine]\n",
        &servers,
        &[
            &format!(
                "[{}]",
                call("ToolSearch", "{query: 'select:mcp__fine__echo'}")
            ),
            &format!("[{}]", call("mcp__fine__echo", "{text: ok}")),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert_eq!(ran.result("mcp__fine__echo", 0)["content"], "echo: ok");
    assert_none_survive(&server_pids(&ran), &[]);
}

/// SIGTERM while a call hangs in a server that started a grandchild: the run ends 143 and
/// neither the server nor its grandchild is left.
#[test]
fn sigterm_mid_call_ends_the_run_and_every_server_process() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__t]\n",
        &server("t", "    defer: false\n"),
        &[&format!("[{}]", call("mcp__t__hang", "{}"))],
    );
    let mut child = spawn_run(&sandbox);
    let marker = sandbox.path().join("ws/grandchild.pid");
    let grandchild: u32 = poll("the hang call", || {
        std::fs::read_to_string(&marker)
            .ok()
            .and_then(|text| text.parse().ok())
    });
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_every_tool_use_answered_once(&all);
    assert_eq!(all.last().unwrap()["outcome"], "terminated");
    let started = events(&all, "run_started")[0];
    let pid = u32::try_from(started["mcp_servers"][0]["pid"].as_u64().unwrap()).unwrap();
    assert_none_survive(&[pid], &[grandchild]);
}

/// With the policy's sandbox on, a server runs under the same Landlock rules as a Bash
/// command: it writes inside the workspace, not beside it, and its environment is the
/// sandbox's scrubbed one.
#[test]
fn a_server_runs_inside_the_sandbox_when_the_policy_turns_it_on() {
    if !crate::support::skip::need_landlock(tollgate::sandbox::kernel_abi(), 4, "the sandbox") {
        return;
    }
    let sandbox = Sandbox::empty();
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow: [mcp__t]\nsandbox:\n  enabled: true\n  network:\n    mode: none\n",
    );
    let outside = sandbox.path().join("outside.txt");
    let inside = sandbox.path().join("ws/inside.txt");
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    std::fs::write(&inside, "").unwrap();
    approve_task_servers(&sandbox);
    sandbox.write(
        "t.yaml",
        &format!(
            "version: 1\nname: mcp\nprompt: go\nworkdir: ws\nmode: dontAsk\nmcp_servers:\n{}model:\n  provider: scripted\n  script:\n    - [{}, {}]\n    - - text: done\n",
            server("t", "    defer: false\n"),
            call("mcp__t__write_file", &format!("{{path: {}}}", inside.display())),
            call("mcp__t__write_file", &format!("{{path: {}}}", outside.display())),
        ),
    );
    let ran = run(&sandbox, &["--policy", "p.yaml"]);
    ran.assert_code(0);
    assert_eq!(
        ran.mcp_servers()[0]["status"],
        "started",
        "{}",
        ran.started()
    );
    let results = ran.of_type("tool_result");
    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert_eq!(results[1]["is_error"], true, "{}", results[1]);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("ermission denied"),
        "{}",
        results[1]
    );
    assert!(!outside.exists());
    assert_none_survive(&server_pids(&ran), &[]);
}

/// SIGTERM while a server is still starting (it never answers `initialize`, and its
/// start-up timeout is long): the run does not wait for the timeout, it ends 143 and the
/// server is gone.
#[test]
fn sigterm_while_a_server_starts_does_not_wait_for_its_timeout() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\n",
        &server(
            "mute",
            "    args: [--silent-at-start]\n    startup_timeout: 3600\n",
        ),
        &[],
    );
    let mut child = spawn_run(&sandbox);
    // The server runs the test server's binary under tollgate: its child, or the child of
    // the per-call keeper tollgate starts (which reaps what the server orphans).
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let server_pid = poll("the server's start", || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .find_map(|entry| {
                let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
                let parent = parent_of(pid)?;
                let under_tollgate =
                    parent == child.id() || parent_of(parent).is_some_and(|up| up == child.id());
                let exe = std::fs::read_link(entry.path().join("exe")).ok()?;
                (under_tollgate && exe == Path::new(SERVER)).then_some(pid)
            })
    });
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let all = transcript(&sandbox.path().join("out/transcript.jsonl"));
    assert_eq!(all.last().unwrap()["outcome"], "terminated");
    assert!(events(&all, "model_request").is_empty());
    assert_none_survive(&[server_pid], &[]);
}

/// A log message and `tools/list_changed` reach the transcript; the next request offers the
/// tool the server added.
#[test]
fn notifications_are_recorded_and_a_changed_tool_list_reaches_the_next_request() {
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__t]\n",
        &server("t", "    defer: false\n"),
        &[
            &format!("[{}]", call("mcp__t__notify", "{}")),
            &format!("[{}]", call("mcp__t__added", "{text: new}")),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert!(!ran.request_tools(0).contains(&"mcp__t__added".to_string()));
    assert!(ran.request_tools(1).contains(&"mcp__t__added".to_string()));
    let notices = ran.of_type("mcp_notification");
    assert!(
        notices
            .iter()
            .any(|n| n["kind"] == "log" && n["data"] == "hello from the server"),
        "{notices:#?}"
    );
    assert!(notices.iter().any(|n| n["kind"] == "tools_changed"));
    let listed = ran.of_type("mcp_tools");
    assert_eq!(listed[0]["server"], "t");
    assert_eq!(listed[0]["tools"].as_array().unwrap().len(), 10);
    assert_eq!(ran.result("mcp__t__added", 0)["content"], "echo: new");
    assert_none_survive(&server_pids(&ran), &[]);
}

/// The workdir's `.mcp.json` starts servers only when the managed policy approves it (else its
/// servers are named as held back); an unknown key
/// in tollgate's own `mcp_servers:` is a located configuration error before any model call.
#[test]
fn project_servers_need_approval_and_bad_entries_are_located() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "t.yaml",
        "version: 1\nname: mcp\nprompt: go\nworkdir: ws\nmode: dontAsk\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n",
    );
    sandbox.write(
        "ws/.mcp.json",
        &format!(r#"{{"mcpServers": {{"proj": {{"command": "{SERVER}"}}}}}}"#),
    );
    let ran = run(&sandbox, &[]);
    assert_eq!(ran.code, 0);
    // Unapproved, it is read only to name its server as held back; nothing starts.
    assert_eq!(ran.mcp_servers().len(), 1, "{}", ran.started());
    assert_eq!(ran.mcp_servers()[0]["status"], "skipped");
    assert!(server_pids(&ran).is_empty());
    let held = &ran.started()["policy"]["held_back"][0];
    assert_eq!(held["name"], "proj");
    assert_eq!(held["origin"], "mcp_json");
    assert_eq!(held["approve"][0], "enabledMcpjsonServers: [proj]");
    sandbox.write("p.yaml", "allow_project_mcp: true\n");
    let ran = run(&sandbox, &["--policy", "p.yaml"]);
    ran.assert_code(0);
    assert_eq!(ran.mcp_servers()[0]["origin"], "mcp_json");
    assert_eq!(ran.mcp_servers()[0]["status"], "started");
    assert_none_survive(&server_pids(&ran), &[]);
    // A managed policy that keeps MCP to itself: the project's server is not even read.
    sandbox.write(
        "p.yaml",
        "allow_project_mcp: true\nmanaged_mcp_only: true\n",
    );
    let ran = run(&sandbox, &["--policy", "p.yaml"]);
    assert_eq!(
        ran.mcp_servers()[0]["status"],
        "skipped",
        "{}",
        ran.started()
    );
    assert!(server_pids(&ran).is_empty());
    assert_eq!(
        ran.started()["policy"]["held_back"][0]["approve"][0],
        "managed_mcp_only: false"
    );

    task(
        &sandbox,
        "mode: dontAsk\n",
        &server("t", "    timeout: 3\n"),
        &[],
    );
    let output = sandbox.tollgate(&["run", "t.yaml", "--out", "bad"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("t.yaml:9:5:"), "{stderr}");
    assert!(stderr.contains("unknown field `timeout`"), "{stderr}");
}

/// `@modelcontextprotocol/server-everything` from the npm registry (`.ci/run` installs it in
/// `tests/npm/`): the model finds its echo tool by keywords through ToolSearch and calls it.
#[test]
fn the_npm_everything_server_is_found_through_tool_search_and_called() {
    let bin = crate::support::repo_root().join("tests/npm/node_modules/.bin/mcp-server-everything");
    if !bin.exists() {
        return crate::support::skip::skip(&format!(
            "{} is not installed (`npm ci --prefix tests/npm` installs it, as .ci/run does)",
            bin.display()
        ));
    }
    let sandbox = Sandbox::empty();
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__everything__echo]\n",
        &format!(
            "  everything:\n    command: {}\n    args: [stdio]\n",
            bin.display()
        ),
        &[
            &format!(
                "[{}]",
                call("ToolSearch", "{query: 'echo back', max_results: 1}")
            ),
            &format!(
                "[{}]",
                call("mcp__everything__echo", "{message: hello from tollgate}")
            ),
        ],
    );
    let ran = run(&sandbox, &[]);
    ran.assert_code(0);
    assert_eq!(
        ran.mcp_servers()[0]["status"],
        "started",
        "{}",
        ran.started()
    );
    let found = ran.result("ToolSearch", 0)["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        found.contains("\"name\":\"mcp__everything__echo\""),
        "{found}"
    );
    assert!(
        ran.request_tools(1)
            .contains(&"mcp__everything__echo".to_string())
    );
    let echo = ran.result("mcp__everything__echo", 0);
    assert_eq!(echo["is_error"], false, "{echo}");
    assert!(
        echo["content"]
            .as_str()
            .unwrap()
            .contains("hello from tollgate"),
        "{echo}"
    );
    assert_none_survive(&server_pids(&ran), &[]);
}

/// `tollgate check` and a policy's own `tests:` decide MCP names as a run does, without the
/// server: rules by tool, by server, an unruled tool an ask (a deny headless), plan mode a deny.
#[test]
fn check_and_policy_tests_decide_mcp_names_by_their_rules() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "p.yaml",
        "permissions:\n  allow: [mcp__gh__list, 'mcp__docs__*']\n  deny: [mcp__gh__delete]\ntests:\n  - {tool: mcp__gh__list, expect: allow}\n  - {tool: mcp__docs__search, input: {q: x}, expect: allow}\n  - {tool: mcp__gh__delete, expect: deny}\n  - {tool: mcp__gh__merge, expect: ask}\n",
    );
    // (tool, mode, decision, step)
    let table = [
        ("mcp__gh__list", "dontAsk", "allow", "2b"),
        ("mcp__docs__search", "dontAsk", "allow", "2b"),
        ("mcp__gh__delete", "bypassPermissions", "deny", "1a"),
        ("mcp__gh__merge", "dontAsk", "deny", "3"),
        ("mcp__gh__list", "plan", "deny", "2b"),
    ];
    for (tool, mode, decision, step) in table {
        let output = sandbox.tollgate(&[
            "check", "--policy", "p.yaml", "--mode", mode, "--tool", tool, "--input", "{}",
        ]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line: Value = serde_json::from_str(stdout.lines().next().unwrap_or_default())
            .unwrap_or_else(|err| panic!("{tool}: {err}: {stdout}"));
        assert_eq!(line["decision"], decision, "{tool} {mode}: {line}");
        assert_eq!(line["step"], step, "{tool} {mode}: {line}");
    }
    let output = sandbox.tollgate(&["policy", "test", "p.yaml"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("ok  ").count(), 4, "{stdout}");
}

/// `tollgate run t.yaml` as `run`, with `TOLLGATE_TEST_MCP_HEADER` set in the runner's
/// environment.
fn run_with_token(sandbox: &Sandbox) -> Finished {
    let isolation = only_our_config().env("TOLLGATE_TEST_MCP_HEADER", "cred-value-9f3k2");
    run_with(sandbox, &isolation, &[])
}

/// A hosted server over streamable HTTP (a real HTTP server on 127.0.0.1): reached once a
/// domain rule names its address, found through ToolSearch, called, its header filled from
/// the runner's environment by name in the operator's entry and left literal in the
/// repository's; without the rule nothing connects.
#[test]
fn an_http_server_is_gated_by_domain_rules_found_through_tool_search_and_called() {
    let server = crate::support::mcp_http::HttpMcpServer::start(Some("Bearer cred-value-9f3k2"));
    let sandbox = Sandbox::empty();
    let entry = |name: &str| {
        format!(
            "  {name}:\n    url: {}\n    headers: {{Authorization: 'Bearer ${{env:TOLLGATE_TEST_MCP_HEADER}}'}}\n",
            server.url()
        )
    };
    let turns = [
        format!(
            "[{}]",
            call(
                "ToolSearch",
                "{query: 'select:mcp__hosted__echo,mcp__hosted__secret,mcp__hosted__whoami'}"
            )
        ),
        format!(
            "[{}, {}, {}]",
            call("mcp__hosted__echo", "{text: over-http}"),
            call("mcp__hosted__secret", "{}"),
            call("mcp__hosted__whoami", "{}")
        ),
    ];
    let turns: Vec<&str> = turns.iter().map(String::as_str).collect();
    // The operator's (the user's policy) entry: its header takes the runner's variable.
    let head = "mode: dontAsk\npermissions:\n  allow: [mcp__hosted]\n";
    task(&sandbox, head, "", &turns);
    sandbox.write(
        "t.yaml",
        &std::fs::read_to_string(sandbox.path().join("t.yaml"))
            .unwrap()
            .replace("mcp_servers:\n", ""),
    );
    sandbox.write(
        "config/tollgate/policy.yaml",
        &format!(
            "permissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\nmcp_servers:\n{}",
            entry("hosted")
        ),
    );
    let ran = run_with_token(&sandbox);
    ran.assert_code(0);
    let status = &ran.mcp_servers()[0];
    assert_eq!(status["status"], "started", "{status}");
    assert_eq!(status["origin"], "user");
    assert_eq!(status["tools"], 3);
    assert!(status.get("pid").is_none(), "{status}");
    let first = ran.request_tools(0);
    assert!(
        !first.iter().any(|name| name.starts_with("mcp__")),
        "{first:?}"
    );
    assert_eq!(
        ran.result("mcp__hosted__echo", 0)["content"],
        "http echo: over-http"
    );
    assert_eq!(
        ran.result("mcp__hosted__secret", 0)["content"],
        "authorized"
    );
    let seen = server.seen();
    assert!(
        seen.iter()
            .any(|s| s.rpc_method.as_deref() == Some("tools/call")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer cred-value-9f3k2")),
        "{seen:#?}"
    );
    // The session ends with the run.
    assert!(seen.iter().any(|s| s.http_method == "DELETE"), "{seen:#?}");
    // The variable a header names is a secret: the server's echo of it is redacted.
    let whoami = ran.result("mcp__hosted__whoami", 0)["content"].to_string();
    assert!(whoami.starts_with("\"you sent: Bearer "), "{whoami}");
    let text = std::fs::read_to_string(sandbox.path().join("out/transcript.jsonl")).unwrap();
    assert!(!text.contains("cred-value-9f3k2"), "{whoami}");

    // Without a rule naming the address, nothing connects: the server is reported, the run
    // goes on without it.
    let before = server.seen().len();
    sandbox.write(
        "config/tollgate/policy.yaml",
        &format!(
            "permissions:\n  allow: ['WebFetch(domain:*)']\nmcp_servers:\n{}",
            entry("hosted")
        ),
    );
    let ran = run_with_token(&sandbox);
    let status = &ran.mcp_servers()[0];
    assert_eq!(status["status"], "failed", "{status}");
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("no rule admits 127.0.0.1"),
        "{status}"
    );
    assert_eq!(server.seen().len(), before, "a request reached the server");

    // The repository's entry (the task's, approved): its header stays literal text, so the
    // runner's secret never goes to a URL the repository chose.
    task(
        &sandbox,
        "mode: dontAsk\npermissions:\n  allow: [mcp__hosted]\n",
        &entry("hosted"),
        &turns,
    );
    sandbox.write(
        "config/tollgate/policy.yaml",
        "allow_project_mcp: true\npermissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\n",
    );
    let ran = run_with_token(&sandbox);
    ran.assert_code(0);
    assert_eq!(ran.mcp_servers()[0]["origin"], "task");
    assert_eq!(
        ran.result("mcp__hosted__secret", 0)["content"],
        "not authorized"
    );
    assert!(
        server
            .seen()
            .iter()
            .skip(before)
            .all(|s| s.authorization.as_deref() == Some("Bearer ${env:TOLLGATE_TEST_MCP_HEADER}")),
        "{:#?}",
        server.seen()
    );
}
