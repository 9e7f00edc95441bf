//! Every construct that binds a variable is an assignment: `for`/`select`, `read`, `mapfile`,
//! `printf -v`, `wait -p`, `getopts`, the declarations, `unset`, `{NAME}>` redirections, `let`
//! and `(( ))` bind dangerous names only with approval, and what a subscript would run reaches
//! the deny rules.
//! Tables over the library, then an end-to-end run against the fake model server.

use std::process::Stdio;

use serde_json::json;
use tempfile::TempDir;

use crate::support::bash::{analyse, check_consistency, rules};
use crate::support::fake_model::{Api, FakeModel, Reply, reply, text, tool};
use crate::support::{assert_every_tool_use_answered_once, events, repo_root, transcript};
use tollgate::bash::BashVerdict;

/// Every way of binding the variable `{N}` (a read from `f` where input is needed).
const BINDERS: &[&str] = &[
    "for {N} in x; do :; done",
    "for {N} in a b; do echo hi; done",
    "for {N}; do :; done",
    "select {N} in x; do break; done",
    "read {N} < f",
    "read -r a {N} < f",
    "read -ra {N} < f",
    "read -r -a {N} < f",
    "read -p prompt {N} < f",
    "builtin read -r {N} < f",
    "command read -r {N} < f",
    "while read -r {N}; do :; done < f",
    "mapfile {N} < f",
    "mapfile -t {N} < f",
    "readarray -t {N} < f",
    "printf -v {N} %s x",
    "printf -v{N} %s x",
    "wait -p {N}",
    "wait -n -p {N}",
    "wait -np {N}",
    "getopts ab {N}",
    "getopts ab {N} -a",
    "declare {N}=x",
    "declare -x {N}=x",
    "declare -g {N}=x",
    "typeset {N}=x",
    "export {N}=x",
    "readonly {N}=x",
    "f() { local {N}=x; }; f",
    "unset {N}",
    "unset -v {N}",
    "{N}=x",
    "{N}+=x",
    "{N}=x; echo hi",
    "exec {{N}}>/dev/null",
    "exec {{N}}<f",
    "echo hi {{N}}>/dev/null",
];

/// Names whose binding changes what later commands do (one or more from each row of the
/// table in docs/bash.md).
const DANGEROUS: &[&str] = &[
    "PS4",
    "PS1",
    "PS0",
    "PROMPT_COMMAND",
    "PATH",
    "HOME",
    "BASH_ENV",
    "ENV",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "BASHOPTS",
    "SHELLOPTS",
    "BASH_XTRACEFD",
    "BASH_CMDS",
    "BASH_LOADABLES_PATH",
    "EXECIGNORE",
    "HISTFILE",
    "MAILPATH",
    "TMPDIR",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "GIT_DIR",
    "GIT_CONFIG_GLOBAL",
    "PAGER",
    "GIT_PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
    "LESSOPEN",
    "TERMINFO",
    "XDG_CONFIG_HOME",
    "RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "http_proxy",
    "npm_config_script_shell",
    "SOME_UNKNOWN_NAME",
];

/// The script's own names: binding them is harmless.
const HARMLESS: &[&str] = &["f", "line", "out", "x_1", "LANG", "LC_ALL"];

/// Binders that are refused whatever the name (they evaluate arithmetic on it).
const ARITHMETIC: &[&str] = &[
    "let {N}=1",
    "(( {N}=1 ))",
    "(( {N}++ ))",
    "echo $(( {N}=1 ))",
    "[[ {N}=1 -eq 1 ]]",
];

fn decision(script: &str) -> &'static str {
    let analysis = analyse(script, &rules());
    check_consistency(script, &analysis);
    match analysis.verdict {
        BashVerdict::Allow => "allow",
        BashVerdict::Ask { .. } => "ask",
        BashVerdict::Deny { .. } => "deny",
    }
}

#[test]
fn a_binding_of_a_dangerous_name_is_never_proven_harmless() {
    let mut wrong = Vec::new();
    for binder in BINDERS.iter().chain(ARITHMETIC) {
        for name in DANGEROUS {
            let script = binder.replace("{N}", name);
            // `LANG`-like names are harmless; `for http_proxy` is as dangerous as `PATH`.
            if decision(&script) == "allow" {
                wrong.push(script);
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} bindings of dangerous names were allowed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn a_binding_of_the_scripts_own_names_stays_allowed() {
    let mut wrong = Vec::new();
    for binder in BINDERS {
        for name in HARMLESS {
            let script = binder.replace("{N}", name);
            let got = decision(&script);
            if got != "allow" {
                wrong.push(format!("{script} -> {got}"));
            }
        }
    }
    for binder in ARITHMETIC {
        let script = binder.replace("{N}", "i");
        assert_ne!(decision(&script), "allow", "{script}");
    }
    assert!(
        wrong.is_empty(),
        "{} ordinary bindings were refused:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A name written with a subscript that runs `rm` (denied): the rule must decide, whatever
/// the binder and however the subscript is quoted.
#[test]
fn a_subscript_that_runs_a_denied_command_is_denied() {
    let names = [
        "'a[$(rm -f README.md)]'",
        "\"a[\\$(rm -f README.md)]\"",
        "'a[i=$(rm -f README.md)]'",
        "'a[`rm -f README.md`]'",
        "'a[$(echo 1; rm -f README.md)]'",
    ];
    let binders = [
        "read {N} < f",
        "read -r x {N} < f",
        "read -a {N} < f",
        "builtin read {N} < f",
        "mapfile {N} < f",
        "readarray -t {N} < f",
        "printf -v {N} %s x",
        "wait -p {N}",
        "wait -n -p {N}",
        "getopts ab {N}",
        "declare {N}",
        "declare -a {N}",
        "typeset {N}",
        "local {N}",
        "export {N}",
        "readonly {N}",
        "unset {N}",
        "unset -v {N}",
        "let {N}=1",
        "test -v {N}",
        "[[ -v {N} ]]",
    ];
    let mut wrong = Vec::new();
    for binder in binders {
        for name in names {
            let script = binder.replace("{N}", name);
            let got = decision(&script);
            if got != "deny" {
                wrong.push(format!("{script} -> {got}"));
            }
        }
    }
    // The name held in a variable, and the subscript unquoted in arithmetic.
    for script in [
        "n='a[$(rm -f README.md)]'; read \"$n\" < f",
        "n='a[$(rm -f README.md)]'; wait -p \"$n\"",
        "n='a[$(rm -f README.md)]'; printf -v \"$n\" %s x",
        "n='a[$(rm -f README.md)]'; getopts ab \"$n\"",
        "(( a[$(rm -f README.md)]=1 ))",
        "a[$(rm -f README.md)]=1",
        "echo $(( a[$(rm -f README.md)]=1 ))",
        "for PS4 in '$(rm -f README.md)'; do set -x; :; done",
        "for PS1 in '$(rm -f README.md)'; do :; done",
        "select PS4 in '`rm -f README.md`'; do break; done",
        "mapfile -C 'rm -f README.md' -c 1 lines < f",
        "readarray -C 'rm -f README.md' lines < f",
        "mapfile -tC 'rm -f README.md' lines < f",
        "exec {a[$(rm -f README.md)]}>/dev/null",
        "echo hi {a[`rm -f README.md`]}>/dev/null",
    ] {
        let got = decision(script);
        if got != "deny" {
            wrong.push(format!("{script} -> {got}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} subscripts did not reach the deny rule:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn subscripts_and_builtin_options_are_read_as_bash_reads_them() {
    let cases = [
        ("read -r 'a[0]' < f", "allow"),
        ("printf -v 'a[1]' %s x", "allow"),
        ("read -r 'a[i]' < f", "ask"),
        ("read -r 'a[i++]' < f", "ask"),
        ("wait -p 'a[$(touch m)]'", "ask"),
        ("mapfile -C 'echo hi' lines < f", "ask"),
        ("mapfile -C \"$cb\" lines < f", "ask"),
        ("read -X x < f", "ask"),
        ("read \"$name\" < f", "ask"),
        ("printf -v \"$name\" %s x", "ask"),
        ("wait -p \"$name\"", "ask"),
        ("declare -n ref=PATH", "ask"),
        ("declare -n ref=x", "ask"),
        ("for f in src/a src/b; do echo \"$f\"; done", "allow"),
        ("read -r line < f", "allow"),
        ("declare -a arr=(1 2)", "allow"),
        ("IFS= read -r line < f", "allow"),
        ("while IFS=, read -r a b; do echo \"$a\"; done < f", "allow"),
        ("IFS=, read -r a PATH < f", "ask"),
        ("read() { ls; }; IFS=x read", "ask"),
        ("IFS=x echo a", "ask"),
        (
            "for x in '$(rm -f README.md)'; do echo \"$x\"; done",
            "allow",
        ),
    ];
    for (script, want) in cases {
        assert_eq!(decision(script), want, "{script}");
    }
}

// ---- end to end, over real HTTP: the fake model asks for each binding; nothing happens ----

const KEY: &str = "sk-bindings-test-key";

#[tokio::test]
async fn bindings_of_dangerous_names_do_nothing_end_to_end() {
    let dir = TempDir::new().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let marker = root.join("MARKER");
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("README.md"), "readme\n").unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    // A committed `tools/ls`: with `tools` first in PATH, `ls` runs it.
    let fake_ls = ws.join("tools/ls");
    std::fs::write(
        &fake_ls,
        format!("#!/bin/sh\n/usr/bin/touch {}\n", marker.display()),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&fake_ls).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&fake_ls, permissions).unwrap();
    // Unconfined, Bash runs it: so this test can fail.
    let ran = std::process::Command::new("bash")
        .args(["-c", "for PATH in tools; do ls; done"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(
        ran.success() && marker.exists(),
        "the planted ls should run"
    );
    std::fs::remove_file(&marker).unwrap();

    // The shipped ci-default policy's permissions (allow `ls:*`, deny `rm:*`…) in dontAsk,
    // without its OS sandbox: what is shown here is the analyser's doing.
    let shipped = std::fs::read_to_string(repo_root().join("policies/ci-default.yaml")).unwrap();
    let permissions = shipped.split("\nsandbox:").next().unwrap();
    std::fs::write(root.join("policy.yaml"), permissions).unwrap();

    let m = marker.display();
    let commands = [
        "for PS4 in '$(rm -f README.md)'; do set -x; :; done".to_owned(),
        format!("for PS4 in '$(touch {m})'; do set -x; :; done"),
        format!("for PS4 in \"\\$(touch {m})\"; do set -x; true; done"),
        "for PATH in tools; do ls; done".to_owned(),
        "for PATH in tools:/usr/bin; do ls -la; done".to_owned(),
        "select PATH in tools; do ls; break; done <<< 1".to_owned(),
        "read PATH <<< tools; ls".to_owned(),
        "read -r a PATH <<< 'x tools'; ls".to_owned(),
        "printf -v PATH %s tools; ls".to_owned(),
        "export PATH=tools; ls".to_owned(),
        "declare -x PATH=tools; ls".to_owned(),
        format!("wait -p 'a[$(touch {m})]'"),
        format!("mapfile -C 'touch {m} #' -c 1 lines < README.md"),
        format!("read -r 'a[$(touch {m})]' <<< x"),
        format!("getopts a 'a[$(touch {m})]'"),
    ];
    let mut script: Vec<Reply> = commands
        .iter()
        .map(|command| reply(vec![tool("Bash", json!({ "command": command }))]))
        .collect();
    script.push(reply(vec![text("Done.")]));
    let agent = FakeModel::start(KEY, script).await;
    let task = format!(
        "version: 1\nname: bindings\nprompt: go\nworkdir: ws\npolicy: policy.yaml\nmode: dontAsk\ntools: [Bash]\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5\n  max_tokens: 1000\n  base_url: {}\n  api_key_env: TEST_MODEL_KEY\n",
        agent.base_url(Api::Anthropic)
    );
    std::fs::write(root.join("task.yaml"), task).unwrap();
    let out = root.join("out");
    let output = tokio::process::Command::from(crate::support::tollgate_in(&root))
        .arg("run")
        .arg(root.join("task.yaml"))
        .arg("--out")
        .arg(&out)
        .env("TEST_MODEL_KEY", KEY)
        .env("TOLLGATE_MANAGED_DIR", root.join("no-managed"))
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(agent.violations().is_empty(), "{:?}", agent.violations());
    let all = transcript(&out.join("transcript.jsonl"));
    assert_every_tool_use_answered_once(&all);
    let results = events(&all, "tool_result");
    assert_eq!(results.len(), commands.len(), "{stdout}");
    for (command, result) in commands.iter().zip(&results) {
        assert_eq!(result["status"], "denied", "{command}: {result}");
    }
    let reason = |i: usize| results[i]["content"].as_str().unwrap().to_owned();
    assert!(reason(0).contains("Bash(rm:*)"), "{}", reason(0));
    assert!(reason(3).contains("`PATH`"), "{}", reason(3));
    assert!(!marker.exists(), "a binding ran a planted command");
    assert!(ws.join("README.md").exists(), "README.md was deleted");
}
