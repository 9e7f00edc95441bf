//! Publishing a repository's change: the push of its branch and one pull request opened or
//! updated through the GitHub REST API (any base URL, for GitHub Enterprise). All workers
//! share one [`RateBudget`]: a 429, a secondary limit or an exhausted `x-ratelimit-*` seen
//! by one holds back every request of the batch, and other shards learn the same from the
//! forge's own headers. The token comes from an environment variable and is never written.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use thiserror::Error;

/// Tries of one request through rate limits before the repository fails.
const MAX_ATTEMPTS: u32 = 6;
/// The wait after a limit response that names none (GitHub's advice for secondary limits:
/// at least a minute; tests shorten it through the `Retry-After` they send).
const DEFAULT_BACKOFF: Duration = Duration::from_secs(60);
/// The longest a forge's `Retry-After` or rate reset is waited for: GitHub's limits reset
/// within the hour, so a longer wait is a broken server and fails the repository instead.
pub const MAX_FORGE_WAIT: Duration = Duration::from_secs(3600);
/// The most of one answer read: pull request lists and objects are kilobytes.
pub const MAX_FORGE_BODY: usize = 8 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum ForgeError {
    #[error("cannot reach the forge: {0}")]
    Http(String),
    #[error("the forge answered {status} to {what}: {message}")]
    Refused {
        what: String,
        status: u16,
        message: String,
    },
    #[error("still rate-limited after {MAX_ATTEMPTS} tries of {0}")]
    RateLimited(String),
    #[error(
        "the forge asked to wait {}s before {what}, over the {}s cap",
        wait.as_secs(), MAX_FORGE_WAIT.as_secs()
    )]
    WaitTooLong { what: String, wait: Duration },
    #[error(
        "the forge's answer to {what} is over {} MiB; the rest was not read",
        MAX_FORGE_BODY / (1024 * 1024)
    )]
    BodyTooLarge { what: String },
    #[error("{what} are more than {limit}: not read to the end, so nothing was posted")]
    TooMany { what: String, limit: usize },
}

/// When the next request to the forge may go, for the whole batch.
#[derive(Debug)]
pub struct RateBudget {
    not_before: Mutex<Instant>,
}

impl Default for RateBudget {
    fn default() -> Self {
        RateBudget {
            not_before: Mutex::new(Instant::now()),
        }
    }
}

impl RateBudget {
    /// Returns once no hold is in force; a hold set while waiting is waited for too.
    async fn wait_turn(&self) {
        loop {
            let until = self
                .not_before
                .lock()
                .map(|at| *at)
                .unwrap_or_else(|_| Instant::now());
            if until <= Instant::now() {
                return;
            }
            tokio::time::sleep_until(until.into()).await;
        }
    }

    /// Nobody sends before `now + delay` (a later deadline already set stands).
    fn hold(&self, delay: Duration) {
        if let Ok(mut at) = self.not_before.lock() {
            *at = (*at).max(crate::base::deadline_std(Instant::now(), delay));
        }
    }
}

/// How to reach the forge for the batch.
pub struct Forge {
    client: reqwest::Client,
    api_url: String,
    token: Option<String>,
    budget: RateBudget,
}

/// The pull request asked for one repository.
pub struct PullRequest<'a> {
    /// `owner/name` on the forge.
    pub repo: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

impl Forge {
    pub fn new(api_url: &str, token: Option<String>) -> Result<Forge, ForgeError> {
        crate::model::install_crypto_provider();
        let client = reqwest::Client::builder()
            .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|err| ForgeError::Http(err.to_string()))?;
        Ok(Forge {
            client,
            api_url: api_url.trim_end_matches('/').to_string(),
            token,
            budget: RateBudget::default(),
        })
    }

    /// Opens the pull request, or updates the open one from the same branch (a resumed or
    /// repeated batch never opens a second); returns its web address.
    pub async fn open_or_update(&self, pr: &PullRequest<'_>) -> Result<String, ForgeError> {
        let owner = pr.repo.split('/').next().unwrap_or(pr.repo);
        // Encoded: a branch may hold `+`, `&` or `#`, which would otherwise reach GitHub as a
        // space, end the value or the query, and the open pull request would not be found.
        let head = crate::base::percent_encode(&format!("{owner}:{}", pr.head));
        let list = format!("/repos/{}/pulls?state=open&head={head}", pr.repo);
        let open = self.send(Method::GET, &list, None).await?;
        let existing = open
            .as_array()
            .and_then(|prs| prs.first())
            .and_then(|first| first["number"].as_u64());
        let answer = match existing {
            Some(number) => {
                let path = format!("/repos/{}/pulls/{number}", pr.repo);
                let body = json!({"title": pr.title, "body": pr.body});
                self.send(Method::PATCH, &path, Some(body)).await?
            }
            None => {
                let path = format!("/repos/{}/pulls", pr.repo);
                let body =
                    json!({"title": pr.title, "body": pr.body, "head": pr.head, "base": pr.base});
                self.send(Method::POST, &path, Some(body)).await?
            }
        };
        Ok(answer["html_url"].as_str().unwrap_or_default().to_string())
    }

    /// One GET of the REST API (`path` from the API's root), through the same rate budget.
    pub async fn get(&self, path: &str) -> Result<Value, ForgeError> {
        self.send(Method::GET, path, None).await
    }

    /// One POST of `body` (creating something: a comment).
    pub async fn post(&self, path: &str, body: Value) -> Result<Value, ForgeError> {
        self.send(Method::POST, path, Some(body)).await
    }

    /// One PATCH of `body` (editing something: a comment).
    pub async fn patch(&self, path: &str, body: Value) -> Result<Value, ForgeError> {
        self.send(Method::PATCH, path, Some(body)).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ForgeError> {
        let what = format!("{method} {}", path.split('?').next().unwrap_or(path));
        for attempt in 0..MAX_ATTEMPTS {
            self.budget.wait_turn().await;
            let mut request = self
                .client
                .request(method.clone(), format!("{}{path}", self.api_url))
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28");
            if let Some(token) = &self.token {
                request = request.bearer_auth(token);
            }
            if let Some(body) = &body {
                request = request
                    .header("content-type", "application/json")
                    .body(body.to_string());
            }
            let response = request
                .send()
                .await
                .map_err(|err| ForgeError::Http(err.without_url().to_string()))?;
            let status = response.status();
            // The hold is set before anything else is awaited, so no other worker's next
            // request slips in while this body is read.
            let limit = limit_delay(status, response.headers(), attempt);
            if let Some(Limit::Retry(delay)) = &limit
                && *delay > MAX_FORGE_WAIT
            {
                return Err(ForgeError::WaitTooLong { what, wait: *delay });
            }
            if let Some(Limit::Retry(delay) | Limit::Exhausted(delay)) = &limit {
                self.budget.hold((*delay).min(MAX_FORGE_WAIT));
            }
            let text = read_body(response, &what).await?;
            if let Some(Limit::Retry(delay)) = limit {
                tracing::info!(
                    "the forge limits requests: every worker waits {}s",
                    delay.as_secs_f64()
                );
                continue;
            }
            if !status.is_success() {
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|body| body["message"].as_str().map(str::to_string))
                    .unwrap_or_else(|| text.chars().take(200).collect());
                return Err(ForgeError::Refused {
                    what,
                    status: status.as_u16(),
                    message,
                });
            }
            return serde_json::from_str(&text).map_err(|err| ForgeError::Http(err.to_string()));
        }
        Err(ForgeError::RateLimited(what))
    }
}

/// The answer's body, streamed and refused past `MAX_FORGE_BODY`.
async fn read_body(response: reqwest::Response, what: &str) -> Result<String, ForgeError> {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let Ok(chunk) = chunk else { break };
        if body.len() + chunk.len() > MAX_FORGE_BODY {
            return Err(ForgeError::BodyTooLarge {
                what: what.to_string(),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

enum Limit {
    /// The request was refused for the rate: wait, then send it again.
    Retry(Duration),
    /// The request went through but the budget is spent until the reset.
    Exhausted(Duration),
}

/// What a response says of the rate: `Retry-After` (seconds), `x-ratelimit-remaining: 0`
/// with `x-ratelimit-reset` (epoch seconds), or a bare 429/403-secondary with backoff.
fn limit_delay(
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    attempt: u32,
) -> Option<Limit> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.trim().parse::<u64>().ok())
    };
    let retry_after = number("retry-after").map(Duration::from_secs);
    let until_reset = || {
        let reset = number("x-ratelimit-reset")?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
        Some(Duration::from_secs(
            reset.saturating_sub(now).saturating_add(1),
        ))
    };
    let spent = number("x-ratelimit-remaining") == Some(0);
    let limited = status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN && (retry_after.is_some() || spent));
    if limited {
        let backoff = DEFAULT_BACKOFF.saturating_mul(1 << attempt.min(4));
        return Some(Limit::Retry(
            retry_after
                .or_else(|| spent.then(until_reset).flatten())
                .unwrap_or(backoff),
        ));
    }
    spent.then(until_reset).flatten().map(Limit::Exhausted)
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn an_absurd_wait_neither_panics_nor_parks_the_batch() {
        let budget = RateBudget::default();
        budget.hold(Duration::MAX);
        let until = *budget.not_before.lock().unwrap();
        assert!(until > Instant::now() && until - Instant::now() <= crate::base::FAR_FUTURE);
        let wait = match limit_delay(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[("retry-after", "18446744073709551615")]),
            0,
        ) {
            Some(Limit::Retry(wait)) => wait,
            _ => panic!("a 429 is a limit"),
        };
        assert!(wait > MAX_FORGE_WAIT);
        let reset = limit_delay(
            StatusCode::OK,
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "18446744073709551615"),
            ]),
            0,
        );
        assert!(matches!(reset, Some(Limit::Exhausted(_))));
    }

    #[test]
    fn limits_are_read_from_status_and_headers() {
        let retry = |status, pairs: &[(&'static str, &str)]| match limit_delay(
            status,
            &headers(pairs),
            0,
        ) {
            Some(Limit::Retry(delay)) => Some(delay),
            _ => None,
        };
        assert_eq!(
            retry(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", "3")]),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry(StatusCode::FORBIDDEN, &[("retry-after", "2")]),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry(StatusCode::TOO_MANY_REQUESTS, &[]),
            Some(DEFAULT_BACKOFF)
        );
        assert_eq!(
            retry(StatusCode::FORBIDDEN, &[]),
            None,
            "a plain 403 is a refusal"
        );
        assert!(
            limit_delay(
                StatusCode::OK,
                &headers(&[("x-ratelimit-remaining", "5")]),
                0
            )
            .is_none()
        );
        let far = (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 30)
            .to_string();
        assert!(matches!(
            limit_delay(StatusCode::OK, &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &far)]), 0),
            Some(Limit::Exhausted(delay)) if delay >= Duration::from_secs(29)
        ));
    }
}
