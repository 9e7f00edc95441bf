//! Secret redaction end to end: secrets planted in the environment, in a file the agent
//! reads, in command output (inline and offloaded) and in a check's output must not appear
//! in any file the run writes, nor on stdout or stderr.

use std::path::Path;

use crate::support::encode::{base64, hex};
use crate::support::runs::run_task;

/// Built at run time so that no token-shaped literal sits in the source.
fn planted() -> Vec<(&'static str, String)> {
    let tail = "Q7x9LmN2pR4sT6vW8yZ0aB1cD3eF5gH7";
    vec![
        ("env, secret-looking name", format!("env-secret-{tail}")),
        (
            "env, named in redact_env",
            format!("db://user:pw-{tail}@host"),
        ),
        ("GitHub token in a file", format!("ghp_{tail}abcd")),
        (
            "Anthropic key in command output",
            format!("sk-ant-api03-{tail}"),
        ),
        ("AWS key id in a file", "AKIA2QWERTYUIOPASDFG".to_string()),
        (
            "private key in a file",
            format!("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{tail}"),
        ),
    ]
}

fn files_under(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, found);
        } else {
            found.push(path);
        }
    }
}

#[test]
fn no_planted_secret_reaches_any_output() {
    let secrets = planted();
    let env_secret = &secrets[0].1;
    let named_secret = &secrets[1].1;
    let github = &secrets[2].1;
    let anthropic = &secrets[3].1;
    let aws = &secrets[4].1;
    let pem_body = &secrets[5].1;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        format!(
            "deploy token {github}\naws {aws}\n-----BEGIN PRIVATE KEY-----\n{pem_body}\n-----END PRIVATE KEY-----\n"
        ),
    )
    .unwrap();
    // Large enough that Grep's result is offloaded to the results folder.
    let line = format!("token {anthropic} for {github}\n");
    std::fs::write(dir.path().join("big.log"), line.repeat(1000)).unwrap();
    // Bash does not inherit secret-named variables, but DATABASE_URL's name looks harmless:
    // only `redact_env` knows it is secret.
    let task = format!(
        r#"version: 1
name: redaction
prompt: Read notes.txt and print the database URL.
mode: bypassPermissions
tools: [Read, Bash, Grep]
redact_env: [DATABASE_URL]
model:
  provider: scripted
  script:
    - - tool_use: {{name: Read, input: {{file_path: notes.txt}}}}
      - tool_use: {{name: Bash, input: {{command: 'echo "$DATABASE_URL"; echo {anthropic}'}}}}
      - tool_use: {{name: Grep, input: {{pattern: token, path: big.log, output_mode: content}}}}
    - - text: The URL is {named_secret}.
    - - text: I cannot make that check pass.
checks:
  - name: leaks
    run: 'echo "$TOLLGATE_PLANTED_TOKEN $DATABASE_URL"; exit 1'
    retry: {{max_attempts: 2, feed_back: true}}
"#
    );
    let task_file = dir.path().join("task.yaml");
    std::fs::write(&task_file, task).unwrap();
    let run = run_task(
        &task_file,
        &[
            "--workdir",
            dir.path().to_str().unwrap(),
            "--report",
            "junit,sarif",
        ],
        &[
            ("TOLLGATE_PLANTED_TOKEN", env_secret),
            ("DATABASE_URL", named_secret),
            ("RUST_LOG", "debug"),
        ],
    );
    // Two rounds of the failing check: the feedback went back to the model, redacted.
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);

    let mut files = Vec::new();
    files_under(&run.out, &mut files);
    assert!(
        files
            .iter()
            .any(|file| file.starts_with(run.out.join("results"))),
        "the large output should have been offloaded: {files:?}"
    );
    let mut outputs: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            (
                file.display().to_string(),
                std::fs::read_to_string(file).unwrap(),
            )
        })
        .collect();
    outputs.push(("stdout".into(), run.stdout.clone()));
    outputs.push(("stderr".into(), run.stderr.clone()));
    outputs.push(("step summary".into(), run.step_summary.clone()));
    outputs.push(("GITHUB_OUTPUT".into(), run.github_output.clone()));
    for (what, secret) in &secrets {
        for (name, text) in &outputs {
            if let Some(at) = text.find(secret.as_str()) {
                let start = text[..at]
                    .char_indices()
                    .rev()
                    .nth(60)
                    .map_or(0, |(i, _)| i);
                panic!(
                    "{what} leaked into {name}: …{}…",
                    &text[start..at + secret.len()]
                );
            }
        }
    }
    let transcript = run.read("transcript.jsonl");
    for label in [
        "[REDACTED:DATABASE_URL]",
        "[REDACTED:TOLLGATE_PLANTED_TOKEN]",
        "[REDACTED:github_token]",
        "[REDACTED:anthropic_api_key]",
        "[REDACTED:aws_access_key_id]",
        "[REDACTED:private_key]",
    ] {
        assert!(transcript.contains(label), "{label} not in the transcript");
    }
    let offloaded = files
        .iter()
        .find(|file| file.starts_with(run.out.join("results")))
        .unwrap();
    assert!(
        std::fs::read_to_string(offloaded)
            .unwrap()
            .contains("[REDACTED:anthropic_api_key]")
    );
    // Every line of the offloaded Grep result held two tokens: the count says so.
    let finished = run.events().last().unwrap();
    assert!(finished["redactions"].as_u64().unwrap() > 100, "{finished}");
}

/// A checkout's credential that no variable names, read through transforms that move its key
/// away from it or encode the whole file: found by value (learnt from the git config), in
/// every encoded form, across the line breaks `base64` and `od` put in.
#[test]
fn a_checkout_credential_is_hidden_after_read_only_transforms_of_the_git_config() {
    let dir = tempfile::tempdir().unwrap();
    let git = dir.path().join(".git");
    std::fs::create_dir_all(&git).unwrap();
    let token = format!("ghs_{}", "Zq8Lw3Nv5Rt7Yx9Ab2Cd4Ef6Gh8Jk0Mn1P");
    let credential = base64(format!("x-access-token:{token}").as_bytes());
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {credential}\n"
    );
    std::fs::write(git.join("config"), &config).unwrap();
    let task = r#"version: 1
name: checkout-credential
prompt: Look at the git config.
mode: bypassPermissions
tools: [Bash]
fail_on: []
model:
  provider: scripted
  script:
    - - tool_use: {name: Bash, input: {command: 'base64 .git/config'}}
      - tool_use: {name: Bash, input: {command: 'od -An -tx1 -v .git/config'}}
      - tool_use: {name: Bash, input: {command: 'xxd -p .git/config'}}
      - tool_use: {name: Bash, input: {command: 'sed s/extraheader/h/ .git/config'}}
      - tool_use: {name: Bash, input: {command: 'rev .git/config'}}
    - - text: done
"#;
    let task_file = dir.path().join("task.yaml");
    std::fs::write(&task_file, task).unwrap();
    let run = run_task(
        &task_file,
        &["--workdir", dir.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let transcript = std::fs::read_to_string(run.out.join("transcript.jsonl")).unwrap();
    // Every command ran and its output was recorded.
    assert_eq!(
        transcript
            .lines()
            .filter(|line| {
                serde_json::from_str::<serde_json::Value>(line).unwrap()["type"] == "tool_result"
            })
            .count(),
        5,
        "{transcript}"
    );
    // Read as the redactor's second pass does not: white space and JSON's escapes removed.
    let squeezed: String = transcript
        .replace("\\n", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    // The characters of the file's base64 that encode the credential alone.
    let at = config.find(&credential).unwrap();
    let encoded = base64(config.as_bytes());
    let inner = &encoded[(at / 3 + 1) * 4..((at + credential.len()) / 3) * 4];
    let forms = [
        ("token", token.clone()),
        ("credential", credential.clone()),
        ("credential in the file's base64", inner.to_string()),
        ("hex", hex(credential.as_bytes())),
        ("reversed", credential.chars().rev().collect()),
    ];
    for (what, form) in forms {
        assert!(
            !squeezed.contains(&form),
            "the {what} form leaked: {form}\n{transcript}"
        );
    }
    assert!(
        transcript.contains("[REDACTED:git_extraheader]"),
        "{transcript}"
    );
}
