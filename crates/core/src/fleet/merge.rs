//! The batch's merged reports, from the journals and the runs' own SARIF: one JUnit file (a
//! testsuite per repository, its testcase failed with the reason), one SARIF log (results
//! tagged by repository), a Markdown table and a self-contained HTML page. `tollgate batch`
//! writes them for its own folder; `tollgate report merge` for many shards' folders.

use std::path::{Path, PathBuf};

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use serde_json::{Value, json};

use super::journal::{Journal, RepoOutcome};
use super::record::RepoRecord;
use super::tally::{
    committed_branch, cost_cell, cost_of, not_started, outcome_name, reason, spent_sentence,
};
use crate::out_dir::OutputError;

/// The journals under each batch folder (`DIR/repos/*/journal.json`), by repository id; a
/// repository in two folders (shards run twice) keeps the later folder's journal.
pub fn collect(dirs: &[PathBuf]) -> std::io::Result<Vec<RepoRecord>> {
    let mut records: Vec<RepoRecord> = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir.join("repos"))? {
            let folder = entry?.path();
            let Some(journal) =
                Journal::read(&folder.join("journal.json")).map_err(std::io::Error::other)?
            else {
                continue;
            };
            records.retain(|known| known.journal.repo != journal.repo);
            records.push(RepoRecord { journal, folder });
        }
    }
    records.sort_by(|a, b| a.journal.repo.cmp(&b.journal.repo));
    Ok(records)
}

/// Writes `junit.xml`, `tollgate.sarif`, `summary.md` and `report.html` to `out`, each
/// whole or not at all (temp file and rename, as a single run's reports); returns their
/// paths. Every file is tried; the first that could not be written is the error.
pub fn write_reports(out: &Path, records: &[RepoRecord]) -> Result<Vec<PathBuf>, OutputError> {
    let failed = |path: &Path, source| OutputError {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(out).map_err(|source| failed(out, source))?;
    let journals: Vec<Journal> = records
        .iter()
        .map(|record| record.journal.clone())
        .collect();
    let render = |name: &str, text: Result<String, String>| {
        let path = out.join(name);
        text.map(|text| (path.clone(), text))
            .map_err(|err| failed(&path, std::io::Error::other(err)))
    };
    let files = [
        render(
            "junit.xml",
            junit_xml(&journals).map_err(|err| err.to_string()),
        ),
        render(
            "tollgate.sarif",
            sarif(records).map_err(|err| err.to_string()),
        ),
        render("summary.md", Ok(markdown(&journals))),
        render("report.html", Ok(super::html::html(records, out))),
    ];
    let mut written = Vec::new();
    let mut first_error = None;
    for file in files {
        let result = file.and_then(|(path, text)| {
            crate::out_dir::write_atomic(&path, text.as_bytes()).map(|()| path)
        });
        match result {
            Ok(path) => written.push(path),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    match first_error {
        Some(err) => Err(err),
        None => Ok(written),
    }
}

/// One SARIF log with one run: every repository's results, each tagged with its repository
/// (`properties.repo`), under one rule list.
pub fn sarif(records: &[RepoRecord]) -> Result<String, serde_json::Error> {
    let mut tool: Option<Value> = None;
    let mut rules: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for record in records {
        let path = record.folder.join("run").join("tollgate.sarif");
        let Some(log) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        else {
            continue;
        };
        for run in log["runs"].as_array().into_iter().flatten() {
            let driver = &run["tool"]["driver"];
            tool.get_or_insert_with(|| run["tool"].clone());
            for rule in driver["rules"].as_array().into_iter().flatten() {
                if !rules.iter().any(|known| known["id"] == rule["id"]) {
                    rules.push(rule.clone());
                }
            }
            for result in run["results"].as_array().into_iter().flatten() {
                results.push(tag_result(result.clone(), &record.journal.repo));
            }
        }
    }
    let mut tool = tool.unwrap_or_else(|| json!({"driver": {"name": "tollgate"}}));
    tool["driver"]["rules"] = Value::Array(rules);
    serde_json::to_string_pretty(&json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": tool, "results": results}],
    }))
}

/// The result as one of many repositories': its rule found by id (indexes differ between
/// runs), its repository named. Locations stay relative to that repository's workdir.
fn tag_result(mut result: Value, repo: &str) -> Value {
    if let Some(object) = result.as_object_mut() {
        object.remove("ruleIndex");
    }
    result["properties"]["repo"] = Value::String(repo.to_string());
    result
}

pub fn junit_xml(journals: &[Journal]) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("tollgate batch");
    for journal in journals {
        let mut suite = TestSuite::new(journal.repo.as_str());
        let status = match journal.outcome {
            Some(RepoOutcome::Changed | RepoOutcome::Unchanged) => TestCaseStatus::success(),
            Some(RepoOutcome::Skipped) | None => {
                let mut status = TestCaseStatus::skipped();
                if let Some(reason) = &journal.reason {
                    status.set_message(reason.clone());
                }
                status
            }
            Some(RepoOutcome::Failed) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(journal.reason.clone().unwrap_or_default());
                status
            }
        };
        let mut case = TestCase::new(journal.repo.as_str(), status);
        if let Some(run) = &journal.run {
            case.set_time(std::time::Duration::from_millis(run.duration_ms));
        }
        suite.add_test_case(case);
        let cost = cost_of(journal)
            .map(|cost| format!("{cost:.6}"))
            .unwrap_or_default();
        suite.add_properties([
            Property::new("outcome", outcome_name(journal)),
            Property::new("branch", journal.branch.clone().unwrap_or_default()),
            Property::new("commit", journal.commit.clone().unwrap_or_default()),
            Property::new("total_cost_usd", cost),
        ]);
        report.add_test_suite(suite);
    }
    report.to_string()
}

pub fn markdown(journals: &[Journal]) -> String {
    let failed = journals
        .iter()
        .filter(|journal| journal.outcome == Some(RepoOutcome::Failed))
        .count();
    let mut text = format!(
        "# tollgate batch\n\n**{failed} failed** of {} · {}.\n\n\
| repository | outcome | reason | checks | denials | cost (USD) | branch | pull request |\n\
|---|---|---|---|---|---|---|---|\n",
        crate::base::counted(journals.len(), "repository"),
        spent_sentence(journals)
    );
    for journal in journals {
        let (checks, denials) =
            journal
                .run
                .as_ref()
                .map_or((String::new(), String::new()), |run| {
                    (
                        format!("{} passed, {} failed", run.checks_passed, run.checks_failed),
                        run.denials.to_string(),
                    )
                });
        let cell = crate::neutral::markdown_inline;
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&journal.repo),
            cell(&outcome_name(journal)),
            cell(&reason(journal)),
            checks,
            denials,
            cell(&cost_cell(journal)),
            cell(committed_branch(journal).unwrap_or("")),
            cell(journal.pr_url.as_deref().unwrap_or("")),
        ));
    }
    let not_started = not_started(journals);
    if !not_started.is_empty() {
        text.push_str("\nNot started:\n\n");
        for (repo, reason) in not_started {
            text.push_str(&format!(
                "- {}: {}\n",
                crate::neutral::markdown_inline(repo),
                crate::neutral::markdown_inline(reason)
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_repo_is_a_failed_testcase_in_its_own_suite() {
        let mut ok = Journal::new("api");
        ok.outcome = Some(RepoOutcome::Changed);
        let mut bad = Journal::new("web");
        bad.outcome = Some(RepoOutcome::Failed);
        bad.reason = Some("cannot read the repository: no such ref".into());
        let xml = junit_xml(&[ok, bad.clone()]).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let suites: Vec<_> = doc
            .descendants()
            .filter(|node| node.has_tag_name("testsuite"))
            .map(|node| node.attribute("name").unwrap_or_default())
            .collect();
        assert_eq!(suites, ["api", "web"]);
        assert!(xml.contains("no such ref"));
        assert!(markdown(&[bad]).contains("| web | failed |"));
    }

    #[test]
    fn what_a_repository_or_forge_named_cannot_break_the_summary() {
        let mut hostile = Journal::new("x |\n\n## ✅ all repositories passed\n\n<!--");
        hostile.outcome = Some(RepoOutcome::Skipped);
        hostile.reason = Some("![](https://attacker.example/p.png?d=1)".into());
        hostile.pr_url = Some("javascript:alert(1)|".into());
        let text = markdown(&[hostile]);
        let rows: Vec<&str> = text.lines().filter(|line| line.starts_with('|')).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(!text.contains("\n#"), "{text}");
        for raw in ["<!--", "![", "javascript:alert(1)|"] {
            assert!(!text.contains(raw), "{raw} in {text}");
        }
    }
}
