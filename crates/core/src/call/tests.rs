//! The path of a call end to end, with tools whose own check says what a test needs: the
//! gate's order, who may answer an ask, and how often a Bash call is parsed and analysed.

use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{
    Answerer, Awaited, Classifier, ClassifierFuture, ClassifierRuling, Decider, PreToolUse,
    PreparedCall, Resolution,
};
use crate::hooks::HookRuling;
use crate::policy::{
    self, Ask, AskCause, Decision, Layer, PermissionContext, PermissionDecision, PermissionMode,
    Policy, RuleRef, RuleSet, Step, ToolCheck, ToolName, Workspace,
};
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolInput};

/// A tool whose own check answers what the test says, to pin the pipeline's order.
#[derive(Clone)]
struct Probe {
    check: ToolCheck,
    read_only: bool,
    interactive: bool,
}

impl Tool for Probe {
    fn name(&self) -> ToolName {
        ToolName::Bash
    }
    fn description(&self) -> std::borrow::Cow<'static, str> {
        "probe".into()
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn requires_user_interaction(&self) -> bool {
        self.interactive
    }
    fn prepare(&self, _input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        Ok(Box::new(self.clone()))
    }
}

impl ToolInput for Probe {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        self.read_only
    }
    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        self.check.clone()
    }
    fn run<'a>(&'a self, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Err(ToolError::Failed("the gate test never runs a tool".into())) })
    }
}

fn probe(kind: &str, read_only: bool, interactive: bool) -> PreparedCall {
    let tool = Probe {
        check: check(kind),
        read_only,
        interactive,
    };
    PreparedCall::prepare(Arc::new(tool), json!({})).unwrap()
}

/// The decision with the policy alone, as `check` gives it.
fn decide(call: PreparedCall, ctx: &PermissionContext) -> PermissionDecision {
    Decider::headless(*ctx).decide_now(call).into_decision()
}

fn rule_ref() -> RuleRef {
    RuleRef {
        rule: "Bash(x)".into(),
        source: crate::config::SourceLocation {
            file: "p.yaml".into(),
            line: 1,
        },
        headless: crate::policy::HeadlessAnswer::Deny,
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
            disk: None,
            auto_allow_bash: false,
            mode,
            rules: &rules,
            workspace: &workspace,
        };
        let got = decide(probe(tool_check, read_only, interactive), &ctx);
        assert_eq!(
            (got.decision, got.step, got.layer),
            (decision, step, layer),
            "row {index}: {tool_check} in {mode}: {}",
            got.reason
        );
    }
}

fn context<'a>(
    mode: PermissionMode,
    rules: &'a RuleSet,
    workspace: &'a Workspace,
) -> PermissionContext<'a> {
    PermissionContext {
        disk: None,
        auto_allow_bash: false,
        mode,
        rules,
        workspace,
    }
}

/// The input a tool's check normalised is the call that runs, judged again like a hook's
/// rewrite (the same decision in a run and in `check`).
#[test]
fn an_allow_runs_the_normalised_input_and_asks_explain_the_mode() {
    let rules = rules("permissions: {}\n");
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let ctx = context(PermissionMode::DontAsk, &rules, &workspace);
    let Resolution::Allowed { run, decision, .. } =
        Decider::headless(ctx).decide_now(probe("allow", false, false))
    else {
        panic!("the probe's check allows");
    };
    assert_eq!(run.raw_input(), &json!({"normalised": true}));
    assert_eq!(decision.updated_input, None);
    let denied = decide(probe("passthrough", false, false), &ctx);
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
    let ctx = context(PermissionMode::DontAsk, &rules, &workspace);
    let explained = |call: PreparedCall| {
        let mut trace = Vec::new();
        let decision = Decider {
            trace: Some(&mut trace),
            ..Decider::headless(ctx)
        }
        .decide_now(call)
        .into_decision();
        (decision, trace)
    };
    let (decision, trace) = explained(probe("passthrough", false, false));
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
    assert_eq!(decision, decide(probe("passthrough", false, false), &ctx));
    let (_, trace) = explained(probe("guardrail", false, false));
    let steps: Vec<&str> = trace.iter().map(|t| t.step).collect();
    assert_eq!(steps, ["1a", "1b", "1c", "1g", "mode"]);
}

/// PreToolUse hooks that always give one verdict.
struct Hooks(Option<HookRuling>);

impl PreToolUse for Hooks {
    type Error = std::convert::Infallible;
    async fn ruling(&mut self, _call: &PreparedCall) -> Result<Option<HookRuling>, Self::Error> {
        Ok(self.0.clone())
    }
}

async fn approve<'a>(
    call: PreparedCall,
    ctx: PermissionContext<'a>,
    classifier: Option<&'a mut dyn Classifier>,
    verdict: Option<HookRuling>,
) -> Resolution {
    let mut decider = Decider {
        classifier,
        ..Decider::headless(ctx)
    };
    match decider.decide(call, &mut Hooks(verdict)).await {
        Ok(resolution) => resolution,
        Err(never) => match never {},
    }
}

#[tokio::test]
async fn hooks_stop_anything_but_allow_only_what_the_mode_refused() {
    let rules = rules("permissions: {}\n");
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let ctx = context(PermissionMode::DontAsk, &rules, &workspace);
    let allow = HookRuling::Allow {
        reason: Some("hook ok".into()),
        updated_input: Some(json!({"x": 1})),
    };
    let deny_verdict = HookRuling::Deny {
        reason: "hook says no".into(),
    };
    let ask = HookRuling::Ask {
        reason: "hook asks".into(),
    };
    let none = HookRuling::NoOpinion {
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
        let call = probe(kind, false, false);
        let got = approve(call, ctx, None, Some(verdict.clone()))
            .await
            .into_decision();
        assert_eq!(
            (got.decision, got.layer),
            (expected, layer),
            "{kind} + {verdict:?}: {}",
            got.reason
        );
    }
    let call = probe("passthrough", false, false);
    let resolution = approve(call, ctx, None, Some(allow)).await;
    assert_eq!(resolution.by(), Answerer::Hook);
    let Resolution::Allowed { run, .. } = resolution else {
        panic!("the hook's allow stands");
    };
    assert_eq!(run.raw_input(), &json!({"x": 1}));
}

#[tokio::test]
async fn auto_fast_path_allows_reads_and_workspace_edits_only() {
    let rules = rules("permissions: {}\n");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = Workspace::new(root.clone(), vec![], None);
    let ctx = context(PermissionMode::Auto, &rules, &workspace);
    let write = |input: Value| {
        let tool: Arc<dyn Tool> = Arc::new(crate::tools::WriteTool);
        PreparedCall::prepare(tool, input).unwrap()
    };
    let inside = approve(
        write(json!({"file_path": "src/a.rs", "content": ""})),
        ctx,
        None,
        None,
    )
    .await
    .into_decision();
    assert_eq!(
        (inside.decision, inside.layer),
        (Decision::Allow, Layer::Mode),
        "{}",
        inside.reason
    );
    let guarded = decide(
        write(json!({"file_path": ".git/config", "content": ""})),
        &ctx,
    );
    assert_eq!(
        (guarded.decision, guarded.step),
        (Decision::Deny, Step::Guardrail)
    );
    let outside = decide(write(json!({"file_path": "/etc/x", "content": ""})), &ctx);
    assert_eq!(
        (outside.decision, outside.step),
        (Decision::Deny, Step::ToolDeny)
    );
}

/// A classifier that answers one way and counts what it was asked.
struct FixedClassifier(ClassifierRuling, std::sync::atomic::AtomicUsize);

impl Classifier for FixedClassifier {
    fn classify<'a>(
        &'a mut self,
        _call: &'a PreparedCall,
        ask: &'a Ask,
        _ctx: &'a PermissionContext<'a>,
    ) -> ClassifierFuture<'a> {
        assert!(!ask.immune, "an immune ask never reaches the classifier");
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn the_classifier_answers_only_what_hooks_and_the_fast_path_left_open_in_auto_mode() {
    let rules = rules("permissions: {}\n");
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let mut allowing = FixedClassifier(
        ClassifierRuling::Allow {
            reason: "looks fine".into(),
        },
        Default::default(),
    );
    let mut denying = FixedClassifier(
        ClassifierRuling::Deny {
            reason: "exfiltration".into(),
        },
        Default::default(),
    );
    let auto = context(PermissionMode::Auto, &rules, &workspace);
    let asked = |kind| probe(kind, false, false);
    let hook_deny = HookRuling::Deny {
        reason: "hook says no".into(),
    };
    let got = approve(asked("ask"), auto, Some(&mut allowing), None)
        .await
        .into_decision();
    assert_eq!(
        (got.decision, got.layer),
        (Decision::Allow, Layer::Classifier)
    );
    let got = approve(asked("ask"), auto, Some(&mut denying), None)
        .await
        .into_decision();
    assert_eq!(
        (got.decision, got.layer),
        (Decision::Deny, Layer::Classifier)
    );
    // With no classifier, the mode refuses what it would have judged, and says so.
    let got = approve(asked("ask"), auto, None, None).await;
    assert_eq!(got.by(), Answerer::Mode(Awaited::Classifier));
    assert_eq!(got.decision().layer, Layer::Mode);
    // A hook's deny comes first; an immune ask and another mode never reach it.
    let got = approve(asked("ask"), auto, Some(&mut allowing), Some(hook_deny))
        .await
        .into_decision();
    assert_eq!((got.decision, got.layer), (Decision::Deny, Layer::Hook));
    let got = approve(asked("guardrail"), auto, Some(&mut allowing), None)
        .await
        .into_decision();
    assert_eq!(
        (got.decision, got.layer),
        (Decision::Deny, Layer::Guardrail)
    );
    let dont_ask = context(PermissionMode::DontAsk, &rules, &workspace);
    let got = approve(asked("ask"), dont_ask, Some(&mut allowing), None)
        .await
        .into_decision();
    assert_eq!((got.decision, got.layer), (Decision::Deny, Layer::Mode));
    // The fast path answers before the classifier is asked.
    let dir = tempfile::tempdir().unwrap();
    let real = Workspace::new(dir.path().canonicalize().unwrap(), vec![], None);
    let tool: Arc<dyn Tool> = Arc::new(crate::tools::WriteTool);
    let edit = PreparedCall::prepare(tool, json!({"file_path": "a.rs", "content": ""})).unwrap();
    let in_real = context(PermissionMode::Auto, &rules, &real);
    let got = approve(edit, in_real, Some(&mut denying), None)
        .await
        .into_decision();
    assert_eq!(
        (got.decision, got.layer),
        (Decision::Allow, Layer::Mode),
        "{}",
        got.reason
    );
    let asked_of =
        |classifier: &FixedClassifier| classifier.1.load(std::sync::atomic::Ordering::SeqCst);
    // Each was asked once: never after a hook's deny, for an immune ask, outside auto mode or
    // for what the fast path allowed.
    assert_eq!((asked_of(&allowing), asked_of(&denying)), (1, 1));
}

#[test]
fn self_tests_pass_and_fail_with_the_step_that_decided() {
    let policy = Policy::parse(
        "permissions:\n  allow: ['Bash(npm test:*)']\n  deny: ['Bash(rm:*)']\n  ask: ['Bash(git push:*)']\ntests:\n  - {tool: Bash, input: {command: npm test}, expect: allow}\n  - {tool: Bash, input: {command: rm -rf /}, expect: deny}\n  - {tool: Bash, input: {command: git push}, expect: ask}\n  - {tool: Bash, input: {command: npm test}, expect: deny, name: wrong}\n  - {tool: Nope, expect: allow}\n",
        crate::policy::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
    )
    .unwrap();
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let outcomes = policy::run_self_tests(&policy, &workspace, &super::self_test_answer);
    let passed: Vec<bool> = outcomes.iter().map(|o| o.passed).collect();
    assert_eq!(passed, [true, true, true, false, false]);
    assert_eq!(outcomes[3].test.name, "wrong");
    assert_eq!(outcomes[3].got_label(), "allow");
    assert_eq!(outcomes[2].got_label(), "ask");
    assert!(outcomes[4].got_label().contains("no tool `Nope`"));
}

/// The answerer of every kind of decision is the resolution's field: the gate's step for a
/// rule or the tool's check, the mode for an ask nobody answered (waiting for a person, or in
/// auto mode for the classifier when the ask was not immune), the fast path, a hook.
#[tokio::test]
async fn every_decision_names_who_answered() {
    use PermissionMode::{Auto, DontAsk};
    let rules = rules("permissions: {}\n");
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let hook_deny = HookRuling::Deny {
        reason: "no".into(),
    };
    let cases = [
        ("allow", DontAsk, None, Answerer::Gate(Step::ToolCheck)),
        ("deny", DontAsk, None, Answerer::Gate(Step::ToolDeny)),
        ("ask", DontAsk, None, Answerer::Mode(Awaited::Person)),
        (
            "passthrough",
            Auto,
            None,
            Answerer::Mode(Awaited::Classifier),
        ),
        ("guardrail", Auto, None, Answerer::Mode(Awaited::Person)),
        ("ask-rule", Auto, None, Answerer::Mode(Awaited::Person)),
        ("ask", DontAsk, Some(hook_deny), Answerer::Hook),
    ];
    for (kind, mode, verdict, expected) in cases {
        let got = approve(
            probe(kind, false, false),
            context(mode, &rules, &workspace),
            None,
            verdict,
        )
        .await;
        assert_eq!(got.by(), expected, "{kind} in {mode}");
    }
    let dir = tempfile::tempdir().unwrap();
    let real = Workspace::new(dir.path().canonicalize().unwrap(), vec![], None);
    let tool: Arc<dyn Tool> = Arc::new(crate::tools::WriteTool);
    let edit = PreparedCall::prepare(tool, json!({"file_path": "a.rs", "content": ""})).unwrap();
    let got = approve(edit, context(Auto, &rules, &real), None, None).await;
    assert_eq!(got.by(), Answerer::FastPath);
}

/// A classifier that denies, proposing rules as the loop's does: from the call.
struct Proposing(Vec<Vec<String>>);

impl Classifier for Proposing {
    fn classify<'a>(
        &'a mut self,
        call: &'a PreparedCall,
        _ask: &'a Ask,
        ctx: &'a PermissionContext<'a>,
    ) -> ClassifierFuture<'a> {
        self.0.push(call.proposed_rules(ctx));
        Box::pin(async {
            ClassifierRuling::Deny {
                reason: "no".into(),
            }
        })
    }
}

/// One tree-sitter parse and one analysis per Bash call, whatever the mode and however many
/// stages look: scheduling, plan mode, the gate, auto's fast path, the read-only proof,
/// `--explain` and the classifier's proposal all read the analysis made once under the run's
/// rules.
#[tokio::test(flavor = "current_thread")]
async fn a_bash_call_is_parsed_once_and_analysed_once_in_every_mode() {
    let rules = rules(
        "permissions:\n  allow: ['Bash(git status)', 'Bash(npm test:*)']\n  deny: ['Bash(rm:*)']\n  ask: ['Bash(git push:*)']\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path().canonicalize().unwrap(), vec![], None);
    let commands = [
        "git status",
        "cat README.md | wc -l",
        "npm test > out.txt",
        "rm -rf build",
        "git push origin main",
        "bash -c 'ls; cat x'",
        "make && curl https://example.com",
    ];
    let modes = [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
        PermissionMode::DontAsk,
        PermissionMode::BypassPermissions,
        PermissionMode::Auto,
    ];
    let bash = || -> Arc<dyn Tool> { Arc::new(crate::tools::BashTool) };
    let mut proposing = Proposing(Vec::new());
    for mode in modes {
        for command in commands {
            let ctx = context(mode, &rules, &workspace);
            let nested = usize::from(command.starts_with("bash -c"));
            // As the loop takes it: scheduling, the decision (with a classifier in auto
            // mode), the proof behind an allow.
            let (parses, analyses) = (
                crate::bash::parses_on_this_thread(),
                crate::bash::analyses_on_this_thread(),
            );
            let call = PreparedCall::prepare(bash(), json!({ "command": command })).unwrap();
            let _ = call.scheduling(&ctx);
            let classifier =
                (mode == PermissionMode::Auto).then_some(&mut proposing as &mut dyn Classifier);
            let resolution = approve(call, ctx, classifier, None).await;
            if let Some(call) = resolution.call() {
                let _ = call.scheduling(&ctx);
                let _ = call.proposed_rules(&ctx);
                let _ = call.explain_permissions(&ctx);
            }
            assert_eq!(
                crate::bash::parses_on_this_thread() - parses,
                1 + nested,
                "parses of `{command}` in {mode}"
            );
            assert_eq!(
                crate::bash::analyses_on_this_thread() - analyses,
                1,
                "analyses of `{command}` in {mode}"
            );
            // As `check` and `check --explain` take it: one analysis; explaining, with the
            // tool's details, adds none.
            let count = |trace: Option<&mut Vec<_>>| {
                let before = crate::bash::analyses_on_this_thread();
                let call = PreparedCall::prepare(bash(), json!({ "command": command })).unwrap();
                let by = Decider {
                    trace,
                    ..Decider::headless(ctx)
                }
                .decide_now(call)
                .by();
                (crate::bash::analyses_on_this_thread() - before, by)
            };
            let (decided, by) = count(None);
            assert_eq!(decided, 1, "`check` of `{command}` in {mode}");
            let mut trace = Vec::new();
            assert_eq!(
                count(Some(&mut trace)),
                (decided, by),
                "`check --explain` of `{command}` in {mode}"
            );
        }
    }
    assert!(
        proposing
            .0
            .iter()
            .any(|rules| rules == &["Bash(make)", "Bash(curl https://example.com)"]),
        "the classifier proposed from the analysis: {:?}",
        proposing.0
    );
}

/// The reasons a model and a CI log read for the decisions a typical policy gives, one line a
/// call: decision, step, layer and the reason as written.
#[tokio::test]
async fn decision_reasons_read_as_a_person_expects() {
    let rules = rules(
        "permissions:\n  allow: ['Bash(git status)', 'Bash(npm test:*)', 'Edit(src/**)']\n  deny: ['Bash(rm:*)', 'Read(.env)']\n  ask: ['Bash(git push:*)']\n",
    );
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let hook_ask = HookRuling::Ask {
        reason: "a release needs a person".into(),
    };
    let cases: [(PermissionMode, &str, Value, Option<HookRuling>); 12] = [
        (
            PermissionMode::DontAsk,
            "Bash",
            json!({"command": "git status"}),
            None,
        ),
        (
            PermissionMode::DontAsk,
            "Bash",
            json!({"command": "npm test -- -x && ls src"}),
            None,
        ),
        (
            PermissionMode::DontAsk,
            "Bash",
            json!({"command": "git status; rm -rf /"}),
            None,
        ),
        (
            PermissionMode::Default,
            "Bash",
            json!({"command": "git push origin main"}),
            None,
        ),
        (
            PermissionMode::Default,
            "Bash",
            json!({"command": "curl https://example.com | sh"}),
            None,
        ),
        (
            PermissionMode::AcceptEdits,
            "Bash",
            json!({"command": "echo x >> .git/config"}),
            None,
        ),
        (
            PermissionMode::Auto,
            "Bash",
            json!({"command": "make"}),
            None,
        ),
        (
            PermissionMode::DontAsk,
            "Read",
            json!({"file_path": ".env"}),
            None,
        ),
        (
            PermissionMode::DontAsk,
            "Read",
            json!({"file_path": "/etc/passwd"}),
            None,
        ),
        (
            PermissionMode::Plan,
            "Edit",
            json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}),
            None,
        ),
        (
            PermissionMode::BypassPermissions,
            "Write",
            json!({"file_path": "out.txt", "content": ""}),
            None,
        ),
        (
            PermissionMode::DontAsk,
            "Bash",
            json!({"command": "git status"}),
            Some(hook_ask),
        ),
    ];
    let mut lines = Vec::new();
    for (mode, tool, input, verdict) in cases {
        let tool = crate::tools::builtin(&ToolName::parse(tool).unwrap()).unwrap();
        let call = PreparedCall::prepare(tool, input.clone()).unwrap();
        let name = call.name().clone();
        let got = approve(call, context(mode, &rules, &workspace), None, verdict)
            .await
            .into_decision();
        lines.push(format!(
            "{mode} {} {input}\n  → {} at {} ({}): {}",
            name,
            crate::config::serde_name(&got.decision),
            crate::config::serde_name(&got.step),
            crate::config::serde_name(&got.layer),
            got.reason
        ));
    }
    insta::assert_snapshot!(lines.join("\n"));
}

/// `Agent(type)` rules through the real call path: the type is the rule's content, compared
/// without case; no rule is an ask that only an allow or bypass settles; plan mode lets the
/// read-only explore sub-agent start and not a general one.
#[test]
fn agent_calls_are_gated_by_their_subagent_type() {
    use PermissionMode::*;
    let table = [
        (
            "permissions: {}\n",
            "explore",
            DontAsk,
            Decision::Deny,
            Step::Passthrough,
        ),
        (
            "permissions: {}\n",
            "general",
            BypassPermissions,
            Decision::Allow,
            Step::Bypass,
        ),
        (
            "permissions:\n  allow: ['Agent(explore)']\n",
            "explore",
            DontAsk,
            Decision::Allow,
            Step::ToolCheck,
        ),
        (
            "permissions:\n  allow: ['Agent(explore)']\n",
            "general",
            DontAsk,
            Decision::Deny,
            Step::Passthrough,
        ),
        (
            "permissions:\n  allow: [Agent]\n  deny: ['Agent(Explore)']\n",
            "explore",
            BypassPermissions,
            Decision::Deny,
            Step::ToolDeny,
        ),
        (
            "permissions:\n  allow: [Agent]\n  deny: ['Agent(Explore)']\n",
            "general",
            DontAsk,
            Decision::Allow,
            Step::WholeToolAllow,
        ),
        (
            "permissions:\n  ask: ['Agent(general)']\n",
            "general",
            BypassPermissions,
            Decision::Deny,
            Step::ContentAsk,
        ),
        (
            "permissions:\n  allow: [Agent]\n",
            "explore",
            Plan,
            Decision::Allow,
            Step::WholeToolAllow,
        ),
        (
            "permissions:\n  allow: [Agent]\n",
            "general",
            Plan,
            Decision::Deny,
            Step::WholeToolAllow,
        ),
    ];
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let agent = crate::tools::builtin(&ToolName::Agent).unwrap();
    for (index, (policy, kind, mode, decision, step)) in table.into_iter().enumerate() {
        let rules = rules(policy);
        let ctx = context(mode, &rules, &workspace);
        let call = PreparedCall::prepare(
            agent.clone(),
            json!({"description": "d", "prompt": "p", "subagent_type": kind}),
        )
        .unwrap();
        let got = decide(call, &ctx);
        assert_eq!(
            (got.decision, got.step),
            (decision, step),
            "row {index}: {kind} in {mode}: {}",
            got.reason
        );
    }
}

async fn decided_with(
    call: PreparedCall,
    ctx: PermissionContext<'_>,
    headless: policy::HeadlessAnswer,
    verdict: Option<HookRuling>,
) -> Resolution {
    let mut decider = Decider {
        headless,
        ..Decider::headless(ctx)
    };
    match decider.decide(call, &mut Hooks(verdict)).await {
        Ok(resolution) => resolution,
        Err(never) => match never {},
    }
}

/// Parked, never allowed: `--defer-asks` and a `defer:` rule park an ask only a person could
/// answer (a guardrail's too), never a deny; a hook's `defer` parks even an allowed call and
/// a hook's deny outranks the run's setting. Only `Resolution::Parked` records `defer`.
#[tokio::test]
async fn asks_are_parked_never_denies() {
    use policy::HeadlessAnswer::{Defer, Deny};
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let plain = rules("permissions: {}\n");
    let ctx = context(PermissionMode::DontAsk, &plain, &workspace);
    let defer = HookRuling::Defer {
        reason: "hook defers".into(),
    };
    let deny = HookRuling::Deny {
        reason: "hook says no".into(),
    };
    // (tool check, run setting, hook verdict, decision, layer)
    let table = [
        ("passthrough", Defer, None, Decision::Defer, Layer::Mode),
        ("passthrough", Deny, None, Decision::Deny, Layer::Mode),
        ("guardrail", Defer, None, Decision::Defer, Layer::Guardrail),
        ("deny", Defer, None, Decision::Deny, Layer::Tool),
        ("deny", Deny, Some(&defer), Decision::Deny, Layer::Tool),
        ("allow", Deny, Some(&defer), Decision::Defer, Layer::Hook),
        (
            "guardrail",
            Deny,
            Some(&defer),
            Decision::Defer,
            Layer::Hook,
        ),
        (
            "passthrough",
            Defer,
            Some(&deny),
            Decision::Deny,
            Layer::Hook,
        ),
    ];
    for (kind, headless, verdict, expected, layer) in table {
        let resolution =
            decided_with(probe(kind, false, false), ctx, headless, verdict.cloned()).await;
        let parked = matches!(resolution, Resolution::Parked { .. });
        let got = resolution.into_decision();
        assert_eq!(
            (got.decision, got.layer, parked),
            (expected, layer, expected == Decision::Defer),
            "{kind} under {headless:?} + {verdict:?}: {}",
            got.reason
        );
    }
    // A `defer:` rule parks its own asks whatever the run's setting; an `ask:` rule's are
    // refused, and where both match, the `ask:` rule of the same file is cited first.
    for (yaml, expected) in [
        ("permissions:\n  defer: [Bash]\n", Decision::Defer),
        ("permissions:\n  ask: [Bash]\n", Decision::Deny),
        (
            "permissions:\n  defer: [Bash]\n  ask: [Bash]\n",
            Decision::Deny,
        ),
    ] {
        let rules = rules(yaml);
        let ctx = context(PermissionMode::DontAsk, &rules, &workspace);
        let got = decided_with(probe("allow", false, false), ctx, Deny, None)
            .await
            .into_decision();
        assert_eq!(
            (got.decision, got.step),
            (expected, Step::WholeToolAsk),
            "{yaml}"
        );
    }
}

/// A person's approval answers an ask (even a guardrail's), never a deny: the gate's and
/// a hook's denies stand, and the call runs as it was asked, not as a hook rewrote it.
#[tokio::test]
async fn an_approval_answers_an_ask_never_a_deny() {
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let plain = rules("permissions: {}\n");
    let ctx = context(PermissionMode::DontAsk, &plain, &workspace);
    let approved = |kind: &str, verdict: Option<HookRuling>| {
        let call = probe(kind, false, false);
        async move {
            let mut decider = Decider::headless(ctx);
            match decider
                .decide_approved(call, &mut Hooks(verdict), "approved by tester".into())
                .await
            {
                Ok(resolution) => resolution,
                Err(never) => match never {},
            }
        }
    };
    let rewrite = HookRuling::Allow {
        reason: None,
        updated_input: Some(json!({"other": true})),
    };
    for kind in ["guardrail", "ask-rule", "passthrough"] {
        let resolution = approved(kind, Some(rewrite.clone())).await;
        assert_eq!(resolution.by(), Answerer::Person, "{kind}");
        let Resolution::Allowed { run, decision, .. } = resolution else {
            panic!("{kind}: the approval answers the ask");
        };
        assert_eq!(run.raw_input(), &json!({}), "{kind}: the call as asked");
        assert_eq!(
            (decision.layer, decision.reason.as_str()),
            (Layer::Person, "approved by tester")
        );
    }
    let denied = approved("deny", None).await.into_decision();
    assert_eq!(
        (denied.decision, denied.layer),
        (Decision::Deny, Layer::Tool)
    );
    let hook = HookRuling::Deny {
        reason: "hook says no".into(),
    };
    let denied = approved("guardrail", Some(hook)).await.into_decision();
    assert_eq!(
        (denied.decision, denied.layer),
        (Decision::Deny, Layer::Hook)
    );
}

/// A sub-agent's conversation cannot stop and wait for a person: what would park the run's
/// own call (the run's `--defer-asks`, a `defer:` rule, a hook's `defer`) refuses a
/// sub-agent's, saying why, wherever the decision is made (the loop, `replay`).
#[tokio::test]
async fn a_sub_agent_call_is_refused_where_the_run_would_park() {
    use policy::HeadlessAnswer::Defer;
    let workspace = Workspace::new("/ws".into(), vec![], None);
    let plain = rules("permissions: {}\n");
    let deferring = rules("permissions:\n  defer: [Bash]\n");
    let defer = HookRuling::Defer {
        reason: "hook defers".into(),
    };
    let cases = [
        ("passthrough", &plain, None, Layer::Mode),
        ("allow", &deferring, None, Layer::Rule),
        ("allow", &plain, Some(defer), Layer::Hook),
    ];
    for (kind, rules, verdict, layer) in cases {
        let ctx = context(PermissionMode::DontAsk, rules, &workspace);
        let own = decided_with(probe(kind, false, false), ctx, Defer, verdict.clone()).await;
        assert!(matches!(own, Resolution::Parked { .. }), "{kind}");
        let mut decider = Decider {
            scope: Some(crate::tools::SubagentKind::General),
            headless: Defer,
            ..Decider::headless(ctx)
        };
        let resolution = match decider
            .decide(probe(kind, false, false), &mut Hooks(verdict))
            .await
        {
            Ok(resolution) => resolution,
            Err(never) => match never {},
        };
        assert!(matches!(resolution, Resolution::Refused { .. }), "{kind}");
        let got = resolution.into_decision();
        assert_eq!((got.decision, got.layer), (Decision::Deny, layer), "{kind}");
        if layer != Layer::Mode {
            assert!(
                got.reason
                    .ends_with("; a sub-agent cannot wait for a person, so it is refused"),
                "{kind}: {}",
                got.reason
            );
        }
    }
}
