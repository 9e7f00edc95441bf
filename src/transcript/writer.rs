//! Writes transcript events as JSON lines, each flushed before the next step of the run, so
//! a run killed at any point leaves every event that happened.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::event::Event;

/// One line of the transcript: a sequence number and time around the event.
#[derive(Debug, Serialize)]
pub struct TranscriptLine<'a> {
    pub seq: u64,
    pub time: String,
    #[serde(flatten)]
    pub event: &'a Event,
}

#[derive(Debug)]
pub struct Transcript {
    file: File,
    path: PathBuf,
    seq: u64,
}

impl Transcript {
    pub fn create(path: &Path) -> std::io::Result<Transcript> {
        Ok(Transcript {
            file: File::create(path)?,
            path: path.to_path_buf(),
            seq: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn emit(&mut self, event: &Event) -> std::io::Result<()> {
        self.seq += 1;
        let line = TranscriptLine {
            seq: self.seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            event,
        };
        let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.file.flush()
    }
}
