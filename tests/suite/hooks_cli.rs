//! Hooks end to end: real hook scripts in a policy, wired into a real run.

use crate::support::Run;

#[test]
fn hooks_deny_allow_and_withhold_within_the_rules() {
    // PreToolUse: allows `touch`, denies anything mentioning `secret`, no opinion otherwise.
    let pre_hook = "#!/bin/bash\ninput=$(cat)\ncase \"$input\" in\n  *secret*) echo 'no secrets here' >&2; exit 2 ;;\n  *'\"command\":\"touch '*) printf '{\"permissionDecision\":\"allow\",\"reason\":\"touching is harmless\"}' ;;\nesac\n";
    // PostToolUse: withholds any result that shows a token.
    let post_hook = "#!/bin/bash\nif grep -q TOKEN; then printf '{\"permissionDecision\":\"deny\",\"reason\":\"the output shows a token\"}'; fi\n";
    let run = Run::new()
        .file("ws/notes.txt", "api TOKEN=abc\n")
        .file("ws/plain.txt", "nothing here\n")
        .file("pre.sh", pre_hook)
        .file("post.sh", post_hook);
    let pre = run.dir().join("pre.sh");
    let post = run.dir().join("post.sh");
    let run = run.policy(
        &format!(
            "permissions:\n  deny: ['Bash(rm:*)']\nhooks:\n  - {{event: PreToolUse, matcher: Bash, command: 'bash {}'}}\n  - {{event: PostToolUse, matcher: Read, command: 'bash {}'}}\n",
            pre.display(),
            post.display()
        ),
    );
    let calls = [
        "{name: Bash, input: {command: touch made.txt}}",
        "{name: Bash, input: {command: echo secret}}",
        "{name: Bash, input: {command: rm -rf x}}",
        "{name: Bash, input: {command: make all}}",
        "{name: Read, input: {file_path: notes.txt}}",
        "{name: Read, input: {file_path: plain.txt}}",
    ];
    let script: String = calls
        .iter()
        .map(|call| format!("      - tool_use: {call}\n"))
        .collect();
    let run = run
        .task(&format!("version: 1\nname: t\nprompt: go\nworkdir: ws\nmodel:\n  provider: scripted\n  script:\n    -\n{script}    - - text: done\n"))
        .finish();
    // Refused calls fail the run by default (`fail_on` includes `denial`).
    assert_eq!(run.code, 3, "{}", run.stderr);
    run.assert_every_tool_use_answered_once();
    let results: Vec<(String, String)> = run
        .of_type("tool_result")
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap().to_string(),
                e["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // The hook's allow lifts the mode's refusal of `touch made.txt`…
    assert_eq!(results[0].0, "success");
    assert!(run.ws.join("made.txt").exists());
    // …its deny stops `echo secret`, with its stderr as the reason…
    assert_eq!(results[1].0, "denied");
    assert!(results[1].1.contains("no secrets here"), "{}", results[1].1);
    // …a deny rule is final (the hook is not even asked), no opinion leaves the mode's deny…
    assert_eq!(results[2].0, "denied");
    assert_eq!(results[3].0, "denied");
    // …and PostToolUse withholds the token but not the plain file.
    assert_eq!(results[4].0, "error");
    assert!(!results[4].1.contains("abc"), "{}", results[4].1);
    assert!(results[4].1.contains("the output shows a token"));
    assert_eq!(results[5].0, "success");
    let decisions: Vec<String> = run
        .of_type("permission_decision")
        .iter()
        .map(|e| e["layer"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(decisions, ["hook", "hook", "rule", "mode", "tool", "tool"]);
    let hook_runs = run.of_type("hook_run");
    assert_eq!(
        hook_runs.len(),
        5,
        "pre for touch, echo secret, make; post for two reads"
    );
    assert_eq!(run.events().last().unwrap()["denials_by_layer"]["hook"], 1);
}

/// A hook answer that says two things — a key given twice (the model's text appended after
/// the hook's own key by `printf`), or forms that disagree — denies: it would otherwise lift
/// dontAsk's refusal of a command no rule allows.
#[test]
fn an_ambiguous_hook_answer_denies_instead_of_allowing() {
    for answer in [
        r#"{"permissionDecision":"deny","permissionDecision":"allow"}"#,
        r#"{"decision":"block","permissionDecision":"allow"}"#,
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"},"permissionDecision":"allow"}"#,
    ] {
        let task = "version: 1\nname: t\nprompt: go\nworkdir: ws\nmode: dontAsk\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: touch made.txt}}\n    - - text: done\n";
        let run = Run::new().file("answer.json", answer);
        let answer_path = run.dir().join("answer.json");
        let run = run
            .policy(&format!(
                "hooks:\n  - {{event: PreToolUse, matcher: Bash, command: 'cat {}', on_error: ignore}}\n",
                answer_path.display()
            ))
            .task(task)
            .finish();
        assert!(
            !run.ws.join("made.txt").exists(),
            "{answer}: {}",
            run.stderr
        );
        assert_eq!(run.code, 3, "{answer}");
        let decision = run.of_type("permission_decision")[0];
        assert_eq!(decision["layer"], "hook", "{decision}");
        assert!(
            decision["reason"].as_str().unwrap().contains("ambiguous"),
            "{decision}"
        );
    }
}
