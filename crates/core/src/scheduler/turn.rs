//! The executor of one model turn's calls (S6): admits calls in order, runs concurrency-safe ones together
//! (bounded) and any other alone, lands results in call order, and cancels what must stop.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::{AbortHandle, Id, JoinSet};
use tokio::time::Instant;

use super::cancel::Cancellation;
use super::host::{Admission, Call, CallDeadline, Landing, TurnHost};
use super::progress::Throttle;
use super::queue::MessageQueue;
use crate::call::{Concurrency, PreparedCall, Scheduling};
use crate::policy::AllowBasis;
use crate::tools::{
    InterruptBehavior, ProgressLine, ProgressSink, ToolContext, ToolError, ToolOutput,
};

/// Lines buffered between the tools and the throttle; past it, lines are dropped (progress
/// is best-effort, the final output is captured by the tool itself).
const PROGRESS_CHANNEL: usize = 1024;

/// How a turn's calls ended. Every call has landed in each case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    Complete,
    /// A queued user message arrived while only `cancel` tools were running: they were
    /// cancelled with reason `interrupt`, and the query ends (`aborted_tools`).
    Interrupted,
    /// SIGINT/SIGTERM: everything running was cancelled, queued calls were not run.
    HardStopped,
}

enum Slot {
    /// Not yet admitted.
    Waiting,
    /// Admitted, waiting for its turn to start.
    Ready(Admitted),
    Running {
        call: Admitted,
        task: AbortHandle,
    },
    Landed(Landing),
    /// Handed to the host.
    Done,
}

struct Admitted {
    call: Arc<PreparedCall>,
    deadline: Option<CallDeadline>,
    scheduling: Scheduling,
    basis: AllowBasis,
}

impl Admitted {
    fn safe(&self) -> bool {
        self.scheduling.concurrency == Concurrency::Shared
    }
}

struct Turn<'c> {
    calls: &'c [Call],
    ctx: &'c ToolContext,
    max_parallel: usize,
    slots: Vec<Slot>,
    next_admit: usize,
    next_land: usize,
    tasks: JoinSet<Result<ToolOutput, ToolError>>,
    task_calls: HashMap<Id, usize>,
    progress: mpsc::Sender<ProgressLine>,
    end: TurnEnd,
    /// The calls started since none ran, in call order: they act together, and none of them
    /// lands before all have stopped (`TurnHost::calls_stopped`).
    together: Vec<usize>,
}

/// Runs one model response's calls. The host admits each (gate, hooks) right before it could
/// start and records each landing in call order; progress goes to the host at once.
/// `max_parallel` bounds the concurrency-safe calls running together (at least 1).
pub async fn run_turn<H: TurnHost>(
    host: &mut H,
    calls: &[Call],
    ctx: &ToolContext,
    max_parallel: usize,
    queue: Option<&MessageQueue>,
) -> Result<TurnEnd, H::Error> {
    let (progress, mut lines) = mpsc::channel(PROGRESS_CHANNEL);
    let mut turn = Turn {
        calls,
        ctx,
        max_parallel: max_parallel.max(1),
        slots: calls.iter().map(|_| Slot::Waiting).collect(),
        next_admit: 0,
        next_land: 0,
        tasks: JoinSet::new(),
        task_calls: HashMap::new(),
        progress,
        end: TurnEnd::Complete,
        together: Vec::new(),
    };
    let mut throttle = Throttle::default();
    let mut arrivals = queue.map(MessageQueue::arrivals);
    let result = loop {
        if let Err(err) = turn.stopped_together(host).await {
            break Err(err);
        }
        if let Err(err) = turn.land_ready(host).await {
            break Err(err);
        }
        if turn.next_land == calls.len() {
            break Ok(turn.end);
        }
        if turn.end == TurnEnd::Complete && ctx.abort.is_aborted() {
            turn.cancel_rest(&Cancellation::UserInterrupted);
            turn.end = TurnEnd::HardStopped;
            continue;
        }
        match turn.start_more(host).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(err) => break Err(err),
        }
        let due = throttle.next_due();
        let listening = turn.end == TurnEnd::Complete;
        tokio::select! {
            biased;
            _ = ctx.abort.aborted(), if listening => {}
            Some(joined) = turn.tasks.join_next_with_id() => {
                // Lines the call sent before it ended come first.
                let mut updates = Vec::new();
                while let Ok(line) = lines.try_recv() {
                    updates.extend(
                        throttle
                            .line(line.call, &line.line, Instant::now())
                            .map(|update| (line.call, update)),
                    );
                }
                updates.extend(turn.finished(joined, &mut throttle));
                let failed = updates
                    .into_iter()
                    .find_map(|(index, update)| host.progress(&calls[index], update).err());
                if let Some(err) = failed {
                    break Err(err);
                }
            }
            Some(line) = lines.recv() => {
                if let Some(update) = throttle.line(line.call, &line.line, Instant::now())
                    && let Err(err) = host.progress(&calls[line.call], update)
                {
                    break Err(err);
                }
            }
            () = sleep_until(due), if due.is_some() => {
                let failed = throttle
                    .due(Instant::now())
                    .into_iter()
                    .find_map(|(index, update)| host.progress(&calls[index], update).err());
                if let Some(err) = failed {
                    break Err(err);
                }
            }
            () = next_arrival(&mut arrivals), if listening => turn.message_arrived(),
        }
    };
    // Cancelled calls are aborted tasks: wait until they are dropped, so a Bash call's process
    // group is gone before the loop goes on (or the process exits).
    turn.tasks.shutdown().await;
    result
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

async fn next_arrival(arrivals: &mut Option<super::queue::QueuedArrivals>) {
    match arrivals {
        Some(arrivals) => arrivals.next().await,
        None => std::future::pending().await,
    }
}

impl Turn<'_> {
    /// Once every call started together has stopped and its task is gone (a cancelled
    /// one's processes with it), tells the host which ran.
    async fn stopped_together<H: TurnHost>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.together.is_empty() || !self.tasks.is_empty() {
            return Ok(());
        }
        let calls = self.calls;
        let ran: Vec<(usize, &Call)> = std::mem::take(&mut self.together)
            .into_iter()
            .map(|index| (index, &calls[index]))
            .collect();
        host.calls_stopped(&ran).await
    }

    /// Hands the host every landed call at the head of the line; a call of the batch still
    /// running waits for the batch.
    async fn land_ready<H: TurnHost>(&mut self, host: &mut H) -> Result<(), H::Error> {
        while let Some(slot) = self.slots.get_mut(self.next_land) {
            if !matches!(slot, Slot::Landed(_)) || self.together.contains(&self.next_land) {
                break;
            }
            if let Slot::Landed(landing) = std::mem::replace(slot, Slot::Done) {
                host.land(self.next_land, &self.calls[self.next_land], landing)
                    .await?;
            }
            self.next_land += 1;
        }
        Ok(())
    }

    fn running(&self) -> impl Iterator<Item = &Admitted> {
        self.slots.iter().filter_map(|slot| match slot {
            Slot::Running { call, .. } => Some(call),
            _ => None,
        })
    }

    /// A safe call may join running safe calls under the bound; any other call runs alone.
    fn can_start(&self, safe: bool) -> bool {
        let running = self.running().count();
        running == 0 || (safe && running < self.max_parallel && self.running().all(Admitted::safe))
    }

    /// Starts the held call and admits further ones while they could start. `true` when a
    /// call was answered without running (it may be ready to land).
    async fn start_more<H: TurnHost>(&mut self, host: &mut H) -> Result<bool, H::Error> {
        loop {
            if self.ctx.abort.is_aborted() {
                return Ok(false);
            }
            if let Some(index) = self.next_admit.checked_sub(1)
                && let Some(Slot::Ready(call)) = self.slots.get(index)
            {
                if !self.can_start(call.safe()) {
                    return Ok(false);
                }
                if self.together.is_empty() {
                    host.calls_starting().await?;
                }
                host.call_started(index, &self.calls[index])?;
                self.spawn(index);
            }
            let index = self.next_admit;
            let Some(call) = self.calls.get(index) else {
                return Ok(false);
            };
            // Judged on the input as sent, before the gate: an unsafe call waits for the
            // running ones before it is even decided, so its decision sees their effects.
            let safe = host
                .scheduling(index, call)
                .is_none_or(|scheduling| scheduling.concurrency == Concurrency::Shared);
            if !self.can_start(safe) {
                return Ok(false);
            }
            let admission = host.admit(index, call).await?;
            self.next_admit += 1;
            match admission {
                Admission::Answered { content, status } => {
                    self.slots[index] = Slot::Landed(Landing::Answered { content, status });
                    return Ok(true);
                }
                Admission::Finished { call, result } => {
                    self.slots[index] = Slot::Landed(Landing::Ran { call, result });
                    return Ok(true);
                }
                Admission::Run {
                    call,
                    deadline,
                    basis,
                    scheduling,
                } => {
                    self.slots[index] = Slot::Ready(Admitted {
                        call,
                        deadline,
                        scheduling,
                        basis,
                    });
                }
            }
        }
    }

    fn spawn(&mut self, index: usize) {
        let Slot::Ready(call) = std::mem::replace(&mut self.slots[index], Slot::Done) else {
            return;
        };
        let mut ctx = self.ctx.clone();
        ctx.progress = Some(ProgressSink::new(index, self.progress.clone()));
        ctx.allow_basis = call.basis;
        let prepared = call.call.clone();
        let deadline = call.deadline.clone();
        self.together.push(index);
        let task = self.tasks.spawn(async move {
            let running = prepared.run(&ctx);
            match deadline {
                None => running.await,
                Some(deadline) => match tokio::time::timeout_at(deadline.at, running).await {
                    Ok(result) => result,
                    Err(_) => Err(prepared.stopped(deadline.message)),
                },
            }
        });
        self.task_calls.insert(task.id(), index);
        self.slots[index] = Slot::Running { call, task };
    }

    /// A task ended: its call lands, and a command that did not succeed cancels the call's
    /// siblings. Returns the call's held progress, which goes out before its result.
    fn finished(
        &mut self,
        joined: Result<(Id, Result<ToolOutput, ToolError>), tokio::task::JoinError>,
        throttle: &mut Throttle,
    ) -> Option<(usize, crate::transcript::ProgressUpdate)> {
        let (id, result) = match joined {
            Ok((id, result)) => (id, Some(result)),
            // Cancelled tasks were landed when they were cancelled.
            Err(err) if err.is_cancelled() => return None,
            Err(err) => (err.id(), None),
        };
        let index = self.task_calls.remove(&id)?;
        // A call cancelled while it ran has landed as cancelled (held with its batch): its
        // task ending after all leaves that landing as it is.
        if !matches!(self.slots[index], Slot::Running { .. }) {
            return None;
        }
        let Slot::Running { call, .. } = std::mem::replace(&mut self.slots[index], Slot::Done)
        else {
            return None;
        };
        let result =
            result.unwrap_or_else(|| Err(call.call.stopped("the tool failed unexpectedly".into())));
        // Read off the outcome, whichever tool ran the command: commands often depend on each
        // other, so the rest of the turn is moot.
        let failed_command = result
            .as_ref()
            .err()
            .and_then(ToolError::command)
            .is_some_and(|outcome| !outcome.succeeded());
        self.slots[index] = Slot::Landed(Landing::Ran {
            call: call.call,
            result,
        });
        if failed_command {
            let failed_id = self.calls[index].id.clone();
            self.cancel_rest(&Cancellation::SiblingError { failed_id });
        }
        throttle
            .finish(index, Instant::now())
            .map(|update| (index, update))
    }

    /// A queued message aborts the round only when every running tool may be cancelled;
    /// otherwise it waits to be drained into the next API round.
    fn message_arrived(&mut self) {
        let interruptible = {
            let mut running = self.running().peekable();
            running.peek().is_some()
                && running.all(|call| call.scheduling.interrupt == InterruptBehavior::Cancel)
        };
        if interruptible {
            self.cancel_rest(&Cancellation::Interrupt);
            self.end = TurnEnd::Interrupted;
        }
    }

    /// Every call that has not landed gets `why`: running ones are aborted, the rest never run.
    fn cancel_rest(&mut self, why: &Cancellation) {
        for slot in self.slots.iter_mut().skip(self.next_land) {
            let (admitted, started) = match slot {
                Slot::Landed(_) | Slot::Done => continue,
                Slot::Waiting => (false, false),
                Slot::Ready(_) => (true, false),
                Slot::Running { task, .. } => {
                    task.abort();
                    (true, true)
                }
            };
            *slot = Slot::Landed(Landing::Cancelled {
                why: why.clone(),
                admitted,
                started,
            });
        }
        self.next_admit = self.calls.len();
    }
}
