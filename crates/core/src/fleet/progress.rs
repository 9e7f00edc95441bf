//! The batch's progress on stderr: repositories done, running and failed, and the money spent
//! so far. A live bar (indicatif) when stderr is a terminal; otherwise plain lines, one per
//! finished repository, which a CI log keeps (a bar's redraws would fill it with noise).
//! It only reports: the cost limit is the driver's decision, read from `spent`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use super::journal::{Journal, RepoOutcome};

/// The counts every progress line shows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    pub total: usize,
    pub done: usize,
    pub running: usize,
    pub failed: usize,
    /// US dollars: what this batch folder's journals record as spent, earlier runs included.
    pub spent: f64,
}

impl Tally {
    /// `[7/12 done, 3 running, 1 failed, $0.4210]`
    fn counts(&self) -> String {
        format!(
            "[{}/{} done, {} running, {} failed, ${:.4}]",
            self.done, self.total, self.running, self.failed, self.spent
        )
    }
}

pub struct Progress {
    tally: Tally,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn start(total: usize, spent: f64) -> Progress {
        let tally = Tally {
            total,
            spent,
            ..Tally::default()
        };
        let bar = std::io::stderr().is_terminal().then(|| live_bar(&tally));
        Progress { tally, bar }
    }

    pub fn spent(&self) -> f64 {
        self.tally.spent
    }

    pub fn started(&mut self) {
        self.tally.running += 1;
        self.redraw();
    }

    /// Counts a repository that has ended (or was skipped); `cost` is what this batch spent
    /// on it, 0 for a journal kept from an earlier one.
    pub fn finished(&mut self, journal: &Journal, ran: bool, cost: f64) {
        if ran {
            self.tally.running = self.tally.running.saturating_sub(1);
        }
        self.tally.done += 1;
        if journal.outcome == Some(RepoOutcome::Failed) {
            self.tally.failed += 1;
        }
        self.tally.spent += cost;
        let line = line(&self.tally, journal);
        match &self.bar {
            Some(bar) => {
                bar.println(&line);
                bar.inc(1);
                self.redraw();
            }
            None => eprintln!("{line}"),
        }
    }

    /// Takes the bar off the terminal, leaving the lines printed above it.
    pub fn end(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(message(&self.tally));
        }
    }
}

fn live_bar(tally: &Tally) -> ProgressBar {
    let bar = ProgressBar::new(tally.total as u64);
    // The template is a constant; should indicatif ever refuse it, its default bar still
    // shows the position.
    if let Ok(style) =
        ProgressStyle::with_template("tollgate batch [{bar:30}] {pos}/{len} done, {msg} {elapsed}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message(tally));
    bar
}

/// The counts the bar's own position does not show.
fn message(tally: &Tally) -> String {
    format!(
        "{} running, {} failed, ${:.4}",
        tally.running, tally.failed, tally.spent
    )
}

/// `tollgate batch: [7/12 done, 3 running, 1 failed, $0.4210] api: changed — reason`
pub fn line(tally: &Tally, journal: &Journal) -> String {
    let outcome = journal
        .outcome
        .map(|outcome| crate::config::serde_name(&outcome))
        .unwrap_or_default();
    let reason = journal
        .reason
        .as_deref()
        .map(|reason| format!(" — {}", crate::neutral::log_line(reason)))
        .unwrap_or_default();
    format!(
        "tollgate batch: {} {}: {outcome}{reason}",
        tally.counts(),
        journal.repo
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_says_the_counts_the_spend_and_the_repo() {
        let tally = Tally {
            total: 12,
            done: 7,
            running: 3,
            failed: 1,
            spent: 0.421,
        };
        let mut journal = Journal::new("api");
        journal.outcome = Some(RepoOutcome::Failed);
        journal.reason = Some("the run failed:\ncheck `x` failed".into());
        assert_eq!(
            line(&tally, &journal),
            "tollgate batch: [7/12 done, 3 running, 1 failed, $0.4210] api: failed — the run failed:⏎check `x` failed"
        );
    }

    #[test]
    fn a_finished_repo_moves_from_running_to_done_and_adds_its_cost() {
        let mut progress = Progress {
            tally: Tally {
                total: 2,
                spent: 0.5,
                ..Tally::default()
            },
            bar: None,
        };
        progress.started();
        let mut journal = Journal::new("api");
        journal.outcome = Some(RepoOutcome::Failed);
        progress.finished(&journal, true, 0.25);
        // A kept journal was never running and costs this batch nothing.
        journal.outcome = Some(RepoOutcome::Changed);
        progress.finished(&journal, false, 0.0);
        assert_eq!(
            progress.tally,
            Tally {
                total: 2,
                done: 2,
                running: 0,
                failed: 1,
                spent: 0.75,
            }
        );
    }
}
