//! Which failures of a model request are worth another attempt, and how long to wait first:
//! exponential backoff with jitter, or what the server asked for in `retry-after(-ms)`.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 means one attempt only.
    pub max: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max: 6,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// A server's `retry-after` longer than this is not waited for: the backoff applies instead,
/// as the vendors' SDKs do, so a misconfigured gateway cannot park a CI job for an hour.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after.filter(|wait| *wait <= RETRY_AFTER_CAP) {
            return wait;
        }
        let exponent = attempt.saturating_sub(1).min(20);
        let backoff = self
            .base_delay
            .saturating_mul(1 << exponent)
            .min(self.max_delay);
        // Up to a quarter off, so runs that failed together do not retry in lockstep.
        backoff.mul_f64(1.0 - 0.25 * unit_random())
    }
}

/// A number in [0, 1) from the standard library's per-process random hash keys.
fn unit_random() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (milliseconds, Anthropic and OpenAI) wins over `retry-after` (seconds; the
/// HTTP-date form is not honoured and falls back to the backoff). A value a `Duration`
/// cannot hold (`1e20`, `inf`), a negative one or NaN is no value: the backoff applies.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let seconds = |secs: f64| {
        (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::try_from_secs_f64(secs).ok())
            .flatten()
    };
    value("retry-after-ms")
        .and_then(|ms| seconds(ms / 1000.0))
        .or_else(|| value("retry-after").and_then(seconds))
}

/// What went wrong with one attempt, as `api_retry` events and error messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCategory {
    /// The connection could not be made (refused, DNS, TLS, connect timeout).
    Connect,
    /// No event arrived within `timeouts.first_event`.
    FirstEventTimeout,
    /// No event arrived within `timeouts.idle` of the previous one.
    IdleTimeout,
    /// The whole request took longer than `timeouts.request`.
    RequestTimeout,
    /// The response broke off before the message was complete.
    StreamCut,
    /// The response was whole but broke the API's contract: a repeated tool_use id, an
    /// event over the size cap, an event that is not UTF-8.
    Protocol,
    /// HTTP 200 with a body that is not an event stream (an HTML page from a proxy, a JSON
    /// body without an error type tollgate knows).
    NotEventStream,
    /// HTTP 408.
    ServerTimeout,
    /// HTTP 409.
    Conflict,
    /// HTTP 429.
    RateLimited,
    /// HTTP 500, 502, 503, 504.
    ServerError,
    /// HTTP 529, or an `overloaded_error` event mid-stream.
    Overloaded,
    /// HTTP 400, or an `invalid_request_error` event.
    InvalidRequest,
    /// An HTTP 5xx whose body says the request itself is invalid (a validation error, an
    /// `invalid_request_error`), as llama-cpp-python answers a message its schema refuses:
    /// the same request gets the same answer, so it is tried once more at most.
    RejectedRequest,
    /// HTTP 401.
    Authentication,
    /// HTTP 403.
    Permission,
    /// HTTP 404.
    NotFound,
    /// Any other HTTP status, or an error event of a kind not listed here.
    Other,
}

impl FailureCategory {
    /// Exhaustive on purpose: a new category must be classed as transient or not.
    pub fn is_retryable(self) -> bool {
        match self {
            FailureCategory::Connect
            | FailureCategory::FirstEventTimeout
            | FailureCategory::IdleTimeout
            | FailureCategory::RequestTimeout
            | FailureCategory::StreamCut
            | FailureCategory::Protocol
            | FailureCategory::NotEventStream
            | FailureCategory::ServerTimeout
            | FailureCategory::Conflict
            | FailureCategory::RateLimited
            | FailureCategory::ServerError
            | FailureCategory::Overloaded
            | FailureCategory::RejectedRequest => true,
            FailureCategory::InvalidRequest
            | FailureCategory::Authentication
            | FailureCategory::Permission
            | FailureCategory::NotFound
            | FailureCategory::Other => false,
        }
    }

    /// The most retries a failure of this category gets, whatever `retry.max` allows: a
    /// server error that names the request as invalid is tried once more (a crash whose
    /// message looked like one still gets its second chance), not six times.
    pub fn retry_cap(self) -> Option<u32> {
        match self {
            FailureCategory::RejectedRequest => Some(1),
            _ => None,
        }
    }

    /// The category of an HTTP error status and its body: a 5xx whose body says the request
    /// is invalid is no transient failure.
    pub fn from_response(status: u16, body: &str) -> FailureCategory {
        match FailureCategory::from_status(status) {
            FailureCategory::ServerError | FailureCategory::Other
                if (500..600).contains(&status) && says_request_invalid(body) =>
            {
                FailureCategory::RejectedRequest
            }
            category => category,
        }
    }

    pub fn from_status(status: u16) -> FailureCategory {
        match status {
            400 | 413 | 422 => FailureCategory::InvalidRequest,
            401 => FailureCategory::Authentication,
            403 => FailureCategory::Permission,
            404 => FailureCategory::NotFound,
            408 => FailureCategory::ServerTimeout,
            409 => FailureCategory::Conflict,
            429 => FailureCategory::RateLimited,
            500 | 502 | 503 | 504 => FailureCategory::ServerError,
            529 => FailureCategory::Overloaded,
            _ => FailureCategory::Other,
        }
    }

    /// The category of an error event in a stream or a 200 body: its `type`, unless it is a
    /// server error whose message says the request is invalid (a validation error).
    pub fn from_error_event(kind: &str, message: &str) -> FailureCategory {
        match FailureCategory::from_error_type(kind) {
            FailureCategory::ServerError | FailureCategory::Other
                if says_request_invalid(message) =>
            {
                FailureCategory::RejectedRequest
            }
            category => category,
        }
    }

    /// The category of an error event's `type` (Anthropic's error types; OpenAI's `code`s
    /// that mean the same).
    pub fn from_error_type(kind: &str) -> FailureCategory {
        match kind {
            "overloaded_error" => FailureCategory::Overloaded,
            "rate_limit_error" | "rate_limit_exceeded" => FailureCategory::RateLimited,
            "api_error" | "server_error" => FailureCategory::ServerError,
            "timeout_error" => FailureCategory::ServerTimeout,
            "invalid_request_error" => FailureCategory::InvalidRequest,
            "authentication_error" => FailureCategory::Authentication,
            "permission_error" => FailureCategory::Permission,
            "not_found_error" => FailureCategory::NotFound,
            _ => FailureCategory::Other,
        }
    }
}

/// Whether an error body says the request itself is wrong: an API error type that means it,
/// or a validation library's report (pydantic's `1 validation error for …`, `[type=…`,
/// FastAPI's `{"detail": [{"loc": …, "msg": …}]}`), as servers built on them send it.
pub fn says_request_invalid(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    let kinds = [
        "\"invalid_request_error\"",
        "\"validation_error\"",
        "\"invalid_request\"",
        "\"badrequesterror\"",
        "\"bad_request\"",
    ];
    let phrases = [
        "validation error",
        "validationerror",
        "input should be",
        "field required",
        "extra inputs are not permitted",
        "[type=",
    ];
    kinds.iter().any(|kind| lower.contains(kind))
        || phrases.iter().any(|phrase| lower.contains(phrase))
        || (lower.contains("\"loc\"") && lower.contains("\"msg\""))
        || (lower.contains("'loc':") && lower.contains("'msg':"))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_at_most_a_quarter_of_jitter() {
        let policy = RetryPolicy {
            max: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        for (attempt, full) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (9, 1000)] {
            let delay = policy.delay(attempt, None).as_millis();
            assert!(
                delay <= full && delay >= full * 3 / 4,
                "attempt {attempt}: {delay}ms"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_unless_absurd() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert!(policy.delay(1, Some(Duration::from_secs(3600))) <= policy.base_delay);
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        headers.insert(
            "retry-after-ms",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
    }

    /// Whatever a server sends, reading it and waiting for it neither panics nor waits past
    /// the cap.
    #[test]
    fn extreme_retry_after_values_fall_back_to_the_backoff() {
        let policy = RetryPolicy::default();
        for value in [
            "1e20",
            "18446744073709551615",
            "1.8e308",
            "inf",
            "-inf",
            "NaN",
            "-1",
            "-0.5",
            "1e-400",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "",
        ] {
            for name in ["retry-after", "retry-after-ms"] {
                let mut headers = HeaderMap::new();
                headers.insert(name, HeaderValue::from_str(value).unwrap());
                let wait = retry_after(&headers);
                let delay = policy.delay(1, wait);
                assert!(delay <= RETRY_AFTER_CAP, "{name}: {value}: {delay:?}");
            }
        }
    }

    #[test]
    fn statuses_are_classed() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(
                FailureCategory::from_status(status).is_retryable(),
                "{status}"
            );
        }
        for status in [400, 401, 403, 404, 418] {
            assert!(
                !FailureCategory::from_status(status).is_retryable(),
                "{status}"
            );
        }
    }

    #[test]
    fn a_server_error_that_names_the_request_invalid_is_tried_once_more_at_most() {
        let llama = r#"{"error":{"message":"1 validation error for CreateChatCompletionRequest\nmessages.2.content\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]","type":"internal_server_error","param":null,"code":null}}"#;
        let fastapi = r#"{"detail":[{"type":"string_type","loc":["body","messages",2,"content"],"msg":"Input should be a valid string","input":null}]}"#;
        let typed = r#"{"error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}"#;
        for body in [llama, fastapi, typed] {
            for status in [500, 502, 503, 520] {
                let category = FailureCategory::from_response(status, body);
                assert_eq!(
                    category,
                    FailureCategory::RejectedRequest,
                    "{status} {body}"
                );
                assert_eq!(category.retry_cap(), Some(1));
            }
        }
        // Real transients keep their retries.
        for body in [
            "",
            "<html>Bad Gateway</html>",
            r#"{"error":{"type":"api_error","message":"Internal server error"}}"#,
        ] {
            assert_eq!(
                FailureCategory::from_response(500, body),
                FailureCategory::ServerError
            );
            assert_eq!(FailureCategory::ServerError.retry_cap(), None);
        }
        // The same in an error event mid-stream (or a 200 body).
        assert_eq!(
            FailureCategory::from_error_event("server_error", "1 validation error for X"),
            FailureCategory::RejectedRequest
        );
        assert_eq!(
            FailureCategory::from_error_event("overloaded_error", "Overloaded"),
            FailureCategory::Overloaded
        );
        // A 4xx keeps its own category, whatever its body.
        assert_eq!(
            FailureCategory::from_response(400, llama),
            FailureCategory::InvalidRequest
        );
        assert_eq!(
            FailureCategory::from_response(429, llama),
            FailureCategory::RateLimited
        );
    }
}
