//! Reports a CI system reads after the run: JUnit XML, SARIF, the GitHub step summary,
//! outputs and annotations (and the text summary on stdout). They read a `RunReport`; the
//! caller redacts what they return before writing it.

pub mod github;
mod junit;
mod sarif;
mod summary;

pub use junit::junit_xml;
pub use sarif::{Flip, replay_sarif, sarif_json};
pub use summary::text_summary;

use serde_json::Value;

use crate::policy::ToolName;

/// One line describing a call's input, for reports: the command for Bash, the path for file
/// tools, compact JSON otherwise.
pub fn input_summary(tool: &ToolName, input: &Value) -> String {
    let field = match tool {
        ToolName::Bash => "command",
        ToolName::Read | ToolName::Write | ToolName::Edit => "file_path",
        ToolName::Glob | ToolName::Grep => "pattern",
        _ => "",
    };
    let text = input
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string());
    let one_line = text.replace('\n', "⏎");
    match one_line.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &one_line[..end]),
        None => one_line,
    }
}

pub(crate) use crate::config::serde_name;

/// A finished run with one refused call and a check that failed twice, for the renderers'
/// tests.
#[cfg(test)]
pub(crate) fn sample_report() -> crate::transcript::RunReport {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::config::SourceLocation;
    use crate::exit::ExitCode;
    use crate::policy::{Decision, Layer, PermissionDecision, PermissionMode, RuleRef, Step};
    use crate::task::{Check, FailOnSet, Retry};
    use crate::transcript::{CheckOutcome, ModelSummary, Outcome, RunCounts};
    use crate::transcript::{CheckRecord, Denial, RunReport};

    let check = Check {
        name: "tests".into(),
        run: "cargo test".into(),
        expect_exit: 0,
        timeout: Duration::from_secs(60),
        line: 12,
        retry: Retry {
            max_attempts: 2,
            feed_back: true,
        },
    };
    let failed = |attempt| CheckRecord {
        check: check.clone(),
        attempt,
        outcome: CheckOutcome {
            exit_code: Some(101),
            expect_exit: 0,
            passed: false,
            output: "test a ... FAILED\n50% | done".into(),
            duration_ms: 5,
        },
    };
    let mut effects = crate::ledger::CallEffects {
        attribution: crate::ledger::Attribution::Call,
        batch: Vec::new(),
        allowed: crate::ledger::Allowance::named(Vec::new(), crate::ledger::GitWrites::None),
        changes: Vec::new(),
        incomplete: None,
    };
    effects.add_restored(&[crate::sandbox::Violation {
        path: PathBuf::from(".git/hooks/pre-commit"),
        change: crate::sandbox::Change::Created,
        unrestored: None,
    }]);
    RunReport {
        parked: Vec::new(),
        effects: crate::transcript::EffectReport {
            config: Some(crate::ledger::LedgerConfig::default()),
            measured: 5,
            changed: 1,
            exceeded: vec![crate::transcript::EffectExcess {
                id: "toolu_2".into(),
                tool: ToolName::Bash,
                input: serde_json::json!({"command": "./gen.sh"}),
                effects,
            }],
        },
        sandbox: None,
        read_only_commands: crate::sandbox::read_only_preflight(
            crate::sandbox::ReadOnlyCommands::Off,
        ),
        network_refusals: Vec::new(),
        run_id: "r1".into(),
        task_name: "fix|tests".into(),
        model: ModelSummary {
            provider: "scripted".into(),
            name: "m".into(),
            price: None,
            price_warning: None,
        },
        mode: PermissionMode::DontAsk,
        outcome: Outcome::PolicyDenied,
        exit_code: ExitCode::PolicyStop,
        counts: RunCounts {
            turns: 4,
            tool_calls: 6,
            denials: 1,
            ..RunCounts::default()
        },
        calls_by_tool: vec![(ToolName::Bash, 6)],
        total_cost_usd: None,
        classifier_cost_usd: None,
        warnings: Vec::new(),
        proposed_rules: Vec::new(),
        denials: vec![Denial {
            id: "toolu_1".into(),
            tool: ToolName::Bash,
            input: serde_json::json!({"command": "rm -rf build"}),
            decision: PermissionDecision {
                decision: Decision::Deny,
                step: Step::ToolDeny,
                layer: Layer::Rule,
                rule: Some(RuleRef {
                    rule: "Bash(rm:*)".into(),
                    source: SourceLocation {
                        file: PathBuf::from("/repo/policies/ci.yaml"),
                        line: 14,
                    },
                    headless: crate::policy::HeadlessAnswer::Deny,
                }),
                reason: "`rm -rf build` is denied by rule Bash(rm:*)".into(),
                updated_input: None,
                asked: false,
            },
        }],
        checks: vec![failed(1), failed(2)],
        final_message: Some("Could not <clean> up.".into()),
        error: None,
        duration_ms: 10,
        transcript: PathBuf::from("/out/transcript.jsonl"),
        fail_on: FailOnSet::task_default(),
        task_file: PathBuf::from("/repo/task.yaml"),
        workdir: PathBuf::from("/repo"),
        todos: Vec::new(),
        structured_output: None,
        held_back: vec![crate::settings::HeldBack {
            required: true,
            ..crate::settings::HeldBack::new(
                crate::settings::HeldKind::McpServer,
                "tracker".into(),
                "/repo/task.yaml".into(),
                crate::settings::ConfigOrigin::Task,
                crate::settings::Approval {
                    reason: "it comes with the repository and no operator's policy approves it"
                        .into(),
                    approve_in: crate::settings::Approver::ManagedOrUser,
                    lines: vec!["enabledMcpjsonServers: [tracker]".into()],
                },
            )
        }],
    }
}

/// The run's final todo list, one `[status] content` a line, for the reports.
pub(crate) fn todo_lines(todos: &[crate::tools::Todo]) -> String {
    todos
        .iter()
        .map(|todo| format!("- [{}] {}\n", todo_status(todo.status), todo.content))
        .collect()
}

/// A todo's status as reports write it.
pub(crate) fn todo_status(status: crate::tools::TodoStatus) -> &'static str {
    match status {
        crate::tools::TodoStatus::Pending => "pending",
        crate::tools::TodoStatus::InProgress => "in_progress",
        crate::tools::TodoStatus::Completed => "completed",
    }
}
