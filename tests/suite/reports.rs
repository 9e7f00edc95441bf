//! The CI reports end to end: a run that needed a refused call exits 3 and says so in
//! SARIF (valid against the official schema), JUnit, the step summary, outputs and
//! annotations; `fail_on` and check retries change the verdict as documented.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::repo_root;
use crate::support::runs::{Finished, quickstart_workdir, run_task};

fn sarif_validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/fixtures/sarif-2.1.0.json")).unwrap(),
    )
    .unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn assert_valid_sarif(sarif: &Value) {
    let errors: Vec<String> = sarif_validator()
        .iter_errors(sarif)
        .map(|err| format!("{} at {}", err, err.instance_path()))
        .collect();
    assert!(errors.is_empty(), "SARIF schema errors: {errors:#?}");
}

/// The schema check itself must be able to fail.
#[test]
fn the_vendored_schema_rejects_a_broken_log() {
    let broken =
        json!({"version": "2.1.0", "runs": [{"results": [{"level": "fatal", "message": {}}]}]});
    assert!(!sarif_validator().is_valid(&broken));
}

fn junit_properties(xml: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    doc.descendants()
        .filter(|node| node.has_tag_name("property"))
        .map(|node| {
            (
                node.attribute("name").unwrap().to_string(),
                node.attribute("value").unwrap().to_string(),
            )
        })
        .collect()
}

fn property(props: &[(String, String)], name: &str) -> String {
    props
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.clone())
        .unwrap_or_else(|| panic!("no property {name} in {props:?}"))
}

/// (name, failure type) of each testcase.
fn junit_cases(xml: &str) -> Vec<(String, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    doc.descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .map(|case| {
            let failure = case
                .children()
                .find(|child| child.has_tag_name("failure"))
                .map(|failure| failure.attribute("type").unwrap_or_default().to_string());
            (case.attribute("name").unwrap().to_string(), failure)
        })
        .collect()
}

fn denied_example() -> (Finished, tempfile::TempDir) {
    let workspace = tempfile::tempdir().unwrap();
    let workdir = quickstart_workdir(workspace.path());
    let run = run_task(
        &repo_root().join("examples/needs-denied.yaml"),
        &[
            "--workdir",
            workdir.to_str().unwrap(),
            "--report",
            "junit,sarif",
        ],
        &[],
    );
    (run, workspace)
}

#[test]
fn a_needed_denied_call_exits_3_and_every_report_says_why() {
    let (run, workspace) = denied_example();
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    let workdir = workspace.path().join("workspace").canonicalize().unwrap();

    // SARIF: valid, one rule per deciding rule/guardrail, results pointing at the policy
    // line and at the file the Write tried to touch.
    let sarif = run.json("tollgate.sarif");
    assert_valid_sarif(&sarif);
    let sarif_run = &sarif["runs"][0];
    let rule_ids: Vec<&str> = sarif_run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["id"].as_str().unwrap())
        .collect();
    assert_eq!(rule_ids, ["policy/Bash(rm:*)", "guardrail"]);
    let results = sarif_run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let policy = repo_root().join("policies/ci-default.yaml");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"],
        json!({
            "artifactLocation": {"uri": format!("file://{}", policy.display())},
            "region": {"startLine": 14}
        })
    );
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["ruleIndex"], 0);
    assert_eq!(results[0]["properties"]["tool"], "Bash");
    assert_eq!(results[0]["properties"]["input"], "rm -rf build");
    assert_eq!(results[0]["properties"]["step"], "1d");
    assert_eq!(results[0]["properties"]["layer"], "rule");
    assert_eq!(
        results[1]["locations"][0]["physicalLocation"],
        json!({
            "artifactLocation": {"uri": ".github/workflows/ci.yml", "uriBaseId": "WORKDIR"},
            "region": {"startLine": 1}
        })
    );
    assert_eq!(
        sarif_run["originalUriBaseIds"]["WORKDIR"]["uri"],
        format!("file://{}/", workdir.display())
    );
    assert_eq!(sarif_run["invocations"][0]["exitCode"], 3);

    // JUnit: the agent run fails as policy_denied; denials counted by layer.
    let junit = run.read("junit.xml");
    let props = junit_properties(&junit);
    assert_eq!(property(&props, "denials_rule"), "1");
    assert_eq!(property(&props, "denials_guardrail"), "1");
    assert_eq!(property(&props, "denials_mode"), "0");
    assert_eq!(property(&props, "exit_code"), "3");
    assert_eq!(
        junit_cases(&junit),
        [
            ("agent run".to_string(), Some("policy_denied".to_string())),
            ("check: build-untouched".to_string(), None),
        ]
    );

    // GitHub: summary table, outputs, annotations.
    assert!(
        run.step_summary
            .contains("| Bash | `rm -rf build` | rule | 1d | `Bash(rm:*)` ("),
        "{}",
        run.step_summary
    );
    assert!(run.step_summary.contains("#### Denied calls (2)"));
    assert!(run.step_summary.contains("`policy_denied` (exit 3)"));
    let sarif_path = run.out.canonicalize().unwrap().join("tollgate.sarif");
    for line in [
        "outcome=policy_denied".to_string(),
        "exit_code=3".to_string(),
        format!("sarif={}", sarif_path.display()),
        // The scripted model is free: its cost is a known 0, not unknown.
        "cost=0.000000".to_string(),
    ] {
        assert!(
            run.github_output.lines().any(|l| l == line),
            "{line} missing from {}",
            run.github_output
        );
    }
    let annotations: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(annotations.len(), 2, "{}", run.stdout);
    assert_eq!(
        annotations[0],
        "::error file=policies/ci-default.yaml,line=14,title=tollgate denied Bash::Denied Bash `rm -rf build`: `rm -rf build` is denied by rule Bash(rm:*)"
    );
    assert!(
        annotations[1].starts_with(&format!(
            "::error file={}/.github/workflows/ci.yml,title=tollgate denied Write::",
            workdir.display()
        )),
        "{}",
        annotations[1]
    );
}

#[test]
fn the_quickstart_narrows_fail_on_and_exits_0_with_warnings() {
    let workspace = tempfile::tempdir().unwrap();
    let workdir = quickstart_workdir(workspace.path());
    let run = run_task(
        &repo_root().join("examples/quickstart.yaml"),
        &[
            "--workdir",
            workdir.to_str().unwrap(),
            "--report",
            "sarif",
            "--report",
            "junit",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let sarif = run.json("tollgate.sarif");
    assert_valid_sarif(&sarif);
    assert_eq!(sarif["runs"][0]["results"][0]["level"], "warning");
    assert!(
        run.stdout
            .contains("::warning file=policies/ci-default.yaml,line=14,")
    );
    let finished = run.events().last().unwrap();
    assert_eq!(finished["outcome"], "success");
    assert_eq!(
        finished["fail_on"],
        json!(["classifier_denial", "check", "limit", "mcp_start", "effect"])
    );

    // The command line overrides the task: now the same denial fails the run.
    let workspace = tempfile::tempdir().unwrap();
    let workdir = quickstart_workdir(workspace.path());
    let strict = run_task(
        &repo_root().join("examples/quickstart.yaml"),
        &[
            "--workdir",
            workdir.to_str().unwrap(),
            "--fail-on",
            "denial",
            "--model",
            "renamed",
        ],
        &[],
    );
    assert_eq!(strict.code, 3, "{}", strict.stdout);
    let props = junit_properties(&strict.read("junit.xml"));
    assert_eq!(property(&props, "model"), "renamed");
    assert!(
        !strict.out.join("tollgate.sarif").exists(),
        "junit only by default"
    );
}

fn write_task(dir: &Path, text: &str) -> std::path::PathBuf {
    let task = dir.join("task.yaml");
    std::fs::write(&task, text).unwrap();
    task
}

const RETRY_TASK: &str = r#"version: 1
name: retry
prompt: Create fixed.txt.
mode: acceptEdits
tools: [Write, Bash]
model:
  provider: scripted
  script:
    - - text: Done, I think.
    - - tool_use: {name: Write, input: {file_path: fixed.txt, content: ok}}
    - - text: Fixed.
checks:
  - name: has-file
    run: "echo missing fixed.txt; test -f fixed.txt"
    retry: {max_attempts: 2, feed_back: true}
  - name: flaky
    run: "test -f .flaky || { touch .flaky; exit 1; }"
    retry: {max_attempts: 2}
"#;

#[test]
fn a_failed_check_is_fed_back_and_every_attempt_is_a_testcase() {
    let dir = tempfile::tempdir().unwrap();
    let task = write_task(dir.path(), RETRY_TASK);
    let run = run_task(&task, &["--workdir", dir.path().to_str().unwrap()], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let junit = run.read("junit.xml");
    assert_eq!(
        junit_cases(&junit),
        [
            ("agent run".to_string(), None),
            (
                "check: has-file (attempt 1)".to_string(),
                Some("check_failed".to_string())
            ),
            (
                "check: flaky (attempt 1)".to_string(),
                Some("check_failed".to_string())
            ),
            ("check: flaky (attempt 2)".to_string(), None),
            ("check: has-file (attempt 2)".to_string(), None),
            ("check: flaky (attempt 3)".to_string(), None),
        ]
    );
    let events = run.events();
    let feedback: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "check_feedback")
        .collect();
    assert_eq!(feedback.len(), 1);
    assert_eq!(feedback[0]["checks"], json!(["has-file"]));
    let message = feedback[0]["message"].as_str().unwrap();
    assert!(message.contains("missing fixed.txt"), "{message}");
    // The model's second request carries the history and the feedback: prompt, its first
    // answer, the feedback message.
    let requests: Vec<u64> = events
        .iter()
        .filter(|event| event["type"] == "model_request")
        .map(|event| event["messages"].as_u64().unwrap())
        .collect();
    assert_eq!(requests, [1, 3, 5]);
    let finished = events.last().unwrap();
    assert_eq!(
        (
            finished["checks_passed"].clone(),
            finished["checks_failed"].clone()
        ),
        (json!(2), json!(0))
    );
}

#[test]
fn retries_run_out_then_fail_on_decides_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let task = write_task(
        dir.path(),
        "version: 1\nname: never\nprompt: p\nmodel:\n  provider: scripted\n  script:\n    - - text: one\n    - - text: two\nchecks:\n  - name: never\n    run: 'echo nope; exit 2'\n    retry: {max_attempts: 2, feed_back: true}\n",
    );
    let workdir = dir.path().to_str().unwrap();
    let run = run_task(
        &task,
        &["--workdir", workdir, "--report", "junit,sarif"],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(run.events().last().unwrap()["outcome"], "checks_failed");
    let sarif = run.json("tollgate.sarif");
    assert_valid_sarif(&sarif);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "only the last attempt is a finding");
    assert_eq!(results[0]["ruleId"], "check/never");
    assert_eq!(results[0]["properties"]["attempt"], 2);
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"],
        json!({"artifactLocation": {"uri": "task.yaml", "uriBaseId": "WORKDIR"}, "region": {"startLine": 10}})
    );
    assert!(run.stdout.contains("::error file="), "{}", run.stdout);

    let lenient = run_task(&task, &["--workdir", workdir, "--fail-on", "none"], &[]);
    assert_eq!(lenient.code, 0, "{}", lenient.stdout);
    assert_eq!(lenient.events().last().unwrap()["outcome"], "checks_failed");
}

#[test]
fn an_unwritable_step_summary_does_not_hide_the_exit_code() {
    let workspace = tempfile::tempdir().unwrap();
    let workdir = quickstart_workdir(workspace.path());
    let run = run_task(
        &repo_root().join("examples/needs-denied.yaml"),
        &["--workdir", workdir.to_str().unwrap()],
        &[("GITHUB_STEP_SUMMARY", "/nonexistent/folder/summary.md")],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot write the GitHub step summary"),
        "{}",
        run.stderr
    );
}

/// A YAML double-quoted scalar with every character that is not printable ASCII escaped.
fn yaml_quoted(text: &str) -> String {
    let body: String = text
        .chars()
        .map(|c| match c {
            '"' | '\\' => format!("\\{c}"),
            ' '..='~' => c.to_string(),
            c => format!("\\u{:04x}", u32::from(c)),
        })
        .collect();
    format!("\"{body}\"")
}

/// Every line of a log as the GitHub Actions runner splits it (at CR, LF and CRLF).
fn runner_lines(log: &str) -> Vec<&str> {
    log.split(['\r', '\n']).collect()
}

/// Text from the model, a tool and a check, full of workflow commands in every line-break
/// form, lands on stdout and stderr only as tollgate's own two annotations; JUnit and SARIF
/// hold no character XML 1.0 forbids and still parse (SARIF against the schema).
#[test]
fn no_model_or_tool_text_can_forge_a_workflow_command_or_break_a_report() {
    let forged = "x\r::add-mask::forged-cr\n::error::forged-lf\r\n  ::warning::forged-crlf\u{2028}::error::forged-ls\u{85}::notice::forged-nel \u{a0}::debug::x ##[stop-commands]tok #\u{ad}#[add-mask]s \u{1}\u{b}\u{c}\u{1b}[31m\u{7f}\u{fffe}\u{ffff}end";
    let quoted = yaml_quoted(forged);
    let command = yaml_quoted(&format!("rm -rf build {forged}"));
    let dir = tempfile::tempdir().unwrap();
    let task = write_task(
        dir.path(),
        &format!(
            r#"version: 1
name: {quoted}
prompt: p
mode: dontAsk
permissions:
  deny: ['Bash(rm:*)']
model:
  provider: scripted
  script:
    - - tool_use: {{name: Bash, input: {{command: {command}}}}}
    - - text: {quoted}
checks:
  - name: forged
    run: "printf '%s\\r::error::check-cr\\n##[set-output name=a]b\\n\\001\\357\\277\\276\\n' out; exit 1"
"#
        ),
    );
    let run = run_task(
        &task,
        &[
            "--workdir",
            dir.path().to_str().unwrap(),
            "--report",
            "junit,sarif",
        ],
        &[],
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    for (stream, log) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let commands: Vec<&str> = runner_lines(log)
            .into_iter()
            .filter(|line| line.trim_start().starts_with("::"))
            .collect();
        let expected = if stream == "stdout" { 2 } else { 0 };
        assert_eq!(commands.len(), expected, "{stream}: {commands:#?}\n{log}");
        for line in commands {
            assert!(
                line.starts_with("::error file=") && line.contains(",title=tollgate "),
                "{stream}: not tollgate's own annotation: {line:?}"
            );
            assert!(
                !line.contains("%0A::") || line.contains("title=tollgate"),
                "{line}"
            );
        }
        assert!(
            !log.contains("##["),
            "{stream} holds a legacy command:\n{log}"
        );
    }
    assert!(run.stdout.contains("forged-lf"), "{}", run.stdout);

    let forbidden = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    let junit = run.read("junit.xml");
    assert!(!junit.contains(forbidden), "{junit:?}");
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let system_out: String = doc
        .descendants()
        .filter(|node| node.has_tag_name("system-out"))
        .filter_map(|node| node.text())
        .collect();
    assert!(system_out.contains("forged-ls"), "{system_out}");
    let sarif_text = run.read("tollgate.sarif");
    let sarif: Value = serde_json::from_str(&sarif_text).unwrap();
    assert_valid_sarif(&sarif);
    assert!(!sarif.to_string().contains(forbidden));
    assert!(!sarif_text.contains("\\u0001") && !sarif_text.contains("\\u000b"));
}
