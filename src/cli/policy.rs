//! `tollgate policy test|lint FILE`: check a policy before a model ever runs under it.

use std::path::Path;

use anyhow::Result;

use super::{PolicyArgs, PolicyCommand};
use crate::exit::ExitCode;
use crate::policy::{ToolName, Workspace, lint};
use crate::session::{canonical_dir, describe_self_test, home_dir, load_policy, self_tests};
use crate::tools::builtin;

pub fn policy(args: PolicyArgs) -> Result<ExitCode> {
    match args.command {
        PolicyCommand::Test { file, workdir } => {
            let home = home_dir();
            let policy = load_policy(&file, home.as_deref())?;
            let workdir = canonical_dir(workdir.as_deref().unwrap_or(Path::new(".")), "workdir")?;
            let workspace = Workspace::new(workdir, Vec::new(), home)
                .with_state_folder(crate::state::guarded_folder());
            let outcomes = self_tests(&policy, &workspace);
            for outcome in &outcomes {
                super::print_out(&format!("{}\n", describe_self_test(outcome)));
            }
            let failed = outcomes.iter().filter(|o| !o.passed).count();
            super::print_out(&format!(
                "{} passed, {failed} failed\n",
                outcomes.len() - failed
            ));
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
                super::print_out(&format!(
                    "{}: {}: {}\n",
                    warning.source, warning.rule, warning.message
                ));
            }
            if warnings.is_empty() {
                super::print_out(&format!("{}: no warnings\n", file.display()));
                Ok(ExitCode::Success)
            } else {
                super::print_out(&format!(
                    "{}\n",
                    crate::base::counted(warnings.len(), "warning")
                ));
                Ok(ExitCode::TaskFailed)
            }
        }
    }
}
