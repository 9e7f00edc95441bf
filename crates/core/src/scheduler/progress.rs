//! Throttles live output: a call's first line goes out at once, later lines at most every
//! `PROGRESS_INTERVAL`, a bounded number per update, so a chatty command cannot flood events.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::base::truncate_middle;
use crate::transcript::ProgressUpdate;

/// The least time between two progress updates of one call.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
/// Lines kept per update; the lines past it are only counted.
pub const PROGRESS_MAX_LINES: usize = 20;
/// Characters kept of one line (the middle goes first).
const PROGRESS_LINE_CHARS: usize = 400;

#[derive(Debug, Default)]
struct Pending {
    last_sent: Option<Instant>,
    lines: Vec<String>,
    omitted: u64,
}

impl Pending {
    fn take(&mut self, now: Instant) -> Option<ProgressUpdate> {
        if self.lines.is_empty() && self.omitted == 0 {
            return None;
        }
        self.last_sent = Some(now);
        Some(ProgressUpdate {
            lines: std::mem::take(&mut self.lines),
            omitted_lines: std::mem::take(&mut self.omitted),
        })
    }

    fn due_at(&self) -> Option<Instant> {
        let waiting = !self.lines.is_empty() || self.omitted > 0;
        match self.last_sent {
            Some(last) if waiting => Some(last + PROGRESS_INTERVAL),
            _ => None,
        }
    }
}

/// Per-call buffers, keyed by the call's place in its turn. Time is passed in, so the rules
/// are testable without a clock.
#[derive(Debug, Default)]
pub struct Throttle {
    calls: HashMap<usize, Pending>,
}

impl Throttle {
    /// Takes a line; returns an update when the call's interval has passed.
    pub fn line(&mut self, call: usize, line: &str, now: Instant) -> Option<ProgressUpdate> {
        let pending = self.calls.entry(call).or_default();
        if pending.lines.len() < PROGRESS_MAX_LINES {
            pending
                .lines
                .push(truncate_middle(line, PROGRESS_LINE_CHARS));
        } else {
            pending.omitted += 1;
        }
        match pending.last_sent {
            Some(last) if now < last + PROGRESS_INTERVAL => None,
            _ => pending.take(now),
        }
    }

    /// When the next held update is due, if any is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.calls.values().filter_map(Pending::due_at).min()
    }

    /// The held updates whose interval has passed.
    pub fn due(&mut self, now: Instant) -> Vec<(usize, ProgressUpdate)> {
        let mut ready: Vec<(usize, ProgressUpdate)> = self
            .calls
            .iter_mut()
            .filter(|(_, pending)| pending.due_at().is_some_and(|due| due <= now))
            .filter_map(|(call, pending)| pending.take(now).map(|update| (*call, update)))
            .collect();
        ready.sort_by_key(|(call, _)| *call);
        ready
    }

    /// The call has ended: what it still holds goes out now.
    pub fn finish(&mut self, call: usize, now: Instant) -> Option<ProgressUpdate> {
        self.calls
            .remove(&call)
            .and_then(|mut pending| pending.take(now))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn update(lines: &[&str], omitted_lines: u64) -> Option<ProgressUpdate> {
        Some(ProgressUpdate {
            lines: lines.iter().map(|line| line.to_string()).collect(),
            omitted_lines,
        })
    }

    #[test]
    fn first_line_at_once_then_at_most_one_update_per_interval() {
        let start = Instant::now();
        let mut throttle = Throttle::default();
        assert_eq!(throttle.line(0, "a", start), update(&["a"], 0));
        assert_eq!(throttle.line(0, "b", start), None);
        assert_eq!(
            throttle.line(0, "c", start + Duration::from_millis(10)),
            None
        );
        assert_eq!(throttle.next_due(), Some(start + PROGRESS_INTERVAL));
        assert_eq!(throttle.due(start + Duration::from_millis(100)), vec![]);
        let later = start + PROGRESS_INTERVAL;
        assert_eq!(
            throttle.due(later),
            vec![(0, update(&["b", "c"], 0).unwrap())]
        );
        assert_eq!(throttle.next_due(), None);
        assert_eq!(
            throttle.line(0, "d", later + PROGRESS_INTERVAL),
            update(&["d"], 0)
        );
    }

    #[test]
    fn a_flood_is_cut_to_max_lines_and_counted() {
        let start = Instant::now();
        let mut throttle = Throttle::default();
        throttle.line(1, "first", start);
        for i in 0..1000 {
            assert_eq!(throttle.line(1, &format!("line {i}"), start), None);
        }
        let flushed = throttle.finish(1, start).unwrap();
        assert_eq!(flushed.lines.len(), PROGRESS_MAX_LINES);
        assert_eq!(flushed.omitted_lines, 1000 - PROGRESS_MAX_LINES as u64);
        assert_eq!(throttle.finish(1, start), None);
    }

    #[test]
    fn calls_are_throttled_apart() {
        let start = Instant::now();
        let mut throttle = Throttle::default();
        assert_eq!(throttle.line(0, "a", start), update(&["a"], 0));
        assert_eq!(throttle.line(1, "x", start), update(&["x"], 0));
    }
}
