//! `tollgate check`: one tool call decided under a policy, printed as one JSON line. It
//! never executes a tool.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use super::CheckArgs;
use super::setup::{additional_directories, canonical_dir, home_dir, load_policy};
use crate::exit::ExitCode;
use crate::policy::{
    self, Decision, Layer, PermissionContext, PermissionDecision, PermissionMode, RuleSet, Step,
    ToolName, Workspace,
};
use crate::tools::builtin;

#[derive(Debug, Serialize)]
struct CheckLine {
    decision: Decision,
    step: Step,
    layer: Layer,
    rule: Option<String>,
    source: Option<String>,
    reason: String,
}

pub fn check(args: CheckArgs) -> Result<ExitCode> {
    let home = home_dir();
    let policy = load_policy(&args.policy, home.as_deref())?;
    let input: Value = serde_json::from_str(&args.input).context("--input is not valid JSON")?;
    let workdir = canonical_dir(args.workdir.as_deref().unwrap_or(Path::new(".")), "workdir")?;
    let workspace = Workspace::new(workdir, additional_directories(&[&policy])?, home);
    let rules = RuleSet::merge(Some(&policy), &[]);
    let mode = args
        .mode
        .or(policy.default_mode)
        .unwrap_or(PermissionMode::DontAsk);
    let ctx = PermissionContext {
        mode,
        rules: &rules,
        workspace: &workspace,
    };
    let decision = decide(&args.tool, &input, &ctx);
    let line = CheckLine {
        decision: decision.decision,
        step: decision.step,
        layer: decision.layer,
        source: decision.rule.as_ref().map(|rule| rule.source.to_string()),
        rule: decision.rule.map(|rule| rule.rule),
        reason: decision.reason,
    };
    println!("{}", serde_json::to_string(&line)?);
    Ok(ExitCode::Success)
}

fn decide(tool: &str, input: &Value, ctx: &PermissionContext) -> PermissionDecision {
    let refuse = |reason: String| PermissionDecision {
        decision: Decision::Deny,
        step: Step::Pool,
        layer: Layer::Tool,
        rule: None,
        reason,
        updated_input: None,
    };
    let Some(tool) = ToolName::parse(tool).as_ref().and_then(builtin) else {
        return refuse(format!("No such tool available: {tool}"));
    };
    match tool.validate_input(input) {
        Ok(()) => policy::decide(tool.as_ref(), input, ctx),
        Err(err) => refuse(err.0),
    }
}
