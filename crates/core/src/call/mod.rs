//! One tool call from `tool_use` to its decision: `PreparedCall` parses and validates the
//! input once and carries the facts every later stage reads (scheduling, the gate, the
//! classifier's proposal); `decide` makes the call's one decision, a `Resolution` naming who
//! answered; `unreached` answers every call that never gets that far (no such tool, an
//! invalid input, a sub-agent too many, a refused call repeated). Runs no tool and records
//! nothing: the loop does.

mod decide;
mod refusals;
mod resolution;
mod scope;
#[cfg(test)]
mod tests;
mod unreached;

pub use decide::{Classifier, ClassifierFuture, ClassifierRuling, Decider, NoHooks, PreToolUse};
pub use refusals::Refusals;
pub use resolution::{Answerer, Awaited, Resolution};
pub use unreached::{EarlyAnswer, SubagentCap, Unreached, prepare, refused_at_pool};

use std::sync::Arc;

use serde_json::Value;

use crate::bash::BashAnalysis;
use crate::classifier::{Action, narrowest_rules};
use crate::ledger::{Allowance, GitWrites};
use crate::policy::{
    AllowBasis, GatedCall, Layer, PermissionContext, PermissionDecision, SelfTestAnswer, Step,
    ToolCheck, ToolName,
};
use crate::tools::{InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput};

/// Whether a call may run beside others (S6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Concurrency-safe: may run with other safe calls.
    Shared,
    /// Runs alone.
    Exclusive,
}

/// How the scheduler treats a call: beside others or alone, and what an interrupt does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduling {
    pub concurrency: Concurrency,
    pub interrupt: InterruptBehavior,
}

/// A call whose input its tool has parsed and validated, once. Every stage after the model's
/// response reads this value: nothing parses the input again, and a Bash command's analysis
/// under the run's rules is made once and read by the gate, auto's fast path, the read-only
/// proof, `check --explain` and the classifier's proposal.
pub struct PreparedCall {
    tool: Arc<dyn Tool>,
    name: ToolName,
    /// The input as the model (or a rewriting hook) sent it: hooks and the transcript see this.
    raw: Value,
    input: Box<dyn ToolInput>,
}

impl PreparedCall {
    /// `Err` says what is wrong with the input, for the model.
    pub fn prepare(tool: Arc<dyn Tool>, raw: Value) -> Result<PreparedCall, ToolError> {
        let input = tool.prepare(&raw)?;
        Ok(PreparedCall {
            name: tool.name(),
            tool,
            raw,
            input,
        })
    }

    pub fn name(&self) -> &ToolName {
        &self.name
    }

    pub fn raw_input(&self) -> &Value {
        &self.raw
    }

    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// Judged under the run's rules and workspace, so a Bash command's one analysis answers.
    pub fn scheduling(&self, ctx: &PermissionContext) -> Scheduling {
        Scheduling {
            concurrency: if self.input.is_concurrency_safe(ctx) {
                Concurrency::Shared
            } else {
                Concurrency::Exclusive
            },
            interrupt: self.tool.interrupt_behavior(),
        }
    }

    /// Past this many characters a result is offloaded to a file (S8).
    pub fn max_result_chars(&self) -> usize {
        self.tool.max_result_chars()
    }

    /// The tool's own check in detail, for `check --explain`.
    pub fn explain_permissions(&self, ctx: &PermissionContext) -> Vec<String> {
        self.input.explain_permissions(ctx)
    }

    /// Set for a call the loop runs as a sub-agent (Agent, an agent-mode Skill).
    pub fn delegation(&self) -> Option<&crate::tools::Delegation> {
        self.input.delegation()
    }

    pub fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        self.input.run(ctx)
    }

    /// The result of this call when the scheduler ends it before `run` returned.
    pub fn stopped(&self, reason: String) -> ToolError {
        self.input.stopped(reason)
    }

    /// The narrowest allow rules that would let this call through, for a classifier's
    /// denial: a Bash command's are read from the analysis its gate made under `ctx`.
    pub fn proposed_rules(&self, ctx: &PermissionContext) -> Vec<String> {
        let action = Action {
            tool: self.name.to_string(),
            input: self.raw.clone(),
        };
        let analysis: Option<Arc<BashAnalysis>> = self.input.bash_analysis(ctx);
        narrowest_rules(&action, ctx.workspace, analysis.as_deref())
    }

    /// What this call would touch if run, for the person who answers it parked: a Bash
    /// command's analysed writes and reads (and what the analysis could not name), else the
    /// paths the tool's own check names (a Write's or Edit's file) or, for a tool that only
    /// reads, the path its input gives.
    pub fn would(&self, ctx: &PermissionContext) -> crate::approval::Would {
        if let Some(analysis) = self.input.bash_analysis(ctx) {
            let mut writes = analysis.writes.clone();
            writes.extend(analysis.named_writes.iter().cloned());
            return crate::approval::Would {
                writes,
                reads: analysis
                    .reads
                    .iter()
                    .map(|read| read.path.clone())
                    .collect(),
                unknown: analysis
                    .unseen_writes
                    .iter()
                    .chain(&analysis.link_escapes)
                    .cloned()
                    .collect(),
            };
        }
        if self.input.is_read_only(ctx) {
            let path = ["file_path", "path"]
                .iter()
                .find_map(|key| self.raw.get(key).and_then(Value::as_str))
                .map(|path| ctx.workspace.workdir.join(path));
            return crate::approval::Would {
                reads: path.into_iter().collect(),
                ..Default::default()
            };
        }
        crate::approval::Would {
            writes: self.input.allowed_effects(ctx, true).paths,
            ..Default::default()
        }
    }

    /// What this call, allowed by `by` on `basis`, may change (the effect ledger's bound):
    /// nothing after the read-only proof; what the tool's own check named when it allowed
    /// the call; the tool's reach when a rule, the mode, a hook or the classifier did.
    pub fn allowed_effects(
        &self,
        by: Answerer,
        basis: AllowBasis,
        ctx: &PermissionContext,
    ) -> Allowance {
        let allowed = self
            .input
            .allowed_effects(ctx, by == Answerer::Gate(Step::ToolCheck));
        match basis {
            AllowBasis::ReadOnlyProof => Allowance::nothing(allowed.git.min(GitWrites::Index)),
            AllowBasis::Granted => allowed,
        }
    }

    /// What `decision` (an allow of this call by `by`) rested on: the read-only proof only
    /// when the tool's own check had the last word, citing no rule, and that check's allow
    /// was the proof's.
    fn allow_basis(
        &self,
        by: Answerer,
        decision: &PermissionDecision,
        ctx: &PermissionContext,
    ) -> AllowBasis {
        let by_check = by == Answerer::Gate(Step::ToolCheck)
            && decision.layer == Layer::Tool
            && decision.rule.is_none()
            && decision.updated_input.is_none();
        if by_check && self.input.allowed_by_read_only_proof(ctx) {
            AllowBasis::ReadOnlyProof
        } else {
            AllowBasis::Granted
        }
    }
}

impl GatedCall for PreparedCall {
    fn tool_name(&self) -> &ToolName {
        &self.name
    }

    fn is_read_only(&self, ctx: &PermissionContext) -> bool {
        self.input.is_read_only(ctx)
    }

    fn requires_user_interaction(&self) -> bool {
        self.tool.requires_user_interaction()
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        self.input.check_permissions(ctx)
    }
}

/// How the policy alone answers a self-test's call, over the built-in tools and MCP names
/// as the gate sees them without their server (`policy::AnswerForTest`): `Err` when there is
/// no such tool or the tool rejects the input.
pub fn self_test_answer(
    name: &ToolName,
    input: &Value,
    ctx: &PermissionContext,
) -> Result<SelfTestAnswer, String> {
    let tool = crate::tools::builtin(name)
        .or_else(|| crate::mcp::stand_in(name))
        .ok_or_else(|| format!("tollgate has no tool `{name}`"))?;
    let call = PreparedCall::prepare(tool, input.clone()).map_err(|err| err.to_string())?;
    Ok(match Decider::headless(*ctx).decide_now(call) {
        Resolution::Allowed { decision, .. } => SelfTestAnswer::Allowed(decision),
        Resolution::Refused {
            by: Answerer::Mode(_),
            decision,
            ..
        }
        | Resolution::Parked { decision, .. } => SelfTestAnswer::Asked(decision),
        Resolution::Refused { decision, .. } => SelfTestAnswer::Denied(decision),
    })
}
