//! Writes transcript events as JSON lines, each flushed before the next step of the run, so
//! a run killed at any point leaves every event that happened.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::stream::StreamOutput;
use crate::redact::Redactor;
use crate::state::Chain;

/// One line of the transcript: a sequence number and time around the event.
#[derive(Debug, Serialize)]
pub struct TranscriptLine<'a> {
    pub seq: u64,
    pub time: String,
    /// The sub-agent whose conversation the event belongs to; absent for the run's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<&'a str>,
    #[serde(flatten)]
    pub event: &'a Event,
}

/// One line of a transcript as read back (`replay`): the same shape, owned.
#[derive(Debug, Deserialize)]
pub struct RecordedLine {
    pub seq: u64,
    pub time: String,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(flatten)]
    pub event: Event,
}

/// Watches the run's events as they are written (the command line's progress on stderr).
/// Called after each line is on disk, on the loop's own task: it must not block.
pub trait Observer: Send {
    /// `line` is the event as the transcript recorded it, secrets already replaced.
    fn observe(&mut self, line: &RecordedLine);
}

/// Work an observer hands to the runtime (an export, a comment's edit), since it must not
/// block the loop; its owner awaits it all once the run ended.
#[derive(Debug, Default)]
pub struct BackgroundSends(std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>);

impl BackgroundSends {
    /// Starts `work` on the current runtime; without one (no async context) it is skipped,
    /// and the owner's final send carries the state instead.
    pub fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let handle = runtime.spawn(work);
        if let Ok(mut sending) = self.0.lock() {
            sending.retain(|handle| !handle.is_finished());
            sending.push(handle);
        }
    }

    /// Waits for every piece of work started so far.
    pub async fn wait(&self) {
        let pending: Vec<_> = match self.0.lock() {
            Ok(mut sending) => sending.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for handle in pending {
            // A task that panicked has nothing more to send.
            let _ = handle.await;
        }
    }
}

/// Several observers, each shown every line in turn (the progress view and telemetry).
pub struct Observers(pub Vec<Box<dyn Observer>>);

impl Observers {
    /// One observer for those given; `None` when there is none.
    pub fn of(
        list: impl IntoIterator<Item = Option<Box<dyn Observer>>>,
    ) -> Option<Box<dyn Observer>> {
        let mut list: Vec<Box<dyn Observer>> = list.into_iter().flatten().collect();
        match list.len() {
            0 => None,
            1 => list.pop(),
            _ => Some(Box::new(Observers(list))),
        }
    }
}

impl Observer for Observers {
    fn observe(&mut self, line: &RecordedLine) {
        for observer in &mut self.0 {
            observer.observe(line);
        }
    }
}

pub struct Transcript {
    file: File,
    path: PathBuf,
    /// Bytes of whole lines written: a failed write is cut back to here.
    len: u64,
    seq: u64,
    redactor: Arc<Redactor>,
    stream: Option<StreamOutput>,
    observer: Option<Box<dyn Observer>>,
    /// The sub-agent running now: its events carry its id. One at a time (Agent calls run
    /// alone), so a single slot is exact.
    agent_id: Option<String>,
    /// Each line's integrity tag (`crate::state::seal`); `None` when the operator has no
    /// state folder, and then no resume will trust this transcript.
    chain: Option<Chain>,
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("path", &self.path)
            .field("seq", &self.seq)
            .field("agent_id", &self.agent_id)
            .finish_non_exhaustive()
    }
}

impl Transcript {
    /// Creates (or empties) the transcript at `path`, beneath its folder and through no link.
    pub fn create(path: &Path) -> std::io::Result<Transcript> {
        let file = open(path, false)?;
        Ok(Transcript {
            file,
            path: path.to_path_buf(),
            len: 0,
            seq: 0,
            redactor: Arc::default(),
            stream: None,
            observer: None,
            agent_id: None,
            chain: None,
        })
    }

    /// Opens an existing transcript to go on writing it (a resumed run): what follows its
    /// first `verified_len` bytes (a last line cut short) is dropped, and lines are appended,
    /// numbered on from `last_seq`.
    pub fn append(path: &Path, last_seq: u64, verified_len: u64) -> std::io::Result<Transcript> {
        let file = open(path, true)?;
        if file.metadata()?.len() > verified_len {
            file.set_len(verified_len)?;
        }
        Ok(Transcript {
            file,
            path: path.to_path_buf(),
            len: verified_len,
            seq: last_seq,
            redactor: Arc::default(),
            stream: None,
            observer: None,
            agent_id: None,
            chain: None,
        })
    }

    /// Tags every line from now on with `chain` (`None`: untagged).
    pub fn sealed(mut self, chain: Option<Chain>) -> Transcript {
        self.chain = chain;
        self
    }

    /// Redacts every line before it is written (on the serialised JSON, so no field escapes).
    pub fn redacting(mut self, redactor: Arc<Redactor>) -> Transcript {
        self.redactor = redactor;
        self
    }

    /// Also streams the events to `stream` (stdout), redacted the same way.
    pub fn streaming(mut self, stream: Option<StreamOutput>) -> Transcript {
        self.stream = stream;
        self
    }

    /// Also shows every event to `observer` once it is written.
    pub fn observed_by(mut self, observer: Option<Box<dyn Observer>>) -> Transcript {
        self.observer = observer;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// From now on events belong to sub-agent `agent_id` (`None`: the run's own conversation).
    pub fn set_agent(&mut self, agent_id: Option<String>) {
        self.agent_id = agent_id;
    }

    pub fn emit(&mut self, event: &Event) -> std::io::Result<()> {
        self.seq += 1;
        let line = TranscriptLine {
            agent_id: self.agent_id.as_deref(),
            seq: self.seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            event,
        };
        let json = serde_json::to_string(&line).map_err(std::io::Error::other)?;
        let redacted = self.redactor.redact(&json);
        // The tag covers the line as written: a chain advanced for a line that then fails
        // to be written is put back, so the next line still follows the last one on disk.
        let before = self.chain.clone();
        let mut bytes = match &mut self.chain {
            Some(chain) => chain.seal(&redacted),
            None => redacted,
        }
        .into_bytes();
        bytes.push(b'\n');
        if let Err(err) = self.file.write_all(&bytes).and_then(|()| self.file.flush()) {
            // A full disk may take half a line: cut it, so the file stays valid JSON lines
            // up to the failure.
            let _ = self.file.set_len(self.len);
            let _ = self.file.seek(std::io::SeekFrom::Start(self.len));
            self.chain = before;
            return Err(err);
        }
        self.len += bytes.len() as u64;
        if let Some(stream) = &mut self.stream
            && let Some(streamed) = serde_json::to_value(&line)
                .ok()
                .and_then(|value| stream.line(event, value))
            && let Err(err) = stream.write_line(&self.redactor.redact(&streamed))
        {
            // A reader that went away must not stop the run: the transcript and the reports
            // are still written, and they are the record.
            tracing::warn!("stopped streaming events to stdout: {err}");
            self.stream = None;
        }
        // Read back from the redacted line, so whatever the observer shows (even a piece of
        // an input it shortens) is redacted exactly as the transcript is.
        if let Some(observer) = &mut self.observer {
            match serde_json::from_slice::<RecordedLine>(&bytes) {
                Ok(recorded) => observer.observe(&recorded),
                Err(err) => tracing::debug!("cannot read back transcript line {}: {err}", self.seq),
            }
        }
        Ok(())
    }
}

/// The transcript file at `path`, opened beneath its folder through no link: a
/// `transcript.jsonl` planted as a link (in an output folder a repository holds) refuses the
/// run's start instead of sending its record elsewhere.
fn open(path: &Path, append: bool) -> std::io::Result<File> {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a transcript's path")
        })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    crate::out_dir::open_record(dir, name, append)
}
