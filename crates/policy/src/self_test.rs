//! Policy self-tests: the decisions a policy's author wrote down (`tests:`), checked against
//! the policy's own answers so a policy that drifts from its intent refuses to start.

use serde_json::Value;

use super::decision::{Decision, PermissionDecision};
use super::file::{Policy, PolicyTest};
use super::rule_set::RuleSet;
use super::workspace::Workspace;
use super::{PermissionContext, PermissionMode, ToolName};
use crate::config::serde_name;

/// How the policy alone answers a test's tool name and input under a context; `Err` says
/// why there is no call (no such tool, an input the tool rejects). The call layer supplies
/// it: the same decision a run makes, without hooks or a classifier.
pub type AnswerForTest<'a> =
    dyn Fn(&ToolName, &Value, &PermissionContext) -> Result<SelfTestAnswer, String> + 'a;

/// How the policy on its own answered a test's call: headless, with no hook or classifier.
#[derive(Debug, Clone, PartialEq)]
pub enum SelfTestAnswer {
    /// Allowed, by the gate or by auto's fast path.
    Allowed(PermissionDecision),
    Denied(PermissionDecision),
    /// An ask nobody answered (a headless run then denies it, as the decision says).
    Asked(PermissionDecision),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SelfTestOutcome {
    pub test: PolicyTest,
    /// What the policy said; `Err` when the test names no tool tollgate has, or gives an
    /// input the tool rejects.
    pub got: Result<SelfTestAnswer, String>,
    pub passed: bool,
}

impl SelfTestAnswer {
    pub fn decision(&self) -> &PermissionDecision {
        match self {
            SelfTestAnswer::Allowed(decision)
            | SelfTestAnswer::Denied(decision)
            | SelfTestAnswer::Asked(decision) => decision,
        }
    }

    fn kind(&self) -> Decision {
        match self {
            SelfTestAnswer::Allowed(_) => Decision::Allow,
            SelfTestAnswer::Denied(_) => Decision::Deny,
            SelfTestAnswer::Asked(_) => Decision::Ask,
        }
    }
}

impl SelfTestOutcome {
    /// `allow`, `deny` or `ask` (an ask nobody answered), or the error.
    pub fn got_label(&self) -> String {
        match &self.got {
            Ok(answer) => serde_name(&answer.kind()),
            Err(problem) => format!("error ({problem})"),
        }
    }
}

/// Runs `policy`'s tests against the policy on its own. `expect: ask` means the pipeline
/// ended in an ask that neither the mode nor its fast path answered.
pub fn run_self_tests(
    policy: &Policy,
    workspace: &Workspace,
    answer: &AnswerForTest,
) -> Vec<SelfTestOutcome> {
    // Most policies have no tests: building their rule index for nothing would hold a
    // second copy of every rule while the run's own index is built (a 100k-rule policy's
    // run peaked at twice `check`'s memory).
    if policy.tests.is_empty() {
        return Vec::new();
    }
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
                disk: None,
                auto_allow_bash: policy
                    .sandbox
                    .as_ref()
                    .is_some_and(|sandbox| sandbox.enabled && sandbox.auto_allow_bash),
            };
            let got = answer(&test.tool, &test.input, &ctx);
            let passed = got
                .as_ref()
                .is_ok_and(|answer| answer.kind() == test.expect);
            SelfTestOutcome {
                test: test.clone(),
                got,
                passed,
            }
        })
        .collect()
}
