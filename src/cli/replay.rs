//! `tollgate replay`: re-decides every tool call of one or many transcripts under another
//! policy and reports the calls whose decision changes (and, with `--sarif`, those that flip
//! from refused to allowed) — a guard for policy changes in CI. Each transcript is read as
//! typed events, one line at a time: memory holds the calls still waiting for their
//! decision, not the file.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;

use super::ReplayArgs;
use crate::call::Decider;
use crate::exit::ExitCode;
use crate::policy::{self, Decision, PermissionContext, PermissionDecision, Step};
use crate::session::{PolicyInForce, canonical_dir};
use crate::skills::{SKILL_FILE, Skill, SkillMode, SkillTool};
use crate::tools::{AgentTool, SubagentKind, Tool, builtin};
use crate::transcript::{Event, RecordedLine};

#[derive(Debug, Serialize)]
struct StepDecision<'a> {
    decision: Decision,
    step: Step,
    reason: &'a str,
}

#[derive(Debug, Serialize)]
struct Change<'a> {
    /// The call's position among the transcript's calls, 1-based: ids alone may repeat.
    call: u64,
    id: &'a str,
    tool: &'a str,
    input: &'a Value,
    before: StepDecision<'a>,
    after: StepDecision<'a>,
    widened: bool,
}

/// A call seen, waiting for its recorded decision.
struct PendingCall {
    position: u64,
    line: u64,
    tool: String,
    input: Value,
    /// The kind of sub-agent that made the call; `None` for the run's own.
    subagent: Option<SubagentKind>,
}

/// The gate the calls are decided again under, and what changed so far.
struct Replayer<'a> {
    ctx: PermissionContext<'a>,
    /// The workdir's skills, for Skill calls (the transcript names a skill, not its file).
    skills: Vec<Skill>,
    workdir: PathBuf,
    changed: Vec<String>,
    widened: usize,
    /// The transcript replayed, and its calls that flip from refused to allowed.
    transcript: PathBuf,
    flips: Vec<crate::report::Flip>,
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let paths = transcripts(&args.transcripts)?;
    let mut flips = Vec::new();
    for path in &paths {
        flips.extend(replay_one(&args, path, paths.len() > 1)?);
    }
    if paths.len() > 1 {
        writeln!(
            std::io::stderr().lock(),
            "{} replayed; {} newly allowed",
            crate::base::counted(paths.len() as u64, "transcript"),
            crate::base::counted(flips.len() as u64, "call")
        )?;
    }
    if let Some(sarif) = &args.sarif {
        let text = crate::report::replay_sarif(&flips)?;
        crate::out_dir::write_atomic(sarif, text.as_bytes())?;
    }
    Ok(if flips.is_empty() {
        ExitCode::Success
    } else {
        ExitCode::TaskFailed
    })
}

/// The transcripts `given` names: a file is one; a run folder its `transcript.jsonl`; any
/// other folder the transcripts of its run folders, in name order. A folder with none is an
/// error, so a mistyped path never passes as "nothing changed".
fn transcripts(given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in given {
        if !path.is_dir() {
            found.push(path.clone());
            continue;
        }
        let own = path.join(crate::out_dir::TRANSCRIPT_FILE);
        if own.is_file() {
            found.push(own);
            continue;
        }
        let mut runs: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read the folder {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .map(|run| run.join(crate::out_dir::TRANSCRIPT_FILE))
            .filter(|transcript| transcript.is_file())
            .collect();
        if runs.is_empty() {
            bail!(
                "{} holds no transcript: neither a {} nor run folders holding one",
                path.display(),
                crate::out_dir::TRANSCRIPT_FILE
            );
        }
        runs.sort();
        found.extend(runs);
    }
    Ok(found)
}

/// Replays one transcript: its changes on stdout, its table on stderr; the calls that flip
/// from refused to allowed.
fn replay_one(args: &ReplayArgs, path: &Path, many: bool) -> Result<Vec<crate::report::Flip>> {
    let path = &path.to_path_buf();
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read transcript {}", path.display()))?;
    let mut lines = Lines::new(std::io::BufReader::new(file), path);
    // The run's mode and workdir come first, in run_started; the gate is built from them.
    let (recorded_mode, recorded_workdir, first) = loop {
        match lines.next()? {
            None => bail!("{} holds no run_started or tool_call event", path.display()),
            Some((_, _, Event::RunStarted { mode, workdir, .. })) => {
                break (Some(mode), Some(workdir), None);
            }
            Some(line @ (_, _, Event::ToolCall { .. })) => break (None, None, Some(line)),
            Some(_) => {}
        }
    };
    let workdir = match (&args.workdir, &recorded_workdir) {
        (Some(dir), _) => canonical_dir(dir, "workdir")?,
        (None, Some(dir)) if dir.is_dir() => canonical_dir(dir, "workdir")?,
        _ => canonical_dir(Path::new("."), "workdir")?,
    };
    let flags = args.rules.sources(args.policy.as_deref());
    let gate = PolicyInForce::load(flags, workdir.clone(), args.mode.or(recorded_mode))?;
    let mode = gate.mode;
    let mut replayer = Replayer {
        ctx: gate.context(),
        // A workdir whose skills no longer load still has its Skill calls judged, by name.
        skills: crate::skills::discover(&[workdir.join("skills")], &workdir).unwrap_or_default(),
        workdir: workdir.clone(),
        changed: Vec::new(),
        widened: 0,
        transcript: path.clone(),
        flips: Vec::new(),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut pending: HashMap<String, PendingCall> = HashMap::new();
    let mut calls = 0u64;
    let mut next = first;
    // Sub-agents by id: an explore one's calls are refused again as the run refused them.
    let mut subagents: HashMap<String, SubagentKind> = HashMap::new();
    while let Some((line, agent_id, event)) = match next.take() {
        Some(first) => Some(first),
        None => lines.next()?,
    } {
        match event {
            Event::SubagentStarted {
                id, subagent_type, ..
            } => {
                subagents.insert(id, subagent_type);
            }
            Event::ToolCall { id, tool, input } => {
                calls += 1;
                if let Some(earlier) = pending.get(&id) {
                    bail!(
                        "{}:{line}: the tool_use id {id:?} is also the id of the call at line {}, still undecided; replay cannot tell their decisions apart",
                        path.display(),
                        earlier.line
                    );
                }
                let call = PendingCall {
                    position: calls,
                    line,
                    tool,
                    input,
                    subagent: agent_id.and_then(|agent| subagents.get(&agent).copied()),
                };
                pending.insert(id, call);
            }
            Event::PermissionDecision { id, decision, .. } => {
                // A decision for no waiting call (the call line was cut) has nothing to compare.
                if let Some(call) = pending.remove(&id) {
                    replayer.compare(&mut out, &id, &call, &decision)?;
                }
            }
            _ => {}
        }
    }
    let mut err = std::io::stderr().lock();
    if many {
        writeln!(
            err,
            "{}:",
            crate::neutral::log_line(&path.display().to_string())
        )?;
    }
    writeln!(
        err,
        "{} replayed under {mode} mode; {} changed, {} newly allowed",
        crate::base::counted(calls, "call"),
        replayer.changed.len(),
        replayer.widened
    )?;
    for row in &replayer.changed {
        writeln!(err, "  {}", crate::neutral::log_line(row))?;
    }
    Ok(replayer.flips)
}

impl Replayer<'_> {
    /// The tool a recorded call is decided by: a built-in, an MCP tool's stand-in, or for
    /// Skill a tool holding the skill it names — the workdir's, or where it is not there (a
    /// task's `skills:` path, since removed) one of that name in the workdir loaded as text,
    /// so `Skill(name)` rules still judge it rather than the call being refused as unknown.
    fn tool(&self, name: &policy::ToolName, input: &Value) -> Option<Arc<dyn Tool>> {
        if *name == policy::ToolName::Agent {
            // A custom agent's call is judged by its name, as the run judged it.
            return Some(Arc::new(AgentTool::naming(input)));
        }
        if *name != policy::ToolName::Skill {
            // An MCP tool is judged by its stand-in, as `check` judges it.
            return builtin(name).or_else(|| crate::mcp::stand_in(name));
        }
        let wanted = input.get("skill").and_then(Value::as_str)?;
        let skill = self
            .skills
            .iter()
            .find(|skill| skill.name == wanted)
            .cloned()
            .unwrap_or_else(|| {
                let file = self.workdir.join("skills").join(wanted).join(SKILL_FILE);
                Skill {
                    name: wanted.to_string(),
                    description: String::new(),
                    mode: SkillMode::Inject,
                    instructions: String::new(),
                    resolved: file.clone(),
                    file,
                }
            });
        SkillTool::new(vec![skill]).map(|tool| Arc::new(tool) as Arc<dyn Tool>)
    }

    /// Decides `call` again and reports it if the decision differs from `old`.
    fn compare(
        &mut self,
        out: &mut impl Write,
        id: &str,
        call: &PendingCall,
        old: &PermissionDecision,
    ) -> Result<()> {
        let tool = policy::ToolName::parse(&call.tool)
            .as_ref()
            .and_then(|name| self.tool(name, &call.input));
        // A call no tool here can take is refused as the run and `check` refuse it, never
        // skipped: a policy change must not hide behind a call replay cannot judge.
        let new = match crate::call::prepare(&call.tool, tool, call.input.clone(), None) {
            Err(unreached) => unreached.decision(),
            // A sub-agent's calls are judged in its scope, as the run judged them: an
            // explore one's refused again, none parked.
            Ok(prepared) => Decider {
                scope: call.subagent,
                ..Decider::headless(self.ctx)
            }
            .decide_now(prepared)
            .into_decision(),
        };
        if new.decision == old.decision {
            return Ok(());
        }
        let widened = old.decision != Decision::Allow && new.decision == Decision::Allow;
        self.widened += usize::from(widened);
        if widened {
            self.flips.push(crate::report::Flip {
                transcript: self.transcript.clone(),
                line: call.line,
                call: call.position,
                id: id.to_string(),
                tool: call.tool.clone(),
                input: crate::report::input_summary(
                    &policy::ToolName::from_model(&call.tool),
                    &call.input,
                ),
                before: old.reason.clone(),
                after: new.reason.clone(),
            });
        }
        let change = Change {
            call: call.position,
            id,
            tool: &call.tool,
            input: &call.input,
            before: StepDecision {
                decision: old.decision,
                step: old.step,
                reason: &old.reason,
            },
            after: StepDecision {
                decision: new.decision,
                step: new.step,
                reason: &new.reason,
            },
            widened,
        };
        // The calls are a model's: inert on a CI runner's log (see `neutral`).
        let rendered = serde_json::to_string(&change)?;
        let line = crate::neutral::json_log_line(&rendered);
        writeln!(out, "{line}")?;
        self.changed.push(format!(
            "#{:<5} {:<14} {:<6} {:<6} → {:<6} {}",
            call.position,
            id,
            call.tool,
            label(old.decision),
            label(new.decision),
            crate::report::input_summary(&policy::ToolName::from_model(&call.tool), &call.input)
        ));
        Ok(())
    }
}

/// A transcript's events with their line numbers, blank lines skipped; a line that is not a
/// transcript event is an error naming it.
struct Lines<'a, R> {
    reader: R,
    path: &'a PathBuf,
    number: u64,
    buffer: String,
}

impl<'a, R: BufRead> Lines<'a, R> {
    fn new(reader: R, path: &'a PathBuf) -> Self {
        Lines {
            reader,
            path,
            number: 0,
            buffer: String::new(),
        }
    }

    /// The next event with its line number and the sub-agent it belongs to.
    fn next(&mut self) -> Result<Option<(u64, Option<String>, Event)>> {
        loop {
            self.buffer.clear();
            self.number += 1;
            let read = self
                .reader
                .read_line(&mut self.buffer)
                .with_context(|| format!("cannot read {}:{}", self.path.display(), self.number))?;
            if read == 0 {
                return Ok(None);
            }
            if self.buffer.trim().is_empty() {
                continue;
            }
            let line: RecordedLine = serde_json::from_str(&self.buffer).map_err(|err| {
                anyhow!(
                    "{}:{}: not a transcript event: {err}",
                    self.path.display(),
                    self.number
                )
            })?;
            return Ok(Some((self.number, line.agent_id, line.event)));
        }
    }
}

fn label(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
        Decision::Ask => "ask",
        Decision::Defer => "defer",
    }
}
