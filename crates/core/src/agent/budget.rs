//! The run's spend: tokens and cost per request and in total, and the token and cost limits,
//! checked before each request against that request's worst case so a run never overshoots.

use std::sync::Arc;

use crate::model::{Pricing, Usage};
use crate::shared_budget::{Lease, Reservation, SharedBudget};
use crate::task::Limits;
use crate::transcript::Outcome;

/// A limit that stops the run before the next request, and why, in words for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitReached {
    pub outcome: Outcome,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Budget {
    limits: Limits,
    pricing: Option<Pricing>,
    max_tokens: u32,
    total: Usage,
    cost: Option<f64>,
    /// The last request's prompt: tokens as the API counted them, and its size in bytes.
    last_prompt: Option<(u64, usize)>,
    /// The budget other runs share with this one, if any.
    shared: Option<Arc<SharedBudget>>,
}

/// One conversation's last prompt as the budget knows it; `default()` for a new one.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromptEstimate(Option<(u64, usize)>);

/// Without a tokenizer, new prompt text is counted at one token per two bytes: more than any
/// of the vendors' tokenizers yields for text or code, so the estimate errs high.
const BYTES_PER_TOKEN: usize = 2;

/// The fewest output tokens a request is sent with when the cost limit lowers its
/// `max_tokens` (or `max_tokens` itself, when that is lower): an answer cut shorter than this
/// would be paid for and of little use, so the run stops instead.
pub const MIN_OUTPUT_TOKENS: u32 = 1024;

impl Budget {
    pub fn new(limits: Limits, pricing: Option<Pricing>, max_tokens: u32) -> Budget {
        Budget {
            limits,
            pricing,
            max_tokens,
            total: Usage::default(),
            cost: pricing.map(|_| 0.0),
            last_prompt: None,
            shared: None,
        }
    }

    /// The same budget, also held to `shared`.
    pub fn shared(mut self, shared: Option<Arc<SharedBudget>>) -> Budget {
        self.shared = shared;
        self
    }

    /// After [`admit`](Self::admit) allowed a request of `max_tokens`: its worst case
    /// reserved in the shared budget (with `max_tokens` lowered to what is left there, down
    /// to the same floor), or the reason it cannot be sent. Without a shared budget, nothing.
    pub fn reserve(
        &self,
        prompt_bytes: usize,
        max_tokens: u32,
    ) -> Result<(u32, Option<Lease>), LimitReached> {
        let Some(shared) = &self.shared else {
            return Ok((max_tokens, None));
        };
        let stop = |reason: String| LimitReached {
            outcome: Outcome::MaxBudgetUsd,
            reason,
        };
        let Some(pricing) = self.pricing else {
            return Err(stop(format!(
                "stopped: the shared budget {} needs the model's price, which is not known",
                shared.path().display()
            )));
        };
        let prompt = self.prompt_estimate(prompt_bytes);
        let floor = max_tokens.min(MIN_OUTPUT_TOKENS);
        let cost_at = |tokens: u32| pricing.worst_case(prompt, u64::from(tokens));
        let fit_within = |usd: f64| pricing.output_tokens_within(prompt, usd);
        match shared.reserve(max_tokens, floor, &cost_at, &fit_within) {
            Ok(Reservation::Granted { max_tokens, lease }) => Ok((max_tokens, Some(lease))),
            Ok(Reservation::Refused {
                available_usd,
                cap_usd,
            }) => Err(stop(format!(
                "stopped before a request that could cost ${:.4} (up to {prompt} prompt tokens and {floor} output tokens): the shared budget {} has ${available_usd:.4} of its ${cap_usd} left for all the runs that share it",
                cost_at(floor),
                shared.path().display()
            ))),
            // No request is sent without its reservation: the cap could not be held.
            Err(err) => Err(stop(format!("stopped: {err}"))),
        }
    }

    /// The most tokens a prompt of `bytes` can be: the last prompt's exact count plus the
    /// estimate for what was added since.
    pub fn prompt_estimate(&self, bytes: usize) -> u64 {
        let (known, known_bytes) = self.last_prompt.unwrap_or((0, 0));
        let added = bytes.saturating_sub(known_bytes).div_ceil(BYTES_PER_TOKEN);
        known + u64::try_from(added).unwrap_or(u64::MAX)
    }

    /// Before a request whose prompt is `prompt_bytes` long: the `max_tokens` to ask for
    /// (lowered to what `max_output_tokens` leaves), or the limit that ends the run here.
    pub fn admit(&self, prompt_bytes: usize) -> Result<u32, LimitReached> {
        let prompt = self.prompt_estimate(prompt_bytes);
        if let Some(limit) = self.limits.max_input_tokens {
            let used = self.total.prompt_tokens();
            if used + prompt > limit {
                return Err(LimitReached {
                    outcome: Outcome::MaxInputTokens,
                    reason: format!(
                        "stopped before a request of up to {prompt} prompt tokens: {used} of max_input_tokens = {limit} used"
                    ),
                });
            }
        }
        let mut max_tokens = self.max_tokens;
        if let Some(limit) = self.limits.max_output_tokens {
            let left = limit.saturating_sub(self.total.output_tokens);
            if left == 0 {
                return Err(LimitReached {
                    outcome: Outcome::MaxOutputTokens,
                    reason: format!("stopped: max_output_tokens = {limit} used up"),
                });
            }
            max_tokens = max_tokens.min(u32::try_from(left).unwrap_or(u32::MAX));
        }
        if let (Some(limit), Some(pricing), Some(spent)) =
            (self.limits.max_cost_usd, self.pricing, self.cost)
        {
            let worst = pricing.worst_case(prompt, u64::from(max_tokens));
            if spent + worst > limit {
                // The request is sent with the output the budget still pays for, when that
                // is enough for an answer: its worst case then fits, so the limit holds.
                let fits = pricing.output_tokens_within(prompt, limit - spent);
                let floor = max_tokens.min(MIN_OUTPUT_TOKENS);
                if fits >= u64::from(floor) {
                    return Ok(max_tokens.min(u32::try_from(fits).unwrap_or(u32::MAX)));
                }
                let least = pricing.worst_case(prompt, u64::from(floor));
                return Err(LimitReached {
                    outcome: Outcome::MaxBudgetUsd,
                    reason: format!(
                        "stopped before a request that could cost ${least:.4} (up to {prompt} prompt tokens and {floor} output tokens, at their dearest price): ${spent:.4} of max_cost_usd = ${limit} spent; raise limits.max_cost_usd (or --max-cost) to at least ${:.4} to send it",
                        spent + least
                    ),
                });
            }
        }
        Ok(max_tokens)
    }

    /// After a response to a prompt of `prompt_bytes`: adds its usage; returns its cost.
    pub fn record(&mut self, usage: &Usage, prompt_bytes: usize) -> Option<f64> {
        self.total.add(usage);
        // A provider that reports no usage (the scripted one) leaves the estimate to bytes.
        if usage.prompt_tokens() > 0 {
            self.last_prompt = Some((usage.prompt_tokens(), prompt_bytes));
        }
        let cost = self.pricing.map(|pricing| pricing.cost(usage));
        if let (Some(total), Some(cost)) = (self.cost.as_mut(), cost) {
            *total += cost;
        }
        cost
    }

    /// From now on requests are charged at `pricing` (a fallback model's); a price nobody
    /// knows makes the run's total unknown rather than wrong.
    pub fn reprice(&mut self, pricing: Option<Pricing>) {
        self.pricing = pricing;
        if pricing.is_none() {
            self.cost = None;
        }
    }

    pub fn total_cost_usd(&self) -> Option<f64> {
        self.cost
    }

    /// A resumed run: what the run had spent before, against the same limits.
    pub fn restore(&mut self, spent: Usage, cost: Option<f64>) {
        self.total = spent;
        if self.pricing.is_some() {
            self.cost = cost;
        }
    }

    /// After the history was rewritten (compacted): a prompt of `bytes` is taken to be
    /// `tokens` long, until the next response counts it.
    pub fn calibrate(&mut self, tokens: u64, bytes: usize) {
        self.last_prompt = Some((tokens, bytes));
    }

    /// Switches the prompt estimate to another conversation (a sub-agent's history is not
    /// the parent's), returning the one it replaces; totals and limits stay the run's.
    pub fn switch_context(&mut self, estimate: PromptEstimate) -> PromptEstimate {
        PromptEstimate(std::mem::replace(&mut self.last_prompt, estimate.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_turns: 50,
            max_cost_usd: None,
            max_input_tokens: None,
            max_output_tokens: None,
            timeout: None,
            tool_timeout: None,
            max_denials: None,
            max_consecutive_denials: None,
            max_classifier_denials: crate::task::DEFAULT_MAX_CLASSIFIER_DENIALS,
            max_consecutive_classifier_denials:
                crate::task::DEFAULT_MAX_CONSECUTIVE_CLASSIFIER_DENIALS,
            max_parallel_tools: 10,
            message_result_chars: 200_000,
        }
    }

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn the_budget_stops_before_a_request_that_could_overshoot() {
        // $10 and $20 per million: 1000 in + 500 out costs $0.02.
        let pricing = Pricing::new(10.0, 20.0, 10.0, 1.0);
        let mut budget = Budget::new(
            Limits {
                max_cost_usd: Some(0.06),
                ..limits()
            },
            Some(pricing),
            1000,
        );
        // First request: 2000 bytes ≈ 1000 tokens ($0.01) + 1000 output ($0.02) ≤ $0.06.
        assert_eq!(budget.admit(2000), Ok(1000));
        assert_eq!(budget.record(&usage(1000, 500), 2000), Some(0.02));
        // Second: 1000 known + 100 new tokens ($0.011) + $0.02 + $0.02 spent ≤ $0.06.
        assert_eq!(budget.admit(2200), Ok(1000));
        budget.record(&usage(1100, 500), 2200);
        // Third: $0.04 spent + $0.0112 + $0.02 > $0.06.
        let stop = budget.admit(2400).unwrap_err();
        assert_eq!(stop.outcome, Outcome::MaxBudgetUsd);
        assert!(budget.total_cost_usd().unwrap() <= 0.06);
    }

    #[test]
    fn output_limit_lowers_max_tokens_then_stops() {
        let mut budget = Budget::new(
            Limits {
                max_output_tokens: Some(1500),
                ..limits()
            },
            None,
            1000,
        );
        assert_eq!(budget.admit(10), Ok(1000));
        budget.record(&usage(10, 1000), 10);
        assert_eq!(budget.admit(10), Ok(500));
        budget.record(&usage(10, 500), 10);
        assert_eq!(
            budget.admit(10).unwrap_err().outcome,
            Outcome::MaxOutputTokens
        );
        assert_eq!(budget.total_cost_usd(), None);
    }

    #[test]
    fn input_limit_counts_cached_tokens_too() {
        let mut budget = Budget::new(
            Limits {
                max_input_tokens: Some(3000),
                ..limits()
            },
            None,
            100,
        );
        budget.record(
            &Usage {
                input_tokens: 100,
                cache_read_input_tokens: 1900,
                ..Usage::default()
            },
            4000,
        );
        // 2000 used; the next prompt is at least the last one's 2000 tokens.
        assert_eq!(
            budget.admit(4000).unwrap_err().outcome,
            Outcome::MaxInputTokens
        );
    }

    /// A budget too small for the worst case at `max_tokens` still sends the request, with
    /// `max_tokens` lowered so that its worst case fits; below 1024 output tokens it stops
    /// and says what the request could cost and what budget would send it.
    #[test]
    fn a_small_budget_lowers_max_tokens_and_a_refusal_names_the_budget_needed() {
        // $3 in, $15 out per million; max_tokens 32000 could cost $0.48 alone.
        let pricing = Pricing::new(3.0, 15.0, 3.75, 0.30);
        let budget = |usd| {
            Budget::new(
                Limits {
                    max_cost_usd: Some(usd),
                    ..limits()
                },
                Some(pricing),
                32_000,
            )
        };
        // 2000 bytes ≈ 1000 tokens at $3.75 ($0.00375); $0.05 leaves 3083 output tokens.
        let tokens = budget(0.05).admit(2000).unwrap();
        assert_eq!(tokens, 3083);
        assert!(pricing.worst_case(1000, u64::from(tokens)) <= 0.05);
        let stop = budget(0.01).admit(2000).unwrap_err();
        assert_eq!(stop.outcome, Outcome::MaxBudgetUsd);
        assert!(
            stop.reason.contains("could cost $0.0191")
                && stop
                    .reason
                    .contains("raise limits.max_cost_usd (or --max-cost) to at least $0.0191"),
            "{}",
            stop.reason
        );
    }
}
