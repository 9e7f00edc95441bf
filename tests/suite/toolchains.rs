//! Real toolchains under `policies/ci-default.yaml` (the sandbox on, network none): each
//! project is a fresh checkout with no pre-created folders, its test command runs through
//! tollgate (a scripted model calls Bash) and directly, and both must end alike — the same
//! exit code and the same pass line. A toolchain this machine lacks is skipped through
//! `support::skip` (cargo is always there); CI installs the others (`.ci/run`).

use std::path::Path;
use std::process::Command;

use crate::support::repo_root;
use crate::support::runs::run_task;
use crate::support::skip::{need_landlock, on_path, skip};

/// One project: its files, the command the model runs, the line that says it passed.
struct Project {
    name: &'static str,
    tool: &'static str,
    files: &'static [(&'static str, &'static str)],
    command: &'static str,
    pass_line: &'static str,
    /// How to get the tool where it is missing.
    install: &'static str,
}

const PROJECTS: &[Project] = &[
    Project {
        name: "cargo",
        tool: "cargo",
        files: &[
            (
                "Cargo.toml",
                "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            (
                "src/lib.rs",
                "pub fn add(a: u32, b: u32) -> u32 { a + b }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n}\n",
            ),
        ],
        command: "cargo test --offline",
        pass_line: "test result: ok. 1 passed",
        install: "rustup",
    },
    Project {
        name: "pytest",
        tool: "pytest",
        files: &[
            ("tiny.py", "def add(a, b):\n    return a + b\n"),
            (
                "tests/test_tiny.py",
                "from tiny import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
            ),
            (
                "pyproject.toml",
                "[tool.pytest.ini_options]\npythonpath = [\".\"]\n",
            ),
        ],
        command: "pytest",
        pass_line: "1 passed",
        install: "`python3 -m pip install pytest`, or Debian: apt-get install python3-pytest",
    },
    Project {
        name: "node --test",
        tool: "node",
        files: &[(
            "test/add.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(2 + 2, 4));\n",
        )],
        command: "node --test",
        pass_line: "# pass 1",
        install: "Debian: apt-get install nodejs",
    },
    Project {
        name: "npm test",
        tool: "npm",
        files: &[
            (
                "package.json",
                "{\"name\": \"tiny\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node --test\"}}\n",
            ),
            (
                "test/add.test.js",
                "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(2 + 2, 4));\n",
            ),
        ],
        command: "npm test",
        pass_line: "# pass 1",
        install: "Debian: apt-get install npm",
    },
    Project {
        name: "go test",
        tool: "go",
        files: &[
            ("go.mod", "module tiny\n\ngo 1.19\n"),
            (
                "add.go",
                "package tiny\n\nfunc Add(a, b int) int { return a + b }\n",
            ),
            (
                "add_test.go",
                "package tiny\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
            ),
        ],
        command: "go test ./...",
        pass_line: "ok  \ttiny",
        install: "Debian: apt-get install golang-go",
    },
    Project {
        name: "make test",
        tool: "make",
        files: &[
            (
                "Makefile",
                "test: build/add\n\t./build/add && echo 'make: 1 passed'\n\nbuild/add: add.sh\n\tmkdir -p build\n\tcp add.sh build/add\n\tchmod +x build/add\n",
            ),
            ("add.sh", "#!/bin/sh\n[ $((2 + 2)) -eq 4 ]\n"),
        ],
        command: "make test",
        pass_line: "make: 1 passed",
        install: "Debian: apt-get install make",
    },
];

/// A fresh checkout of `project` in `dir`: its files, committed, nothing else.
fn checkout(project: &Project, dir: &Path) {
    for (path, text) in project.files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "0",
        ],
    ] {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

/// The pass line as printed, with durations and rulers taken out (they differ run to run).
fn pass_line(output: &str, wanted: &str) -> Option<String> {
    let line = output.lines().find(|line| line.contains(wanted))?;
    let kept: Vec<&str> = line
        .split_whitespace()
        .filter(|word| !word.chars().all(|c| c == '='))
        .filter(|word| {
            let bare = word.trim_matches(|c| c == '(' || c == ')');
            let number = bare.trim_end_matches("ms").trim_end_matches('s');
            !(bare.ends_with('s')
                && !number.is_empty()
                && number.chars().all(|c| c.is_ascii_digit() || c == '.'))
        })
        .collect();
    Some(kept.join(" "))
}

#[test]
fn real_toolchains_pass_under_ci_default_as_they_do_without_the_sandbox() {
    if !need_landlock(tollgate::sandbox::kernel_abi(), 4, "ci-default's sandbox") {
        return;
    }
    // ci-default as shipped, plus what a user adds for `node --test` (it names npm's).
    let shipped = std::fs::read_to_string(repo_root().join("policies/ci-default.yaml")).unwrap();
    let policy = shipped.replacen(
        "    - \"Bash(npm test:*)\"\n",
        "    - \"Bash(npm test:*)\"\n    - \"Bash(node --test:*)\"\n",
        1,
    );
    assert_ne!(policy, shipped, "ci-default no longer allows `npm test`");
    let mut ran = Vec::new();
    for project in PROJECTS {
        // On PATH, not `TOOL --version`: `go` has no such option, so go was never tested.
        if on_path(project.tool).is_none() {
            skip(&format!(
                "{}: `{}` is not installed on this machine ({})",
                project.name, project.tool, project.install
            ));
            continue;
        }
        let scratch = tempfile::tempdir().unwrap();
        let bare = scratch.path().join("bare");
        let ws = scratch.path().join("ws");
        checkout(project, &bare);
        checkout(project, &ws);
        let direct = Command::new("bash")
            .args(["-c", project.command])
            .current_dir(&bare)
            .output()
            .unwrap();
        let direct_out = format!(
            "{}{}",
            String::from_utf8_lossy(&direct.stdout),
            String::from_utf8_lossy(&direct.stderr)
        );
        assert!(direct.status.success(), "{}: {direct_out}", project.name);
        std::fs::write(scratch.path().join("policy.yaml"), &policy).unwrap();
        let task = format!(
            "version: 1\nname: {name}\nprompt: go\nworkdir: ws\npolicy: policy.yaml\ntools: [Bash]\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - tool_use: {{name: Bash, input: {{command: {command}, timeout: 300000}}}}\n    - - text: done\nchecks:\n  - name: again\n    run: {command}\n",
            name = serde_json::to_string(project.name).unwrap(),
            command = serde_json::to_string(project.command).unwrap(),
        );
        let task_path = scratch.path().join("task.yaml");
        std::fs::write(&task_path, task).unwrap();
        let run = run_task(&task_path, &[], &[]);
        let events = run.events();
        let decision = events
            .iter()
            .find(|event| event["type"] == "permission_decision")
            .map(|event| event["decision"].to_string());
        assert_eq!(
            decision.as_deref(),
            Some("\"allow\""),
            "{}: {}",
            project.name,
            run.stderr
        );
        let result = events
            .iter()
            .find(|event| event["type"] == "tool_result")
            .unwrap();
        let content = result["content"].as_str().unwrap_or_default();
        assert_eq!(
            result["is_error"], false,
            "{}: in the sandbox: {content}",
            project.name
        );
        assert_eq!(
            pass_line(content, project.pass_line),
            pass_line(&direct_out, project.pass_line),
            "{}: sandboxed:\n{content}\ndirect:\n{direct_out}",
            project.name
        );
        assert!(pass_line(content, project.pass_line).is_some(), "{content}");
        // Not merely passing: nothing the toolchain wanted to write was refused.
        for refusal in ["Permission denied", "EACCES", "Read-only file system"] {
            assert!(
                !content.contains(refusal),
                "{}: {refusal} in the sandbox:\n{content}",
                project.name
            );
        }
        // The check runs the same command, in the sandbox too (the default).
        assert_eq!(
            run.code, 0,
            "{}: {}\n{}",
            project.name, run.stdout, run.stderr
        );
        ran.push(project.name);
    }
    eprintln!("toolchains run under ci-default: {}", ran.join(", "));
    assert!(ran.contains(&"cargo"), "cargo is always there");
}
