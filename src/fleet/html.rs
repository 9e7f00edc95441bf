//! The batch's HTML report: one self-contained page (inline style and script, no network,
//! no external asset) with the repositories' table, sortable by any column, and a bar chart
//! of the cost per repository drawn as inline SVG. What a repository, a journal or the forge
//! named goes through `neutral` (text escaped, links only to http(s)).

use super::journal::Journal;
use super::tally::{cost_of, not_started, outcome_name, spent};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{cursor:pointer;background:#f3f3f3}\
tr.failed td{background:#fde8e8}svg text{font-size:11px}";

/// Sorts the table by the clicked column: numbers as numbers (`data-sort`), else as text;
/// a second click reverses.
const SCRIPT: &str = "document.querySelectorAll('#repos th').forEach(function(th,col){\
th.addEventListener('click',function(){var body=document.querySelector('#repos tbody');\
var rows=Array.from(body.rows);var dir=th.dataset.dir==='asc'?-1:1;th.dataset.dir=dir===1?'asc':'desc';\
rows.sort(function(a,b){var x=a.cells[col].dataset.sort||a.cells[col].textContent;\
var y=b.cells[col].dataset.sort||b.cells[col].textContent;var nx=parseFloat(x),ny=parseFloat(y);\
if(!isNaN(nx)&&!isNaN(ny)){return (nx-ny)*dir;}return x.localeCompare(y)*dir;});\
rows.forEach(function(row){body.appendChild(row);});});});";

pub fn html(journals: &[Journal]) -> String {
    let total = spent(journals);
    let mut rows = String::new();
    for journal in journals {
        let outcome = outcome_name(journal);
        let (checks, denials) = journal.run.as_ref().map_or((String::new(), 0), |run| {
            (
                format!("{} passed, {} failed", run.checks_passed, run.checks_failed),
                run.denials,
            )
        });
        let cost = cost_of(journal).unwrap_or(0.0);
        let pr = journal.pr_url.as_deref().map(pr_link).unwrap_or_default();
        rows.push_str(&format!(
            "<tr class=\"{class}\"><td>{repo}</td><td>{outcome}</td><td>{checks}</td>\
<td data-sort=\"{denials}\">{denials}</td><td data-sort=\"{cost}\">{cost:.4}</td><td>{branch}</td><td>{pr}</td></tr>\n",
            class = escape(&outcome),
            repo = escape(&journal.repo),
            outcome = escape(&outcome),
            branch = escape(journal.branch.as_deref().unwrap_or("")),
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tollgate batch</title>\
<style>{STYLE}</style></head><body>\n<h1>tollgate batch</h1>\n<p>{count} repositories, ${total:.4} spent.</p>\n\
<h2>Cost per repository (USD)</h2>\n{chart}\n<h2>Repositories</h2>\n<table id=\"repos\"><thead><tr>\
<th>repository</th><th>outcome</th><th>checks</th><th>denials</th><th>cost (USD)</th><th>branch</th><th>pull request</th>\
</tr></thead><tbody>\n{rows}</tbody></table>\n{skipped}<script>{SCRIPT}</script>\n</body></html>\n",
        count = journals.len(),
        chart = chart(journals),
        skipped = skipped(journals),
    )
}

/// Why the repositories that did not start were not started.
fn skipped(journals: &[Journal]) -> String {
    let items: String = not_started(journals)
        .into_iter()
        .map(|(repo, reason)| format!("<li>{}: {}</li>", escape(repo), escape(reason)))
        .collect();
    if items.is_empty() {
        return String::new();
    }
    format!("<h2>Not started</h2>\n<ul id=\"not-started\">{items}</ul>\n")
}

/// Horizontal bars, one per repository, scaled to the most expensive one.
fn chart(journals: &[Journal]) -> String {
    const BAR: usize = 18;
    const LABEL: usize = 160;
    const WIDTH: f64 = 400.0;
    let max = journals.iter().filter_map(cost_of).fold(0.0_f64, f64::max);
    let mut bars = String::new();
    for (index, journal) in journals.iter().enumerate() {
        let cost = cost_of(journal).unwrap_or(0.0);
        let width = if max > 0.0 { cost / max * WIDTH } else { 0.0 };
        let y = index * BAR;
        bars.push_str(&format!(
            "<text x=\"0\" y=\"{ty}\">{repo}</text><rect x=\"{LABEL}\" y=\"{y}\" width=\"{width:.1}\" \
height=\"{h}\" fill=\"#4a7bd0\"/><text x=\"{tx:.1}\" y=\"{ty}\">{cost:.4}</text>\n",
            ty = y + 13,
            repo = escape(&journal.repo),
            h = BAR - 4,
            tx = LABEL as f64 + width + 4.0,
        ));
    }
    format!(
        "<svg id=\"cost-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">\n{bars}</svg>",
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

    #[test]
    fn the_page_is_self_contained_and_escapes_what_a_repo_may_name() {
        let mut journal = Journal::new("api");
        journal.outcome = Some(RepoOutcome::Changed);
        journal.branch = Some("fix/<b>".into());
        journal.run = Some(RunSummary {
            cost_usd: Some(0.25),
            ..RunSummary::default()
        });
        let page = html(&[journal]);
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
        let page = html(&[web, hostile, spaced]);
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
}
