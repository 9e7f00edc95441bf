//! The merged HTML report of a real sharded batch, opened in a real headless browser
//! (chromium through chromedriver): its table read back and compared with the merged JUnit,
//! a header clicked and the order checked, a screenshot taken. Skipped, saying why, where
//! chromium is not installed; `.ci/run` installs it and requires the check.

use std::collections::BTreeMap;

use serde_json::Value;

use super::batch::{Fleet, MODEL_KEY, paid_batch, paid_reply, paid_task};
use crate::support::browser::{Browser, BrowserTools};
use crate::support::fake_model::FakeModel;

/// A repository as the merged JUnit file has it: (outcome, cost with four decimals).
fn junit_rows(junit: &str) -> BTreeMap<String, (String, String)> {
    let doc = roxmltree::Document::parse(junit).unwrap();
    doc.descendants()
        .filter(|node| node.has_tag_name("testsuite"))
        .map(|suite| {
            let property = |name: &str| {
                suite
                    .descendants()
                    .find(|node| {
                        node.has_tag_name("property") && node.attribute("name") == Some(name)
                    })
                    .and_then(|node| node.attribute("value"))
                    .unwrap()
                    .to_string()
            };
            let cost: f64 = property("total_cost_usd").parse().unwrap();
            let name = suite.attribute("name").unwrap().to_string();
            (name, (property("outcome"), format!("{cost:.4}")))
        })
        .collect()
}

/// The table's columns the test reads, by index.
const REASON: usize = 2;
const COST: usize = 5;
const BRANCH: usize = 6;
const PULL_REQUEST: usize = 7;
const FILES: usize = 8;

const READ_ROWS: &str = "return Array.from(document.querySelectorAll('#repos tbody tr'))\
    .map(row => Array.from(row.cells).map(cell => cell.textContent));";

/// The table's rows as the browser shows them, in order: (repository, outcome, cost).
async fn table(browser: &Browser) -> Vec<(String, String, String)> {
    let rows = browser.script(READ_ROWS).await;
    rows.as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let cell = |n: usize| row[n].as_str().unwrap().to_string();
            (cell(0), cell(1), cell(COST))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_merged_html_report_reads_back_in_a_real_browser_and_sorts_on_a_click() {
    let Some(tools) = BrowserTools::or_skip() else {
        return;
    };
    let fleet = Fleet::new(5, &[3]);
    // One reply per repository, each a different price, so sorting by cost means something.
    let cents = [3, 1, 5, 2, 4];
    let server = FakeModel::start(MODEL_KEY, cents.iter().map(|c| paid_reply(*c)).collect()).await;
    std::fs::write(fleet.path().join("task.yaml"), paid_task(&server, "")).unwrap();
    for shard in ["1/2", "2/2"] {
        let out = format!("shard{}", &shard[..1]);
        let output = paid_batch(&fleet, &out, &["--shard", shard]).await;
        // Exit 1 for the shard holding r03, whose check fails.
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // A tampered shard journal (or a hostile forge's answer) names a script as one pull
    // request's address and a real one for another.
    let tamper = |repo: &str, url: &str| {
        let journal = ["shard1", "shard2"]
            .iter()
            .map(|shard| {
                fleet
                    .path()
                    .join(shard)
                    .join("repos")
                    .join(repo)
                    .join("journal.json")
            })
            .find(|path| path.is_file())
            .unwrap();
        let mut value: Value =
            serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
        value["pr_url"] = Value::from(url);
        std::fs::write(&journal, value.to_string()).unwrap();
    };
    tamper("r00", "javascript:document.title='pwned'");
    tamper("r01", "https://forge.example/o/r01/pull/1");
    let merge = crate::support::tollgate_in(fleet.path())
        .args(["report", "merge", "shard1", "shard2", "--out", "merged"])
        .output()
        .unwrap();
    assert!(
        merge.status.success(),
        "{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    let junit =
        junit_rows(&std::fs::read_to_string(fleet.path().join("merged/junit.xml")).unwrap());
    assert_eq!(junit.len(), 5);
    assert_eq!(junit["r03"].0, "failed");

    let browser = Browser::start(&tools).await;
    browser.open(&fleet.path().join("merged/report.html")).await;

    // Nothing was fetched: the page is self-contained.
    let fetched = browser
        .script("return performance.getEntriesByType('resource').length;")
        .await;
    assert_eq!(fetched, Value::from(0));

    // The table as drawn holds exactly the merged JUnit's repositories, outcomes and costs.
    let rows = table(&browser).await;
    let shown: BTreeMap<String, (String, String)> = rows
        .iter()
        .map(|(repo, outcome, cost)| (repo.clone(), (outcome.clone(), cost.clone())))
        .collect();
    assert_eq!(shown, junit);
    assert_eq!(rows.len(), 5, "one row per repository");
    let bars = browser
        .script("return document.querySelectorAll('#cost-chart rect').length;")
        .await;
    assert_eq!(bars, Value::from(5));

    // The failed count comes first; the failed repository's row says which check failed.
    let totals = browser
        .script("return document.querySelector('#totals').textContent;")
        .await;
    assert_eq!(
        totals,
        Value::from("1 failed of 5 repositories · 4 unchanged · $0.1500 spent")
    );
    let cells = browser
        .script(&format!("return Array.from(document.querySelectorAll('#repos tbody tr')).map(r => [r.cells[0].textContent, r.cells[{REASON}].textContent, r.cells[{BRANCH}].textContent]);"))
        .await;
    for row in cells.as_array().unwrap() {
        let (repo, reason, branch) = (&row[0], row[1].as_str().unwrap(), &row[2]);
        if repo == "r03" {
            assert!(reason.contains("check `word-is-ok` failed"), "{reason}");
        } else {
            assert_eq!(reason, "", "{repo}");
        }
        // Nothing was committed (the model changed no file): no branch is shown.
        assert_eq!(branch, "", "{repo}");
    }

    // Each repository links its transcript, JUnit and summary, relative to the page, and
    // each link leads to the file in the shard's folder.
    let files = browser
        .script(&format!("return Array.from(document.querySelectorAll('#repos tbody tr')).map(r => Array.from(r.cells[{FILES}].querySelectorAll('a')).map(a => [a.textContent, a.getAttribute('href'), a.href]));"))
        .await;
    for row in files.as_array().unwrap() {
        let labels: Vec<&str> = row
            .as_array()
            .unwrap()
            .iter()
            .map(|link| link[0].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["transcript", "JUnit", "summary"], "{row}");
        for link in row.as_array().unwrap() {
            let href = link[1].as_str().unwrap();
            assert!(href.starts_with("../shard"), "{href}");
            let resolved = link[2].as_str().unwrap().strip_prefix("file://").unwrap();
            assert!(std::path::Path::new(resolved).is_file(), "{resolved}");
        }
    }

    // Only the http(s) address and the files are links; the script is text, and clicking
    // it runs nothing.
    let links = browser
        .script(&format!("return Array.from(document.querySelectorAll('#repos tbody tr')).flatMap(r => Array.from(r.cells[{PULL_REQUEST}].querySelectorAll('a')).map(a => a.href));"))
        .await;
    assert_eq!(
        links,
        serde_json::json!(["https://forge.example/o/r01/pull/1"])
    );
    let outside_files = browser
        .script(&format!("return document.querySelectorAll('a').length - document.querySelectorAll('#repos td:nth-child({}) a').length;", FILES + 1))
        .await;
    assert_eq!(outside_files, Value::from(1));
    let shown = browser
        .script(&format!("return Array.from(document.querySelectorAll('#repos tbody tr')).find(r => r.cells[0].textContent === 'r00').cells[{PULL_REQUEST}].innerHTML;"))
        .await;
    assert_eq!(shown, Value::from("javascript:document.title='pwned'"));
    browser
        .click(&format!(
            "#repos tbody tr td:nth-child({})",
            PULL_REQUEST + 1
        ))
        .await;
    let title = browser.script("return document.title;").await;
    assert_eq!(title, Value::from("tollgate batch"));

    // A click on "cost (USD)" sorts by cost, as numbers; a second click reverses.
    let cost_header = format!("#repos th:nth-child({})", COST + 1);
    browser.click(&cost_header).await;
    let costs: Vec<String> = table(&browser).await.into_iter().map(|row| row.2).collect();
    assert_eq!(costs, ["0.0100", "0.0200", "0.0300", "0.0400", "0.0500"]);
    browser.click(&cost_header).await;
    let costs: Vec<String> = table(&browser).await.into_iter().map(|row| row.2).collect();
    assert_eq!(costs, ["0.0500", "0.0400", "0.0300", "0.0200", "0.0100"]);
    // And on "repository", by name.
    browser.click("#repos th:nth-child(1)").await;
    browser.click("#repos th:nth-child(1)").await;
    let names: Vec<String> = table(&browser).await.into_iter().map(|row| row.0).collect();
    assert_eq!(names, ["r04", "r03", "r02", "r01", "r00"]);

    // The screenshot: a PNG of the drawn page (its header says its size).
    let png = browser.screenshot().await;

    // The same batch as if its model were free: no chart of zeros.
    for shard in ["shard1", "shard2"] {
        for entry in std::fs::read_dir(fleet.path().join(shard).join("repos")).unwrap() {
            let journal = entry.unwrap().path().join("journal.json");
            let mut value: Value =
                serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
            value["run"]["cost_usd"] = Value::from(0.0);
            std::fs::write(&journal, value.to_string()).unwrap();
        }
    }
    let merge = crate::support::tollgate_in(fleet.path())
        .args(["report", "merge", "shard1", "shard2", "--out", "free"])
        .output()
        .unwrap();
    assert!(merge.status.success());
    browser.open(&fleet.path().join("free/report.html")).await;
    let chart = browser
        .script("return document.querySelectorAll('#cost-chart').length + document.querySelectorAll('h2').length;")
        .await;
    assert_eq!(chart, Value::from(1), "only the table's heading");
    browser.quit().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(width >= 800 && height >= 600, "{width}x{height}");
    // A blank page of this size is about 4 KB of PNG, one heading about 5 KB; the table,
    // the chart and their text make it ten times that.
    assert!(
        png.len() > 20_000,
        "{} bytes: a nearly blank page",
        png.len()
    );
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("batch-report.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!(
        "batch_browser: screenshot {} ({} bytes)",
        path.display(),
        png.len()
    );
}
