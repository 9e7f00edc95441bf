//! `tollgate replay`: re-decides every tool call of a transcript under another policy and
//! reports the calls whose decision changes — a guard for policy changes in CI.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use serde_json::Value;

use super::ReplayArgs;
use crate::call::PreparedCall;
use crate::call::approval::headless;
use crate::exit::ExitCode;
use crate::policy::{self, Decision, PermissionMode};
use crate::session::{PolicyInForce, canonical_dir, read_text};
use crate::tools::builtin;

#[derive(Debug, Serialize)]
struct Verdict {
    decision: Decision,
    step: Value,
    reason: String,
}

#[derive(Debug, Serialize)]
struct Change<'a> {
    id: &'a str,
    tool: &'a str,
    input: &'a Value,
    before: Verdict,
    after: Verdict,
    widened: bool,
}

struct RecordedCall {
    id: String,
    tool: String,
    input: Value,
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let text = read_text(&args.transcript, "transcript")?;
    let mut calls = Vec::new();
    let mut before: HashMap<String, Value> = HashMap::new();
    let mut recorded_mode = None;
    let mut recorded_workdir = None;
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
    {
        let event: Value = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not a transcript event",
                args.transcript.display(),
                index + 1
            )
        })?;
        match event["type"].as_str() {
            Some("run_started") => {
                recorded_mode = event["mode"]
                    .as_str()
                    .and_then(|m| m.parse::<PermissionMode>().ok());
                recorded_workdir = event["workdir"].as_str().map(PathBuf::from);
            }
            Some("tool_call") => calls.push(RecordedCall {
                id: event["id"].as_str().unwrap_or_default().to_string(),
                tool: event["tool"].as_str().unwrap_or_default().to_string(),
                input: event["input"].clone(),
            }),
            Some("permission_decision") => {
                before.insert(event["id"].as_str().unwrap_or_default().to_string(), event);
            }
            _ => {}
        }
    }
    if calls.is_empty() && recorded_mode.is_none() {
        return Err(anyhow!(
            "{} holds no run_started or tool_call event",
            args.transcript.display()
        ));
    }
    let workdir = match (&args.workdir, &recorded_workdir) {
        (Some(dir), _) => canonical_dir(dir, "workdir")?,
        (None, Some(dir)) if dir.is_dir() => canonical_dir(dir, "workdir")?,
        _ => canonical_dir(std::path::Path::new("."), "workdir")?,
    };
    let flags = args.rules.sources(args.policy.as_deref());
    let gate = PolicyInForce::load(flags, workdir, args.mode.or(recorded_mode))?;
    let ctx = gate.context();
    let mode = gate.mode;

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut table = Vec::new();
    let mut widened_count = 0;
    for call in &calls {
        let Some(old) = before.get(&call.id) else {
            continue;
        };
        let Ok(old_decision) = serde_json::from_value::<Decision>(old["decision"].clone()) else {
            continue;
        };
        let Some(tool) = policy::ToolName::parse(&call.tool)
            .as_ref()
            .and_then(builtin)
        else {
            continue;
        };
        let Ok(prepared) = PreparedCall::prepare(tool, call.input.clone()) else {
            continue;
        };
        let new = headless(&prepared, policy::decide(&prepared, &ctx), &ctx, None);
        if new.decision == old_decision {
            continue;
        }
        let widened = old_decision != Decision::Allow && new.decision == Decision::Allow;
        widened_count += usize::from(widened);
        let change = Change {
            id: &call.id,
            tool: &call.tool,
            input: &call.input,
            before: Verdict {
                decision: old_decision,
                step: old["step"].clone(),
                reason: old["reason"].as_str().unwrap_or_default().to_string(),
            },
            after: Verdict {
                decision: new.decision,
                step: serde_json::to_value(new.step)?,
                reason: new.reason.clone(),
            },
            widened,
        };
        // The calls are a model's: inert on a CI runner's log (see `neutral`).
        let line = crate::neutral::json_log_line(&serde_json::to_string(&change)?);
        writeln!(out, "{line}")?;
        table.push(format!(
            "{:<14} {:<6} {:<6} → {:<6} {}",
            call.id,
            call.tool,
            label(old_decision),
            label(new.decision),
            crate::report::input_summary(&policy::ToolName::from_model(&call.tool), &call.input)
        ));
    }
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "{} calls replayed under {} mode; {} changed, {} newly allowed",
        calls.len(),
        mode,
        table.len(),
        widened_count
    )?;
    for row in &table {
        writeln!(err, "  {}", crate::neutral::log_line(row))?;
    }
    Ok(if widened_count > 0 {
        ExitCode::TaskFailed
    } else {
        ExitCode::Success
    })
}

fn label(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
        Decision::Ask => "ask",
    }
}
