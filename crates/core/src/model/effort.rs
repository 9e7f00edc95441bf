//! Reasoning effort: one word (`--effort`, `model.effort`) for how hard the model thinks,
//! mapped to each provider's own setting — `reasoning_effort` for OpenAI-compatible
//! servers, an extended-thinking budget for Anthropic — and the words each provider takes.

use std::fmt;

/// Every word any provider takes, in order of effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

/// The APIs an effort is sent to; each takes its own subset of the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffortApi {
    Anthropic,
    OpenAi,
}

impl EffortApi {
    /// The words this API takes. OpenAI's `reasoning_effort` takes all six (which a given
    /// model accepts is the server's to say); Anthropic's thinking is a budget, for which
    /// only the three graded words have a meaning.
    pub fn accepts(self) -> &'static [Effort] {
        match self {
            EffortApi::Anthropic => &[Effort::Low, Effort::Medium, Effort::High],
            EffortApi::OpenAi => &Effort::ALL,
        }
    }

    fn name(self) -> &'static str {
        match self {
            EffortApi::Anthropic => "anthropic",
            EffortApi::OpenAi => "openai",
        }
    }
}

impl Effort {
    pub const ALL: [Effort; 6] = [
        Effort::None,
        Effort::Minimal,
        Effort::Low,
        Effort::Medium,
        Effort::High,
        Effort::Xhigh,
    ];

    pub fn parse(text: &str) -> Result<Effort, String> {
        Effort::ALL
            .into_iter()
            .find(|effort| effort.as_str() == text)
            .ok_or_else(|| format!("`{text}` is not an effort: {}", list(&Effort::ALL)))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::None => "none",
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::Xhigh => "xhigh",
        }
    }

    /// `Ok` when `api` takes this word; else a message naming the words it does take.
    pub fn check(self, api: EffortApi) -> Result<(), String> {
        if api.accepts().contains(&self) {
            Ok(())
        } else {
            Err(format!(
                "effort `{self}` is not one the {} provider takes: {}",
                api.name(),
                list(api.accepts())
            ))
        }
    }

    /// Anthropic's extended-thinking budget in tokens: the three levels Claude Code's
    /// "think", "think hard" and "ultrathink" give, the highest just under the 32k that
    /// streaming needs no batch for. `None` for a word Anthropic does not take.
    pub fn thinking_budget(self) -> Option<u32> {
        match self {
            Effort::Low => Some(4_000),
            Effort::Medium => Some(10_000),
            Effort::High => Some(31_999),
            Effort::None | Effort::Minimal | Effort::Xhigh => None,
        }
    }
}

impl fmt::Display for Effort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn list(efforts: &[Effort]) -> String {
    let words: Vec<&str> = efforts.iter().map(|effort| effort.as_str()).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_parses_back_to_itself() {
        for effort in Effort::ALL {
            assert_eq!(Effort::parse(effort.as_str()), Ok(effort));
        }
        let err = Effort::parse("max").unwrap_err();
        assert!(
            err.contains("none, minimal, low, medium, high or xhigh"),
            "{err}"
        );
        assert!(Effort::parse("High").is_err(), "words are lower case");
    }

    #[test]
    fn anthropic_takes_the_graded_words_only_and_each_has_a_budget() {
        for effort in Effort::ALL {
            let taken = effort.check(EffortApi::Anthropic).is_ok();
            assert_eq!(taken, effort.thinking_budget().is_some(), "{effort}");
        }
        let err = Effort::Minimal.check(EffortApi::Anthropic).unwrap_err();
        assert_eq!(
            err,
            "effort `minimal` is not one the anthropic provider takes: low, medium or high"
        );
        // The API's floor is 1024 and the budgets rise with the word.
        let budgets: Vec<u32> = [Effort::Low, Effort::Medium, Effort::High]
            .iter()
            .filter_map(|effort| effort.thinking_budget())
            .collect();
        assert!(budgets[0] >= 1024 && budgets.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn openai_takes_every_word() {
        for effort in Effort::ALL {
            assert_eq!(effort.check(EffortApi::OpenAi), Ok(()));
        }
    }
}
