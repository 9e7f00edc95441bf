//! The scheduler driven directly with test-only tools held by latches: no sleeps, a logical
//! clock for overlap, and the S2/S6 invariant as a property.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::{Barrier, mpsc, oneshot};

use super::*;
use crate::base::{AbortHandle, AbortReason};
use crate::call::{PreparedCall, Scheduling};
use crate::policy::{ToolName, Workspace};
use crate::tools::{
    CommandEnding, CommandOutcome, CommandRun, FileStateCache, InterruptBehavior, Tool,
    ToolContext, ToolError, ToolFuture, ToolInput, ToolLimits, ToolOutput,
};
use crate::transcript::{ProgressUpdate, ResultStatus};

/// What the tools did, on a logical clock.
#[derive(Default)]
struct Lab {
    clock: AtomicU64,
    started: Mutex<Option<mpsc::UnboundedSender<usize>>>,
    gates: Mutex<HashMap<usize, oneshot::Receiver<Result<String, String>>>>,
    spans: Mutex<HashMap<usize, (u64, Option<u64>)>>,
    barrier: Mutex<Option<Arc<Barrier>>>,
}

impl Lab {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }
}

/// Records the end of a call when its future is dropped, finished or cancelled.
struct Span(Arc<Lab>, usize);

impl Drop for Span {
    fn drop(&mut self) {
        let end = self.0.tick();
        if let Some(span) = self.0.spans.lock().unwrap().get_mut(&self.1) {
            span.1 = Some(end);
        }
    }
}

/// Named Bash, Read or Write for the behaviour the scheduler reads off the tool; safety and
/// whether it runs a command come from the input, the result from the test through a oneshot.
struct LatchTool {
    name: ToolName,
    behavior: InterruptBehavior,
    lab: Arc<Lab>,
}

impl Tool for LatchTool {
    fn name(&self) -> ToolName {
        self.name.clone()
    }
    fn description(&self) -> std::borrow::Cow<'static, str> {
        "test".into()
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn interrupt_behavior(&self) -> InterruptBehavior {
        self.behavior
    }
    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        Ok(Box::new(LatchInput {
            input: input.clone(),
            lab: self.lab.clone(),
        }))
    }
}

struct LatchInput {
    input: Value,
    lab: Arc<Lab>,
}

impl LatchInput {
    /// A failure as the tool reports it: a command's ending when it runs one.
    fn failure(&self, text: String) -> ToolError {
        if self.input["command"] == true {
            ToolError::Command(CommandRun {
                outcome: CommandOutcome::new(CommandEnding::Exited { code: 1 }),
                output: text,
            })
        } else {
            ToolError::Failed(text)
        }
    }
}

impl ToolInput for LatchInput {
    fn is_concurrency_safe(&self, _ctx: &crate::policy::PermissionContext) -> bool {
        self.input["safe"] == true
    }
    fn check_permissions(
        &self,
        _ctx: &crate::policy::PermissionContext,
    ) -> crate::policy::ToolCheck {
        crate::policy::ToolCheck::Passthrough {
            reason: "the scheduler test never gates".into(),
        }
    }
    fn stopped(&self, reason: String) -> ToolError {
        match self.input["command"] == true {
            true => ToolError::Command(CommandRun::stopped(reason)),
            false => ToolError::Stopped(reason),
        }
    }
    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        let input = &self.input;
        Box::pin(async move {
            let key = input["key"].as_u64().unwrap() as usize;
            let gate = self.lab.gates.lock().unwrap().remove(&key);
            let start = self.lab.tick();
            self.lab.spans.lock().unwrap().insert(key, (start, None));
            let _span = Span(self.lab.clone(), key);
            if let Some(line) = input["progress"].as_str() {
                ctx.progress.as_ref().unwrap().line(line);
            }
            if let Some(started) = self.lab.started.lock().unwrap().as_ref() {
                let _ = started.send(key);
            }
            let barrier = self.lab.barrier.lock().unwrap().clone();
            if let Some(barrier) = barrier {
                barrier.wait().await;
                return Ok(ToolOutput::new(format!("{key} passed the barrier")));
            }
            match gate {
                Some(gate) => match gate.await {
                    Ok(Ok(text)) => Ok(ToolOutput::new(text)),
                    Ok(Err(text)) => Err(self.failure(text)),
                    Err(_) => Err(ToolError::Failed("the test dropped the latch".into())),
                },
                None => Ok(ToolOutput::new("ran")),
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Landed {
    Answered,
    Ok(String),
    Err(String),
    Cancelled(Cancellation, bool),
}

/// Admits everything except the calls listed as denied; records what lands.
struct Host {
    tools: Vec<Arc<dyn Tool>>,
    denied: Vec<usize>,
    admitted: Vec<usize>,
    landed: Vec<(usize, Landed)>,
    progress: Vec<(String, ProgressUpdate)>,
    lab: Arc<Lab>,
    /// (index, clock) of each landing, to check head-of-line order against the tools' ends.
    land_times: Vec<(usize, u64)>,
    /// One call's deadline.
    deadline: Option<(usize, CallDeadline)>,
    /// Each batch: the clock when it started, its calls and the clock when they stopped.
    batches: Vec<(u64, Vec<usize>, Option<u64>)>,
}

impl Host {
    fn new(lab: &Arc<Lab>) -> Host {
        let tool = |name: ToolName, behavior| -> Arc<dyn Tool> {
            Arc::new(LatchTool {
                name,
                behavior,
                lab: lab.clone(),
            })
        };
        Host {
            tools: vec![
                tool(ToolName::Bash, InterruptBehavior::Block),
                tool(ToolName::Read, InterruptBehavior::Cancel),
                tool(ToolName::Write, InterruptBehavior::Block),
            ],
            denied: Vec::new(),
            admitted: Vec::new(),
            landed: Vec::new(),
            progress: Vec::new(),
            lab: lab.clone(),
            land_times: Vec::new(),
            deadline: None,
            batches: Vec::new(),
        }
    }

    fn tool(&self, name: &ToolName) -> Arc<dyn Tool> {
        self.tools
            .iter()
            .find(|tool| tool.name() == *name)
            .unwrap()
            .clone()
    }

    fn prepared(&self, call: &Call) -> PreparedCall {
        PreparedCall::prepare(self.tool(&call.name), call.input.clone()).unwrap()
    }
}

impl TurnHost for Host {
    type Error = Infallible;

    fn scheduling(&self, _index: usize, call: &Call) -> Option<Scheduling> {
        Some(crate::policy::with_test_context(|ctx| {
            self.prepared(call).scheduling(ctx)
        }))
    }

    async fn admit(&mut self, index: usize, call: &Call) -> Result<Admission, Infallible> {
        self.admitted.push(index);
        if self.denied.contains(&index) {
            return Ok(Admission::Answered {
                content: "Permission denied".into(),
                status: ResultStatus::Denied,
            });
        }
        let prepared = self.prepared(call);
        Ok(Admission::Run {
            scheduling: crate::policy::with_test_context(|ctx| prepared.scheduling(ctx)),
            call: Arc::new(prepared),
            deadline: self
                .deadline
                .clone()
                .and_then(|(at, deadline)| (at == index).then_some(deadline)),
            basis: crate::policy::AllowBasis::Granted,
        })
    }

    async fn land(
        &mut self,
        index: usize,
        _call: &Call,
        landing: Landing,
    ) -> Result<(), Infallible> {
        let landed = match landing {
            Landing::Answered { .. } => Landed::Answered,
            Landing::Ran {
                result: Ok(out), ..
            } => Landed::Ok(out.content),
            Landing::Ran {
                result: Err(err), ..
            } => Landed::Err(err.to_string()),
            Landing::Cancelled { why, started, .. } => Landed::Cancelled(why, started),
        };
        self.land_times.push((index, self.lab.tick()));
        self.landed.push((index, landed));
        Ok(())
    }

    fn progress(&mut self, call: &Call, update: ProgressUpdate) -> Result<(), Infallible> {
        self.progress.push((call.id.clone(), update));
        Ok(())
    }

    async fn calls_starting(&mut self) -> Result<(), Infallible> {
        self.batches.push((self.lab.tick(), Vec::new(), None));
        Ok(())
    }

    async fn calls_stopped(&mut self, ran: &[(usize, &Call)]) -> Result<(), Infallible> {
        let tick = self.lab.tick();
        let batch = self.batches.last_mut().unwrap();
        batch.1 = ran.iter().map(|(index, _)| *index).collect();
        batch.2 = Some(tick);
        Ok(())
    }
}

/// A Bash call runs a command, as the real one does.
fn call(index: usize, name: &str, safe: bool) -> Call {
    Call {
        id: format!("t{index}"),
        name: ToolName::from_model(name),
        input: json!({"key": index, "safe": safe, "command": name == "Bash"}),
    }
}

fn context() -> (ToolContext, AbortHandle) {
    let (handle, abort) = AbortHandle::new();
    let ctx = ToolContext {
        resolver: Default::default(),
        workspace: Arc::new(Workspace::new("/".into(), vec![], None)),
        rules: Arc::default(),
        limits: ToolLimits::default(),
        abort,
        files: FileStateCache::default(),
        command_env: crate::exec::RunEnv::new(&Default::default()).model,
        progress: None,
        sandbox: None,
        read_only: None,
        allow_basis: Default::default(),
        state: Default::default(),
    };
    (ctx, handle)
}

type Gate = oneshot::Sender<Result<String, String>>;

/// A lab whose calls wait for their gate, announcing each start on the returned channel.
fn latched(keys: usize) -> (Arc<Lab>, Vec<Gate>, mpsc::UnboundedReceiver<usize>) {
    let lab = Arc::new(Lab::default());
    let (tx, rx) = mpsc::unbounded_channel();
    *lab.started.lock().unwrap() = Some(tx);
    let mut senders = Vec::new();
    for key in 0..keys {
        let (send, receive) = oneshot::channel();
        lab.gates.lock().unwrap().insert(key, receive);
        senders.push(send);
    }
    (lab, senders, rx)
}

fn span(lab: &Lab, key: usize) -> (u64, u64) {
    let (start, end) = lab.spans.lock().unwrap()[&key];
    (start, end.unwrap())
}

/// The effect ledger's moments: the host hears before a batch starts (nothing running) and
/// after all its calls stopped, and none of the batch lands in between.
#[tokio::test]
async fn each_batch_is_bracketed_and_lands_after_it_stopped() {
    let lab = Arc::new(Lab::default());
    let mut host = Host::new(&lab);
    host.denied = vec![3];
    let calls = vec![
        call(0, "Read", true),
        call(1, "Read", true),
        call(2, "Write", false),
        call(3, "Write", false),
        call(4, "Read", true),
    ];
    let (ctx, _handle) = context();
    assert_eq!(
        run_turn(&mut host, &calls, &ctx, 10, None).await,
        Ok(TurnEnd::Complete)
    );
    let batches: Vec<Vec<usize>> = host.batches.iter().map(|b| b.1.clone()).collect();
    assert_eq!(batches, [vec![0, 1], vec![2], vec![4]]);
    for (started, ran, stopped) in &host.batches {
        let stopped = stopped.unwrap();
        for index in ran {
            let (start, end) = span(&lab, *index);
            assert!(
                *started < start && end < stopped,
                "call {index} outside its batch"
            );
            let landed = host.land_times.iter().find(|(i, _)| i == index).unwrap().1;
            assert!(
                landed > stopped,
                "call {index} landed before its batch stopped"
            );
        }
    }
}

#[tokio::test]
async fn safe_calls_run_together() {
    let lab = Arc::new(Lab::default());
    // Each call waits at the barrier until all three are in: run one at a time, they would
    // never pass it.
    *lab.barrier.lock().unwrap() = Some(Arc::new(Barrier::new(3)));
    let mut host = Host::new(&lab);
    let calls: Vec<Call> = (0..3).map(|i| call(i, "Read", true)).collect();
    let (ctx, _handle) = context();
    let end = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        run_turn(&mut host, &calls, &ctx, 10, None),
    )
    .await
    .expect("the safe calls did not run together");
    assert_eq!(end, Ok(TurnEnd::Complete));
    let order: Vec<usize> = host.landed.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, [0, 1, 2]);
}

#[tokio::test]
async fn an_unsafe_call_runs_alone_between_safe_ones_and_results_keep_call_order() {
    let (lab, mut gates, mut started) = latched(4);
    let mut host = Host::new(&lab);
    let calls = vec![
        call(0, "Read", true),
        call(1, "Read", true),
        call(2, "Write", false),
        call(3, "Read", true),
    ];
    let (ctx, _handle) = context();
    let driver = async {
        // 0 and 1 start together; 1 finishes first, yet 0 lands first.
        let mut first = vec![started.recv().await.unwrap(), started.recv().await.unwrap()];
        first.sort();
        assert_eq!(first, [0, 1]);
        gates.remove(1).send(Ok("one".into())).unwrap();
        gates.remove(0).send(Ok("zero".into())).unwrap();
        assert_eq!(started.recv().await, Some(2));
        gates.remove(0).send(Ok("two".into())).unwrap();
        assert_eq!(started.recv().await, Some(3));
        gates.remove(0).send(Ok("three".into())).unwrap();
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Ok("zero".into())),
            (1, Landed::Ok("one".into())),
            (2, Landed::Ok("two".into())),
            (3, Landed::Ok("three".into())),
        ]
    );
    let (write_start, write_end) = span(&lab, 2);
    assert!(span(&lab, 0).1 < write_start && span(&lab, 1).1 < write_start);
    assert!(write_end < span(&lab, 3).0);
    // The unsafe call was decided only after the calls before it had ended.
    assert_eq!(host.admitted, [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_failed_bash_cancels_its_siblings_and_a_failed_read_does_not() {
    let (lab, mut gates, mut started) = latched(4);
    let mut host = Host::new(&lab);
    let calls = vec![
        call(0, "Read", true),
        call(1, "Bash", true),
        call(2, "Read", true),
        call(3, "Read", true),
    ];
    let (ctx, _handle) = context();
    let driver = async {
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(started.recv().await.unwrap());
        }
        // The Read fails alone; then the Bash fails and takes 0 and 3 with it.
        gates.remove(2).send(Err("no such file".into())).unwrap();
        gates.remove(1).send(Err("out".into())).unwrap();
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    let sibling = Cancellation::SiblingError {
        failed_id: "t1".into(),
    };
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Cancelled(sibling.clone(), true)),
            (1, Landed::Err("out\n[exit code 1]".into())),
            (2, Landed::Err("no such file".into())),
            (3, Landed::Cancelled(sibling, true)),
        ]
    );
    // The cancelled calls' futures are gone before the turn returns.
    span(&lab, 0);
    span(&lab, 3);
}

/// The rule reads the outcome: a failed command cancels its siblings whatever the tool's
/// name, and a failure that is no command's does not, even from a tool named Bash.
#[tokio::test]
async fn the_sibling_rule_reads_the_outcome_not_the_name() {
    let (lab, mut gates, mut started) = latched(3);
    let mut host = Host::new(&lab);
    let mut runs_command = call(1, "Read", true);
    runs_command.input["command"] = json!(true);
    let mut no_command = call(0, "Bash", true);
    no_command.input["command"] = json!(false);
    let calls = vec![no_command, runs_command, call(2, "Read", true)];
    let (ctx, _handle) = context();
    let driver = async {
        for _ in 0..3 {
            started.recv().await.unwrap();
        }
        gates.remove(0).send(Err("not a command".into())).unwrap();
        while calls_ended(&lab) < 1 {
            tokio::task::yield_now().await;
        }
        gates.remove(0).send(Err("failed".into())).unwrap();
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Err("not a command".into())),
            (1, Landed::Err("failed\n[exit code 1]".into())),
            (
                2,
                Landed::Cancelled(
                    Cancellation::SiblingError {
                        failed_id: "t1".into()
                    },
                    true
                )
            ),
        ]
    );
}

/// A command stopped at the call's deadline did not succeed either: its siblings go.
#[tokio::test]
async fn a_command_stopped_at_its_deadline_cancels_its_siblings() {
    let (lab, _gates, mut started) = latched(2);
    let mut host = Host::new(&lab);
    host.deadline = Some((
        0,
        CallDeadline {
            at: tokio::time::Instant::now() + std::time::Duration::from_millis(50),
            message: "The tool call was stopped: limits.tool_timeout = 0.05s ran out".into(),
        },
    ));
    let calls = vec![call(0, "Bash", true), call(1, "Read", true)];
    let (ctx, _handle) = context();
    let driver = async {
        let _ = (started.recv().await, started.recv().await);
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    assert_eq!(
        host.landed[0].1,
        Landed::Err("The tool call was stopped: limits.tool_timeout = 0.05s ran out".into())
    );
    assert!(
        matches!(
            &host.landed[1].1,
            Landed::Cancelled(Cancellation::SiblingError { failed_id }, _) if failed_id == "t0"
        ),
        "{:?}",
        host.landed
    );
}

#[tokio::test]
async fn a_hard_stop_cancels_a_running_block_tool_and_never_starts_the_queue() {
    let (lab, _gates, mut started) = latched(3);
    let mut host = Host::new(&lab);
    host.denied = vec![1];
    let calls = vec![
        call(0, "Bash", false),
        call(1, "Write", false),
        call(2, "Read", true),
    ];
    let (ctx, handle) = context();
    let driver = async {
        assert_eq!(started.recv().await, Some(0));
        handle.abort(AbortReason::Terminate);
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::HardStopped));
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Cancelled(Cancellation::UserInterrupted, true)),
            (1, Landed::Cancelled(Cancellation::UserInterrupted, false)),
            (2, Landed::Cancelled(Cancellation::UserInterrupted, false)),
        ]
    );
    assert_eq!(host.admitted, [0], "queued calls are not even decided");
    span(&lab, 0);
}

#[tokio::test]
async fn a_queued_message_interrupts_only_cancel_tools() {
    // Only Reads running: the message aborts the round.
    let (lab, mut gates, mut started) = latched(2);
    let mut host = Host::new(&lab);
    let calls = vec![call(0, "Read", true), call(1, "Read", true)];
    let (ctx, _handle) = context();
    let queue = MessageQueue::default();
    let driver = async {
        let _ = (started.recv().await, started.recv().await);
        gates.remove(0).send(Ok("kept".into())).unwrap();
        // Let the first result land before the message comes: completed results are kept.
        while calls_ended(&lab) < 1 {
            tokio::task::yield_now().await;
        }
        queue.push("look at b.txt instead".into());
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, Some(&queue)) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Interrupted));
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Ok("kept".into())),
            (1, Landed::Cancelled(Cancellation::Interrupt, true)),
        ]
    );
    assert_eq!(
        queue.drain(),
        [QueuedInput::Message("look at b.txt instead".into())]
    );

    // A Bash (block) running beside a Read: the message waits for the next round.
    let (lab, mut gates, mut started) = latched(2);
    let mut host = Host::new(&lab);
    let calls = vec![call(0, "Read", true), call(1, "Bash", true)];
    let driver = async {
        let _ = (started.recv().await, started.recv().await);
        queue.push("later".into());
        // The scheduler has seen the message once its watcher is drained; release after.
        tokio::task::yield_now().await;
        gates.remove(0).send(Ok("read".into())).unwrap();
        gates.remove(0).send(Ok("bash".into())).unwrap();
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 10, Some(&queue)) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    assert_eq!(
        host.landed,
        vec![
            (0, Landed::Ok("read".into())),
            (1, Landed::Ok("bash".into()))
        ]
    );
    assert_eq!(queue.drain(), [QueuedInput::Message("later".into())]);
}

/// Calls whose future has ended. The scheduler's select prefers a finished call over a new
/// message, so a call ended before the message arrives lands before it.
fn calls_ended(lab: &Lab) -> usize {
    lab.spans
        .lock()
        .unwrap()
        .values()
        .filter(|s| s.1.is_some())
        .count()
}

#[tokio::test]
async fn progress_goes_out_before_the_call_lands() {
    let lab = Arc::new(Lab::default());
    let mut host = Host::new(&lab);
    let calls = vec![Call {
        id: "p".into(),
        name: ToolName::Bash,
        input: json!({"key": 0, "safe": false, "progress": "compiling"}),
    }];
    let (ctx, _handle) = context();
    run_turn(&mut host, &calls, &ctx, 10, None).await.unwrap();
    assert_eq!(
        host.progress,
        vec![(
            "p".to_string(),
            ProgressUpdate {
                lines: vec!["compiling".into()],
                omitted_lines: 0
            }
        )]
    );
}

#[tokio::test]
async fn max_parallel_bounds_the_safe_calls() {
    let (lab, mut gates, mut started) = latched(3);
    let mut host = Host::new(&lab);
    let calls: Vec<Call> = (0..3).map(|i| call(i, "Read", true)).collect();
    let (ctx, _handle) = context();
    let driver = async {
        let mut first = vec![started.recv().await.unwrap(), started.recv().await.unwrap()];
        first.sort();
        assert_eq!(first, [0, 1]);
        let mut gates: Vec<_> = gates.drain(..).map(Some).collect();
        gates[1].take().unwrap().send(Ok("1".into())).unwrap();
        assert_eq!(started.recv().await, Some(2));
        gates[0].take().unwrap().send(Ok("0".into())).unwrap();
        gates[2].take().unwrap().send(Ok("2".into())).unwrap();
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = run_turn(&mut host, &calls, &ctx, 2, None) => end,
        () = driver => unreachable!(),
    };
    assert_eq!(end, Ok(TurnEnd::Complete));
    assert!(span(&lab, 1).1 < span(&lab, 2).0);
}

/// One call of a generated turn.
#[derive(Debug, Clone)]
struct Planned {
    tool: &'static str,
    safe: bool,
    fails: bool,
    denied: bool,
}

fn planned() -> impl Strategy<Value = Planned> {
    (
        prop::sample::select(vec!["Bash", "Read", "Write"]),
        any::<bool>(),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(tool, safe, fails, denied)| Planned {
            tool,
            safe,
            fails,
            denied,
        })
}

#[derive(Debug, Clone, Copy)]
enum Disturbance {
    None,
    /// SIGTERM after this many releases.
    HardStop(usize),
    /// A queued message after this many releases.
    Message(usize),
}

fn disturbance() -> impl Strategy<Value = Disturbance> {
    prop_oneof![
        Just(Disturbance::None),
        (0usize..8).prop_map(Disturbance::HardStop),
        (0usize..8).prop_map(Disturbance::Message),
    ]
}

fn check_turn(
    plan: &[Planned],
    picks: &[usize],
    max_parallel: usize,
    disturbance: Disturbance,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (lab, gates, mut started) = latched(plan.len());
        let mut gates: Vec<_> = gates.into_iter().map(Some).collect();
        let mut host = Host::new(&lab);
        host.denied = (0..plan.len()).filter(|i| plan[*i].denied).collect();
        let calls: Vec<Call> = plan
            .iter()
            .enumerate()
            .map(|(i, p)| call(i, p.tool, p.safe))
            .collect();
        let (ctx, handle) = context();
        let queue = MessageQueue::default();
        let driver = async {
            let mut running: Vec<usize> = Vec::new();
            let mut releases = 0usize;
            loop {
                // Everything that started by now, then let the scheduler start more.
                while let Ok(key) = started.try_recv() {
                    running.push(key);
                }
                if running.is_empty() {
                    running.push(started.recv().await.unwrap());
                    continue;
                }
                match disturbance {
                    Disturbance::HardStop(at) if at == releases => {
                        handle.abort(AbortReason::Interrupt)
                    }
                    Disturbance::Message(at) if at == releases => queue.push("hey".into()),
                    _ => {}
                }
                let pick = picks[releases % picks.len()] % running.len();
                let key = running.swap_remove(pick);
                let result = if plan[key].fails {
                    Err(format!("{key} failed"))
                } else {
                    Ok(format!("{key} ok"))
                };
                if let Some(gate) = gates[key].take() {
                    let _ = gate.send(result);
                }
                releases += 1;
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
        };
        let end = tokio::select! {
            end = run_turn(&mut host, &calls, &ctx, max_parallel, Some(&queue)) => end,
            () = driver => unreachable!(),
        };
        let end = end.unwrap();
        // Every call landed exactly once, in call order.
        let order: Vec<usize> = host.landed.iter().map(|(i, _)| *i).collect();
        prop_assert_eq!(order, (0..plan.len()).collect::<Vec<_>>());
        // No unsafe call overlapped another; never more than max_parallel at once.
        let spans: HashMap<usize, (u64, u64)> = lab
            .spans
            .lock()
            .unwrap()
            .iter()
            .map(|(k, (s, e))| (*k, (*s, e.unwrap())))
            .collect();
        for (key, (start, end_)) in &spans {
            let overlapping: Vec<usize> = spans
                .iter()
                .filter(|(other, (s, e))| *other != key && s < end_ && start < e)
                .map(|(other, _)| *other)
                .collect();
            if !plan[*key].safe {
                prop_assert!(
                    overlapping.is_empty(),
                    "unsafe {} overlapped {:?}",
                    key,
                    overlapping
                );
            }
            // Running at the moment this call started, itself included.
            let at_start = spans
                .values()
                .filter(|(s, e)| s <= start && start < e)
                .count();
            prop_assert!(
                at_start <= max_parallel,
                "{} started beside {:?}",
                key,
                overlapping
            );
        }
        // A call that ran to its end landed with its own result; a denied one as answered.
        for (index, landed) in &host.landed {
            match landed {
                Landed::Answered => prop_assert!(plan[*index].denied),
                Landed::Ok(_) => prop_assert!(!plan[*index].fails),
                Landed::Err(_) => prop_assert!(plan[*index].fails),
                Landed::Cancelled(Cancellation::SiblingError { failed_id }, _) => {
                    let failed: usize = failed_id[1..].parse().unwrap();
                    prop_assert!(plan[failed].tool == "Bash" && plan[failed].fails);
                }
                Landed::Cancelled(Cancellation::UserInterrupted, _) => {
                    prop_assert_eq!(end, TurnEnd::HardStopped)
                }
                Landed::Cancelled(Cancellation::Interrupt, started) => {
                    prop_assert_eq!(end, TurnEnd::Interrupted);
                    prop_assert!(!started || plan[*index].tool == "Read");
                }
            }
        }
        // Landings never overtake: each call lands after every earlier call ended.
        for window in host.land_times.windows(2) {
            prop_assert!(window[0].1 < window[1].1);
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn every_call_lands_once_in_order_and_unsafe_calls_run_alone(
        plan in prop::collection::vec(planned(), 1..9),
        picks in prop::collection::vec(any::<usize>(), 1..16),
        max_parallel in 1usize..4,
        disturbance in disturbance(),
    ) {
        check_turn(&plan, &picks, max_parallel, disturbance)?;
    }
}
