//! Helpers for end-to-end tests, one of each. The fakes and most helpers are the
//! `tollgate-test-support` crate's (`crates/test-support`, its top comment is their guide),
//! re-exported here so a suite names them all as `crate::support::…`; what starts the binary
//! lives here, because only this test binary knows where cargo built it (`runs.rs` says
//! more):
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
//! - from the crate: the fake servers (`fake_model`, `fake_forge` with `octokit` and
//!   `github_objects`, `mcp_http`, `identity_fake`, `aws_fake_script`), `browser`, `bash`,
//!   the transcript and JUnit readers, `poll_until` and `wait_for_text`, `procs`, the git and
//!   folder helpers, `encode`, `skip`, and `request_parts` for the request budget.

use std::path::{Path, PathBuf};
use std::process::Output;

pub use tollgate_test_support::records::{
    assert_each_conversation_answers_every_tool_use_once, assert_every_tool_use_answered_once,
    conversations, events, junit, transcript,
};
pub use tollgate_test_support::wait::{poll_until, wait_for_text};
pub use tollgate_test_support::workspace::{
    copy_tree, git, git_init_or_plant, remote_and_clone, unseen_script,
};
pub use tollgate_test_support::{
    aws_fake_script, bash, browser, encode, fake_forge, fake_model, github_objects, identity_fake,
    mcp_http, octokit, procs, repo_root, request_parts, skip,
};

pub mod runs;
pub use runs::{AMBIENT, Finished, Isolation, Run, tollgate_in};

/// A temp folder holding a copy of `examples/` and `policies/`, laid out as in the repo,
/// so a run may edit its workspace freely.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn with_examples() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        for folder in ["examples", "policies"] {
            copy_tree(&repo_root().join(folder), &dir.path().join(folder));
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
