//! What a finished run tells the reports and the CLI: its refusals, its checks and the
//! summary the verdict is drawn from. Recorded facts only; the loop fills them in.

use std::path::PathBuf;

use serde_json::Value;

use super::{CheckOutcome, ModelSummary, Outcome, RunCounts};
use crate::classifier::ProposedRule;
use crate::exit::ExitCode;
use crate::ledger::{CallEffects, LedgerConfig};
use crate::policy::{PermissionDecision, PermissionMode, ToolName};
use crate::sandbox::{ProxyConnection, ReadOnlyStatus, SandboxStatus};
use crate::task::{Check, FailOnSet};
use crate::tools::Todo;

/// A call whose effects exceeded its verdict, as reports list it; for calls run together,
/// the first of them, its `effects` naming the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectExcess {
    pub id: String,
    pub tool: ToolName,
    pub input: Value,
    pub effects: CallEffects,
}

/// What the effect ledger measured over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EffectReport {
    /// What it measured; `None` when it was off.
    pub config: Option<LedgerConfig>,
    /// Calls measured, and of those the calls that changed anything.
    pub measured: u32,
    pub changed: u32,
    pub exceeded: Vec<EffectExcess>,
}

impl EffectReport {
    /// Counts one call's measure; a batch's excess is listed once, with its first call.
    pub fn tally(&mut self, id: &str, tool: &ToolName, input: &Value, effects: &CallEffects) {
        self.measured += 1;
        if !effects.changes.is_empty() {
            self.changed += 1;
        }
        let first = effects.batch.first().is_none_or(|first| first == id);
        if effects.exceeded() && first {
            self.exceeded.push(EffectExcess {
                id: id.to_string(),
                tool: tool.clone(),
                input: input.clone(),
                effects: effects.clone(),
            });
        }
    }

    /// The totals `run_finished` records; `None` when the ledger was off.
    pub fn totals(&self) -> Option<super::EffectTotals> {
        Some(super::EffectTotals {
            scope: self.config?.scope,
            measured: self.measured,
            changed: self.changed,
            exceeded: self
                .exceeded
                .iter()
                .map(|excess| excess.id.clone())
                .collect(),
        })
    }
}

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
    /// What the run says beside its outcome (an empty final answer), in words.
    pub warnings: Vec<String>,
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
    /// Under `output_schema`: the final answer's JSON value, once one was valid.
    pub structured_output: Option<Value>,
    /// What the run went without for want of an operator's approval.
    pub held_back: Vec<crate::settings::HeldBack>,
    /// What the effect ledger measured, and the calls that did more than allowed.
    pub effects: EffectReport,
    /// The calls parked for a person (outcome `parked`), as `pending.json` lists them.
    pub parked: Vec<crate::approval::ParkedCall>,
}

impl Outcome {
    pub const ALL: [Outcome; 23] = [
        Outcome::Success,
        Outcome::ChecksFailed,
        Outcome::MaxTurns,
        Outcome::MaxBudgetUsd,
        Outcome::MaxInputTokens,
        Outcome::MaxOutputTokens,
        Outcome::Timeout,
        Outcome::Refusal,
        Outcome::DenialLimit,
        Outcome::PolicyDenied,
        Outcome::EffectsExceeded,
        Outcome::ClassifierDenials,
        Outcome::ClassifierUnavailable,
        Outcome::ProviderError,
        Outcome::McpStartFailed,
        Outcome::HookStopped,
        Outcome::Interrupted,
        Outcome::Terminated,
        Outcome::OutputFailed,
        Outcome::StructuredOutputInvalid,
        Outcome::ContextOverflow,
        Outcome::EmptyAnswer,
        Outcome::Parked,
    ];

    /// The name the transcript, the JSON result and the action's `outcome` output use.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::ChecksFailed => "checks_failed",
            Outcome::MaxTurns => "max_turns",
            Outcome::MaxBudgetUsd => "max_budget_usd",
            Outcome::MaxInputTokens => "max_input_tokens",
            Outcome::MaxOutputTokens => "max_output_tokens",
            Outcome::Timeout => "timeout",
            Outcome::Refusal => "refusal",
            Outcome::DenialLimit => "denial_limit",
            Outcome::PolicyDenied => "policy_denied",
            Outcome::EffectsExceeded => "effects_exceeded",
            Outcome::ClassifierDenials => "classifier_denials",
            Outcome::ClassifierUnavailable => "classifier_unavailable",
            Outcome::ProviderError => "provider_error",
            Outcome::McpStartFailed => "mcp_start_failed",
            Outcome::HookStopped => "hook_stopped",
            Outcome::Interrupted => "interrupted",
            Outcome::Terminated => "terminated",
            Outcome::OutputFailed => "output_failed",
            Outcome::StructuredOutputInvalid => "structured_output_invalid",
            Outcome::ContextOverflow => "context_overflow",
            Outcome::EmptyAnswer => "empty_answer",
            Outcome::Parked => "parked",
        }
    }

    /// What the outcome means, for the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            Outcome::Success => "the model finished and every check passed",
            Outcome::ChecksFailed => "the model finished but a check failed (after its retries)",
            Outcome::MaxTurns => "`limits.max_turns` stopped the loop",
            Outcome::MaxBudgetUsd => {
                "`limits.max_cost_usd` stopped the loop before a request that could pass it"
            }
            Outcome::MaxInputTokens => "`limits.max_input_tokens` stopped the loop",
            Outcome::MaxOutputTokens => "`limits.max_output_tokens` stopped the loop",
            Outcome::Timeout => "`limits.timeout`, the run's wall clock, ran out",
            Outcome::Refusal => {
                "the model declined the task (stop reason `refusal` or a content filter)"
            }
            Outcome::DenialLimit => {
                "`limits.max_denials` or `limits.max_consecutive_denials` stopped the run"
            }
            Outcome::PolicyDenied => {
                "a tool call was refused and `fail_on` counts that kind of refusal"
            }
            Outcome::EffectsExceeded => {
                "a call changed more than its verdict allowed (a read-only call that changed \
anything, a write outside the paths its decision named, a guarded path changed), or its \
effects could not be measured, and `fail_on` has `effect`"
            }
            Outcome::ClassifierDenials => {
                "auto mode: `limits.max_classifier_denials` or \
`limits.max_consecutive_classifier_denials` stopped the run"
            }
            Outcome::ClassifierUnavailable => {
                "auto mode: the classifier could not be reached after the provider's retries \
(or its budget was spent)"
            }
            Outcome::ProviderError => "the provider failed after its retries",
            Outcome::McpStartFailed => {
                "an MCP server did not start (failed, or the task's was held back for an \
operator's approval) and `fail_on` has `mcp_start`: no model call was made"
            }
            Outcome::HookStopped => {
                "a hook stopped the run (`continue: false`, a blocked prompt, a Stop hook past \
its continuations, or a failing hook under `on_error: deny`)"
            }
            Outcome::Interrupted => "SIGINT",
            Outcome::Terminated => "SIGTERM",
            Outcome::OutputFailed => {
                "a file of the run's record (an offloaded result) could not be written"
            }
            Outcome::StructuredOutputInvalid => {
                "`output_schema`: no final answer was valid JSON against the schema within \
`output_schema_attempts` (each invalid one was fed back with the validator's errors)"
            }
            Outcome::ContextOverflow => {
                "the provider refused the history as too long for the model's context, and \
compaction could not make it fit: it was off, failed, was refused again after compacting, or \
its attempts for the run were spent (see docs/reliability.md)"
            }
            Outcome::EmptyAnswer => {
                "the model finished with an empty or whitespace-only final answer and \
`fail_on` has `empty_answer` (the default of a prompt run without `--output-schema`)"
            }
            Outcome::Parked => {
                "calls were parked for a person (a `defer:` rule, `--defer-asks`, a PreToolUse \
hook's `defer`): the run stopped once the turn's other calls had their results, listing them \
in `pending.json`; `tollgate approve` answers them and `tollgate run --resume` goes on"
            }
        }
    }

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
            | Outcome::McpStartFailed
            | Outcome::HookStopped
            | Outcome::StructuredOutputInvalid
            | Outcome::EmptyAnswer => ExitCode::TaskFailed,
            Outcome::DenialLimit
            | Outcome::PolicyDenied
            | Outcome::EffectsExceeded
            | Outcome::ClassifierDenials => ExitCode::PolicyStop,
            Outcome::ProviderError | Outcome::ClassifierUnavailable | Outcome::ContextOverflow => {
                ExitCode::ProviderError
            }
            Outcome::Interrupted => ExitCode::Interrupted,
            Outcome::Terminated => ExitCode::Terminated,
            Outcome::OutputFailed => ExitCode::OutputError,
            Outcome::Parked => ExitCode::Parked,
        }
    }
}
