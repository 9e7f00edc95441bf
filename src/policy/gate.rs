//! The permission gate (S4): the short-circuit pipeline 1a→3 over one tool call, then the
//! mode's transform of an ask. Headless, nobody answers an ask, so every ask ends as a deny.

use serde_json::Value;

use super::decision::{AskCause, Decision, Layer, PermissionDecision, RuleRef, Step, ToolCheck};
use super::rule::RuleKind;
use super::{PermissionContext, PermissionMode, ToolName};
use crate::hooks::HookVerdict;
use crate::tools::Tool;

/// Tools auto mode lets through without a classifier: they only read.
const AUTO_SAFE_TOOLS: [&str; 5] = ["Read", "Glob", "Grep", "TodoWrite", "ToolSearch"];

/// An ask on its way to the mode transform.
struct PendingAsk {
    step: Step,
    layer: Layer,
    rule: Option<RuleRef>,
    reason: String,
    /// 1b/1e/1f/1g asks are answered by a person only: no mode, fast path or bypass turns
    /// them into allow.
    immune: bool,
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
struct Trace<'a>(Option<&'a mut Vec<TraceStep>>);

impl Trace<'_> {
    fn note(&mut self, step: &'static str, saw: impl FnOnce() -> String, outcome: &str) {
        if let Some(lines) = self.0.as_deref_mut() {
            lines.push(TraceStep {
                step,
                saw: saw(),
                outcome: outcome.to_string(),
            });
        }
    }
}

pub fn decide(tool: &dyn Tool, input: &Value, ctx: &PermissionContext) -> PermissionDecision {
    decide_traced(tool, input, ctx, &mut Trace(None))
}

/// Decides and returns every step the pipeline took, for `check --explain`.
pub fn explain(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
) -> (PermissionDecision, Vec<TraceStep>) {
    let mut lines = Vec::new();
    let decision = decide_traced(tool, input, ctx, &mut Trace(Some(&mut lines)));
    (decision, lines)
}

fn decide_traced(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    trace: &mut Trace,
) -> PermissionDecision {
    let decision = match pipeline(tool, input, ctx, trace) {
        Ok(decision) => decision,
        Err(ask) => transform_ask(tool, input, ctx, ask, trace),
    };
    enforce_plan(tool, input, ctx, decision, trace)
}

fn rule_text(rule: Option<&RuleRef>) -> String {
    rule.map_or_else(
        || "no rule".to_string(),
        |rule| format!("rule {} at {}", rule.rule, rule.source),
    )
}

/// Steps 1a→3. `Err` carries an ask for the mode to answer.
fn pipeline(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    trace: &mut Trace,
) -> Result<PermissionDecision, PendingAsk> {
    let name = tool.name();
    let whole_deny = whole_tool_rule(ctx, RuleKind::Deny, &name, "1a", trace);
    if let Some(rule) = whole_deny {
        let reason = format!("{name} is denied by rule {}", rule.rule);
        return Ok(deny(Step::WholeToolDeny, Layer::Rule, Some(rule), reason));
    }
    let whole_ask = whole_tool_rule(ctx, RuleKind::Ask, &name, "1b", trace);
    if let Some(rule) = whole_ask {
        let reason = format!("{name} needs approval by rule {}", rule.rule);
        return Err(PendingAsk {
            step: Step::WholeToolAsk,
            layer: Layer::Rule,
            rule: Some(rule),
            reason,
            immune: true,
        });
    }
    let check = tool.check_permissions(input, ctx);
    trace.note(
        "1c",
        || format!("{name}'s own check: {}", describe_check(&check)),
        check_kind(&check),
    );
    let interactive = tool.requires_user_interaction();
    let (step, reason) = match check {
        ToolCheck::Deny { reason, rule } => {
            trace.note("1d", || "the tool's check said deny".into(), "deny");
            let layer = if rule.is_some() {
                Layer::Rule
            } else {
                Layer::Tool
            };
            return Ok(deny(Step::ToolDeny, layer, rule, reason));
        }
        ToolCheck::Allow {
            reason,
            rule,
            updated_input,
        } => {
            let layer = if rule.is_some() {
                Layer::Rule
            } else {
                Layer::Tool
            };
            return Ok(PermissionDecision {
                decision: Decision::Allow,
                step: Step::ToolCheck,
                layer,
                rule,
                reason,
                updated_input,
                asked: false,
            });
        }
        ToolCheck::Ask { reason, .. } | ToolCheck::Passthrough { reason } if interactive => {
            trace.note("1e", || format!("{name} requires user interaction"), "ask");
            return Err(PendingAsk {
                step: Step::RequiresInteraction,
                layer: Layer::Interaction,
                rule: None,
                reason,
                immune: true,
            });
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
            return Err(PendingAsk {
                step: Step::ContentAsk,
                layer: Layer::Rule,
                rule: Some(rule),
                reason,
                immune: true,
            });
        }
        ToolCheck::Ask {
            reason,
            cause: AskCause::Guardrail(guardrail),
        } => {
            trace.note("1g", || format!("safety guardrail: {guardrail}"), "ask");
            return Err(PendingAsk {
                step: Step::Guardrail,
                layer: Layer::Guardrail,
                rule: None,
                reason,
                immune: true,
            });
        }
        ToolCheck::Ask {
            reason,
            cause: AskCause::Unproven,
        } => (Step::ToolCheck, reason),
        ToolCheck::Passthrough { reason } => (Step::Passthrough, reason),
    };
    let bypass = ctx.mode == PermissionMode::BypassPermissions;
    trace.note(
        "2a",
        || format!("mode is {}", ctx.mode),
        if bypass { "allow" } else { "continue" },
    );
    if bypass {
        return Ok(allow(
            Step::Bypass,
            Layer::Mode,
            None,
            "bypassPermissions mode".into(),
        ));
    }
    let whole_allow = whole_tool_rule(ctx, RuleKind::Allow, &name, "2b", trace);
    if let Some(rule) = whole_allow {
        let reason = format!("{name} is allowed by rule {}", rule.rule);
        return Ok(allow(Step::WholeToolAllow, Layer::Rule, Some(rule), reason));
    }
    if ctx.auto_allow_bash && name == ToolName::Bash {
        trace.note("2b", || "sandbox.auto_allow_bash".into(), "allow");
        let reason = "runs inside the enforced OS sandbox (sandbox.auto_allow_bash)".into();
        return Ok(allow(Step::WholeToolAllow, Layer::Mode, None, reason));
    }
    trace.note("3", || "nothing allowed it".into(), "ask");
    Err(PendingAsk {
        step,
        layer: Layer::Mode,
        rule: None,
        reason,
        immune: false,
    })
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

fn check_kind(check: &ToolCheck) -> &'static str {
    match check {
        ToolCheck::Allow { .. } => "allow",
        ToolCheck::Deny { .. } => "deny",
        ToolCheck::Ask { .. } => "ask",
        ToolCheck::Passthrough { .. } => "passthrough",
    }
}

fn describe_check(check: &ToolCheck) -> String {
    match check {
        ToolCheck::Allow { reason, .. }
        | ToolCheck::Deny { reason, .. }
        | ToolCheck::Ask { reason, .. }
        | ToolCheck::Passthrough { reason } => reason.clone(),
    }
}

fn transform_ask(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    ask: PendingAsk,
    trace: &mut Trace,
) -> PermissionDecision {
    let PendingAsk {
        step,
        layer,
        rule,
        reason,
        immune,
    } = ask;
    let decision = match ctx.mode {
        PermissionMode::DontAsk => deny(
            step,
            layer,
            rule,
            format!("{reason}; dontAsk mode turns every ask into a deny"),
        ),
        PermissionMode::Auto if !immune => match auto_fast_path(tool, input, ctx) {
            Some(fast) => allow(step, Layer::Mode, rule, fast),
            None => deny(
                step,
                layer,
                rule,
                format!(
                    "{reason}; auto mode: not on the fast path, so the classifier judges it (denied when none is configured or it cannot answer)"
                ),
            ),
        },
        mode => deny(
            step,
            layer,
            rule,
            format!("{reason}; nobody is present to approve it in a headless {mode}-mode run"),
        ),
    };
    trace.note(
        "mode",
        || format!("the ask goes to the {} mode", ctx.mode),
        if decision.is_allow() { "allow" } else { "deny" },
    );
    PermissionDecision {
        asked: true,
        ..decision
    }
}

/// Auto mode's fast path: what acceptEdits would allow, or a tool that only reads.
fn auto_fast_path(tool: &dyn Tool, input: &Value, ctx: &PermissionContext) -> Option<String> {
    let name = tool.name().to_string();
    if AUTO_SAFE_TOOLS.contains(&name.as_str()) && tool.is_read_only(input) {
        return Some(format!("auto mode fast path: {name} only reads"));
    }
    let as_accept_edits = PermissionContext {
        auto_allow_bash: false,
        mode: PermissionMode::AcceptEdits,
        ..*ctx
    };
    match tool.check_permissions(input, &as_accept_edits) {
        ToolCheck::Allow { .. } => Some("auto mode fast path: acceptEdits would allow it".into()),
        _ => None,
    }
}

/// An ask only the mode refused (steps 1c and 3, no rule, guardrail or interaction behind it)
/// that no hook allowed: the one kind of refusal the classifier may turn into an allow. A
/// deny rule or a guardrail never reaches it.
pub fn awaits_classifier(decision: &PermissionDecision, mode: PermissionMode) -> bool {
    mode == PermissionMode::Auto
        && decision.decision == Decision::Deny
        && decision.asked
        && decision.layer == Layer::Mode
        && matches!(decision.step, Step::ToolCheck | Step::Passthrough)
}

/// Plan mode is read-only exploration: whatever allowed a call, a call that may write is denied.
fn enforce_plan(
    tool: &dyn Tool,
    input: &Value,
    ctx: &PermissionContext,
    decision: PermissionDecision,
    trace: &mut Trace,
) -> PermissionDecision {
    if ctx.mode != PermissionMode::Plan || !decision.is_allow() {
        return decision;
    }
    let read_only = tool.is_read_only(input);
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
        return decision;
    }
    deny(
        decision.step,
        Layer::Mode,
        decision.rule,
        format!(
            "plan mode runs only read-only tools; {} may write",
            tool.name()
        ),
    )
}

/// Folds the PreToolUse hooks' verdict into the gate's decision. A hook can always stop a
/// call; it can allow one only where nothing but the mode stood in the way — never past a
/// deny, an ask rule, an interaction requirement or a guardrail.
pub fn apply_hook_verdict(
    decision: PermissionDecision,
    verdict: &HookVerdict,
) -> PermissionDecision {
    match verdict {
        HookVerdict::Deny { reason } => {
            deny(decision.step, Layer::Hook, decision.rule, reason.clone())
        }
        HookVerdict::Ask { reason } if decision.is_allow() || hook_may_allow(&decision) => {
            PermissionDecision {
                asked: true,
                ..deny(
                    decision.step,
                    Layer::Hook,
                    decision.rule,
                    format!("{reason}; nobody is present to approve it in a headless run"),
                )
            }
        }
        HookVerdict::Allow {
            reason,
            updated_input,
        } if hook_may_allow(&decision) => PermissionDecision {
            decision: Decision::Allow,
            step: decision.step,
            layer: Layer::Hook,
            rule: decision.rule,
            reason: reason
                .clone()
                .unwrap_or_else(|| "allowed by a PreToolUse hook".into()),
            updated_input: updated_input.clone(),
            asked: true,
        },
        HookVerdict::Allow { updated_input, .. } | HookVerdict::NoOpinion { updated_input }
            if decision.is_allow() =>
        {
            PermissionDecision {
                updated_input: updated_input.clone().or(decision.updated_input),
                ..decision
            }
        }
        _ => decision,
    }
}

/// A refusal that only the mode made, from an ask nobody was bound to answer (steps 1c and
/// 3): the one kind of deny a hook's allow may lift.
fn hook_may_allow(decision: &PermissionDecision) -> bool {
    decision.decision == Decision::Deny
        && decision.asked
        && matches!(decision.step, Step::ToolCheck | Step::Passthrough)
}

fn deny(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> PermissionDecision {
    PermissionDecision {
        decision: Decision::Deny,
        step,
        layer,
        rule,
        reason,
        updated_input: None,
        asked: false,
    }
}

fn allow(step: Step, layer: Layer, rule: Option<RuleRef>, reason: String) -> PermissionDecision {
    PermissionDecision {
        decision: Decision::Allow,
        step,
        layer,
        rule,
        reason,
        updated_input: None,
        asked: false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::policy::{Policy, RuleSet, Workspace};
    use crate::tools::{ToolContext, ToolError, ToolFuture};

    /// A tool whose own check answers what the test says, to pin the pipeline's order.
    struct Probe {
        check: ToolCheck,
        read_only: bool,
        interactive: bool,
    }

    impl Tool for Probe {
        fn name(&self) -> crate::policy::ToolName {
            crate::policy::ToolName::Bash
        }
        fn description(&self) -> &'static str {
            "probe"
        }
        fn input_schema(&self) -> Value {
            json!({})
        }
        fn validate_input(&self, _input: &Value) -> Result<(), ToolError> {
            Ok(())
        }
        fn is_read_only(&self, _input: &Value) -> bool {
            self.read_only
        }
        fn requires_user_interaction(&self) -> bool {
            self.interactive
        }
        fn check_permissions(&self, _input: &Value, _ctx: &PermissionContext) -> ToolCheck {
            self.check.clone()
        }
        fn call<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
            Box::pin(async { Err(ToolError::new("the gate test never runs a tool")) })
        }
    }

    fn rule_ref() -> RuleRef {
        RuleRef {
            rule: "Bash(x)".into(),
            source: crate::config::SourceLocation {
                file: "p.yaml".into(),
                line: 1,
            },
        }
    }

    fn check(kind: &str) -> ToolCheck {
        let reason = format!("probe says {kind}");
        match kind {
            "allow" => ToolCheck::Allow {
                reason,
                rule: None,
                updated_input: Some(json!({"normalised": true})),
            },
            "deny" => ToolCheck::Deny { reason, rule: None },
            "ask" => ToolCheck::Ask {
                reason,
                cause: AskCause::Unproven,
            },
            "ask-rule" => ToolCheck::Ask {
                reason,
                cause: AskCause::ContentRule(rule_ref()),
            },
            "guardrail" => ToolCheck::Ask {
                reason,
                cause: AskCause::Guardrail("probe guardrail"),
            },
            _ => ToolCheck::Passthrough { reason },
        }
    }

    fn rules(yaml: &str) -> RuleSet {
        RuleSet::from_policy(
            &Policy::parse(
                yaml,
                crate::policy::PolicyOrigin {
                    file: Path::new("p.yaml"),
                    dir: Path::new("/"),
                    home: None,
                },
            )
            .unwrap(),
        )
    }

    #[test]
    fn pipeline_steps_and_immunities() {
        let none = "permissions: {}\n";
        let deny_bash = "permissions:\n  deny: [Bash]\n  allow: [Bash]\n";
        let ask_bash = "permissions:\n  ask: [Bash]\n";
        let allow_bash = "permissions:\n  allow: [Bash]\n";
        use PermissionMode::*;
        // (rules, tool check, interactive, read-only, mode, expected decision, step, layer)
        let table = [
            // 1a: a whole-tool deny wins over everything, even an allow rule and bypass.
            (
                deny_bash,
                "allow",
                false,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::WholeToolDeny,
                Layer::Rule,
            ),
            // 1b: a whole-tool ask is answered by nobody, and bypass cannot override it.
            (
                ask_bash,
                "allow",
                false,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::WholeToolAsk,
                Layer::Rule,
            ),
            // 1c: the tool's own allow, with its rewritten input.
            (
                none,
                "allow",
                false,
                false,
                DontAsk,
                Decision::Allow,
                Step::ToolCheck,
                Layer::Tool,
            ),
            // 1d: the tool's own deny beats an allow rule and bypass.
            (
                allow_bash,
                "deny",
                false,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::ToolDeny,
                Layer::Tool,
            ),
            // 1e: requires interaction: bypass cannot override.
            (
                allow_bash,
                "ask",
                true,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::RequiresInteraction,
                Layer::Interaction,
            ),
            // 1f: a content ask rule: bypass and allow rules cannot override.
            (
                allow_bash,
                "ask-rule",
                false,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::ContentAsk,
                Layer::Rule,
            ),
            // 1g: a guardrail: bypass and allow rules cannot override.
            (
                allow_bash,
                "guardrail",
                false,
                false,
                BypassPermissions,
                Decision::Deny,
                Step::Guardrail,
                Layer::Guardrail,
            ),
            // 2a: bypass turns a plain ask or a passthrough into allow.
            (
                none,
                "ask",
                false,
                false,
                BypassPermissions,
                Decision::Allow,
                Step::Bypass,
                Layer::Mode,
            ),
            (
                none,
                "passthrough",
                false,
                false,
                BypassPermissions,
                Decision::Allow,
                Step::Bypass,
                Layer::Mode,
            ),
            // 2b: a whole-tool allow rule turns a plain ask or passthrough into allow.
            (
                allow_bash,
                "ask",
                false,
                false,
                DontAsk,
                Decision::Allow,
                Step::WholeToolAllow,
                Layer::Rule,
            ),
            (
                allow_bash,
                "passthrough",
                false,
                false,
                Default,
                Decision::Allow,
                Step::WholeToolAllow,
                Layer::Rule,
            ),
            // 3: passthrough asks; headless, every mode denies it.
            (
                none,
                "passthrough",
                false,
                false,
                DontAsk,
                Decision::Deny,
                Step::Passthrough,
                Layer::Mode,
            ),
            (
                none,
                "passthrough",
                false,
                false,
                Default,
                Decision::Deny,
                Step::Passthrough,
                Layer::Mode,
            ),
            (
                none,
                "passthrough",
                false,
                false,
                AcceptEdits,
                Decision::Deny,
                Step::Passthrough,
                Layer::Mode,
            ),
            (
                none,
                "ask",
                false,
                false,
                Auto,
                Decision::Deny,
                Step::ToolCheck,
                Layer::Mode,
            ),
            // plan: only read-only calls, whatever allowed them.
            (
                allow_bash,
                "passthrough",
                false,
                false,
                Plan,
                Decision::Deny,
                Step::WholeToolAllow,
                Layer::Mode,
            ),
            (
                allow_bash,
                "passthrough",
                false,
                true,
                Plan,
                Decision::Allow,
                Step::WholeToolAllow,
                Layer::Rule,
            ),
        ];
        let workspace = Workspace::new("/ws".into(), vec![], None);
        for (index, (policy, tool_check, interactive, read_only, mode, decision, step, layer)) in
            table.into_iter().enumerate()
        {
            let rules = rules(policy);
            let ctx = PermissionContext {
                auto_allow_bash: false,
                mode,
                rules: &rules,
                workspace: &workspace,
            };
            let probe = Probe {
                check: check(tool_check),
                read_only,
                interactive,
            };
            let got = decide(&probe, &json!({}), &ctx);
            assert_eq!(
                (got.decision, got.step, got.layer),
                (decision, step, layer),
                "row {index}: {tool_check} in {mode}: {}",
                got.reason
            );
        }
    }

    #[test]
    fn allow_keeps_the_rewritten_input_and_asks_explain_the_mode() {
        let rules = rules("permissions: {}\n");
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            auto_allow_bash: false,
            mode: PermissionMode::DontAsk,
            rules: &rules,
            workspace: &workspace,
        };
        let allowed = decide(
            &Probe {
                check: check("allow"),
                read_only: false,
                interactive: false,
            },
            &json!({}),
            &ctx,
        );
        assert_eq!(allowed.updated_input, Some(json!({"normalised": true})));
        let denied = decide(
            &Probe {
                check: check("passthrough"),
                read_only: false,
                interactive: false,
            },
            &json!({}),
            &ctx,
        );
        assert!(
            denied
                .reason
                .contains("dontAsk mode turns every ask into a deny"),
            "{}",
            denied.reason
        );
    }

    #[test]
    fn explain_lists_every_step_taken() {
        let rules = rules("permissions:\n  allow: [Bash]\n");
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            auto_allow_bash: false,
            mode: PermissionMode::DontAsk,
            rules: &rules,
            workspace: &workspace,
        };
        let probe = Probe {
            check: check("passthrough"),
            read_only: false,
            interactive: false,
        };
        let (decision, trace) = explain(&probe, &json!({}), &ctx);
        let steps: Vec<(&str, &str)> = trace.iter().map(|t| (t.step, t.outcome.as_str())).collect();
        assert_eq!(
            steps,
            [
                ("1a", "continue"),
                ("1b", "continue"),
                ("1c", "passthrough"),
                ("2a", "continue"),
                ("2b", "allow")
            ]
        );
        assert_eq!(decision, decide(&probe, &json!({}), &ctx));
        let probe = Probe {
            check: check("guardrail"),
            read_only: false,
            interactive: false,
        };
        let (_, trace) = explain(&probe, &json!({}), &ctx);
        let steps: Vec<&str> = trace.iter().map(|t| t.step).collect();
        assert_eq!(steps, ["1a", "1b", "1c", "1g", "mode"]);
    }

    #[test]
    fn hooks_stop_anything_but_allow_only_what_the_mode_refused() {
        let rules = rules("permissions: {}\n");
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            auto_allow_bash: false,
            mode: PermissionMode::DontAsk,
            rules: &rules,
            workspace: &workspace,
        };
        let decided = |kind: &str| {
            decide(
                &Probe {
                    check: check(kind),
                    read_only: false,
                    interactive: false,
                },
                &json!({}),
                &ctx,
            )
        };
        let allow = HookVerdict::Allow {
            reason: Some("hook ok".into()),
            updated_input: Some(json!({"x": 1})),
        };
        let deny_verdict = HookVerdict::Deny {
            reason: "hook says no".into(),
        };
        let ask = HookVerdict::Ask {
            reason: "hook asks".into(),
        };
        let none = HookVerdict::NoOpinion {
            updated_input: None,
        };
        // (tool check, verdict, final decision, layer)
        let table = [
            ("allow", &deny_verdict, Decision::Deny, Layer::Hook),
            ("allow", &ask, Decision::Deny, Layer::Hook),
            ("allow", &none, Decision::Allow, Layer::Tool),
            ("allow", &allow, Decision::Allow, Layer::Tool),
            ("passthrough", &allow, Decision::Allow, Layer::Hook),
            ("ask", &allow, Decision::Allow, Layer::Hook),
            ("passthrough", &none, Decision::Deny, Layer::Mode),
            ("deny", &allow, Decision::Deny, Layer::Tool),
            ("ask-rule", &allow, Decision::Deny, Layer::Rule),
            ("guardrail", &allow, Decision::Deny, Layer::Guardrail),
        ];
        for (kind, verdict, expected, layer) in table {
            let got = apply_hook_verdict(decided(kind), verdict);
            assert_eq!(
                (got.decision, got.layer),
                (expected, layer),
                "{kind} + {verdict:?}: {}",
                got.reason
            );
        }
        let rewritten = apply_hook_verdict(decided("passthrough"), &allow);
        assert_eq!(rewritten.updated_input, Some(json!({"x": 1})));
    }

    #[test]
    fn auto_fast_path_allows_reads_and_workspace_edits_only() {
        let rules = rules("permissions: {}\n");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = Workspace::new(root.clone(), vec![], None);
        let ctx = PermissionContext {
            auto_allow_bash: false,
            mode: PermissionMode::Auto,
            rules: &rules,
            workspace: &workspace,
        };
        let write = crate::tools::WriteTool;
        let inside = decide(
            &write,
            &json!({"file_path": "src/a.rs", "content": ""}),
            &ctx,
        );
        assert_eq!(
            (inside.decision, inside.layer),
            (Decision::Allow, Layer::Mode),
            "{}",
            inside.reason
        );
        let guarded = decide(
            &write,
            &json!({"file_path": ".git/config", "content": ""}),
            &ctx,
        );
        assert_eq!(
            (guarded.decision, guarded.step),
            (Decision::Deny, Step::Guardrail)
        );
        let outside = decide(&write, &json!({"file_path": "/etc/x", "content": ""}), &ctx);
        assert_eq!(
            (outside.decision, outside.step),
            (Decision::Deny, Step::ToolDeny)
        );
    }
}
