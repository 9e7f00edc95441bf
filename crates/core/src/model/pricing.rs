//! What tokens cost: a price table for current Anthropic and OpenAI models, the task's
//! override, and the cost of a request's usage. Pure data; prices are USD per million tokens.

use serde::{Deserialize, Serialize};

use super::Usage;

/// USD per million tokens. OpenAI has no cache-write price (caching is automatic and writes
/// cost the input price), so its table entries repeat the input price there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input: f64,
    pub output: f64,
    /// Defaults to the input price when a task's override leaves it out.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Defaults to the input price when a task's override leaves it out.
    #[serde(default)]
    pub cache_read: Option<f64>,
}

const PER_TOKEN: f64 = 1e-6;

impl Pricing {
    pub const FREE: Pricing = Pricing::new(0.0, 0.0, 0.0, 0.0);

    pub const fn new(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Pricing {
        Pricing {
            input,
            output,
            cache_write: Some(cache_write),
            cache_read: Some(cache_read),
        }
    }

    fn cache_write(&self) -> f64 {
        self.cache_write.unwrap_or(self.input)
    }

    fn cache_read(&self) -> f64 {
        self.cache_read.unwrap_or(self.input)
    }

    /// The cost of `usage` in USD.
    pub fn cost(&self, usage: &Usage) -> f64 {
        PER_TOKEN
            * (usage.input_tokens as f64 * self.input
                + usage.output_tokens as f64 * self.output
                + usage.cache_creation_input_tokens as f64 * self.cache_write()
                + usage.cache_read_input_tokens as f64 * self.cache_read())
    }

    /// The most output tokens `usd` pays for beside `input_tokens` prompt tokens at their
    /// worst case; `u64::MAX` when output is free.
    pub fn output_tokens_within(&self, input_tokens: u64, usd: f64) -> u64 {
        let left = usd - self.worst_case(input_tokens, 0);
        if left <= 0.0 {
            return 0;
        }
        if self.output <= 0.0 {
            return u64::MAX;
        }
        // `as` saturates: a huge budget is "any number".
        (left / (PER_TOKEN * self.output)).floor() as u64
    }

    /// The most `input_tokens` prompt tokens plus `output_tokens` generated tokens can cost:
    /// every prompt token at the dearest of the input prices.
    pub fn worst_case(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        let input = self.input.max(self.cache_write()).max(self.cache_read());
        PER_TOKEN * (input_tokens as f64 * input + output_tokens as f64 * self.output)
    }
}

/// The day the table's prices were taken from the vendors' price pages. A price that
/// changed since is set in the task (`model.pricing`), which always wins.
pub const PRICES_AS_OF: &str = "2025-11-24";

/// Model-name prefixes and their prices, as published by Anthropic and OpenAI (standard
/// tier; Anthropic cache writes at the 5-minute rate). The longest matching prefix wins, so
/// dated snapshots (`claude-sonnet-4-5-20250929`) and `-latest` aliases find their family.
const TABLE: &[(&str, Pricing)] = &[
    // Anthropic
    ("claude-opus-4-5", Pricing::new(5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4-1", Pricing::new(15.0, 75.0, 18.75, 1.50)),
    ("claude-opus-4", Pricing::new(15.0, 75.0, 18.75, 1.50)),
    ("claude-3-opus", Pricing::new(15.0, 75.0, 18.75, 1.50)),
    ("claude-sonnet-4-5", Pricing::new(3.0, 15.0, 3.75, 0.30)),
    ("claude-sonnet-4", Pricing::new(3.0, 15.0, 3.75, 0.30)),
    ("claude-3-7-sonnet", Pricing::new(3.0, 15.0, 3.75, 0.30)),
    ("claude-3-5-sonnet", Pricing::new(3.0, 15.0, 3.75, 0.30)),
    ("claude-haiku-4-5", Pricing::new(1.0, 5.0, 1.25, 0.10)),
    ("claude-3-5-haiku", Pricing::new(0.80, 4.0, 1.0, 0.08)),
    ("claude-3-haiku", Pricing::new(0.25, 1.25, 0.30, 0.03)),
    // OpenAI
    ("gpt-5-nano", Pricing::new(0.05, 0.40, 0.05, 0.005)),
    ("gpt-5-mini", Pricing::new(0.25, 2.0, 0.25, 0.025)),
    ("gpt-5", Pricing::new(1.25, 10.0, 1.25, 0.125)),
    ("gpt-4.1-nano", Pricing::new(0.10, 0.40, 0.10, 0.025)),
    ("gpt-4.1-mini", Pricing::new(0.40, 1.60, 0.40, 0.10)),
    ("gpt-4.1", Pricing::new(2.0, 8.0, 2.0, 0.50)),
    ("gpt-4o-mini", Pricing::new(0.15, 0.60, 0.15, 0.075)),
    ("gpt-4o", Pricing::new(2.50, 10.0, 2.50, 1.25)),
    ("o4-mini", Pricing::new(1.10, 4.40, 1.10, 0.275)),
    ("o3-mini", Pricing::new(1.10, 4.40, 1.10, 0.55)),
    ("o3", Pricing::new(2.0, 8.0, 2.0, 0.50)),
];

/// The table's price for `model`, if it knows the model. Gateways often prefix the vendor
/// (`anthropic/claude-…`, `openai/gpt-…`); that prefix is ignored.
pub fn lookup(model: &str) -> Option<Pricing> {
    find(model).map(|(_, pricing, _)| pricing)
}

/// The table's entry for `model`: its prefix, its price, and whether the name is that
/// model itself (the prefix alone, or with a date or `-latest`) or only of its family
/// (`claude-opus-4-6` under `claude-opus-4`), whose price may differ.
fn find(model: &str) -> Option<(&'static str, Pricing, bool)> {
    let name = model.rsplit('/').next().unwrap_or(model);
    let (prefix, pricing) = TABLE
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())?;
    Some((prefix, *pricing, is_same_model(&name[prefix.len()..])))
}

/// What may follow a table prefix and still name that model: nothing, a snapshot date
/// (`-20250929`, `-2024-07-18`) or `-latest`.
fn is_same_model(rest: &str) -> bool {
    let Some(rest) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    let digits =
        |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split('-').collect();
    rest == "latest"
        || matches!(parts.as_slice(), [date] if digits(date, 8))
        || matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
}

/// Where a run's price came from, as `run_started` and the reports say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum PriceSource {
    /// The task's `model.pricing`.
    Task,
    /// The scripted model, which costs nothing.
    Free,
    /// The price table's entry for this model.
    Table { prefix: String, as_of: String },
    /// The price table's entry for the model's family only: the model itself is not in the
    /// table (a newer one, say), and its price may differ.
    Family { prefix: String, as_of: String },
    /// Neither the task nor the table knows the model: its cost is unknown.
    Unknown,
}

impl PriceSource {
    /// The table's answer for `model`: its price, and where it came from.
    pub fn of_table(model: &str) -> (Option<Pricing>, PriceSource) {
        match find(model) {
            None => (None, PriceSource::Unknown),
            Some((prefix, pricing, same)) => {
                let (prefix, as_of) = (prefix.to_string(), PRICES_AS_OF.to_string());
                let source = if same {
                    PriceSource::Table { prefix, as_of }
                } else {
                    PriceSource::Family { prefix, as_of }
                };
                (Some(pricing), source)
            }
        }
    }

    /// The warning a price found by family prefix only deserves.
    pub fn warning(&self, model: &str) -> Option<String> {
        match self {
            PriceSource::Family { prefix, as_of } => Some(format!(
                "model `{model}` is not in the price table (of {as_of}); it is priced as its family `{prefix}`, which may cost otherwise: set model.pricing in the task to give its price"
            )),
            PriceSource::Task
            | PriceSource::Free
            | PriceSource::Table { .. }
            | PriceSource::Unknown => None,
        }
    }
}

/// The price table as rows for documentation: (model prefix, pricing).
pub fn table() -> &'static [(&'static str, Pricing)] {
    TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(
            lookup("claude-opus-4-5-20251101"),
            Some(Pricing::new(5.0, 25.0, 6.25, 0.50))
        );
        assert_eq!(
            lookup("claude-opus-4-1-20250805"),
            Some(Pricing::new(15.0, 75.0, 18.75, 1.50))
        );
        assert_eq!(
            lookup("gpt-4o-mini-2024-07-18").map(|p| p.input),
            Some(0.15)
        );
        assert_eq!(lookup("openai/gpt-4o").map(|p| p.input), Some(2.50));
        assert_eq!(lookup("llama3.1:8b"), None);
    }

    #[test]
    fn a_model_priced_by_its_family_only_is_told_apart() {
        let source = |model: &str| PriceSource::of_table(model).1;
        let table = |prefix: &str| PriceSource::Table {
            prefix: prefix.into(),
            as_of: PRICES_AS_OF.into(),
        };
        let family = |prefix: &str| PriceSource::Family {
            prefix: prefix.into(),
            as_of: PRICES_AS_OF.into(),
        };
        assert_eq!(source("claude-opus-4-5"), table("claude-opus-4-5"));
        assert_eq!(source("claude-opus-4-5-20251101"), table("claude-opus-4-5"));
        assert_eq!(source("gpt-4o-mini-2024-07-18"), table("gpt-4o-mini"));
        assert_eq!(
            source("claude-3-7-sonnet-latest"),
            table("claude-3-7-sonnet")
        );
        assert_eq!(source("openai/gpt-4o"), table("gpt-4o"));
        assert_eq!(source("claude-opus-4-6"), family("claude-opus-4"));
        assert_eq!(source("claude-opus-4-1-20250805"), table("claude-opus-4-1"));
        assert_eq!(source("claude-opus-4-20250514"), table("claude-opus-4"));
        assert_eq!(source("claude-sonnet-4-7"), family("claude-sonnet-4"));
        assert_eq!(source("gpt-5-codex"), family("gpt-5"));
        assert_eq!(source("llama3.1:8b"), PriceSource::Unknown);
        let warning = source("claude-opus-4-6")
            .warning("claude-opus-4-6")
            .unwrap();
        assert!(
            warning.contains("priced as its family `claude-opus-4`"),
            "{warning}"
        );
        assert_eq!(source("claude-opus-4-5").warning("claude-opus-4-5"), None);
    }

    #[test]
    fn cost_counts_every_kind_of_token() {
        let pricing = Pricing::new(3.0, 15.0, 3.75, 0.30);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 200_000,
            cache_read_input_tokens: 1_000_000,
        };
        let cost = pricing.cost(&usage);
        assert!((cost - (3.0 + 1.5 + 0.75 + 0.30)).abs() < 1e-9, "{cost}");
        assert!((pricing.worst_case(1_000_000, 1_000_000) - 18.75).abs() < 1e-9);
    }

    /// The price table in docs/providers.md is this table; a price changed in one place only
    /// fails here.
    #[test]
    fn the_docs_list_the_table() {
        let readme = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/providers.md"
        ))
        .unwrap();
        for (prefix, pricing) in table() {
            let row = format!(
                "| `{prefix}` | {} | {} | {} | {} |",
                pricing.input,
                pricing.output,
                pricing.cache_write(),
                pricing.cache_read()
            );
            assert!(
                readme.contains(&row),
                "docs/providers.md lacks the row {row}"
            );
        }
    }

    #[test]
    fn an_override_without_cache_prices_uses_the_input_price() {
        let pricing = Pricing {
            input: 2.0,
            output: 4.0,
            cache_write: None,
            cache_read: None,
        };
        let usage = Usage {
            cache_read_input_tokens: 500_000,
            ..Usage::default()
        };
        assert!((pricing.cost(&usage) - 1.0).abs() < 1e-9);
    }
}
