//! The permission gate (S4): the short-circuit pipeline 1a→3 over one call, and plan mode's
//! read-only rule. It answers allow, deny or ask; `call::Decider` resolves an ask.
//! Knows a call only through `GatedCall`, so the policy layer never depends on the tools.
//! Its table-driven tests run through the real call path, in `call::tests`.

use super::decision::{Ask, AskCause, GateDecision, Grounds, Layer, RuleRef, Step, ToolCheck};
use super::rule::RuleKind;
use super::{PermissionContext, PermissionMode, ToolName};

/// What the gate needs to know of a call; the call layer implements it over a prepared call.
pub trait GatedCall {
    fn tool_name(&self) -> &ToolName;
    /// Only reads, under `ctx`'s rules and workspace (plan mode, auto's fast path).
    fn is_read_only(&self, ctx: &PermissionContext) -> bool;
    fn requires_user_interaction(&self) -> bool;
    /// The tool's own check (step 1c) under `ctx`.
    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck;
}

/// One line of `check --explain`: a pipeline step, what it looked at, what it concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceStep {
    pub step: &'static str,
    pub saw: String,
    pub outcome: String,
}

/// Collects trace lines when explaining; costs nothing when not (`check --calls` decides
/// hundreds of thousands of calls).
pub(crate) struct Trace<'a>(pub(crate) Option<&'a mut Vec<TraceStep>>);

impl Trace<'_> {
    pub(crate) fn note(&mut self, step: &'static str, saw: impl FnOnce() -> String, outcome: &str) {
        if let Some(lines) = self.0.as_deref_mut() {
            lines.push(TraceStep {
                step,
                saw: saw(),
                outcome: outcome.to_string(),
            });
        }
    }
}

pub fn decide(call: &dyn GatedCall, ctx: &PermissionContext) -> GateDecision {
    decide_traced(call, ctx, &mut Trace(None))
}

/// Decides and returns every step the pipeline took, for `check --explain`.
pub fn explain(call: &dyn GatedCall, ctx: &PermissionContext) -> (GateDecision, Vec<TraceStep>) {
    let mut lines = Vec::new();
    let decision = decide_traced(call, ctx, &mut Trace(Some(&mut lines)));
    (decision, lines)
}

fn decide_traced(call: &dyn GatedCall, ctx: &PermissionContext, trace: &mut Trace) -> GateDecision {
    match pipeline(call, ctx, trace) {
        GateDecision::Allow {
            grounds,
            updated_input,
        } => enforce_plan(call, ctx, grounds, updated_input, trace),
        other => other,
    }
}

fn rule_text(rule: Option<&RuleRef>) -> String {
    rule.map_or_else(
        || "no rule".to_string(),
        |rule| format!("rule {} at {}", rule.rule, rule.source),
    )
}

fn grounds(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> Grounds {
    Grounds {
        step,
        layer,
        rule,
        reason,
    }
}

fn ask(
    step: Step,
    layer: Layer,
    rule: Option<RuleRef>,
    reason: String,
    immune: bool,
) -> GateDecision {
    GateDecision::Ask(Ask {
        grounds: grounds(step, layer, rule, reason),
        immune,
    })
}

fn allow(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> GateDecision {
    GateDecision::Allow {
        grounds: grounds(step, layer, rule, reason),
        updated_input: None,
    }
}

/// The layer of a tool check's answer: a rule's when it cites one, else the tool's.
fn check_layer(rule: Option<&RuleRef>) -> Layer {
    if rule.is_some() {
        Layer::Rule
    } else {
        Layer::Tool
    }
}

/// Steps 1a→3.
fn pipeline(call: &dyn GatedCall, ctx: &PermissionContext, trace: &mut Trace) -> GateDecision {
    let name = call.tool_name();
    if let Some(rule) = whole_tool_rule(ctx, RuleKind::Deny, name, "1a", trace) {
        let reason = format!("{name} is denied by rule {}", rule.rule);
        return GateDecision::Deny(grounds(
            Step::WholeToolDeny,
            Layer::Rule,
            Some(rule),
            reason,
        ));
    }
    if let Some(rule) = whole_tool_rule(ctx, RuleKind::Ask, name, "1b", trace) {
        let reason = format!("{name} needs approval by rule {}", rule.rule);
        return ask(Step::WholeToolAsk, Layer::Rule, Some(rule), reason, true);
    }
    let check = call.check_permissions(ctx);
    trace.note(
        "1c",
        || format!("{name}'s own check: {}", describe_check(&check)),
        check.kind(),
    );
    let (step, reason) = match tool_check(check, call.requires_user_interaction(), name, trace) {
        Ok(decided) => return decided,
        Err(open) => open,
    };
    let bypass = ctx.mode == PermissionMode::BypassPermissions;
    trace.note(
        "2a",
        || format!("mode is {}", ctx.mode),
        if bypass { "allow" } else { "continue" },
    );
    if bypass {
        return allow(
            Step::Bypass,
            Layer::Mode,
            None,
            "bypassPermissions mode".into(),
        );
    }
    if let Some(rule) = whole_tool_rule(ctx, RuleKind::Allow, name, "2b", trace) {
        let reason = format!("{name} is allowed by rule {}", rule.rule);
        return allow(Step::WholeToolAllow, Layer::Rule, Some(rule), reason);
    }
    if ctx.auto_allow_bash && *name == ToolName::Bash {
        trace.note("2b", || "sandbox.auto_allow_bash".into(), "allow");
        let reason = "runs inside the enforced OS sandbox (sandbox.auto_allow_bash)".into();
        return allow(Step::WholeToolAllow, Layer::Mode, None, reason);
    }
    trace.note("3", || "nothing allowed it".into(), "ask");
    ask(step, Layer::Mode, None, reason, false)
}

/// Steps 1c→1g: what the tool's own check settles. `Err` carries the step and reason of an
/// answer still open to bypass and whole-tool allow rules (an unproven ask, a passthrough).
fn tool_check(
    check: ToolCheck,
    interactive: bool,
    name: &ToolName,
    trace: &mut Trace,
) -> Result<GateDecision, (Step, String)> {
    match check {
        ToolCheck::Deny { reason, rule } => {
            trace.note("1d", || "the tool's check said deny".into(), "deny");
            let layer = check_layer(rule.as_ref());
            Ok(GateDecision::Deny(grounds(
                Step::ToolDeny,
                layer,
                rule,
                reason,
            )))
        }
        ToolCheck::Allow {
            reason,
            rule,
            updated_input,
        } => Ok(GateDecision::Allow {
            grounds: grounds(Step::ToolCheck, check_layer(rule.as_ref()), rule, reason),
            updated_input,
        }),
        ToolCheck::Ask { reason, .. } | ToolCheck::Passthrough { reason } if interactive => {
            trace.note("1e", || format!("{name} requires user interaction"), "ask");
            Ok(ask(
                Step::RequiresInteraction,
                Layer::Interaction,
                None,
                reason,
                true,
            ))
        }
        ToolCheck::Ask {
            reason,
            cause: AskCause::ContentRule(rule),
        } => {
            trace.note(
                "1f",
                || format!("content ask rule {} at {}", rule.rule, rule.source),
                "ask",
            );
            Ok(ask(Step::ContentAsk, Layer::Rule, Some(rule), reason, true))
        }
        ToolCheck::Ask {
            reason,
            cause: AskCause::Guardrail(guardrail),
        } => {
            trace.note("1g", || format!("safety guardrail: {guardrail}"), "ask");
            Ok(ask(Step::Guardrail, Layer::Guardrail, None, reason, true))
        }
        ToolCheck::Ask {
            reason,
            cause: AskCause::Unproven,
        } => Err((Step::ToolCheck, reason)),
        ToolCheck::Passthrough { reason } => Err((Step::Passthrough, reason)),
    }
}

/// The first whole-tool rule of `kind` for the tool, noted in the trace under `step`.
fn whole_tool_rule(
    ctx: &PermissionContext,
    kind: RuleKind,
    name: &ToolName,
    step: &'static str,
    trace: &mut Trace,
) -> Option<RuleRef> {
    let rule = ctx.rules.whole_tool(kind, name).map(RuleRef::from);
    let outcome = match (&rule, kind) {
        (None, _) => "continue",
        (Some(_), RuleKind::Deny) => "deny",
        (Some(_), RuleKind::Ask) => "ask",
        (Some(_), RuleKind::Allow) => "allow",
    };
    trace.note(
        step,
        || {
            format!(
                "whole-tool {kind} rule for {name}: {}",
                rule_text(rule.as_ref())
            )
        },
        outcome,
    );
    rule
}

fn describe_check(check: &ToolCheck) -> String {
    match check {
        ToolCheck::Allow { reason, .. }
        | ToolCheck::Deny { reason, .. }
        | ToolCheck::Ask { reason, .. }
        | ToolCheck::Passthrough { reason } => reason.clone(),
    }
}

/// Plan mode is read-only exploration: whatever allowed a call, a call that may write is denied.
fn enforce_plan(
    call: &dyn GatedCall,
    ctx: &PermissionContext,
    allowed: Grounds,
    updated_input: Option<serde_json::Value>,
    trace: &mut Trace,
) -> GateDecision {
    if ctx.mode != PermissionMode::Plan {
        return GateDecision::Allow {
            grounds: allowed,
            updated_input,
        };
    }
    let read_only = call.is_read_only(ctx);
    trace.note(
        "plan",
        || {
            format!(
                "plan mode: the call is {}read-only",
                if read_only { "" } else { "not " }
            )
        },
        if read_only { "allow" } else { "deny" },
    );
    if read_only {
        return GateDecision::Allow {
            grounds: allowed,
            updated_input,
        };
    }
    GateDecision::Deny(grounds(
        allowed.step,
        Layer::Mode,
        allowed.rule,
        format!(
            "plan mode runs only read-only tools; {} may write",
            call.tool_name()
        ),
    ))
}
