//! A run's findings on a pull request: the final answer under the findings schema
//! (`{summary, findings: [{file, line, severity, text}]}`) posted as one review whose inline
//! comments sit on the changed lines, and the same findings as SARIF for code scanning. A
//! finding on a line the pull request's diff does not show goes in the review's body instead:
//! GitHub refuses a whole review (422, "Line could not be resolved") when one inline comment
//! is off the diff. Each finding carries a fingerprint (of its file, line and text), so a
//! finding an earlier run already posted on the pull request, inline or in a review's body,
//! is not posted again, and code scanning keeps one alert.

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

/// Every finding's fingerprint marked in `body`.
fn markers(body: &str) -> impl Iterator<Item = String> + '_ {
    body.split("<!-- tollgate-finding:")
        .skip(1)
        .filter_map(|rest| rest.split(" -->").next())
        .map(str::to_string)
}

/// What was posted.
#[derive(Debug, PartialEq)]
pub struct Posted {
    pub new: usize,
    pub already: usize,
    /// Of the new, those on lines the diff does not show, listed in the review's body.
    pub outside_diff: usize,
}

/// Posts the findings not posted before on pull request `number` as one review (`COMMENT`):
/// each on its line of the pull request's head when the diff shows that line, in the
/// review's body when it does not.
pub async fn post_review(
    forge: &Forge,
    repo: &str,
    number: u64,
    findings: &Findings,
) -> Result<Posted, ForgeError> {
    let pull = format!("/repos/{repo}/pulls/{number}");
    let comments = every_page(forge, &format!("{pull}/comments"), "review comments").await?;
    let reviews = every_page(forge, &format!("{pull}/reviews"), "reviews").await?;
    let seen: BTreeSet<String> = comments
        .iter()
        .chain(reviews.iter())
        .filter_map(|item| item["body"].as_str())
        .flat_map(markers)
        .collect();
    let (already, new): (Vec<&Finding>, Vec<&Finding>) = findings
        .findings
        .iter()
        .partition(|finding| seen.contains(&finding.fingerprint()));
    if new.is_empty() {
        return Ok(Posted {
            new: 0,
            already: already.len(),
            outside_diff: 0,
        });
    }
    let files = every_page(forge, &format!("{pull}/files"), "changed files").await?;
    let shown = commentable_lines(&files);
    let (inline, outside): (Vec<&Finding>, Vec<&Finding>) = new
        .iter()
        .partition(|finding| shown.contains(&(finding.file.clone(), finding.line)));
    let comments: Vec<Value> = inline
        .iter()
        .map(|finding| {
            json!({
                "path": finding.file,
                "line": finding.line,
                "side": "RIGHT",
                "body": format!(
                    "**{}**: {}\n\n{}",
                    finding.severity,
                    defused(&finding.text),
                    marker(&finding.fingerprint())
                ),
            })
        })
        .collect();
    let mut body = format!(
        "tollgate: {}\n\n{}",
        defused(&findings.summary),
        crate::base::counted(new.len(), "finding")
    );
    if !outside.is_empty() {
        body.push_str("\n\n**On lines this pull request does not change**\n");
        for finding in &outside {
            body.push_str(&format!(
                "\n- `{}:{}` **{}**: {} {}",
                finding.file.replace('`', "'"),
                finding.line,
                finding.severity,
                defused(&finding.text).replace('\n', " "),
                marker(&finding.fingerprint())
            ));
        }
    }
    forge
        .post(
            &format!("{pull}/reviews"),
            json!({"event": "COMMENT", "body": body, "comments": comments}),
        )
        .await?;
    Ok(Posted {
        new: new.len(),
        already: already.len(),
        outside_diff: outside.len(),
    })
}

/// Words that cannot ping anyone: an `@` gets a zero-width space.
fn defused(text: &str) -> String {
    text.replace('@', "@\u{200b}")
}

/// The most pages read of one list: 100 pages of GitHub's largest.
const MAX_PAGES: u32 = 100;
const PER_PAGE: usize = 100;

/// Every item of the list at `path`, page after page: GitHub gives at most 100 at a time,
/// and a marker or a changed file on a later page would otherwise be missed (a finding
/// posted again; one put off the diff).
async fn every_page(forge: &Forge, path: &str, what: &str) -> Result<Vec<Value>, ForgeError> {
    let mut all = Vec::new();
    for page in 1..=MAX_PAGES {
        let answer = forge
            .get(&format!("{path}?per_page={PER_PAGE}&page={page}"))
            .await?;
        let items = answer.as_array().cloned().unwrap_or_default();
        let last = items.len() < PER_PAGE;
        all.extend(items);
        if last {
            return Ok(all);
        }
    }
    // Not read to the end: posting could repeat or misplace what an unread page holds.
    Err(ForgeError::TooMany {
        what: format!("the {what} at {path}"),
        limit: MAX_PAGES as usize * PER_PAGE,
    })
}

/// The lines of the pull request's head a review comment may sit on (`side: RIGHT`): in
/// each changed file's patch, the lines its hunks show of the new file, added or context.
/// A file without a patch (binary, or too large for GitHub to show) has none.
fn commentable_lines(files: &[Value]) -> BTreeSet<(String, u64)> {
    let mut lines = BTreeSet::new();
    for file in files {
        let (Some(name), Some(patch)) = (file["filename"].as_str(), file["patch"].as_str()) else {
            continue;
        };
        let mut next: Option<u64> = None;
        for line in patch.lines() {
            if let Some(header) = line.strip_prefix("@@ ") {
                // `@@ -a,b +c,d @@ context`: the new file's lines start at c.
                next = header
                    .split_whitespace()
                    .find_map(|part| part.strip_prefix('+'))
                    .and_then(|range| range.split(',').next())
                    .and_then(|start| start.parse().ok());
                continue;
            }
            let Some(at) = next else { continue };
            match line.chars().next() {
                Some('+') | Some(' ') | None => {
                    lines.insert((name.to_string(), at));
                    next = Some(at + 1);
                }
                // A removed line is the old file's; `\ No newline at end of file` is no line.
                _ => {}
            }
        }
    }
    lines
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
            serde_json::from_str(include_str!("../../../../tests/fixtures/sarif-2.1.0.json"))
                .unwrap();
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

    #[test]
    fn only_the_lines_a_patch_shows_of_the_new_file_take_a_comment() {
        let files = json!([
            {"filename": "src/a.rs", "patch": "@@ -8,3 +8,4 @@ fn parse() {\n let a = 1;\n-let b = 2;\n+let b = input?;\n+let c = 3;\n let d = 4;\n@@ -40 +41 @@\n-old\n+new\n\\ No newline at end of file"},
            {"filename": "logo.png"},
            {"filename": "gone.rs", "patch": "@@ -1,2 +0,0 @@\n-a\n-b"}
        ]);
        let lines = commentable_lines(files.as_array().unwrap());
        let want: BTreeSet<(String, u64)> = [8, 9, 10, 11, 41]
            .into_iter()
            .map(|line| ("src/a.rs".to_string(), line))
            .collect();
        assert_eq!(lines, want);
        let body = format!("x {} y {}", marker("ab"), marker("cd"));
        assert_eq!(markers(&body).collect::<Vec<_>>(), ["ab", "cd"]);
    }
}
