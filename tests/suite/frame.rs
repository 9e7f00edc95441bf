//! Issue 46 item 2 end to end: a Bash path is judged as the object the kernel reaches from the
//! command's working directory — committed links followed, dangling ones included, and
//! `/proc/self` as the command's own — and no decision depends on the folder tollgate was
//! started in.

use serde_json::Value;

use crate::support::tollgate_in;

/// The decision and step `check` prints for `command`, started in `start`.
fn decide(
    start: &std::path::Path,
    root: &std::path::Path,
    mode: &str,
    command: &str,
) -> (String, String) {
    let input = serde_json::json!({ "command": command }).to_string();
    let output = tollgate_in(start)
        .args(["check", "--policy"])
        .arg(root.join("p.yaml"))
        .arg("--workdir")
        .arg(root.join("ws"))
        .args(["--mode", mode, "--tool", "Bash", "--input", &input])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    let reason = line["reason"].as_str().unwrap_or_default();
    assert!(
        !reason.contains("/dev/pts") && !reason.contains("pipe:["),
        "a reason shows tollgate's own descriptors: {reason}"
    );
    (
        line["decision"].as_str().unwrap().to_string(),
        line["step"].as_str().unwrap().to_string(),
    )
}

#[test]
fn paths_are_judged_in_the_command_s_frame_wherever_tollgate_starts() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::create_dir_all(root.join("outside")).unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    crate::support::git_init_or_plant(&ws);
    // Committed links: dangling to outside, dangling into git's directory (relative and
    // through a chain), and a folder link out.
    let link =
        |target: &str, name: &str| std::os::unix::fs::symlink(target, ws.join(name)).unwrap();
    link(&root.join("outside/X").to_string_lossy(), "src/dang");
    link("../.git/commondir", "src/gc");
    link("gc", "src/gc2");
    link("../../.git/hooks/pre-commit", "src/deep/hook");
    link(&root.join("outside").to_string_lossy(), "src/out");
    std::fs::write(
        root.join("p.yaml"),
        "permissions:\n  deny: [\"Read(.env)\"]\n",
    )
    .unwrap();

    let refused = [
        "cat /proc/self/cwd/.env",
        "cd src && cat /proc/thread-self/cwd/../.env",
        "cat /dev/fd/3",
        "cat /proc/self/environ",
        "echo x > src/dang",
        "cd src && echo x >> dang",
        "echo ../src/evil > src/gc",
        "printf x > src/gc2",
        "echo 'exit 0' > src/deep/hook",
        "echo x > src/out/new",
    ];
    let allowed = ["echo hi > /dev/stdout", "echo hi >&2 2>/dev/stderr"];
    // The command's own status file: no guardrail, but outside the workspace, so an ask that
    // only bypassPermissions answers.
    let own_status = "cat /proc/self/status";
    let starts = [
        root.clone(),
        ws.join("src/deep"),
        root.join("outside"),
        "/".into(),
    ];
    for mode in ["dontAsk", "bypassPermissions"] {
        for command in refused.iter().chain(&allowed).chain([&own_status]) {
            let decisions: Vec<_> = starts
                .iter()
                .map(|start| decide(start, &root, mode, command))
                .collect();
            assert!(
                decisions.windows(2).all(|pair| pair[0] == pair[1]),
                "{mode} {command:?}: the decision depends on where tollgate started: {decisions:?}"
            );
            let want = if allowed.contains(command)
                || (*command == own_status && mode == "bypassPermissions")
            {
                "allow"
            } else {
                "deny"
            };
            assert_eq!(decisions[0].0, want, "{mode} {command:?}: {decisions:?}");
        }
    }
    // `/proc/self/root` is the command's `/`: judged exactly as the path without it.
    for mode in ["dontAsk", "bypassPermissions"] {
        for (through, plain) in [
            ("cat /proc/self/root/etc/hostname", "cat /etc/hostname"),
            ("cd src && cat /proc/self/cwd/../.env", "cat .env"),
        ] {
            assert_eq!(
                decide(&ws.join("src/deep"), &root, mode, through),
                decide(&root, &root, mode, plain),
                "{mode} {through:?}"
            );
        }
    }
    assert!(!root.join("outside/X").exists());
}
