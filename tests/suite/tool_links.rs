//! In-process file tools act beneath their root, on the descriptor they judged
//! (docs/security.md, "File tools act beneath their root"): links a pull request commits —
//! dangling ones, chains, a link used as a folder, `/proc/self/cwd` behind a name, links to
//! files and folders outside — never lead Write, Edit, Read, Glob or Grep out of the
//! workspace, in dontAsk (with allow rules for `src/`), acceptEdits, bypassPermissions and
//! auto (a judge that allows everything), with the sandbox on and off. With the sandbox on, a
//! `deny_write` folder the gate lets through is refused by the kernel to the Write tool too:
//! the tools' work runs under the commands' Landlock domain.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::runs::{Finished, Run};

const SECRET: &str = "the-outside-secret-words";

/// The calls every run makes, in order, with what each must not achieve.
fn calls(outside: &Path) -> Vec<(&'static str, Value)> {
    // The secret as `/proc/self/root` behind a committed name reaches it.
    let through_root = Path::new("src/root").join(
        outside
            .join("secret.txt")
            .strip_prefix("/")
            .unwrap_or(outside),
    );
    vec![
        // Dangling links the kernel would follow to create a file outside.
        ("Write", json!({"file_path": "src/dang", "content": "x"})),
        ("Write", json!({"file_path": "src/rel", "content": "x"})),
        ("Write", json!({"file_path": "src/c1", "content": "x"})),
        (
            "Write",
            json!({"file_path": "src/dir/made.txt", "content": "x"}),
        ),
        // A magic link behind a committed name: tollgate's working directory.
        (
            "Write",
            json!({"file_path": "src/pr/outside/magic.txt", "content": "x"}),
        ),
        // An existing file outside, through a link and through a chain.
        ("Read", json!({"file_path": "src/edit"})),
        (
            "Edit",
            json!({"file_path": "src/edit", "old_string": "original", "new_string": "changed"}),
        ),
        (
            "Edit",
            json!({"file_path": "src/chain-edit", "old_string": "original", "new_string": "changed"}),
        ),
        ("Read", json!({"file_path": "src/secret"})),
        ("Read", json!({"file_path": "src/hop-secret"})),
        ("Read", json!({"file_path": through_root})),
        (
            "Grep",
            json!({"pattern": "outside-sec.et-words", "output_mode": "content"}),
        ),
        ("Glob", json!({"pattern": "**/*.txt"})),
        // The control: an ordinary write inside the workspace works in every cell.
        (
            "Write",
            json!({"file_path": "src/ok.txt", "content": "fine"}),
        ),
        // The sandbox's `deny_write` folder (only in the sandbox cells does it exist as one).
        (
            "Write",
            json!({"file_path": "locked/x.txt", "content": "x"}),
        ),
    ]
}

/// Index of the control call and of the `deny_write` write in [`calls`].
const CONTROL: usize = 13;
const LOCKED: usize = 14;

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// The scratch folder's `ws/` with the links, and `outside/` beside it.
fn plant(run: &Run) {
    let (ws, outside) = (run.dir().join("ws"), run.dir().join("outside"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join("locked")).unwrap();
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(outside.join("victim.txt"), "original\n").unwrap();
    std::fs::write(outside.join("chained.txt"), "original\n").unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(outside.join("dir/listed.txt"), format!("{SECRET}\n")).unwrap();
    let src = ws.join("src");
    symlink(outside.join("created.txt"), src.join("dang"));
    symlink("../../outside/relative.txt", src.join("rel"));
    symlink("c2", src.join("c1"));
    symlink(outside.join("chain.txt"), src.join("c2"));
    symlink(outside.join("newdir"), src.join("dir"));
    symlink("/proc/self/cwd", src.join("pr"));
    symlink(outside.join("victim.txt"), src.join("edit"));
    symlink("hop", src.join("chain-edit"));
    symlink(outside.join("chained.txt"), src.join("hop"));
    symlink(outside.join("secret.txt"), src.join("secret"));
    symlink("hop2", src.join("hop-secret"));
    symlink(outside.join("secret.txt"), src.join("hop2"));
    symlink("/proc/self/root", src.join("root"));
    symlink(outside.join("dir"), src.join("odir"));
}

fn task(mode: &str, outside: &Path) -> String {
    let steps: String = calls(outside)
        .iter()
        .map(|(name, input)| format!("    - - tool_use: {{name: {name}, input: {input}}}\n"))
        .collect();
    format!(
        "version: 1\nname: links\nprompt: go\nworkdir: ws\nmode: {mode}\ntools: [Read, Write, Edit, Glob, Grep]\nmodel:\n  provider: scripted\n  name: s\n  script:\n{steps}    - - text: done\n"
    )
}

fn policy(mode: &str, sandbox: bool) -> String {
    // The operator's policy is the managed one here: it names the mode it allows.
    let mut policy = format!("allowed_modes: [{mode}]\n");
    match mode {
        "dontAsk" => policy.push_str(
            "permissions:\n  allow: ['Write(src/**)', 'Edit(src/**)', 'Write(locked/**)']\n",
        ),
        "auto" => {
            policy.push_str("classifier:\n  provider: scripted\n  script:\n");
            let allow = json!({"decision": "allow", "reason": "fine", "risk": "low"}).to_string();
            for _ in 0..40 {
                policy.push_str(&format!("    - {}\n", json!(allow)));
            }
        }
        _ => {}
    }
    if sandbox {
        policy.push_str("sandbox:\n  filesystem:\n    deny_write: [locked]\n");
    }
    policy
}

/// Each tool result's (is_error, content), in call order.
fn results(run: &Finished) -> Vec<(bool, String)> {
    run.events()
        .iter()
        .filter(|event| event["type"] == "tool_result")
        .map(|event| {
            (
                event["is_error"].as_bool().unwrap_or(false),
                event["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn one_cell(mode: &str, sandbox: bool) {
    let cell = format!("{mode}, sandbox {}", if sandbox { "on" } else { "off" });
    let run = Run::new();
    plant(&run);
    let outside = run.dir().join("outside");
    let policy = policy(mode, sandbox);
    let run = run.task(&task(mode, &outside));
    let run = run.policy(&policy).finish();
    let results = results(&run);
    assert_eq!(
        results.len(),
        calls(&outside).len(),
        "{cell}: {}\n{}",
        run.stderr,
        run.stdout
    );
    for made in [
        "created.txt",
        "relative.txt",
        "chain.txt",
        "newdir",
        "magic.txt",
    ] {
        assert!(!outside.join(made).exists(), "{cell}: {made} was created");
    }
    for kept in ["victim.txt", "chained.txt"] {
        assert_eq!(
            std::fs::read_to_string(outside.join(kept)).unwrap(),
            "original\n",
            "{cell}: {kept} was changed"
        );
    }
    for (index, (name, input)) in calls(&outside).iter().enumerate() {
        let (is_error, content) = &results[index];
        match index {
            CONTROL => assert!(!is_error, "{cell}: the control write failed: {content}"),
            LOCKED => {}
            _ if *name == "Glob" || *name == "Grep" => assert!(
                !is_error && !content.contains(SECRET) && !content.contains("listed.txt"),
                "{cell}: {name} reached outside: {content}"
            ),
            _ => assert!(
                *is_error,
                "{cell}: {name} {input} was not refused: {content}"
            ),
        }
        assert!(
            !content.contains(SECRET),
            "{cell}: {name} {input} showed the secret: {content}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(run.ws.join("src/ok.txt"))
            .unwrap_or_else(|err| panic!("{cell}: {err}\n{results:#?}")),
        "fine"
    );
    // The kernel holds the tool to the commands' domain: `deny_write` refuses the Write the
    // gate allowed, and only with the sandbox on.
    let (locked_error, locked) = &results[LOCKED];
    let written = run.ws.join("locked/x.txt").exists();
    match (sandbox, mode) {
        (true, _) => {
            assert!(
                *locked_error && !written,
                "{cell}: deny_write did not hold the Write tool: {locked}"
            );
            assert!(locked.contains("Permission denied"), "{cell}: {locked}");
        }
        (false, "acceptEdits" | "bypassPermissions" | "dontAsk") => {
            assert!(!locked_error && written, "{cell}: {locked}");
        }
        (false, _) => {}
    }
}

fn landlock_missing() -> bool {
    let abi = tollgate::sandbox::kernel_abi();
    if abi < 3 {
        eprintln!("sandbox cells skipped: this kernel offers Landlock ABI {abi}; they need 3");
        return true;
    }
    false
}

#[test]
fn links_never_lead_file_tools_out_in_dont_ask() {
    one_cell("dontAsk", false);
    if !landlock_missing() {
        one_cell("dontAsk", true);
    }
}

#[test]
fn links_never_lead_file_tools_out_in_accept_edits() {
    one_cell("acceptEdits", false);
    if !landlock_missing() {
        one_cell("acceptEdits", true);
    }
}

#[test]
fn links_never_lead_file_tools_out_in_bypass_permissions() {
    one_cell("bypassPermissions", false);
    if !landlock_missing() {
        one_cell("bypassPermissions", true);
    }
}

#[test]
fn links_never_lead_file_tools_out_in_auto_with_a_judge_that_allows_everything() {
    one_cell("auto", false);
    if !landlock_missing() {
        one_cell("auto", true);
    }
}
