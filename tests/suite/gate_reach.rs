//! End to end: under a ci-default-like policy in dontAsk, a denied command behind git's
//! global options or a wrapper, a hazardous option of an allowed runner and a reader of a
//! Read-denied file never run (issue 10, items 4–6): no marker, nothing deleted, no secret in
//! any output.

use std::path::Path;

use crate::support::{Run, repo_root};

const SECRET: &str = "s3cret-7f1c9e";

/// The shipped ci-default policy plus a Read deny for the workspace's secrets.
fn policy() -> String {
    let shipped = std::fs::read_to_string(repo_root().join("policies/ci-default.yaml")).unwrap();
    shipped.replacen(
        "  deny:\n",
        "  deny:\n    - \"Read(secrets/**)\"\n    - \"Read(.env)\"\n",
        1,
    )
}

/// A scripted task whose one turn makes every call in `commands`.
fn task(commands: &[String]) -> String {
    let mut text = String::from(
        "version: 1\nname: reach\nprompt: go\nmode: dontAsk\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    -\n",
    );
    for command in commands {
        let quoted = serde_json::to_string(command).unwrap();
        text.push_str(&format!(
            "      - tool_use: {{name: Bash, input: {{command: {quoted}}}}}\n"
        ));
    }
    text.push_str("    - - text: done\n");
    text
}

fn all_output(dir: &Path) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    text
}

#[test]
fn denied_hazardous_and_secret_reading_commands_never_run_in_dont_ask() {
    let run = Run::new()
        .file("ws/src/lib.rs", "pub fn f() {}\n")
        .file("ws/secrets/token.txt", &format!("TOKEN={SECRET}\n"))
        .file("ws/.env", &format!("TOKEN={SECRET}\n"))
        .policy(&policy())
        // A crate whose build would run the wrapper a hazardous `--config` names: `cargo test`
        // is allowed by the policy, the wrapper is not.
        .file(
            "ws/Cargo.toml",
            "[package]\nname = \"reach\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
    let marker = run.dir().join("MARKER");
    let wrapper = run.dir().join("wrapper.sh");
    let run = run.file(
        "wrapper.sh",
        &format!("#!/bin/sh\ntouch {}\nexec \"$@\"\n", marker.display()),
    );
    let mut permissions = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&wrapper, permissions).unwrap();
    let commands = [
        "git -C . push origin main".to_owned(),
        "git --no-pager -c color.ui=never push".to_owned(),
        format!(
            "cargo test --config 'build.rustc-wrapper=\"{}\"'",
            wrapper.display()
        ),
        format!("RUSTC_WRAPPER={} cargo test", wrapper.display()),
        "npm test --script-shell=/bin/sh".to_owned(),
        "ionice -c 3 rm -rf src".to_owned(),
        "env -S 'rm -rf src'".to_owned(),
        "flock /tmp/tollgate-reach.lock -c 'rm -rf src'".to_owned(),
        "cat secrets/token.txt".to_owned(),
        "grep -r TOKEN .".to_owned(),
        "git show HEAD:.env".to_owned(),
        "head -c 100 < .env".to_owned(),
        "cat /proc/self/environ".to_owned(),
    ];
    let run = run.task(&task(&commands)).finish();
    assert_eq!(run.code, 3, "{}", run.stdout);
    run.assert_every_tool_use_answered_once();
    let results = run.of_type("tool_result");
    assert_eq!(results.len(), commands.len());
    for (command, result) in commands.iter().zip(&results) {
        assert_eq!(result["status"], "denied", "{command}: {result}");
    }
    let reason = |i: usize| results[i]["content"].as_str().unwrap().to_owned();
    assert!(reason(0).contains("Bash(git push:*)"), "{}", reason(0));
    assert!(reason(5).contains("Bash(rm:*)"), "{}", reason(5));
    assert!(reason(2).contains("--config"), "{}", reason(2));
    assert!(reason(4).contains("--script-shell"), "{}", reason(4));
    assert!(reason(8).contains("Read(secrets/**)"), "{}", reason(8));
    assert!(reason(9).contains("Read("), "{}", reason(9));
    assert!(reason(11).contains("Read(.env)"), "{}", reason(11));
    assert!(reason(12).contains("guardrail"), "{}", reason(12));
    assert!(!marker.exists(), "a refused command ran");
    assert!(run.ws.join("src/lib.rs").exists(), "src was deleted");
    let everything = format!("{}{}{}", run.stdout, run.stderr, all_output(&run.out));
    assert!(!everything.contains(SECRET), "the secret reached an output");
}

#[test]
fn deny_rules_read_rules_and_read_guardrails_hold_in_bypass_permissions() {
    // The managed policy itself chooses bypassPermissions (its self-tests expect dontAsk).
    let policy = policy().replacen(
        "default_mode: dontAsk",
        "default_mode: bypassPermissions",
        1,
    );
    let without_tests = policy.split("\ntests:\n").next().unwrap();
    let commands = [
        "git -C . push origin main",
        "ionice -c 3 rm -rf src",
        "setsid -f rm -rf src",
        "no-such-runner 'rm -rf src'",
        "cat secrets/token.txt",
        "xxd .env",
        "grep -r TOKEN .",
        "cat /proc/self/environ",
        "tr '\\0' '\\n' < /proc/thread-self/environ",
        // Bypass runs what is not refused: this one must run (the policy's sandbox lets it
        // write below src/, not create entries at the workspace's top).
        "touch src/ran.txt",
    ]
    .map(str::to_owned);
    let task = task(&commands).replacen("mode: dontAsk\n", "", 1);
    let run = Run::new()
        .file("ws/src/lib.rs", "pub fn f() {}\n")
        .file("ws/secrets/token.txt", &format!("TOKEN={SECRET}\n"))
        .file("ws/.env", &format!("TOKEN={SECRET}\n"))
        .policy(without_tests)
        .task(&task)
        .finish();
    run.assert_every_tool_use_answered_once();
    let results = run.of_type("tool_result");
    assert_eq!(results.len(), commands.len());
    let (refused, ran) = results.split_at(commands.len() - 1);
    for (command, result) in commands.iter().zip(refused) {
        assert_eq!(result["status"], "denied", "{command}: {result}");
    }
    assert_ne!(ran[0]["status"], "denied", "{}", ran[0]);
    assert!(run.ws.join("src/ran.txt").exists(), "bypass did not run");
    assert!(run.ws.join("src/lib.rs").exists(), "src was deleted");
    let everything = format!("{}{}{}", run.stdout, run.stderr, all_output(&run.out));
    assert!(!everything.contains(SECRET), "the secret reached an output");
}
