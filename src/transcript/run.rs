//! What a finished run tells the reports and the CLI: its refusals, its checks and the
//! summary the verdict is drawn from. Recorded facts only; the loop fills them in.

use std::path::PathBuf;

use serde_json::Value;

use super::{CheckOutcome, ModelSummary, Outcome, RunCounts};
use crate::classifier::ProposedRule;
use crate::exit::ExitCode;
use crate::policy::{PermissionDecision, PermissionMode, ToolName};
use crate::sandbox::{ProxyConnection, ReadOnlyStatus, SandboxStatus};
use crate::task::{Check, FailOnSet};
use crate::tools::Todo;

/// A refused call, as reports list it.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub id: String,
    pub tool: ToolName,
    pub input: Value,
    pub decision: PermissionDecision,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CheckRecord {
    pub check: Check,
    /// 1 for the first run of the check; retries count up.
    pub attempt: u32,
    pub outcome: CheckOutcome,
}

/// What a finished run tells the reports and the CLI.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run_id: String,
    pub task_name: String,
    pub model: ModelSummary,
    pub mode: PermissionMode,
    pub outcome: Outcome,
    pub exit_code: ExitCode,
    pub counts: RunCounts,
    /// Calls per tool name, in first-call order.
    pub calls_by_tool: Vec<(ToolName, u32)>,
    pub denials: Vec<Denial>,
    pub checks: Vec<CheckRecord>,
    pub final_message: Option<String>,
    pub error: Option<String>,
    /// Agent and classifier together; `None` when a model's price is unknown.
    pub total_cost_usd: Option<f64>,
    /// The classifier's share (auto mode with a classifier only).
    pub classifier_cost_usd: Option<f64>,
    /// Allow rules the classifier's denials propose (also in `proposed-rules.yaml`).
    pub proposed_rules: Vec<ProposedRule>,
    pub duration_ms: u64,
    pub transcript: PathBuf,
    pub fail_on: FailOnSet,
    pub task_file: PathBuf,
    pub workdir: PathBuf,
    /// What the sandbox enforced, when the policy turned it on.
    pub sandbox: Option<SandboxStatus>,
    /// Whether commands allowed by a read-only proof ran in the kernel's read-only domain.
    pub read_only_commands: ReadOnlyStatus,
    /// Connections the sandbox's proxy refused.
    pub network_refusals: Vec<ProxyConnection>,
    /// The TodoWrite list as the run left it (S3).
    pub todos: Vec<Todo>,
}

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Success => ExitCode::Success,
            Outcome::ChecksFailed
            | Outcome::MaxTurns
            | Outcome::MaxBudgetUsd
            | Outcome::MaxInputTokens
            | Outcome::MaxOutputTokens
            | Outcome::Timeout
            | Outcome::Refusal
            | Outcome::McpStartFailed => ExitCode::TaskFailed,
            Outcome::DenialLimit | Outcome::PolicyDenied | Outcome::ClassifierDenials => {
                ExitCode::PolicyStop
            }
            Outcome::ProviderError | Outcome::ClassifierUnavailable => ExitCode::ProviderError,
            Outcome::Interrupted => ExitCode::Interrupted,
            Outcome::Terminated => ExitCode::Terminated,
            Outcome::OutputFailed => ExitCode::OutputError,
        }
    }
}
