//! What `tollgate run`'s progress says, worked out from the run's events alone: the plain
//! lines (the start, each model answer, tool call, retry, check and the end) and the live
//! line's status. Pure: the time comes in as an argument and text goes out; nothing here writes.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::base::{counted, plural};
use crate::config::serde_name;
use crate::model::{ContentBlock, RetryNotice};
use crate::policy::PermissionDecision;
use crate::transcript::{CheckOutcome, Event, ResultStatus};

/// Every plain line starts with this, so a CI log can be searched for the run's own lines.
pub const PREFIX: &str = "tollgate run: ";

/// A tool call's input is shown up to this many characters: enough to tell calls apart.
const SUBJECT_CHARS: usize = 60;
/// A refusal's reason or an error's first line, up to this many characters.
const REASON_CHARS: usize = 160;

/// The input fields that say what a call is about, most telling first (Bash's `command`,
/// the file tools' `file_path`, the search tools' `pattern`, …).
const SUBJECT_FIELDS: [&str; 8] = [
    "command",
    "file_path",
    "path",
    "pattern",
    "url",
    "query",
    "skill",
    "description",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activity {
    Starting,
    Asking,
    Retrying { attempt: u32, max: u32 },
    Tools,
    Checks,
    Finished,
}

/// A call between its `tool_call` and its `tool_result`.
#[derive(Debug)]
struct CallState {
    /// `Bash(cargo test)`.
    label: String,
    /// `allow (rule `Bash(cargo test:*)`, step 2b)`; `None` until (unless) the gate spoke.
    decision: Option<String>,
    /// A refusal's reason, said after the outcome.
    refusal: Option<String>,
    /// Allowed, so it ran and its duration means something.
    ran: bool,
}

/// The sub-agent whose conversation the events belong to now.
#[derive(Debug)]
struct Subagent {
    id: String,
    turn: u32,
}

#[derive(Debug)]
pub struct Tracker {
    max_turns: u32,
    /// The run's own turn; a sub-agent's are counted in `subagent`.
    turn: u32,
    subagent: Option<Subagent>,
    /// When the model was last asked, to say how long its answer took.
    asked_at: Option<Instant>,
    activity: Activity,
    /// What the agent's and the classifier's requests cost so far; `None` once one request's
    /// price is unknown, since a partial sum would understate it.
    spent: Option<f64>,
    /// Announced calls without a result yet, in the order they were announced (a turn has
    /// a few, so a list is enough).
    calls: Vec<(String, CallState)>,
    /// Allowed calls without a result yet, in the order they were allowed.
    running: Vec<String>,
    checks_passed: u32,
    checks_failed: u32,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            max_turns: 0,
            turn: 0,
            subagent: None,
            asked_at: None,
            activity: Activity::Starting,
            spent: Some(0.0),
            calls: Vec::new(),
            running: Vec::new(),
            checks_passed: 0,
            checks_failed: 0,
        }
    }
}

impl Tracker {
    /// Takes in one event; returns the plain lines it makes (without [`PREFIX`]).
    pub fn observe(&mut self, event: &Event, now: Instant) -> Vec<String> {
        let line = match event {
            Event::RunStarted {
                run_id,
                task,
                mode,
                model,
                max_turns,
                ..
            } => {
                self.max_turns = *max_turns;
                Some(format!(
                    "started {run_id}: task `{}`, model {}/{}, mode {}, at most {}",
                    task.name,
                    model.provider,
                    model.name,
                    serde_name(mode),
                    counted(*max_turns, "turn")
                ))
            }
            Event::ModelRequest { turn, .. } => {
                match &mut self.subagent {
                    Some(subagent) => subagent.turn = *turn,
                    None => self.turn = *turn,
                }
                self.asked_at = Some(now);
                self.activity = Activity::Asking;
                None
            }
            Event::ApiRetry { retry, .. } => {
                self.activity = Activity::Retrying {
                    attempt: retry.attempt,
                    max: retry.max,
                };
                Some(self.in_turn(&retry_text(retry)))
            }
            Event::Compaction {
                outcome, tokens, ..
            } => Some(self.in_turn(&format!(
                "compaction {}: about {} → {} prompt tokens",
                serde_name(outcome),
                tokens.tokens_before,
                tokens.tokens_after
            ))),
            Event::RunResumed {
                messages, requests, ..
            } => Some(format!(
                "resumed: {} restored, {} spent before",
                counted(*messages, "message"),
                counted(*requests, "request")
            )),
            Event::UserMessage { .. } => None,
            Event::StreamingOff { .. } => Some(self.in_turn(
                "the server cannot stream tool calls; requests are sent whole from now on",
            )),
            Event::ModelFallback { from, to, .. } => {
                Some(self.in_turn(&format!("{from} is unavailable; switched to {to}")))
            }
            Event::AssistantMessage {
                content,
                stop_reason,
                cost_usd,
                ..
            } => {
                self.add_cost(*cost_usd);
                let took = self
                    .asked_at
                    .take()
                    .map(|at| format!(" in {}", duration(now.saturating_duration_since(at))))
                    .unwrap_or_default();
                let calls = content
                    .iter()
                    .filter(|block| matches!(block, ContentBlock::ToolUse { .. }))
                    .count();
                let answer = if calls == 0 {
                    if self.subagent.is_none() {
                        self.activity = Activity::Checks;
                    }
                    format!("model finished{took} ({})", serde_name(stop_reason))
                } else {
                    self.activity = Activity::Tools;
                    format!(
                        "model answered{took}: {calls} tool {}",
                        plural(calls, "call")
                    )
                };
                Some(self.in_turn(&format!("{answer}, {} so far", money(self.spent))))
            }
            Event::ToolCall { id, tool, input } => {
                self.calls.push((
                    id.clone(),
                    CallState {
                        label: label(tool, input),
                        decision: None,
                        refusal: None,
                        ran: false,
                    },
                ));
                None
            }
            Event::PermissionDecision { id, decision, .. } => {
                if let Some((_, call)) = self.calls.iter_mut().find(|(known, _)| known == id) {
                    call.decision = Some(decision_text(decision));
                    call.refusal =
                        (!decision.is_allow()).then(|| clip(&decision.reason, REASON_CHARS));
                    call.ran = decision.is_allow();
                }
                if decision.is_allow() {
                    self.running.push(id.clone());
                }
                None
            }
            Event::ClassifierCall { call, .. } => {
                self.add_cost(call.cost_usd);
                None
            }
            Event::ToolResult {
                id,
                tool,
                status,
                content,
                duration_ms,
                ..
            } => {
                self.running.retain(|running| running != id);
                let call = self
                    .calls
                    .iter()
                    .position(|(known, _)| known == id)
                    .map(|index| self.calls.remove(index).1);
                let (label, decision, refusal, ran) = match call {
                    Some(call) => (
                        call.label,
                        call.decision.unwrap_or_else(|| "not run".to_string()),
                        call.refusal,
                        call.ran,
                    ),
                    None => (tool.clone(), "not run".to_string(), None, false),
                };
                let took = if ran {
                    format!(" in {}", duration(Duration::from_millis(*duration_ms)))
                } else {
                    String::new()
                };
                let detail = match status {
                    ResultStatus::Error => first_line(content),
                    ResultStatus::Denied => refusal,
                    ResultStatus::Lost => Some("started, its result was lost".to_string()),
                    ResultStatus::Success | ResultStatus::Cancelled => None,
                }
                .map(|detail| format!(": {detail}"))
                .unwrap_or_default();
                Some(self.in_turn(&format!(
                    "{label}: {decision} → {}{took}{detail}",
                    serde_name(status)
                )))
            }
            Event::CheckResult {
                name,
                attempt,
                outcome,
                ..
            } => {
                self.activity = Activity::Checks;
                if outcome.passed {
                    self.checks_passed += 1;
                } else {
                    self.checks_failed += 1;
                }
                Some(check_text(name, *attempt, outcome))
            }
            Event::CheckFeedback {
                attempt, checks, ..
            } => Some(format!(
                "failed {} sent back to the model (retry {attempt}): {}",
                plural(checks.len(), "check"),
                checks.join(", ")
            )),
            Event::SubagentStarted {
                id,
                subagent_type,
                description,
                ..
            } => {
                let line = self.in_turn(&format!(
                    "sub-agent {id} ({}) started: {}",
                    serde_name(subagent_type),
                    clip(description, SUBJECT_CHARS)
                ));
                self.subagent = Some(Subagent {
                    id: id.clone(),
                    turn: 0,
                });
                Some(line)
            }
            Event::SubagentFinished {
                id, outcome, turns, ..
            } => {
                self.subagent = None;
                self.activity = Activity::Tools;
                Some(self.in_turn(&format!(
                    "sub-agent {id} finished: {} after {turns} {}",
                    serde_name(outcome),
                    plural(*turns, "turn")
                )))
            }
            Event::QueryAborted { by, reason, .. } => Some(format!(
                "stopped by {} ({})",
                serde_name(by),
                serde_name(reason)
            )),
            Event::RunFinished {
                outcome,
                counts,
                total_cost_usd,
                duration_ms,
                ..
            } => {
                self.activity = Activity::Finished;
                let denied = if counts.denials > 0 {
                    format!(" ({} denied)", counts.denials)
                } else {
                    String::new()
                };
                Some(format!(
                    "finished: {} after {} {}, {} tool {}{denied}, {}, {}",
                    serde_name(outcome),
                    counts.turns,
                    plural(counts.turns, "turn"),
                    counts.tool_calls,
                    plural(counts.tool_calls, "call"),
                    money(*total_cost_usd),
                    duration(Duration::from_millis(*duration_ms))
                ))
            }
            Event::StructuredOutputRejected {
                attempt,
                max_attempts,
                errors,
                ..
            } => Some(format!(
                "final answer {attempt}/{max_attempts} not valid against the output schema: {}",
                errors.first().map_or("", String::as_str)
            )),
            // What a person following the run needs is above; these are in the transcript.
            Event::McpNotification { .. }
            | Event::McpTools { .. }
            | Event::HookRun { .. }
            | Event::EventHooks { .. }
            | Event::ToolProgress { .. }
            | Event::QueuedMessage { .. }
            | Event::InputSkipped { .. }
            | Event::NetworkConnection { .. }
            | Event::Reminder { .. }
            | Event::MessageBudget { .. }
            | Event::ToolStarted { .. } => None,
        };
        let mut lines: Vec<String> = line.into_iter().collect();
        // What the run goes without, one line each after the start: nothing held back for
        // want of an approval goes unsaid.
        if let Event::RunStarted { policy, .. } | Event::RunResumed { policy, .. } = event {
            lines.extend(policy.held_back.iter().map(|held| held.describe()));
        }
        lines
    }

    /// The live line's text: `turn 3/20, Bash(cargo test), $0.0123 so far`.
    pub fn status(&self) -> String {
        let activity = match self.activity {
            Activity::Starting => "starting".to_string(),
            Activity::Asking => "asking the model".to_string(),
            Activity::Retrying { attempt, max } => format!("retrying the model ({attempt}/{max})"),
            // The latest: inside a sub-agent, its call rather than the Agent call around it.
            Activity::Tools => match self.running.last().and_then(|id| self.call(id)) {
                Some(call) if self.running.len() > 1 => {
                    format!("{} (+{} more)", call.label, self.running.len() - 1)
                }
                Some(call) => call.label.clone(),
                // Announced, not yet allowed or answered (the gate, hooks, the classifier).
                None => match self.calls.first() {
                    Some((_, call)) => format!("{} (pending)", call.label),
                    None => "tools done".to_string(),
                },
            },
            Activity::Checks if self.checks_passed + self.checks_failed == 0 => {
                "model finished".to_string()
            }
            Activity::Checks => format!(
                "checks: {} passed, {} failed",
                self.checks_passed, self.checks_failed
            ),
            Activity::Finished => "finished".to_string(),
        };
        let agent = self
            .subagent
            .as_ref()
            .map(|subagent| format!("{} turn {}, ", subagent.id, subagent.turn))
            .unwrap_or_default();
        let turn = if self.turn > 0 {
            format!("turn {}/{}, ", self.turn, self.max_turns)
        } else {
            String::new()
        };
        format!("{turn}{agent}{activity}, {} so far", money(self.spent))
    }

    pub fn finished(&self) -> bool {
        self.activity == Activity::Finished
    }

    fn call(&self, id: &str) -> Option<&CallState> {
        self.calls
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, call)| call)
    }

    fn add_cost(&mut self, cost: Option<f64>) {
        self.spent = self.spent.zip(cost).map(|(spent, cost)| spent + cost);
    }

    /// `turn 2: …`, or `turn 2, agent-1 turn 1: …` inside a sub-agent.
    fn in_turn(&self, text: &str) -> String {
        match &self.subagent {
            Some(subagent) => format!(
                "turn {}, {} turn {}: {text}",
                self.turn, subagent.id, subagent.turn
            ),
            None => format!("turn {}: {text}", self.turn),
        }
    }
}

/// `Bash(cargo test)`: the tool and what its input is about, as a rule would name it.
fn label(tool: &str, input: &Value) -> String {
    SUBJECT_FIELDS
        .iter()
        .find_map(|field| input.get(field).and_then(Value::as_str))
        .map_or_else(
            || tool.to_string(),
            |subject| format!("{tool}({})", clip(subject, SUBJECT_CHARS)),
        )
}

/// `allow (rule `Bash(cargo test:*)`, step 2b)`.
fn decision_text(decision: &PermissionDecision) -> String {
    let rule = decision
        .rule
        .as_ref()
        .map(|rule| format!(" `{}`", rule.rule))
        .unwrap_or_default();
    format!(
        "{} ({}{rule}, step {})",
        serde_name(&decision.decision),
        serde_name(&decision.layer),
        serde_name(&decision.step)
    )
}

/// `provider retry 1/3 in 2.0s: HTTP 529: Overloaded`
fn retry_text(retry: &RetryNotice) -> String {
    let status = retry
        .status
        .map(|status| format!("HTTP {status}: "))
        .unwrap_or_default();
    format!(
        "provider retry {}/{} in {}: {status}{}",
        retry.attempt,
        retry.max,
        duration(Duration::from_millis(retry.delay_ms)),
        clip(&retry.message, REASON_CHARS)
    )
}

/// `check `tests` passed in 3.2s`, `check `lint` (attempt 2) failed in 0.4s: exit 1, expected 0`
fn check_text(name: &str, attempt: u32, outcome: &CheckOutcome) -> String {
    let attempt = if attempt > 1 {
        format!(" (attempt {attempt})")
    } else {
        String::new()
    };
    let took = duration(Duration::from_millis(outcome.duration_ms));
    if outcome.passed {
        return format!("check `{name}`{attempt} passed in {took}");
    }
    let exit = match outcome.exit_code {
        Some(code) => format!("exit {code}, expected {}", outcome.expect_exit),
        None => "did not exit by itself".to_string(),
    };
    format!("check `{name}`{attempt} failed in {took}: {exit}")
}

/// `$0.0123`, or `cost unknown` when a model's price is not known.
fn money(usd: Option<f64>) -> String {
    usd.map_or_else(|| "cost unknown".to_string(), |usd| format!("${usd:.4}"))
}

/// `340ms`, `1.2s`, `2m05s`.
pub fn duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis < 60_000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        let seconds = duration.as_secs();
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    }
}

/// The first line that is not blank, clipped.
fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| clip(line, REASON_CHARS))
}

/// At most `max` characters of `text`, `…` marking a cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn event(value: Value) -> Event {
        serde_json::from_value(value.clone()).unwrap_or_else(|err| panic!("{value}: {err}"))
    }

    fn answer(turn: u32, calls: &[(&str, &str, Value)], cost: Option<f64>) -> Event {
        let mut content = vec![json!({"type": "text", "text": "ok"})];
        content.extend(calls.iter().map(
            |(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        ));
        event(json!({
            "type": "assistant_message", "turn": turn, "content": content,
            "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
            "usage": {"input_tokens": 10, "output_tokens": 5,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            "cost_usd": cost,
        }))
    }

    fn decision(id: &str, tool: &str, decision: &str, step: &str, rule: Option<&str>) -> Event {
        let mut value = json!({
            "type": "permission_decision", "id": id, "tool": tool, "decision": decision,
            "step": step, "layer": if rule.is_some() { "rule" } else { "tool" },
            "reason": format!("{tool}: {decision} by the test"),
        });
        if let Some(rule) = rule {
            value["rule"] = json!({"rule": rule, "source": {"file": "p.yaml", "line": 3}});
        }
        event(value)
    }

    fn result(id: &str, tool: &str, status: &str, content: &str, ms: u64) -> Event {
        event(json!({
            "type": "tool_result", "id": id, "tool": tool, "status": status,
            "is_error": status != "success", "content": content, "duration_ms": ms,
        }))
    }

    fn call(id: &str, tool: &str, input: Value) -> Event {
        event(json!({"type": "tool_call", "id": id, "tool": tool, "input": input}))
    }

    fn request(turn: u32) -> Event {
        event(json!({"type": "model_request", "turn": turn, "messages": 1, "tools": []}))
    }

    /// Feeds `events` one after another, each `gap` after the previous; every line made.
    fn feed(tracker: &mut Tracker, events: &[Event], start: Instant, gap: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        for (n, event) in events.iter().enumerate() {
            lines.extend(tracker.observe(event, start + gap * n as u32));
        }
        lines
    }

    #[test]
    fn a_turn_makes_a_line_for_the_answer_and_one_per_call_with_decision_outcome_and_time() {
        let mut tracker = Tracker::default();
        let events = [
            request(1),
            answer(
                1,
                &[
                    (
                        "a",
                        "Bash",
                        json!({"command": "cargo test", "description": "tests"}),
                    ),
                    ("b", "Bash", json!({"command": "rm -rf build"})),
                    ("c", "Read", json!({"file_path": "missing.md"})),
                    ("d", "Nope", json!({})),
                ],
                Some(0.0125),
            ),
            call(
                "a",
                "Bash",
                json!({"command": "cargo test", "description": "tests"}),
            ),
            decision("a", "Bash", "allow", "2b", Some("Bash(cargo test:*)")),
            call("b", "Bash", json!({"command": "rm -rf build"})),
            decision("b", "Bash", "deny", "1a", Some("Bash(rm:*)")),
            call("c", "Read", json!({"file_path": "missing.md"})),
            decision("c", "Read", "allow", "1c", None),
            call("d", "Nope", json!({})),
            result("a", "Bash", "success", "ok", 3400),
            result("b", "Bash", "denied", "refused", 0),
            result(
                "c",
                "Read",
                "error",
                "\ncannot read missing.md: no such file\nmore",
                2,
            ),
            result("d", "Nope", "error", "no such tool: Nope", 0),
        ];
        let lines = feed(
            &mut tracker,
            &events,
            Instant::now(),
            Duration::from_millis(1200),
        );
        assert_eq!(
            lines,
            [
                "turn 1: model answered in 1.2s: 4 tool calls, $0.0125 so far",
                "turn 1: Bash(cargo test): allow (rule `Bash(cargo test:*)`, step 2b) → success in 3.4s",
                "turn 1: Bash(rm -rf build): deny (rule `Bash(rm:*)`, step 1a) → denied: Bash: deny by the test",
                "turn 1: Read(missing.md): allow (tool, step 1c) → error in 2ms: cannot read missing.md: no such file",
                "turn 1: Nope: not run → error: no such tool: Nope",
            ]
        );
    }

    #[test]
    fn the_live_status_says_the_turn_what_runs_and_the_money_spent() {
        let mut tracker = Tracker::default();
        let now = Instant::now();
        assert_eq!(tracker.status(), "starting, $0.0000 so far");
        tracker.max_turns = 20;
        tracker.observe(&request(3), now);
        assert_eq!(
            tracker.status(),
            "turn 3/20, asking the model, $0.0000 so far"
        );
        let retry = event(json!({
            "type": "api_retry", "turn": 3, "attempt": 1, "max": 4, "delay_ms": 2000,
            "status": 529, "category": "overloaded", "message": "Overloaded",
        }));
        assert_eq!(
            tracker.observe(&retry, now),
            ["turn 3: provider retry 1/4 in 2.0s: HTTP 529: Overloaded"]
        );
        assert_eq!(
            tracker.status(),
            "turn 3/20, retrying the model (1/4), $0.0000 so far"
        );
        let calls = [
            ("a", "Bash", json!({"command": "cargo test"})),
            ("b", "Grep", json!({"pattern": "fn main"})),
        ];
        tracker.observe(&answer(3, &calls, Some(0.5)), now);
        tracker.observe(&call("a", "Bash", json!({"command": "cargo test"})), now);
        assert_eq!(
            tracker.status(),
            "turn 3/20, Bash(cargo test) (pending), $0.5000 so far"
        );
        tracker.observe(&decision("a", "Bash", "allow", "2b", None), now);
        tracker.observe(&call("b", "Grep", json!({"pattern": "fn main"})), now);
        tracker.observe(&decision("b", "Grep", "allow", "1c", None), now);
        assert_eq!(
            tracker.status(),
            "turn 3/20, Grep(fn main) (+1 more), $0.5000 so far"
        );
        tracker.observe(&result("b", "Grep", "success", "", 5), now);
        assert_eq!(
            tracker.status(),
            "turn 3/20, Bash(cargo test), $0.5000 so far"
        );
        tracker.observe(&result("a", "Bash", "success", "", 5), now);
        assert_eq!(tracker.status(), "turn 3/20, tools done, $0.5000 so far");
        tracker.observe(&request(4), now);
        tracker.observe(&answer(4, &[], Some(0.25)), now);
        assert_eq!(
            tracker.status(),
            "turn 4/20, model finished, $0.7500 so far"
        );
        let check = event(json!({
            "type": "check_result", "name": "tests", "run": "cargo test", "attempt": 2,
            "exit_code": 101, "expect_exit": 0, "passed": false, "output": "", "duration_ms": 61000,
        }));
        assert_eq!(
            tracker.observe(&check, now),
            ["check `tests` (attempt 2) failed in 1m01s: exit 101, expected 0"]
        );
        assert_eq!(
            tracker.status(),
            "turn 4/20, checks: 0 passed, 1 failed, $0.7500 so far"
        );
        assert!(!tracker.finished());
    }

    #[test]
    fn one_request_of_unknown_price_makes_the_cost_unknown_from_then_on() {
        let mut tracker = Tracker::default();
        let now = Instant::now();
        tracker.observe(&answer(1, &[], Some(0.1)), now);
        let lines = tracker.observe(&answer(2, &[], None), now);
        assert_eq!(
            lines,
            ["turn 0: model finished (end_turn), cost unknown so far"]
        );
        tracker.observe(&answer(3, &[], Some(0.1)), now);
        assert_eq!(tracker.status(), "model finished, cost unknown so far");
    }

    #[test]
    fn a_subagent_s_lines_name_it_and_its_own_turn() {
        let mut tracker = Tracker::default();
        let now = Instant::now();
        tracker.observe(&request(2), now);
        let started = event(json!({
            "type": "subagent_started", "id": "agent-1", "parent_id": "t1",
            "subagent_type": "explore", "description": "find the config", "tools": ["Read"],
            "max_turns": 5,
        }));
        let finished = event(json!({
            "type": "subagent_finished", "id": "agent-1", "parent_id": "t1",
            "outcome": "success", "turns": 1,
            "usage": {"input_tokens": 1, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            "cost_usd": 0.0,
        }));
        let events = [
            started,
            request(1),
            answer(
                1,
                &[("r", "Read", json!({"file_path": "a.toml"}))],
                Some(0.0),
            ),
            call("r", "Read", json!({"file_path": "a.toml"})),
            decision("r", "Read", "allow", "1c", None),
            result("r", "Read", "success", "", 4),
            finished,
        ];
        let lines = feed(&mut tracker, &events, now, Duration::ZERO);
        assert_eq!(
            lines,
            [
                "turn 2: sub-agent agent-1 (explore) started: find the config",
                "turn 2, agent-1 turn 1: model answered in 0ms: 1 tool call, $0.0000 so far",
                "turn 2, agent-1 turn 1: Read(a.toml): allow (tool, step 1c) → success in 4ms",
                "turn 2: sub-agent agent-1 finished: success after 1 turn",
            ]
        );
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        let table = [
            (0, "0ms"),
            (999, "999ms"),
            (1000, "1.0s"),
            (59_949, "59.9s"),
            (60_000, "1m00s"),
            (3_725_000, "62m05s"),
        ];
        for (millis, text) in table {
            assert_eq!(duration(Duration::from_millis(millis)), text, "{millis}");
        }
    }

    #[test]
    fn a_call_is_labelled_by_what_it_is_about_and_clipped() {
        let long = "x".repeat(100);
        let table = [
            (json!({"command": "ls", "description": "list"}), "Bash(ls)"),
            (
                json!({"description": "list", "file_path": "a.rs"}),
                "Bash(a.rs)",
            ),
            (json!({"todos": []}), "Bash"),
            (json!({"command": 7}), "Bash"),
        ];
        for (input, text) in table {
            assert_eq!(label("Bash", &input), text, "{input}");
        }
        let clipped = label("Bash", &json!({"command": long}));
        assert_eq!(clipped.chars().count(), "Bash()".len() + SUBJECT_CHARS);
        assert!(clipped.ends_with("x…)"), "{clipped}");
    }
}
