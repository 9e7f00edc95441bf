//! The contract between the scheduler and whoever decides and records (the agent loop):
//! the host admits each call (gate, hooks) and records each landing; the scheduler only runs.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::cancel::Cancellation;
use super::progress::ProgressUpdate;
use crate::tools::{InterruptBehavior, Tool, ToolError, ToolOutput};
use crate::transcript::ResultStatus;

/// One tool_use block of a model response.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
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
    /// Run this tool with this input (a hook may have rewritten it).
    Run {
        tool: Arc<dyn Tool>,
        input: Value,
        deadline: Option<CallDeadline>,
    },
    /// Already answered without running (refused, invalid, not run): an error result.
    Answered {
        content: String,
        status: ResultStatus,
    },
}

/// How a call ended, handed to the host in call order.
pub enum Landing {
    Answered {
        content: String,
        status: ResultStatus,
    },
    Ran {
        tool: Arc<dyn Tool>,
        input: Value,
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
pub trait BatchHost {
    type Error;

    /// How a call would be scheduled, judged on its input as the model sent it: whether it
    /// may run beside others, and what an interrupt does to it. `None` for a call that
    /// cannot run at all (no such tool); it is admitted without waiting.
    fn scheduling(&self, call: &Call) -> Option<(bool, InterruptBehavior)>;

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
}
