//! The OS sandbox on the real kernel: commands the gate let through (bypassPermissions) still
//! cannot write outside the workspace or into guarded paths, read denied files, reach ports
//! or hosts they were not given, see secrets, or start unbounded processes. Skipped, through
//! `support::skip`, only where the kernel has no Landlock network rules (ABI < 4). The socket
//! probes are this test binary itself, run again in the sandbox (`socket_probe`): no
//! interpreter needed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::Value;

use crate::support::runs::{Finished, run_task};
use crate::support::skip::{need_landlock, need_program, skip};
use crate::support::unseen_script;

fn landlock_missing() -> bool {
    !need_landlock(
        tollgate::sandbox::kernel_abi(),
        4,
        "the sandbox's network rules",
    )
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
        self.run_with_args(commands, checks, env, &[])
    }

    fn run_with_args(
        &self,
        commands: &[&str],
        checks: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Finished {
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
        let mut all = vec!["--report", "junit,sarif"];
        all.extend(args);
        run_task(&path, &all, env)
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
    // Paths through variables and scripts: the gate cannot see them, so bypassPermissions
    // lets them run and only the kernel stands in the way.
    // A write whose target the gate cannot see is a guardrail in every mode, so these run
    // from a script file, which bypassPermissions runs unread.
    let write_outside = unseen_script(&format!("f={}; echo x > \"$f\"", outside.display()));
    let hook = unseen_script("d=.git/hooks; echo 'curl evil' > \"$d/pre-commit\"");
    let config = unseen_script("f=.git/config; echo '[alias]' >> \"$f\"");
    let scratch = unseen_script("echo tmp > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"");
    let run = scene.run(
        &[
            "echo kept > src/inside.txt && cat src/inside.txt",
            &write_outside,
            &hook,
            &config,
            "f=../secret.txt; cat \"$f\"",
            &scratch,
        ],
        &[],
    );
    let results = results(&run);
    assert_eq!(results.len(), 6, "{}", run.stderr);
    assert_eq!(results[0], (false, "kept".to_string()));
    for (index, what) in [(1, "outside"), (4, "secret")] {
        assert!(refused(&results[index]), "{what}: {:?}", results[index]);
    }
    // The workspace is writable whole (new top-level entries must be), so what git runs
    // code from is put back after the command, which then fails and says so.
    for (index, what) in [(2, ".git/hooks"), (3, ".git/config")] {
        let (is_error, content) = &results[index];
        assert!(
            *is_error && content.contains(&format!("{what} (")),
            "{what}: {content}"
        );
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
    let connect = |port: u16| {
        unseen_script(&format!(
            "h=/dev/tcp/127.0.0.1/{port}; exec 3<>\"$h\" && echo connected"
        ))
    };
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
    // A real client that honours `http_proxy`, as the commands a model runs do.
    if need_program("curl", "Debian: apt-get install curl").is_none() {
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
            // command substitution (the analyser sees through literal variables), or the
            // gate's read guardrail refuses it before the sandbox can.
            "p=$PPID; cat $(echo /proc)/$p/environ",
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
        return skip("no pids cgroup here, and RLIMIT_NPROC does not bind root");
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
fn checks_run_confined_unless_the_policy_says_outside() {
    if landlock_missing() {
        return;
    }
    let checks = "checks:\n  - name: escape\n    run: 'f=../escaped.txt; echo x > \"$f\"'\n";
    let confined = Scene::new("sandbox: {}\n");
    let run = confined.run_with_checks(&[], checks, &[]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(!confined.path().join("escaped.txt").exists());
    assert!(
        run.stdout.contains("checks and hooks run in it"),
        "{}",
        run.stdout
    );
    let free = Scene::new("sandbox: {checks: outside}\n");
    let run = free.run_with_checks(&[], checks, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(free.path().join("escaped.txt").exists());
    assert!(
        run.stdout
            .contains("checks run OUTSIDE it (sandbox.checks: outside)"),
        "{}",
        run.stdout
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A workspace that is a real repository with a submodule `sub` and a nested repository
/// `src/nest`, in a scene whose policy is `sandbox_yaml`.
fn repository_scene(sandbox_yaml: &str) -> Scene {
    let scene = Scene::new(sandbox_yaml);
    let ws = scene.path().join("ws");
    std::fs::remove_dir_all(ws.join(".git")).unwrap();
    let lib = scene.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    for dir in [&lib, &ws] {
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("README"), "x\n").unwrap();
        git(dir, &["add", "README"]);
        git(dir, &["commit", "-q", "-m", "0"]);
    }
    git(&ws, &["submodule", "add", "-q", "../lib", "sub"]);
    git(&ws, &["commit", "-q", "-m", "1"]);
    let nest = ws.join("src/nest");
    std::fs::create_dir_all(&nest).unwrap();
    git(&nest, &["init", "-q"]);
    scene
}

/// What each planting command writes, through variables (the gate cannot see the paths;
/// bypassPermissions lets everything run): `[core] fsmonitor`, hooks, a filter driver with
/// the attributes that use it, a direnv file, a submodule definition, a new nested
/// repository. Every planted command writes `marker` with its environment.
fn plantings(marker: &Path) -> Vec<String> {
    let run = format!("env > {}; false", marker.display());
    let monitor = format!("printf '[core]\\n\\tfsmonitor = \"{run}\"\\n'");
    let hook = format!("printf '#!/bin/sh\\n{run}\\n'");
    [
        format!("f=.git/modules/sub/config; {monitor} >> \"$f\""),
        format!("f=src/nest/.git/config; {monitor} >> \"$f\""),
        format!(
            "f=.git/info/attributes; echo '* filter=evil' > \"$f\"; c=.git/config; printf '[filter \"evil\"]\\n\\tclean = \"{run}\"\\n\\tsmudge = \"{run}\"\\n\\trequired\\n' >> \"$c\""
        ),
        format!(
            "for h in .git/modules/*/hooks .git/hooks; do {hook} > \"$h/pre-commit\"; {hook} > \"$h/post-checkout\"; chmod +x \"$h\"/*; done"
        ),
        format!("f=src/.envrc; echo '{run}' > \"$f\""),
        format!(
            "f=.gitmodules; printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ../lib\\n\\tupdate = !{}\\n' > \"$f\"",
            run.replace(';', " &&")
        ),
        format!(
            "g=git; mkdir -p made && cd made && $g init -q && c=.git/config && {monitor} >> \"$c\""
        ),
    ]
    .iter()
    .map(|planting| unseen_script(planting))
    .collect()
}

/// The checks that would run what was planted: git in every repository, a commit, a
/// submodule update, and a direnv-like `source` of every `.envrc`.
const PLANTED_CHECKS: &str = "checks:\n  - name: trusted git\n    run: |\n      set -e\n      for e in $(find . -name .envrc); do . \"$e\"; done\n      git status\n      git diff HEAD\n      git -C sub status\n      git -C src/nest status\n      test ! -e made/.git/config || git -C made status\n      echo change >> README\n      git add README\n      git -c user.name=t -c user.email=t@t commit -q -m planted\n      git submodule update --init\n      echo checked\n";

#[test]
fn nothing_planted_in_git_or_shell_files_runs_on_the_trusted_side() {
    if landlock_missing() {
        return;
    }
    for placement in ["", "checks: outside"] {
        let scene = repository_scene(&format!("sandbox: {{{placement}}}\n"));
        let marker = scene.path().join("MARK");
        let commands = plantings(&marker);
        let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
        let run = scene.run_with_checks(
            &commands,
            PLANTED_CHECKS,
            &[("TOLLGATE_TEST_SECRET_TOKEN", "s3cret-value")],
        );
        let results = results(&run);
        assert_eq!(results.len(), commands.len(), "{}", run.stderr);
        for ((is_error, content), command) in results.iter().zip(&commands) {
            assert!(
                *is_error && content.contains("changed protected files"),
                "{placement}: {command}: {content}"
            );
        }
        let check = run
            .events()
            .iter()
            .find(|event| event["type"] == "check_result")
            .unwrap();
        assert_eq!(
            check["passed"], true,
            "{placement}: {check}\n{}",
            run.stderr
        );
        assert!(
            !marker.exists(),
            "{placement}: something planted ran: {}",
            std::fs::read_to_string(&marker).unwrap_or_default()
        );
        let ws = scene.path().join("ws");
        assert!(!ws.join("src/.envrc").exists());
        assert!(!ws.join(".git/info/attributes").exists());
        // A repository made in a folder that did not exist at the start was not recorded:
        // tollgate names it and leaves it (it removes only what it recorded); the trusted
        // side's git above ignored its fsmonitor all the same.
        assert!(ws.join("made/.git/config").exists());
        assert!(
            results.last().is_some_and(
                |(_, content)| content.contains("made/.git/config (created, NOT restored")
            ),
            "{placement}: {:?}",
            results.last()
        );
        assert!(
            !std::fs::read_to_string(ws.join(".git/modules/sub/config"))
                .unwrap()
                .contains("fsmonitor")
        );
        assert!(
            !std::fs::read_to_string(ws.join(".gitmodules"))
                .unwrap()
                .contains("update")
        );
    }
}

#[test]
fn new_top_level_entries_and_per_run_caches_are_writable() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox: {}\n");
    let run = scene.run(
        &[
            "mkdir target && echo x > NEWFILE && echo y > target/out && cat NEWFILE target/out",
            &unseen_script("for v in XDG_CACHE_HOME CARGO_HOME GOCACHE GOMODCACHE npm_config_cache PIP_CACHE_DIR; do d=$(printenv $v); case \"$d\" in \"$TMPDIR\"/*) echo ok > \"$d/probe\" && echo \"$v\";; *) echo \"$v=$d not per-run\";; esac; done"),
            "rm -rf target NEWFILE && ls",
        ],
        &[],
    );
    let results = results(&run);
    assert_eq!(results[0], (false, "x\ny".to_string()), "{}", run.stderr);
    assert_eq!(
        results[1],
        (
            false,
            "XDG_CACHE_HOME\nCARGO_HOME\nGOCACHE\nGOMODCACHE\nnpm_config_cache\nPIP_CACHE_DIR"
                .to_string()
        )
    );
    assert_eq!(results[2], (false, "src".to_string()));
    // `caches: inherit` leaves them as tollgate's environment has them.
    let scene = Scene::new("sandbox: {caches: inherit}\n");
    let run = scene.run(&["echo \"[${GOCACHE:-}]\""], &[("GOCACHE", "/nowhere")]);
    assert_eq!(self::results(&run)[0], (false, "[]".to_string()));
}

#[test]
fn hooks_run_in_the_sandbox_unless_the_policy_says_outside() {
    if landlock_missing() {
        return;
    }
    for (placement, escapes) in [("", false), ("hooks: outside", true)] {
        let scene = Scene::new("");
        let escaped = scene.path().join("hook-escaped.txt");
        let policy = format!(
            "permissions:\n  default_mode: bypassPermissions\nhooks:\n  - {{event: PreToolUse, matcher: Bash, command: 'f={}; echo x > \"$f\"; exit 0'}}\nsandbox: {{{placement}}}\n",
            escaped.display()
        );
        // The managed policy's hooks run; a task's own policy file could not add any.
        let managed = scene.path().join("managed.yaml");
        std::fs::write(&managed, policy).unwrap();
        let managed = managed.display().to_string();
        let run = scene.run_with_args(&["echo ran"], "", &[], &["--policy", &managed]);
        assert_eq!(
            escaped.exists(),
            escapes,
            "{placement}: {}\n{}",
            run.stdout,
            run.stderr
        );
        let expected = if escapes {
            "hooks run OUTSIDE"
        } else {
            "checks and hooks run in it"
        };
        assert!(run.stdout.contains(expected), "{placement}: {}", run.stdout);
    }
}

/// The variable that turns `socket_probe` into the probe itself: the TCP port to reach, the TCP
/// port no rule allows, the UDP port, separated by spaces.
const PROBE_PORTS: &str = "TOLLGATE_TEST_SOCKET_PROBE";

/// Opens a socket of each kind and uses it: one line per probe, `NAME refused ERRNO`,
/// `NAME failed ERRNO` (opened but could not be used) or `NAME OPEN`.
fn probe_sockets(tcp_allowed: u16, tcp_other: u16, udp: u16) -> Vec<String> {
    let loopback = |port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let size_in = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // `use` takes the open socket and returns a system call's result (-1 on failure).
    let probe = |name: &str, family: i32, kind: i32, proto: i32, use_it: &dyn Fn(i32) -> isize| {
        // SAFETY: plain system calls on a descriptor this closure owns and closes; the
        // pointers given to `use_it`'s calls point to locals that outlive them.
        unsafe {
            let fd = libc::socket(family, kind, proto);
            if fd < 0 {
                return format!("{name} refused {}", errno());
            }
            let line = if use_it(fd) < 0 {
                format!("{name} failed {}", errno())
            } else {
                format!("{name} OPEN")
            };
            libc::close(fd);
            line
        }
    };
    let connect_and_send = |port: u16| {
        move |fd: i32| -> isize {
            let address = loopback(port);
            // SAFETY: `address` lives across both calls; the buffer is a static string.
            unsafe {
                if libc::connect(fd, (&raw const address).cast(), size_in) < 0 {
                    return -1;
                }
                libc::send(fd, b"leak".as_ptr().cast(), 4, 0)
            }
        }
    };
    let send_to = |port: u16, bytes: &'static [u8]| {
        move |fd: i32| -> isize {
            let address = loopback(port);
            // SAFETY: as above.
            unsafe {
                libc::sendto(
                    fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    0,
                    (&raw const address).cast(),
                    size_in,
                )
            }
        }
    };
    let bind_lo = |fd: i32| -> isize {
        // SAFETY: a zeroed sockaddr_ll is valid; `lo` is a NUL-terminated literal.
        unsafe {
            let mut address: libc::sockaddr_ll = std::mem::zeroed();
            address.sll_family = libc::AF_PACKET as u16;
            address.sll_ifindex = libc::if_nametoindex(c"lo".as_ptr()) as i32;
            let size = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            libc::bind(fd, (&raw const address).cast(), size) as isize
        }
    };
    let nothing = |_: i32| -> isize { 0 };
    const MPTCP: i32 = 262;
    // An ICMP echo request with its checksum.
    const ECHO: &[u8] = b"\x08\x00\xf7\xff\x00\x00\x00\x00";
    vec![
        probe(
            "mptcp",
            libc::AF_INET,
            libc::SOCK_STREAM,
            MPTCP,
            &connect_and_send(tcp_other),
        ),
        probe(
            "mptcp6",
            libc::AF_INET6,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
            MPTCP,
            &nothing,
        ),
        probe(
            "udp",
            libc::AF_INET,
            libc::SOCK_DGRAM,
            0,
            &send_to(udp, b"leak"),
        ),
        probe(
            "icmp",
            libc::AF_INET,
            libc::SOCK_RAW,
            libc::IPPROTO_ICMP,
            &send_to(0, ECHO),
        ),
        // ETH_P_ALL in network byte order, as packet(7) asks.
        probe(
            "packet",
            libc::AF_PACKET,
            libc::SOCK_RAW,
            i32::from((libc::ETH_P_ALL as u16).to_be()),
            &bind_lo,
        ),
        probe(
            "netlink_audit",
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            libc::NETLINK_AUDIT,
            &nothing,
        ),
        probe("vsock", libc::AF_VSOCK, libc::SOCK_STREAM, 0, &nothing),
        probe(
            "tcp",
            libc::AF_INET,
            libc::SOCK_STREAM,
            0,
            &connect_and_send(tcp_allowed),
        ),
        probe("unix", libc::AF_UNIX, libc::SOCK_STREAM, 0, &nothing),
    ]
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Two parts in one test. Run by a sandboxed command with `TOLLGATE_TEST_SOCKET_PROBE` set, it
/// is the probe: it prints `probe_sockets`' lines. Run by the suite, it is the probe's control:
/// outside any sandbox it reaches a TCP listener, sends a UDP datagram and opens a Unix
/// socket, so an `OPEN` seen in the sandbox tests below means what it says.
#[test]
fn socket_probe() {
    if let Ok(ports) = std::env::var(PROBE_PORTS) {
        let ports: Vec<u16> = ports
            .split_whitespace()
            .map(|port| port.parse().unwrap())
            .collect();
        for line in probe_sockets(ports[0], ports[1], ports[2]) {
            println!("{line}");
        }
        return;
    }
    let (tcp, tcp_port) = listener();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let lines = probe_sockets(tcp_port, tcp_port, udp_port);
    for open in ["tcp OPEN", "udp OPEN", "unix OPEN"] {
        assert!(lines.iter().any(|line| line == open), "{open}: {lines:?}");
    }
    tcp.set_nonblocking(true).unwrap();
    assert!(
        tcp.accept().is_ok(),
        "the control's TCP probe reached nobody"
    );
    let mut datagram = [0u8; 16];
    assert_eq!(udp.recv(&mut datagram).unwrap(), 4);
}

/// The command that runs `socket_probe` as the probe: this very test binary, by its path.
fn probe_command(tcp_allowed: u16, tcp_other: u16, udp: u16) -> String {
    let binary = std::env::current_exe().unwrap();
    format!(
        "{PROBE_PORTS}='{tcp_allowed} {tcp_other} {udp}' '{}' --exact suite::sandbox::socket_probe --nocapture --test-threads=1",
        binary.display()
    )
}

#[test]
fn network_none_admits_no_socket_but_tcp_to_allowed_ports_and_unix() {
    if landlock_missing() {
        return;
    }
    let (allowed, allowed_port) = listener();
    let (other, other_port) = listener();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let scene = Scene::new(&format!(
        "sandbox:\n  network: {{mode: none, allowed_ports: [{allowed_port}]}}\n"
    ));
    let run = scene.run(&[&probe_command(allowed_port, other_port, udp_port)], &[]);
    let results = results(&run);
    let out = &results[0].1;
    for refused in [
        "mptcp",
        "mptcp6",
        "udp",
        "icmp",
        "packet",
        "netlink_audit",
        "vsock",
    ] {
        assert!(
            out.contains(&format!("{refused} refused {}", libc::EACCES)),
            "{refused}: {out}"
        );
    }
    assert!(out.contains("tcp OPEN"), "{out}");
    assert!(out.contains("unix OPEN"), "{out}");
    other.set_nonblocking(true).unwrap();
    assert!(
        other.accept().is_err(),
        "a listener no rule allows was reached"
    );
    udp.set_nonblocking(true).unwrap();
    assert!(udp.recv(&mut [0u8; 16]).is_err(), "a UDP datagram got out");
    drop(allowed);
}

#[test]
fn network_none_without_ports_admits_no_internet_socket_at_all() {
    if landlock_missing() {
        return;
    }
    let (listener, port) = listener();
    let scene = Scene::new("sandbox:\n  network: {mode: none}\n");
    let run = scene.run(&[&probe_command(port, port, port)], &[]);
    let out = &results(&run)[0].1;
    assert!(
        out.contains(&format!("tcp refused {}", libc::EACCES)),
        "{out}"
    );
    assert!(out.contains("unix OPEN"), "{out}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err());
}

#[test]
fn sandboxed_commands_have_no_capability_even_as_root() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox: {}\n");
    let run = scene.run(&["exec grep ^Cap /proc/self/status"], &[]);
    let (failed, out) = &results(&run)[0];
    assert!(!failed, "{out}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            out.lines()
                .any(|line| line.starts_with(set) && line.ends_with("0000000000000000")),
            "{set}: {out}"
        );
    }
}

/// The `THP_enabled` value of a `/proc/<pid>/status` text.
fn huge_pages(status: &str) -> Option<String> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .map(|value| value.trim().to_string())
}

#[test]
fn commands_start_with_the_huge_page_setting_the_runner_was_given() {
    // The runner's allocator is built not to ask for transparent huge pages; it must not turn
    // them off for the process either (PR_SET_THP_DISABLE passes to every child and survives
    // execve), or the builds the model starts would run without them.
    let Some(own) = huge_pages(&std::fs::read_to_string("/proc/self/status").unwrap()) else {
        return skip("this kernel's /proc/<pid>/status has no THP_enabled line");
    };
    let mut sandboxes = vec![""];
    if !landlock_missing() {
        sandboxes.push("sandbox: {}\n");
    }
    for sandbox in sandboxes {
        let scene = Scene::new(sandbox);
        let run = scene.run(&["exec grep ^THP_enabled /proc/self/status"], &[]);
        let (failed, out) = &results(&run)[0];
        assert!(!failed, "{sandbox}: {out}");
        assert_eq!(
            huge_pages(out).as_deref(),
            Some(own.as_str()),
            "{sandbox}: {out}"
        );
    }
}

#[test]
fn dev_shm_is_not_a_place_to_write() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox: {}\n");
    let name = format!("/dev/shm/tollgate-test-{}", std::process::id());
    let run = scene.run(
        &[&unseen_script(&format!("f={name}; echo x > \"$f\""))],
        &[],
    );
    assert!(refused(&results(&run)[0]), "{:?}", results(&run));
    assert!(!Path::new(&name).exists());
}

#[test]
fn nothing_outlives_a_call_without_a_pids_cgroup() {
    if landlock_missing() {
        return;
    }
    let scene = Scene::new("sandbox: {}\n");
    let run = scene.run(
        &[
            "setsid sh -c 'sleep 2; echo x > src/marker' </dev/null >/dev/null 2>&1 & echo started",
            // A helper that leaves the group and holds stdout: the output before it stays.
            "echo produced; setsid sh -c 'sleep 30' &",
        ],
        &[(tollgate::sandbox::NO_CGROUP_ENV, "1")],
    );
    let started = &run.events()[0];
    assert_eq!(
        started["sandbox"]["process_limit"]["via"], "rlimit",
        "{started}"
    );
    let results = results(&run);
    assert_eq!(results[0], (false, "started".to_string()));
    assert_eq!(results[1], (false, "produced".to_string()));
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        !scene.path().join("ws/src/marker").exists(),
        "a process outlived its call and wrote after the run"
    );
}

/// A real repository in the scene's workspace whose `.git/config` names an external diff
/// program (`ext.sh`): `git diff` is judged read-only, and git runs the planted program.
fn plant_external_diff(scene: &Scene, port: u16) {
    let ws = scene.path().join("ws");
    std::fs::remove_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join("f.txt"), "a\n").unwrap();
    std::fs::write(ws.join("README.md"), "keep me\n").unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "f.txt", "README.md"]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(ws.join("f.txt"), "b\n").unwrap();
    let script = format!(
        "#!/bin/bash\necho planted > pwned\nrm -f README.md\nmv f.txt moved\nmkdir made\nexec 3<>/dev/tcp/127.0.0.1/{port} && echo leak >&3\n"
    );
    std::fs::write(ws.join("ext.sh"), script).unwrap();
    std::fs::set_permissions(
        ws.join("ext.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&["config", "diff.external", "./ext.sh"]);
}

#[test]
fn a_wrong_read_only_verdict_cannot_write_delete_rename_or_connect() {
    if !need_landlock(tollgate::sandbox::kernel_abi(), 3, "the read-only domain") {
        return;
    }
    let (listener, port) = listener();
    listener.set_nonblocking(true).unwrap();
    // No sandbox block at all: the read-only domain is on by default.
    let scene = Scene::with_policy("permissions:\n  default_mode: dontAsk\n", "dontAsk");
    plant_external_diff(&scene, port);
    let run = scene.run(&["git diff"], &[]);
    let decision = run
        .events()
        .iter()
        .find(|event| event["type"] == "permission_decision")
        .unwrap();
    assert_eq!(decision["decision"], "allow", "{decision}");
    assert_eq!(decision["step"], "1c", "{decision}");
    let ws = scene.path().join("ws");
    let (_, out) = &results(&run)[0];
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!ws.join("pwned").exists(), "{out}");
    assert!(!ws.join("made").exists(), "{out}");
    assert!(!ws.join("moved").exists(), "{out}");
    assert!(ws.join("f.txt").exists() && ws.join("README.md").exists());
    assert!(listener.accept().is_err(), "the planted program connected");
    let started = &run.events()[0];
    assert_eq!(started["read_only_commands"]["enforced"], true, "{started}");
    assert!(
        run.stdout.contains("read-only commands: kernel-enforced"),
        "{}",
        run.stdout
    );
    assert!(
        run.step_summary.contains("| Read-only commands | 🔒"),
        "{}",
        run.step_summary
    );

    // A repository's policy cannot turn it off; an operator's can, and then the same verdict
    // is the analyser's word alone: the planted program writes.
    let off_yaml = "sandbox: {enabled: false, read_only_commands: off}\n";
    let repository = Scene::with_policy(
        &format!("permissions:\n  default_mode: dontAsk\n{off_yaml}"),
        "dontAsk",
    );
    plant_external_diff(&repository, port);
    let run = repository.run(&["git diff"], &[]);
    assert!(
        !repository.path().join("ws/pwned").exists(),
        "{}",
        run.stdout
    );
    assert_eq!(run.events()[0]["read_only_commands"]["enforced"], true);
    let off = Scene::with_policy("permissions:\n  default_mode: dontAsk\n", "dontAsk");
    let operator = off.path().join("operator.yaml");
    std::fs::write(&operator, off_yaml).unwrap();
    plant_external_diff(&off, port);
    let run = off.run_with_args(
        &["git diff"],
        "",
        &[],
        &["--policy", operator.to_str().unwrap()],
    );
    assert!(off.path().join("ws/pwned").exists(), "{}", run.stdout);
    assert_eq!(run.events()[0]["read_only_commands"]["enforced"], false);
    assert!(
        run.stdout.contains("read-only commands: NOT enforced"),
        "{}",
        run.stdout
    );
}
