//! Running the real `tollgate` binary on a task in a scratch folder, with the GitHub
//! Actions environment files pointed into that folder.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What one `tollgate run` left behind.
pub struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub out: PathBuf,
    pub step_summary: String,
    pub github_output: String,
    /// Keeps the output folder until the test ends.
    pub _scratch: tempfile::TempDir,
}

impl Finished {
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_else(|err| {
            panic!(
                "{name}: {err}\nstdout: {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn json(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(name)).unwrap()
    }

    /// The transcript's events, parsed.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.read("transcript.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// Copies a folder tree (files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs `tollgate run TASK --out <scratch>/out ARGS…` as GitHub Actions would (summary,
/// outputs and annotations on, `GITHUB_WORKSPACE` the repository), with `env` added.
pub fn run_task(task: &Path, args: &[&str], env: &[(&str, &str)]) -> Finished {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let summary = scratch.path().join("step_summary.md");
    let output = scratch.path().join("github_output");
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command
        .arg("run")
        .arg(task)
        .arg("--out")
        .arg(&out)
        .args(args)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_WORKSPACE", repo_root())
        .env_remove("RUST_LOG");
    for (name, value) in env {
        command.env(name, value);
    }
    let result = command.output().unwrap();
    Finished {
        code: result.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&result.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        out,
        step_summary: std::fs::read_to_string(summary).unwrap_or_default(),
        github_output: std::fs::read_to_string(output).unwrap_or_default(),
        _scratch: scratch,
    }
}

/// A scratch copy of the quick start's workspace, so runs do not write into the repository.
pub fn quickstart_workdir(scratch: &Path) -> PathBuf {
    let workdir = scratch.join("workspace");
    copy_tree(&repo_root().join("examples/quickstart"), &workdir);
    workdir
}
