//! The short human summary `tollgate run` prints on stdout, inert on a CI runner's log.

use std::path::Path;

use super::input_summary;
use crate::base::counted;
use crate::config::serde_name;
use crate::transcript::RunReport;

pub fn text_summary(report: &RunReport, reports: &[(&str, &Path)]) -> String {
    let counts = &report.counts;
    let outcome = serde_name(&report.outcome);
    let mut out = format!(
        "tollgate: {} — {outcome} (exit {})\n  {} · {} · {} denied · {}\n",
        report.task_name,
        report.exit_code.code(),
        counted(counts.turns, "turn"),
        counted(counts.tool_calls, "tool call"),
        counts.denials,
        counted(counts.tool_errors, "tool error")
    );
    if !report.calls_by_tool.is_empty() {
        let tally: Vec<String> = report
            .calls_by_tool
            .iter()
            .map(|(tool, count)| format!("{tool} ×{count}"))
            .collect();
        out.push_str(&format!("  calls: {}\n", tally.join(", ")));
    }
    let usage = &counts.usage;
    // The scripted model uses no tokens; a real one shows what the run consumed and cost.
    if usage.input_tokens + usage.output_tokens > 0 || counts.estimated_requests > 0 {
        let estimated = counts.estimated_requests > 0;
        let cost = report.total_cost_usd.map_or_else(
            || "unknown (no price for this model)".to_string(),
            |usd| format!("{}${usd:.4}", if estimated { "≈" } else { "" }),
        );
        let basis = if estimated {
            format!(" · usage {}", super::junit::usage_basis(counts))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  tokens: {} in · {} out · {} cache write · {} cache read · cost {cost}{basis}\n",
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens
        ));
    }
    if let Some(warning) = &report.model.price_warning {
        out.push_str(&format!("  warning: {warning}\n"));
    }
    let judge = &counts.classifier;
    if judge.reviews > 0 {
        let estimated = judge.estimated_calls > 0;
        let cost = report.classifier_cost_usd.map_or_else(
            || "unknown".to_string(),
            |usd| format!("{}${usd:.4}", if estimated { "≈" } else { "" }),
        );
        let cost = if estimated {
            format!(
                "{cost} · usage {}",
                super::junit::classifier_usage_basis(judge)
            )
        } else {
            cost
        };
        out.push_str(&format!(
            "  classifier: {} reviewed · {} allowed · {} denied · {} · {} · {} · {} in · {} out · cost {cost}\n",
            judge.reviews,
            judge.allows,
            judge.denies,
            counted(judge.errors, "error"),
            counted(judge.calls, "model call"),
            counted(judge.cache_hits, "cache hit"),
            judge.usage.input_tokens,
            judge.usage.output_tokens
        ));
    }
    if let Some(sandbox) = &report.sandbox {
        out.push_str(&format!("  sandbox: {}\n", sandbox.describe()));
    }
    out.push_str(&format!(
        "  read-only commands: {}\n",
        report.read_only_commands.describe()
    ));
    out.push_str(&effects_line(report));
    for excess in &report.effects.exceeded {
        let batch = if excess.effects.batch.len() > 1 {
            format!(
                " (run together with {} other calls)",
                excess.effects.batch.len() - 1
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  EXCEEDED its verdict: {} `{}`{batch}: {}\n",
            excess.tool,
            input_summary(&excess.tool, &excess.input),
            excess.effects.describe_excess()
        ));
    }
    for connection in &report.network_refusals {
        out.push_str(&format!(
            "  sandbox refused a connection to {}:{}\n",
            connection.host, connection.port
        ));
    }
    for held in &report.held_back {
        out.push_str(&format!("  {}\n", held.describe()));
    }
    if let Some(error) = &report.error {
        out.push_str(&format!("  stopped: {error}\n"));
    }
    for warning in &report.warnings {
        out.push_str(&format!("  warning: {warning}\n"));
    }
    for denial in &report.denials {
        let rule = denial
            .decision
            .rule
            .as_ref()
            .map(|rule| format!(" [{} at {}]", rule.rule, rule.source))
            .unwrap_or_default();
        out.push_str(&format!(
            "  denied {} `{}`{rule}\n",
            denial.tool,
            input_summary(&denial.tool, &denial.input)
        ));
    }
    for proposal in &report.proposed_rules {
        out.push_str(&format!(
            "  proposed rule {} (would have allowed {} denied call(s))\n",
            proposal.rule, proposal.count
        ));
    }
    for record in &report.checks {
        let verdict = if record.outcome.passed {
            "passed"
        } else {
            "FAILED"
        };
        out.push_str(&format!("  check {}: {verdict}\n", record.check.name));
    }
    if let Some(message) = report.final_message.as_deref().filter(|m| !m.is_empty()) {
        let first = message.lines().next().unwrap_or_default();
        out.push_str(&format!("  model: {first}\n"));
    }
    if report.structured_output.is_some()
        && let Some(folder) = report.transcript.parent()
    {
        out.push_str(&format!(
            "  structured output: {}\n",
            folder
                .join(crate::out_dir::STRUCTURED_OUTPUT_FILE)
                .display()
        ));
    }
    out.push_str(&format!("  transcript: {}\n", report.transcript.display()));
    for (name, path) in reports {
        out.push_str(&format!("  {name}: {}\n", path.display()));
    }
    // Names, commands, reasons and the model's words are not ours: on a runner's log none of
    // them may start a workflow command.
    crate::neutral::log_text(&out)
}

/// `effects: 6 calls measured (the whole workspace …) · 1 changed files · 1 exceeded its
/// verdict`, or that the ledger was off.
fn effects_line(report: &RunReport) -> String {
    let effects = &report.effects;
    let Some(config) = &effects.config else {
        return "  effects: not measured (effects.scope: off)\n".to_string();
    };
    format!(
        "  effects ({}): {} calls measured · {} changed files · {} exceeded their verdict\n",
        config.describe(),
        effects.measured,
        effects.changed,
        effects.exceeded.len()
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// What a CI log shows after a run: outcome, tallies, the refusal with its rule, checks.
    #[test]
    fn the_stdout_summary_reads_as_a_person_expects() {
        let report = crate::report::sample_report();
        let text = text_summary(&report, &[("sarif", Path::new("/out/tollgate.sarif"))]);
        insta::assert_snapshot!(text);
    }
}
