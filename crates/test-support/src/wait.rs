//! Waiting on something in the background (a run, a server) to get somewhere: polling for
//! the event itself, so no sleep stands in for it and no test asserts a time.

use std::path::Path;
use std::time::{Duration, Instant};

/// Calls `find` every 20 ms until it finds something, for at most `within`: how a test waits
/// for a run in the background to get somewhere, without a sleep standing in for the event.
pub fn poll_until<T>(within: Duration, mut find: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = find() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (at most 20 s) until the file at `path` holds `needle`: a run in the background has
/// written that far into its transcript.
#[track_caller]
pub fn wait_for_text(path: &Path, needle: &str) {
    let holds = || {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .contains(needle)
            .then_some(())
    };
    if poll_until(Duration::from_secs(20), holds).is_none() {
        panic!("{} never held {needle}", path.display());
    }
}
