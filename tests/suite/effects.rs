//! The effect ledger end to end, against the fake model server: a call that changes more
//! than its verdict allowed is flagged in the transcript, the stdout summary and SARIF, and
//! fails the run under the default `fail_on` (exit 3, outcome `effects_exceeded`); a clean
//! run's calls carry empty ledgers; Write and Edit change exactly their `file_path`; and a
//! committed link that leads a write somewhere else never passes unflagged.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::{Finished, Run, assert_every_tool_use_answered_once, repo_root};

/// A model that makes each turn's calls, then says it is done.
async fn model(turns: Vec<Vec<Value>>) -> FakeModel {
    let mut replies: Vec<Reply> = turns
        .into_iter()
        .map(|calls| {
            let blocks = calls
                .into_iter()
                .map(|call| tool(call["name"].as_str().unwrap(), call["input"].clone()))
                .collect();
            Reply::Turn(turn(blocks, Tokens::default()))
        })
        .collect();
    replies.push(Reply::Turn(turn(vec![text("done")], Tokens::default())));
    FakeModel::start("k", replies).await
}

fn bash(command: &str) -> Value {
    json!({"name": "Bash", "input": {"command": command}})
}

fn task(model: &FakeModel, mode: &str, extra: &str) -> String {
    format!(
        "version: 1\nname: effects\nprompt: go\nworkdir: ws\nmode: {mode}\n{extra}{}",
        model.model_block(Api::Anthropic, "")
    )
}

/// A script a policy allows by name that keeps a cache beside itself: the analysis names no
/// file it writes, so the cache is more than its verdict allowed.
const STATS: &str = "#!/bin/sh\nwc -l README.md\nprintf '%s\\n' 2 > .stats-cache\n";

const POLICY: &str = "permissions:\n  allow:\n    - Read\n    - Glob\n    - \"Edit(src/**)\"\n    - \"Bash(./tools/stats.sh)\"\n    - \"Bash(make test)\"\n";

fn workspace(run: Run) -> Run {
    let run = run
        .file("ws/README.md", "# r\nhello\n")
        .file("ws/src/lib.rs", "pub fn f() {}\n")
        .file("ws/tools/stats.sh", STATS)
        // A build that installs a git hook, as some projects' test targets do.
        .file(
            "ws/Makefile",
            "test:\n\t@mkdir -p .git/hooks && printf '#!/bin/sh\\n' > .git/hooks/pre-commit\n",
        )
        .file("ws/.git/HEAD", "ref: refs/heads/main\n")
        .file("ws/.git/config", "[core]\n");
    let script = run.dir().join("ws/tools/stats.sh");
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    run
}

fn effects_of<'a>(run: &'a Finished, tool: &str, nth: usize) -> &'a Value {
    let result = run.result(tool, nth);
    assert!(
        result.get("effects").is_some(),
        "no effects on {result:#}\n{}",
        run.stderr
    );
    &result["effects"]
}

fn changes(effects: &Value) -> Vec<(String, String, bool)> {
    effects["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|change| {
            (
                change["path"].as_str().unwrap().to_string(),
                change["change"].as_str().unwrap().to_string(),
                change.get("exceeds").is_some(),
            )
        })
        .collect()
}

fn sarif_results(run: &Finished) -> Vec<Value> {
    let sarif = run.json("tollgate.sarif");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/fixtures/sarif-2.1.0.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    assert!(validator.is_valid(&sarif), "SARIF not valid: {sarif:#}");
    sarif["runs"][0]["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_call_that_does_more_than_its_verdict_is_flagged_everywhere_and_fails_the_run() {
    let server = model(vec![
        vec![bash("./tools/stats.sh")],
        vec![bash("make test")],
    ])
    .await;
    let run = workspace(Run::new())
        .policy(POLICY)
        .model(&server)
        .task(&task(&server, "dontAsk", ""))
        .args(["--report", "sarif"])
        .finish_async()
        .await;
    run.assert_code(3);
    assert_every_tool_use_answered_once(run.events());

    // The transcript: each call's changes, and why each exceeds its verdict.
    let script = effects_of(&run, "Bash", 0);
    assert_eq!(script["attribution"], "call");
    assert_eq!(script["allowed"]["reach"], "named");
    assert_eq!(
        changes(script),
        [(".stats-cache".to_string(), "created".to_string(), true)]
    );
    assert_eq!(
        script["changes"][0]["exceeds"],
        "not among the paths its decision named"
    );
    // A runner may build in the workspace, never plant a hook.
    let build = effects_of(&run, "Bash", 1);
    assert_eq!(build["allowed"]["reach"], "workspace");
    let build_changes = changes(build);
    assert!(
        build_changes.contains(&(".git/hooks/pre-commit".into(), "created".into(), true)),
        "{build_changes:?}"
    );
    let why = build["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|change| change["path"] == ".git/hooks/pre-commit")
        .unwrap()["exceeds"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.starts_with("a guarded path"), "{why}");

    let finished = run.finished();
    assert_eq!(finished["outcome"], "effects_exceeded");
    assert_eq!(finished["effects"]["measured"], 2);
    assert_eq!(finished["effects"]["exceeded"].as_array().unwrap().len(), 2);
    assert_eq!(run.started()["effects"]["scope"], "workspace");

    // The summary on stdout names each call and what it should not have changed.
    assert!(
        run.stdout.contains("effects_exceeded (exit 3)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "EXCEEDED its verdict: Bash `./tools/stats.sh`: created .stats-cache — not among the paths its decision named"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("2 calls measured · 2 changed files · 2 exceeded their verdict"),
        "{}",
        run.stdout
    );

    // SARIF: a result per violating call, at the path it should not have changed.
    let results = sarif_results(&run);
    let effects: Vec<&Value> = results
        .iter()
        .filter(|result| result["ruleId"] == "effect-ledger")
        .collect();
    assert_eq!(effects.len(), 2, "{results:#?}");
    assert_eq!(effects[0]["level"], "error");
    assert_eq!(
        effects[0]["locations"][0]["physicalLocation"]["artifactLocation"],
        json!({"uri": ".stats-cache", "uriBaseId": "WORKDIR"})
    );
    assert_eq!(
        effects[0]["properties"]["tool_use_id"],
        run.result("Bash", 0)["id"]
    );
    assert_eq!(
        effects[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        ".git/hooks"
    );
}

/// Left out of `fail_on`, the same excess is reported as a warning and the run passes.
#[tokio::test]
async fn without_effect_in_fail_on_the_excess_is_a_warning() {
    let server = model(vec![vec![bash("./tools/stats.sh")]]).await;
    let run = workspace(Run::new())
        .policy(POLICY)
        .model(&server)
        .task(&task(&server, "dontAsk", ""))
        .args(["--report", "sarif", "--fail-on", "denial,check,limit"])
        .finish_async()
        .await;
    run.assert_code(0);
    assert_eq!(run.finished()["outcome"], "success");
    let results = sarif_results(&run);
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["ruleId"], "effect-ledger");
    assert_eq!(results[0]["level"], "warning");
}

#[tokio::test]
async fn a_clean_run_has_empty_ledgers_and_writes_change_exactly_their_file_path() {
    let server = model(vec![
        // Read-only calls run together: measured as one batch.
        vec![
            json!({"name": "Read", "input": {"file_path": "README.md"}}),
            json!({"name": "Glob", "input": {"pattern": "src/*.rs"}}),
            bash("ls src && cat README.md"),
        ],
        vec![json!({"name": "Write", "input": {"file_path": "src/deep/new.rs", "content": "x\n"}})],
        vec![json!({"name": "Read", "input": {"file_path": "src/lib.rs"}})],
        vec![json!({"name": "Edit", "input": {"file_path": "src/lib.rs", "old_string": "f()", "new_string": "g()"}})],
        vec![bash("echo hi > src/out.txt")],
    ])
    .await;
    let run = workspace(Run::new())
        .policy(POLICY)
        .model(&server)
        .task(&task(&server, "dontAsk", ""))
        .finish_async()
        .await;
    run.assert_code(0);
    assert_every_tool_use_answered_once(run.events());
    let ids: Vec<Value> = run.of_type("tool_result")[..3]
        .iter()
        .map(|result| result["id"].clone())
        .collect();
    for (tool, nth) in [("Read", 0), ("Glob", 0), ("Bash", 0)] {
        let effects = effects_of(&run, tool, nth);
        assert_eq!(effects["changes"], json!([]), "{tool}");
        assert_eq!(effects["allowed"]["reach"], "nothing", "{tool}");
        assert_eq!(effects["attribution"], "batch", "{tool}");
        assert_eq!(effects["batch"], json!(ids), "{tool}");
    }
    let write = effects_of(&run, "Write", 0);
    assert_eq!(write["attribution"], "call");
    assert_eq!(
        write["allowed"],
        json!({"reach": "named", "paths": ["src/deep/new.rs"]})
    );
    assert_eq!(
        changes(write),
        [
            ("src/deep".to_string(), "created".to_string(), false),
            ("src/deep/new.rs".to_string(), "created".to_string(), false),
        ]
    );
    let edit = effects_of(&run, "Edit", 0);
    assert_eq!(
        changes(edit),
        [("src/lib.rs".to_string(), "modified".to_string(), false)]
    );
    assert_eq!(effects_of(&run, "Read", 1)["changes"], json!([]));
    let redirect = effects_of(&run, "Bash", 1);
    assert_eq!(redirect["allowed"]["paths"], json!(["src/out.txt"]));
    assert_eq!(
        changes(redirect),
        [("src/out.txt".to_string(), "created".to_string(), false)]
    );
    let finished = run.finished();
    assert_eq!(finished["outcome"], "success");
    assert_eq!(finished["effects"]["measured"], 7);
    assert_eq!(finished["effects"]["changed"], 3);
    assert_eq!(finished["effects"]["exceeded"], json!([]));
    assert!(
        run.stdout.contains("0 exceeded their verdict"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn with_the_ledger_off_nothing_is_measured_and_the_summary_says_so() {
    let server = model(vec![vec![bash("./tools/stats.sh")]]).await;
    let run = workspace(Run::new())
        .policy(POLICY)
        .model(&server)
        .task(&task(&server, "dontAsk", "effects: {scope: off}\n"))
        .finish_async()
        .await;
    run.assert_code(0);
    assert!(run.result("Bash", 0).get("effects").is_none());
    assert!(run.finished().get("effects").is_none());
    assert_eq!(run.started()["effects"]["scope"], "off");
    assert!(
        run.stdout
            .contains("effects: not measured (effects.scope: off)"),
        "{}",
        run.stdout
    );
}

/// A workspace larger than the ledger may hold is not measured whole: every call counts as
/// exceeding (fail closed), and the record says why.
#[tokio::test]
async fn a_workspace_past_max_entries_fails_closed() {
    let server = model(vec![vec![bash("ls")]]).await;
    let run = workspace(Run::new())
        .policy(POLICY)
        .model(&server)
        .task(&task(&server, "dontAsk", "effects: {max_entries: 3}\n"))
        .finish_async()
        .await;
    run.assert_code(3);
    let effects = effects_of(&run, "Bash", 0);
    assert!(
        effects["incomplete"]
            .as_str()
            .unwrap()
            .contains("more than 3 entries"),
        "{effects:#}"
    );
    assert_eq!(run.finished()["outcome"], "effects_exceeded");
}

#[test]
fn a_bad_effects_block_is_a_config_error_with_its_place() {
    for (block, wanted) in [
        (
            "effects: {max_entries: 0}\n",
            "effects.max_entries must be from 1",
        ),
        ("effects: {scope: everything}\n", "everything"),
        ("effects: {scop: off}\n", "scop"),
    ] {
        let run = Run::new()
            .task(&format!(
                "version: 1\nname: t\nprompt: go\nworkdir: ws\n{block}model:\n  provider: scripted\n  script: [[{{text: hi}}]]\n"
            ))
            .finish();
        run.assert_code(2);
        assert!(
            run.stderr.contains("task.yaml:5:"),
            "{block}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(wanted), "{block}: {}", run.stderr);
    }
}

/// A committed link that makes a write land somewhere else — on git's config or hooks, on
/// `.npmrc`, outside the workspace — either is refused by the gate or is flagged by the
/// ledger: never a green run that changed it. In dontAsk and bypassPermissions, through
/// Bash redirections and the Write tool.
#[tokio::test]
async fn a_write_through_a_committed_link_never_passes_unflagged() {
    struct Case {
        mode: &'static str,
        link: &'static str,
        /// Relative to the link's folder, or absolute (`OUT` is the folder outside).
        target: &'static str,
        call: Value,
        /// Where the write lands, relative to the scratch folder.
        lands: &'static str,
    }
    let cases = [
        Case {
            mode: "dontAsk",
            link: "ws/src/gc",
            target: "../.git/commondir",
            call: bash("echo ../src/evil > src/gc"),
            lands: "ws/.git/commondir",
        },
        Case {
            mode: "dontAsk",
            link: "ws/src/hook",
            target: "../.git/hooks/pre-commit",
            call: json!({"name": "Write", "input": {"file_path": "src/hook", "content": "#!/bin/sh\n"}}),
            lands: "ws/.git/hooks/pre-commit",
        },
        Case {
            mode: "bypassPermissions",
            link: "ws/src/rc",
            target: "../.npmrc",
            call: bash("printf 'registry=x\\n' > src/rc"),
            lands: "ws/.npmrc",
        },
        Case {
            mode: "dontAsk",
            link: "ws/src/dang",
            target: "OUT/planted",
            call: bash("echo x > src/dang"),
            lands: "outside/planted",
        },
        Case {
            mode: "bypassPermissions",
            link: "ws/src/away",
            target: "OUT/written",
            call: json!({"name": "Write", "input": {"file_path": "src/away", "content": "x"}}),
            lands: "outside/written",
        },
    ];
    for case in cases {
        let server = model(vec![vec![case.call.clone()]]).await;
        let run = workspace(Run::new());
        let outside = run.dir().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(run.dir().join("ws/.git/hooks")).unwrap();
        let target = case.target.replace("OUT", &outside.display().to_string());
        std::os::unix::fs::symlink(&target, run.dir().join(case.link)).unwrap();
        let policy = format!(
            "{POLICY}    - \"Bash(echo:*)\"\n    - \"Bash(printf:*)\"\n  default_mode: {}\n",
            case.mode
        );
        let lands = run.dir().join(case.lands);
        let run = run
            .policy(&policy)
            .model(&server)
            .task(&task(&server, case.mode, ""))
            .finish_async()
            .await;
        let what = format!("{} via {} -> {}", case.call, case.link, target);
        assert!(run.wrote_transcript(), "{what}: {}", run.stderr);
        if !lands.exists() {
            // Refused (or the write went nowhere): nothing to flag.
            continue;
        }
        assert_eq!(
            run.code,
            3,
            "{what} changed {}: {}",
            lands.display(),
            run.stdout
        );
        assert_eq!(run.finished()["outcome"], "effects_exceeded", "{what}");
        let tool = case.call["name"].as_str().unwrap();
        let flagged = changes(effects_of(&run, tool, 0));
        let shown = lands
            .strip_prefix(&run.ws)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| lands.clone());
        assert!(
            flagged
                .iter()
                .any(|(path, _, exceeds)| Path::new(path) == shown && *exceeds),
            "{what}: {flagged:?}"
        );
    }
}
