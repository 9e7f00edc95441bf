//! The SARIF log of `tollgate replay --sarif`: one result per recorded call that a changed
//! policy would let through where the run refused it, located at the policy file, so a pull
//! request that edits a policy shows in code scanning what it would newly allow.

use std::path::{Path, PathBuf};

use serde_json::json;
use serde_sarif::sarif::{
    ArtifactLocation, Location, PhysicalLocation, Region, Result as SarifResult, ResultLevel, Run,
    Sarif, Tool, ToolComponent,
};

use super::sarif::{SCHEMA, bag, descriptor, encode_path, file_uri, plain_message, sentence};
use crate::policy::{Decision, Step};

const RULE: &str = "replay/newly-allowed";

/// A recorded call the replayed policy decides differently.
#[derive(Debug, Clone)]
pub struct Flip {
    pub transcript: PathBuf,
    pub run_id: Option<String>,
    /// The call's position among its transcript's calls, 1-based.
    pub position: u64,
    pub id: String,
    pub tool: String,
    /// The call in one line (`Bash(git push --force)`).
    pub summary: String,
    pub before: (Decision, Step, String),
    pub after: (Decision, Step, String),
}

impl Flip {
    /// Refused (or asked) before, allowed now.
    pub fn widens(&self) -> bool {
        self.before.0 != Decision::Allow && self.after.0 == Decision::Allow
    }
}

/// The log for `flips` (only those that widen become results), located at `policy` when
/// given (relative paths stay relative, as code scanning resolves them against the checkout).
pub fn replay_sarif(flips: &[Flip], policy: Option<&Path>) -> Result<String, serde_json::Error> {
    let rule = descriptor(
        RULE.into(),
        "A call the run refused would be allowed".into(),
        "The changed policy allows a call that the recorded run refused or asked about. \
         Review whether the policy change means to grant it."
            .into(),
    );
    let results: Vec<SarifResult> = flips
        .iter()
        .filter(|flip| flip.widens())
        .map(|flip| {
            let (was, was_step, why) = &flip.before;
            let run = flip.run_id.as_deref().unwrap_or("an unnamed run");
            let message = sentence(&format!(
                "Under this policy {} would be allowed (step {}); run {run} had it {} at step {}: {why}",
                flip.summary,
                super::serde_name(&flip.after.1),
                super::serde_name(was),
                super::serde_name(was_step),
            ));
            let located = policy.unwrap_or(&flip.transcript);
            let artifact = if located.is_absolute() {
                ArtifactLocation::builder().uri(file_uri(located)).build()
            } else {
                ArtifactLocation::builder().uri(encode_path(located)).build()
            };
            let physical = PhysicalLocation::builder()
                .artifact_location(artifact)
                .region(Region::builder().start_line(1).build())
                .build();
            SarifResult::builder()
                .rule_id(RULE)
                .rule_index(0)
                .level(ResultLevel::Error)
                .message(plain_message(message))
                .locations(vec![Location::builder().physical_location(physical).build()])
                .properties(bag([
                    ("transcript", json!(flip.transcript.display().to_string())),
                    ("run_id", json!(flip.run_id)),
                    ("call", json!(flip.position)),
                    ("tool_use_id", json!(flip.id)),
                    ("tool", json!(flip.tool)),
                    ("before", json!(super::serde_name(was))),
                    ("after", json!(super::serde_name(&flip.after.0))),
                ]))
                .build()
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("tollgate")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(vec![rule])
        .build();
    let log = Sarif::builder()
        .schema(SCHEMA)
        .version(json!("2.1.0"))
        .runs(vec![
            Run::builder()
                .tool(Tool::builder().driver(driver).build())
                .results(results)
                .build(),
        ])
        .build();
    let mut value = serde_json::to_value(&log)?;
    crate::neutral::clean_json_strings(&mut value);
    serde_json::to_string_pretty(&value)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_result_per_call_newly_allowed_valid_against_the_schema() {
        let schema: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/sarif-2.1.0.json")).unwrap();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let flip = |before, after| Flip {
            transcript: PathBuf::from("runs/a/transcript.jsonl"),
            run_id: Some("r1".into()),
            position: 3,
            id: "toolu_3".into(),
            tool: "Bash".into(),
            summary: "Bash(git push)".into(),
            before: (
                before,
                Step::ToolDeny,
                "denied by rule Bash(git push:*)".into(),
            ),
            after: (
                after,
                Step::WholeToolAllow,
                "allowed by rule Bash(git:*)".into(),
            ),
        };
        let flips = [
            flip(Decision::Deny, Decision::Allow),
            flip(Decision::Allow, Decision::Deny),
            flip(Decision::Ask, Decision::Allow),
        ];
        let log: Value = serde_json::from_str(
            &replay_sarif(&flips, Some(Path::new("policies/ci.yaml"))).unwrap(),
        )
        .unwrap();
        assert!(validator.is_valid(&log), "{log:#}");
        let results = log["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "only the calls newly allowed");
        assert_eq!(
            results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "policies/ci.yaml"
        );
        let message = results[0]["message"]["text"].as_str().unwrap();
        assert!(
            message.starts_with("Under this policy Bash(git push) would be allowed"),
            "{message}"
        );
        assert!(
            message.contains("run r1 had it deny at step 1d"),
            "{message}"
        );
        assert_eq!(results[1]["properties"]["before"], "ask");
    }
}
