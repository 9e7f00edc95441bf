//! `tollgate auto eval`: the configured classifier over labelled actions, so a team measures a
//! model and its prose before trusting them. Cases in, a confusion matrix and rates out.

use std::fmt::Write as _;

use serde::Deserialize;

use super::{Action, Classifier, Judgement, Ruling};

/// One labelled action: `{"intent": …, "action": {"tool": …, "input": …}, "expect": "allow"}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalCase {
    pub intent: String,
    pub action: CaseAction,
    pub expect: Ruling,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseAction {
    pub tool: String,
    #[serde(default)]
    pub input: serde_json::Value,
}

/// A case file that cannot be read as cases; names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CaseError {
    pub line: usize,
    pub message: String,
}

/// One case per non-empty line; `#` starts a comment line.
pub fn parse_cases(text: &str) -> Result<Vec<EvalCase>, CaseError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|err| CaseError {
                line: index + 1,
                message: err.to_string(),
            })
        })
        .collect()
}

/// The tallies of a run over the cases. An answer that is no verdict counts as a deny (the
/// run would have denied), and separately as an error.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EvalReport {
    pub true_allow: u32,
    pub false_allow: u32,
    pub true_deny: u32,
    pub false_deny: u32,
    pub errors: u32,
    pub model_calls: u32,
    pub cache_hits: u32,
    pub latency_ms: u64,
    /// `None` when a call's price was unknown.
    pub cost_usd: Option<f64>,
}

impl EvalReport {
    pub fn cases(&self) -> u32 {
        self.true_allow + self.false_allow + self.true_deny + self.false_deny
    }

    /// Denied though it should have been allowed, over the cases that should be allowed.
    pub fn false_block_rate(&self) -> f64 {
        ratio(self.false_deny, self.false_deny + self.true_allow)
    }

    /// Allowed though it should have been denied, over the cases that should be denied.
    pub fn false_allow_rate(&self) -> f64 {
        ratio(self.false_allow, self.false_allow + self.true_deny)
    }

    pub fn render(&self, model: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "classifier {model} over {}",
            crate::base::counted(self.cases(), "case")
        );
        let _ = writeln!(out, "                 judged allow  judged deny");
        let _ = writeln!(
            out,
            "expected allow   {:>12}  {:>11}",
            self.true_allow, self.false_deny
        );
        let _ = writeln!(
            out,
            "expected deny    {:>12}  {:>11}",
            self.false_allow, self.true_deny
        );
        let _ = writeln!(
            out,
            "false-block rate {:.1}%   false-allow rate {:.1}%   errors {}",
            100.0 * self.false_block_rate(),
            100.0 * self.false_allow_rate(),
            self.errors
        );
        let per_call = if self.model_calls == 0 {
            0.0
        } else {
            self.latency_ms as f64 / f64::from(self.model_calls)
        };
        let cost = self
            .cost_usd
            .map_or_else(|| "unknown".to_string(), |cost| format!("${cost:.6}"));
        let _ = writeln!(
            out,
            "model calls {}   cache hits {}   cost {cost}   mean latency {per_call:.1} ms per call",
            self.model_calls, self.cache_hits
        );
        out
    }
}

fn ratio(part: u32, whole: u32) -> f64 {
    if whole == 0 {
        0.0
    } else {
        f64::from(part) / f64::from(whole)
    }
}

/// Judges every case in order and tallies the answers.
pub async fn run_eval(classifier: &mut Classifier, cases: &[EvalCase]) -> EvalReport {
    let mut report = EvalReport {
        cost_usd: Some(0.0),
        ..EvalReport::default()
    };
    for case in cases {
        let action = Action {
            tool: case.action.tool.clone(),
            input: case.action.input.clone(),
        };
        let judged = classifier.judge(&case.intent, &action).await;
        for call in &judged.calls {
            if call.cache_hit {
                report.cache_hits += 1;
            } else {
                report.model_calls += 1;
                report.latency_ms += call.latency_ms;
            }
        }
        report.cost_usd = match (report.cost_usd, judged.cost_usd()) {
            (Some(sum), Some(cost)) => Some(sum + cost),
            _ => None,
        };
        let allowed = match judged.judgement {
            Judgement::Allow { .. } => true,
            Judgement::Deny { risk: None, .. } | Judgement::Unavailable { .. } => {
                report.errors += 1;
                false
            }
            Judgement::Deny { .. } => false,
        };
        match (case.expect, allowed) {
            (Ruling::Allow, true) => report.true_allow += 1,
            (Ruling::Allow, false) => report.false_deny += 1,
            (Ruling::Deny, true) => report.false_allow += 1,
            (Ruling::Deny, false) => report.true_deny += 1,
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse_by_line_and_rates_follow_the_matrix() {
        let cases = parse_cases(
            "# a comment\n{\"intent\": \"lint\", \"action\": {\"tool\": \"Bash\", \"input\": {\"command\": \"make lint\"}}, \"expect\": \"allow\"}\n\n",
        )
        .unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].expect, Ruling::Allow);
        let err = parse_cases("{}\n").unwrap_err();
        assert_eq!(err.line, 1);
        let report = EvalReport {
            true_allow: 3,
            false_deny: 1,
            true_deny: 4,
            false_allow: 0,
            ..EvalReport::default()
        };
        assert!((report.false_block_rate() - 0.25).abs() < 1e-9);
        assert_eq!(report.false_allow_rate(), 0.0);
        assert!(report.render("m").contains("false-block rate 25.0%"));
    }
}
