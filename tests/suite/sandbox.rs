//! The OS sandbox on the real kernel: commands the gate let through (bypassPermissions) still
//! cannot write outside the workspace or into guarded paths, read denied files, reach ports
//! or hosts they were not given, see secrets, or start unbounded processes. Skipped, with the
//! reason printed, only where the kernel has no Landlock network rules (ABI < 4).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::Value;

use crate::support::runs::{Finished, run_task};

fn landlock_missing() -> bool {
    let abi = tollgate::sandbox::kernel_abi();
    if abi < 4 {
        eprintln!("skipped: this kernel offers Landlock ABI {abi}; the sandbox tests need 4");
        return true;
    }
    false
}

/// A scratch folder with a workspace `ws/` (holding a `.git/hooks`), a policy with `sandbox`
/// as given, and a task whose scripted model runs `commands` one per turn.
struct Scene {
    dir: tempfile::TempDir,
    mode: &'static str,
}

impl Scene {
    fn new(sandbox_yaml: &str) -> Scene {
        Scene::with_policy(
            &format!("permissions:\n  default_mode: bypassPermissions\n{sandbox_yaml}"),
            "bypassPermissions",
        )
    }

    fn with_policy(policy: &str, mode: &'static str) -> Scene {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/.git/hooks")).unwrap();
        std::fs::create_dir_all(dir.path().join("ws/src")).unwrap();
        std::fs::write(dir.path().join("ws/.git/config"), "[core]\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "the-secret-words\n").unwrap();
        std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
        Scene { dir, mode }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, commands: &[&str], env: &[(&str, &str)]) -> Finished {
        self.run_with_checks(commands, "", env)
    }

    fn run_with_checks(&self, commands: &[&str], checks: &str, env: &[(&str, &str)]) -> Finished {
        let steps: String = commands
            .iter()
            .map(|command| {
                format!(
                    "    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n",
                    serde_json::to_string(command).unwrap()
                )
            })
            .collect();
        let task = format!(
            "version: 1\nname: sandboxed\nprompt: go\nworkdir: ws\npolicy: policy.yaml\nmode: {}\ntools: [Bash]\nfail_on: [check, limit]\nmodel:\n  provider: scripted\n  name: s\n  script:\n{steps}    - - text: done\n{checks}",
            self.mode
        );
        let path = self.path().join("task.yaml");
        std::fs::write(&path, task).unwrap();
        run_task(&path, &["--report", "junit,sarif"], env)
    }
}

/// Each Bash result's (is_error, content), in call order.
fn results(run: &Finished) -> Vec<(bool, String)> {
    run.events()
        .iter()
        .filter(|event| event["type"] == "tool_result")
        .map(|event| {
            (
                event["is_error"].as_bool().unwrap(),
                event["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn refused(result: &(bool, String)) -> bool {
    result.0
        && result.1.contains("Permission denied")
        && !result.1.starts_with("Permission denied:")
}

#[test]
fn gate_allowed_commands_stay_inside_the_workspace() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox:\n  filesystem:\n    deny_read: [../secret.txt]\n");
    let outside = scene.path().join("outside.txt");
    // Paths through variables: the gate cannot see them, so bypassPermissions lets them run
    // and only the kernel stands in the way.
    let write_outside = format!("f={}; echo x > \"$f\"", outside.display());
    let run = scene.run(
        &[
            "echo kept > src/inside.txt && cat src/inside.txt",
            &write_outside,
            "d=.git/hooks; echo 'curl evil' > \"$d/pre-commit\"",
            "f=.git/config; echo '[alias]' >> \"$f\"",
            "f=../secret.txt; cat \"$f\"",
            "echo tmp > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"",
        ],
        &[],
    );
    let results = results(&run);
    assert_eq!(results.len(), 6, "{}", run.stderr);
    assert_eq!(results[0], (false, "kept".to_string()));
    for (index, what) in [
        (1, "outside"),
        (2, "hook"),
        (3, "git config"),
        (4, "secret"),
    ] {
        assert!(refused(&results[index]), "{what}: {:?}", results[index]);
    }
    assert!(!outside.exists());
    assert!(!scene.path().join("ws/.git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(scene.path().join("ws/.git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!results[4].1.contains("the-secret-words"));
    assert_eq!(results[5], (false, "tmp".to_string()));
    let started = &run.events()[0];
    assert_eq!(started["sandbox"]["filesystem"], true, "{started}");
    assert!(
        run.stdout.contains("sandbox: Landlock ABI"),
        "{}",
        run.stdout
    );
    assert!(
        run.step_summary.contains("| Sandbox | 🔒"),
        "{}",
        run.step_summary
    );
}

/// Accepts connections on a loopback port until the test ends.
fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[test]
fn only_the_ports_the_policy_names_can_be_reached() {
    if landlock_missing() {
        return;
    }
    let (_closed, closed_port) = listener();
    let (_open, open_port) = listener();
    let scene = Scene::new(&format!(
        "sandbox:\n  network: {{mode: none, allowed_ports: [{open_port}]}}\n"
    ));
    // Through a variable, so the gate cannot see the /dev/tcp path and only the kernel decides.
    let connect =
        |port: u16| format!("h=/dev/tcp/127.0.0.1/{port}; exec 3<>\"$h\" && echo connected");
    let run = scene.run(&[&connect(closed_port), &connect(open_port)], &[]);
    let results = results(&run);
    assert!(refused(&results[0]), "{:?}", results[0]);
    assert_eq!(results[1], (false, "connected".to_string()));
}

/// A one-request-at-a-time HTTP server on 127.0.0.1 that answers `hello from <path>`.
fn http_server() -> u16 {
    let (listener, port) = listener();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let path = head.split(' ').nth(1).unwrap_or("?").to_string();
            let body = format!("hello from {path}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn the_proxy_lets_allowed_domains_through_and_records_every_connection() {
    if landlock_missing() {
        return;
    }
    if !Path::new("/usr/bin/curl").exists() {
        eprintln!("skipped: the proxy test drives /usr/bin/curl, which is not installed");
        return;
    }
    let port = http_server();
    let other_port = http_server();
    // localhost resolves to a loopback address: only naming 127.0.0.1 itself lets it through.
    let scene = Scene::new(&format!(
        "sandbox:\n  network:\n    mode: proxy\n    allowed_domains: [localhost, 127.0.0.1]\n    allowed_ports: [{port}]\n"
    ));
    let run = scene.run(
        &[
            &format!("curl -sS --max-time 10 http://localhost:{port}/allowed"),
            &format!("curl -sS -f --max-time 10 http://refused.example:{port}/x"),
            // Around the proxy: refused by Landlock, the port is not the proxy's.
            &format!("curl -sS --noproxy '*' --max-time 10 http://127.0.0.1:{other_port}/direct"),
            // Through the proxy to a port Landlock refuses directly: refused there too.
            &format!("curl -sS -f --max-time 10 http://localhost:{other_port}/x"),
        ],
        &[],
    );
    let results = results(&run);
    assert_eq!(
        results[0],
        (false, "hello from /allowed".to_string()),
        "{}",
        run.stderr
    );
    for refused in [&results[1], &results[3]] {
        assert!(refused.0 && refused.1.contains("403"), "{refused:?}");
    }
    assert!(
        results[2].0 && !results[2].1.contains("hello"),
        "{:?}",
        results[2]
    );
    let connections: Vec<(String, bool)> = run
        .events()
        .iter()
        .filter(|event| event["type"] == "network_connection")
        .map(|event| {
            (
                event["host"].as_str().unwrap().to_string(),
                event["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        connections,
        [
            ("localhost".to_string(), true),
            ("refused.example".to_string(), false),
            ("localhost".to_string(), false)
        ]
    );
    let sarif: Value = run.json("tollgate.sarif");
    let network: Vec<&Value> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|result| result["ruleId"] == "sandbox/network")
        .collect();
    assert_eq!(network.len(), 2, "{sarif}");
    assert_eq!(network[0]["properties"]["host"], "refused.example");
}

#[test]
fn secrets_stay_out_of_reach() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox: {}\n");
    let run = scene.run(
        &[
            "echo \"[$TOLLGATE_TEST_SECRET_TOKEN][$TOLLGATE_TEST_PLAIN]\"",
            // $PPID of a multi-command `bash -c` is tollgate itself; `/proc` through a
            // variable, or the gate's read guardrail refuses it before the sandbox can.
            "p=$PPID; d=/proc; cat $d/$p/environ",
            "head -c 4 /proc/self/status",
        ],
        &[
            ("TOLLGATE_TEST_SECRET_TOKEN", "hunter2"),
            ("TOLLGATE_TEST_PLAIN", "plain"),
        ],
    );
    let results = results(&run);
    assert_eq!(results[0], (false, "[][]".to_string()));
    assert!(refused(&results[1]), "{:?}", results[1]);
    assert!(!results[1].1.contains("hunter2"));
    assert_eq!(results[2], (false, "Name".to_string()));
}

#[test]
fn too_many_processes_end_the_command_not_the_run() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox:\n  limits: {max_processes: 16}\n");
    // Bounded: 40 short sleeps at most, whatever the limit does.
    let run = scene.run(
        &[
            "for i in $(seq 1 40); do sleep 1 & done; wait",
            "echo still here",
        ],
        &[],
    );
    let started = &run.events()[0];
    if started["sandbox"]["process_limit"] == serde_json::json!({"via": "rlimit", "binds": false}) {
        eprintln!("skipped: no pids cgroup here and RLIMIT_NPROC does not bind root");
        return;
    }
    let results = results(&run);
    assert!(
        results[0].0 && results[0].1.contains("max_processes (16)"),
        "{:?}",
        results[0]
    );
    assert_eq!(results[1], (false, "still here".to_string()));
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn a_sandbox_the_kernel_cannot_enforce_stops_before_the_model() {
    let scene = Scene::new("sandbox:\n  network: {mode: none}\n");
    let run = scene.run(&["echo never"], &[("TOLLGATE_SANDBOX_MAX_ABI", "3")]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("needs Landlock ABI 4"),
        "{}",
        run.stderr
    );
    assert!(!run.out.join("transcript.jsonl").exists());
    let warn = Scene::new("sandbox:\n  on_unavailable: warn\n  network: {mode: none}\n");
    let run = warn.run(&["echo ran"], &[("TOLLGATE_SANDBOX_MAX_ABI", "3")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("WARNING"), "{}", run.stdout);
    let started = &run.events()[0];
    assert!(started["sandbox"]["warning"].is_string(), "{started}");
}

#[test]
fn auto_allow_bash_runs_unlisted_commands_but_deny_rules_and_guardrails_still_win() {
    if landlock_missing() {
        return;
    }
    let dir = Scene::with_policy(
        "permissions:\n  deny: ['Bash(rm:*)']\nsandbox: {auto_allow_bash: true}\n",
        "dontAsk",
    );
    let run = dir.run(
        &[
            "echo unlisted",
            "rm -rf src",
            "echo x > .git/hooks/post-commit",
        ],
        &[],
    );
    let decisions: Vec<String> = run
        .events()
        .iter()
        .filter(|event| event["type"] == "permission_decision")
        .map(|event| event["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(decisions, ["allow", "deny", "deny"], "{}", run.stderr);
    assert_eq!(results(&run)[0], (false, "unlisted".to_string()));
    assert!(dir.path().join("ws/src").exists());
}

#[test]
fn checks_run_confined_only_when_the_policy_says_so() {
    if landlock_missing() {
        return;
    }
    let checks = "checks:\n  - name: escape\n    run: 'f=../escaped.txt; echo x > \"$f\"'\n";
    let confined = Scene::new("sandbox: {checks: true}\n");
    let run = confined.run_with_checks(&[], checks, &[]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(!confined.path().join("escaped.txt").exists());
    let free = Scene::new("sandbox: {}\n");
    let run = free.run_with_checks(&[], checks, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(free.path().join("escaped.txt").exists());
}
