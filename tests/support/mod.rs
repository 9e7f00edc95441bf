//! Helpers for end-to-end tests, one of each:
//!
//! - starting the binary: `tollgate_in(dir)` is the real `tollgate` as a `Command`, run in
//!   `dir` without the machine's log level, provider keys or CI variables. Every suite starts
//!   it through this (or through what is built on it below).
//! - a run of a task: `Run::new().file(..).task(..).policy(..).model(&server)`, then
//!   `.finish()` (or `.finish_async().await` beside a fake server) gives a `Finished`: exit
//!   code (`assert_code`), stdout, stderr, the workspace and output folders, the transcript
//!   (`events`, `of_type`, `started`, `finished`, `result(tool, nth)`, `request_tools(turn)`),
//!   its invariant (`assert_every_tool_use_answered_once`, per conversation with sub-agents)
//!   and the reports (`read`, `json`, `junit`). `runs::run_task` is that run as GitHub
//!   Actions does it.
//! - a shell-like folder: `Sandbox` holds files for commands other than a plain run
//!   (`check`, `batch`, several runs in one folder) and runs `tollgate ARGS` in it;
//!   `sandbox.run(&isolation, args)` runs its `t.yaml` and gives the same `Finished`.
//! - which configuration a command sees: `Isolation` names the user's policy folder, the
//!   managed folder, `HOME` and other variables, each inside the folder the command runs in.
//! - waiting on a run in the background: `poll_until(within, find)` and `wait_for_text`;
//!   `procs` for the processes it started (by command line, and their parents).
//! - the fake servers: `fake_model` (Anthropic and OpenAI over HTTP/SSE, `model_block` for a
//!   task), `fake_forge` (GitHub's REST API, checked against GitHub's own description of it
//!   in `octokit`, answering with `github_objects`), `mcp_http` (an MCP server over
//!   streamable HTTP); `browser` for the HTML reports; `bash` for the analyser's tables.
//! - `identity_fake`: Google's and Microsoft's token endpoints and GitHub's OIDC endpoint,
//!   checking assertions and signatures as the real ones do (the Vertex AI and Azure runs).
//! - `encode`: base64 and hex written apart from the redactor, for a secret's expected forms.
//! - a test that needs a program, package or kernel feature this machine may lack: `skip`
//!   (one line each in the default output, a count at the end; `TOLLGATE_TEST_REQUIRE_ALL=1`
//!   fails them).

#![allow(dead_code)]

pub mod browser;
pub mod encode;
pub mod fake_forge;
pub mod fake_model;
pub mod github_objects;
pub mod identity_fake;
pub mod mcp_http;
pub mod octokit;
pub mod procs;
pub mod skip;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

pub mod runs;
pub use runs::{AMBIENT, Finished, Isolation, Run, poll_until, tollgate_in, wait_for_text};

/// The repository root, where `examples/` and `policies/` live.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A temp folder holding a copy of `examples/` and `policies/`, laid out as in the repo,
/// so a run may edit its workspace freely.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn with_examples() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        for folder in ["examples", "policies"] {
            runs::copy_tree(&repo_root().join(folder), &dir.path().join(folder));
        }
        Sandbox { dir }
    }

    pub fn empty() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `tollgate ARGS` with the sandbox as the current folder.
    pub fn tollgate(&self, args: &[&str]) -> Output {
        self.tollgate_with(&Isolation::new(), args)
    }

    /// As `tollgate`, seeing only the configuration `isolation` names.
    pub fn tollgate_with(&self, isolation: &Isolation, args: &[&str]) -> Output {
        isolation.command(self.path()).args(args).output().unwrap()
    }

    /// `tollgate run t.yaml --out out ARGS`, as `tollgate_with`. A previous run's `out/` is
    /// removed first, so what the transcript holds is this run's.
    pub fn run(&self, isolation: &Isolation, args: &[&str]) -> Finished {
        let _ = std::fs::remove_dir_all(self.path().join("out"));
        let output = isolation
            .command(self.path())
            .args(["run", "t.yaml", "--out", "out"])
            .args(args)
            .output()
            .unwrap();
        Finished::new(output, self.path().to_path_buf(), None)
    }
}

/// Every event of a transcript, parsed.
pub fn transcript(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("bad transcript line {line}: {err}"))
        })
        .collect()
}

pub fn events<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["type"] == kind)
        .collect()
}

/// S2's invariant: every tool_use of every assistant message has exactly one tool_result,
/// and results come in call order.
pub fn assert_every_tool_use_answered_once(all: &[Value]) {
    let uses: Vec<String> = events(all, "assistant_message")
        .iter()
        .flat_map(|event| event["content"].as_array().unwrap().iter())
        .filter(|block| block["type"] == "tool_use")
        .map(|block| block["id"].as_str().unwrap().to_string())
        .collect();
    let results: Vec<String> = events(all, "tool_result")
        .iter()
        .map(|event| event["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(uses, results, "tool_use ids vs tool_result ids");
    let mut seen = HashMap::new();
    for id in &results {
        *seen.entry(id).or_insert(0) += 1;
    }
    assert!(
        seen.values().all(|count| *count == 1),
        "a tool_use was answered twice: {seen:?}"
    );
}

/// The transcript's conversations in order of appearance, each with its events: the run's
/// own and each sub-agent's (an event carries the `agent_id` of the one it belongs to).
pub fn conversations(all: &[Value]) -> Vec<Vec<Value>> {
    let mut agents: Vec<&Value> = Vec::new();
    for event in all {
        if !agents.contains(&&event["agent_id"]) {
            agents.push(&event["agent_id"]);
        }
    }
    agents
        .into_iter()
        .map(|agent| {
            all.iter()
                .filter(|event| event["agent_id"] == *agent)
                .cloned()
                .collect()
        })
        .collect()
}

/// S2 within each conversation: the run's own and each sub-agent's (a sub-agent's calls are
/// answered before the Agent call that started it, so they are checked apart).
pub fn assert_each_conversation_answers_every_tool_use_once(all: &[Value]) {
    for conversation in conversations(all) {
        assert_every_tool_use_answered_once(&conversation);
    }
}

/// A parsed JUnit report: (tests, failures) of the first suite, and its properties.
pub struct Junit {
    pub tests: usize,
    pub failures: usize,
    pub testcases: Vec<(String, bool)>,
    pub properties: HashMap<String, String>,
    pub system_out: String,
}

pub fn junit(path: &Path) -> Junit {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let suite = doc
        .descendants()
        .find(|node| node.has_tag_name("testsuite"))
        .unwrap();
    let number = |name: &str| suite.attribute(name).unwrap().parse::<usize>().unwrap();
    let testcases = suite
        .children()
        .filter(|node| node.has_tag_name("testcase"))
        .map(|case| {
            let failed = case
                .children()
                .any(|c| c.has_tag_name("failure") || c.has_tag_name("error"));
            (case.attribute("name").unwrap().to_string(), failed)
        })
        .collect();
    let properties = suite
        .descendants()
        .filter(|node| node.has_tag_name("property"))
        .map(|p| {
            (
                p.attribute("name").unwrap().to_string(),
                p.attribute("value").unwrap().to_string(),
            )
        })
        .collect();
    let system_out = suite
        .children()
        .find(|node| node.has_tag_name("system-out"))
        .and_then(|node| node.text())
        .unwrap_or_default()
        .to_string();
    Junit {
        tests: number("tests"),
        failures: number("failures"),
        testcases,
        properties,
        system_out,
    }
}
pub mod bash;

/// `script` as a Bash call the gate cannot read into: written to `./.unseen.sh` through a
/// literal path, run by `bash`, then removed (its status kept). The gate holds a write whose
/// target it cannot see to a guardrail that bypassPermissions does not lift, so a test that
/// shows what the sandbox alone contains hands the sandbox such a write this way: a script
/// file, which bypassPermissions runs unread.
pub fn unseen_script(script: &str) -> String {
    format!(
        "printf '%s\\n' '{}' > .unseen.sh && bash ./.unseen.sh; s=$?; rm -f .unseen.sh; exit $s",
        script.replace('\'', "'\\''")
    )
}

/// `git init -q` in `ws`; where git is missing, the folders the guardrails know a git
/// directory by (`.git/hooks`, `.git/config`) made by hand.
/// `git ARGS` in `dir` with a throwaway identity; its stdout, or a panic with its stderr.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A bare `remote.git` in `dir` and its clone `ws`, with one commit pushed to `main`: where
/// a run's change is published from. Returns the clone.
pub fn remote_and_clone(dir: &Path) -> std::path::PathBuf {
    git(dir, &["init", "-q", "--bare", "remote.git"]);
    git(dir, &["clone", "-q", "remote.git", "ws"]);
    let ws = dir.join("ws");
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "init"]);
    git(&ws, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    ws
}

pub fn git_init_or_plant(ws: &Path) {
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status();
    if !git.is_ok_and(|status| status.success()) {
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    }
}
