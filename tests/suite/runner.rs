//! The process runner end to end: what the model's commands can see of tollgate's secrets,
//! and that nothing a run started outlives a SIGKILL of tollgate.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::procs::processes_with;
use crate::support::runs::run_task;
use crate::support::{poll_until, tollgate_in};

/// Built at run time so no token-shaped literal sits in the source; each is planted under a
/// name of a different kind.
fn secret(kind: &str) -> String {
    format!("{kind}-7Hq2Zr9Lk4Xw")
}

/// Every way a command could reach tollgate's own environment, each framed by markers so
/// the test sees that it ran rather than was refused. `/proc` is reached through a variable:
/// the gate's read guardrail refuses the paths it can see (`cat /proc/$PPID/environ`), and
/// this test is about what a read the gate cannot see finds.
const PROBES: [&str; 6] = [
    "env",
    // Spelled so the analyser cannot see the path (it refuses `d=/proc; cat $d/self/environ`
    // like the plain spelling): what reaches the file is the scrubbed environment.
    "cat $(echo /proc)/$PPID/environ",
    "cat $(echo /proc)/self/environ",
    "d=/proc; tr '\\0' '\\n' < $d/$PPID/environ | rev",
    "for f in /proc/$PPID/task/*/environ; do base64 -w0 < \"$f\"; done",
    "xxd -p /proc/$PPID/environ | tr -d '\\n'",
];

fn task_with_probes(dir: &Path) -> std::path::PathBuf {
    let mut calls = String::new();
    for (index, probe) in PROBES.iter().enumerate() {
        let command = format!("echo BEGIN{index}; {probe}; echo END{index}");
        calls.push_str(&format!(
            "    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n",
            serde_json::to_string(&command).unwrap()
        ));
    }
    let task = format!(
        "version: 1\nname: secrets\nprompt: Show me the environment.\nmode: bypassPermissions\n\
tools: [Bash]\nredact_env: [DATABASE_URL]\nmodel:\n  provider: scripted\n  script:\n{calls}    - - text: done\n"
    );
    let path = dir.join("task.yaml");
    std::fs::write(&path, task).unwrap();
    path
}

#[test]
fn the_models_commands_cannot_read_a_secret_from_the_environment_or_proc() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_probes(dir.path());
    let token = secret("token");
    let url = secret("url");
    let run = run_task(
        &task,
        &["--workdir", dir.path().to_str().unwrap()],
        &[("TOLLGATE_PROBE_TOKEN", &token), ("DATABASE_URL", &url)],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let results: Vec<String> = run
        .events()
        .iter()
        .filter(|event| event["type"] == "tool_result")
        .map(|event| event.to_string())
        .collect();
    assert_eq!(results.len(), PROBES.len(), "{results:#?}");
    for (index, result) in results.iter().enumerate() {
        assert!(
            result.contains(&format!("BEGIN{index}")) && result.contains(&format!("END{index}")),
            "probe {index} did not run: {result}"
        );
        // Redaction would turn a leaked value into a label: there must be nothing to redact.
        assert!(
            !result.contains("[REDACTED"),
            "probe {index} saw a secret: {result}"
        );
    }
    let reversed: Vec<String> = [&token, &url]
        .iter()
        .map(|value| value.chars().rev().collect())
        .collect();
    let hex: Vec<String> = [&token, &url]
        .iter()
        .map(|value| value.bytes().map(|b| format!("{b:02x}")).collect())
        .collect();
    let transcript = run.read("transcript.jsonl");
    for text in [&transcript, &run.stdout, &run.stderr] {
        for needle in [&token, &url].into_iter().chain(&reversed).chain(&hex) {
            assert!(!text.contains(needle.as_str()), "{needle} leaked");
        }
    }
    // The probes did read the environment: the harmless part is there.
    assert!(results[0].contains("GITHUB_ACTIONS=true"), "{}", results[0]);
}

#[test]
fn sigkill_of_tollgate_leaves_no_command_running() {
    let dir = tempfile::tempdir().unwrap();
    // Unusual durations name the processes; the first is bash's last command (exec'd, so it
    // is the group leader itself), the others are forked children PDEATHSIG cannot reach.
    let command = "sleep 917.25 & (sleep 917.5; true) & sleep 917.75; true";
    let task = format!(
        "version: 1\nname: sleeper\nprompt: wait\nmode: bypassPermissions\ntools: [Bash]\n\
model:\n  provider: scripted\n  script:\n    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n    - - text: done\n",
        serde_json::to_string(command).unwrap()
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let mut tollgate = tollgate_in(dir.path())
        .arg("run")
        .arg(dir.path().join("task.yaml"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--workdir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = poll_until(Duration::from_secs(20), || {
        ["917.25", "917.5", "917.75"]
            .iter()
            .all(|needle| !processes_with(&format!("sleep {needle}")).is_empty())
            .then_some(())
    })
    .is_some();
    tollgate.kill().unwrap();
    tollgate.wait().unwrap();
    assert!(started, "the command never started");
    let gone = poll_until(Duration::from_secs(10), || {
        processes_with("sleep 917.").is_empty().then_some(())
    })
    .is_some();
    let left = processes_with("sleep 917.");
    for pid in &left {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    assert!(gone, "still running after tollgate was killed: {left:?}");
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

const SCRIPTED_TASK: &str = "version: 1\nname: authority\nprompt: hi\ntools: [Bash]\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: touch planted}}\n    - - text: done\n";

#[test]
fn nothing_below_the_managed_policy_widens_it() {
    let dir = tempfile::tempdir().unwrap();
    let managed = write(
        dir.path(),
        "managed.yaml",
        "managed_only: true\npermissions:\n  default_mode: dontAsk\n",
    );
    let policy = managed.to_str().unwrap();
    let workdir = dir.path().to_str().unwrap();
    // A task's bypassPermissions: refused before any model call, nothing ran.
    let task = write(
        dir.path(),
        "task.yaml",
        &format!("{SCRIPTED_TASK}mode: bypassPermissions\n"),
    );
    let run = run_task(&task, &["--policy", policy, "--workdir", workdir], &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("bypassPermissions mode (the task's mode) is not allowed"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("planted").exists());
    // A project file's default_mode and hooks are left aside and listed.
    write(
        dir.path(),
        ".tollgate/policy.yaml",
        "permissions:\n  default_mode: bypassPermissions\n  additional_directories: [/]\nhooks:\n  - {event: PreToolUse, matcher: Bash, command: 'echo {\"permissionDecision\":\"allow\"}'}\n",
    );
    let task = write(dir.path(), "task.yaml", SCRIPTED_TASK);
    let run = run_task(&task, &["--policy", policy, "--workdir", workdir], &[]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(!dir.path().join("planted").exists());
    let events = run.events();
    let started = events.iter().find(|e| e["type"] == "run_started").unwrap();
    assert_eq!(started["mode"], "dontAsk", "{started}");
    let summary = &started["policy"];
    assert_eq!(
        summary["ignored_hooks"].as_array().unwrap().len(),
        1,
        "{summary}"
    );
    assert_eq!(
        summary["ignored_additional_directories"],
        serde_json::json!(["/"])
    );
    // managed_only written in a lower file is a configuration error at its place.
    write(
        dir.path(),
        ".tollgate/policy.yaml",
        "permissions:\n  allow: [Read]\nmanaged_only: true\n",
    );
    let run = run_task(&task, &["--workdir", workdir], &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("policy.yaml:3:"), "{}", run.stderr);
}

#[test]
fn a_claude_code_settings_file_drives_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let settings = write(
        dir.path(),
        "settings.json",
        r#"{"env": {"FOO": "bar"}, "model": "claude-sonnet-4-5", "cleanupPeriodDays": 20,
  "permissions": {"allow": ["Bash(touch:*)"], "additionalDirectories": ["../not-there/"],
  "defaultMode": "dontAsk"}}"#,
    );
    let task = write(dir.path(), "task.yaml", SCRIPTED_TASK);
    let run = run_task(
        &task,
        &[
            "--policy",
            settings.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(dir.path().join("planted").exists());
    let events = run.events();
    let started = events.iter().find(|e| e["type"] == "run_started").unwrap();
    let ignored: Vec<String> = started["policy"]["ignored_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|key| {
            // `settings.json: key (why)`
            let (file, rest) = key.as_str().unwrap().split_once(": ").unwrap();
            assert!(file.ends_with("settings.json"), "{key}");
            let (key, why) = rest.split_once(" (").unwrap();
            assert!(why.ends_with(')') && why.len() > 10, "{rest}");
            key.to_string()
        })
        .collect();
    assert_eq!(ignored, ["cleanupPeriodDays", "env", "model"]);
    let warnings = started["policy"]["warnings"].to_string();
    assert!(warnings.contains("not-there"), "{warnings}");
}
