//! `tollgate check`: decisions without execution — one call (optionally explained step by
//! step), or a JSONL stream of calls decided in one process.

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CheckArgs;
use crate::call::{Decider, PreparedCall, Resolution, Unreached};
use crate::config::{SourceLocation, serde_name};
use crate::exit::ExitCode;
use crate::policy::{
    Decision, Layer, PermissionContext, PermissionDecision, PermissionMode, PolicySource, Step,
    ToolName, TraceStep,
};
use crate::session::{PolicyInForce, canonical_dir};
use crate::tools::{Tool, builtin};

#[derive(Debug, Serialize)]
struct DecisionLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    decision: Decision,
    step: Step,
    layer: Layer,
    rule: Option<&'a str>,
    #[serde(serialize_with = "as_text")]
    source: Option<&'a SourceLocation>,
    reason: &'a str,
    /// Auto mode: who settles the call (`check --mode auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    auto: Option<super::auto::AutoLine>,
}

impl<'a> DecisionLine<'a> {
    fn new(decision: &'a PermissionDecision, id: Option<&'a Value>, tool: Option<&'a str>) -> Self {
        DecisionLine {
            id,
            tool,
            decision: decision.decision,
            step: decision.step,
            layer: decision.layer,
            rule: decision.rule.as_ref().map(|rule| rule.rule.as_str()),
            source: decision.rule.as_ref().map(|rule| &rule.source),
            reason: &decision.reason,
            auto: None,
        }
    }
}

impl DecisionLine<'_> {
    /// The line as `serde_json::to_writer` writes it, with each string copied whole when
    /// nothing in it needs escaping (nearly always): serde_json escapes byte by byte, and
    /// a decision line is mostly its reason. An auto-mode line is left to serde.
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if self.auto.is_some() {
            return serde_json::to_writer(out, self);
        }
        out.push(b'{');
        if let Some(id) = self.id {
            out.extend_from_slice(b"\"id\":");
            serde_json::to_writer(&mut *out, id)?;
            out.push(b',');
        }
        if let Some(tool) = self.tool {
            out.extend_from_slice(b"\"tool\":");
            json_string(out, tool)?;
            out.push(b',');
        }
        out.extend_from_slice(b"\"decision\":");
        serde_json::to_writer(&mut *out, &self.decision)?;
        out.extend_from_slice(b",\"step\":");
        serde_json::to_writer(&mut *out, &self.step)?;
        out.extend_from_slice(b",\"layer\":");
        serde_json::to_writer(&mut *out, &self.layer)?;
        out.extend_from_slice(b",\"rule\":");
        match self.rule {
            Some(rule) => json_string(out, rule)?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"source\":");
        match self.source {
            Some(source) => json_string(out, &source.to_string())?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"reason\":");
        json_string(out, self.reason)?;
        out.push(b'}');
        Ok(())
    }
}

/// `text` as a JSON string, as serde_json writes it: it escapes only `"`, `\\` and control
/// characters.
fn json_string(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    // A fold without an early exit, which the compiler turns into a vector loop.
    let needs_escape = text.bytes().fold(false, |seen, b| {
        seen | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if !needs_escape {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, text)
    }
}

/// A rule's place as the text `file:line` it displays as, written straight into the line.
fn as_text<S: serde::Serializer>(
    source: &Option<&SourceLocation>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match source {
        Some(source) => serializer.collect_str(source),
        None => serializer.serialize_none(),
    }
}

/// What the classifier is told when `check` has no `--intent`.
const NO_INTENT: &str = "(no task was given: judge the call on its own)";

/// One call of a `--calls` stream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallLine {
    id: Option<Value>,
    tool: String,
    #[serde(default)]
    input: Value,
}

pub fn check(args: CheckArgs) -> Result<ExitCode> {
    let workdir = canonical_dir(args.workdir.as_deref().unwrap_or(Path::new(".")), "workdir")?;
    let flags = args.rules.sources(args.policy.as_deref());
    let gate = PolicyInForce::load(flags, workdir, args.mode)?;
    let ctx = gate.context();
    let sources = &gate.sources;
    let mut tools = ToolCache::default();
    if let Some(calls) = &args.calls {
        // Nothing runs between a stream's decisions, so the disk is looked at once for all
        // of them (see `DiskView`).
        let disk = crate::base::DiskView::default();
        let ctx = PermissionContext {
            disk: Some(&disk),
            ..ctx
        };
        let strongest = decide_stream(calls, &ctx, &mut tools)?;
        return Ok(exit_code(args.exit_code, strongest));
    }
    let (Some(tool), Some(input)) = (&args.tool, &args.input) else {
        return Err(anyhow!("give --tool and --input, or --calls FILE"));
    };
    let input: Value = serde_json::from_str(input).context("--input is not valid JSON")?;
    if args.explain {
        super::print_out(&crate::neutral::log_text(&explain(
            tool, &input, &ctx, sources, &mut tools,
        )));
        return Ok(ExitCode::Success);
    }
    let resolution = decide(tool, input.clone(), &ctx, &mut tools);
    let mut line = DecisionLine::new(resolution.decision(), None, None);
    if gate.mode == PermissionMode::Auto {
        let intent = args.intent.as_deref().unwrap_or(NO_INTENT);
        line.auto = Some(super::auto::check_line(
            &gate,
            &ctx,
            &resolution,
            tool,
            &input,
            intent,
        )?);
    }
    let decided = line.decision;
    let line = serde_json::to_string(&line)?;
    super::print_out(&format!(
        "{}
",
        crate::neutral::json_log_line(&line)
    ));
    Ok(exit_code(args.exit_code, Some(decided)))
}

/// `--exit-code`: the decision as the process's code, in the run's vocabulary — 3 is the
/// policy's refusal, 1 an ask nobody answered, 0 allowed (also for an empty stream).
fn exit_code(asked_for: bool, decision: Option<Decision>) -> ExitCode {
    match (asked_for, decision) {
        (true, Some(Decision::Deny)) => ExitCode::PolicyStop,
        (true, Some(Decision::Ask | Decision::Defer)) => ExitCode::TaskFailed,
        _ => ExitCode::Success,
    }
}

/// Deny outranks defer, defer ask, ask allow: a stream's code is its strongest line.
fn strongest(seen: Option<Decision>, next: Decision) -> Decision {
    let rank = |decision: Decision| match decision {
        Decision::Allow => 0,
        Decision::Ask => 1,
        Decision::Defer => 2,
        Decision::Deny => 3,
    };
    match seen {
        Some(seen) if rank(seen) >= rank(next) => seen,
        _ => next,
    }
}

/// Built-in tools by name (and MCP names as the gate sees them without their server), made
/// once per stream.
#[derive(Default)]
struct ToolCache(HashMap<String, Option<Arc<dyn Tool>>>);

impl ToolCache {
    fn get(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        // Looked up by `&str` first: the key is copied only the first time a name is seen.
        if let Some(found) = self.0.get(name) {
            return found.clone();
        }
        let found = ToolName::parse(name)
            .and_then(|name| builtin(&name).or_else(|| crate::mcp::stand_in(&name)));
        self.0.insert(name.to_string(), found.clone());
        found
    }
}

/// The call prepared once, or why it never reaches the gate (no such tool, an invalid input),
/// answered as a run answers it.
#[expect(
    clippy::result_large_err,
    reason = "the early answer is made once per call and used at once: boxing it only adds an allocation"
)]
fn prepare(tool: &str, input: Value, tools: &mut ToolCache) -> Result<PreparedCall, Unreached> {
    // Agent is made per call: a custom agent's call is judged by the name it gives.
    let found = if ToolName::parse(tool) == Some(ToolName::Agent) {
        Some(Arc::new(crate::tools::AgentTool::naming(&input)) as Arc<dyn Tool>)
    } else {
        tools.get(tool)
    };
    crate::call::prepare(tool, found, input, None)
}

/// The policy's decision, as a run without hooks or a classifier makes it.
fn decide(tool: &str, input: Value, ctx: &PermissionContext, tools: &mut ToolCache) -> Resolution {
    match prepare(tool, input, tools) {
        Ok(call) => Decider::headless(*ctx).decide_now(call),
        Err(unreached) => Resolution::unreached(&unreached),
    }
}

/// Decides every line of `path` (`-` is stdin), writing one decision a line. A line that is
/// not a call is answered with a deny saying why, so the output stays one line per input.
/// Returns the strongest decision written.
fn decide_stream(
    path: &Path,
    ctx: &PermissionContext,
    tools: &mut ToolCache,
) -> Result<Option<Decision>> {
    let mut reader: Box<dyn BufRead> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut bytes = Vec::new();
    // One buffer for every decision's JSON, as for every line read.
    let mut rendered = Vec::new();
    let mut seen = None;
    for number in 1.. {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .with_context(|| format!("cannot read line {number} of {}", path.display()))?;
        if read == 0 {
            break;
        }
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let decision = match call_line(number, line) {
            Ok(call) => (
                decide(&call.tool, call.input, ctx, tools).into_decision(),
                call.id,
                Some(call.tool),
            ),
            Err(reason) => (crate::call::refused_at_pool(reason), None, None),
        };
        let (decision, id, tool) = decision;
        seen = Some(strongest(seen, decision.decision));
        rendered.clear();
        DecisionLine::new(&decision, id.as_ref(), tool.as_deref())
            .write(&mut rendered)
            .context("cannot write a decision")?;
        let text = std::str::from_utf8(&rendered).context("cannot write a decision")?;
        // The calls may be a model's: inert on a CI runner's log (see `neutral`).
        out.write_all(crate::neutral::json_log_line(text).as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .context("cannot write a decision")?;
    }
    out.flush().context("cannot write the decisions")?;
    Ok(seen)
}

/// One line of a `--calls` stream as a call, or why it is not one. Every line gets an answer,
/// blank and binary ones too, so a consumer can pair outputs with inputs by position.
fn call_line(number: usize, line: &[u8]) -> Result<CallLine, String> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(format!("line {number} is not UTF-8 text"));
    };
    if text.trim().is_empty() {
        return Err(format!("line {number} is blank, not a call"));
    }
    serde_json::from_str::<CallLine>(text).map_err(|err| {
        format!("line {number} is not a call {{\"id\"?, \"tool\", \"input\"}}: {err}")
    })
}

/// The `--explain` text: the sources in force, then every pipeline step with what it saw.
fn explain(
    tool: &str,
    input: &Value,
    ctx: &PermissionContext,
    sources: &[PolicySource],
    tools: &mut ToolCache,
) -> String {
    let mut out = format!("call: {tool} {input}\nmode: {}\n", ctx.mode);
    out.push_str("policy sources (highest precedence first):\n");
    if sources.is_empty() {
        out.push_str("  (none: no rules)\n");
    }
    let mut ordered: Vec<&PolicySource> = sources.iter().collect();
    ordered.sort_by_key(|source| source.kind);
    for source in ordered {
        let kind = serde_name(&source.kind);
        out.push_str(&format!(
            "  {kind:<12} {} ({})\n",
            source.policy.file.display(),
            crate::base::counted(source.policy.rules.len(), "rule")
        ));
    }
    for rule in ctx.rules.ignored() {
        out.push_str(&format!(
            "  ignored: {} rule {} at {} (the managed policy is managed_only)\n",
            rule.kind, rule.text, rule.source
        ));
    }
    let mut trace: Vec<TraceStep> = Vec::new();
    let decision = match prepare(tool, input.clone(), tools) {
        Err(unreached) => unreached.decision(),
        Ok(call) => Decider {
            trace: Some(&mut trace),
            ..Decider::headless(*ctx)
        }
        .decide_now(call)
        .into_decision(),
    };
    out.push_str("pipeline:\n");
    for step in &trace {
        if step.step.is_empty() {
            out.push_str(&format!("         · {}\n", step.saw));
        } else {
            out.push_str(&format!(
                "  {:<5} {:<9} {}\n",
                step.step, step.outcome, step.saw
            ));
        }
    }
    let line = DecisionLine::new(&decision, None, None);
    let step = serde_name(&line.step);
    let layer = serde_name(&line.layer);
    let decided = serde_name(&line.decision);
    out.push_str(&format!(
        "decision: {decided} (step {step}, layer {layer})\nreason: {}\n",
        decision.reason
    ));
    if let Some(rule) = &decision.rule {
        out.push_str(&format!("rule: {} at {}\n", rule.rule, rule.source));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::policy::{
        PermissionMode, Policy, PolicyOrigin, PolicySource, RuleRef, RuleSet, SourceKind, Workspace,
    };

    fn source(kind: SourceKind, file: &str, yaml: &str) -> PolicySource {
        let origin = PolicyOrigin {
            file: Path::new(file),
            dir: Path::new("/repo"),
            home: None,
        };
        PolicySource {
            kind,
            policy: Policy::parse(yaml, origin).unwrap(),
        }
    }

    /// The line written by hand is the line serde writes, escapes, ids and nulls included.
    #[test]
    fn a_decision_line_is_written_as_serde_writes_it() {
        let rule = RuleRef {
            rule: "Bash(git \"log\":*)".to_owned(),
            source: SourceLocation {
                file: "dir/pol\\icy \u{e9}.yaml".into(),
                line: 38,
            },
            headless: crate::policy::HeadlessAnswer::Deny,
        };
        let reasons = [
            "plain",
            "`echo \"x\"` and \\ and a tab\there, a newline\n, \u{1}, \u{7f}, caf\u{e9} \u{1f600}",
            "",
        ];
        let ids = [
            None,
            Some(json!(7)),
            Some(json!("a\"b")),
            Some(json!({"k": [1, null]})),
        ];
        for reason in reasons {
            for id in &ids {
                for tool in [None, Some("Bash"), Some("mcp__s\"__t")] {
                    for (decision, rule) in [
                        (Decision::Deny, Some(rule.clone())),
                        (Decision::Allow, None),
                    ] {
                        let decision = PermissionDecision {
                            decision,
                            step: Step::ToolCheck,
                            layer: Layer::Rule,
                            rule,
                            reason: reason.to_owned(),
                            updated_input: None,
                            asked: false,
                        };
                        let line = DecisionLine::new(&decision, id.as_ref(), tool);
                        let mut written = Vec::new();
                        line.write(&mut written).unwrap();
                        let serde = serde_json::to_vec(&line).unwrap();
                        assert_eq!(
                            String::from_utf8(written).unwrap(),
                            String::from_utf8(serde).unwrap()
                        );
                    }
                }
            }
        }
    }

    /// `check --explain` as a policy author reads it: sources, each step, the Bash analysis,
    /// the mode's answer to an ask, and the decision with its rule.
    #[test]
    fn explain_shows_every_step_a_person_needs() {
        let sources = [
            source(
                SourceKind::Managed,
                "/etc/tollgate/policy.yaml",
                "permissions:\n  deny: ['Bash(rm:*)']\n",
            ),
            source(
                SourceKind::Task,
                "/repo/task.yaml",
                "permissions:\n  allow: ['Bash(git status)', 'Bash(npm test:*)']\n  ask: ['Bash(git push:*)']\n",
            ),
        ];
        let rules = RuleSet::from_sources(&sources);
        let workspace = Workspace::new("/repo".into(), vec![], None);
        let mut text = String::new();
        for (mode, tool, input) in [
            (
                PermissionMode::DontAsk,
                "Bash",
                r#"{"command": "git status && npm test"}"#,
            ),
            (
                PermissionMode::DontAsk,
                "Bash",
                r#"{"command": "git status; rm -rf build"}"#,
            ),
            (
                PermissionMode::Default,
                "Bash",
                r#"{"command": "git push origin main"}"#,
            ),
            (
                PermissionMode::AcceptEdits,
                "Bash",
                r#"{"command": "curl https://example.com"}"#,
            ),
            (
                PermissionMode::Auto,
                "Read",
                r#"{"file_path": "/etc/hosts"}"#,
            ),
            (
                PermissionMode::Plan,
                "Write",
                r#"{"file_path": "notes.md", "content": ""}"#,
            ),
            (PermissionMode::DontAsk, "Fly", "{}"),
        ] {
            let ctx = PermissionContext {
                disk: None,
                auto_allow_bash: false,
                mode,
                rules: &rules,
                workspace: &workspace,
            };
            let input: Value = serde_json::from_str(input).unwrap();
            text.push_str(&explain(
                tool,
                &input,
                &ctx,
                &sources,
                &mut ToolCache::default(),
            ));
            text.push_str("---\n");
        }
        insta::assert_snapshot!(text);
    }
}
