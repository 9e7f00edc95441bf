//! The contract between the scheduler and whoever decides and records (the agent loop):
//! the host admits each call (gate, hooks) and records each landing; the scheduler only runs.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::cancel::Cancellation;
use crate::call::{PreparedCall, Scheduling};
use crate::policy::{AllowBasis, ToolName};
use crate::tools::{ToolError, ToolOutput};
use crate::transcript::{ProgressUpdate, ResultStatus};

/// One tool_use block of a model response.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    /// The name as the model sent it (`ToolName::Other` when tollgate has no such tool).
    pub name: ToolName,
    pub input: Value,
}

/// A wall-clock bound on one call, with what the model is told when it runs out.
#[derive(Debug, Clone)]
pub struct CallDeadline {
    pub at: Instant,
    pub message: String,
}

/// The host's answer for a call, given right before the call could start.
pub enum Admission {
    /// Run this prepared call (a hook may have rewritten its input).
    Run {
        call: Arc<PreparedCall>,
        deadline: Option<CallDeadline>,
        /// What allowed it; a call allowed by a read-only proof runs in the read-only domain.
        basis: AllowBasis,
        /// How it runs beside the others, judged on the input that runs.
        scheduling: Scheduling,
    },
    /// Already answered without running (refused, invalid, not run): an error result.
    Answered {
        content: String,
        status: ResultStatus,
    },
    /// The host ran the allowed call itself (a sub-agent, which is a conversation of the
    /// loop's, not a tool's): it lands as a call that ran.
    Finished {
        call: Arc<PreparedCall>,
        result: Result<ToolOutput, ToolError>,
    },
}

/// How a call ended, handed to the host in call order.
pub enum Landing {
    Answered {
        content: String,
        status: ResultStatus,
    },
    Ran {
        call: Arc<PreparedCall>,
        result: Result<ToolOutput, ToolError>,
    },
    /// `admitted` tells whether the host saw the call before (it decided on it).
    Cancelled {
        why: Cancellation,
        admitted: bool,
        started: bool,
    },
}

/// What the scheduler needs from the loop. Calls are admitted one at a time, in call order;
/// landings come in call order; progress comes at once, in any order.
pub trait TurnHost {
    type Error;

    /// How the call at `index` would be scheduled, judged on its input as the model sent it.
    /// `None` for a call that cannot run at all (no such tool, an invalid input); it is
    /// admitted without waiting.
    fn scheduling(&self, index: usize, call: &Call) -> Option<Scheduling>;

    /// The gate and the PreToolUse hooks, in call order, right before the call could start,
    /// so each decision sees what the calls before it did.
    fn admit(
        &mut self,
        index: usize,
        call: &Call,
    ) -> impl Future<Output = Result<Admission, Self::Error>>;

    fn land(
        &mut self,
        index: usize,
        call: &Call,
        landing: Landing,
    ) -> impl Future<Output = Result<(), Self::Error>>;

    fn progress(&mut self, call: &Call, update: ProgressUpdate) -> Result<(), Self::Error>;

    /// The admitted call at `index` starts now (after `calls_starting` for its batch): the
    /// host records it before anything of it runs.
    fn call_started(&mut self, index: usize, call: &Call) -> Result<(), Self::Error> {
        let _ = (index, call);
        Ok(())
    }

    /// No call runs, and one is about to start: the moment before anything of this batch
    /// acts (the effect ledger looks at the workspace here).
    fn calls_starting(&mut self) -> impl Future<Output = Result<(), Self::Error>> {
        async { Ok(()) }
    }

    /// Every call started since `calls_starting` has ended, or was cancelled and dropped
    /// (its processes gone): `ran`, in call order. None of them has landed yet.
    fn calls_stopped(
        &mut self,
        ran: &[(usize, &Call)],
    ) -> impl Future<Output = Result<(), Self::Error>> {
        let _ = ran;
        async { Ok(()) }
    }
}
