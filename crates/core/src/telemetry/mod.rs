//! OpenTelemetry for platform teams: a run's trace, metrics and logs exported over OTLP/HTTP
//! (protobuf) as the run goes, off unless `TOLLGATE_ENABLE_TELEMETRY=1`, configured by the
//! standard `OTEL_*` variables (`config.rs`). Everything is made from the transcript's events
//! as they are written (`record.rs`), after redaction, so no attribute can carry what the
//! transcript may not; the export (`otlp.rs`) never fails a run: a collector that is down
//! costs a warning.

mod config;
mod otlp;
mod record;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use config::{ENABLE_VAR, TelemetryConfig, TelemetryError};

use crate::transcript::{Observer, RecordedLine};
use record::{Recorder, TraceId};

/// How often a long run's telemetry is sent while it runs; the rest goes when it ends.
const EXPORT_EVERY: Duration = Duration::from_secs(10);

/// A run's telemetry: give [`observer`](Self::observer) to the transcript, then await
/// [`finish`](Self::finish) once the run ended.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    config: TelemetryConfig,
    client: reqwest::Client,
    recorder: Mutex<Recorder>,
    last_export: Mutex<Instant>,
    sending: crate::transcript::BackgroundSends,
    /// One warning per run for a collector that cannot be reached.
    warned: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The telemetry the environment asks for, if any.
    pub fn from_env() -> Result<Option<Telemetry>, TelemetryError> {
        let Some(config) = TelemetryConfig::from_env(|name| std::env::var(name).ok())? else {
            return Ok(None);
        };
        Ok(Some(Telemetry::new(config)))
    }

    pub fn new(config: TelemetryConfig) -> Telemetry {
        crate::model::install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let trace_id: TraceId = random();
        Telemetry {
            inner: Arc::new(Inner {
                config,
                client,
                recorder: Mutex::new(Recorder::new(trace_id, Box::new(random::<8>))),
                last_export: Mutex::new(Instant::now()),
                sending: crate::transcript::BackgroundSends::default(),
                warned: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Watches the transcript's lines; export happens on the runtime, never on the loop.
    pub fn observer(&self) -> Box<dyn Observer> {
        Box::new(TelemetryObserver {
            inner: Arc::clone(&self.inner),
        })
    }

    /// Sends what is left and waits (within the exporters' timeouts) for every export.
    pub async fn finish(&self) {
        self.inner.sending.wait().await;
        Inner::export(Arc::clone(&self.inner)).await;
    }
}

/// 16 or 8 random bytes for an id; the all-zero id OTLP forbids is never returned.
fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut id = [0u8; N];
    let source = ring::rand::SystemRandom::new();
    if source.fill(&mut id).is_err() || id.iter().all(|b| *b == 0) {
        // No system randomness: the time still makes ids that differ between runs.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos());
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = (nanos >> ((i % 16) * 8)) as u8 | 1;
        }
    }
    id
}

impl Inner {
    /// Sends the spans and logs not sent yet and the metrics as they stand.
    async fn export(inner: Arc<Inner>) {
        let (trace_id, spans, logs, metrics) = match inner.recorder.lock() {
            Ok(mut recorder) => (
                recorder.trace_id,
                std::mem::take(&mut recorder.finished),
                std::mem::take(&mut recorder.logs),
                recorder.metrics.clone(),
            ),
            Err(_) => return,
        };
        let resource = &inner.config.resource;
        let now = now_ns();
        let mut sends = Vec::new();
        if let Some(to) = &inner.config.traces
            && !spans.is_empty()
        {
            sends.push((to, otlp::traces(trace_id, &spans, resource)));
        }
        if let Some(to) = &inner.config.logs
            && !logs.is_empty()
        {
            sends.push((to, otlp::logs(trace_id, &logs, resource)));
        }
        if let Some(to) = &inner.config.metrics
            && metrics.start_ns > 0
        {
            sends.push((to, otlp::metrics(&metrics, now, resource)));
        }
        for (to, body) in sends {
            if let Err(err) = otlp::send(&inner.client, to, body).await
                && !inner
                    .warned
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!("telemetry export failed (the run goes on): {err}");
            }
        }
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

struct TelemetryObserver {
    inner: Arc<Inner>,
}

impl Observer for TelemetryObserver {
    fn observe(&mut self, line: &RecordedLine) {
        let ended = match self.inner.recorder.lock() {
            Ok(mut recorder) => {
                recorder.observe(line);
                recorder.ended
            }
            Err(_) => return,
        };
        let due = match self.inner.last_export.lock() {
            Ok(mut last) if ended || last.elapsed() >= EXPORT_EVERY => {
                *last = Instant::now();
                true
            }
            _ => false,
        };
        if due {
            self.inner
                .sending
                .spawn(Inner::export(Arc::clone(&self.inner)));
        }
    }
}
