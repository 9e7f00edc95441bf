//! The SARIF 2.1.0 report (`tollgate.sarif`) for code scanning: a rule per policy rule,
//! guardrail or check that produced a result, a result per refused call and failed check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use serde_sarif::sarif::{
    ArtifactLocation, Invocation, Location, Message, MultiformatMessageString, PhysicalLocation,
    PropertyBag, Region, ReportingConfiguration, ReportingDescriptor, Result as SarifResult,
    ResultLevel, Run, RunAutomationDetails, Sarif, Tool, ToolComponent,
};

use super::{input_summary, serde_name};
use crate::base::normalize_lexically;
use crate::policy::{Layer, Step};
use crate::sandbox::ProxyConnection;
use crate::task::FailOn;
use crate::transcript::Outcome;
use crate::transcript::final_outcome::{counts, denial_kind};
use crate::transcript::{CheckRecord, Denial, EffectExcess, RunReport};

pub(super) const SCHEMA: &str = "https://json-schema.org/schemas/2.1.0/sarif-schema-2.1.0.json";
/// `uriBaseId` for paths inside the run's workdir, so a results file stays meaningful when
/// the workdir is the repository checkout (GitHub resolves relative URIs against it).
const WORKDIR_BASE: &str = "WORKDIR";

pub fn sarif_json(report: &RunReport) -> Result<String, serde_json::Error> {
    let mut rules = Rules::default();
    let mut results = Vec::new();
    for denial in &report.denials {
        let index = rules.index_of(denial_rule(denial));
        results.push(denial_result(report, denial, index));
    }
    for excess in &report.effects.exceeded {
        let index = rules.index_of(effect_rule());
        results.push(effect_result(report, excess, index));
    }
    for record in failed_checks(report) {
        let index = rules.index_of(check_rule(record));
        results.push(check_result(report, record, index));
    }
    for connection in &report.network_refusals {
        let index = rules.index_of(network_rule());
        results.push(network_result(report, connection, index));
    }
    let driver = ToolComponent::builder()
        .name("tollgate")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(rules.descriptors)
        .build();
    let mut base_ids = BTreeMap::new();
    base_ids.insert(
        WORKDIR_BASE.to_string(),
        ArtifactLocation::builder()
            .uri(format!("{}/", file_uri(&report.workdir)))
            .build(),
    );
    let finished = !matches!(
        report.outcome,
        Outcome::ProviderError
            | Outcome::ContextOverflow
            | Outcome::ClassifierUnavailable
            | Outcome::McpStartFailed
            | Outcome::Interrupted
            | Outcome::Terminated
            | Outcome::OutputFailed
            | Outcome::Parked
    );
    let invocation = Invocation::builder()
        .execution_successful(finished)
        .exit_code(i64::from(report.exit_code.code()))
        .properties(bag([
            ("outcome", json!(serde_name(&report.outcome))),
            ("fail_on", json!(report.fail_on.to_string())),
            ("turns", json!(report.counts.turns)),
        ]))
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .original_uri_base_ids(base_ids)
        .automation_details(
            RunAutomationDetails::builder()
                .id(format!("tollgate/{}/{}", report.task_name, report.run_id))
                .build(),
        )
        .invocations(vec![invocation])
        .results(results)
        .build();
    let log = Sarif::builder()
        .schema(SCHEMA)
        .version(json!("2.1.0"))
        .runs(vec![run])
        .build();
    let mut value = serde_json::to_value(&log)?;
    crate::neutral::clean_json_strings(&mut value);
    serde_json::to_string_pretty(&value)
}

/// A call `tollgate replay` found refused then and allowed under the policy replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Flip {
    pub transcript: PathBuf,
    /// The `tool_call` line in the transcript.
    pub line: u64,
    /// Its position among the transcript's calls, 1-based.
    pub call: u64,
    pub id: String,
    pub tool: String,
    /// What the call was, in a line.
    pub input: String,
    /// Why it was refused, and why it would now be allowed.
    pub before: String,
    pub after: String,
}

/// `replay --sarif`: one error result per call that flips from refused to allowed, at its
/// transcript line, so a pull request that edits a policy shows what it would let through.
pub fn replay_sarif(flips: &[Flip]) -> Result<String, serde_json::Error> {
    let rule = descriptor(
        "replay/newly-allowed".to_string(),
        "A call the policy refused that the changed policy would allow.".to_string(),
        "Replayed under the changed policy, a call an earlier run was refused is now \
allowed: the change widens what an agent may do. Review each before merging."
            .to_string(),
    );
    let results: Vec<SarifResult> = flips
        .iter()
        .map(|flip| {
            let physical = PhysicalLocation::builder()
                .artifact_location(
                    ArtifactLocation::builder()
                        .uri(file_uri(&normalize_lexically(
                            &std::path::absolute(&flip.transcript)
                                .unwrap_or_else(|_| flip.transcript.clone()),
                        )))
                        .build(),
                )
                .region(
                    Region::builder()
                        .start_line(i64::try_from(flip.line.max(1)).unwrap_or(i64::MAX))
                        .build(),
                )
                .build();
            SarifResult::builder()
                .rule_id("replay/newly-allowed")
                .rule_index(0)
                .level(ResultLevel::Error)
                .message(plain_message(sentence(&format!(
                    "{} call #{} ({}) `{}` was refused ({}) and would now be allowed ({})",
                    flip.tool,
                    flip.call,
                    flip.id,
                    flip.input,
                    flip.before.trim_end_matches('.'),
                    flip.after.trim_end_matches('.')
                ))))
                .locations(vec![
                    Location::builder().physical_location(physical).build(),
                ])
                .build()
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("tollgate")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(vec![rule])
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .build();
    let sarif = Sarif::builder()
        .schema(SCHEMA)
        .version(json!("2.1.0"))
        .runs(vec![run])
        .build();
    // The inputs are a model's: inert wherever the file is shown.
    let mut value = serde_json::to_value(&sarif)?;
    crate::neutral::clean_json_strings(&mut value);
    serde_json::to_string_pretty(&value)
}

/// The last attempt of each check that did not pass: earlier attempts that a retry fixed
/// are no finding.
fn failed_checks(report: &RunReport) -> impl Iterator<Item = &CheckRecord> {
    report.checks.iter().filter(|record| {
        !record.outcome.passed
            && report
                .checks
                .iter()
                .filter(|other| other.check.name == record.check.name)
                .all(|other| other.attempt <= record.attempt)
    })
}

/// The rules in order of first use; a result cites its rule by index.
#[derive(Default)]
struct Rules {
    descriptors: Vec<ReportingDescriptor>,
}

impl Rules {
    fn index_of(&mut self, rule: ReportingDescriptor) -> i64 {
        let position = match self
            .descriptors
            .iter()
            .position(|known| known.id == rule.id)
        {
            Some(position) => position,
            None => {
                self.descriptors.push(rule);
                self.descriptors.len() - 1
            }
        };
        i64::try_from(position).unwrap_or(i64::MAX)
    }
}

pub(super) fn descriptor(id: String, short: String, help: String) -> ReportingDescriptor {
    ReportingDescriptor::builder()
        .id(id)
        .short_description(text(short.clone()))
        .full_description(text(short))
        .help(text(help))
        .default_configuration(
            ReportingConfiguration::builder()
                .level(json!("error"))
                .build(),
        )
        .build()
}

/// A SARIF rule for what refused the call: the policy rule itself when one decided, else
/// the layer (guardrail, tool check, mode…) that did.
fn denial_rule(denial: &Denial) -> ReportingDescriptor {
    let decision = &denial.decision;
    if let (Layer::Rule, Some(rule)) = (decision.layer, &decision.rule) {
        let kind = match decision.step {
            Step::WholeToolAsk | Step::ContentAsk => "ask",
            _ => "deny",
        };
        return descriptor(
            format!("policy/{}", rule.rule),
            format!("Policy {kind} rule {}.", rule.rule),
            format!(
                "The {kind} rule `{}` ({}) refused the call{}. If the task needs it, change the \
                 policy or the task; otherwise the agent tried something it should not.",
                rule.rule,
                rule.source,
                if kind == "ask" {
                    " (nobody can answer an ask in a headless run)"
                } else {
                    ""
                }
            ),
        );
    }
    let (id, short, help) = match decision.layer {
        _ if decision.step == Step::Pool => (
            "tool-pool".to_string(),
            "A tool that is not in the run's pool.".to_string(),
            "The model called a tool the task does not offer, or one a policy removed.",
        ),
        Layer::Guardrail => (
            "guardrail".to_string(),
            "A built-in safety guardrail.".to_string(),
            "Writes to .git/, .github/workflows/, .tollgate/, shell start-up files and similar \
             places are refused whatever the policy says: they run code later.",
        ),
        Layer::Tool => (
            format!("tool-check/{}", denial.tool),
            format!("{}'s own permission check.", denial.tool),
            "The tool refused the input itself: a path outside the workspace, or a command \
             it cannot prove safe and no allow rule covers.",
        ),
        Layer::Mode => (
            "permission-mode".to_string(),
            "The permission mode.".to_string(),
            "The mode (dontAsk, plan, the headless default) refused a call that no rule \
             allowed. Add an allow rule if the task needs it.",
        ),
        Layer::Interaction => (
            "interaction".to_string(),
            "A tool that needs a person.".to_string(),
            "The tool needs a person to answer; a headless run has none.",
        ),
        Layer::Hook => (
            "hook".to_string(),
            "A PreToolUse hook.".to_string(),
            "A PreToolUse hook from a policy refused the call (its reason is in the result); \
             hooks run after the rules and can only tighten them.",
        ),
        Layer::Classifier => (
            "classifier".to_string(),
            "The auto-mode classifier.".to_string(),
            "In auto mode, the classifier judged the call unsafe for the task and refused it.",
        ),
        Layer::Rule => (
            "policy".to_string(),
            "A policy rule.".to_string(),
            "A policy rule refused the call.",
        ),
        Layer::Person => (
            "person".to_string(),
            "A person's answer to a parked call.".to_string(),
            "The call was parked for a person (`tollgate approve`), who denied it.",
        ),
    };
    descriptor(id, short, help.to_string())
}

fn effect_rule() -> ReportingDescriptor {
    descriptor(
        "effect-ledger".to_string(),
        "A call changed more than its verdict allowed.".to_string(),
        "The effect ledger compares the workspace's metadata before and after each call: a \
         call allowed as read-only changed something, a write landed outside the paths its \
         decision named, or a guarded path (.git/ internals, .tollgate/, hooks, CI \
         definitions) or a file outside the workspace changed. Read-only calls run together \
         are measured together. Either the gate's analysis missed an effect, or the program \
         did more than its command line says."
            .to_string(),
    )
}

/// A call (for calls run together, the batch) whose effects exceeded its verdict: located
/// at the first path it should not have changed.
fn effect_result(report: &RunReport, excess: &EffectExcess, rule_index: i64) -> SarifResult {
    let effects = &excess.effects;
    let summary = input_summary(&excess.tool, &excess.input);
    let primary = effects
        .excess()
        .next()
        .map(|effect| location(report, &effect.path, None))
        .unwrap_or_else(|| location(report, &report.task_file, None));
    SarifResult::builder()
        .rule_id("effect-ledger")
        .rule_index(rule_index)
        .level(level(counts(&report.fail_on, FailOn::Effect)))
        .message(plain_message(sentence(&format!(
            "{} `{summary}` changed more than its verdict allowed: {}",
            excess.tool,
            effects.describe_excess()
        ))))
        .locations(vec![primary])
        .properties(bag([
            ("tool", json!(excess.tool)),
            ("input", json!(summary)),
            ("tool_use_id", json!(excess.id)),
            ("attribution", json!(effects.attribution)),
            ("batch", json!(effects.batch)),
            ("allowed", json!(effects.allowed)),
            (
                "changes",
                json!(
                    effects
                        .changes
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                ),
            ),
            ("incomplete", json!(effects.incomplete)),
        ]))
        .build()
}

fn network_rule() -> ReportingDescriptor {
    descriptor(
        "sandbox/network".to_string(),
        "The sandbox's network allowlist.".to_string(),
        "A sandboxed command asked tollgate's proxy for a host that is not in \
         sandbox.network.allowed_domains; the proxy refused it. Add the domain if the task \
         needs it."
            .to_string(),
    )
}

/// A connection the proxy refused. It is a warning: the command saw the refusal as an error
/// and the run's outcome already says whether that mattered.
fn network_result(
    report: &RunReport,
    connection: &ProxyConnection,
    rule_index: i64,
) -> SarifResult {
    SarifResult::builder()
        .rule_id("sandbox/network")
        .rule_index(rule_index)
        .level(ResultLevel::Warning)
        .message(plain_message(format!(
            "The sandbox refused a connection to {}:{} ({}): the host is not in sandbox.network.allowed_domains.",
            connection.host, connection.port, connection.method
        )))
        .locations(vec![location(report, &report.task_file, None)])
        .properties(bag([
            ("host", json!(connection.host)),
            ("port", json!(connection.port)),
            ("method", json!(connection.method)),
        ]))
        .build()
}

fn check_rule(record: &CheckRecord) -> ReportingDescriptor {
    let check = &record.check;
    descriptor(
        format!("check/{}", check.name),
        format!("Check {}.", check.name),
        format!(
            "The task's check `{}` runs `{}` after the agent stops and must exit {}.",
            check.name, check.run, check.expect_exit
        ),
    )
}

fn denial_result(report: &RunReport, denial: &Denial, rule_index: i64) -> SarifResult {
    let decision = &denial.decision;
    let summary = input_summary(&denial.tool, &denial.input);
    let rule_location = decision
        .rule
        .as_ref()
        .map(|rule| location(report, &rule.source.file, Some(rule.source.line)));
    let (primary, related) = match (touched_file(report, denial), rule_location) {
        (Some(file), rule) => (location(report, &file, None), rule),
        (None, Some(rule)) => (rule, None),
        (None, None) => (location(report, &report.task_file, None), None),
    };
    let mut result = SarifResult::builder()
        .rule_id(rule_id_of(denial))
        .rule_index(rule_index)
        .level(level(counts(&report.fail_on, denial_kind(decision))))
        .message(plain_message(format!(
            "Denied {} `{summary}`: {}",
            denial.tool,
            sentence(&decision.reason)
        )))
        .locations(vec![primary])
        .properties(bag([
            ("tool", json!(denial.tool)),
            ("input", json!(summary)),
            ("tool_use_id", json!(denial.id)),
            ("decision", json!(serde_name(&decision.decision))),
            ("step", json!(serde_name(&decision.step))),
            ("layer", json!(serde_name(&decision.layer))),
        ]))
        .build();
    result.related_locations = related.map(|related| vec![related]);
    result
}

fn rule_id_of(denial: &Denial) -> String {
    denial_rule(denial).id
}

fn check_result(report: &RunReport, record: &CheckRecord, rule_index: i64) -> SarifResult {
    let outcome = &record.outcome;
    let ended = match outcome.exit_code {
        Some(code) => format!("exited {code}, expected {}", outcome.expect_exit),
        None => "did not exit by itself".to_string(),
    };
    SarifResult::builder()
        .rule_id(format!("check/{}", record.check.name))
        .rule_index(rule_index)
        .level(level(counts(&report.fail_on, FailOn::Check)))
        .message(plain_message(format!(
            "Check {} failed after {} attempt(s): `{}` {ended}.",
            record.check.name, record.attempt, record.check.run
        )))
        .locations(vec![location(
            report,
            &report.task_file,
            Some(record.check.line),
        )])
        .properties(bag([
            ("attempt", json!(record.attempt)),
            ("exit_code", json!(outcome.exit_code)),
            ("output", json!(outcome.output)),
        ]))
        .build()
}

/// The file a file tool tried to touch, resolved against the workdir.
fn touched_file(report: &RunReport, denial: &Denial) -> Option<PathBuf> {
    if !denial.tool.is_file_tool() {
        return None;
    }
    let field = "file_path";
    let path = Path::new(denial.input.get(field)?.as_str()?);
    Some(normalize_lexically(&report.workdir.join(path)))
}

fn location(report: &RunReport, path: &Path, line: Option<u64>) -> Location {
    let absolute = normalize_lexically(&report.workdir.join(path));
    let artifact = match absolute.strip_prefix(&report.workdir) {
        Ok(relative) if !relative.as_os_str().is_empty() => ArtifactLocation::builder()
            .uri(encode_path(relative))
            .uri_base_id(WORKDIR_BASE)
            .build(),
        _ => ArtifactLocation::builder().uri(file_uri(&absolute)).build(),
    };
    // A whole-file finding (a file a tool tried to touch) starts at line 1: code-scanning
    // UIs and the Multitool want a region on every location.
    let line = line.filter(|line| *line > 0).unwrap_or(1);
    let physical = PhysicalLocation::builder()
        .artifact_location(artifact)
        .region(
            Region::builder()
                .start_line(i64::try_from(line).unwrap_or(i64::MAX))
                .build(),
        )
        .build();
    Location::builder().physical_location(physical).build()
}

fn level(fails_the_run: bool) -> ResultLevel {
    if fails_the_run {
        ResultLevel::Error
    } else {
        ResultLevel::Warning
    }
}

fn text(text: String) -> MultiformatMessageString {
    MultiformatMessageString::builder().text(text).build()
}

pub(super) fn plain_message(text: String) -> Message {
    Message::builder().text(text).build()
}

/// SARIF's message rules want a sentence: one that ends with a full stop.
pub(super) fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with(['.', '!', '?']) {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

pub(super) fn bag<const N: usize>(entries: [(&str, Value); N]) -> PropertyBag {
    PropertyBag::builder()
        .additional_properties(
            entries
                .into_iter()
                .map(|(key, value)| (key.to_string(), value))
                .collect::<BTreeMap<_, _>>(),
        )
        .build()
}

pub(super) fn file_uri(path: &Path) -> String {
    format!("file://{}", encode_path(path))
}

/// Percent-encodes a path for a URI, keeping `/` and RFC 3986's unreserved characters.
pub(super) fn encode_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(byte))
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;
    use crate::task::FailOnSet;

    #[test]
    fn a_result_per_denial_failed_check_and_exceeding_call_valid_against_the_schema() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../../tests/fixtures/sarif-2.1.0.json"))
                .unwrap();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let mut report = sample_report();
        let log: Value = serde_json::from_str(&sarif_json(&report).unwrap()).unwrap();
        assert!(validator.is_valid(&log));
        let run = &log["runs"][0];
        let rules: Vec<&Value> = run["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["id"])
            .collect();
        assert_eq!(
            rules,
            [
                &json!("policy/Bash(rm:*)"),
                &json!("effect-ledger"),
                &json!("check/tests")
            ]
        );
        let mut results = run["results"].as_array().unwrap().clone();
        assert_eq!(
            results.len(),
            3,
            "one finding for the check, not one per attempt"
        );
        let effect = results.remove(1);
        assert_eq!(
            effect["locations"][0]["physicalLocation"]["artifactLocation"],
            json!({"uri": ".git/hooks/pre-commit", "uriBaseId": "WORKDIR"})
        );
        assert_eq!(
            effect["message"]["text"],
            "Bash `./gen.sh` changed more than its verdict allowed: created \
             .git/hooks/pre-commit (restored by the sandbox) — a guarded path: a protected \
             file, which sandboxed commands may not change."
        );
        assert_eq!(effect["properties"]["tool_use_id"], "toolu_2");
        assert_eq!(effect["level"], "error");
        assert_eq!(
            results[0]["locations"][0]["physicalLocation"]["artifactLocation"],
            json!({"uri": "policies/ci.yaml", "uriBaseId": "WORKDIR"})
        );
        assert_eq!(
            results[1]["locations"][0]["physicalLocation"]["region"]["startLine"],
            12
        );
        assert_eq!(
            results[1]["message"]["text"],
            "Check tests failed after 2 attempt(s): `cargo test` exited 101, expected 0."
        );
        assert_eq!(
            (results[0]["level"].clone(), results[1]["level"].clone()),
            (json!("error"), json!("error"))
        );

        report.fail_on = FailOnSet::none();
        let lenient: Value = serde_json::from_str(&sarif_json(&report).unwrap()).unwrap();
        for result in lenient["runs"][0]["results"].as_array().unwrap() {
            assert_eq!(result["level"], "warning");
        }
    }

    #[test]
    fn paths_become_valid_uris() {
        assert_eq!(encode_path(Path::new("src/a b#c.rs")), "src/a%20b%23c.rs");
        assert_eq!(file_uri(Path::new("/w/x")), "file:///w/x");
        assert_eq!(sentence("refused"), "refused.");
        assert_eq!(sentence("refused."), "refused.");
    }
}
