//! The fallback model (`model.fallback`, `--fallback-model`): once the run's model is
//! overloaded or unavailable after its retries, every later request of the run — sub-agents'
//! included — goes to the fallback, priced at the fallback's own rates. Switches once.

use crate::model::pricing::PriceSource;
use crate::model::{Pricing, Provider, ProviderError};
use crate::transcript::Event;

/// The model to switch to, with its price as the table knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FallbackModel {
    pub name: String,
    /// `None` when the table does not know it: the run's cost is unknown from the switch on.
    pub pricing: Option<Pricing>,
    pub price: PriceSource,
}

impl FallbackModel {
    /// The table's price for `name` (a task's `model.pricing` is its own model's, not this).
    pub fn priced(name: String) -> FallbackModel {
        let (pricing, price) = PriceSource::of_table(&name);
        FallbackModel {
            name,
            pricing,
            price,
        }
    }
}

/// Whether `err` moves the run to its fallback: the event that records it, after the
/// provider, the budget and `from` (the model now answering) are switched. `None` when there
/// is no fallback left or the failure is of another kind.
pub(super) fn switch(
    fallback: &mut Option<FallbackModel>,
    from: &mut String,
    provider: &mut Provider,
    budget: &mut super::Budget,
    err: &ProviderError,
    turn: u32,
) -> Option<Event> {
    if !err.is_unavailable() {
        return None;
    }
    let to = fallback.take()?;
    provider.switch_model(&to.name);
    budget.reprice(to.pricing);
    tracing::warn!(
        "model {from} is unavailable ({err}); the run goes on with {}",
        to.name
    );
    let event = Event::ModelFallback {
        turn,
        from: std::mem::replace(from, to.name.clone()),
        to: to.name,
        price: to.price,
        error: err.to_string(),
    };
    Some(event)
}
