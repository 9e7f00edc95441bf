//! The JUnit report: a testsuite per task, a testcase for the agent run and one per check,
//! with the run's figures as properties and the denials and final message in system-out.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{input_summary, serde_name};
use crate::transcript::Outcome;
use crate::transcript::RunReport;

/// `reported`, or `estimated (N of M requests)` when some requests came without usage.
pub fn usage_basis(counts: &crate::transcript::RunCounts) -> String {
    match counts.estimated_requests {
        0 => "reported".to_string(),
        n => format!("estimated ({n} of {} requests)", counts.turns.max(n)),
    }
}

/// The classifier's [`usage_basis`]: `reported`, or `estimated (N of M calls)`.
pub fn classifier_usage_basis(counts: &crate::transcript::ClassifierCounts) -> String {
    match counts.estimated_calls {
        0 => "reported".to_string(),
        n => format!("estimated ({n} of {} calls)", counts.calls.max(n)),
    }
}

pub fn junit_xml(report: &RunReport) -> Result<String, quick_junit::SerializeError> {
    let mut suite = TestSuite::new(report.task_name.as_str());
    suite.set_time(Duration::from_millis(report.duration_ms));
    let counts = &report.counts;
    let properties = [
        ("run_id", report.run_id.clone()),
        ("outcome", serde_name(&report.outcome)),
        ("exit_code", report.exit_code.code().to_string()),
        ("provider", report.model.provider.clone()),
        ("model", report.model.name.clone()),
        ("mode", report.mode.to_string()),
        ("turns", counts.turns.to_string()),
        ("tool_calls", counts.tool_calls.to_string()),
        ("tool_errors", counts.tool_errors.to_string()),
        ("denials", counts.denials.to_string()),
        ("input_tokens", counts.usage.input_tokens.to_string()),
        ("output_tokens", counts.usage.output_tokens.to_string()),
        (
            "cache_creation_input_tokens",
            counts.usage.cache_creation_input_tokens.to_string(),
        ),
        (
            "cache_read_input_tokens",
            counts.usage.cache_read_input_tokens.to_string(),
        ),
        // Empty when the model's price is unknown, rather than a misleading 0.
        (
            "total_cost_usd",
            report
                .total_cost_usd
                .map(|cost| format!("{cost:.6}"))
                .unwrap_or_default(),
        ),
    ];
    suite.add_properties(
        properties
            .into_iter()
            .map(|(name, value)| Property::new(name, value)),
    );
    // Issue 7's properties, kept apart from the list above so other additions merge cleanly.
    suite.add_property(Property::new("fail_on", report.fail_on.to_string()));
    // The tokens and the cost above are estimates for requests the API sent no usage for.
    suite.add_property(Property::new("usage", usage_basis(counts)));
    suite.add_properties(
        counts
            .denials_by_layer
            .by_name()
            .into_iter()
            .map(|(layer, count)| Property::new(format!("denials_{layer}"), count.to_string())),
    );
    // Auto mode's classifier (issue 13), only when it reviewed something.
    let judge = &counts.classifier;
    if judge.reviews > 0 {
        suite.add_properties(
            [
                ("classifier_reviews", judge.reviews),
                ("classifier_allows", judge.allows),
                ("classifier_denies", judge.denies),
                ("classifier_errors", judge.errors),
                ("classifier_calls", judge.calls),
                ("classifier_cache_hits", judge.cache_hits),
            ]
            .map(|(name, count)| Property::new(name, count.to_string())),
        );
        suite.add_property(Property::new(
            "classifier_usage",
            classifier_usage_basis(judge),
        ));
    }
    if let Some(warning) = &report.model.price_warning {
        suite.add_property(Property::new("price_warning", warning.as_str()));
    }

    let agent_status = match report.outcome {
        Outcome::Success | Outcome::ChecksFailed => TestCaseStatus::success(),
        Outcome::PolicyDenied => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_type(serde_name(&report.outcome));
            status.set_message(format!(
                "{} tool call(s) refused by the permission policy (fail_on: {})",
                report.denials.len(),
                report.fail_on
            ));
            status
        }
        other => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_type(serde_name(&other));
            status.set_message(report.error.clone().unwrap_or_else(|| serde_name(&other)));
            status
        }
    };
    let mut agent = TestCase::new("agent run", agent_status);
    agent.set_classname(report.task_name.as_str());
    if let Some(message) = &report.final_message {
        agent.set_system_out(message.as_str());
    }
    suite.add_test_case(agent);

    for record in &report.checks {
        let outcome = &record.outcome;
        let status = if outcome.passed {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_type("check_failed");
            status.set_message(match outcome.exit_code {
                Some(code) => format!("exit code {code}, expected {}", outcome.expect_exit),
                None => format!(
                    "did not exit by itself, expected exit code {}",
                    outcome.expect_exit
                ),
            });
            status
        };
        // Each attempt of a retried check is a testcase of its own.
        let name = if record.check.retry.max_attempts > 1 {
            format!("check: {} (attempt {})", record.check.name, record.attempt)
        } else {
            format!("check: {}", record.check.name)
        };
        let mut case = TestCase::new(name, status);
        case.set_classname(report.task_name.as_str());
        case.set_time(Duration::from_millis(outcome.duration_ms));
        case.set_system_out(format!("$ {}\n{}", record.check.run, outcome.output));
        suite.add_test_case(case);
    }

    let mut system_out = String::new();
    if let Some(message) = &report.final_message {
        system_out.push_str(&format!("Final message:\n{message}\n"));
    }
    if !report.denials.is_empty() {
        system_out.push_str("\nDenied calls:\n");
        for denial in &report.denials {
            system_out.push_str(&format!(
                "- {} {} [step {}, {}]: {}\n",
                denial.tool,
                input_summary(&denial.tool, &denial.input),
                serde_name(&denial.decision.step),
                serde_name(&denial.decision.layer),
                denial.decision.reason
            ));
        }
    }
    if !report.todos.is_empty() {
        system_out.push_str("\nTodo list:\n");
        system_out.push_str(&super::todo_lines(&report.todos));
    }
    if !system_out.is_empty() {
        suite.set_system_out(system_out);
    }

    let mut junit = Report::new("tollgate");
    junit.set_time(Duration::from_millis(report.duration_ms));
    junit.add_test_suite(suite);
    // quick-junit drops C0 controls but keeps U+FFFE/U+FFFF, which XML 1.0 forbids too; the
    // markup itself holds none, so filtering the document only touches the content.
    Ok(crate::neutral::xml_text(&junit.to_string()?))
}
