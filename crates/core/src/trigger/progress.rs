//! One comment on the issue or pull request that started a run, created when the run starts,
//! edited as it goes (turns, calls, refusals, cost; at most every few seconds) and replaced by
//! the result when it ends: what reviewers see without opening the job's log. Made from the
//! transcript's events after redaction; the model's words are quoted, and mentions in them
//! are defused so a run cannot ping anyone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fleet::Forge;
use crate::transcript::{Event, Observer, RecordedLine};

/// The least time between two edits while the run goes on.
const EDIT_EVERY: Duration = Duration::from_secs(5);

/// The marker that names the comment as tollgate's.
const MARKER: &str = "<!-- tollgate-progress -->";

/// What the comment shows.
#[derive(Debug, Clone, Default)]
struct Progress {
    run_id: String,
    turns: u32,
    calls: u32,
    refused: Vec<String>,
    cost_usd: f64,
    /// The ending: outcome, exit code, final message, checks (name, passed).
    ended: Option<Ending>,
}

#[derive(Debug, Clone)]
struct Ending {
    outcome: String,
    exit_code: u8,
    final_message: Option<String>,
    checks: Vec<(String, bool)>,
}

/// Where the comment goes, and the job's page to link.
#[derive(Debug, Clone)]
pub struct CommentTarget {
    pub repo: String,
    pub number: u64,
    /// The workflow run's page (`GITHUB_SERVER_URL/REPO/actions/runs/RUN_ID`), when known.
    pub run_url: Option<String>,
}

/// The run's progress comment; give [`observer`](Self::observer) to the transcript and await
/// [`finish`](Self::finish) after the run.
#[derive(Clone)]
pub struct ProgressComment {
    inner: Arc<Inner>,
}

struct Inner {
    forge: Forge,
    target: CommentTarget,
    progress: Mutex<Progress>,
    last_edit: Mutex<Option<Instant>>,
    /// The comment's id once created; the lock also keeps edits in order.
    comment: tokio::sync::Mutex<Option<u64>>,
    sending: crate::transcript::BackgroundSends,
}

impl ProgressComment {
    pub fn new(forge: Forge, target: CommentTarget) -> ProgressComment {
        ProgressComment {
            inner: Arc::new(Inner {
                forge,
                target,
                progress: Mutex::new(Progress::default()),
                last_edit: Mutex::new(None),
                comment: tokio::sync::Mutex::new(None),
                sending: crate::transcript::BackgroundSends::default(),
            }),
        }
    }

    pub fn observer(&self) -> Box<dyn Observer> {
        Box::new(CommentObserver {
            inner: Arc::clone(&self.inner),
        })
    }

    /// Waits for the edits under way and sends the last state.
    pub async fn finish(&self) {
        self.inner.sending.wait().await;
        Inner::send(Arc::clone(&self.inner)).await;
    }
}

impl Inner {
    /// Creates the comment, or edits it to the progress as it stands now.
    async fn send(inner: Arc<Inner>) {
        let mut comment = inner.comment.lock().await;
        let body = match inner.progress.lock() {
            Ok(progress) => render(&progress, inner.target.run_url.as_deref()),
            Err(_) => return,
        };
        let repo = &inner.target.repo;
        let answer = match *comment {
            None => {
                let path = format!("/repos/{repo}/issues/{}/comments", inner.target.number);
                inner.forge.post(&path, json!({"body": body})).await
            }
            Some(id) => {
                let path = format!("/repos/{repo}/issues/comments/{id}");
                inner.forge.patch(&path, json!({"body": body})).await
            }
        };
        match answer {
            Ok(created) => {
                if comment.is_none() {
                    *comment = created["id"].as_u64();
                }
            }
            Err(err) => {
                tracing::warn!("cannot write the progress comment (the run goes on): {err}")
            }
        }
    }
}

struct CommentObserver {
    inner: Arc<Inner>,
}

impl Observer for CommentObserver {
    fn observe(&mut self, line: &RecordedLine) {
        let mut start = false;
        let mut end = false;
        if let Ok(mut progress) = self.inner.progress.lock() {
            match &line.event {
                Event::RunStarted { run_id, .. } => {
                    progress.run_id = run_id.clone();
                    start = true;
                }
                Event::AssistantMessage { cost_usd, .. } if line.agent_id.is_none() => {
                    progress.turns += 1;
                    progress.cost_usd += cost_usd.unwrap_or(0.0);
                }
                Event::AssistantMessage { cost_usd, .. } => {
                    progress.cost_usd += cost_usd.unwrap_or(0.0);
                }
                Event::ToolCall { .. } => progress.calls += 1,
                Event::PermissionDecision { tool, decision, .. } if !decision.is_allow() => {
                    progress
                        .refused
                        .push(format!("{tool}: {}", decision.reason));
                }
                Event::RunFinished {
                    outcome,
                    exit_code,
                    final_message,
                    total_cost_usd,
                    ..
                } => {
                    if let Some(total) = total_cost_usd {
                        progress.cost_usd = *total;
                    }
                    let ending = progress.ended.get_or_insert(Ending {
                        outcome: String::new(),
                        exit_code: 0,
                        final_message: None,
                        checks: Vec::new(),
                    });
                    ending.outcome = crate::config::serde_name(outcome);
                    ending.exit_code = *exit_code;
                    ending.final_message = final_message.clone();
                    end = true;
                }
                Event::CheckResult { name, outcome, .. } => {
                    let ending = progress.ended.get_or_insert(Ending {
                        outcome: String::new(),
                        exit_code: 0,
                        final_message: None,
                        checks: Vec::new(),
                    });
                    ending.checks.retain(|(check, _)| check != name);
                    ending.checks.push((name.clone(), outcome.passed));
                }
                _ => {}
            }
        }
        let due = match self.inner.last_edit.lock() {
            Ok(mut last) => {
                let due = start
                    || end
                    || matches!(&line.event, Event::AssistantMessage { .. })
                        && last.is_some_and(|at| at.elapsed() >= EDIT_EVERY);
                if due {
                    *last = Some(Instant::now());
                }
                due
            }
            Err(_) => false,
        };
        if due {
            self.inner
                .sending
                .spawn(Inner::send(Arc::clone(&self.inner)));
        }
    }
}

/// A model's words made safe to post: mentions cannot ping (`@` then a zero-width space),
/// each line quoted.
fn quoted(text: &str) -> String {
    text.replace('@', "@\u{200b}")
        .lines()
        .map(|line| format!("> {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn render(progress: &Progress, run_url: Option<&str>) -> String {
    let (state, icon) = match &progress.ended {
        Some(ending) if !ending.outcome.is_empty() => {
            let icon = if ending.exit_code == 0 { "✅" } else { "❌" };
            (
                format!("{} (exit {})", ending.outcome, ending.exit_code),
                icon,
            )
        }
        _ => ("working".to_string(), "⏳"),
    };
    let mut body = format!(
        "{MARKER}\n### {icon} tollgate: {state}\n\n| turns | tool calls | refused | cost |\n|---|---|---|---|\n| {} | {} | {} | ${:.4} |\n",
        progress.turns,
        progress.calls,
        progress.refused.len(),
        progress.cost_usd
    );
    if let Some(ending) = &progress.ended {
        if !ending.checks.is_empty() {
            body.push_str("\n**Checks**\n");
            for (name, passed) in &ending.checks {
                let mark = if *passed { "passed" } else { "failed" };
                body.push_str(&format!("- `{name}`: {mark}\n"));
            }
        }
        if ending.outcome == "parked" {
            body.push_str(
                "\n**Calls wait for a person's approval**: the run's `pending.json` lists them.\n",
            );
        }
        if let Some(message) = ending
            .final_message
            .as_deref()
            .filter(|m| !m.trim().is_empty())
        {
            body.push_str("\n**Final message**\n\n");
            body.push_str(&quoted(message));
            body.push('\n');
        }
    }
    if !progress.refused.is_empty() {
        body.push_str("\n**Refused calls**\n");
        for refusal in progress.refused.iter().take(20) {
            let line: String = refusal.chars().take(300).collect();
            body.push_str(&format!("- {}\n", line.replace('@', "@\u{200b}")));
        }
        if progress.refused.len() > 20 {
            body.push_str(&format!("- … and {} more\n", progress.refused.len() - 20));
        }
    }
    if let Some(url) = run_url {
        body.push_str(&format!(
            "\n[The run's log, transcript and reports]({url}) · run `{}`\n",
            progress.run_id
        ));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_says_the_state_and_defuses_mentions() {
        let mut progress = Progress {
            run_id: "r1".into(),
            turns: 2,
            calls: 3,
            refused: vec!["Read: denied by rule Read(.env)".into()],
            cost_usd: 0.0123,
            ended: None,
        };
        let working = render(&progress, Some("https://github.example/o/r/actions/runs/9"));
        assert!(working.starts_with(MARKER));
        assert!(working.contains("tollgate: working"));
        assert!(working.contains("| 2 | 3 | 1 | $0.0123 |"));
        assert!(working.contains("(https://github.example/o/r/actions/runs/9)"));
        progress.ended = Some(Ending {
            outcome: "success".into(),
            exit_code: 0,
            final_message: Some("Done, @alice.\nSee the diff.".into()),
            checks: vec![("tests".into(), true)],
        });
        let done = render(&progress, None);
        assert!(done.contains("✅ tollgate: success (exit 0)"));
        assert!(done.contains("> Done, @\u{200b}alice.\n> See the diff."));
        assert!(done.contains("- `tests`: passed"));
        assert!(done.contains("- Read: denied by rule Read(.env)"));
    }
}
