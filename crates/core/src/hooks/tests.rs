//! Hooks run for real: small bash scripts in a temp dir, fed the JSON input on stdin.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;
use crate::base::{AbortHandle, AbortReason};

/// A temp dir holding hook scripts, and the call the hooks are asked about.
struct Fixture {
    dir: TempDir,
    tool_input: Value,
    tool_response: Value,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            tool_input: json!({"command": "rm -rf build"}),
            tool_response: json!({"output": "removed", "is_error": false}),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// Writes an executable bash script and returns a hook running it.
    fn hook(&self, name: &str, body: &str) -> Hook {
        let path = self.path(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Hook {
            spec: HookSpec {
                event: HookEvent::PreToolUse,
                matcher: None,
                command: path.display().to_string(),
                timeout: None,
                on_error: OnError::Deny,
            },
            source: "policy.yaml".into(),
        }
    }

    /// A hook that reads its input and prints `stdout`.
    fn printing(&self, name: &str, stdout: &str) -> Hook {
        self.hook(name, &format!("cat >/dev/null\nprintf '%s' '{stdout}'"))
    }

    fn input<'a>(&'a self, tool_name: &'a str) -> HookInput<'a> {
        HookInput {
            session_id: "session-1",
            transcript_path: Path::new("/runs/1/transcript.jsonl"),
            cwd: self.dir.path(),
            permission_mode: "default",
            tool_name,
            tool_input: &self.tool_input,
            tool_use_id: "toolu_01",
            tool_response: Some(&self.tool_response),
            asked_because: None,
        }
    }

    async fn run(&self, hooks: &[Hook], event: HookEvent, tool_name: &str) -> HookReport {
        let (_handle, abort) = AbortHandle::new();
        run_hooks(hooks, event, &self.input(tool_name), &hook_env(), &abort).await
    }

    async fn pre(&self, hooks: &[Hook]) -> HookReport {
        self.run(hooks, HookEvent::PreToolUse, "Bash").await
    }
}

fn with(mut hook: Hook, edit: impl FnOnce(&mut HookSpec)) -> Hook {
    edit(&mut hook.spec);
    hook
}

fn deny_reason(report: &HookReport) -> &str {
    match &report.ruling {
        HookRuling::Deny { reason } => reason,
        other => panic!("expected a deny, got {other:?}"),
    }
}

#[tokio::test]
async fn allow_names_the_hook_and_its_reason() {
    let fx = Fixture::new();
    let hook = fx.printing(
        "ok.sh",
        r#"{"permissionDecision":"allow","reason":"looks fine"}"#,
    );
    let report = fx.pre(std::slice::from_ref(&hook)).await;
    assert_eq!(
        report.ruling,
        HookRuling::Allow {
            reason: Some(format!(
                "PreToolUse hook `{}` (policy.yaml) allowed: looks fine",
                hook.spec.command
            )),
            updated_input: None,
        }
    );
    assert_eq!(report.decided_by, Some(0));
    let run = &report.runs[0];
    assert_eq!((run.exit_code, &run.error), (Some(0), &None));
    assert_eq!(run.source, Path::new("policy.yaml"));
}

#[tokio::test]
async fn deny_via_json() {
    let fx = Fixture::new();
    let hook = fx.printing(
        "no.sh",
        r#"{"permissionDecision":"deny","reason":"not today"}"#,
    );
    let report = fx.pre(&[hook]).await;
    let reason = deny_reason(&report);
    assert!(
        reason.ends_with("(policy.yaml) denied: not today"),
        "{reason}"
    );
}

#[tokio::test]
async fn exit_2_denies_with_stderr_as_the_reason() {
    let fx = Fixture::new();
    let hook = fx.hook(
        "two.sh",
        "cat >/dev/null\necho 'rm is not allowed here' >&2\nexit 2",
    );
    let report = fx.pre(&[hook]).await;
    assert!(
        deny_reason(&report).ends_with("denied: rm is not allowed here"),
        "{report:?}"
    );
    assert_eq!(report.runs[0].exit_code, Some(2));
    assert_eq!(report.runs[0].error, None);
}

#[tokio::test]
async fn ask() {
    let fx = Fixture::new();
    let hook = fx.printing(
        "ask.sh",
        r#"{"permissionDecision":"ask","reason":"a person should look"}"#,
    );
    let report = fx.pre(&[hook]).await;
    match &report.ruling {
        HookRuling::Ask { reason } => {
            assert!(reason.ends_with("asks: a person should look"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_crash_denies_by_default_and_is_ignored_on_request() {
    let fx = Fixture::new();
    let crash = fx.hook("crash.sh", "echo 'segfault-ish' >&2\nexit 1");
    let report = fx.pre(std::slice::from_ref(&crash)).await;
    let reason = deny_reason(&report);
    assert!(
        reason.contains("exited with code 1: segfault-ish") && reason.contains("on_error: deny"),
        "{reason}"
    );
    assert_eq!(report.runs[0].exit_code, Some(1));
    assert_eq!(report.runs[0].stderr, "segfault-ish");

    let ignored = with(crash, |spec| spec.on_error = OnError::Ignore);
    let report = fx.pre(&[ignored]).await;
    assert_eq!(
        report.ruling,
        HookRuling::NoOpinion {
            updated_input: None
        }
    );
    assert_eq!(report.decided_by, None);
    assert_eq!(
        report.runs[0].error.as_deref(),
        Some("exited with code 1: segfault-ish")
    );
}

#[tokio::test]
async fn a_hook_that_cannot_start_denies() {
    let fx = Fixture::new();
    let mut hook = fx.hook("x.sh", "exit 0");
    hook.spec.command = fx.path("missing.sh").display().to_string();
    let report = fx.pre(&[hook]).await;
    // bash itself starts; the missing script is bash's exit 127.
    assert!(
        deny_reason(&report).contains("exited with code 127"),
        "{report:?}"
    );
}

#[tokio::test]
async fn timeout_denies_within_bounds() {
    let fx = Fixture::new();
    let slow = with(fx.hook("slow.sh", "sleep 30"), |spec| {
        spec.timeout = Some(1)
    });
    let started = Instant::now();
    let report = fx.pre(&[slow]).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        deny_reason(&report).contains("timed out after 1 s"),
        "{report:?}"
    );
    assert_eq!(report.runs[0].exit_code, None);
}

#[tokio::test]
async fn malformed_stdout_is_an_error() {
    let fx = Fixture::new();
    let hook = fx.printing("bad.sh", "permissionDecision=allow");
    let report = fx.pre(std::slice::from_ref(&hook)).await;
    assert!(
        deny_reason(&report).contains("printed output that is not a hook answer"),
        "{report:?}"
    );
    let ignored = with(hook, |spec| spec.on_error = OnError::Ignore);
    let report = fx.pre(&[ignored]).await;
    assert!(matches!(report.ruling, HookRuling::NoOpinion { .. }));
}

#[tokio::test]
async fn matcher_selects_by_tool_and_event_selects_by_event() {
    let fx = Fixture::new();
    let bash_only = with(
        fx.hook(
            "mark.sh",
            "cat >/dev/null\ntouch \"$TOLLGATE_HOOK_EVENT.ran\"",
        ),
        |spec| spec.matcher = Some(ToolMatcher::parse("Bash").unwrap()),
    );
    let hooks = [bash_only];
    let report = fx.run(&hooks, HookEvent::PreToolUse, "Read").await;
    assert!(report.runs.is_empty());
    assert!(!fx.path("PreToolUse.ran").exists());
    let report = fx.run(&hooks, HookEvent::PostToolUse, "Bash").await;
    assert!(report.runs.is_empty());
    let report = fx.run(&hooks, HookEvent::PreToolUse, "Bash").await;
    assert_eq!(report.runs.len(), 1);
    assert!(fx.path("PreToolUse.ran").exists());
}

#[tokio::test]
async fn deny_outranks_ask_outranks_allow() {
    let fx = Fixture::new();
    let allow = fx.printing("allow.sh", r#"{"permissionDecision":"allow"}"#);
    let ask = fx.printing("ask.sh", r#"{"permissionDecision":"ask","reason":"check"}"#);
    let deny = fx.hook("deny.sh", "cat >/dev/null\necho stop >&2\nexit 2");
    let silent = fx.printing("silent.sh", "");

    let report = fx
        .pre(&[allow.clone(), deny.clone(), ask.clone(), silent.clone()])
        .await;
    assert_eq!(report.decided_by, Some(1));
    assert!(deny_reason(&report).contains("deny.sh"), "{report:?}");
    let said: Vec<u8> = report.runs.iter().map(|r| r.answer.severity()).collect();
    assert_eq!(said, [1, 4, 2, 0], "runs stay in policy order");

    let report = fx.pre(&[allow.clone(), ask.clone(), silent.clone()]).await;
    assert_eq!(report.decided_by, Some(1));
    assert!(matches!(report.ruling, HookRuling::Ask { .. }));

    let report = fx.pre(&[silent, allow]).await;
    assert_eq!(report.decided_by, Some(1));
    assert!(matches!(report.ruling, HookRuling::Allow { .. }));
}

#[tokio::test]
async fn updated_input_is_the_last_allows() {
    let fx = Fixture::new();
    let first = fx.printing(
        "first.sh",
        r#"{"permissionDecision":"allow","updatedInput":{"command":"rm -rf ./build"}}"#,
    );
    let second = fx.printing(
        "second.sh",
        r#"{"permissionDecision":"allow","updatedInput":{"command":"rm -r ./build"}}"#,
    );
    let plain = fx.printing("plain.sh", r#"{"permissionDecision":"allow"}"#);
    let report = fx.pre(&[first, second, plain.clone()]).await;
    match report.ruling {
        HookRuling::Allow { updated_input, .. } => {
            assert_eq!(updated_input, Some(json!({"command": "rm -r ./build"})))
        }
        other => panic!("{other:?}"),
    }
    // An ask drops every rewrite: the call will not run as rewritten without a person.
    let rewrite = fx.printing(
        "rewrite.sh",
        r#"{"permissionDecision":"allow","updatedInput":{"command":"true"}}"#,
    );
    let ask = fx.printing("ask.sh", r#"{"permissionDecision":"ask"}"#);
    let report = fx.pre(&[rewrite, ask, plain]).await;
    assert!(
        matches!(report.ruling, HookRuling::Ask { .. }),
        "{report:?}"
    );
}

#[tokio::test]
async fn claude_code_nested_output() {
    let fx = Fixture::new();
    let hook = fx.printing(
        "cc.sh",
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"safe build dir","updatedInput":{"command":"rm -rf ./build"}},"suppressOutput":true}"#,
    );
    let report = fx.pre(&[hook]).await;
    match report.ruling {
        HookRuling::Allow {
            reason,
            updated_input,
        } => {
            assert!(reason.unwrap().ends_with("allowed: safe build dir"));
            assert_eq!(updated_input, Some(json!({"command": "rm -rf ./build"})));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn stdin_carries_every_field_and_the_hook_runs_in_cwd() {
    let fx = Fixture::new();
    let hook = fx.hook(
        "record.sh",
        "cat > \"$TOLLGATE_HOOK_EVENT.stdin.json\"\npwd > \"$TOLLGATE_HOOK_EVENT.cwd\"",
    );
    let hooks = [with(hook, |spec| spec.event = HookEvent::PostToolUse)];
    let report = fx.run(&hooks, HookEvent::PostToolUse, "Bash").await;
    assert_eq!(report.runs[0].error, None);
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(fx.path("PostToolUse.stdin.json")).unwrap())
            .unwrap();
    let cwd = fx.dir.path().display().to_string();
    assert_eq!(
        stdin,
        json!({
            "session_id": "session-1",
            "transcript_path": "/runs/1/transcript.jsonl",
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build"},
            "tool_use_id": "toolu_01",
            "tool_response": {"output": "removed", "is_error": false},
        })
    );
    let ran_in = std::fs::read_to_string(fx.path("PostToolUse.cwd")).unwrap();
    assert_eq!(
        std::fs::canonicalize(ran_in.trim()).unwrap(),
        std::fs::canonicalize(fx.dir.path()).unwrap()
    );
    // PreToolUse hooks are not sent a tool_response.
    let pre = fx.input("Bash").to_json(HookEvent::PreToolUse);
    assert_eq!(pre.get("tool_response"), None);
    assert_eq!(pre["hook_event_name"], "PreToolUse");
}

#[tokio::test]
async fn post_tool_use_block_is_a_deny() {
    let fx = Fixture::new();
    let hook = with(
        fx.printing(
            "post.sh",
            r#"{"decision":"block","reason":"output leaks a secret"}"#,
        ),
        |spec| spec.event = HookEvent::PostToolUse,
    );
    let report = fx.run(&[hook], HookEvent::PostToolUse, "Bash").await;
    let reason = deny_reason(&report);
    assert!(
        reason.starts_with("PostToolUse hook") && reason.ends_with("denied: output leaks a secret"),
        "{reason}"
    );
}

#[tokio::test]
async fn hooks_run_concurrently() {
    let fx = Fixture::new();
    // Each hook waits for the other's file: run one after the other, the first would wait
    // for its whole timeout and deny.
    let a = fx.hook(
        "a.sh",
        "cat >/dev/null\ntouch a.started\nuntil [ -e b.started ]; do sleep 0.05; done",
    );
    let b = fx.hook(
        "b.sh",
        "cat >/dev/null\ntouch b.started\nuntil [ -e a.started ]; do sleep 0.05; done",
    );
    let hooks = [
        with(a, |spec| spec.timeout = Some(5)),
        with(b, |spec| spec.timeout = Some(5)),
    ];
    let report = fx.pre(&hooks).await;
    assert_eq!(
        report.ruling,
        HookRuling::NoOpinion {
            updated_input: None
        },
        "{report:?}"
    );
}

/// PreCompact hooks start at once like every event's, yet fold in policy order: the first
/// veto in the policy stands even when a later one finishes first, and added texts keep the
/// policy's order.
#[tokio::test]
async fn pre_compact_hooks_run_at_once_and_fold_in_policy_order() {
    let fx = Fixture::new();
    let compact = |hook: Hook, on_error: OnError| {
        with(hook, |spec| {
            spec.event = HookEvent::PreCompact;
            spec.timeout = Some(5);
            spec.on_error = on_error;
        })
    };
    // `a` and `b` each wait for the other: run one after the other, `a` would time out.
    let hooks = [
        fx.hook(
            "a.sh",
            "cat >/dev/null\ntouch a.started\nuntil [ -e b.started ]; do sleep 0.05; done\necho 'first note'",
        ),
        fx.hook(
            "b.sh",
            "cat >/dev/null\ntouch b.started\nuntil [ -e a.started ]; do sleep 0.05; done\necho 'not now' >&2\nexit 2",
        ),
        fx.printing("c.sh", r#"{"decision":"block","reason":"later veto"}"#),
        fx.printing(
            "d.sh",
            r#"{"hookSpecificOutput":{"hookEventName":"PreCompact","additionalContext":"second note"}}"#,
        ),
        fx.hook("e.sh", "cat >/dev/null\necho broken >&2\nexit 3"),
    ];
    let hooks: Vec<Hook> = hooks
        .into_iter()
        .enumerate()
        .map(|(index, hook)| {
            let on_error = if index == 4 {
                OnError::Ignore
            } else {
                OnError::Deny
            };
            compact(hook, on_error)
        })
        .collect();
    let input = CompactInput {
        session_id: "session-1",
        transcript_path: Path::new("/runs/1/transcript.jsonl"),
        cwd: fx.dir.path(),
        permission_mode: "default",
        trigger: "auto",
    };
    let (_handle, abort) = AbortHandle::new();
    let ruling = run_pre_compact(&hooks, &input, &hook_env(), &abort, None).await;
    assert_eq!(ruling.veto.as_deref(), Some("not now"), "{ruling:?}");
    assert_eq!(ruling.added, vec!["first note", "second note"]);
    let commands: Vec<&str> = ruling.runs.iter().map(|run| run.command.as_str()).collect();
    let expected: Vec<&str> = hooks
        .iter()
        .map(|hook| hook.spec.command.as_str())
        .collect();
    assert_eq!(commands, expected);
    let ignored = &ruling.runs[4];
    assert_eq!(
        (ignored.exit_code, ignored.error.as_deref()),
        (Some(3), Some("exited with code 3: broken"))
    );
    assert_eq!(
        ignored.answer,
        HookAnswer::NoOpinion {
            updated_input: None
        }
    );
}

#[tokio::test]
async fn abort_stops_running_hooks_and_denies() {
    let fx = Fixture::new();
    let fifo = fx.path("started.fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let hook = fx.hook(
        "wait.sh",
        "cat >/dev/null\necho up > started.fifo\nsleep 30",
    );
    let (handle, abort) = AbortHandle::new();
    let input_value = fx.tool_input.clone();
    let cwd = fx.dir.path().to_path_buf();
    let started = Instant::now();
    let running = tokio::spawn(async move {
        let input = HookInput {
            session_id: "s",
            transcript_path: Path::new("/t"),
            cwd: &cwd,
            permission_mode: "default",
            tool_name: "Bash",
            tool_input: &input_value,
            tool_use_id: "t1",
            tool_response: None,
            asked_because: None,
        };
        run_hooks(&[hook], HookEvent::PreToolUse, &input, &hook_env(), &abort).await
    });
    // Opening the fifo for reading returns once the hook has opened it for writing.
    let line = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
        .await
        .unwrap();
    assert_eq!(line, "up\n");
    handle.abort(AbortReason::Interrupt);
    let report = running.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        deny_reason(&report).contains("the run was aborted"),
        "{report:?}"
    );

    // Already aborted: nothing is started at all.
    let marker = fx.hook("never.sh", "touch never.ran");
    let (handle, abort) = AbortHandle::new();
    handle.abort(AbortReason::Terminate);
    let report = run_hooks(
        &[marker],
        HookEvent::PreToolUse,
        &fx.input("Bash"),
        &hook_env(),
        &abort,
    )
    .await;
    assert!(matches!(report.ruling, HookRuling::Deny { .. }));
    assert!(!fx.path("never.ran").exists());
}

#[tokio::test]
async fn no_matching_hook_is_no_opinion() {
    let fx = Fixture::new();
    let report = fx.pre(&[]).await;
    assert_eq!(
        report,
        HookReport {
            ruling: HookRuling::NoOpinion {
                updated_input: None
            },
            runs: Vec::new(),
            decided_by: None,
        }
    );
}

#[test]
fn report_serialises_for_the_transcript() {
    let run = HookRun {
        event: HookEvent::PreToolUse,
        command: "./check.sh".into(),
        source: "policies/ci.yaml".into(),
        exit_code: Some(2),
        duration_ms: 12,
        answer: HookAnswer::Deny {
            reason: Some("no".into()),
        },
        error: None,
        stderr: "no".into(),
    };
    let report = HookReport {
        ruling: HookRuling::Deny {
            reason: "PreToolUse hook `./check.sh` (policies/ci.yaml) denied: no".into(),
        },
        runs: vec![run],
        decided_by: Some(0),
    };
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        json!({
            "verdict": {"decision": "deny", "reason": "PreToolUse hook `./check.sh` (policies/ci.yaml) denied: no"},
            "runs": [{
                "event": "PreToolUse", "command": "./check.sh", "source": "policies/ci.yaml",
                "exit_code": 2, "duration_ms": 12,
                "answer": {"decision": "deny", "reason": "no"}, "stderr": "no"
            }],
            "decided_by": 0,
        })
    );
}

#[test]
fn long_commands_are_shortened_in_reasons() {
    assert_eq!(short_command("./a.sh"), "./a.sh");
    assert_eq!(short_command("set -e\n./a.sh"), "set -e …");
    let long = "x".repeat(100);
    assert_eq!(short_command(&long), format!("{}…", "x".repeat(80)));
}

#[tokio::test]
async fn a_background_process_left_by_the_hook_is_killed_with_it() {
    let fx = Fixture::new();
    // The sleep keeps the hook's stdout open; unless the group is killed when the hook exits,
    // its answer would be incomplete (an error, hence a deny).
    let hook = fx.hook(
        "bg.sh",
        "cat >/dev/null\nsleep 30 &\nprintf '{\"permissionDecision\":\"allow\"}'",
    );
    let report = fx.pre(&[hook]).await;
    assert!(
        matches!(report.ruling, HookRuling::Allow { .. }),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_hook_that_ignores_a_large_input_still_answers() {
    let mut fx = Fixture::new();
    fx.tool_input = json!({"content": "x".repeat(4 * 1024 * 1024)});
    let hook = fx.hook("deaf.sh", "printf '{\"permissionDecision\":\"allow\"}'");
    let report = fx.pre(&[hook]).await;
    assert!(
        matches!(report.ruling, HookRuling::Allow { .. }),
        "{report:?}"
    );
}

#[tokio::test]
async fn cancelling_run_hooks_kills_what_the_hooks_started() {
    let fx = Fixture::new();
    for fifo in ["started.fifo", "held.fifo"] {
        let status = std::process::Command::new("mkfifo")
            .arg(fx.path(fifo))
            .status()
            .unwrap();
        assert!(status.success());
    }
    // The background sleep holds held.fifo open for writing: the test's read of it ends
    // (EOF) exactly when that sleep dies.
    let hook = fx.hook(
        "hold.sh",
        // held.fifo is open for writing before "up" is sent, so however early the cancel
        // lands, the reader sees EOF once the hook's process group is gone.
        "cat >/dev/null\nexec 3> held.fifo\nsleep 30 >&3 &\necho up > started.fifo\nwait",
    );
    let held = fx.path("held.fifo");
    let holder_gone = tokio::task::spawn_blocking(move || std::fs::read_to_string(held).unwrap());
    let started = Instant::now();
    let (_handle, abort) = AbortHandle::new();
    let input_value = fx.tool_input.clone();
    let cwd = fx.dir.path().to_path_buf();
    let running = tokio::spawn(async move {
        let input = HookInput {
            session_id: "s",
            transcript_path: Path::new("/t"),
            cwd: &cwd,
            permission_mode: "default",
            tool_name: "Bash",
            tool_input: &input_value,
            tool_use_id: "t1",
            tool_response: None,
            asked_because: None,
        };
        run_hooks(&[hook], HookEvent::PreToolUse, &input, &hook_env(), &abort).await
    });
    let fifo = fx.path("started.fifo");
    let line = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
        .await
        .unwrap();
    assert_eq!(line, "up\n");
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_eq!(holder_gone.await.unwrap(), "");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the hook's background process outlived the cancelled run: {:?}",
        started.elapsed()
    );
}

fn hook_env() -> crate::exec::ChildEnv {
    crate::exec::RunEnv::new(&Default::default()).hooks
}

#[test]
fn an_ambiguous_answer_denies_even_when_errors_are_ignored() {
    let err = HookError::Ambiguous("duplicate key `permissionDecision`".into());
    for policy in [OnError::Ignore, OnError::Deny] {
        assert!(
            matches!(on_error(policy, &err), HookAnswer::Deny { .. }),
            "{policy:?}"
        );
    }
    assert!(matches!(
        on_error(OnError::Ignore, &HookError::TimedOut(1)),
        HookAnswer::NoOpinion { .. }
    ));
}
