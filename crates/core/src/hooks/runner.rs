//! The one way hooks run, whatever their event: select the hooks that apply, start them all at
//! once (a slow hook then costs its own time, not the sum), confined and within their timeouts,
//! read each finished process with the event's reader, apply the hook's `on_error`, and hand
//! the runs back in policy order. What the answers amount to together is each event's fold.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Hook, HookConfinement, HookError, HookEvent, OnError};
use crate::base::{AbortSignal, truncate_middle};
use crate::exec::{self, ChildEnv, Ending, ExecOutcome, ExecRequest, Stdin};

/// Output kept per stream. A hook's answer is a small JSON object; anything longer is a bug
/// in the hook, and is reported as such rather than parsed from a cut-off prefix.
const HOOK_CAPTURE_BYTES: usize = 1024 * 1024;

/// Stderr kept per run in the report.
const STDERR_CHARS: usize = 2000;

/// How one event reads its hooks. Plain function pointers: a reader holds no state, and so
/// the same one serves every hook task.
pub(super) struct Reader<A> {
    /// A finished process (its timeout in seconds, for the error) as the event's answer.
    pub read: fn(&ExecOutcome, HookEvent, u64) -> Result<A, HookError>,
    /// What a hook that gave no usable answer counts as under its `on_error`.
    pub on_error: fn(OnError, &HookError) -> A,
}

// By hand: a derive would ask `A: Copy`, and the pointers are copied whatever `A` is.
impl<A> Clone for Reader<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for Reader<A> {}

/// Which hooks run, and where: those for `event` whose matcher covers `subject` (a tool's
/// name, SessionStart's source, PreCompact's trigger), in `cwd`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Occasion<'a> {
    pub event: HookEvent,
    pub subject: &'a str,
    pub cwd: &'a Path,
}

/// One hook's run as its event's reader and `on_error` made it. `pub` (in this private
/// module) because a moment's hooks are recorded as it is (`EventRun`); there the answer's
/// own tag stands beside the other fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ran<A> {
    pub command: String,
    pub source: PathBuf,
    /// `None` when it was not started, timed out, was aborted or was killed by a signal.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    #[serde(flatten)]
    pub answer: A,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it printed on stderr, shortened, with the confinement's note.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

impl<A> Ran<A> {
    /// The same run with its answer turned into another event type's.
    pub fn map<B>(self, f: impl FnOnce(A) -> B) -> Ran<B> {
        Ran {
            command: self.command,
            source: self.source,
            exit_code: self.exit_code,
            duration_ms: self.duration_ms,
            answer: f(self.answer),
            error: self.error,
            stderr: self.stderr,
        }
    }
}

/// Runs every hook for the occasion, all at once, each with `stdin` (built only when a hook
/// applies: a tool call without hooks pays nothing) and `TOLLGATE_HOOK_EVENT` set, confined
/// by `confinement` when given; one run per hook that applied, in policy order (not
/// completion order).
pub(super) async fn run_matching<A: Send + 'static>(
    hooks: &[Hook],
    occasion: Occasion<'_>,
    stdin: impl FnOnce() -> Vec<u8>,
    env: &ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
    reader: Reader<A>,
) -> Vec<Ran<A>> {
    let Occasion {
        event,
        subject,
        cwd,
    } = occasion;
    let matching: Vec<Hook> = hooks
        .iter()
        .filter(|hook| hook.spec.applies_to(event, subject))
        .cloned()
        .collect();
    if matching.is_empty() {
        return Vec::new();
    }
    let stdin = stdin();
    let env = env.with("TOLLGATE_HOOK_EVENT", event.as_str());
    let mut tasks = tokio::task::JoinSet::new();
    for (index, hook) in matching.iter().cloned().enumerate() {
        let (cwd, stdin, env, abort) =
            (cwd.to_path_buf(), stdin.clone(), env.clone(), abort.clone());
        let confinement = confinement.clone();
        tasks.spawn(async move {
            let process = run_process(&hook, cwd, stdin, env, &abort, confinement).await;
            (index, settle(hook, event, process, reader))
        });
    }
    in_order(tasks, matching.len())
        .await
        .into_iter()
        .zip(matching)
        .map(|(ran, hook)| {
            ran.unwrap_or_else(|| {
                // Its task panicked: the hook's answer is lost, and that is a failure of the
                // hook's, for its `on_error` to judge like any other.
                let lost = ProcessRun {
                    process: Err(HookError::Internal(
                        "its task ended without an answer".to_string(),
                    )),
                    exit_code: None,
                    duration_ms: 0,
                    stderr: String::new(),
                };
                settle(hook, event, lost, reader)
            })
        })
        .collect()
}

/// A hook's process read as its event's answer, or as what its `on_error` makes of a failure.
fn settle<A>(hook: Hook, event: HookEvent, ran: ProcessRun, reader: Reader<A>) -> Ran<A> {
    let timeout_secs = hook.spec.timeout_secs();
    let read = ran
        .process
        .and_then(|process| (reader.read)(&process, event, timeout_secs));
    let (answer, error) = match read {
        Ok(answer) => (answer, None),
        Err(err) => (
            (reader.on_error)(hook.spec.on_error, &err),
            Some(err.to_string()),
        ),
    };
    Ran {
        command: hook.spec.command,
        source: hook.source,
        exit_code: ran.exit_code,
        duration_ms: ran.duration_ms,
        answer,
        error,
        stderr: ran.stderr,
    }
}

/// One hook process, run to its end: what it printed, or why it gave nothing to read.
struct ProcessRun {
    process: Result<ExecOutcome, HookError>,
    exit_code: Option<i32>,
    duration_ms: u64,
    /// Shortened, with the confinement's note.
    stderr: String,
}

/// Runs one hook's command with `stdin`, in `cwd`, within its timeout, confined when asked.
async fn run_process(
    hook: &Hook,
    cwd: PathBuf,
    stdin: Vec<u8>,
    env: ChildEnv,
    abort: &AbortSignal,
    confinement: Option<Arc<dyn HookConfinement>>,
) -> ProcessRun {
    let started = Instant::now();
    let timeout_secs = hook.spec.timeout_secs();
    let confined = match &confinement {
        Some(confinement) => confinement.prepare(&env).map(Some),
        None => Ok(None),
    };
    let mut request = ExecRequest::bash(
        &hook.spec.command,
        cwd,
        env,
        Duration::from_secs(timeout_secs),
    );
    request.stdin = Stdin::Bytes(stdin);
    request.capture.max_bytes = HOOK_CAPTURE_BYTES;
    let (process, exit_code, mut stderr) = if abort.is_aborted() {
        (Err(HookError::Aborted), None, String::new())
    } else if let Err(err) = &confined {
        // A hook that cannot be confined does not run.
        (Err(HookError::Spawn(err.clone())), None, String::new())
    } else {
        if let Ok(Some((env, step))) = confined {
            request.env = env;
            request.pre_exec = Some(step);
        }
        match exec::run(request, async {
            abort.aborted().await;
        })
        .await
        {
            Ok(process) => {
                let exit_code = match process.ending {
                    Ending::Exited(code) => Some(code),
                    Ending::Signalled(_) | Ending::TimedOut | Ending::Cancelled => None,
                };
                let stderr = process.stderr.text.clone();
                (Ok(process), exit_code, stderr)
            }
            Err(err) => (Err(HookError::Spawn(err.to_string())), None, String::new()),
        }
    };
    if let Some(note) = confinement.as_ref().and_then(|c| c.after()) {
        stderr.push_str(&format!("\n[{note}]"));
    }
    ProcessRun {
        process,
        exit_code,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stderr: truncate_middle(stderr.trim_end(), STDERR_CHARS),
    }
}

/// The hooks' results in the order they were started (`tasks` yields each with its index); a
/// task that panicked leaves its slot empty, for the caller to fail that hook.
async fn in_order<T: 'static>(
    mut tasks: tokio::task::JoinSet<(usize, T)>,
    count: usize,
) -> Vec<Option<T>> {
    let mut slots: Vec<Option<T>> = (0..count).map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        if let Ok((index, run)) = joined
            && let Some(slot) = slots.get_mut(index)
        {
            *slot = Some(run);
        }
    }
    slots
}
