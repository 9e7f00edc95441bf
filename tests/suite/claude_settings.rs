//! The Claude Code settings corpus (`tests/corpus/claude-settings/`): every file loads through
//! the real binary with only the refusals its README justifies, and decides as it says.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Sandbox, repo_root};

fn corpus() -> PathBuf {
    repo_root().join("tests/corpus/claude-settings")
}

/// The refused files, with the key each is refused at.
const REFUSED: &[(&str, &str)] = &[("sandbox-docker.settings.json", "sandbox.excludedCommands")];

/// `check` under `file` as the managed policy: exit code, the decision line, stderr.
fn check(sandbox: &Sandbox, file: &str, tool: &str, input: &str) -> (i32, Value, String) {
    let policy = corpus().join(file);
    let output = sandbox.tollgate(&[
        "check",
        "--policy",
        policy.to_str().unwrap(),
        "--tool",
        tool,
        "--input",
        input,
        "--mode",
        "dontAsk",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let line = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), line, stderr)
}

#[test]
fn every_corpus_file_loads_or_is_refused_with_its_reason() {
    let sandbox = Sandbox::empty();
    sandbox.write("README.md", "hello\n");
    let readme = std::fs::read_to_string(corpus().join("README.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    for file in &files {
        assert!(readme.contains(&format!("`{file}`")), "README lists {file}");
        let (code, line, stderr) = check(&sandbox, file, "Read", r#"{"file_path":"README.md"}"#);
        match REFUSED.iter().find(|(name, _)| name == file) {
            Some((_, key)) => {
                assert_eq!(code, 2, "{file}: {stderr}");
                assert!(stderr.contains(key), "{file}: {stderr}");
                assert!(stderr.contains(&format!("{file}:")), "{file}: {stderr}");
                assert!(readme.contains(key), "README justifies {file}");
            }
            None => {
                assert_eq!(code, 0, "{file}: {stderr}");
                assert!(line["decision"].is_string(), "{file}: {line}");
            }
        }
    }
}

/// Decisions the corpus files must give: their rules take effect as Claude Code reads them.
#[test]
fn corpus_files_decide_as_written() {
    let sandbox = Sandbox::empty();
    let bash = |command: &str| serde_json::json!({ "command": command }).to_string();
    let cases: &[(&str, &str, String, &str)] = &[
        ("wildcards.settings.json", "Bash", bash("lsof -i"), "allow"),
        (
            "wildcards.settings.json",
            "Bash",
            bash("node --version"),
            "allow",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("scripts/release.sh"),
            "allow",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("rm -rf /home"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("ls; rm -rf ./x"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("git push origin main --force-with-lease"),
            "deny",
        ),
        (
            "wildcards.settings.json",
            "Bash",
            bash("npm run test:ci"),
            "allow",
        ),
        (
            "node-app.settings.json",
            "Bash",
            bash("npm run test -- --watch"),
            "allow",
        ),
        (
            "node-app.settings.json",
            "Read",
            r#"{"file_path":".env.local"}"#.into(),
            "deny",
        ),
        (
            "managed-settings.json",
            "WebFetch",
            r#"{"url":"https://example.com","prompt":"x"}"#.into(),
            "deny",
        ),
        (
            "agents-and-skills.settings.json",
            "Agent",
            r#"{"subagent_type":"explore","description":"d","prompt":"p"}"#.into(),
            "allow",
        ),
        (
            "agents-and-skills.settings.json",
            "Agent",
            r#"{"subagent_type":"general","description":"d","prompt":"p"}"#.into(),
            "deny",
        ),
        (
            "github-actions.settings.json",
            "Bash",
            bash("gh api repos/x/y -X DELETE"),
            "deny",
        ),
        (
            "github-actions.settings.json",
            "Bash",
            bash("gh pr view 12"),
            "allow",
        ),
    ];
    for (file, tool, input, expected) in cases {
        let (code, line, stderr) = check(&sandbox, file, tool, input);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert_eq!(line["decision"], *expected, "{file} {tool} {input}: {line}");
    }
}

/// `run` warns on stderr about the allow rules that let `rm -rf ~` through when it loads the
/// file, and `--strict` makes them a configuration error before any model call.
#[test]
fn run_warns_about_destructive_allow_rules_and_strict_refuses_them() {
    let settings =
        r#"{"permissions": {"allow": ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"]}}"#;
    let task = "version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";
    let run = crate::support::Run::new()
        .policy(settings)
        .task(task)
        .finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    for rule in ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)"] {
        assert!(
            run.stderr.contains(&format!("allow rule {rule}")),
            "{rule}: {}",
            run.stderr
        );
    }
    let warnings = run.policy_warnings();
    assert!(warnings.contains("Bash(rm:*)"), "{warnings}");
    let strict = crate::support::Run::new()
        .policy(settings)
        .task(task)
        .args(["--strict"])
        .finish();
    assert_eq!(strict.code, 2, "{}", strict.stderr);
    assert!(strict.stderr.contains("--strict"), "{}", strict.stderr);
    assert!(!strict.wrote_transcript());
}

/// The managed folder (`etc/`) and home (`home/`) of the sandbox's own, so no configuration of
/// the machine's is read.
fn own_config() -> crate::support::Isolation {
    crate::support::Isolation::new().managed("etc").home("home")
}

/// Claude Code's two project settings files, as the workdir holds them.
const PROJECT_FILES: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

/// A task in `ws/` whose model runs `touch made.txt` once, then stops.
fn touch_task(sandbox: &Sandbox) {
    std::fs::create_dir_all(sandbox.path().join("ws")).unwrap();
    sandbox.write(
        "t.yaml",
        "version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: touch made.txt}}\n    - - text: done\n",
    );
}

/// `check` of `touch made.txt` in `ws/` with `args` added.
fn check_touch_output(sandbox: &Sandbox, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "check",
        "--workdir",
        "ws",
        "--tool",
        "Bash",
        "--input",
        r#"{"command":"touch made.txt"}"#,
    ];
    all.extend_from_slice(args);
    sandbox.tollgate_with(&own_config(), &all)
}

/// As `check_touch_output`: exit code, the decision line, stderr.
fn check_touch(sandbox: &Sandbox, args: &[&str]) -> (i32, Value, String) {
    let output = check_touch_output(sandbox, args);
    let line = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), line, stderr)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A deny rule in the repository's `.claude/settings.json` or `.claude/settings.local.json`
/// narrows a call the operator allows, and `run`, `check` and `replay` read it alike: the run
/// refuses the call citing the file and line, `check` says deny from the same place, and
/// `replay` of a run made without the file reports the call narrowed.
#[test]
fn a_deny_rule_in_the_repositorys_claude_settings_narrows_run_check_and_replay() {
    for name in PROJECT_FILES {
        let sandbox = Sandbox::empty();
        touch_task(&sandbox);
        sandbox.write("ws/README.md", "hello\n");
        let allow = ["--allow", "Bash(touch:*)"];
        // Without the file, the operator's allow rule runs the call.
        let before = sandbox.run(&own_config(), &allow);
        before.assert_code(0);
        assert!(before.ws.join("made.txt").exists(), "{name}");
        std::fs::remove_file(before.ws.join("made.txt")).unwrap();
        std::fs::rename(sandbox.path().join("out"), sandbox.path().join("open")).unwrap();
        let settings = sandbox.write(
            &format!("ws/{name}"),
            "{\n  \"permissions\": {\n    \"deny\": [\"Bash(touch:*)\"]\n  }\n}\n",
        );
        let settings = settings.canonicalize().unwrap();
        let cites_the_file = |source: &str| source == format!("{}:3", settings.display());

        let run = sandbox.run(&own_config(), &allow);
        // A refused call fails the run under the default `fail_on`.
        run.assert_code(3);
        assert!(!run.ws.join("made.txt").exists(), "{name}");
        let decision = run.of_type("permission_decision")[0];
        assert_eq!(decision["decision"], "deny", "{decision}");
        assert_eq!(decision["rule"]["rule"], "Bash(touch:*)", "{decision}");
        assert_eq!(
            (
                decision["rule"]["source"]["file"].as_str(),
                decision["rule"]["source"]["line"].as_u64()
            ),
            (Some(settings.to_str().unwrap()), Some(3)),
            "{decision}"
        );
        let sources = run.started()["policy"]["sources"].to_string();
        assert!(sources.contains(name), "{sources}");

        let (code, line, stderr) = check_touch(&sandbox, &allow);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(line["decision"], "deny", "{line}");
        assert!(
            cites_the_file(line["source"].as_str().unwrap_or_default()),
            "{line}"
        );

        // The run made under the deny replays unchanged; the one made before it narrows.
        let same = sandbox.tollgate_with(
            &own_config(),
            &["replay", "out/transcript.jsonl", "--allow", "Bash(touch:*)"],
        );
        assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
        assert!(same.stdout.is_empty(), "{}", text(&same.stdout));
        let narrowed = sandbox.tollgate_with(
            &own_config(),
            &[
                "replay",
                "open/transcript.jsonl",
                "--allow",
                "Bash(touch:*)",
            ],
        );
        // A narrowed call is reported; only a widened one fails the replay.
        assert_eq!(
            narrowed.status.code(),
            Some(0),
            "{}",
            text(&narrowed.stderr)
        );
        let change: Value = serde_json::from_slice(&narrowed.stdout).unwrap();
        assert_eq!(
            (
                change["before"]["decision"].as_str(),
                change["after"]["decision"].as_str()
            ),
            (Some("allow"), Some("deny")),
            "{change}"
        );
        assert!(
            change["after"]["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("Bash(touch:*)"),
            "{change}"
        );
    }
}

/// An allow rule in the repository's Claude Code settings does not widen a `managed_only`
/// policy that does not grant it (it is listed as ignored, in `run` and in `check
/// --explain`), nor do its hooks, additional directories or a `defaultMode` the managed
/// policy does not allow; a key only the managed policy may set is refused at its place.
#[test]
fn the_repositorys_claude_settings_never_widen_the_managed_policy() {
    for name in PROJECT_FILES {
        let sandbox = Sandbox::empty();
        touch_task(&sandbox);
        sandbox.write("common/notes.txt", "x\n");
        let hook_ran = sandbox.path().join("hook-ran");
        sandbox.write(
            &format!("ws/{name}"),
            &format!(
                r#"{{
  "permissions": {{
    "allow": ["Bash(touch:*)"],
    "additionalDirectories": ["../common"],
    "defaultMode": "bypassPermissions"
  }},
  "hooks": {{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "touch {}"}}]}}]}}
}}
"#,
                hook_ran.display()
            ),
        );
        // Without a managed policy the repository's allow rule counts, as a project file's
        // does; its hook still waits for an operator's approval.
        let open = sandbox.run(&own_config(), &[]);
        open.assert_code(0);
        assert!(open.ws.join("made.txt").exists(), "{name}");
        assert!(!hook_ran.exists(), "{name}: an unapproved hook ran");
        std::fs::remove_file(open.ws.join("made.txt")).unwrap();

        sandbox.write(
            "etc/policy.yaml",
            "managed_only: true\npermissions:\n  allow: [Read]\n",
        );
        let locked = sandbox.run(&own_config(), &[]);
        locked.assert_code(3);
        assert!(!locked.ws.join("made.txt").exists(), "{name}");
        assert!(!hook_ran.exists(), "{name}");
        assert_eq!(locked.started()["mode"], "dontAsk", "{name}");
        let policy = &locked.started()["policy"];
        let ignored = &policy["ignored_rules"][0];
        assert_eq!(ignored["rule"], "Bash(touch:*)", "{policy}");
        assert!(
            ignored["source"]["file"].as_str().unwrap().ends_with(name),
            "{policy}"
        );
        assert_eq!(
            policy["ignored_hooks"].as_array().unwrap().len(),
            1,
            "{policy}"
        );
        assert!(
            policy["ignored_additional_directories"]
                .to_string()
                .contains("common"),
            "{policy}"
        );
        let (code, line, stderr) = check_touch(&sandbox, &[]);
        assert_eq!(
            (code, &line["decision"]),
            (0, &Value::from("deny")),
            "{stderr}"
        );
        let explained = check_touch_output(&sandbox, &["--explain"]);
        let explained = text(&explained.stdout);
        assert!(
            explained.contains("ignored: allow rule Bash(touch:*) at"),
            "{explained}"
        );

        // A key only the managed policy may set: a configuration error at its place.
        sandbox.write(
            &format!("ws/{name}"),
            "{\n  \"allowManagedPermissionRulesOnly\": false\n}\n",
        );
        let (code, _, stderr) = check_touch(&sandbox, &[]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(&format!("{name}:2:")), "{stderr}");
        assert!(
            stderr.contains("allowManagedPermissionRulesOnly"),
            "{stderr}"
        );
    }
}

/// A malformed `.claude/settings.json` stops `run`, `check` and `replay` with a configuration
/// error naming `file:line:column` (exit 2) before any model call, and every unknown key of
/// it is reported in that one run, each with where it belongs; the Claude Code keys tollgate
/// does not use are named as ignored, not refused.
#[test]
fn settings_errors_are_reported_all_at_once_before_any_model_call() {
    let sandbox = Sandbox::empty();
    touch_task(&sandbox);
    sandbox.write("ws/README.md", "hello\n");
    let run = sandbox.run(&own_config(), &["--allow", "Bash(touch:*)"]);
    run.assert_code(0);
    std::fs::rename(sandbox.path().join("out"), sandbox.path().join("open")).unwrap();
    // Not JSON at all: one error, at its place.
    sandbox.write(
        "ws/.claude/settings.json",
        "{\n  \"permissions\": {\n    \"deny\": [\"Read\"\n}\n",
    );
    for args in [
        vec!["run", "t.yaml", "--out", "out"],
        vec![
            "check",
            "--workdir",
            "ws",
            "--tool",
            "Read",
            "--input",
            r#"{"file_path":"README.md"}"#,
        ],
        vec!["replay", "open/transcript.jsonl"],
    ] {
        let output = sandbox.tollgate_with(&own_config(), &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(".claude/settings.json:"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!sandbox.path().join("out/transcript.jsonl").exists());

    // Four slips and two keys Claude Code reads that tollgate does not use.
    sandbox.write(
        "ws/.claude/settings.json",
        r#"{
  "model": "claude-sonnet-4-5",
  "env": {"FOO": "bar"},
  "defaultMode": "plan",
  "permissions": {
    "alow": ["Read"],
    "includeCoAuthoredBy": false
  },
  "disableAllHoks": true
}
"#,
    );
    let output = sandbox.tollgate_with(&own_config(), &["run", "t.yaml", "--out", "out"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for (place, help) in [
        (
            "settings.json:4:3: unknown field `defaultMode`",
            "belongs inside `permissions`",
        ),
        (
            "settings.json:6:5: unknown field `alow` in `permissions`",
            "did you mean `allow`?",
        ),
        (
            "settings.json:7:5: unknown field `includeCoAuthoredBy` in `permissions`",
            "belongs at the top level, not inside `permissions`",
        ),
        (
            "settings.json:9:3: unknown field `disableAllHoks`",
            "did you mean `disableAllHooks`?",
        ),
    ] {
        assert!(stderr.contains(place), "{place}: {stderr}");
        assert!(stderr.contains(help), "{help}: {stderr}");
    }
    assert!(stderr.contains("4 errors in"), "{stderr}");
    assert!(!stderr.contains("unknown field `model`"), "{stderr}");
    assert!(!stderr.contains("unknown field `env`"), "{stderr}");
    assert!(!sandbox.path().join("out/transcript.jsonl").exists());

    // Fixed, it loads; the keys tollgate does not use are named on stderr and in run_started.
    sandbox.write(
        "ws/.claude/settings.json",
        r#"{"model": "claude-sonnet-4-5", "env": {"FOO": "bar"}, "permissions": {"defaultMode": "plan"}}"#,
    );
    let (code, line, stderr) = check_touch(&sandbox, &["--allow", "Bash(touch:*)"]);
    assert_eq!(
        (code, &line["decision"]),
        (0, &Value::from("deny")),
        "plan mode: {stderr}"
    );
    assert!(
        stderr.contains("Claude Code keys tollgate does not use, ignored: env, model"),
        "{stderr}"
    );
    let run = sandbox.run(&own_config(), &[]);
    let ignored = run.started()["policy"]["ignored_keys"].to_string();
    assert!(ignored.contains("settings.json: env ("), "{ignored}");
}

/// `policy lint` passes allow rules for read-only git commands, exact or prefix, and still
/// flags the ones that discard work; `run --strict` accepts the first kind.
#[test]
fn lint_passes_read_only_git_rules_and_flags_discarding_ones() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "read.json",
        r#"{"permissions": {"allow": ["Bash(git stash list)", "Bash(git stash list:*)", "Bash(git stash show:*)", "Bash(git branch --list)", "Bash(git remote -v)", "Bash(git tag -l)", "Bash(git worktree list)", "Bash(git restore --staged src/a.rs)"]}}"#,
    );
    let output = sandbox.tollgate_with(&own_config(), &["policy", "lint", "read.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    sandbox.write(
        "discard.json",
        r#"{"permissions": {"allow": ["Bash(git stash drop)", "Bash(git stash:*)", "Bash(git clean -fdx)", "Bash(git restore src/a.rs)"]}}"#,
    );
    let output = sandbox.tollgate_with(&own_config(), &["policy", "lint", "discard.json"]);
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert_eq!(
        report.matches("discards uncommitted work").count(),
        4,
        "{report}"
    );
    touch_task(&sandbox);
    let strict = sandbox.run(
        &own_config(),
        &[
            "--policy",
            "read.json",
            "--strict",
            "--allow",
            "Bash(touch:*)",
        ],
    );
    strict.assert_code(0);
}
