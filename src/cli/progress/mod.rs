//! `tollgate run`'s progress on stderr, fed by the run's own events (the transcript's
//! observer): on a terminal a live status line (indicatif, like `batch`'s bar) with the same
//! plain lines printed above it; elsewhere only the plain lines, which a CI log keeps. It
//! shows what the events say and never writes to stdout, which is the summary's or the
//! chosen output format's.

mod stderr;
mod tracker;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub use stderr::Stderr;
use tracker::{PREFIX, Tracker};

use crate::transcript::{Observer, RecordedLine};

/// How often the live line is redrawn while nothing happens, so its clock keeps moving.
const TICK: Duration = Duration::from_millis(200);

/// How the progress is shown: chosen once, from `--quiet` and whether stderr is a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Live,
    Plain,
}

impl View {
    /// `None` under `--quiet`. `streaming`: stdout gets lines while the run goes on; on the
    /// same terminal they would be drawn over, so the progress is plain lines then.
    pub fn choose(quiet: bool, streaming: bool) -> Option<View> {
        let shared = streaming && std::io::stdout().is_terminal();
        if quiet {
            None
        } else if std::io::stderr().is_terminal() && !shared {
            Some(View::Live)
        } else {
            Some(View::Plain)
        }
    }
}

pub struct RunProgress {
    tracker: Tracker,
    stderr: Stderr,
    bar: Option<ProgressBar>,
}

impl RunProgress {
    /// Starts showing progress; a live line is drawn at once and logs are written above it.
    pub fn start(view: View, stderr: Stderr) -> RunProgress {
        let tracker = Tracker::default();
        let bar = match view {
            View::Live => {
                let bar = live_line();
                bar.set_message(tracker.status());
                bar.enable_steady_tick(TICK);
                stderr.attach(bar.clone());
                Some(bar)
            }
            View::Plain => None,
        };
        RunProgress {
            tracker,
            stderr,
            bar,
        }
    }

    /// Takes the live line off the terminal, leaving the lines printed above it.
    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            self.stderr.detach();
            bar.finish_and_clear();
        }
    }
}

impl Observer for RunProgress {
    fn observe(&mut self, line: &RecordedLine) {
        let lines = self.tracker.observe(&line.event, Instant::now());
        for text in lines {
            // Model and tool text: inert on a log a CI runner scans for workflow commands.
            let text = crate::neutral::log_line(&format!("{PREFIX}{text}"));
            match &self.bar {
                Some(bar) => bar.println(text),
                None => self.stderr.write_line(&text),
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_message(crate::neutral::log_line(&self.tracker.status()));
        }
        if self.tracker.finished() {
            self.end();
        }
    }
}

impl Drop for RunProgress {
    /// A run that stopped before its end (an error) must not leave the line drawn.
    fn drop(&mut self) {
        self.end();
    }
}

fn live_line() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    // The template is a constant; should indicatif ever refuse it, its default spinner still
    // shows the message.
    if let Ok(style) = ProgressStyle::with_template("tollgate run {spinner} {msg} {elapsed}") {
        bar.set_style(style);
    }
    bar
}
