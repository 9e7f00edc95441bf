//! A fresh clone is all it takes: nothing in the repository names a folder beside it, and the
//! README's command blocks run as shown — against copies in temp folders, `cargo run --`
//! standing for the binary cargo built, and the `-p` examples against the fake model server
//! through `ANTHROPIC_BASE_URL` (the key's `…` placeholder is the server's key).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::fake_model::{FakeModel, Reply, Tokens, text, turn};
use crate::support::{Isolation, copy_tree, repo_root};

/// The sibling folder the repository must never reach into, spelled so that this file does
/// not name it.
fn sibling() -> String {
    ["..", "/", "sha", "red"].concat()
}

/// Folders of a checkout that are not the repository's own text: build output, git's own
/// store, the npm test server's installed packages, run records.
const NOT_OURS: &[&str] = &["target", ".git", "node_modules", ".tollgate"];

/// `path:line` of every line under `root` (files and folders, recursively) that holds
/// `needle`. Files that are not UTF-8 text are not read.
fn lines_naming(root: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                let entry = entry.unwrap().path();
                let name = entry.file_name().unwrap().to_string_lossy().into_owned();
                if !NOT_OURS.contains(&name.as_str()) {
                    pending.push(entry);
                }
            }
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            for (number, line) in text.lines().enumerate() {
                if line.contains(needle) {
                    found.push(format!("{}:{}", path.display(), number + 1));
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
fn nothing_in_the_repository_names_the_folder_beside_it() {
    let root = repo_root();
    let needle = sibling();
    // The scan can fail: a planted line is found, in a file and in a nested folder.
    let planted = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(planted.path().join("docs/deep")).unwrap();
    std::fs::write(
        planted.path().join("README.md"),
        format!("see {needle}/x\n"),
    )
    .unwrap();
    std::fs::write(
        planted.path().join("docs/deep/a.md"),
        format!("one\nread {needle}/corpora\n"),
    )
    .unwrap();
    assert_eq!(lines_naming(planted.path(), &needle).len(), 2);
    let mut found = Vec::new();
    for place in [
        "src", "tests", "benches", "docs", "examples", "scripts", ".ci", ".github", "policies",
        "fuzz",
    ] {
        assert!(
            root.join(place).is_dir(),
            "{place} is gone: update this list"
        );
        found.extend(lines_naming(&root.join(place), &needle));
    }
    for file in ["README.md", "Cargo.toml", "action.yml", "Containerfile"] {
        found.extend(lines_naming(&root.join(file), &needle));
    }
    assert!(
        found.is_empty(),
        "these name {needle}, which a clone does not have:\n{}",
        found.join("\n")
    );
}

/// A ```sh block of a Markdown file: the line its first command is on, and its lines.
struct Block {
    line: usize,
    lines: Vec<String>,
}

fn sh_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (number, line) in markdown.lines().enumerate() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => {
                current = Some(Block {
                    line: number + 2,
                    lines: Vec::new(),
                })
            }
            (Some(_), "```") => blocks.extend(current.take()),
            // A line ending in `\` goes on on the next one, as bash reads it.
            (Some(block), _) => match block.lines.last_mut() {
                Some(open) if open.ends_with('\\') => {
                    open.pop();
                    open.push_str(line);
                }
                _ => block.lines.push(line.to_string()),
            },
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "a ```sh block is not closed");
    blocks
}

/// Commands of the README the suite does not run, each with why: the README shows them, a
/// person runs them, and `.ci/run` runs the first word for word.
const NOT_RUN_HERE: &[(&str, &str)] = &[
    (
        "cargo test",
        "the command this test is part of (.ci/run runs it as shown)",
    ),
    (
        "cargo install --locked --path . --bin tollgate",
        "an optimised build of minutes that installs into the user's ~/.cargo/bin",
    ),
    (
        "cargo bench",
        "minutes of benchmarks; benches/README.md records their runs",
    ),
    (
        ".ci/run",
        "CI itself: it installs packages and runs this suite",
    ),
    (
        "TOLLGATE_CI_DIST=1 .ci/run",
        "CI itself, with the release's optimised build",
    ),
];

/// The command of a line: what precedes a `#` comment, trimmed (the README's commands hold
/// no `#` of their own outside quotes).
fn command_of(line: &str) -> &str {
    let mut quote = None;
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '#') => return line[..at].trim(),
            _ => {}
        }
    }
    line.trim()
}

/// A temp folder holding what the README's commands read: `examples/`, `policies/`.
fn checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["examples", "policies"] {
        copy_tree(&repo_root().join(folder), &dir.path().join(folder));
    }
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    dir
}

/// A folder holding `tollgate` (the binary cargo built) and a `cargo` that runs it for
/// `cargo run -- ARGS` and refuses anything else.
fn programs(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tollgate"), bin.join("tollgate")).unwrap();
    std::fs::write(
        bin.join("cargo"),
        "#!/bin/sh\nif [ \"$1\" = run ] && [ \"$2\" = -- ]; then shift 2; exec tollgate \"$@\"; fi\n\
         echo \"the README test runs only cargo run -- …, not: cargo $*\" >&2; exit 97\n",
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("cargo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    bin
}

/// Runs one command line with bash in `dir`, `tollgate` and `cargo` first on PATH, seeing
/// none of the machine's configuration (as `tollgate_in` and `Isolation` start it) and the
/// variables the block exported so far.
fn run_line(dir: &Path, bin: &Path, exported: &[(String, String)], line: &str) -> Output {
    let isolated = Isolation::new().home("home").managed("etc").command(dir);
    let mut bash = Command::new("bash");
    bash.args(["-c", line]).current_dir(dir);
    for (name, value) in isolated.get_envs() {
        match value {
            Some(value) => bash.env(name, value),
            None => bash.env_remove(name),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    bash.env("PATH", std::env::join_paths(paths).unwrap());
    // The operator's state folder (the key that signs transcripts) lives outside every
    // workdir, as a real user's `~/.local/state` does; this HOME is inside the copy.
    let state = tempfile::tempdir().unwrap();
    bash.env("TOLLGATE_STATE_DIR", state.path());
    bash.envs(exported.iter().map(|(name, value)| (name, value)));
    bash.output().unwrap()
}

fn shown(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn every_sh_block_of_the_readme_runs_as_shown() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    // The `-p` examples' answers: a summary, then a label valid against the schema.
    let tokens = Tokens {
        input: 100,
        output: 10,
        cache_write: 0,
        cache_read: 0,
    };
    let label = r#"{"label": "bug", "confidence": 0.9}"#;
    let server = FakeModel::start(
        "sk-readme-test-key",
        vec![
            Reply::Turn(turn(
                vec![text("src/lib.rs greets and says goodbye.")],
                tokens,
            )),
            Reply::Turn(turn(vec![text(label)], tokens)),
        ],
    )
    .await;
    let mut ran = 0;
    let mut not_run = Vec::new();
    for block in &blocks {
        let dir = checkout();
        let bin = programs(dir.path());
        let mut exported: Vec<(String, String)> = Vec::new();
        let mut first: Option<Output> = None;
        let mut last: Option<(String, Output)> = None;
        for line in &block.lines {
            let command = command_of(line);
            // A comment line holding a JSON object is the output of the command before it,
            // as the README shows it; other comment lines are comments.
            if let Some(shown_output) = line.trim_start().strip_prefix("# {") {
                let shown_output = format!("{{{shown_output}");
                let (command, output) = last.as_ref().expect("output shown before any command");
                let want: Value = serde_json::from_str(&shown_output).unwrap_or_else(|e| {
                    panic!("README: the output of `{command}` is not JSON: {e}")
                });
                let got: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
                    panic!("`{command}` printed no JSON ({e}): {}", shown(output))
                });
                assert_eq!(
                    got, want,
                    "README: `{command}` prints another line than it shows"
                );
                continue;
            }
            if command.is_empty() {
                continue;
            }
            if let Some((_, why)) = NOT_RUN_HERE.iter().find(|(line, _)| *line == command) {
                not_run.push(format!("README.md:{}: `{command}`: {why}", block.line));
                continue;
            }
            // `export NAME=VALUE`: the variable holds for the block's later lines; the key's
            // placeholder is the fake server's key, and the provider is the fake server.
            if let Some(assignment) = command.strip_prefix("export ") {
                let (name, value) = assignment.split_once('=').unwrap();
                let value = if name == "ANTHROPIC_API_KEY" && value == "…" {
                    exported.push((
                        "ANTHROPIC_BASE_URL".into(),
                        server.base_url(crate::support::fake_model::Api::Anthropic),
                    ));
                    server.key().to_string()
                } else {
                    value.to_string()
                };
                exported.push((name.to_string(), value));
                continue;
            }
            let dir_path = dir.path().to_path_buf();
            let (bin_path, env, line) = (bin.clone(), exported.clone(), command.to_string());
            let output =
                tokio::task::spawn_blocking(move || run_line(&dir_path, &bin_path, &env, &line))
                    .await
                    .unwrap();
            assert!(
                output.status.success(),
                "README.md:{}: `{command}` failed:\n{}",
                block.line,
                shown(&output)
            );
            ran += 1;
            if first.is_none() {
                first = Some(output.clone());
            }
            last = Some((command.to_string(), output));
        }
        // What the quick start prints and leaves: the summary's first lines as the README
        // shows them, and the review, marked reviewed.
        if let Some(quickstart) = block
            .lines
            .iter()
            .position(|line| line.contains("run examples/quickstart.yaml"))
        {
            assert_eq!(
                quickstart, 0,
                "the quick start is no longer its block's first line"
            );
            let output = first.as_ref().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            let summary: Vec<&str> = readme
                .lines()
                .skip_while(|line| !line.starts_with("tollgate: quickstart — "))
                .take(2)
                .collect();
            assert_eq!(summary.len(), 2, "the README shows no quick start summary");
            for line in summary {
                assert!(
                    stdout.lines().any(|printed| printed == line),
                    "the README shows `{line}`, the quick start prints:\n{stdout}"
                );
            }
            let review =
                std::fs::read_to_string(dir.path().join("examples/quickstart/src/review.md"))
                    .unwrap();
            assert!(review.contains("status: reviewed"), "{review}");
        }
        // The structured answer came back as the README says.
        if let Some((command, output)) = &last
            && command.contains("--output-format json")
        {
            let result: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(
                result["structured_output"],
                serde_json::from_str::<Value>(label).unwrap(),
                "{result}"
            );
            assert!(result["session_id"].is_string(), "{result}");
        }
    }
    assert_eq!(
        server.replies_left(),
        0,
        "a -p example did not reach the model"
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    // The quick start, the two prompts, the gate on its own.
    assert!(ran >= 4, "only {ran} commands ran");
    // Each command the suite leaves out is still in the README, so the list cannot go stale.
    for (command, _) in NOT_RUN_HERE {
        assert!(
            not_run
                .iter()
                .any(|line| line.contains(&format!("`{command}`"))),
            "{command} is no longer in a ```sh block of the README: take it off NOT_RUN_HERE"
        );
    }
    println!("{}", not_run.join("\n"));
}

#[test]
fn the_quick_start_fails_on_the_default_less_denial_and_says_how_many_kinds_there_are() {
    use tollgate::task::{FailOn, FailOnSet};
    let text = std::fs::read_to_string(repo_root().join("examples/quickstart.yaml")).unwrap();
    let listed: Vec<&str> = text
        .lines()
        .find_map(|line| line.strip_prefix("fail_on: ["))
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap()
        .split(", ")
        .collect();
    let task_default = FailOnSet::task_default();
    let default_less_denial: Vec<&str> = task_default
        .kinds()
        .iter()
        .filter(|kind| **kind != FailOn::Denial)
        .map(|kind| kind.as_str())
        .collect();
    assert_eq!(listed, default_less_denial);
    let names = ["", "one", "two", "three", "four", "five", "six", "seven"];
    let said = format!("all {} kinds", names[task_default.kinds().len()]);
    assert!(text.contains(&said), "quickstart.yaml should say {said:?}");
    for kind in FailOn::ALL {
        assert!(
            text.contains(kind.as_str()),
            "quickstart.yaml's comment omits {kind}"
        );
    }
}

/// The README quotes the gate's speed from the newest run `benches/README.md` records: the
/// last `after` row of a table that measures the gate against its floor (`best N %`).
#[test]
fn the_readme_quotes_the_gates_latest_measured_speed() {
    let benches = std::fs::read_to_string(repo_root().join("benches/README.md")).unwrap();
    let row = benches
        .lines()
        .rfind(|line| line.starts_with("| after") && line.contains("| best "))
        .expect("benches/README.md records no run of the gate against its floor");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let (speed, share) = (cells[3], cells[4]);
    let percent = |word: &str| {
        share
            .split(word)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string)
    };
    let best = percent("best ").unwrap();
    let share = match percent("worst ") {
        Some(worst) => format!("{worst}–{best} %"),
        None => format!("{best} %"),
    };
    let wanted = format!("{speed} decisions/s, {share} of a parse-and-walk floor");
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        readme.contains(&wanted),
        "the README should quote the latest gate run, `{wanted}` (benches/README.md: {row})"
    );
}
