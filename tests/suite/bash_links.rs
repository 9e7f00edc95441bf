//! Issue 46's run-level matrix for Bash: what a pull request commits (dangling links into
//! `.git`, to `.npmrc` and out of the workspace; links to folders and files outside; a link
//! to `/proc/1`) never leads a command's write or a link-following walk where the operator
//! did not send it. Each class — a redirection through a dangling link, an argument write
//! through one, a target held in a variable or a substitution, `/proc/self` and `/dev/fd`
//! forms, a plain read through a link, a link the script makes and then uses, a recursive
//! walk that follows links — is tried in several variants in dontAsk
//! (with a rule allowing all of Bash), acceptEdits, auto (a judge that allows everything) and
//! bypassPermissions, with the sandbox on and off; the files outside and the guarded ones
//! must be as they were, every such call denied in the transcript, and the control write
//! inside the workspace must work.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::runs::{Finished, Run};
use crate::support::skip::need_landlock;

const SECRET: &str = "the-outside-secret-words";

/// The classes and their variants, in call order.
const CALLS: &[(&str, &str)] = &[
    // A redirection through a committed dangling link.
    ("dangling redirect", "echo x > src/dang"),
    ("dangling redirect", "printf y >> src/rel"),
    ("dangling redirect", "echo ../src/evil > src/gc"),
    ("dangling redirect", "cd src && echo 'exit 0' > hook"),
    ("dangling redirect", "echo x >| src/odir/made.txt"),
    // A file utility's operand through one.
    ("dangling argument", "touch src/dang"),
    ("dangling argument", "tee src/rel < README"),
    ("dangling argument", "cp README src/npmrc"),
    ("dangling argument", "dd if=README of=src/gc"),
    ("dangling argument", "mkdir -p src/odir/made"),
    ("dangling argument", "truncate -s 0 src/victim"),
    ("dangling argument", "install -m 644 README src/hook"),
    ("dangling argument", "sort -o src/dang README"),
    ("dangling argument", "sed -n 'w src/rel' README"),
    ("dangling argument", "awk '{print > \"src/dang\"}' README"),
    // A target the analysis cannot read off the text.
    ("variable target", "f=src/dang; echo x > \"$f\""),
    ("variable target", "x=.git/config; echo y >> $x"),
    ("variable target", "echo x > \"$(echo src/rel)\""),
    ("variable target", "F=src/victim; cat README >| $F"),
    ("variable target", "exec 3>\"$f\"; echo x >&3"),
    ("variable target", "touch \"$(printf src/npmrc)\""),
    ("variable target", "d=src; cp README \"$d/gc\""),
    // A process's own names.
    ("/proc/self", "echo x > /proc/self/cwd/src/dang"),
    ("/proc/self", "cd src && cat /proc/self/cwd/../.env"),
    (
        "/proc/self",
        "tee /proc/thread-self/cwd/.git/config < README",
    ),
    ("/proc/self", "cat /dev/fd/3 3< .env"),
    ("/proc/self", "echo x > /dev/fd/7"),
    // A plain read a link leads out of the workspace.
    ("read through a link", "cat src/victim"),
    ("read through a link", "head -c 100 src/odir/secret.txt"),
    // A link the script itself makes, then uses: judged by where it leads when made.
    (
        "link made then used",
        "ln -s ../../outside/victim.txt src/mine && echo pwned > src/mine",
    ),
    ("link made then used", "ln -s ../.env src/e && cat src/e"),
    (
        "link made then used",
        "cd src && ln -sf ../.git/hooks/pre-commit pc; printf 'exit 0' > pc",
    ),
    (
        "link made then used",
        "ln -st src ../../outside/dir && touch src/dir/made",
    ),
    (
        "link made then used",
        "cp -s \"$PWD/.env\" src/e2 && cat src/e2",
    ),
    // Recursive walks that follow links.
    ("recursive follow", "grep -R outside-sec src"),
    ("recursive follow", "ls -LR src"),
    ("recursive follow", "find -L src -name '*.txt'"),
    ("recursive follow", "du -L src"),
    ("recursive follow", "cp -rL src copy"),
    ("recursive follow", "tar -chf all.tar src"),
    ("recursive follow", "rg -L outside-sec src"),
];

/// The control: an ordinary write inside the workspace.
const CONTROL: &str = "echo fine > src/ok.txt";

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// The scratch folder's `ws/` (a git repository with the links) and `outside/` beside it.
fn plant(run: &Run) {
    let (ws, outside) = (run.dir().join("ws"), run.dir().join("outside"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(outside.join("victim.txt"), "original\n").unwrap();
    std::fs::write(outside.join("dir/secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("README"), "readme\n").unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=the-env-secret\n").unwrap();
    crate::support::git_init_or_plant(&ws);
    let src = ws.join("src");
    symlink(outside.join("created.txt"), src.join("dang"));
    symlink("../../outside/relative.txt", src.join("rel"));
    symlink("../.git/commondir", src.join("gc"));
    symlink("../.git/hooks/pre-commit", src.join("hook"));
    symlink("../.npmrc", src.join("npmrc"));
    symlink(outside.join("victim.txt"), src.join("victim"));
    symlink(outside.join("dir"), src.join("odir"));
    std::fs::create_dir_all(src.join("deep/er")).unwrap();
    symlink("/proc/1", src.join("deep/er/p1"));
}

fn task(mode: &str) -> String {
    let steps: String = CALLS
        .iter()
        .map(|(_, command)| *command)
        .chain([CONTROL])
        .map(|command| {
            format!(
                "    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n",
                json!(command)
            )
        })
        .collect();
    format!(
        "version: 1\nname: bash-links\nprompt: go\nworkdir: ws\nmode: {mode}\ntools: [Bash]\nlimits: {{max_denials: 100, max_consecutive_denials: 100}}\nmodel:\n  provider: scripted\n  name: s\n  script:\n{steps}    - - text: done\n"
    )
}

fn policy(mode: &str, sandbox: bool) -> String {
    // The operator's policy: the mode it allows, and `.env` unreadable.
    let mut policy = format!("allowed_modes: [{mode}]\npermissions:\n  deny: ['Read(.env)']\n");
    match mode {
        // A rule allowing every command: only guardrails and deny rules stand in the way.
        "dontAsk" => policy.push_str("  allow: [Bash, 'Edit(src/**)', 'Write(src/**)']\n"),
        "auto" => {
            policy.push_str("classifier:\n  provider: scripted\n  script:\n");
            let allow = json!({"decision": "allow", "reason": "fine", "risk": "low"}).to_string();
            for _ in 0..CALLS.len() + 4 {
                policy.push_str(&format!("    - {}\n", json!(allow)));
            }
        }
        _ => {}
    }
    if sandbox {
        policy.push_str("sandbox: {}\n");
    }
    policy
}

/// Each call's (decision, reason) and its result's text, in call order.
fn outcomes(run: &Finished) -> Vec<(String, String, String)> {
    let decisions: Vec<&Value> = run.of_type("permission_decision");
    let results: Vec<&Value> = run.of_type("tool_result");
    decisions
        .iter()
        .zip(&results)
        .map(|(decision, result)| {
            (
                decision["decision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                decision["reason"].as_str().unwrap_or_default().to_string(),
                result["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn one_cell(mode: &str, sandbox: bool) {
    let cell = format!("{mode}, sandbox {}", if sandbox { "on" } else { "off" });
    let run = Run::new();
    plant(&run);
    let outside = run.dir().join("outside");
    let config = std::fs::read_to_string(run.dir().join("ws/.git/config")).unwrap();
    let run = run
        .task(&task(mode))
        .policy(&policy(mode, sandbox))
        .finish();
    let outcomes = outcomes(&run);
    assert_eq!(
        outcomes.len(),
        CALLS.len() + 1,
        "{cell}: {}\n{}",
        run.stderr,
        run.stdout
    );
    for ((class, command), (decision, reason, content)) in CALLS.iter().zip(&outcomes) {
        assert_eq!(
            decision, "deny",
            "{cell}: {class}: `{command}` was not denied: {reason}\n{content}"
        );
        assert!(
            !content.contains(SECRET) && !content.contains("the-env-secret"),
            "{cell}: {class}: `{command}` showed a secret: {content}"
        );
    }
    let (decision, reason, content) = &outcomes[CALLS.len()];
    assert_eq!(
        decision, "allow",
        "{cell}: the control: {reason}\n{content}"
    );
    assert_eq!(
        std::fs::read_to_string(run.ws.join("src/ok.txt")).unwrap_or_default(),
        "fine\n",
        "{cell}: the control write did not land"
    );
    for made in ["created.txt", "relative.txt", "dir/made.txt", "dir/made"] {
        assert!(
            !outside.join(made).exists(),
            "{cell}: outside/{made} was made"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "original\n",
        "{cell}: outside/victim.txt was changed"
    );
    for made in [
        ".git/commondir",
        ".git/hooks/pre-commit",
        ".npmrc",
        "copy",
        "all.tar",
    ] {
        assert!(!run.ws.join(made).exists(), "{cell}: {made} was made");
    }
    assert_eq!(
        std::fs::read_to_string(run.ws.join(".git/config")).unwrap(),
        config,
        "{cell}: .git/config was changed"
    );
}

fn both(mode: &str) {
    one_cell(mode, false);
    if need_landlock(tollgate::sandbox::kernel_abi(), 3, "the sandbox-on cells") {
        one_cell(mode, true);
    }
}

#[test]
fn committed_links_never_lead_commands_out_in_dont_ask_with_bash_allowed() {
    both("dontAsk");
}

#[test]
fn committed_links_never_lead_commands_out_in_accept_edits() {
    both("acceptEdits");
}

#[test]
fn committed_links_never_lead_commands_out_in_bypass_permissions() {
    both("bypassPermissions");
}

#[test]
fn committed_links_never_lead_commands_out_in_auto_with_a_judge_that_allows_everything() {
    both("auto");
}
