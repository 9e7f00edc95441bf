//! What a person sees while `tollgate run` works: plain progress lines on a log, a live status
//! line on a terminal, nothing under `--quiet`, and the logs `-v` turns on — all on stderr,
//! with stdout left to the summary or the chosen output format.

use std::process::Command;

use serde_json::{Value, json};

use crate::suite::providers::{KEY, done_turn, model_block, read_turn, run_task_with};
use crate::support::Sandbox;
use crate::support::fake_model::{Api, FakeModel};
use crate::support::runs::{Finished, Run};

/// One turn of three calls (allowed, denied by a rule, allowed but failing), a final answer,
/// and a check that passes and one that fails.
const TASK: &str = r#"version: 1
name: progress
prompt: go
workdir: ws
mode: dontAsk
tools: [Read, Bash]
limits: {max_turns: 5}
fail_on: [check, limit]
model:
  provider: scripted
  name: s
  script:
    - - text: Looking.
      - tool_use: {name: Bash, input: {command: echo hi, description: say hi}}
      - tool_use: {name: Bash, input: {command: rm -rf build}}
      - tool_use: {name: Read, input: {file_path: missing.txt}}
    - - text: done
checks:
  - name: notes-present
    run: test -f notes.txt
  - name: never
    run: "false"
"#;

/// `tollgate run` of [`TASK`] with `args`, `echo` allowed and `rm` denied.
fn progress_run(args: &[&str]) -> Finished {
    Run::new()
        .file("ws/notes.txt", "notes\n")
        .task(TASK)
        .args(RULES)
        .args(args)
        .finish()
}

const RULES: [&str; 4] = ["--allow", "Bash(echo:*)", "--deny", "Bash(rm:*)"];

/// Durations and the run id vary from run to run; the temp folder too.
fn normalised(stderr: &str, dir: &std::path::Path) -> Vec<String> {
    let times = regex::Regex::new(r"\b\d+m\d\ds\b|\b\d+(\.\d)?m?s\b").unwrap();
    let run_id = regex::Regex::new(r"\d{8}T\d{6}Z-[0-9a-f]{8}").unwrap();
    let dir = dir.canonicalize().unwrap().display().to_string();
    stderr
        .lines()
        .map(|line| {
            let line = line.replace(&dir, "<dir>");
            let line = run_id.replace_all(&line, "<id>");
            times.replace_all(&line, "<t>").into_owned()
        })
        .collect()
}

#[test]
fn on_a_log_each_turn_call_and_check_gets_one_plain_line_on_stderr() {
    let run = progress_run(&[]);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, 1, "{stdout}\n{stderr}");
    pretty_assertions::assert_eq!(
        normalised(stderr, &run.dir),
        [
            "tollgate run: started <id>: task `progress`, model scripted/s, mode dontAsk, at most 5 turns",
            "tollgate run: turn 1: model answered in <t>: 3 tool calls, $0.0000 so far",
            "tollgate run: turn 1: Bash(echo hi): allow (rule `Bash(echo:*)`, step 1c) → success in <t>",
            "tollgate run: turn 1: Bash(rm -rf build): deny (rule `Bash(rm:*)`, step 1d) → denied: `rm -rf build` is denied by rule Bash(rm:*)",
            "tollgate run: turn 1: Read(missing.txt): allow (tool, step 1c) → error in <t>: cannot read <dir>/ws/missing.txt: No such file or directory (os error 2)",
            "tollgate run: turn 2: model finished in <t> (end_turn), $0.0000 so far",
            "tollgate run: check `notes-present` passed in <t>",
            "tollgate run: check `never` failed in <t>: exit 1, expected 0",
            "tollgate run: finished: checks_failed after 2 turns, 3 tool calls (1 denied), $0.0000, <t>",
        ]
    );
    // A log gets no redraws, and stdout is the summary alone.
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "{stderr}"
    );
    assert!(
        stdout.starts_with("tollgate: progress — checks_failed (exit 1)"),
        "{stdout}"
    );
    assert!(!stdout.contains("tollgate run:"), "{stdout}");
}

#[test]
fn quiet_silences_the_progress_and_json_output_keeps_stdout_to_the_result() {
    let quiet = progress_run(&["--quiet"]);
    assert_eq!(quiet.code, 1);
    assert_eq!(quiet.stderr, "");
    assert!(
        quiet.stdout.starts_with("tollgate: progress"),
        "{}",
        quiet.stdout
    );

    let json = progress_run(&["--output-format", "json"]);
    let result: Value =
        serde_json::from_str(&json.stdout).unwrap_or_else(|err| panic!("{err}: {}", json.stdout));
    assert_eq!(result["type"], "result");
    let progress = json
        .stderr
        .lines()
        .filter(|l| l.starts_with("tollgate run: "));
    assert_eq!(progress.count(), 9, "{}", json.stderr);
}

/// A sensitive value in a call's input is redacted on stderr as in the transcript, even
/// where the line shortens the input.
#[test]
fn a_secret_in_a_call_s_input_is_redacted_in_its_progress_line() {
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let command = format!("echo {} {secret}", "x".repeat(40));
    let run = Run::new()
        .task(&format!(
            "version: 1\nname: secret\nprompt: go\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n    - - text: done\n",
            json!(command)
        ))
        .args(["--allow", "Bash(echo:*)"])
        .finish();
    assert!(run.stderr.contains("[REDACTED:"), "{}", run.stderr);
    assert!(!run.stderr.contains(&secret[..12]), "{}", run.stderr);
}

/// A CI runner reads `::` at a line's start and `##[` anywhere as its commands: neither the
/// progress nor the `-v` logs (which quote the command) may carry one the model wrote.
#[test]
fn a_forged_workflow_command_in_a_call_is_inert_in_the_progress_and_the_logs() {
    let command = "echo '##[error]forged\n::warning::forged'";
    let run = Run::new()
        .task(&format!(
            "version: 1\nname: forged\nprompt: go\nworkdir: ws\nmode: dontAsk\ntools: [Bash]\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n    - - text: done\n",
            json!(command)
        ))
        .args(["-vv", "--allow", "Bash(echo:*)"])
        .finish();
    let stderr = &run.stderr;
    assert!(stderr.contains("forged"), "{stderr}");
    assert!(stderr.contains("process started"), "{stderr}");
    assert!(!stderr.contains("##["), "{stderr}");
    for line in stderr.split(['\n', '\r']) {
        assert!(!line.trim_start().starts_with("::"), "{line}");
    }
}

#[test]
fn on_a_terminal_a_live_line_shows_the_turn_the_tool_running_and_the_cost() {
    // `script` (util-linux) gives the run a pseudo-terminal for stderr, as batch's bar test.
    let Ok(probe) = Command::new("script").arg("--version").output() else {
        return crate::support::skip::skip("no `script` (util-linux) on PATH to make a terminal");
    };
    assert!(probe.status.success());
    let sandbox = Sandbox::empty();
    // The command runs long enough for the line to be redrawn while it runs.
    sandbox.write(
        "task.yaml",
        "version: 1\nname: live\nprompt: go\nworkdir: ws\nmode: bypassPermissions\ntools: [Bash]\nlimits: {max_turns: 5}\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - tool_use: {name: Bash, input: {command: sleep 1}}\n    - - text: done\n",
    );
    sandbox.write("ws/.keep", "");
    let command = format!(
        "{} run task.yaml --out out >stdout.txt",
        env!("CARGO_BIN_EXE_tollgate")
    );
    let output = Command::new("script")
        .current_dir(sandbox.path())
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env_remove("RUST_LOG")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{terminal}");
    // The live line, redrawn in place (line clears), naming the running call.
    assert!(
        terminal.contains("turn 1/5, Bash(sleep 1), $0.0000 so far"),
        "{terminal}"
    );
    assert!(terminal.contains("\u{1b}[2K"), "{terminal}");
    // The plain lines are printed above it.
    assert!(
        terminal
            .contains("tollgate run: turn 1: Bash(sleep 1): allow (tool, step 1c) → success in "),
        "{terminal}"
    );
    assert!(
        terminal.contains("tollgate run: finished: success"),
        "{terminal}"
    );
    // stdout (redirected) is the summary, untouched by the terminal's line.
    let stdout = std::fs::read_to_string(sandbox.path().join("stdout.txt")).unwrap();
    assert!(
        stdout.starts_with("tollgate: live — success (exit 0)"),
        "{stdout}"
    );
    assert!(!stdout.contains("tollgate run"), "{stdout}");
}

/// `-v` logs the provider's requests and the gate's decisions (with their step) on stderr;
/// without it, or RUST_LOG, there are none; stdout stays the machine's.
#[tokio::test]
async fn verbose_logs_provider_requests_and_gate_decisions_on_stderr_only() {
    const PREAMBLE: &str = "mode: dontAsk\ntools: [Read, Glob, Grep]\n";
    let flags = ["--output-format", "json"];
    let quiet_env = [("RUST_LOG", "")];
    let mut runs = Vec::new();
    for (verbose, env) in [
        (&["-v"][..], &quiet_env[..]),
        (&[][..], &quiet_env[..]),
        (&[][..], &[("RUST_LOG", "tollgate=info")][..]),
        (&["-vv"][..], &quiet_env[..]),
    ] {
        let server = FakeModel::start(KEY, vec![read_turn(), done_turn()]).await;
        let flags: Vec<&str> = verbose.iter().chain(&flags).copied().collect();
        let run = run_task_with(
            PREAMBLE,
            &model_block(Api::Anthropic, &server, ""),
            "",
            env,
            &flags,
        )
        .await;
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let result: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|err| panic!("stdout is not the one result: {err}: {}", run.stdout));
        assert_eq!(result["type"], "result");
        assert!(!run.stderr.contains(KEY));
        runs.push(run.stderr);
    }
    let lines = |stderr: &str, needles: &[&str]| {
        stderr
            .lines()
            .filter(|line| needles.iter().all(|needle| line.contains(needle)))
            .count()
    };
    let request = [
        " INFO ",
        "provider request",
        "provider=\"anthropic\"",
        "messages=1",
    ];
    let response = [
        "provider response",
        "stop_reason=tool_use",
        "input_tokens=100",
    ];
    let decision = [
        " INFO ",
        "gate decision",
        "tool=Read",
        "decision=allow",
        "step=1c",
        "layer=tool",
    ];
    let http = [" DEBUG ", "HTTP request", "127.0.0.1", "attempt=1"];
    let (verbose, silent, rust_log, debug) = (&runs[0], &runs[1], &runs[2], &runs[3]);
    assert_eq!(lines(verbose, &request), 1, "{verbose}");
    assert_eq!(lines(verbose, &["provider request"]), 2, "{verbose}");
    assert_eq!(lines(verbose, &response), 1, "{verbose}");
    assert_eq!(lines(verbose, &decision), 1, "{verbose}");
    assert_eq!(lines(verbose, &http), 0, "{verbose}");
    assert_eq!(lines(silent, &["provider request"]), 0, "{silent}");
    assert_eq!(lines(silent, &["gate decision"]), 0, "{silent}");
    assert_eq!(lines(rust_log, &request), 1, "{rust_log}");
    assert_eq!(lines(rust_log, &decision), 1, "{rust_log}");
    assert_eq!(lines(debug, &http), 2, "{debug}");
}
