//! `tollgate batch` end to end: twelve local git repositories in a temp folder, the scripted
//! model, the real binary; branches, failures, resume, shards and load-time errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use super::providers::model_block;
use crate::support::fake_forge::FakeForge;
use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, turn};
use crate::support::skip::{need_landlock, skip};

pub(super) const TASK: &str = r#"version: 1
name: note {{ repo.name }}
prompt: add a note to {{ repo.name }}
mode: acceptEdits
tools: [Write]
batch:
  branch: fix/{{ repo.name }}
  commit_message: "add NOTE.md to {{ repo.name }}"
model:
  provider: scripted
  name: batch-script
  script:
    - - tool_use: {name: Write, input: {file_path: NOTE.md, content: "{{ repo.params.word }} {{ repo.name }}\n"}}
    - - text: done
checks:
  - name: note-is-ok
    run: grep -q "^ok {{ repo.name }}" NOTE.md
"#;

pub(super) struct Fleet {
    dir: tempfile::TempDir,
}

impl Fleet {
    /// `count` repositories `r00`…; `bad` ones get the word that fails the check.
    pub(super) fn new(count: usize, bad: &[usize]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = String::new();
        for n in 0..count {
            one_commit_repo(dir.path(), &format!("r{n:02}"));
            let word = if bad.contains(&n) { "bad" } else { "ok" };
            manifest.push_str(&format!("- repo: r{n:02}\n  params: {{word: {word}}}\n"));
        }
        std::fs::write(dir.path().join("repos.yaml"), manifest).unwrap();
        std::fs::write(dir.path().join("task.yaml"), TASK).unwrap();
        Fleet { dir }
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `tollgate batch task.yaml --repos repos.yaml --out OUT` in the fleet's folder.
    pub(super) fn command(&self, out: &str) -> Command {
        let mut command = crate::support::tollgate_in(self.path());
        command.args(["batch", "task.yaml", "--repos", "repos.yaml", "--out", out]);
        command
    }

    pub(super) fn batch(&self, out: &str, args: &[&str]) -> Output {
        self.command(out).args(args).output().unwrap()
    }

    pub(super) fn journal(&self, out: &str, repo: &str) -> Value {
        let path = self
            .path()
            .join(out)
            .join("repos")
            .join(repo)
            .join("journal.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn journals(&self, out: &str) -> Vec<String> {
        let mut repos: Vec<String> = std::fs::read_dir(self.path().join(out).join("repos"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|repo| {
                self.path()
                    .join(out)
                    .join("repos")
                    .join(repo)
                    .join("journal.json")
                    .exists()
            })
            .collect();
        repos.sort();
        repos
    }
}

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A plain progress line: `tollgate batch: [7/12 done, 3 running, 1 failed, $0.4210] api: …`.
#[derive(Debug)]
struct ProgressLine {
    done: usize,
    total: usize,
    running: usize,
    failed: usize,
    spent: f64,
    repo: String,
    outcome: String,
}

fn progress_lines(stderr: &str) -> Vec<ProgressLine> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("tollgate batch: ["))
        .map(|rest| {
            let (counts, tail) = rest.split_once("] ").unwrap();
            let fields: Vec<&str> = counts.split(", ").collect();
            let number = |field: &str, unit: &str| {
                field.strip_suffix(unit).unwrap().parse::<usize>().unwrap()
            };
            let (done, total) = fields[0]
                .strip_suffix(" done")
                .unwrap()
                .split_once('/')
                .unwrap();
            let (repo, outcome) = tail.split_once(": ").unwrap();
            ProgressLine {
                done: done.parse().unwrap(),
                total: total.parse().unwrap(),
                running: number(fields[1], " running"),
                failed: number(fields[2], " failed"),
                spent: fields[3].strip_prefix('$').unwrap().parse().unwrap(),
                repo: repo.to_string(),
                outcome: outcome.split(" — ").next().unwrap().to_string(),
            }
        })
        .collect()
}

#[test]
fn twelve_repos_get_their_branch_and_a_failing_check_fails_only_its_repo() {
    let fleet = Fleet::new(12, &[7]);
    let output = fleet.batch("out", &["--jobs", "3"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // stderr is a pipe here, as in a CI log: plain lines, one per finished repository.
    let progress = progress_lines(&stderr);
    assert_eq!(progress.len(), 12, "{stderr}");
    let r07 = progress.iter().position(|line| line.repo == "r07").unwrap();
    for (n, line) in progress.iter().enumerate() {
        assert_eq!((line.done, line.total), (n + 1, 12), "{stderr}");
        assert!(line.running <= 2, "at most --jobs 3 at once: {stderr}");
        assert_eq!(line.failed, usize::from(n >= r07), "{stderr}");
        assert_eq!(line.spent, 0.0, "the scripted model is free");
        let outcome = if line.repo == "r07" {
            "failed"
        } else {
            "changed"
        };
        assert_eq!(line.outcome, outcome, "{stderr}");
    }
    assert!(!stderr.contains('\r'), "no bar redraws in a log");
    for n in 0..12 {
        let id = format!("r{n:02}");
        let repo = fleet.path().join(&id);
        let journal = fleet.journal("out", &id);
        if n == 7 {
            assert_eq!(journal["outcome"], "failed");
            assert!(journal["reason"].as_str().unwrap().contains("note-is-ok"));
            continue;
        }
        assert_eq!(journal["outcome"], "changed", "{id}: {journal}");
        let note = git(&repo, &["show", &format!("fix/{id}:NOTE.md")]);
        assert_eq!(note, format!("ok {id}\n"));
        let subject = git(&repo, &["log", "-1", "--format=%s", &format!("fix/{id}")]);
        assert_eq!(subject.trim(), format!("add NOTE.md to {id}"));
        assert!(
            fleet
                .path()
                .join("out/repos")
                .join(&id)
                .join(format!("{id}.patch"))
                .exists()
        );
        // The user's own checkout is untouched.
        assert_eq!(git(&repo, &["status", "--porcelain"]), "");
        assert!(!repo.join("NOTE.md").exists());
    }
    let junit = std::fs::read_to_string(fleet.path().join("out/junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 12);
    let failed: Vec<_> = cases
        .iter()
        .filter(|case| case.children().any(|child| child.has_tag_name("failure")))
        .map(|case| case.attribute("name").unwrap())
        .collect();
    assert_eq!(failed, ["r07"]);
    let summary = std::fs::read_to_string(fleet.path().join("out/summary.md")).unwrap();
    assert!(summary.contains("| r07 | failed |"), "{summary}");
    let sarif: Value = serde_json::from_str(
        &std::fs::read_to_string(fleet.path().join("out/tollgate.sarif")).unwrap(),
    )
    .unwrap();
    let tagged: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["properties"]["repo"].as_str().unwrap())
        .collect();
    assert_eq!(tagged, ["r07"], "the failed check is r07's only");
    let html = std::fs::read_to_string(fleet.path().join("out/report.html")).unwrap();
    assert_eq!(html.matches("<tr class=").count(), 12);
    // The scripted model is free: no chart of zeros.
    assert!(!html.contains("cost-chart"), "{html}");
}

#[test]
fn a_batch_started_again_continues_unfinished_repos_and_keeps_finished_ones() {
    let fleet = Fleet::new(6, &[2]);
    assert_eq!(fleet.batch("out", &["--jobs", "2"]).status.code(), Some(1));
    // As if killed half-way: three repositories never finished their phases.
    let transcript = |id: &str| {
        fleet
            .path()
            .join("out/repos")
            .join(id)
            .join("run/transcript.jsonl")
    };
    for id in ["r03", "r04", "r05"] {
        let path = fleet.path().join("out/repos").join(id).join("journal.json");
        let mut journal = fleet.journal("out", id);
        journal["phase"] = "cloned".into();
        journal["outcome"] = Value::Null;
        std::fs::write(&path, journal.to_string()).unwrap();
    }
    // And one was killed between its commit and the journal's record of it.
    let path = fleet.path().join("out/repos/r01/journal.json");
    let mut journal = fleet.journal("out", "r01");
    journal["phase"] = "checked".into();
    journal["outcome"] = Value::Null;
    journal["commit"] = Value::Null;
    std::fs::write(&path, journal.to_string()).unwrap();
    for id in ["r00", "r01", "r02"] {
        std::fs::write(transcript(id), "kept\n").unwrap();
    }
    let output = fleet.batch("out", &["--jobs", "2"]);
    assert_eq!(output.status.code(), Some(1));
    for id in ["r00", "r01", "r02"] {
        assert_eq!(
            std::fs::read_to_string(transcript(id)).unwrap(),
            "kept\n",
            "{id} re-ran"
        );
    }
    for id in ["r01", "r03", "r04", "r05"] {
        assert_eq!(fleet.journal("out", id)["outcome"], "changed");
        if id != "r01" {
            assert_ne!(std::fs::read_to_string(transcript(id)).unwrap(), "kept\n");
        }
        // Still one commit on the branch, not two.
        let log = git(
            &fleet.path().join(id),
            &["rev-list", "--count", &format!("fix/{id}")],
        );
        assert_eq!(log.trim(), "2");
    }
    // --rerun failed re-runs the failed one only.
    let output = fleet.batch("out", &["--rerun", "failed"]);
    assert_eq!(output.status.code(), Some(1));
    assert_ne!(
        std::fs::read_to_string(transcript("r02")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(transcript("r00")).unwrap(),
        "kept\n"
    );
}

#[test]
fn three_shards_cover_every_repo_exactly_once_and_merge_into_one_report() {
    let fleet = Fleet::new(9, &[]);
    let mut seen: Vec<String> = Vec::new();
    for index in 1..=3 {
        let out = format!("shard{index}");
        let output = fleet.batch(&out, &["--shard", &format!("{index}/3")]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        seen.extend(fleet.journals(&out));
    }
    seen.sort();
    let all: Vec<String> = (0..9).map(|n| format!("r{n:02}")).collect();
    assert_eq!(seen, all);
    // A Kubernetes Indexed Job's pod 1 (0-based) of 3 takes what `--shard 2/3` took. (Its
    // repositories fail here — their branches are checked out in shard2's working copies —
    // but each has its journal.)
    let output = fleet
        .command("indexed")
        .env("JOB_COMPLETION_INDEX", "1")
        .env("TOLLGATE_SHARD_COUNT", "3")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("(shard 2/3)"));
    assert_eq!(fleet.journals("indexed"), fleet.journals("shard2"));
    let output = crate::support::tollgate_in(fleet.path())
        .args([
            "report", "merge", "shard1", "shard2", "shard3", "--out", "merged",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let junit = std::fs::read_to_string(fleet.path().join("merged/junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 9);
}

#[test]
fn an_unknown_placeholder_stops_the_batch_at_load_with_its_location() {
    let fleet = Fleet::new(2, &[]);
    let task = TASK.replace("add a note to {{ repo.name }}", "add {{ repo.owner }}");
    std::fs::write(fleet.path().join("task.yaml"), task).unwrap();
    let output = fleet.batch("out", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr.contains("task.yaml:3:13"), "{stderr}");
    assert!(stderr.contains("repo.owner"), "{stderr}");
    assert!(!fleet.path().join("out/repos/r00").exists());
}

#[test]
fn a_url_is_cloned_at_its_ref_and_one_that_cannot_be_cloned_fails_only_its_testcase() {
    let fleet = Fleet::new(2, &[]);
    // A remote with a `release` branch one commit past its default branch.
    let upstream = fleet.path().join("upstream.git");
    git(
        fleet.path(),
        &["clone", "-q", "--bare", "r00", "upstream.git"],
    );
    git(
        &fleet.path().join("r01"),
        &["push", "-q", upstream.to_str().unwrap(), "HEAD:release"],
    );
    let release = git(&upstream, &["rev-parse", "release"]);
    let mut manifest = std::fs::read_to_string(fleet.path().join("repos.yaml")).unwrap();
    let missing: PathBuf = fleet.path().join("nowhere.git");
    manifest.push_str(&format!(
        "- repo: file://{}\n  name: gone\n  params: {{word: ok}}\n\
- repo: file://{}\n  name: up\n  ref: release\n  params: {{word: ok}}\n",
        missing.display(),
        upstream.display()
    ));
    std::fs::write(fleet.path().join("repos.yaml"), manifest).unwrap();
    let output = fleet.batch("out", &["--jobs", "2"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(fleet.journal("out", "gone")["outcome"], "failed");
    assert_eq!(fleet.journal("out", "r01")["outcome"], "changed");
    // The clone's branch holds the change on top of the ref's commit.
    let up = fleet.journal("out", "up");
    assert_eq!(up["outcome"], "changed", "{up}");
    assert_eq!(up["head"].as_str().unwrap(), release.trim());
    let work = fleet.path().join("out/repos/up/work");
    assert_eq!(git(&work, &["rev-parse", "fix/up~1"]), release);
    assert_eq!(git(&work, &["show", "fix/up:NOTE.md"]), "ok up\n");
    let junit = std::fs::read_to_string(fleet.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains("cannot read the repository"), "{junit}");
}

#[test]
fn rerun_changed_runs_again_only_the_repo_whose_head_moved() {
    let fleet = Fleet::new(3, &[]);
    assert_eq!(fleet.batch("out", &[]).status.code(), Some(0));
    let run_id = |id: &str| fleet.journal("out", id)["run"]["run_id"].clone();
    let before: Vec<Value> = ["r00", "r01", "r02"].iter().map(|id| run_id(id)).collect();
    let r01 = fleet.path().join("r01");
    std::fs::write(r01.join("README"), "moved\n").unwrap();
    git(
        &r01,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qam",
            "move",
        ],
    );
    let head = git(&r01, &["rev-parse", "HEAD"]);
    assert_eq!(
        fleet.batch("out", &["--rerun", "changed"]).status.code(),
        Some(0)
    );
    assert_eq!(run_id("r00"), before[0]);
    assert_ne!(run_id("r01"), before[1]);
    assert_eq!(run_id("r02"), before[2]);
    assert_eq!(
        git(&r01, &["rev-parse", "fix/r01~1"]),
        head,
        "rebuilt on the new head"
    );
    // Without --rerun, a moved head is not a reason to run again.
    git(
        &r01,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "again",
        ],
    );
    let kept = run_id("r01");
    assert_eq!(fleet.batch("out", &[]).status.code(), Some(0));
    assert_eq!(run_id("r01"), kept);
}

/// The task with a `publish:` block aimed at the fake forge, and a policy that lets the
/// branch be pushed.
pub(super) fn publishing_task(forge: &FakeForge) -> String {
    unpermitted_publishing_task(forge).replace(
        "mode: acceptEdits\n",
        "mode: acceptEdits\npermissions:\n  allow: [\"Bash(git push:*)\"]\n",
    )
}

fn unpermitted_publishing_task(forge: &FakeForge) -> String {
    TASK.replace(
        "batch:\n",
        &format!(
            "batch:\n  publish:\n    repo: org/{{{{ repo.name }}}}\n    base: main\n    api_url: {}\n    token_env: FORGE_TOKEN\n",
            forge.url()
        ),
    )
}

pub(super) async fn batch_async(fleet: &Fleet, args: &[&str]) -> Output {
    let mut command = fleet.command("out");
    command.args(args).env("FORGE_TOKEN", "forge-secret-token");
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_changed_repo_is_pushed_and_gets_one_pull_request_under_one_rate_budget() {
    let fleet = Fleet::new(6, &[]);
    for n in 0..6 {
        let id = format!("r{n:02}");
        let bare = fleet.path().join("remotes").join(format!("{id}.git"));
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare"]);
        git(
            &fleet.path().join(&id),
            &["remote", "add", "origin", bare.to_str().unwrap()],
        );
    }
    let forge = FakeForge::start(2).await;
    std::fs::write(fleet.path().join("task.yaml"), publishing_task(&forge)).unwrap();

    // --dry-run: everything but the push.
    let output = batch_async(&fleet, &["--jobs", "3", "--dry-run"]).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(forge.requests().is_empty());
    assert_eq!(fleet.journal("out", "r00")["phase"], "committed");

    // The real run continues each repository from its dry-run commit.
    let output = batch_async(&fleet, &["--jobs", "3"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("forge-secret-token"));
    // Nor written anywhere in the batch folder (journals, tasks, transcripts, reports).
    let mut files = vec![fleet.path().join("out")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
        } else if let Ok(text) = std::fs::read(&path) {
            let text = String::from_utf8_lossy(&text);
            assert!(!text.contains("forge-secret-token"), "{}", path.display());
        }
    }

    let pulls = forge.pulls();
    let mut heads: Vec<String> = pulls.iter().map(|pull| pull.head.clone()).collect();
    heads.sort();
    let expected: Vec<String> = (0..6).map(|n| format!("fix/r{n:02}")).collect();
    assert_eq!(heads, expected, "one pull request per changed repository");
    assert!(
        pulls
            .iter()
            .all(|pull| pull.base == "main" && pull.body.contains("checks passed"))
    );
    for n in 0..6 {
        let id = format!("r{n:02}");
        let bare = fleet.path().join("remotes").join(format!("{id}.git"));
        assert_eq!(
            git(&bare, &["show", &format!("fix/{id}:NOTE.md")]),
            format!("ok {id}\n")
        );
        let journal = fleet.journal("out", &id);
        assert_eq!(journal["phase"], "pr_opened");
        assert!(
            journal["pr_url"]
                .as_str()
                .unwrap()
                .starts_with("https://github.com/org/")
        );
    }
    let requests = forge.requests();
    assert!(
        requests
            .iter()
            .all(|request| request.authorization.as_deref() == Some("Bearer forge-secret-token"))
    );
    // The 429 holds back every worker, not only the one that met it. What may still arrive
    // inside the two-second Retry-After is what the other two workers had decided to send
    // before the shared budget heard of the 429: a repository's lookup (GET) already on its
    // way, and on a loaded machine the POST after it — at most two each. Without one
    // budget the other workers' remaining repositories (five, two requests each) would
    // all go through in the window.
    let limited = requests
        .iter()
        .find(|request| request.status == 429)
        .unwrap();
    let within = requests
        .iter()
        .filter(|request| {
            request.at > limited.at && request.at < limited.at + Duration::from_secs(2)
        })
        .count();
    assert!(
        within <= 4,
        "{within} requests inside the Retry-After window"
    );

    // Killed after the push, before the pull request was recorded: the restart finds the
    // open one and updates it, with no second push of a new PR.
    let path = fleet.path().join("out/repos/r00/journal.json");
    let mut journal = fleet.journal("out", "r00");
    journal["phase"] = "pushed".into();
    journal["outcome"] = Value::Null;
    std::fs::write(&path, journal.to_string()).unwrap();
    let before = forge.requests().len();
    let output = batch_async(&fleet, &["--jobs", "3"]).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(forge.pulls().len(), 6);
    let after: Vec<String> = forge.requests()[before..]
        .iter()
        .map(|request| format!("{} {}", request.method, request.path))
        .collect();
    let number = pulls
        .iter()
        .find(|pull| pull.head == "fix/r00")
        .unwrap()
        .number;
    assert_eq!(
        after,
        [
            "GET /repos/org/r00/pulls".to_string(),
            format!("PATCH /repos/org/r00/pulls/{number}")
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_published_where_the_policy_would_not_let_the_agent_push() {
    let fleet = Fleet::new(2, &[]);
    let forge = FakeForge::start(1).await;
    std::fs::write(
        fleet.path().join("task.yaml"),
        unpermitted_publishing_task(&forge),
    )
    .unwrap();
    let output = batch_async(&fleet, &["--jobs", "2"]).await;
    assert_eq!(output.status.code(), Some(1));
    let journal = fleet.journal("out", "r00");
    assert_eq!(journal["outcome"], "failed");
    assert_eq!(journal["phase"], "committed");
    assert!(
        journal["reason"]
            .as_str()
            .unwrap()
            .contains("does not allow the push: `git push origin fix/r00`"),
        "{journal}"
    );
    assert!(forge.requests().is_empty());
}

pub(super) const MODEL_KEY: &str = "batch-model-key";

/// A task whose runs cost money: one text turn from the fake model, priced at $1 per
/// million input tokens; the check fails where `word` is not `ok`.
pub(super) fn paid_task(server: &FakeModel, limits: &str) -> String {
    format!(
        "version: 1\nname: look at {{{{ repo.name }}}}\nprompt: look at {{{{ repo.name }}}}\n\
mode: dontAsk\ntools: [Read]\n{model}{limits}checks:\n  - name: word-is-ok\n    run: test {{{{ repo.params.word }}}} = ok\n",
        model = model_block(Api::Anthropic, server, "  pricing: {input: 1, output: 0}\n"),
    )
}

/// A reply costing `cents` US cents at the paid task's price.
pub(super) fn paid_reply(cents: u64) -> Reply {
    let tokens = Tokens {
        input: cents * 10_000,
        ..Tokens::default()
    };
    Reply::Turn(turn(vec![text("looked")], tokens))
}

pub(super) async fn paid_batch(fleet: &Fleet, out: &str, args: &[&str]) -> Output {
    let mut command = fleet.command(out);
    command.args(args).env("TEST_MODEL_KEY", MODEL_KEY);
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn once_the_batch_cost_limit_is_spent_no_repo_starts_and_running_ones_finish() {
    let fleet = Fleet::new(6, &[]);
    let server = FakeModel::start(MODEL_KEY, (0..6).map(|_| paid_reply(10)).collect()).await;
    let task = paid_task(&server, "limits:\n  batch_max_cost_usd: 0.25\n");
    std::fs::write(fleet.path().join("task.yaml"), task).unwrap();

    let output = paid_batch(&fleet, "out", &["--jobs", "2"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // $0.10 a repository, two at a time: r02 and r03 start at $0.10 and $0.20 spent, and
    // both finish although the limit is crossed while they run; r04 and r05 never start.
    assert_eq!(server.requests().len(), 4, "{stderr}");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    for id in ["r00", "r01", "r02", "r03"] {
        let journal = fleet.journal("out", id);
        assert_eq!(journal["outcome"], "unchanged", "{id}: {journal}");
        let cost = journal["run"]["cost_usd"].as_f64().unwrap();
        assert!((cost - 0.1).abs() < 1e-9, "{id}: {cost}");
    }
    for id in ["r04", "r05"] {
        let journal = fleet.journal("out", id);
        assert_eq!(journal["outcome"], "skipped", "{id}: {journal}");
        let reason = journal["reason"].as_str().unwrap();
        assert!(reason.contains("cost limit"), "{reason}");
    }
    let last = progress_lines(&stderr).pop().unwrap();
    assert_eq!((last.done, last.running, last.failed), (6, 0, 0));
    assert!((last.spent - 0.4).abs() < 1e-9, "{stderr}");

    // The reports say why the rest did not run.
    let junit = std::fs::read_to_string(fleet.path().join("out/junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let skipped: Vec<(&str, &str)> = doc
        .descendants()
        .filter(|node| node.has_tag_name("skipped"))
        .map(|node| {
            let case = node.parent().unwrap().attribute("name").unwrap();
            (case, node.attribute("message").unwrap())
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{junit}");
    assert!(
        skipped
            .iter()
            .all(|(_, message)| message.contains("cost limit"))
    );
    assert_eq!(
        skipped.iter().map(|(case, _)| *case).collect::<Vec<_>>(),
        ["r04", "r05"]
    );
    let summary = std::fs::read_to_string(fleet.path().join("out/summary.md")).unwrap();
    assert!(summary.contains("| r05 | skipped |"), "{summary}");
    assert!(
        summary.contains("Not started:\n\n- r04: not started: the batch's cost limit"),
        "{summary}"
    );

    // Started again, the batch counts what its folder already spent: nothing new starts.
    let output = paid_batch(&fleet, "out", &["--jobs", "2"]).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(server.requests().len(), 4);
    assert_eq!(fleet.journal("out", "r05")["outcome"], "skipped");
}

#[test]
fn the_batch_cost_limit_in_two_places_stops_the_batch_at_load() {
    let fleet = Fleet::new(1, &[]);
    let task = TASK.replace(
        "batch:\n",
        "limits:\n  batch_max_cost_usd: 1\nbatch:\n  max_cost_usd: 2\n",
    );
    std::fs::write(fleet.path().join("task.yaml"), task).unwrap();
    let output = fleet.batch("out", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("task.yaml:7:23: the batch's cost limit is set twice"),
        "{stderr}"
    );
}

#[test]
fn a_batch_killed_for_real_after_some_repos_finished_resumes_without_redoing_them() {
    use std::io::{BufRead, BufReader};
    let fleet = Fleet::new(8, &[]);
    let mut child = fleet
        .command("out")
        .args(["--jobs", "2"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // SIGKILL once three repositories have said they finished: the others are wherever
    // they are — cloning, running, committing — as on a lost machine.
    let mut finished = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(progress) = progress_lines(&line).pop() {
            finished.push(progress.repo);
            if finished.len() == 3 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let run_ids: Vec<Value> = finished
        .iter()
        .map(|id| fleet.journal("out", id)["run"]["run_id"].clone())
        .collect();

    let output = fleet.batch("out", &["--jobs", "2"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    for (id, run_id) in finished.iter().zip(&run_ids) {
        assert_eq!(
            &fleet.journal("out", id)["run"]["run_id"],
            run_id,
            "{id} ran again"
        );
    }
    for n in 0..8 {
        let id = format!("r{n:02}");
        assert_eq!(
            fleet.journal("out", &id)["outcome"],
            "changed",
            "{id}: {stderr}"
        );
        let count = git(
            &fleet.path().join(&id),
            &["rev-list", "--count", &format!("fix/{id}")],
        );
        assert_eq!(count.trim(), "2", "{id}: one change commit on top of init");
        assert_eq!(
            git(
                &fleet.path().join(&id),
                &["show", &format!("fix/{id}:NOTE.md")]
            ),
            format!("ok {id}\n")
        );
    }
}

#[test]
fn a_second_batch_over_a_folder_in_use_is_refused_before_touching_it() {
    let fleet = Fleet::new(1, &[]);
    std::fs::create_dir_all(fleet.path().join("out")).unwrap();
    // As a running batch holds it.
    let held = std::fs::File::create(fleet.path().join("out/tollgate.lock")).unwrap();
    held.try_lock().unwrap();
    let output = fleet.batch("out", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is in use by another tollgate run"),
        "{stderr}"
    );
    assert!(!fleet.path().join("out/repos").exists());
}

/// A local repository `name` under `dir` with one commit.
fn one_commit_repo(dir: &Path, name: &str) {
    let repo = dir.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("README"), format!("{name}\n")).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
}

#[test]
fn the_cron_example_runs_nightly_over_one_folder_and_reruns_only_what_changed() {
    let home = crate::support::Sandbox::with_examples();
    for name in ["api", "web"] {
        one_commit_repo(home.path(), name);
    }
    home.write("examples/batch/repos.txt", "../../api\n../../web\n");
    let state = home.path().join("state");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tollgate"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let night = || {
        let output = Command::new("sh")
            .arg(home.path().join("examples/batch/cron.sh"))
            .env("TOLLGATE_HOME", home.path())
            .env("TOLLGATE_STATE", &state)
            .env("PATH", &path)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        let summary = std::fs::read_to_string(state.join("report/summary.md")).unwrap();
        let journal = |id: &str| -> Value {
            let path = state.join("batch/repos").join(id).join("journal.json");
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        (summary, journal("api"), journal("web"))
    };
    let (summary, api, web) = night();
    assert!(summary.contains("| api | changed |"), "{summary}");
    assert!(summary.contains("| web | changed |"), "{summary}");
    assert_eq!(
        git(
            &home.path().join("api"),
            &["show", "tollgate/notice-api:NOTICE"]
        ),
        "api\n"
    );
    // The next night, web's head has moved: only web runs again.
    let web_repo = home.path().join("web");
    std::fs::write(web_repo.join("README"), "moved\n").unwrap();
    git(
        &web_repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qam",
            "move",
        ],
    );
    let (_, api_again, web_again) = night();
    assert_eq!(api_again["run"]["run_id"], api["run"]["run_id"]);
    assert_ne!(web_again["run"]["run_id"], web["run"]["run_id"]);
}

#[test]
fn on_a_terminal_the_progress_is_a_live_bar_above_which_each_repo_gets_its_line() {
    // `script` (util-linux) gives the batch a pseudo-terminal for stderr.
    let Ok(probe) = Command::new("script").arg("--version").output() else {
        return skip("no `script` (util-linux) on PATH to make a terminal");
    };
    assert!(probe.status.success());
    let fleet = Fleet::new(3, &[]);
    let command = format!(
        "{} batch task.yaml --repos repos.yaml --out out --jobs 2 >/dev/null",
        env!("CARGO_BIN_EXE_tollgate")
    );
    let output = Command::new("script")
        .current_dir(fleet.path())
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{terminal}");
    // The bar, redrawn in place (cursor moves and line clears). indicatif skips redraws
    // past its rate, so which counts were drawn is not fixed; the first draw always is.
    assert!(terminal.contains("tollgate batch ["), "{terminal}");
    assert!(
        (0..=3).any(|n| terminal.contains(&format!("] {n}/3 done, "))),
        "{terminal}"
    );
    assert!(terminal.contains("\u{1b}[2K"), "{terminal}");
    // And the same line per repository a log gets.
    for n in 1..=3 {
        assert!(
            terminal.contains(&format!("tollgate batch: [{n}/3 done, ")),
            "{terminal}"
        );
    }
}

/// A batch whose sandboxed model plants what would make tollgate's own git (the commit and
/// the patch after the run) run code: a `.git` file pointing at a planted git directory with
/// an fsmonitor, hooks and a filter driver, and attributes that name the filter for every file.
#[test]
fn the_batch_s_own_git_runs_nothing_the_sandboxed_model_planted() {
    if !need_landlock(tollgate::sandbox::kernel_abi(), 4, "the sandbox") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    one_commit_repo(dir.path(), "r00");
    let marker = dir.path().join("MARK");
    let run = format!("env > {}; false", marker.display());
    // From a script file: the gate refuses in every mode a write whose target it cannot see.
    let plant = crate::support::unseen_script(&format!(
        "g=git; mkdir -p evil && cp -r \"$($g rev-parse --git-common-dir)\"/. evil/ && printf '[core]\\n\\tfsmonitor = \"{run}\"\\n\\thooksPath = hooks\\n[filter \"x\"]\\n\\tclean = \"{run}\"\\n' >> evil/config && mkdir -p evil/hooks && printf '#!/bin/sh\\n{run}\\n' > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && f=.git && echo \"gitdir: $PWD/evil\" > \"$f\" && a=.gitattributes && echo '* filter=x' > \"$a\" && echo change > README"
    ));
    let task = format!(
        "version: 1\nname: plant {{{{ repo.name }}}}\nprompt: go\nmode: bypassPermissions\npolicy: policy.yaml\nfail_on: [denial, check, limit]\ntools: [Bash]\nbatch:\n  branch: fix/{{{{ repo.name }}}}\n  commit_message: planted\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - tool_use: {{name: Bash, input: {{command: {}}}}}\n    - - text: done\n",
        serde_json::to_string(&plant).unwrap()
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    std::fs::write(
        dir.path().join("policy.yaml"),
        "permissions:\n  default_mode: bypassPermissions\nsandbox: {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("repos.yaml"), "- repo: r00\n").unwrap();
    let output = crate::support::tollgate_in(dir.path())
        .args([
            "batch",
            "task.yaml",
            "--repos",
            "repos.yaml",
            "--out",
            "out",
        ])
        .output()
        .unwrap();
    let transcript = std::fs::read_dir(dir.path().join("out/repos/r00"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("transcript.jsonl"))
        .find(|path| path.exists())
        .map(|path| std::fs::read_to_string(path).unwrap())
        .unwrap_or_default();
    let stderr = format!("{}\n{transcript}", String::from_utf8_lossy(&output.stderr));
    let repo = dir.path().join("r00");
    assert!(
        !marker.exists(),
        "something planted ran: {}\n{stderr}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    // The change itself is committed on the branch, in the user's repository.
    assert_eq!(
        git(&repo, &["show", "fix/r00:README"]),
        "change\n",
        "{stderr}"
    );
    let patch = dir.path().join("out/repos/r00/r00.patch");
    assert!(
        std::fs::read_to_string(&patch).unwrap().contains("+change"),
        "{stderr}"
    );
}

/// A batch killed (SIGKILL) while its git runs leaves no git running, though git is started
/// without a keeper: PDEATHSIG ends git itself and the guardian what git started in its
/// process group. Otherwise a git of the killed batch could finish behind a resume's back.
#[test]
fn a_batch_killed_while_its_git_runs_leaves_no_git_behind() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;

    use crate::support::poll_until;
    use crate::support::procs::{parent_of, processes_with};

    let fleet = Fleet::new(1, &[]);
    // A git that hangs at the batch's first git call: `sleep` exec'd as git itself (the
    // group's first process), and one in the background, which PDEATHSIG does not reach.
    let bin = fleet.path().join("fake-bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("git");
    std::fs::write(&fake, "#!/bin/sh\nsleep 919.25 &\nexec sleep 919.5\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut tollgate = fleet
        .command("out")
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = poll_until(Duration::from_secs(20), || {
        let git = *processes_with("sleep 919.5").first()?;
        processes_with("sleep 919.25").first()?;
        Some(git)
    });
    let parent = started.and_then(parent_of);
    tollgate.kill().unwrap();
    tollgate.wait().unwrap();
    let gone = poll_until(Duration::from_secs(10), || {
        processes_with("sleep 919.").is_empty().then_some(())
    })
    .is_some();
    let left = processes_with("sleep 919.");
    for pid in &left {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    assert!(started.is_some(), "the batch never started its git");
    // tollgate's own child, no keeper between: the start without a fork is what ran.
    assert_eq!(parent, Some(tollgate.id()), "git's parent");
    assert!(gone, "git outlived the killed batch: {left:?}");
}
