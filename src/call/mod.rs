//! One tool call from `tool_use` to the decision: `PreparedCall` parses and validates the
//! input once and carries the facts every later stage reads (scheduling, the gate, approval);
//! `approval` resolves the gate's asks. Runs no tool and records nothing: the loop does.

pub mod approval;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

use crate::policy::{
    AllowBasis, GatedCall, Layer, PermissionContext, PermissionDecision, Step, ToolCheck, ToolName,
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
/// response reads this value: nothing parses the input or analyses a command again.
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

    pub fn scheduling(&self) -> Scheduling {
        Scheduling {
            concurrency: if self.input.is_concurrency_safe() {
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

    /// What `decision` (an allow of this call) rested on: the read-only proof only when the
    /// tool's own check had the last word, citing no rule, and that check's allow was the
    /// proof's.
    pub fn allow_basis(
        &self,
        decision: &PermissionDecision,
        ctx: &PermissionContext,
    ) -> AllowBasis {
        let by_check = decision.is_allow()
            && decision.step == Step::ToolCheck
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

    fn is_read_only(&self) -> bool {
        self.input.is_read_only()
    }

    fn requires_user_interaction(&self) -> bool {
        self.tool.requires_user_interaction()
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        self.input.check_permissions(ctx)
    }
}

/// A policy self-test's call, over the built-in tools and MCP names as the gate sees them
/// without their server (`policy::PrepareForTest`).
pub fn prepare_for_self_test(name: &ToolName, input: &Value) -> Result<Box<dyn GatedCall>, String> {
    let tool = crate::tools::builtin(name)
        .or_else(|| crate::mcp::stand_in(name))
        .ok_or_else(|| format!("tollgate has no tool `{name}`"))?;
    let call = PreparedCall::prepare(tool, input.clone()).map_err(|err| err.to_string())?;
    Ok(Box::new(call))
}
