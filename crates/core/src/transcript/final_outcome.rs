//! The final outcome: how a finished run's outcome, denials and `fail_on` become the final outcome
//! and exit code. The precedence between problems is decided here and nowhere else.

use super::Outcome;
use super::{Denial, EffectExcess};
use crate::exit::ExitCode;
use crate::policy::{Layer, PermissionDecision};
use crate::task::{FailOn, FailOnSet};

/// Which `fail_on` kind a refused call is. Exhaustive over layers on purpose: a new layer
/// (the auto-mode classifier) must say whether it is a `classifier_denial`.
pub fn denial_kind(decision: &PermissionDecision) -> FailOn {
    match decision.layer {
        Layer::Classifier => FailOn::ClassifierDenial,
        Layer::Rule
        | Layer::Tool
        | Layer::Guardrail
        | Layer::Interaction
        | Layer::Mode
        | Layer::Hook
        // A person refused a call the model needed: the task did not get what it asked.
        | Layer::Person => FailOn::Denial,
    }
}

/// Whether a problem of this kind fails the run under `fail_on`.
pub fn counts(fail_on: &FailOnSet, kind: FailOn) -> bool {
    fail_on.contains(kind)
}

/// The final outcome and exit code. Precedence, strongest first:
/// 0. an output failure (5): the record is incomplete, so nothing else about it can be
///    trusted (the agent loop sets it over any other ending);
/// 1. an interruption (130/143) and a provider failure (4): the run did not finish, so no
///    other judgement about it can be trusted; a denial limit (`limits.max_denials`, 3), the
///    classifier's denial limits (3) and an unreachable classifier (4) stopped it the same way;
/// 2. a call whose effects exceeded what its decision allowed, when `fail_on` has `effect` (3, outcome
///    `effects_exceeded`): the run did more than it was allowed, whatever else it did;
/// 3. a refused call whose kind is in `fail_on` (3, outcome `policy_denied`): the work the
///    task needed may not have happened, whatever the checks say;
/// 4. a failed check or a limit in `fail_on` (1); a model that finished with an empty
///    final answer (`empty_answer`, as the caller found it), when `fail_on` has `empty_answer` (1);
/// 5. otherwise 0 — a failed check or limit left out of `fail_on` keeps its outcome in the
///    reports but does not fail the job.
pub fn decide(
    outcome: Outcome,
    denials: &[Denial],
    exceeded: &[EffectExcess],
    empty_answer: bool,
    fail_on: &FailOnSet,
) -> (Outcome, ExitCode) {
    match outcome {
        Outcome::OutputFailed
        | Outcome::Interrupted
        | Outcome::Terminated
        | Outcome::ProviderError
        | Outcome::ContextOverflow
        | Outcome::DenialLimit
        | Outcome::PolicyDenied
        | Outcome::ClassifierDenials
        | Outcome::ClassifierUnavailable
        // The model declined the task: nothing else about the run can make it a success.
        | Outcome::Refusal
        // A server the task needed did not start and `fail_on` said that fails it; the
        // model was never asked.
        | Outcome::McpStartFailed
        // A hook said the run ends there, and why.
        | Outcome::HookStopped
        // The answer a step needed does not exist: nothing else can make it a success.
        | Outcome::StructuredOutputInvalid
        // Only this function concludes these.
        | Outcome::EffectsExceeded
        | Outcome::EmptyAnswer
        // The run waits for a person: what it did so far is judged once it goes on.
        | Outcome::Parked => return (outcome, outcome.exit_code()),
        Outcome::Success
        | Outcome::ChecksFailed
        | Outcome::MaxTurns
        | Outcome::MaxBudgetUsd
        | Outcome::MaxInputTokens
        | Outcome::MaxOutputTokens
        | Outcome::Timeout => {}
    }
    if !exceeded.is_empty() && counts(fail_on, FailOn::Effect) {
        return (Outcome::EffectsExceeded, ExitCode::PolicyStop);
    }
    if denials
        .iter()
        .any(|denial| counts(fail_on, denial_kind(&denial.decision)))
    {
        return (Outcome::PolicyDenied, ExitCode::PolicyStop);
    }
    let kind = match outcome {
        Outcome::Success if empty_answer => {
            return if counts(fail_on, FailOn::EmptyAnswer) {
                (Outcome::EmptyAnswer, ExitCode::TaskFailed)
            } else {
                (outcome, ExitCode::Success)
            };
        }
        Outcome::ChecksFailed => FailOn::Check,
        Outcome::MaxTurns
        | Outcome::MaxBudgetUsd
        | Outcome::MaxInputTokens
        | Outcome::MaxOutputTokens
        | Outcome::Timeout => FailOn::Limit,
        _ => return (outcome, outcome.exit_code()),
    };
    if counts(fail_on, kind) {
        (outcome, outcome.exit_code())
    } else {
        (outcome, ExitCode::Success)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{Decision, Step};

    fn denial() -> Denial {
        Denial {
            id: "toolu_1".into(),
            tool: crate::policy::ToolName::Bash,
            input: json!({"command": "rm -rf build"}),
            decision: PermissionDecision {
                decision: Decision::Deny,
                step: Step::ToolDeny,
                layer: Layer::Rule,
                rule: None,
                reason: "denied".into(),
                updated_input: None,
                asked: false,
            },
        }
    }

    /// A call that did more than allowed fails the run under the default `fail_on`, above a
    /// denial and a failed check; left out of `fail_on`, it does not.
    #[test]
    fn an_excess_of_effects_fails_the_run_when_fail_on_counts_it() {
        let excess = EffectExcess {
            id: "toolu_1".into(),
            tool: crate::policy::ToolName::Bash,
            input: json!({"command": "./gen.sh"}),
            effects: crate::ledger::CallEffects {
                attribution: crate::ledger::Attribution::Call,
                batch: Vec::new(),
                allowed: crate::ledger::Allowance::default(),
                changes: Vec::new(),
                incomplete: Some("more than 3 entries".into()),
            },
        };
        let all = FailOnSet::default();
        let checks: FailOnSet = [FailOn::Check, FailOn::Denial].into_iter().collect();
        let exceeded = [excess];
        let denied = [denial()];
        let cases: [(Outcome, &[Denial], &FailOnSet, Outcome, u8); 5] = [
            (Outcome::Success, &[], &all, Outcome::EffectsExceeded, 3),
            (
                Outcome::ChecksFailed,
                &denied,
                &all,
                Outcome::EffectsExceeded,
                3,
            ),
            (Outcome::Success, &[], &checks, Outcome::Success, 0),
            (Outcome::Success, &denied, &checks, Outcome::PolicyDenied, 3),
            (Outcome::ProviderError, &[], &all, Outcome::ProviderError, 4),
        ];
        for (outcome, denials, fail_on, expected, code) in cases {
            let (got, exit) = decide(outcome, denials, &exceeded, false, fail_on);
            assert_eq!(
                (got, exit.code()),
                (expected, code),
                "{outcome:?}, {fail_on}"
            );
        }
    }

    #[test]
    fn precedence_table() {
        let all = FailOnSet::default();
        let only_checks: FailOnSet = [FailOn::Check].into_iter().collect();
        let none = FailOnSet::none();
        let denied = [denial()];
        let mut classified = denial();
        classified.decision.layer = Layer::Classifier;
        let classified = [classified];
        let no_classifier: FailOnSet = [FailOn::Denial, FailOn::Check].into_iter().collect();
        let cases: [(Outcome, &[Denial], &FailOnSet, Outcome, u8); 17] = [
            (
                Outcome::Success,
                &classified,
                &all,
                Outcome::PolicyDenied,
                3,
            ),
            (
                Outcome::Success,
                &classified,
                &no_classifier,
                Outcome::Success,
                0,
            ),
            (
                Outcome::Success,
                &denied,
                &no_classifier,
                Outcome::PolicyDenied,
                3,
            ),
            (
                Outcome::DenialLimit,
                &denied,
                &none,
                Outcome::DenialLimit,
                3,
            ),
            (Outcome::Success, &[], &all, Outcome::Success, 0),
            (Outcome::Success, &denied, &all, Outcome::PolicyDenied, 3),
            (
                Outcome::ChecksFailed,
                &denied,
                &all,
                Outcome::PolicyDenied,
                3,
            ),
            (Outcome::MaxTurns, &denied, &all, Outcome::PolicyDenied, 3),
            (Outcome::Success, &denied, &only_checks, Outcome::Success, 0),
            (
                Outcome::ChecksFailed,
                &denied,
                &only_checks,
                Outcome::ChecksFailed,
                1,
            ),
            (Outcome::MaxTurns, &[], &only_checks, Outcome::MaxTurns, 0),
            (Outcome::MaxTurns, &[], &all, Outcome::MaxTurns, 1),
            (Outcome::ChecksFailed, &[], &none, Outcome::ChecksFailed, 0),
            (
                Outcome::ProviderError,
                &denied,
                &all,
                Outcome::ProviderError,
                4,
            ),
            (
                Outcome::Interrupted,
                &denied,
                &all,
                Outcome::Interrupted,
                130,
            ),
            (Outcome::Terminated, &[], &none, Outcome::Terminated, 143),
            (
                Outcome::OutputFailed,
                &denied,
                &all,
                Outcome::OutputFailed,
                5,
            ),
        ];
        for (outcome, denials, fail_on, expected, code) in cases {
            let (got, exit) = decide(outcome, denials, &[], false, fail_on);
            assert_eq!(
                (got, exit.code()),
                (expected, code),
                "{outcome:?} with {} denials, fail_on {fail_on}",
                denials.len()
            );
        }
    }

    /// An empty final answer fails a finished run when `fail_on` has `empty_answer`, below a
    /// denial and beside nothing else: a failed check keeps its own outcome.
    #[test]
    fn an_empty_answer_fails_the_run_only_when_fail_on_counts_it() {
        let all = FailOnSet::default();
        let task = FailOnSet::task_default();
        let cases: [(Outcome, &[Denial], &FailOnSet, Outcome, u8); 5] = [
            (Outcome::Success, &[], &all, Outcome::EmptyAnswer, 1),
            (Outcome::Success, &[], &task, Outcome::Success, 0),
            (
                Outcome::Success,
                &[denial()],
                &all,
                Outcome::PolicyDenied,
                3,
            ),
            (Outcome::ChecksFailed, &[], &all, Outcome::ChecksFailed, 1),
            (Outcome::MaxTurns, &[], &all, Outcome::MaxTurns, 1),
        ];
        for (outcome, denials, fail_on, expected, code) in cases {
            let (got, exit) = decide(outcome, denials, &[], true, fail_on);
            assert_eq!(
                (got, exit.code()),
                (expected, code),
                "{outcome:?}, {fail_on}"
            );
        }
    }
}
