//! A run's findings on a pull request: the final answer under the findings schema
//! (`{summary, findings: [{file, line, severity, text}]}`) posted as one review whose inline
//! comments sit on the changed lines, and the same findings as SARIF for code scanning. Each
//! finding carries a fingerprint (of its file, line and text), so a finding an earlier run
//! already posted on the pull request is not posted again, and code scanning keeps one alert.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::fleet::{Forge, ForgeError};

/// The JSON Schema a reviewing run's answer is held to (`--output-schema`).
pub const FINDINGS_SCHEMA: &str = r#"{
  "type": "object",
  "required": ["summary", "findings"],
  "additionalProperties": false,
  "properties": {
    "summary": {"type": "string"},
    "findings": {
      "type": "array",
      "items": {
        "type": "object",
        "required": ["file", "line", "severity", "text"],
        "additionalProperties": false,
        "properties": {
          "file": {"type": "string", "minLength": 1},
          "line": {"type": "integer", "minimum": 1},
          "severity": {"enum": ["error", "warning", "note"]},
          "text": {"type": "string", "minLength": 1}
        }
      }
    }
  }
}"#;

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Findings {
    pub summary: String,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Finding {
    pub file: String,
    pub line: u64,
    pub severity: String,
    pub text: String,
}

impl Finding {
    /// Stable across runs for the same finding: the file, the line and the words.
    pub fn fingerprint(&self) -> String {
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            format!("{}\n{}\n{}", self.file, self.line, self.text.trim()).as_bytes(),
        );
        digest.as_ref()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

fn marker(fingerprint: &str) -> String {
    format!("<!-- tollgate-finding:{fingerprint} -->")
}

/// What was posted.
#[derive(Debug, PartialEq)]
pub struct Posted {
    pub new: usize,
    pub already: usize,
}

/// Posts the findings not posted before on pull request `number` as one review (`COMMENT`),
/// each on its line of the pull request's head.
pub async fn post_review(
    forge: &Forge,
    repo: &str,
    number: u64,
    findings: &Findings,
) -> Result<Posted, ForgeError> {
    let existing = review_comments(forge, repo, number).await?;
    let seen: BTreeSet<String> = existing
        .iter()
        .filter_map(|comment| comment["body"].as_str())
        .filter_map(|body| {
            body.split("<!-- tollgate-finding:")
                .nth(1)
                .and_then(|rest| rest.split(" -->").next())
                .map(str::to_string)
        })
        .collect();
    let (already, new): (Vec<&Finding>, Vec<&Finding>) = findings
        .findings
        .iter()
        .partition(|finding| seen.contains(&finding.fingerprint()));
    if new.is_empty() {
        return Ok(Posted {
            new: 0,
            already: already.len(),
        });
    }
    let comments: Vec<Value> = new
        .iter()
        .map(|finding| {
            json!({
                "path": finding.file,
                "line": finding.line,
                "side": "RIGHT",
                "body": format!(
                    "**{}**: {}\n\n{}",
                    finding.severity,
                    finding.text.replace('@', "@\u{200b}"),
                    marker(&finding.fingerprint())
                ),
            })
        })
        .collect();
    let body = format!(
        "tollgate: {}\n\n{}",
        findings.summary.replace('@', "@\u{200b}"),
        crate::base::counted(new.len(), "finding")
    );
    forge
        .post(
            &format!("/repos/{repo}/pulls/{number}/reviews"),
            json!({"event": "COMMENT", "body": body, "comments": comments}),
        )
        .await?;
    Ok(Posted {
        new: new.len(),
        already: already.len(),
    })
}

/// The most review comments read of one pull request: 100 pages of GitHub's largest.
const MAX_COMMENT_PAGES: u32 = 100;
const PER_PAGE: usize = 100;

/// Every review comment on pull request `number`, page after page: GitHub gives at most
/// 100 at a time, and a finding posted on a later page would otherwise be posted again.
async fn review_comments(forge: &Forge, repo: &str, number: u64) -> Result<Vec<Value>, ForgeError> {
    let mut all = Vec::new();
    for page in 1..=MAX_COMMENT_PAGES {
        let answer = forge
            .get(&format!(
                "/repos/{repo}/pulls/{number}/comments?per_page={PER_PAGE}&page={page}"
            ))
            .await?;
        let comments = answer.as_array().cloned().unwrap_or_default();
        let last = comments.len() < PER_PAGE;
        all.extend(comments);
        if last {
            return Ok(all);
        }
    }
    // Not read to the end: posting could repeat what an unread page holds.
    Err(ForgeError::TooMany {
        what: format!("the review comments of pull request #{number}"),
        limit: MAX_COMMENT_PAGES as usize * PER_PAGE,
    })
}

/// The findings as a SARIF 2.1.0 log: one rule per severity, one result each with its
/// fingerprint (`partialFingerprints`), so code scanning keeps one alert across runs.
pub fn findings_sarif(findings: &Findings) -> Result<String, serde_json::Error> {
    let results: Vec<Value> = findings
        .findings
        .iter()
        .map(|finding| {
            json!({
                "ruleId": format!("review/{}", finding.severity),
                "level": finding.severity,
                "message": {"text": finding.text},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": finding.file},
                    "region": {"startLine": finding.line},
                }}],
                "partialFingerprints": {"tollgateFinding/v1": finding.fingerprint()},
            })
        })
        .collect();
    let rules: Vec<Value> = ["error", "warning", "note"]
        .iter()
        .map(|severity| {
            json!({
                "id": format!("review/{severity}"),
                "shortDescription": {"text": format!("A review finding ({severity})")},
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json-schema.org/schemas/2.1.0/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "tollgate", "version": env!("CARGO_PKG_VERSION"), "rules": rules}},
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_stable_and_the_sarif_is_valid() {
        let finding = Finding {
            file: "src/a.rs".into(),
            line: 3,
            severity: "warning".into(),
            text: "an unwrap on input".into(),
        };
        let same = Finding {
            text: "an unwrap on input  ".into(),
            ..finding.clone()
        };
        assert_eq!(finding.fingerprint(), same.fingerprint());
        assert_eq!(finding.fingerprint().len(), 24);
        let moved = Finding {
            line: 4,
            ..finding.clone()
        };
        assert_ne!(finding.fingerprint(), moved.fingerprint());
        let schema: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/sarif-2.1.0.json")).unwrap();
        let validator = jsonschema::options().build(&schema).unwrap();
        let log: Value = serde_json::from_str(
            &findings_sarif(&Findings {
                summary: "s".into(),
                findings: vec![finding],
            })
            .unwrap(),
        )
        .unwrap();
        assert!(validator.is_valid(&log), "{log:#}");
        let schema: Value = serde_json::from_str(FINDINGS_SCHEMA).unwrap();
        assert!(jsonschema::is_valid(
            &schema,
            &json!({"summary": "x", "findings": [{"file": "a", "line": 1, "severity": "note", "text": "t"}]})
        ));
        assert!(!jsonschema::is_valid(
            &schema,
            &json!({"summary": "x", "findings": [{"file": "a", "line": 0, "severity": "note", "text": "t"}]})
        ));
    }
}
