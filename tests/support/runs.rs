//! Running the real `tollgate` binary: `tollgate_in` for any command line, `Isolation` for
//! which of the operator's configuration it sees, `Run` to build a run of a task in a scratch
//! folder, and `Finished` for what a run left behind.
//!
//! This stays with the tests rather than in the test-support crate because it is where the
//! binary is known: cargo hands `env!("CARGO_BIN_EXE_tollgate")` only to the root package's
//! integration tests and benches, and a path set at run time (a `OnceLock` the crate reads)
//! would have to be set by every test before its first command, with nothing to enforce it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tollgate_test_support::fake_model::FakeModel;
use tollgate_test_support::records;
use tollgate_test_support::repo_root;
use tollgate_test_support::workspace::copy_tree;

/// What of the test machine's environment would change what a run does: the log level, the
/// real providers' keys and URLs, being inside GitHub Actions, a batch's shard index.
pub const AMBIENT: &[&str] = &[
    "RUST_LOG",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GITHUB_ACTIONS",
    "JOB_COMPLETION_INDEX",
];

/// The binary, to run in `dir`, with none of the machine's `AMBIENT` settings: every test
/// starts tollgate through this, so no test depends on the shell it was started from.
pub fn tollgate_in(dir: impl AsRef<Path>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command.current_dir(dir.as_ref());
    for name in AMBIENT {
        command.env_remove(name);
    }
    command
}

/// Which of the operator's configuration a command sees, each folder named inside the folder
/// it runs in: the user's policy folder, the managed policy folder, `HOME`, and other
/// variables. What it does not name stays as `tollgate_in` leaves it (the machine's).
///
/// ```ignore
/// let only_ours = Isolation::new().user_config("config").managed("etc");
/// let ran = sandbox.run(&only_ours, &["--policy", "p.yaml"]);
/// ```
#[derive(Clone, Default)]
pub struct Isolation {
    /// As `XDG_CONFIG_HOME`: the user's policy is its `tollgate/policy.yaml`.
    user_config: Option<PathBuf>,
    /// As `TOLLGATE_MANAGED_DIR`, in place of `/etc/tollgate`.
    managed: Option<PathBuf>,
    home: Option<PathBuf>,
    /// Set last, so a test's own value of a variable above wins.
    env: Vec<(OsString, OsString)>,
}

impl Isolation {
    pub fn new() -> Isolation {
        Isolation::default()
    }

    /// The user's policy folder is `relative/tollgate/`.
    pub fn user_config(mut self, relative: &str) -> Isolation {
        self.user_config = Some(relative.into());
        self
    }

    /// The managed policy is what `relative/` holds (nothing, unless the test writes there).
    pub fn managed(mut self, relative: &str) -> Isolation {
        self.managed = Some(relative.into());
        self
    }

    /// `HOME` is `relative/`. Without `user_config`, the machine's `XDG_CONFIG_HOME` is unset
    /// too, so the user's policy folder is the home's `.config/tollgate/`.
    pub fn home(mut self, relative: &str) -> Isolation {
        self.home = Some(relative.into());
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<OsStr>) -> Isolation {
        self.env.push((name.into(), value.as_ref().to_os_string()));
        self
    }

    /// `tollgate_in(dir)` seeing only the configuration this names.
    pub fn command(&self, dir: &Path) -> Command {
        let mut command = tollgate_in(dir);
        if let Some(home) = &self.home {
            command.env("HOME", dir.join(home));
        }
        match (&self.user_config, &self.home) {
            (Some(config), _) => {
                command.env("XDG_CONFIG_HOME", dir.join(config));
            }
            (None, Some(_)) => {
                command.env_remove("XDG_CONFIG_HOME");
            }
            (None, None) => {}
        }
        if let Some(managed) = &self.managed {
            command.env("TOLLGATE_MANAGED_DIR", dir.join(managed));
        }
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }
}

/// One `tollgate run` of a task in a scratch folder (`ws/` its workspace, `out/` its output):
///
/// ```ignore
/// let run = Run::new()
///     .file("ws/notes.txt", "…")
///     .task(&task_yaml)
///     .policy("permissions:\n  allow: [Read]\n")
///     .model(&server)
///     .finish_async()
///     .await;
/// assert_eq!(run.code, 0, "{}", run.stderr);
/// run.assert_every_tool_use_answered_once();
/// ```
///
/// No managed policy applies (`TOLLGATE_MANAGED_DIR` is the scratch's absent `etc/`) unless
/// the test writes one there or sets the variable itself.
pub struct Run {
    scratch: tempfile::TempDir,
    /// `None`: no task file, the prompt comes from the arguments (`-p`).
    task: Option<PathBuf>,
    args: Vec<OsString>,
    isolation: Isolation,
}

impl Default for Run {
    fn default() -> Run {
        Run::new()
    }
}

impl Run {
    pub fn new() -> Run {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::create_dir(scratch.path().join("ws")).unwrap();
        Run {
            task: Some(scratch.path().join("task.yaml")),
            args: Vec::new(),
            isolation: Isolation::new().managed("etc"),
            scratch,
        }
    }

    /// The scratch folder, to write into before the run.
    pub fn dir(&self) -> &Path {
        self.scratch.path()
    }

    /// Writes `text` to `relative` in the scratch folder (`ws/…` for the workspace).
    pub fn file(self, relative: &str, text: &str) -> Run {
        let path = self.dir().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// The task, as `task.yaml` in the scratch folder.
    pub fn task(self, yaml: &str) -> Run {
        self.file("task.yaml", yaml)
    }

    /// A task file that is already somewhere (an example of the repository's).
    pub fn task_file(mut self, path: &Path) -> Run {
        self.task = Some(path.to_path_buf());
        self
    }

    /// No task file: `tollgate run -p PROMPT …` with what `args` gives.
    pub fn without_task(mut self) -> Run {
        self.task = None;
        self
    }

    /// The operator's policy, as `policy.yaml` given with `--policy`.
    pub fn policy(self, yaml: &str) -> Run {
        let path = self.dir().join("policy.yaml");
        self.file("policy.yaml", yaml)
            .args([OsStr::new("--policy"), path.as_os_str()])
    }

    /// The key `server` wants, in `TEST_MODEL_KEY` (the task's `api_key_env`).
    pub fn model(self, server: &FakeModel) -> Run {
        let key = server.key().to_string();
        self.env("TEST_MODEL_KEY", key)
    }

    /// As GitHub Actions runs it: summary, outputs and annotations on, `GITHUB_WORKSPACE` the
    /// repository.
    pub fn github_actions(self) -> Run {
        let dir = self.dir().to_path_buf();
        self.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", dir.join("step_summary.md"))
            .env("GITHUB_OUTPUT", dir.join("github_output"))
            .env("GITHUB_WORKSPACE", repo_root())
    }

    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Run {
        self.args
            .extend(args.into_iter().map(|arg| arg.as_ref().to_os_string()));
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<OsStr>) -> Run {
        self.isolation = self.isolation.env(name, value);
        self
    }

    pub fn envs(self, vars: &[(&str, &str)]) -> Run {
        vars.iter()
            .fold(self, |run, (name, value)| run.env(name, value))
    }

    /// `tollgate run TASK --out OUT ARGS`, waited for.
    pub fn finish(self) -> Finished {
        let output = self.command().output().unwrap();
        self.finished(output)
    }

    /// As `finish`, with `stdin` as the run's standard input (a pipe, a FIFO).
    pub fn finish_with_stdin(self, stdin: impl Into<Stdio>) -> Finished {
        let output = self.command().stdin(stdin).output().unwrap();
        self.finished(output)
    }

    /// As `finish`, without blocking the runtime a fake server in this test runs on.
    pub async fn finish_async(self) -> Finished {
        let output = tokio::process::Command::from(self.command())
            .output()
            .await
            .unwrap();
        self.finished(output)
    }

    fn command(&self) -> Command {
        let mut command = self.isolation.command(self.dir());
        command
            .arg("run")
            .args(&self.task)
            .arg("--out")
            .arg(self.dir().join("out"))
            .args(&self.args)
            .stdin(Stdio::null());
        command
    }

    fn finished(self, output: Output) -> Finished {
        let dir = self.dir().to_path_buf();
        Finished::new(output, dir, Some(self.scratch))
    }
}

/// What one `tollgate run` left behind, in the folder it ran in: a `Run`'s scratch folder or
/// a `Sandbox` (`Sandbox::run`).
pub struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The scratch folder the run was in, `ws` its workspace, `out` its output folder.
    pub dir: PathBuf,
    pub ws: PathBuf,
    pub out: PathBuf,
    pub step_summary: String,
    pub github_output: String,
    /// The transcript's events, `None` when the run wrote none.
    events: Option<Vec<Value>>,
    /// Keeps a `Run`'s scratch folder until the test ends (a sandbox keeps its own).
    _scratch: Option<tempfile::TempDir>,
}

impl Finished {
    /// What the run that ended with `output` left in `dir` (its output in `dir/out/`).
    pub(super) fn new(
        output: Output,
        dir: PathBuf,
        scratch: Option<tempfile::TempDir>,
    ) -> Finished {
        // Written only under `github_actions`.
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let out = dir.join("out");
        let transcript = out.join("transcript.jsonl");
        Finished {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            events: transcript
                .is_file()
                .then(|| records::transcript(&transcript)),
            ws: dir.join("ws"),
            out,
            step_summary: read("step_summary.md"),
            github_output: read("github_output"),
            dir,
            _scratch: scratch,
        }
    }

    /// The exit code is `code`; the run's stderr says why not.
    #[track_caller]
    pub fn assert_code(&self, code: i32) {
        assert_eq!(self.code, code, "{}", self.stderr);
    }

    /// A file of the output folder.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_else(|err| {
            panic!(
                "{name}: {err}\nstdout: {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn json(&self, name: &str) -> Value {
        serde_json::from_str(&self.read(name)).unwrap()
    }

    pub fn wrote_transcript(&self) -> bool {
        self.events.is_some()
    }

    /// The transcript's events; a run that wrote none fails the test here.
    pub fn events(&self) -> &[Value] {
        self.events
            .as_deref()
            .unwrap_or_else(|| panic!("no transcript\nstderr: {}", self.stderr))
    }

    /// The events of type `kind`.
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        records::events(self.events(), kind)
    }

    /// The `run_started` event.
    pub fn started(&self) -> &Value {
        self.of_type("run_started")[0]
    }

    /// The `run_finished` event.
    pub fn finished(&self) -> &Value {
        self.of_type("run_finished")[0]
    }

    /// The MCP servers `run_started` lists.
    pub fn mcp_servers(&self) -> &Vec<Value> {
        self.started()["mcp_servers"].as_array().unwrap()
    }

    /// The policy's warnings `run_started` lists, as one JSON text to search.
    pub fn policy_warnings(&self) -> String {
        self.started()["policy"]["warnings"].to_string()
    }

    /// The `tool_result` of the `nth` call of `tool` (from 0).
    #[track_caller]
    pub fn result(&self, tool: &str, nth: usize) -> &Value {
        self.of_type("tool_result")
            .into_iter()
            .filter(|result| result["tool"] == tool)
            .nth(nth)
            .unwrap_or_else(|| panic!("no result {nth} of {tool}: {:#?}", self.events()))
    }

    /// The text of that result (empty when its content is not text).
    #[track_caller]
    pub fn result_text(&self, tool: &str, nth: usize) -> &str {
        self.result(tool, nth)["content"]
            .as_str()
            .unwrap_or_default()
    }

    /// The names of the tools the model was offered in request `turn` (from 0).
    pub fn request_tools(&self, turn: usize) -> Vec<String> {
        self.of_type("model_request")[turn]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| name.as_str().unwrap().to_string())
            .collect()
    }

    /// Each `api_retry`'s (category, status).
    pub fn retries(&self) -> Vec<(Value, Value)> {
        self.of_type("api_retry")
            .iter()
            .map(|e| (e["category"].clone(), e["status"].clone()))
            .collect()
    }

    pub fn junit(&self) -> records::Junit {
        records::junit(&self.out.join("junit.xml"))
    }

    pub fn assert_every_tool_use_answered_once(&self) {
        records::assert_every_tool_use_answered_once(self.events());
    }

    /// As `assert_every_tool_use_answered_once`, within each conversation: the run's own and
    /// each sub-agent's.
    pub fn assert_each_conversation_answers_every_tool_use_once(&self) {
        records::assert_each_conversation_answers_every_tool_use_once(self.events());
    }
}

/// Runs `tollgate run TASK --out <scratch>/out ARGS…` as GitHub Actions would, with `env`
/// added.
pub fn run_task(task: &Path, args: &[&str], env: &[(&str, &str)]) -> Finished {
    Run::new()
        .task_file(task)
        .github_actions()
        .args(args)
        .envs(env)
        .finish()
}

/// A scratch copy of the quick start's workspace, so runs do not write into the repository.
pub fn quickstart_workdir(scratch: &Path) -> PathBuf {
    let workdir = scratch.join("workspace");
    copy_tree(&repo_root().join("examples/quickstart"), &workdir);
    workdir
}
