//! Auto mode outside a run: `tollgate auto eval` measures the configured classifier on
//! labelled cases, and `check --mode auto` says whether the fast path or the classifier
//! decides a call (and, with a configured provider, what the classifier says).

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use serde_json::Value;

use super::AutoEvalArgs;
use crate::call::{Answerer, Awaited, Resolution};
use crate::classifier::{
    Action, Classifier, Judgement, Risk, default_model,
    eval::{parse_cases, run_eval},
};
use crate::exit::ExitCode;
use crate::model::{RetryPolicy, Timeouts};
use crate::policy::{Decision, PermissionContext, PolicySource};
use crate::session::{
    PolicyInForce, SourceFlags, auto_classifier, canonical_dir, home_dir, load_sources, load_task,
};
use crate::settings::{ClassifierProvider, merge_auto_mode};
use crate::task::{ModelSpec, ProviderKind};

/// Who settles a call in auto mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoRoute {
    /// A rule, a guardrail or the tool's own check decided before any ask.
    Gate,
    /// The fast path allowed it without a model call.
    FastPath,
    /// The classifier is asked.
    Classifier,
}

impl AutoRoute {
    /// Read from who answered the call's decision in a run without a classifier.
    pub fn of(resolution: &Resolution) -> AutoRoute {
        match resolution.by() {
            Answerer::FastPath => AutoRoute::FastPath,
            Answerer::Mode(Awaited::Classifier) | Answerer::Classifier => AutoRoute::Classifier,
            Answerer::Gate(_)
            | Answerer::Pool
            | Answerer::Scope
            | Answerer::Hook
            | Answerer::Person
            | Answerer::Mode(Awaited::Person) => AutoRoute::Gate,
        }
    }
}

/// What `check --mode auto` adds to a decision line.
#[derive(Debug, Serialize)]
pub struct AutoLine {
    pub route: AutoRoute,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classifier: Option<ClassifierLine>,
}

#[derive(Debug, Serialize)]
pub struct ClassifierLine {
    pub model: String,
    pub decision: Decision,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposed_rules: Vec<String>,
}

/// The route of a checked call and, when the policies name a classifier provider, its
/// verdict for `intent` (a check has no task, so the provider must be explicit).
pub fn check_line(
    gate: &PolicyInForce,
    ctx: &PermissionContext,
    resolution: &Resolution,
    tool: &str,
    input: &Value,
    intent: &str,
) -> Result<AutoLine> {
    let route = AutoRoute::of(resolution);
    if route != AutoRoute::Classifier {
        return Ok(AutoLine {
            route,
            classifier: None,
        });
    }
    let Some(mut classifier) = configured(&gate.sources, None)? else {
        return Ok(AutoLine {
            route,
            classifier: None,
        });
    };
    let action = Action {
        tool: tool.to_string(),
        input: input.clone(),
    };
    let judged = block_on(classifier.judge(intent, &action))?;
    let model = classifier.model().to_string();
    let (decision, reason, risk, proposed_rules) = match judged.judgement {
        Judgement::Allow { reason, risk } => (Decision::Allow, reason, Some(risk), Vec::new()),
        Judgement::Deny { reason, risk } => {
            // The proposal reads the analysis the decision's gate made.
            let rules = resolution
                .call()
                .map_or_else(Vec::new, |call| call.proposed_rules(ctx));
            (Decision::Deny, reason, risk, rules)
        }
        Judgement::Unavailable { reason } => (Decision::Deny, reason, None, Vec::new()),
    };
    Ok(AutoLine {
        route,
        classifier: Some(ClassifierLine {
            model,
            decision,
            reason,
            risk,
            proposed_rules,
        }),
    })
}

fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

/// The classifier the policies configure: the task's provider by default, else the one they
/// name. `None` when neither gives one.
fn configured(
    sources: &[PolicySource],
    task_model: Option<&ModelSpec>,
) -> Result<Option<Classifier>> {
    let config = merge_auto_mode(sources);
    let model = match (task_model, config.classifier.provider) {
        (Some(model), _) => model.clone(),
        (None, Some(provider)) => standalone_model(provider),
        (None, None) => return Ok(None),
    };
    Ok(auto_classifier(&model, &config)?)
}

/// A model spec with the defaults, for a classifier used without a task.
fn standalone_model(provider: ClassifierProvider) -> ModelSpec {
    let kind = match provider {
        ClassifierProvider::Scripted => ProviderKind::Scripted,
        ClassifierProvider::Anthropic => ProviderKind::Anthropic,
        ClassifierProvider::Openai => ProviderKind::Openai,
    };
    ModelSpec {
        provider: kind,
        name: default_model(kind).to_string(),
        max_tokens: crate::classifier::DEFAULT_MAX_TOKENS,
        base_url: None,
        api_key_env: None,
        thinking_budget: None,
        // The classifier answers in a few words; it is not asked to reason at length.
        effort: None,
        platform: None,
        region: None,
        project: None,
        pricing_override: None,
        timeouts: Timeouts::default(),
        retries: RetryPolicy::default(),
        fallback: None,
        stream: crate::model::Streaming::Auto,
    }
}

/// `tollgate auto eval CASES.jsonl`: the matrix on stdout; exit 0 (a measurement, not a gate).
pub fn eval(args: AutoEvalArgs) -> Result<ExitCode> {
    let text =
        crate::input_file::read_text(&args.cases, crate::input_file::Input::config("cases file"))?;
    let cases = parse_cases(&text).map_err(|err| anyhow!("{}: {err}", args.cases.display()))?;
    let home = home_dir();
    let task = args
        .task
        .as_deref()
        .map(|path| load_task(path, home.as_deref()))
        .transpose()?;
    let workdir = canonical_dir(Path::new("."), "workdir")?;
    let none: [String; 0] = [];
    let flags = SourceFlags {
        policy: args.policy.as_deref(),
        allow: &none,
        deny: &none,
        ask: &none,
        strict: false,
    };
    let sources = load_sources(flags, task.as_ref(), &workdir, home.as_deref())?;
    let mut classifier = configured(&sources, task.as_ref().map(|task| &task.model))?.ok_or_else(
        || anyhow!("no classifier is configured: give a policy with `classifier: {{provider: …}}`, or --task for its provider"),
    )?;
    let report = block_on(run_eval(&mut classifier, &cases))?;
    super::print_out(&report.render(classifier.model()));
    Ok(ExitCode::Success)
}
