//! One attempt at the provider, shared by the loop's requests and compaction's summary: the
//! request raced against the abort and the run's deadline, the provider's notices recorded
//! as they arrive.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ending::{Ending, timed_out};
use super::{AgentError, Loop};
use crate::base::AbortSignal;
use crate::model::{ModelRequest, ModelResponse, Provider, ProviderEvent};
use crate::transcript::Event;

/// Resolves when `deadline` passes; never, without one.
async fn deadline_passed(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The provider's answer, or how the run ended while it was awaited.
pub(super) type Attempted =
    Result<Result<ModelResponse, crate::model::ProviderError>, Option<Ending>>;

/// The provider's answer to one request, its retries included; `Err` for the abort (`None`)
/// or the run's deadline.
pub(super) async fn attempt(
    run: &mut Loop<'_>,
    provider: &mut Provider,
    request: &ModelRequest<'_>,
    turn: u32,
    abort: &AbortSignal,
) -> Result<Attempted, AgentError> {
    let (sink, mut notices) = mpsc::unbounded_channel();
    let call = provider.complete(request, &sink);
    tokio::pin!(call);
    let deadline = deadline_passed(run.deadline);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            biased;
            Some(notice) = notices.recv() => record_notice(run, turn, notice)?,
            result = &mut call => break result,
            _ = abort.aborted() => return Ok(Err(None)),
            () = &mut deadline => return Ok(Err(Some(timed_out(run.spec)))),
        }
    };
    while let Ok(notice) = notices.try_recv() {
        record_notice(run, turn, notice)?;
    }
    Ok(Ok(result))
}

/// What the provider said while a request was in flight, as a transcript event; a switch
/// to whole responses is also a warning on stderr, as the run's behaviour changed.
fn record_notice(run: &mut Loop<'_>, turn: u32, notice: ProviderEvent) -> Result<(), AgentError> {
    match notice {
        ProviderEvent::Retry(retry) => run.emit(Event::ApiRetry { turn, retry }),
        ProviderEvent::StreamingOff { reason } => {
            tracing::warn!(
                "{}",
                crate::neutral::log_line(&format!(
                    "the model server cannot stream tool calls ({reason}); this request and the rest of the run's are sent with stream: false (model.stream: false says so from the start)"
                ))
            );
            run.emit(Event::StreamingOff { turn, reason })
        }
    }
}
