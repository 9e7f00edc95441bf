//! Auto mode's classifier (S5b): answers an ask nobody is present for by asking a model,
//! from the trusted intent and the actions only. It owns the judge's prompt, its strict
//! verdicts, their cache and the rules a denial proposes; it never allows what the gate
//! denied — it only ever sees asks the fast path could not settle — and fails closed.

mod cache;
pub mod eval;
mod prompt;
mod proposal;
mod reply;

use std::collections::VecDeque;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

pub use prompt::{Action, Review, Stage, review_hash, system_prompt, user_message};
pub use proposal::{ProposedRule, narrowest_rules, paste_block, proposed_rules_yaml, record};
pub use reply::{Reply, ReplyError, Risk, Ruling, parse_reply};

use crate::model::{
    History, Message, ModelRequest, Pricing, Provider, ProviderError, StopReason, Usage,
    UsageSource,
};
use crate::settings::AutoModeProse;
use cache::ReplyCache;

/// How many earlier calls the judge sees: enough to tell a step of a plan from a stray act.
const RECENT_CALLS: usize = 8;

/// The quick first answer's token budget in two-stage mode: the JSON verdict and no more.
const QUICK_MAX_TOKENS: u32 = 256;

/// Defaults when the policy's `classifier:` leaves them out.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// The small model of each real provider, the classifier's default.
pub fn default_model(provider: crate::task::ProviderKind) -> &'static str {
    match provider {
        crate::task::ProviderKind::Anthropic => "claude-haiku-4-5",
        crate::task::ProviderKind::Openai => "gpt-4.1-mini",
        crate::task::ProviderKind::Scripted => "scripted",
    }
}

/// Everything a classifier is built from, resolved by the CLI.
pub struct ClassifierSetup {
    pub provider: Provider,
    pub provider_name: String,
    pub model: String,
    /// `None` when the price table does not know the model (its cost is then unknown).
    pub pricing: Option<Pricing>,
    pub max_tokens: u32,
    pub two_stage: bool,
    pub max_cost_usd: Option<f64>,
    pub prose: AutoModeProse,
    pub cache_dir: Option<PathBuf>,
}

/// The connection to the judge's model and what it has cost.
struct Link {
    provider: Provider,
    model: String,
    pricing: Option<Pricing>,
    max_tokens: u32,
    max_cost_usd: Option<f64>,
    spent_usd: f64,
}

pub struct Classifier {
    link: Link,
    provider_name: String,
    two_stage: bool,
    prose: AutoModeProse,
    cache: ReplyCache,
    recent: VecDeque<Action>,
}

/// What one model call of a review answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Reply(Reply),
    /// The model answered, but not with a well-formed reply (malformed, refused): a deny.
    Unusable(String),
    /// The model could not be reached after the provider's retries, or the classifier's
    /// budget is spent: the run cannot go on judging.
    Unreachable(String),
}

/// One model call (or cache hit) of a review, for the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierCall {
    pub model: String,
    pub provider: String,
    /// SHA-256 of the model, prose, intent and action: the cache key.
    pub prompt_hash: String,
    pub stage: Stage,
    /// Serialized as `verdict`, the transcript's name for it.
    #[serde(rename = "verdict")]
    pub ruling: CallRuling,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    pub latency_ms: u64,
    pub usage: Usage,
    /// `estimated` when the API sent no usage and `usage` is tollgate's estimate (as on the
    /// agent's `assistant_message`); absent when the API counted it.
    #[serde(default, skip_serializing_if = "UsageSource::is_reported")]
    pub usage_source: UsageSource,
    /// `None` when the model's price is unknown.
    pub cost_usd: Option<f64>,
    pub cache_hit: bool,
}

/// A call's answer in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallRuling {
    Allow,
    Deny,
    /// Unusable or unreachable: the action is denied.
    Error,
}

/// The review's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    Allow { reason: String, risk: Risk },
    Deny { reason: String, risk: Option<Risk> },
    Unavailable { reason: String },
}

/// A finished review: its result and each call it made.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub judgement: Judgement,
    pub calls: Vec<ClassifierCall>,
}

impl Judged {
    pub fn cost_usd(&self) -> Option<f64> {
        self.calls.iter().map(|call| call.cost_usd).sum()
    }

    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        for call in &self.calls {
            usage.add(&call.usage);
        }
        usage
    }
}

impl Classifier {
    pub fn new(setup: ClassifierSetup) -> Self {
        Classifier {
            link: Link {
                provider: setup.provider,
                model: setup.model,
                pricing: setup.pricing,
                max_tokens: setup.max_tokens,
                max_cost_usd: setup.max_cost_usd,
                spent_usd: 0.0,
            },
            provider_name: setup.provider_name,
            two_stage: setup.two_stage,
            prose: setup.prose,
            cache: ReplyCache::new(setup.cache_dir),
            recent: VecDeque::new(),
        }
    }

    pub fn model(&self) -> &str {
        &self.link.model
    }

    /// A call the agent made (whatever became of it), for the next reviews' context.
    pub fn remember(&mut self, action: Action) {
        if self.recent.len() == RECENT_CALLS {
            self.recent.pop_front();
        }
        self.recent.push_back(action);
    }

    /// Reviews `action` for the task whose prompt is `intent`. The same action in the same
    /// task gets the cached reply without a model call.
    pub async fn judge(&mut self, intent: &str, action: &Action) -> Judged {
        let recent: Vec<Action> = self.recent.iter().cloned().collect();
        let review = Review {
            prose: &self.prose,
            intent,
            recent: &recent,
            action,
        };
        let hash = review_hash(&self.link.model, &review);
        // Owned: the link is borrowed mutably for each model call below.
        let model = self.link.model.clone();
        let record = Record {
            model: &model,
            provider: &self.provider_name,
            hash: &hash,
        };
        if let Some(reply) = self.cache.get(&hash) {
            let hit = Asked {
                answer: Answer::Reply(reply),
                latency_ms: 0,
                usage: Usage::default(),
                usage_source: UsageSource::Reported,
                cost_usd: Some(0.0),
            };
            return Judged {
                calls: vec![record.call(Stage::Quick, &hit, true)],
                judgement: judgement(hit.answer),
            };
        }
        let quick_tokens = if self.two_stage {
            self.link.max_tokens.min(QUICK_MAX_TOKENS)
        } else {
            self.link.max_tokens
        };
        let first = self.link.ask(&review, Stage::Quick, quick_tokens).await;
        let mut calls = vec![record.call(Stage::Quick, &first, false)];
        let leans_deny = matches!(&first.answer, Answer::Reply(v) if v.decision == Ruling::Deny)
            || matches!(first.answer, Answer::Unusable(_));
        let mut answer = first.answer;
        if self.two_stage && leans_deny {
            let max_tokens = self.link.max_tokens;
            let second = self.link.ask(&review, Stage::Reasoned, max_tokens).await;
            calls.push(record.call(Stage::Reasoned, &second, false));
            answer = second.answer;
        }
        if let Answer::Reply(reply) = &answer {
            self.cache.put(&hash, reply);
        }
        Judged {
            judgement: judgement(answer),
            calls,
        }
    }
}

/// What every audit record of one review shares.
struct Record<'a> {
    model: &'a str,
    provider: &'a str,
    hash: &'a str,
}

impl Record<'_> {
    fn call(&self, stage: Stage, asked: &Asked, cache_hit: bool) -> ClassifierCall {
        let (ruling, reason, risk) = match &asked.answer {
            Answer::Reply(reply) => (
                match reply.decision {
                    Ruling::Allow => CallRuling::Allow,
                    Ruling::Deny => CallRuling::Deny,
                },
                reply.reason.clone(),
                Some(reply.risk),
            ),
            Answer::Unusable(why) | Answer::Unreachable(why) => {
                (CallRuling::Error, why.clone(), None)
            }
        };
        ClassifierCall {
            model: self.model.to_string(),
            provider: self.provider.to_string(),
            prompt_hash: self.hash.to_string(),
            stage,
            ruling,
            reason,
            risk,
            latency_ms: asked.latency_ms,
            usage: asked.usage,
            usage_source: asked.usage_source,
            cost_usd: asked.cost_usd,
            cache_hit,
        }
    }
}

fn judgement(answer: Answer) -> Judgement {
    match answer {
        Answer::Reply(Reply {
            decision: Ruling::Allow,
            reason,
            risk,
        }) => Judgement::Allow { reason, risk },
        Answer::Reply(Reply {
            decision: Ruling::Deny,
            reason,
            risk,
        }) => Judgement::Deny {
            reason,
            risk: Some(risk),
        },
        Answer::Unusable(reason) => Judgement::Deny { reason, risk: None },
        Answer::Unreachable(reason) => Judgement::Unavailable { reason },
    }
}

struct Asked {
    answer: Answer,
    latency_ms: u64,
    usage: Usage,
    usage_source: UsageSource,
    cost_usd: Option<f64>,
}

impl Link {
    async fn ask(&mut self, review: &Review<'_>, stage: Stage, max_tokens: u32) -> Asked {
        let unasked = |answer| Asked {
            answer,
            latency_ms: 0,
            usage: Usage::default(),
            usage_source: UsageSource::Reported,
            cost_usd: Some(0.0),
        };
        if let Some(cap) = self.max_cost_usd.filter(|cap| self.spent_usd >= *cap) {
            return unasked(Answer::Unreachable(format!(
                "the classifier's budget is spent (classifier.max_cost_usd = {cap})"
            )));
        }
        let system = system_prompt(review.prose, stage);
        let messages = History::new(vec![Message::user_text(user_message(review))]);
        let request = ModelRequest {
            system: &system,
            messages: &messages,
            tools: &[],
            max_tokens,
        };
        // Retries are the provider's business; their notices are not the run's turns.
        let (sink, _notices) = tokio::sync::mpsc::unbounded_channel();
        let started = Instant::now();
        let result = self.provider.complete(&request, &sink).await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let response = match result {
            Ok(response) => response,
            Err(err) => {
                return Asked {
                    latency_ms,
                    ..unasked(Answer::Unreachable(unreachable_reason(&err)))
                };
            }
        };
        let cost_usd = self
            .pricing
            .map(|pricing| pricing.cost(&response.usage.tokens()));
        self.spent_usd += cost_usd.unwrap_or(0.0);
        let text: String = response
            .content
            .iter()
            .filter_map(|block| match block {
                crate::model::ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let answer = match response.stop_reason {
            StopReason::Refusal => Answer::Unusable("the classifier refused to answer".into()),
            _ => match parse_reply(&text) {
                Ok(reply) => Answer::Reply(reply),
                Err(err) => Answer::Unusable(err.to_string()),
            },
        };
        Asked {
            answer,
            latency_ms,
            usage: response.usage.tokens(),
            usage_source: UsageSource::of(&response.usage),
            cost_usd,
        }
    }
}

/// Exhaustive over provider errors: each is a judge that cannot answer.
fn unreachable_reason(err: &ProviderError) -> String {
    match err {
        ProviderError::Failed { .. } | ProviderError::Setup(_) | ProviderError::Protocol(_) => {
            format!("the classifier is unavailable: {err}")
        }
        ProviderError::ScriptExhausted(_) => {
            "the classifier is unavailable: the scripted classifier has no answer left".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{ScriptedBlock, ScriptedModel, ScriptedTurns};

    fn classifier(answers: &[&str], two_stage: bool, cache_dir: Option<PathBuf>) -> Classifier {
        Classifier::new(ClassifierSetup {
            provider: Provider::Scripted(ScriptedModel::new(ScriptedTurns(
                answers
                    .iter()
                    .map(|answer| vec![ScriptedBlock::Text((*answer).to_string())])
                    .collect(),
            ))),
            provider_name: "scripted".into(),
            model: "scripted".into(),
            pricing: Some(Pricing::FREE),
            max_tokens: 100,
            two_stage,
            max_cost_usd: None,
            prose: AutoModeProse::default(),
            cache_dir,
        })
    }

    const ALLOW: &str =
        r#"{"decision": "allow", "reason": "the task runs the linter", "risk": "low"}"#;
    const DENY: &str = r#"{"decision": "deny", "reason": "publishes a package", "risk": "high"}"#;

    fn action(command: &str) -> Action {
        Action {
            tool: "Bash".into(),
            input: json!({"command": command}),
        }
    }

    #[tokio::test]
    async fn verdicts_malformed_answers_and_exhaustion() {
        let mut judge = classifier(&[ALLOW, DENY, "sure, go ahead"], false, None);
        let first = judge.judge("lint", &action("make lint")).await;
        assert_eq!(
            first.judgement,
            Judgement::Allow {
                reason: "the task runs the linter".into(),
                risk: Risk::Low
            }
        );
        assert_eq!(first.calls.len(), 1);
        assert!(!first.calls[0].cache_hit);
        let denied = judge.judge("lint", &action("npm publish")).await;
        assert!(matches!(
            denied.judgement,
            Judgement::Deny {
                risk: Some(Risk::High),
                ..
            }
        ));
        let garbled = judge.judge("lint", &action("make fmt")).await;
        assert!(
            matches!(&garbled.judgement, Judgement::Deny { reason, risk: None } if reason.contains("not the JSON verdict")),
            "{garbled:?}"
        );
        assert_eq!(garbled.calls[0].ruling, CallRuling::Error);
        let gone = judge.judge("lint", &action("make docs")).await;
        assert!(
            matches!(gone.judgement, Judgement::Unavailable { .. }),
            "{gone:?}"
        );
    }

    #[tokio::test]
    async fn the_same_action_is_judged_once() {
        let mut judge = classifier(&[ALLOW], false, None);
        judge.judge("lint", &action("make lint")).await;
        judge.remember(action("ls"));
        let again = judge.judge("lint", &action("make lint")).await;
        assert!(again.calls[0].cache_hit);
        assert!(matches!(again.judgement, Judgement::Allow { .. }));
        let other_task = judge.judge("release", &action("make lint")).await;
        assert!(matches!(
            other_task.judgement,
            Judgement::Unavailable { .. }
        ));
    }

    #[tokio::test]
    async fn two_stages_ask_again_only_after_a_deny() {
        let mut judge = classifier(&[ALLOW, DENY, ALLOW, DENY, DENY], true, None);
        let allowed = judge.judge("t", &action("make lint")).await;
        assert_eq!(allowed.calls.len(), 1);
        let second_look = judge.judge("t", &action("make fmt")).await;
        assert_eq!(
            second_look
                .calls
                .iter()
                .map(|c| c.stage)
                .collect::<Vec<_>>(),
            vec![Stage::Quick, Stage::Reasoned]
        );
        assert!(matches!(second_look.judgement, Judgement::Allow { .. }));
        let denied = judge.judge("t", &action("npm publish")).await;
        assert!(matches!(denied.judgement, Judgement::Deny { .. }));
    }

    #[tokio::test]
    async fn a_spent_budget_stops_the_judge() {
        let mut judge = classifier(&[ALLOW], false, None);
        judge.link.max_cost_usd = Some(0.01);
        judge.link.spent_usd = 0.01;
        let judged = judge.judge("t", &action("make lint")).await;
        assert!(
            matches!(&judged.judgement, Judgement::Unavailable { reason } if reason.contains("max_cost_usd")),
            "{judged:?}"
        );
    }
}
