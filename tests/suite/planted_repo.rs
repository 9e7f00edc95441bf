//! Planted repositories end to end: a model that may edit `src/**` and run `git status` tries
//! to make a folder a git repository whose config runs a marker command (`core.fsmonitor`),
//! by every route it has, and then runs git in it. The marker must never appear.

use std::path::Path;
use std::process::Command;

use crate::support::Run;

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap()
}

/// A bare-repository config whose fsmonitor touches `marker`, with `worktree` as work tree.
fn planted_config(worktree: &Path, marker: &Path) -> String {
    format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {}\n\tfsmonitor = \"touch {}; false\"\n",
        worktree.display(),
        marker.display()
    )
}

#[test]
fn a_planted_repository_never_runs_its_config() {
    let run = Run::new().file("ws/src/lib.rs", "pub fn f() {}\n");
    let root = run.dir().canonicalize().unwrap();
    let ws = root.join("ws");
    let marker = root.join("MARK");
    assert!(git(&ws, &["init", "-q"]).status.success());

    // A repository-shaped folder that is already there (committed as a test fixture, or
    // unpacked by a build): only the git environment keeps git out of it.
    let fixture = ws.join("src/fixture");
    std::fs::create_dir_all(fixture.join("objects")).unwrap();
    std::fs::create_dir_all(fixture.join("refs/heads")).unwrap();
    std::fs::write(fixture.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        fixture.join("config"),
        planted_config(&ws.join("src"), &marker),
    )
    .unwrap();
    // Unconfined, git obeys it: so this test can fail.
    git(&fixture, &["status"]);
    assert!(
        marker.exists(),
        "the fixture should run its fsmonitor unconfined"
    );
    std::fs::remove_file(&marker).unwrap();

    let run = run.policy(
        "permissions:\n  allow: ['Edit(src/**)', 'Bash(git status:*)', 'Bash(mkdir:*)', 'Bash(cp:*)', 'Bash(tar:*)', 'Bash(ln:*)']\n",
    );
    let config = planted_config(&ws.join("src"), &marker);
    let write = |path: &str, content: &str| {
        serde_json::json!({"name": "Write", "input": {"file_path": path, "content": content}})
            .to_string()
    };
    let bash = |command: &str| {
        serde_json::json!({"name": "Bash", "input": {"command": command}}).to_string()
    };
    let planting = [
        write("src/evil/config", &config),
        write("src/evil/objects/info/keep", ""),
        write("src/evil/refs/heads/keep", ""),
        write("src/evil/HEAD", "ref: refs/heads/main\n"),
        write("src/evil/Head", "ref: refs/heads/main\n"),
        write("src/evil2/.git/config", &config),
        write("src/evil3/.GIT/HEAD", "ref: refs/heads/main\n"),
        write("src/evil4.git/HEAD", "ref: refs/heads/main\n"),
        bash("printf 'ref: refs/heads/main\\n' > src/evil/HEAD"),
        bash("cp src/evil/config src/evil/HEAD"),
        bash("ln -s config src/evil/HEAD"),
        bash("mkdir -p src/evil5/.git/objects"),
        bash("cp -r src/evil src/evil6/.git"),
        bash("tar -xf src/planted.tar -C src"),
        // The fixture already has a HEAD: its config and hooks are a repository's.
        write("src/fixture/config", &config),
        bash("cp src/evil/config src/fixture/hooks/post-checkout"),
    ];
    let running = [
        bash("cd src/evil && git status"),
        bash("git -C src/evil status"),
        bash("git -C src/fixture status"),
        bash("cd src/fixture && git status"),
        bash("git status"),
    ];
    let turn = |calls: &[String]| {
        calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                format!(
                    "{}- tool_use: {call}\n",
                    if i == 0 { "    - " } else { "      " }
                )
            })
            .collect::<String>()
    };
    let run = run.task(
        &format!(
            "version: 1\nname: plant\nprompt: go\nmode: dontAsk\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n{}{}    - - text: done\n",
            turn(&planting),
            // One a turn: a failing Bash call cancels its siblings.
            running.iter().map(|call| turn(std::slice::from_ref(call))).collect::<String>()
        ),
    );
    let run = run.finish();
    run.assert_every_tool_use_answered_once();
    let statuses: Vec<String> = run
        .of_type("tool_result")
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    let denied = statuses.iter().filter(|s| *s == "denied").count();
    assert_eq!(
        statuses[..3],
        ["success", "success", "success"],
        "writing a file named config or under objects/ is ordinary: {}",
        run.stdout
    );
    assert_eq!(
        denied,
        planting.len() - 3,
        "every write that makes a repository is refused: {statuses:?}"
    );
    for result in &run.of_type("tool_result")[3..planting.len()] {
        let reason = result["content"].as_str().unwrap();
        assert!(reason.contains("guardrail"), "{reason}");
    }
    // The workspace's own repository still works (also from `src/evil`, which never became a
    // repository); the fixture is refused by git.
    assert_eq!(
        statuses[planting.len()..],
        ["success", "success", "error", "error", "success"]
    );
    let fixture_result = run.of_type("tool_result")[planting.len() + 2]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fixture_result.contains("safe.bareRepository"),
        "{fixture_result}"
    );
    assert!(!marker.exists(), "a planted repository's config ran");
    assert!(!ws.join("src/evil/HEAD").exists());
    assert!(!ws.join("src/evil5/.git").exists());
}
