//! The batch's HTML report: one self-contained page (inline style and script, no network,
//! no external asset) with the repositories' table, sortable by any column, and a bar chart
//! of the cost per repository drawn as inline SVG. What a repository, a journal or the forge
//! named goes through `neutral` (text escaped, links only to http(s)).

use std::path::{Component, Path, PathBuf};

use super::journal::{Journal, RepoOutcome};
use super::record::RepoRecord;
use super::tally::{committed_branch, cost_cell, cost_of, not_started, outcome_name, reason};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{cursor:pointer;background:#f3f3f3}\
tr.failed td{background:#fde8e8}svg text{font-size:11px}#totals .failed{color:#b00020}";

/// Sorts the table by the clicked column: numbers as numbers (`data-sort`), else as text;
/// a second click reverses.
const SCRIPT: &str = "document.querySelectorAll('#repos th').forEach(function(th,col){\
th.addEventListener('click',function(){var body=document.querySelector('#repos tbody');\
var rows=Array.from(body.rows);var dir=th.dataset.dir==='asc'?-1:1;th.dataset.dir=dir===1?'asc':'desc';\
rows.sort(function(a,b){var x=a.cells[col].dataset.sort||a.cells[col].textContent;\
var y=b.cells[col].dataset.sort||b.cells[col].textContent;var nx=parseFloat(x),ny=parseFloat(y);\
if(!isNaN(nx)&&!isNaN(ny)){return (nx-ny)*dir;}return x.localeCompare(y)*dir;});\
rows.forEach(function(row){body.appendChild(row);});});});";

/// A repository's files the page links to, relative to the page's folder (`out`), so the
/// batch folder can be uploaded as one artifact and its links still work.
const FILES: [(&str, &str); 3] = [
    ("transcript", "run/transcript.jsonl"),
    ("JUnit", "run/junit.xml"),
    ("summary", "run/summary.txt"),
];

/// The page for the repositories of `records`, written into the folder `out`.
pub fn html(records: &[RepoRecord], out: &Path) -> String {
    let journals: Vec<&Journal> = records.iter().map(|record| &record.journal).collect();
    let mut rows = String::new();
    for record in records {
        let journal = &record.journal;
        let outcome = outcome_name(journal);
        let (checks, denials) = journal.run.as_ref().map_or((String::new(), 0), |run| {
            (
                format!("{} passed, {} failed", run.checks_passed, run.checks_failed),
                run.denials,
            )
        });
        let sort_cost = cost_of(journal).map_or_else(|| "-1".to_string(), |cost| cost.to_string());
        let pr = journal.pr_url.as_deref().map(pr_link).unwrap_or_default();
        let branch = committed_branch(journal).unwrap_or("");
        rows.push_str(&format!(
            "<tr class=\"{class}\"><td>{repo}</td><td>{outcome}</td><td class=\"reason\">{reason}</td>\
<td>{checks}</td><td data-sort=\"{denials}\">{denials}</td><td data-sort=\"{sort_cost}\">{cost}</td>\
<td>{branch}</td><td>{pr}</td><td class=\"files\">{files}</td></tr>\n",
            class = escape(&outcome),
            repo = escape(&journal.repo),
            outcome = escape(&outcome),
            reason = escape(&reason(journal)),
            cost = escape(&cost_cell(journal)),
            branch = escape(branch),
            files = file_links(record, out),
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tollgate batch</title>\
<style>{STYLE}</style></head><body>\n<h1>tollgate batch</h1>\n<p id=\"totals\">{totals}</p>\n\
{chart}<h2>Repositories</h2>\n<table id=\"repos\"><thead><tr>\
<th>repository</th><th>outcome</th><th>reason</th><th>checks</th><th>denials</th><th>cost (USD)</th>\
<th>branch</th><th>pull request</th><th>files</th>\
</tr></thead><tbody>\n{rows}</tbody></table>\n{skipped}<script>{SCRIPT}</script>\n</body></html>\n",
        totals = totals(&journals),
        chart = chart(&journals),
        skipped = skipped(&journals),
    )
}

/// The line a reader sees first: how many failed, then the rest, then what was spent.
fn totals(journals: &[&Journal]) -> String {
    let count = |outcome: RepoOutcome| {
        journals
            .iter()
            .filter(|journal| journal.outcome == Some(outcome))
            .count()
    };
    let failed = count(RepoOutcome::Failed);
    let mut parts = vec![format!(
        "<strong class=\"failed\">{failed} failed</strong> of {}",
        crate::base::counted(journals.len(), "repository")
    )];
    for (outcome, word) in [
        (RepoOutcome::Changed, "changed"),
        (RepoOutcome::Unchanged, "unchanged"),
        (RepoOutcome::Skipped, "not started"),
    ] {
        let n = count(outcome);
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    parts.push(escape(&super::tally::spent_sentence(
        journals.iter().copied(),
    )));
    parts.join(" · ")
}

/// Links to the repository's patch (only when a commit was made) and its run's files, each
/// only when it exists.
fn file_links(record: &RepoRecord, out: &Path) -> String {
    let mut targets: Vec<(&str, PathBuf)> = Vec::new();
    if record.journal.commit.is_some()
        && let Some(patch) = &record.journal.patch
    {
        // A shard's folder may have moved since: the patch is where its record now is.
        let here = patch
            .file_name()
            .map(|name| record.folder.join(name))
            .filter(|path| path.is_file());
        targets.extend(here.map(|path| ("patch", path)));
    }
    for (label, relative) in FILES {
        let path = record.folder.join(relative);
        if path.is_file() {
            targets.push((label, path));
        }
    }
    targets
        .into_iter()
        .filter_map(|(label, path)| {
            let href = relative_href(out, &path)?;
            Some(format!("<a href=\"{}\">{label}</a>", escape(&href)))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `to` as a relative URL from the folder `from`, each segment percent-encoded; `None`
/// when the two share no root (then no link beats a wrong one).
fn relative_href(from: &Path, to: &Path) -> Option<String> {
    let from = std::path::absolute(from).ok()?;
    let to = std::path::absolute(to).ok()?;
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    if common == 0 {
        return None;
    }
    let mut segments: Vec<String> = vec!["..".to_string(); from.len() - common];
    for component in &to[common..] {
        match component {
            Component::Normal(name) => {
                segments.push(crate::base::percent_encode(&name.to_string_lossy()))
            }
            _ => return None,
        }
    }
    Some(segments.join("/"))
}

/// Why the repositories that did not start were not started.
fn skipped(journals: &[&Journal]) -> String {
    let items: String = not_started(journals.iter().copied())
        .into_iter()
        .map(|(repo, reason)| format!("<li>{}: {}</li>", escape(repo), escape(reason)))
        .collect();
    if items.is_empty() {
        return String::new();
    }
    format!("<h2>Not started</h2>\n<ul id=\"not-started\">{items}</ul>\n")
}

/// Horizontal bars, one per repository, scaled to the most expensive one; nothing when no
/// run cost anything (a free or scripted model), where a chart of zeros says nothing.
fn chart(journals: &[&Journal]) -> String {
    const BAR: usize = 18;
    const LABEL: usize = 160;
    const WIDTH: f64 = 400.0;
    let max = journals
        .iter()
        .filter_map(|journal| cost_of(journal))
        .fold(0.0_f64, f64::max);
    if max <= 0.0 {
        return String::new();
    }
    let mut bars = String::new();
    for (index, journal) in journals.iter().enumerate() {
        let cost = cost_of(journal).unwrap_or(0.0);
        let width = cost / max * WIDTH;
        let y = index * BAR;
        bars.push_str(&format!(
            "<text x=\"0\" y=\"{ty}\">{repo}</text><rect x=\"{LABEL}\" y=\"{y}\" width=\"{width:.1}\" \
height=\"{h}\" fill=\"#4a7bd0\"/><text x=\"{tx:.1}\" y=\"{ty}\">{cost}</text>\n",
            ty = y + 13,
            repo = escape(&journal.repo),
            h = BAR - 4,
            tx = LABEL as f64 + width + 4.0,
            cost = escape(&cost_cell(journal)),
        ));
    }
    format!(
        "<h2>Cost per repository (USD)</h2>\n<svg id=\"cost-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">\n{bars}</svg>\n",
        w = LABEL + WIDTH as usize + 80,
        h = journals.len() * BAR + 4,
    )
}

/// A pull request's address, from a shard's journal or the forge's answer: a link only when
/// it is an http(s) URL, else text (a `javascript:` address must never be clickable).
fn pr_link(url: &str) -> String {
    match crate::neutral::http_url(url) {
        Some(href) => format!(
            "<a href=\"{}\" rel=\"noopener noreferrer\">{}</a>",
            escape(&href),
            escape(url)
        ),
        None => escape(url),
    }
}

fn escape(text: &str) -> String {
    crate::neutral::html_text(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::journal::{RepoOutcome, RunSummary};

    fn record(journal: Journal) -> RepoRecord {
        RepoRecord {
            folder: PathBuf::from("/batch/repos").join(&journal.repo),
            journal,
        }
    }

    fn page(journals: Vec<Journal>) -> String {
        let records: Vec<RepoRecord> = journals.into_iter().map(record).collect();
        html(&records, Path::new("/batch"))
    }

    fn paid(repo: &str, cost: Option<f64>) -> Journal {
        let mut journal = Journal::new(repo);
        journal.outcome = Some(RepoOutcome::Unchanged);
        journal.run = Some(RunSummary {
            cost_usd: cost,
            ..RunSummary::default()
        });
        journal
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_what_a_repo_may_name() {
        let mut journal = paid("api", Some(0.25));
        journal.outcome = Some(RepoOutcome::Changed);
        journal.branch = Some("fix/<b>".into());
        journal.commit = Some("abc".into());
        let page = page(vec![journal]);
        assert!(page.contains("fix/&lt;b&gt;"));
        assert!(page.contains("<td data-sort=\"0.25\">0.2500</td>"));
        assert!(page.contains("width=\"400.0\""));
        for external in ["src=", "href=\"http", "@import", "url("] {
            assert!(!page.contains(external), "{external}");
        }
    }

    #[test]
    fn only_web_addresses_become_links() {
        let mut web = Journal::new("web");
        web.pr_url = Some("https://github.com/o/web/pull/7".into());
        let mut hostile = Journal::new("x\"><script>alert(1)</script>");
        hostile.pr_url = Some("javascript:alert(document.domain)".into());
        let mut spaced = Journal::new("y");
        spaced.pr_url = Some(" JAVASCRIPT:alert(1)".into());
        let page = page(vec![web, hostile, spaced]);
        assert!(page.contains(
            "<a href=\"https://github.com/o/web/pull/7\" rel=\"noopener noreferrer\">https://github.com/o/web/pull/7</a>"
        ));
        assert!(
            page.contains("<td>javascript:alert(document.domain)</td>"),
            "{page}"
        );
        assert_eq!(page.matches("<a ").count(), 1, "{page}");
        assert_eq!(
            page.matches("<script>").count(),
            1,
            "only the page's own script"
        );
    }

    #[test]
    fn the_failed_count_comes_first_and_each_row_says_why() {
        let mut failed = paid("api", Some(0.5));
        failed.outcome = Some(RepoOutcome::Failed);
        failed.reason = Some("the run failed: check `tests` failed".into());
        let mut unchanged = paid("web", Some(0.25));
        if let Some(run) = failed.run.as_mut() {
            run.denial = Some("Bash rm -rf build: denied by rule Bash(rm:*)".into());
        }
        unchanged.branch = Some("tollgate/web".into());
        let page = page(vec![failed, unchanged]);
        assert!(
            page.contains("<p id=\"totals\"><strong class=\"failed\">1 failed</strong> of 2 repositories · 1 unchanged · $0.7500 spent</p>"),
            "{page}"
        );
        assert!(page.contains(
            "<td class=\"reason\">the run failed: check `tests` failed · denied: Bash rm -rf build: denied by rule Bash(rm:*)</td>"
        ), "{page}");
        // No commit, no branch.
        assert!(!page.contains("tollgate/web"), "{page}");
    }

    #[test]
    fn a_free_batch_draws_no_chart_and_an_unpriced_run_is_unknown_not_zero() {
        let page = page(vec![paid("a", Some(0.0)), paid("b", None)]);
        assert!(!page.contains("cost-chart"), "{page}");
        assert!(!page.contains("Cost per repository"), "{page}");
        assert!(page.contains("<td data-sort=\"-1\">unknown</td>"), "{page}");
        assert!(
            page.contains("$0.0000 spent; cost unknown for 1 run (no price for the model)"),
            "{page}"
        );
        let mut estimated = paid("c", Some(0.125));
        if let Some(run) = estimated.run.as_mut() {
            run.usage_estimated = true;
        }
        let page = super::tests::page(vec![estimated]);
        assert!(page.contains(">≈0.1250</td>"), "{page}");
        assert!(
            page.contains("≈$0.1250 spent (some usage estimated"),
            "{page}"
        );
    }

    #[test]
    fn files_are_linked_relative_to_the_page_and_only_when_there() {
        let dir = tempfile::tempdir().unwrap();
        let batch = dir.path().join("batch");
        let folder = batch.join("repos").join("api v2");
        std::fs::create_dir_all(folder.join("run")).unwrap();
        for file in ["run/transcript.jsonl", "run/junit.xml", "api v2.patch"] {
            std::fs::write(folder.join(file), "x").unwrap();
        }
        let mut journal = paid("api v2", Some(0.1));
        journal.patch = Some(PathBuf::from("/elsewhere/api v2.patch"));
        let uncommitted = RepoRecord {
            journal: journal.clone(),
            folder: folder.clone(),
        };
        let merged = dir.path().join("merged");
        assert_eq!(
            file_links(&uncommitted, &merged),
            "<a href=\"../batch/repos/api%20v2/run/transcript.jsonl\">transcript</a> \
<a href=\"../batch/repos/api%20v2/run/junit.xml\">JUnit</a>"
        );
        journal.commit = Some("abc".into());
        let committed = RepoRecord { journal, folder };
        assert!(
            file_links(&committed, &batch)
                .starts_with("<a href=\"repos/api%20v2/api%20v2.patch\">patch</a> "),
            "{}",
            file_links(&committed, &batch)
        );
    }
}
