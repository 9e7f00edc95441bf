//! The batch's merged reports, from the journals alone: one JUnit file (a testsuite per
//! repository, its testcase failed with the reason) and a Markdown table. `tollgate batch`
//! writes them for its own folder; `tollgate report merge` for many shards' folders.

use std::path::{Path, PathBuf};

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::journal::{Journal, RepoOutcome};
use crate::config::serde_name;

/// The journals under each batch folder (`DIR/repos/*/journal.json`), by repository id; a
/// repository in two folders (shards run twice) keeps the later folder's journal.
pub fn collect(dirs: &[PathBuf]) -> std::io::Result<Vec<Journal>> {
    let mut journals: Vec<Journal> = Vec::new();
    for dir in dirs {
        let repos = dir.join("repos");
        for entry in std::fs::read_dir(&repos)? {
            let path = entry?.path().join("journal.json");
            let Some(journal) = Journal::read(&path) else {
                continue;
            };
            journals.retain(|known| known.repo != journal.repo);
            journals.push(journal);
        }
    }
    journals.sort_by(|a, b| a.repo.cmp(&b.repo));
    Ok(journals)
}

/// Writes `junit.xml` and `summary.md` to `out`; returns their paths.
pub fn write_reports(out: &Path, journals: &[Journal]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out)?;
    let junit = out.join("junit.xml");
    std::fs::write(&junit, junit_xml(journals).map_err(std::io::Error::other)?)?;
    let summary = out.join("summary.md");
    std::fs::write(&summary, markdown(journals))?;
    Ok(vec![junit, summary])
}

pub fn junit_xml(journals: &[Journal]) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("tollgate batch");
    for journal in journals {
        let mut suite = TestSuite::new(journal.repo.as_str());
        let status = match journal.outcome {
            Some(RepoOutcome::Changed | RepoOutcome::Unchanged) => TestCaseStatus::success(),
            Some(RepoOutcome::Skipped) | None => TestCaseStatus::skipped(),
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
    let total: f64 = journals.iter().filter_map(cost_of).sum();
    let mut text = format!(
        "# tollgate batch\n\n{} repositories, {failed} failed, ${total:.4} spent.\n\n\
| repository | outcome | checks | denials | cost (USD) | branch | pull request |\n\
|---|---|---|---|---|---|---|\n",
        journals.len()
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
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&journal.repo),
            cell(&outcome_name(journal)),
            checks,
            denials,
            cost_of(journal)
                .map(|cost| format!("{cost:.4}"))
                .unwrap_or_default(),
            cell(journal.branch.as_deref().unwrap_or("")),
            cell(journal.pr_url.as_deref().unwrap_or("")),
        ));
    }
    text
}

fn outcome_name(journal: &Journal) -> String {
    journal
        .outcome
        .map(|outcome| serde_name(&outcome))
        .unwrap_or_else(|| "unfinished".into())
}

fn cost_of(journal: &Journal) -> Option<f64> {
    journal.run.as_ref().and_then(|run| run.cost_usd)
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
}
