//! `tollgate policy test|lint FILE`: check a policy before a model ever runs under it.

use std::path::Path;

use anyhow::{Result, anyhow};

use super::setup::{canonical_dir, home_dir, load_policy};
use super::{PolicyArgs, PolicyCommand};
use crate::config::serde_name;
use crate::exit::ExitCode;
use crate::policy::{Policy, SelfTestOutcome, ToolName, Workspace, lint, run_self_tests};
use crate::tools::builtin;

pub fn policy(args: PolicyArgs) -> Result<ExitCode> {
    match args.command {
        PolicyCommand::Test { file, workdir } => {
            let home = home_dir();
            let policy = load_policy(&file, home.as_deref())?;
            let workdir = canonical_dir(workdir.as_deref().unwrap_or(Path::new(".")), "workdir")?;
            let workspace = Workspace::new(workdir, Vec::new(), home);
            let outcomes = self_tests(&policy, &workspace);
            for outcome in &outcomes {
                println!("{}", describe(outcome));
            }
            let failed = outcomes.iter().filter(|o| !o.passed).count();
            println!("{} passed, {failed} failed", outcomes.len() - failed);
            Ok(if failed == 0 {
                ExitCode::Success
            } else {
                ExitCode::TaskFailed
            })
        }
        PolicyCommand::Lint { file } => {
            let policy = load_policy(&file, home_dir().as_deref())?;
            let implemented = |tool: &ToolName| builtin(tool).is_some();
            let warnings = lint(&policy, &implemented);
            for warning in &warnings {
                println!("{}: {}: {}", warning.source, warning.rule, warning.message);
            }
            if warnings.is_empty() {
                println!("{}: no warnings", file.display());
                Ok(ExitCode::Success)
            } else {
                println!("{} warnings", warnings.len());
                Ok(ExitCode::TaskFailed)
            }
        }
    }
}

pub fn self_tests(policy: &Policy, workspace: &Workspace) -> Vec<SelfTestOutcome> {
    run_self_tests(policy, workspace, &crate::call::prepare_for_self_test)
}

pub fn describe(outcome: &SelfTestOutcome) -> String {
    let test = &outcome.test;
    let verdict = if outcome.passed { "ok  " } else { "FAIL" };
    let expected = serde_name(&test.expect);
    let how = match &outcome.got {
        Ok(answer) => {
            let decision = answer.decision();
            let step = serde_name(&decision.step);
            let rule = decision
                .rule
                .as_ref()
                .map(|rule| format!(", rule {} at {}", rule.rule, rule.source))
                .unwrap_or_default();
            format!(" at step {step}{rule}: {}", decision.reason)
        }
        Err(_) => String::new(),
    };
    format!(
        "{verdict} {} ({}): {} {} — expected {expected}, got {}{how}",
        test.name,
        test.source,
        test.tool,
        test.input,
        outcome.got_label()
    )
}

/// Runs every source's self-tests; the first failure refuses the run.
pub fn require_self_tests(policies: &[&Policy], workspace: &Workspace) -> Result<()> {
    for policy in policies {
        if let Some(failed) = self_tests(policy, workspace)
            .into_iter()
            .find(|o| !o.passed)
        {
            return Err(anyhow!(
                "policy self-test failed, refusing to start: {}",
                describe(&failed)
            ));
        }
    }
    Ok(())
}
