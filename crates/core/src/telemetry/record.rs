//! The run's telemetry, made from its transcript events as they are written (already
//! redacted): a trace (the run → each turn → its model request and its tool calls; a
//! sub-agent's turns under its Agent call), counters and a histogram, and a log record for
//! each event an operator would alert on. Pure: times come from the events, ids from the
//! caller, so a test can check the shapes exactly.

use std::collections::{BTreeMap, HashMap};

use crate::config::serde_name as name;
use crate::transcript::{Event, RecordedLine};

/// A span's or trace's id.
pub type SpanId = [u8; 8];
pub type TraceId = [u8; 16];

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

pub type Attributes = Vec<(String, Value)>;

/// A span whose start and end are known.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Attributes,
    /// Set when the span's work failed (a denied call, a failed run), with why.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub time_ns: u64,
    pub severity: Severity,
    /// The event's type (`permission_decision`, `api_retry`, …).
    pub body: String,
    pub attributes: Attributes,
    pub span_id: Option<SpanId>,
}

/// Upper bounds of the tool-duration histogram's buckets, in milliseconds.
pub const DURATION_BOUNDS_MS: [f64; 10] = [
    10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 15000.0, 60000.0, 300000.0,
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub count: u64,
    pub sum: f64,
    /// One more than the bounds: the last counts what is above them all.
    pub buckets: Vec<u64>,
}

impl Histogram {
    fn add(&mut self, value: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; DURATION_BOUNDS_MS.len() + 1];
        }
        self.count += 1;
        self.sum += value;
        let at = DURATION_BOUNDS_MS
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(DURATION_BOUNDS_MS.len());
        self.buckets[at] += 1;
    }
}

/// Cumulative since the run started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub start_ns: u64,
    /// By kind: input, output, cache_read, cache_write.
    pub tokens: BTreeMap<&'static str, u64>,
    pub cost_usd: f64,
    /// Refused calls by the layer that refused them.
    pub denials: BTreeMap<String, u64>,
    /// Retried model requests by the failure's category.
    pub retries: BTreeMap<String, u64>,
    /// Tool calls' durations by tool.
    pub tool_durations: BTreeMap<String, Histogram>,
    /// Ended runs by outcome.
    pub runs: BTreeMap<String, u64>,
}

/// A span begun and not yet ended.
#[derive(Debug, Clone)]
struct Open {
    record: SpanRecord,
}

/// What the recorder has built so far.
pub struct Recorder {
    pub trace_id: TraceId,
    new_id: Box<dyn FnMut() -> SpanId + Send>,
    run: Option<Open>,
    /// The open turn of each conversation (`None`: the run's own; else a sub-agent's id).
    turns: HashMap<Option<String>, Open>,
    requests: HashMap<Option<String>, Open>,
    tools: HashMap<String, (Option<String>, Open)>,
    /// Ended spans not yet exported.
    pub finished: Vec<SpanRecord>,
    pub metrics: Metrics,
    pub logs: Vec<LogRecord>,
    /// The run ended: everything is closed.
    pub ended: bool,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("finished", &self.finished.len())
            .field("logs", &self.logs.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

fn int(value: u64) -> Value {
    Value::Int(i64::try_from(value).unwrap_or(i64::MAX))
}

fn text(value: impl Into<String>) -> Value {
    Value::Str(value.into())
}

/// Nanoseconds since the epoch of an RFC 3339 time (the transcript's); 0 when unreadable.
pub fn nanos(time: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(time)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

impl Recorder {
    pub fn new(trace_id: TraceId, new_id: Box<dyn FnMut() -> SpanId + Send>) -> Recorder {
        Recorder {
            trace_id,
            new_id,
            run: None,
            turns: HashMap::new(),
            requests: HashMap::new(),
            tools: HashMap::new(),
            finished: Vec::new(),
            metrics: Metrics::default(),
            logs: Vec::new(),
            ended: false,
        }
    }

    fn open(
        &mut self,
        name: String,
        parent: Option<SpanId>,
        at: u64,
        attributes: Attributes,
    ) -> Open {
        Open {
            record: SpanRecord {
                span_id: (self.new_id)(),
                parent,
                name,
                start_ns: at,
                end_ns: at,
                attributes,
                error: None,
            },
        }
    }

    fn close(&mut self, mut open: Open, at: u64) {
        open.record.end_ns = at.max(open.record.start_ns);
        self.finished.push(open.record);
    }

    fn run_span(&self) -> Option<SpanId> {
        self.run.as_ref().map(|open| open.record.span_id)
    }

    /// Where a conversation's turn hangs: a sub-agent's under the Agent call that runs it,
    /// the run's own under the run.
    fn turn_parent(&self, agent: &Option<String>) -> Option<SpanId> {
        if agent.is_some()
            && let Some((_, open)) = self
                .tools
                .values()
                .filter(|(owner, open)| owner.is_none() && open.record.name == "tool Agent")
                .max_by_key(|(_, open)| open.record.start_ns)
        {
            return Some(open.record.span_id);
        }
        self.run_span()
    }

    fn log(
        &mut self,
        at: u64,
        severity: Severity,
        body: &str,
        attributes: Attributes,
        span_id: Option<SpanId>,
    ) {
        self.logs.push(LogRecord {
            time_ns: at,
            severity,
            body: body.to_string(),
            attributes,
            span_id: span_id.or_else(|| self.run_span()),
        });
    }

    /// Takes one transcript line into the telemetry.
    pub fn observe(&mut self, line: &RecordedLine) {
        if self.ended {
            return;
        }
        let at = nanos(&line.time);
        let agent = line.agent_id.clone();
        match &line.event {
            Event::RunStarted {
                run_id,
                tollgate_version,
                task,
                mode,
                model,
                ..
            } => {
                self.metrics.start_ns = at;
                let attributes = vec![
                    ("tollgate.run_id".into(), text(run_id)),
                    ("tollgate.version".into(), text(tollgate_version)),
                    ("tollgate.task".into(), text(&task.name)),
                    ("tollgate.mode".into(), text(name(mode))),
                    ("gen_ai.system".into(), text(&model.provider)),
                    ("gen_ai.request.model".into(), text(&model.name)),
                ];
                let open = self.open("tollgate run".into(), None, at, attributes);
                self.run = Some(open);
            }
            Event::RunResumed { .. } if self.run.is_none() => {
                let open = self.open("tollgate run".into(), None, at, Vec::new());
                self.metrics.start_ns = at;
                self.run = Some(open);
            }
            Event::ModelRequest { turn, messages, .. } => {
                if let Some(open) = self.requests.remove(&agent) {
                    self.close(open, at);
                }
                if let Some(open) = self.turns.remove(&agent) {
                    self.close(open, at);
                }
                let mut attributes = vec![("tollgate.turn".into(), int(u64::from(*turn)))];
                if let Some(id) = &agent {
                    attributes.push(("tollgate.agent_id".into(), text(id)));
                }
                let parent = self.turn_parent(&agent);
                let turn_span = self.open(format!("turn {turn}"), parent, at, attributes);
                let request = self.open(
                    "model request".into(),
                    Some(turn_span.record.span_id),
                    at,
                    vec![("tollgate.messages".into(), int(*messages as u64))],
                );
                self.turns.insert(agent.clone(), turn_span);
                self.requests.insert(agent, request);
            }
            Event::ApiRetry { retry, .. } => {
                let category = name(&retry.category);
                *self.metrics.retries.entry(category.clone()).or_default() += 1;
                let span = self.requests.get(&agent).map(|open| open.record.span_id);
                let mut attributes = vec![
                    ("tollgate.retry.category".into(), text(category)),
                    (
                        "tollgate.retry.attempt".into(),
                        int(u64::from(retry.attempt)),
                    ),
                    ("tollgate.retry.message".into(), text(&retry.message)),
                ];
                if let Some(status) = retry.status {
                    attributes.push(("http.response.status_code".into(), int(u64::from(status))));
                }
                self.log(at, Severity::Warn, "api_retry", attributes, span);
            }
            Event::AssistantMessage {
                usage,
                cost_usd,
                stop_reason,
                ..
            } => {
                let kinds = [
                    ("input", usage.input_tokens),
                    ("output", usage.output_tokens),
                    ("cache_read", usage.cache_read_input_tokens),
                    ("cache_write", usage.cache_creation_input_tokens),
                ];
                for (kind, count) in kinds {
                    *self.metrics.tokens.entry(kind).or_default() += count;
                }
                self.metrics.cost_usd += cost_usd.unwrap_or(0.0);
                if let Some(mut open) = self.requests.remove(&agent) {
                    let attributes = &mut open.record.attributes;
                    attributes.push(("gen_ai.usage.input_tokens".into(), int(usage.input_tokens)));
                    attributes.push((
                        "gen_ai.usage.output_tokens".into(),
                        int(usage.output_tokens),
                    ));
                    attributes.push((
                        "tollgate.usage.cache_read_tokens".into(),
                        int(usage.cache_read_input_tokens),
                    ));
                    attributes.push((
                        "tollgate.usage.cache_write_tokens".into(),
                        int(usage.cache_creation_input_tokens),
                    ));
                    attributes.push((
                        "gen_ai.response.finish_reason".into(),
                        text(name(stop_reason)),
                    ));
                    if let Some(cost) = cost_usd {
                        attributes.push(("tollgate.cost_usd".into(), Value::Double(*cost)));
                    }
                    self.close(open, at);
                }
            }
            Event::ModelFallback {
                from, to, error, ..
            } => {
                let attributes = vec![
                    ("tollgate.model.from".into(), text(from)),
                    ("tollgate.model.to".into(), text(to)),
                    ("tollgate.error".into(), text(error)),
                ];
                self.log(at, Severity::Warn, "model_fallback", attributes, None);
            }
            Event::ToolCall { id, tool, .. } => {
                let parent = self
                    .turns
                    .get(&agent)
                    .map(|open| open.record.span_id)
                    .or_else(|| self.run_span());
                let attributes = vec![
                    ("tollgate.tool.name".into(), text(tool)),
                    ("tollgate.tool.call_id".into(), text(id)),
                ];
                let open = self.open(format!("tool {tool}"), parent, at, attributes);
                self.tools.insert(id.clone(), (agent, open));
            }
            Event::PermissionDecision { id, tool, decision } => {
                let verdict = name(&decision.decision);
                let layer = name(&decision.layer);
                let mut attributes = vec![
                    ("tollgate.decision".into(), text(&verdict)),
                    ("tollgate.decision.step".into(), text(name(&decision.step))),
                    ("tollgate.decision.layer".into(), text(&layer)),
                ];
                if let Some(rule) = &decision.rule {
                    attributes.push(("tollgate.decision.rule".into(), text(&rule.rule)));
                }
                if decision.asked {
                    attributes.push(("tollgate.decision.asked".into(), Value::Bool(true)));
                }
                let span = self.tools.get_mut(id).map(|(_, open)| {
                    open.record.attributes.extend(attributes.iter().cloned());
                    open.record.span_id
                });
                if !decision.is_allow() {
                    *self.metrics.denials.entry(layer).or_default() += 1;
                    if let Some((_, open)) = self.tools.get_mut(id) {
                        open.record.error = Some(format!("{verdict}: {}", decision.reason));
                    }
                    attributes.push(("tollgate.tool.name".into(), text(tool)));
                    attributes.push(("tollgate.decision.reason".into(), text(&decision.reason)));
                    self.log(at, Severity::Warn, "permission_decision", attributes, span);
                }
            }
            Event::ToolResult {
                id,
                tool,
                status,
                is_error,
                duration_ms,
                effects,
                ..
            } => {
                self.metrics
                    .tool_durations
                    .entry(tool.clone())
                    .or_default()
                    .add(*duration_ms as f64);
                let (_, mut open) = match self.tools.remove(id) {
                    Some(found) => found,
                    // A call whose start an earlier process recorded (a resumed run).
                    None => {
                        let parent = self.turns.get(&agent).map(|open| open.record.span_id);
                        let span = self.open(format!("tool {tool}"), parent, at, Vec::new());
                        (agent, span)
                    }
                };
                let attributes = &mut open.record.attributes;
                attributes.push(("tollgate.tool.status".into(), text(name(status))));
                attributes.push(("tollgate.tool.is_error".into(), Value::Bool(*is_error)));
                attributes.push(("tollgate.tool.duration_ms".into(), int(*duration_ms)));
                if let Some(effects) = effects {
                    attributes.push((
                        "tollgate.effects.changes".into(),
                        int(effects.changes.len() as u64),
                    ));
                    attributes.push((
                        "tollgate.effects.exceeded".into(),
                        Value::Bool(effects.exceeded()),
                    ));
                    if effects.exceeded() {
                        open.record.error =
                            Some("the call changed more than its verdict allowed".into());
                    }
                }
                if *is_error && open.record.error.is_none() {
                    open.record.error = Some(format!("{tool} returned an error"));
                }
                self.close(open, at);
            }
            Event::CheckResult {
                name: check,
                attempt,
                outcome,
                ..
            } => {
                let passed = outcome.passed;
                let severity = if passed {
                    Severity::Info
                } else {
                    Severity::Warn
                };
                let attributes = vec![
                    ("tollgate.check.name".into(), text(check)),
                    ("tollgate.check.attempt".into(), int(u64::from(*attempt))),
                    ("tollgate.check.passed".into(), Value::Bool(passed)),
                ];
                self.log(at, severity, "check_result", attributes, None);
            }
            Event::RunFinished {
                outcome,
                exit_code,
                total_cost_usd,
                error,
                duration_ms,
                ..
            } => {
                let outcome = name(outcome);
                *self.metrics.runs.entry(outcome.clone()).or_default() += 1;
                let open_requests: Vec<Open> =
                    self.requests.drain().map(|(_, open)| open).collect();
                let open_tools: Vec<Open> = self.tools.drain().map(|(_, (_, open))| open).collect();
                let open_turns: Vec<Open> = self.turns.drain().map(|(_, open)| open).collect();
                for open in open_requests
                    .into_iter()
                    .chain(open_tools)
                    .chain(open_turns)
                {
                    self.close(open, at);
                }
                let mut attributes = vec![
                    ("tollgate.outcome".into(), text(&outcome)),
                    ("tollgate.exit_code".into(), int(u64::from(*exit_code))),
                    ("tollgate.duration_ms".into(), int(*duration_ms)),
                ];
                if let Some(cost) = total_cost_usd {
                    attributes.push(("tollgate.cost_usd".into(), Value::Double(*cost)));
                }
                let severity = if outcome == "success" {
                    Severity::Info
                } else {
                    Severity::Error
                };
                self.log(at, severity, "run_finished", attributes.clone(), None);
                if let Some(mut open) = self.run.take() {
                    open.record.attributes.extend(attributes);
                    if outcome != "success" {
                        open.record.error = Some(error.clone().unwrap_or_else(|| outcome.clone()));
                    }
                    self.close(open, at);
                }
                self.ended = true;
            }
            _ => {}
        }
    }
}
