//! Policy self-tests: the decisions a policy's author wrote down (`tests:`), checked against
//! the gate so a policy that drifts from its intent refuses to start.

use std::sync::Arc;

use super::decision::{Decision, PermissionDecision};
use super::file::{Policy, PolicyTest};
use super::gate::decide;
use super::rule_set::RuleSet;
use super::workspace::Workspace;
use super::{PermissionContext, PermissionMode};
use crate::config::serde_name;
use crate::tools::Tool;

#[derive(Debug, Clone, PartialEq)]
pub struct SelfTestOutcome {
    pub test: PolicyTest,
    /// What the gate said; `None` when the test names no tool tollgate has, or gives an
    /// input the tool rejects.
    pub got: Result<PermissionDecision, String>,
    pub passed: bool,
}

impl SelfTestOutcome {
    /// `ask` for a decision that came from an unanswered ask, else the decision.
    pub fn got_label(&self) -> String {
        match &self.got {
            Ok(decision) if decision.asked && decision.decision == Decision::Deny => "ask".into(),
            Ok(decision) => serde_name(&decision.decision),
            Err(problem) => format!("error ({problem})"),
        }
    }
}

/// Runs `policy`'s tests against the policy on its own. `expect: ask` means the pipeline
/// ended in an ask (which a headless run then denies).
pub fn run_self_tests(
    policy: &Policy,
    workspace: &Workspace,
    tools: &dyn Fn(&str) -> Option<Arc<dyn Tool>>,
) -> Vec<SelfTestOutcome> {
    let rules = RuleSet::from_policy(policy);
    policy
        .tests
        .iter()
        .map(|test| {
            let mode = test
                .mode
                .or(policy.default_mode)
                .unwrap_or(PermissionMode::DontAsk);
            // The policy's own sandbox, as it asks for it: the run's preflight is what
            // refuses to start where the kernel cannot enforce it.
            let ctx = PermissionContext {
                mode,
                rules: &rules,
                workspace,
                auto_allow_bash: policy
                    .sandbox
                    .as_ref()
                    .is_some_and(|sandbox| sandbox.enabled && sandbox.auto_allow_bash),
            };
            let got = match tools(&test.tool) {
                None => Err(format!("tollgate has no tool `{}`", test.tool)),
                Some(tool) => match tool.validate_input(&test.input) {
                    Err(err) => Err(err.0),
                    Ok(()) => Ok(decide(tool.as_ref(), &test.input, &ctx)),
                },
            };
            let passed = match &got {
                Ok(decision) => match test.expect {
                    Decision::Ask => decision.asked && decision.decision == Decision::Deny,
                    Decision::Deny => decision.decision == Decision::Deny && !decision.asked,
                    Decision::Allow => decision.decision == Decision::Allow,
                },
                Err(_) => false,
            };
            SelfTestOutcome {
                test: test.clone(),
                got,
                passed,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::policy::{PolicyOrigin, ToolName};
    use crate::tools::builtin;

    #[test]
    fn self_tests_pass_and_fail_with_the_step_that_decided() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['Bash(npm test:*)']\n  deny: ['Bash(rm:*)']\n  ask: ['Bash(git push:*)']\ntests:\n  - {tool: Bash, input: {command: npm test}, expect: allow}\n  - {tool: Bash, input: {command: rm -rf /}, expect: deny}\n  - {tool: Bash, input: {command: git push}, expect: ask}\n  - {tool: Bash, input: {command: npm test}, expect: deny, name: wrong}\n  - {tool: Nope, expect: allow}\n",
            PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let lookup = |name: &str| ToolName::parse(name).as_ref().and_then(builtin);
        let outcomes = run_self_tests(&policy, &workspace, &lookup);
        let passed: Vec<bool> = outcomes.iter().map(|o| o.passed).collect();
        assert_eq!(passed, [true, true, true, false, false]);
        assert_eq!(outcomes[3].test.name, "wrong");
        assert_eq!(outcomes[3].got_label(), "allow");
        assert_eq!(outcomes[2].got_label(), "ask");
        assert!(outcomes[4].got_label().contains("no tool `Nope`"));
    }
}
