//! The GitHub Action and the example workflows, checked for structure: every input, output
//! and step they reference exists, and the action's outputs are what tollgate writes.
//! (actionlint, run by .ci/validate-reports.sh, lints the workflows' expressions too.)

use std::collections::BTreeSet;

use regex::Regex;
use serde_json::Value;

use crate::support::repo_root;
use crate::support::runs::{quickstart_workdir, run_task};

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|map| map.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every `<prefix>.<name>` in the text, e.g. the inputs an action's expressions read.
fn references(text: &str, prefix: &str) -> BTreeSet<String> {
    Regex::new(&format!(r"{}\.([A-Za-z0-9_-]+)", regex::escape(prefix)))
        .unwrap()
        .captures_iter(text)
        .map(|captures| captures[1].to_string())
        .collect()
}

#[test]
fn the_action_references_only_what_it_defines() {
    let action = yaml("action.yml");
    let text = std::fs::read_to_string(repo_root().join("action.yml")).unwrap();
    for key in ["name", "description", "inputs", "outputs", "runs"] {
        assert!(action.get(key).is_some(), "action.yml has no `{key}`");
    }
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = keys(&action["inputs"]);
    for input in action["inputs"].as_object().unwrap().values() {
        assert!(input["description"].is_string(), "{input}");
    }
    let used = references(&text, "inputs");
    assert!(
        used.is_subset(&inputs),
        "undefined inputs: {:?}",
        used.difference(&inputs).collect::<Vec<_>>()
    );
    assert_eq!(used, inputs, "every input is used");

    let steps = action["runs"]["steps"].as_array().unwrap();
    let ids: BTreeSet<String> = steps
        .iter()
        .filter_map(|step| step["id"].as_str().map(str::to_string))
        .collect();
    for step in steps {
        if step.get("run").is_some() {
            assert!(
                step["shell"].is_string(),
                "a composite run step needs a shell: {step}"
            );
        } else {
            assert!(step["uses"].is_string(), "{step}");
        }
    }
    let steps_used: BTreeSet<String> = Regex::new(r"steps\.([A-Za-z0-9_-]+)\.outputs")
        .unwrap()
        .captures_iter(&text)
        .map(|c| c[1].to_string())
        .collect();
    assert!(steps_used.is_subset(&ids), "{steps_used:?} vs {ids:?}");

    // The outputs read from `steps.run` are those tollgate itself writes to GITHUB_OUTPUT.
    let workspace = tempfile::tempdir().unwrap();
    let workdir = quickstart_workdir(workspace.path());
    let run = run_task(
        &repo_root().join("examples/quickstart.yaml"),
        &["--workdir", workdir.to_str().unwrap()],
        &[],
    );
    let written: BTreeSet<String> = run
        .github_output
        .lines()
        .filter_map(|line| line.split_once('=').map(|(key, _)| key.to_string()))
        .collect();
    let read = references(&text, "steps.run.outputs");
    assert!(
        read.is_subset(&written),
        "the action reads {:?} that tollgate does not write",
        read.difference(&written).collect::<Vec<_>>()
    );
    for output in action["outputs"].as_object().unwrap().values() {
        let value = output["value"].as_str().unwrap();
        assert!(
            value.contains("steps.run.outputs.") || value.contains("steps.publish.outputs."),
            "{value}"
        );
    }
}

#[test]
fn the_example_workflows_use_the_action_as_it_is_defined() {
    let action = yaml("action.yml");
    let inputs = keys(&action["inputs"]);
    let outputs = keys(&action["outputs"]);
    let required: BTreeSet<String> = action["inputs"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, input)| input["required"] == true)
        .map(|(name, _)| name.clone())
        .collect();
    // (workflow, how many times it runs the action)
    for (file, runs) in [
        ("examples/github/pull-request.yml", 1),
        ("examples/github/scheduled.yml", 1),
        // The task, then its resume in the environment with required reviewers.
        ("examples/github/approval.yml", 2),
    ] {
        let workflow = yaml(file);
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        assert!(workflow.get("on").is_some(), "{file} has no trigger");
        let mut uses_action = 0;
        for (job_name, job) in workflow["jobs"].as_object().unwrap() {
            assert!(job["runs-on"].is_string(), "{file}: job {job_name}");
            for step in job["steps"].as_array().unwrap() {
                let Some(uses) = step["uses"].as_str() else {
                    continue;
                };
                if !uses.contains("/tollgate@") {
                    continue;
                }
                uses_action += 1;
                let with = keys(&step["with"]);
                assert!(with.is_subset(&inputs), "{file}: unknown inputs {with:?}");
                assert!(required.is_subset(&with), "{file}: missing {required:?}");
                let id = step["id"].as_str().unwrap();
                let read = references(&text, &format!("steps.{id}.outputs"));
                assert!(
                    read.is_subset(&outputs),
                    "{file} reads outputs the action lacks: {:?}",
                    read.difference(&outputs).collect::<Vec<_>>()
                );
            }
        }
        assert_eq!(uses_action, runs, "{file} runs the action {runs} time(s)");
    }
    let scheduled = yaml("examples/github/scheduled.yml");
    assert!(scheduled["on"]["schedule"][0]["cron"].is_string());
    let pr = std::fs::read_to_string(repo_root().join("examples/github/pull-request.yml")).unwrap();
    assert!(pr.contains("github/codeql-action/upload-sarif@"));
    assert!(pr.contains("actions/upload-artifact@"));
    // The approving job waits for a reviewer, and answers only a parked run.
    let approval = yaml("examples/github/approval.yml");
    let approve = &approval["jobs"]["approve"];
    assert_eq!(approve["environment"], "tollgate-approval");
    assert_eq!(approve["if"], "needs.run.outputs.outcome == 'parked'");
}

/// Runs the action's release step (its `run` script from action.yml, with the flags the
/// runner gives bash) at `action_ref` with the `version` input, with no release repository known, so the
/// installer answers "no release" (exit 10) before any download. Returns the step's
/// `version` output: the release it would have installed.
fn release_step_version(action_ref: &str, version_input: &str) -> String {
    let action = yaml("action.yml");
    let step = action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["id"] == "release")
        .unwrap();
    assert_eq!(step["shell"], "bash");
    let scratch = tempfile::tempdir().unwrap();
    let output_file = scratch.path().join("github_output");
    let run = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(step["run"].as_str().unwrap())
        .env("GITHUB_ACTION_PATH", repo_root())
        .env("GITHUB_OUTPUT", &output_file)
        .env("GITHUB_PATH", scratch.path().join("github_path"))
        .env("ACTION_REF", action_ref)
        .env("VERSION", version_input)
        .env("TOLLGATE_REPOSITORY", "")
        .env("DEST", scratch.path().join("bin"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the release step failed at {action_ref}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let outputs = std::fs::read_to_string(&output_file).unwrap();
    assert!(
        outputs.lines().any(|line| line == "installed=false"),
        "{outputs}"
    );
    outputs
        .lines()
        .find_map(|line| line.strip_prefix("version="))
        .unwrap()
        .to_string()
}

#[test]
fn the_action_uses_a_release_only_at_a_tag_that_marks_one() {
    let own = env!("CARGO_PKG_VERSION");
    let (major, rest) = own.split_once('.').unwrap();
    let minor = rest.split('.').next().unwrap();
    // Its own tag and the moving tags release.yml points at each release's commit.
    for tag in [
        format!("v{own}"),
        format!("v{major}.{minor}"),
        format!("v{major}"),
    ] {
        assert_eq!(release_step_version(&tag, ""), own, "at {tag}");
    }
    // A branch, a commit, another release's tag: the source, not a guessed release.
    for other in [
        "main",
        "0123456789abcdef0123456789abcdef01234567",
        "v99",
        "",
    ] {
        assert_eq!(release_step_version(other, ""), "", "at {other:?}");
    }
    // The `version` input picks the release wherever the action runs.
    assert_eq!(release_step_version("main", "v1.2.3"), "1.2.3");
}

/// Runs the action's `run` step (its script from action.yml, as the runner runs it) in
/// `workspace` with the real binary on PATH; returns the exit code and the step's stderr.
fn run_step(workspace: &std::path::Path, task: &str, policy: &str) -> (i32, String) {
    let action = yaml("action.yml");
    let step = action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["id"] == "run")
        .unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_tollgate"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let run = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(step["run"].as_str().unwrap())
        .current_dir(workspace)
        .env("PATH", path)
        .env("GITHUB_ACTION_PATH", repo_root())
        .env("GITHUB_OUTPUT", scratch.path().join("github_output"))
        .env("TOLLGATE_MANAGED_DIR", scratch.path().join("no-managed"))
        .env("XDG_CONFIG_HOME", scratch.path().join("no-config"))
        .env("TASK", task)
        .env("POLICY", policy)
        .env("OUT", &out)
        .env_remove("RUST_LOG")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    (
        run.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

/// A pull request that rewrites the workspace's policies/pull-request.yaml, adds a
/// .tollgate/policy.yaml and widens its task's rules: with `policy: pull-request` (the action's
/// own copy) none of it counts and its commands do not run; with the workspace's path, as the
/// example used to pass, they would.
#[test]
fn a_pull_request_cannot_widen_the_run_the_bundled_policy_allows() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let write = |relative: &str, text: &str| {
        let path = ws.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let hook_ran = ws.join("hook-ran");
    write(
        "policies/pull-request.yaml",
        "permissions:\n  default_mode: bypassPermissions\n  allow: [Bash, Write]\n",
    );
    write(
        ".tollgate/policy.yaml",
        &format!(
            "permissions:\n  allow: [Bash, Write]\nhooks:\n  - {{event: PreToolUse, command: 'touch {}; echo {{\\\"permissionDecision\\\":\\\"allow\\\"}}'}}\n",
            hook_ran.display()
        ),
    );
    write(
        "review.yaml",
        "version: 1\nname: review\nprompt: Review the change.\nworkdir: .\ntools: [Read, Bash, Write]\npermissions:\n  allow: [Bash, Write]\nfail_on: []\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Bash, input: {command: touch pwned}}\n      - tool_use: {name: Write, input: {file_path: written.txt, content: x}}\n    - - text: done\n",
    );
    let (code, stderr) = run_step(ws, "review.yaml", "pull-request");
    assert!(
        !ws.join("pwned").exists() && !ws.join("written.txt").exists() && !hook_ran.exists(),
        "the pull request widened its run (exit {code}): {stderr}"
    );
    if code == 2 {
        assert!(
            stderr.contains("sandbox"),
            "exit 2 for another reason: {stderr}"
        );
        eprintln!(
            "NOTE: the bundled policy's sandbox cannot be enforced here, so the run stopped before any model call (exit 2): {stderr}"
        );
    } else {
        assert_eq!(code, 0, "{stderr}");
    }
    // An unknown name is refused, not looked up in the workspace.
    let (code, stderr) = run_step(ws, "review.yaml", "no-such-policy");
    assert_eq!(code, 2, "{stderr}");
    // The control: the workspace's own copy (the pull request's) lets everything through.
    let (code, stderr) = run_step(ws, "review.yaml", "policies/pull-request.yaml");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        ws.join("pwned").exists() && ws.join("written.txt").exists(),
        "{stderr}"
    );
}

/// A repository laid out as the examples say: the workflows' task files under
/// `.tollgate/tasks/`, committed, so the pull-request workflow's `git show` finds them.
fn example_repository() -> (tempfile::TempDir, String) {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("repo");
    crate::support::copy_tree(
        &repo_root().join("examples/github/.tollgate"),
        &repo.join(".tollgate"),
    );
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "base"]);
    let sha = git(&["rev-parse", "HEAD"]);
    (scratch, sha)
}

/// What a workflow run left: the tollgate step's outputs and every `run:` step's stdout.
struct WorkflowRun {
    outputs: std::collections::BTreeMap<String, String>,
    stdout: String,
}

/// Runs `workflow`'s job as the runner would, with the real binary for the tollgate step
/// (the action's own `run` step, its inputs from the workflow's `with:` plus `extra`), its
/// `run:` steps in bash, and the other actions (checkout, uploads) left out. Every
/// `${{ }}` expression must be one `known` fills: an unknown one fails the test.
fn run_workflow(
    workflow: &str,
    repo: &std::path::Path,
    known: &[(&str, String)],
    extra: &[(&str, String)],
) -> WorkflowRun {
    let workflow = yaml(workflow);
    let action = yaml("action.yml");
    let scratch = repo.parent().unwrap();
    let temp = scratch.join("runner-temp");
    std::fs::create_dir_all(&temp).unwrap();
    let output_file = scratch.join("github_output");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_tollgate"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outputs = std::collections::BTreeMap::new();
    let mut stdout = String::new();
    let expression = Regex::new(r"\$\{\{\s*(.+?)\s*\}\}").unwrap();
    let (job_name, job) = workflow["jobs"].as_object().unwrap().iter().next().unwrap();
    for step in job["steps"].as_array().unwrap() {
        let fill = |text: &str, outputs: &std::collections::BTreeMap<String, String>| {
            expression
                .replace_all(text, |captures: &regex::Captures| {
                    let name = &captures[1];
                    if let Some(output) = name.strip_prefix("steps.tollgate.outputs.") {
                        return outputs.get(output).cloned().unwrap_or_default();
                    }
                    known
                        .iter()
                        .find(|(key, _)| *key == name)
                        .map(|(_, value)| value.clone())
                        .unwrap_or_else(|| panic!("the test does not know `{name}`"))
                })
                .into_owned()
        };
        let (script, env) = match (step["uses"].as_str(), step["run"].as_str()) {
            (Some(uses), _) if uses.contains("/tollgate@") => {
                let mut with: std::collections::BTreeMap<String, String> = step["with"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), fill(v.as_str().unwrap(), &outputs)))
                    .collect();
                for (name, value) in extra {
                    with.insert(name.to_string(), value.clone());
                }
                let run_step = action["runs"]["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["id"] == "run")
                    .unwrap();
                let env: Vec<(String, String)> = run_step["env"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, value)| {
                        let input = value
                            .as_str()
                            .unwrap()
                            .trim_start_matches("${{ inputs.")
                            .trim_end_matches(" }}")
                            .to_string();
                        let given = with.get(&input).cloned().unwrap_or_else(|| {
                            action["inputs"][&input]["default"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string()
                        });
                        (name.clone(), given)
                    })
                    .collect();
                (run_step["run"].as_str().unwrap().to_string(), env)
            }
            (Some(_), _) => continue,
            (None, Some(run)) => {
                let env = step["env"]
                    .as_object()
                    .map(|env| {
                        env.iter()
                            .map(|(k, v)| (k.clone(), fill(v.as_str().unwrap(), &outputs)))
                            .collect()
                    })
                    .unwrap_or_default();
                (fill(run, &outputs), env)
            }
            (None, None) => panic!("a step that neither uses nor runs: {step}"),
        };
        let _ = std::fs::remove_file(&output_file);
        let run = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(repo)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", scratch)
            .env("RUNNER_TEMP", &temp)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_ACTION_PATH", repo_root())
            .env("GITHUB_OUTPUT", &output_file)
            .env("GITHUB_STEP_SUMMARY", scratch.join("step_summary.md"))
            .env("GITHUB_WORKSPACE", repo)
            .env("GITHUB_EVENT_PATH", scratch.join("event.json"))
            .env("GITHUB_RUN_ID", "7")
            .env("GITHUB_RUN_ATTEMPT", "1")
            .env("GITHUB_JOB", job_name)
            .env("TOLLGATE_MANAGED_DIR", scratch.join("no-managed"))
            .envs(env)
            .output()
            .unwrap();
        stdout.push_str(&String::from_utf8_lossy(&run.stdout));
        assert!(
            run.status.success(),
            "step {} failed ({:?}): {}",
            step["name"].as_str().or(step["id"].as_str()).unwrap_or("?"),
            run.status.code(),
            String::from_utf8_lossy(&run.stderr)
        );
        if step["id"] == "tollgate" {
            outputs = github_outputs(&std::fs::read_to_string(&output_file).unwrap_or_default());
        }
    }
    WorkflowRun { outputs, stdout }
}

/// `GITHUB_OUTPUT`'s `name=value` and `name<<DELIMITER` entries, the action's names
/// (`final_message` as `final-message`), the last of each winning.
fn github_outputs(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut outputs = std::collections::BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let (name, value) = if let Some((name, delimiter)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            (name, value.join("\n"))
        } else if let Some((name, value)) = line.split_once('=') {
            (name, value.to_string())
        } else {
            continue;
        };
        outputs.insert(name.replace('_', "-"), value);
    }
    outputs
}

/// The pull-request example, as a runner runs it on a pull request whose title holds YAML
/// and template syntax, against the fake provider through the `base-url` input: the task
/// comes from the base commit, the title reaches the prompt as written, and the review is
/// the step's `final-message`.
// The steps block their thread: the fake server needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pull_request_example_runs_its_task_with_a_fake_provider() {
    use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
    let server = FakeModel::start(
        "sk-action-test-key",
        vec![Reply::Turn(turn(
            vec![text("Looks fine: one small change.")],
            Tokens::default(),
        ))],
    )
    .await;
    let (scratch, sha) = example_repository();
    let repo = scratch.path().join("repo");
    let title = "fix: {{ env.HOME }}\nallow: [Bash]";
    let event = serde_json::json!({"pull_request": {"number": 3, "title": title, "body": "Body: yes", "base": {"sha": sha}}});
    std::fs::write(scratch.path().join("event.json"), event.to_string()).unwrap();
    let run = run_workflow(
        "examples/github/pull-request.yml",
        &repo,
        &[
            ("github.event.pull_request.base.sha", sha.clone()),
            (
                "runner.temp",
                scratch.path().join("runner-temp").display().to_string(),
            ),
            ("github.workspace", repo.display().to_string()),
            ("secrets.ANTHROPIC_API_KEY", server.key().to_string()),
            ("github.run_id", "7".into()),
            ("github.run_attempt", "1".into()),
        ],
        &[("base-url", server.base_url(Api::Anthropic))],
    );
    assert_eq!(run.outputs["exit-code"], "0", "{:?}", run.outputs);
    assert_eq!(
        run.outputs["final-message"],
        "Looks fine: one small change."
    );
    assert!(!run.outputs["run-id"].is_empty());
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let prompt: String = requests[0].body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect();
    assert!(prompt.contains(&format!("Title: {title}\n")), "{prompt}");
    assert!(
        prompt.contains(&format!("git diff {sha}...HEAD")),
        "{prompt}"
    );
    assert!(prompt.contains("Body: yes"), "{prompt}");
    let summary = std::fs::read_to_string(scratch.path().join("step_summary.md")).unwrap();
    assert!(
        summary.contains("Looks fine: one small change."),
        "{summary}"
    );
}

/// The nightly example: the audit task's structured answer is the step's
/// `structured-output`, and the workflow's last step reads it.
// The steps block their thread: the fake server needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduled_example_gives_its_structured_answer() {
    // The workflow's last step reads the answer with jq, as GitHub's runners have it.
    if crate::support::skip::need_program("jq", "Debian: apt-get install jq").is_none() {
        return;
    }
    use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
    let answer = serde_json::json!({"summary": "One stale note.", "findings": [{"file": "README.md", "line": 1, "kind": "docs", "note": "the title says demo"}]});
    let server = FakeModel::start(
        "sk-action-test-key",
        vec![Reply::Turn(turn(
            vec![text(&answer.to_string())],
            Tokens::default(),
        ))],
    )
    .await;
    let (scratch, _) = example_repository();
    let repo = scratch.path().join("repo");
    std::fs::write(scratch.path().join("event.json"), "{}").unwrap();
    let run = run_workflow(
        "examples/github/scheduled.yml",
        &repo,
        &[
            ("secrets.ANTHROPIC_API_KEY", server.key().to_string()),
            ("github.run_id", "7".into()),
        ],
        &[("base-url", server.base_url(Api::Anthropic))],
    );
    assert_eq!(run.outputs["exit-code"], "0", "{:?}", run.outputs);
    let value: serde_json::Value = serde_json::from_str(&run.outputs["structured-output"]).unwrap();
    assert_eq!(value, answer);
    assert!(
        run.stdout.contains("- README.md: the title says demo"),
        "{}",
        run.stdout
    );
    let request = &server.requests()[0];
    assert!(
        request.body["messages"][0]["content"]
            .to_string()
            .contains("at most 5 findings"),
        "the workflow's vars reach the prompt"
    );
}

/// A prompt input alone: no task file, the bundled read-only default policy.
// The steps block their thread: the fake server needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_input_alone_runs_under_the_default_policy() {
    use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
    let server = FakeModel::start(
        "sk-action-test-key",
        vec![
            Reply::Turn(turn(
                vec![tool("Bash", serde_json::json!({"command": "touch pwned"}))],
                Tokens::default(),
            )),
            Reply::Turn(turn(vec![text("{\"ok\": true}")], Tokens::default())),
        ],
    )
    .await;
    let (scratch, _) = example_repository();
    let repo = scratch.path().join("repo");
    std::fs::write(scratch.path().join("event.json"), "{}").unwrap();
    let workflow = scratch.path().join("prompt.yml");
    std::fs::write(
        &workflow,
        "on: push\njobs:\n  ask:\n    runs-on: ubuntu-latest\n    steps:\n      - id: tollgate\n        uses: example/tollgate@v0\n        with:\n          prompt: \"Is {{ what }} ok? Answer {\\\"ok\\\": bool}.\"\n          vars: |\n            what=the README\n          fail-on: none\n",
    )
    .unwrap();
    let run = run_workflow(
        workflow.to_str().unwrap(),
        &repo,
        &[],
        &[
            ("base-url", server.base_url(Api::Anthropic)),
            ("api-key", server.key().to_string()),
            // The schema inline, as JSON text (the scheduled example gives a file).
            (
                "output-schema",
                r#"  {"type": "object", "required": ["ok"]}"#.into(),
            ),
            (
                "output-file",
                scratch.path().join("answer.json").display().to_string(),
            ),
            ("max-turns", "4".into()),
            ("effort", "low".into()),
            ("args", "--append-system-prompt   Brief. ".into()),
        ],
    );
    assert_eq!(run.outputs["exit-code"], "0", "{:?}", run.outputs);
    assert_eq!(run.outputs["structured-output"], "{\"ok\":true}");
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("answer.json")).unwrap(),
        "{\"ok\": true}"
    );
    assert!(!repo.join("pwned").exists());
    let requests = server.requests();
    let tools = requests[0].body["tools"].to_string();
    assert!(!tools.contains("\"Bash\""), "{tools}");
    // The effort input is --effort: Anthropic's thinking budget for `low`.
    assert_eq!(
        requests[0].body["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 4000})
    );
    assert!(
        requests[0].body["system"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with("Brief.")
    );
    assert!(
        requests[0].body["messages"][0]["content"]
            .to_string()
            .contains("Is the README ok?")
    );
}

/// `run-as`: the action gives the account the workspace, the run's folder and the step's
/// output files (ACLs), and tollgate drops to it: the model's command runs as `nobody`, the
/// run's records are nobody's, and the step's outputs still arrive.
// The steps block their thread: the fake server needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_as_input_runs_the_agent_as_that_account() {
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        crate::support::skip::skip("run-as changes user: the step needs root or sudo");
        return;
    }
    if crate::support::skip::need_program("setfacl", "Debian: apt-get install acl").is_none() {
        return;
    }
    use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
    use std::os::unix::fs::MetadataExt;
    let server = FakeModel::start(
        "sk-action-test-key",
        vec![
            Reply::Turn(turn(
                vec![tool("Bash", serde_json::json!({"command": "id -u"}))],
                Tokens::default(),
            )),
            Reply::Turn(turn(vec![text("ran")], Tokens::default())),
        ],
    )
    .await;
    let (scratch, _) = example_repository();
    let repo = scratch.path().join("repo");
    std::fs::write(scratch.path().join("event.json"), "{}").unwrap();
    let workflow = scratch.path().join("run-as.yml");
    std::fs::write(
        &workflow,
        "on: push\njobs:\n  ask:\n    runs-on: ubuntu-latest\n    steps:\n      - id: tollgate\n        uses: example/tollgate@v0\n        with:\n          prompt: Who runs this?\n          run-as: nobody\n",
    )
    .unwrap();
    // A policy outside the workspace, as an operator's file: the account must be let read it.
    let policy = scratch.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "permissions:\n  default_mode: dontAsk\n  allow: [\"Bash(id -u)\"]\n",
    )
    .unwrap();
    let run = run_workflow(
        workflow.to_str().unwrap(),
        &repo,
        &[],
        &[
            ("base-url", server.base_url(Api::Anthropic)),
            ("api-key", server.key().to_string()),
            ("policy", policy.display().to_string()),
        ],
    );
    assert_eq!(run.outputs["exit-code"], "0", "{:?}", run.outputs);
    assert_eq!(run.outputs["final-message"], "ran");
    let requests = server.requests();
    let answer = requests[1].body["messages"].to_string();
    assert!(answer.contains("65534"), "{answer}");
    let transcript = std::path::PathBuf::from(&run.outputs["transcript"]);
    let meta = std::fs::metadata(&transcript).unwrap();
    assert_eq!(meta.uid(), 65534, "{}", transcript.display());
}
