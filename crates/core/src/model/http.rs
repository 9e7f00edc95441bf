//! The HTTP side shared by the real providers: one streaming POST with its timeouts (connect,
//! first event, idle gap, whole request), retried as `retry.rs` says; the API's SSE events go
//! to a per-API parser, and a body that is no event stream is read for the provider's own
//! message. A request may instead be read whole (one JSON body, for a server that cannot
//! stream it), and a caller may take back a failure it recognises rather than have it
//! retried. A whole response is checked once more (unique tool_use ids) before it is
//! returned. The API key is held here and never printed.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

use super::retry::{FailureCategory, RetryPolicy, retry_after};
use super::sse::{SseDecoder, SseError};
use super::{
    EventSink, ModelResponse, ProviderError, ProviderEvent, ReportedUsage, RetryNotice,
    estimate_usage,
};
use crate::base::deadline;

/// An API key. Its `Debug` hides it; only the request header sees the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the request header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced, for messages that echo what a
    /// server said (a misconfigured gateway may quote the header back).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_string()
        } else {
            text.replace(&self.0, "[REDACTED]")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    /// To open the connection (TCP and TLS).
    pub connect: Duration,
    /// From sending the request to the first SSE event (headers and prompt processing).
    pub first_event: Duration,
    /// The longest gap between two events; Anthropic pings well inside the default.
    pub idle: Duration,
    /// The whole request, first byte to last event.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            // Reasoning models may think for minutes before their first streamed token.
            first_event: Duration::from_secs(300),
            idle: Duration::from_secs(120),
            request: Duration::from_secs(900),
        }
    }
}

/// Where and how a real provider connects, resolved from the task and the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// Without a trailing slash; the provider appends its endpoint path.
    pub base_url: String,
    /// `None` for a local server that needs none.
    pub api_key: Option<ApiKey>,
    pub timeouts: Timeouts,
    pub retries: RetryPolicy,
}

/// How one attempt failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub category: FailureCategory,
    pub status: Option<u16>,
    pub message: String,
    pub retry_after: Option<Duration>,
    /// An HTTP 200 whose body ended, cleanly or broken off, before its first byte: how a
    /// server that cannot stream this request (llama-cpp-python with tools) answers.
    pub empty_200: bool,
}

impl Failure {
    pub fn new(category: FailureCategory, message: impl Into<String>) -> Failure {
        Failure {
            category,
            status: None,
            message: message.into(),
            retry_after: None,
            empty_200: false,
        }
    }
}

/// Assembles one response from an API's SSE events. A response is only ever returned whole:
/// a half-received message is a `Failure` and the request is retried from the start.
pub trait SseParser {
    /// `Some` once the message is complete; the rest of the stream is not read.
    fn event(&mut self, data: &str) -> Result<Option<ModelResponse>, Failure>;
    /// The stream ended without the API's end marker.
    fn end(self) -> Result<ModelResponse, Failure>;
    /// Whether a JSON body (a non-streaming endpoint's whole message) is this API's answer.
    fn takes_whole(&self) -> bool {
        false
    }
    /// One whole message as a non-streaming endpoint sends it; only called when
    /// [`takes_whole`](Self::takes_whole) says so.
    fn whole(&mut self, body: &str) -> Result<ModelResponse, Failure> {
        Err(not_an_event_stream(body))
    }
}

/// What a request carries that is made for it alone (a cloud platform's signature, a token
/// that is renewed): added to the headers before each attempt. A failure (credentials that
/// cannot be had) is the attempt's.
pub trait RequestAuth: fmt::Debug + Send + Sync {
    fn apply<'a>(
        &'a self,
        url: &'a str,
        body: &'a [u8],
        headers: &'a mut HeaderMap,
    ) -> futures_util::future::BoxFuture<'a, Result<(), Failure>>;
}

/// How a response is read: as an event stream, by a fresh parser each attempt; or whole, as
/// one JSON body (`stream: false`, for a server that cannot stream the request).
pub enum Reading<'a, P> {
    Events(&'a (dyn Fn() -> P + Sync)),
    Whole(fn(&str) -> Result<ModelResponse, Failure>),
}

/// What [`HttpTransport::send`] got: the response, or a failure its caller asked to have
/// back at once rather than retried (see `refused`).
#[derive(Debug)]
pub enum Sent {
    Response(ModelResponse),
    Refused(Failure),
}

/// A reqwest client plus the settings and auth header of one provider.
#[derive(Debug)]
pub struct HttpTransport {
    client: reqwest::Client,
    settings: HttpSettings,
    headers: HeaderMap,
    provider: &'static str,
    /// Headers made for each request (a cloud platform's signature or short-lived token).
    auth: Option<Box<dyn RequestAuth>>,
}

impl HttpTransport {
    /// `auth` turns the key into its header (`x-api-key: …` or `authorization: Bearer …`).
    pub fn new(
        provider: &'static str,
        settings: HttpSettings,
        mut headers: HeaderMap,
        auth: Option<(HeaderName, String)>,
    ) -> Result<HttpTransport, ProviderError> {
        install_crypto_provider();
        if let Some((name, value)) = auth {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::Setup(format!(
                    "the {provider} API key contains characters a header cannot carry"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.timeouts.connect)
            .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
            .redirect(same_origin_redirects());
        if settings.base_url.starts_with("http://") {
            builder = builder.tls_backend_preconfigured(trusting_nothing()?);
        }
        let client = builder
            .build()
            .map_err(|err| ProviderError::Setup(format!("cannot build the HTTP client: {err}")))?;
        Ok(HttpTransport {
            client,
            settings,
            headers,
            provider,
            auth: None,
        })
    }

    /// Every request also carries what `auth` makes for it.
    pub fn with_request_auth(mut self, auth: impl RequestAuth + 'static) -> HttpTransport {
        self.auth = Some(Box::new(auth));
        self
    }

    /// A fixed header, replacing the default of that name (e.g. `accept` for an endpoint
    /// that answers JSON).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> HttpTransport {
        self.headers.insert(name, value);
        self
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.settings.base_url)
    }

    /// POSTs `body` to `url` and parses the stream, retrying transient failures; each retry
    /// is announced on `events` before its wait.
    pub async fn stream<P: SseParser>(
        &self,
        url: &str,
        body: Vec<u8>,
        new_parser: impl Fn() -> P + Sync,
        events: &EventSink,
    ) -> Result<ModelResponse, ProviderError> {
        match self
            .send(url, body, Reading::Events(&new_parser), events, &|_| false)
            .await?
        {
            Sent::Response(response) => Ok(response),
            Sent::Refused(failure) => Err(self.failed(1, failure)),
        }
    }

    /// POSTs `body` to `url` and reads the response as `reading` says, retrying transient
    /// failures; each retry is announced on `events` before its wait. A failure `refused`
    /// picks out is returned at once, neither retried nor an error: the caller changes the
    /// request instead.
    pub async fn send<P: SseParser>(
        &self,
        url: &str,
        body: Vec<u8>,
        reading: Reading<'_, P>,
        events: &EventSink,
        refused: &(dyn Fn(&Failure) -> bool + Sync),
    ) -> Result<Sent, ProviderError> {
        // Shared by every attempt without a copy.
        let body = bytes::Bytes::from(body);
        let policy = self.settings.retries;
        let mut attempt = 0;
        loop {
            tracing::debug!(
                provider = self.provider,
                url,
                bytes = body.len(),
                attempt = attempt + 1,
                "HTTP request"
            );
            let failure = match self.attempt(url, &body, &reading).await {
                Ok(response) => return Ok(Sent::Response(with_usage(response, body.len()))),
                Err(failure) => self.scrubbed(failure),
            };
            if refused(&failure) {
                return Ok(Sent::Refused(failure));
            }
            let max = failure
                .category
                .retry_cap()
                .map_or(policy.max, |cap| cap.min(policy.max));
            if !failure.category.is_retryable() || attempt >= max {
                return Err(self.failed(attempt + 1, failure));
            }
            attempt += 1;
            let delay = policy.delay(attempt, failure.retry_after);
            tracing::info!(
                provider = self.provider,
                attempt,
                max,
                delay_ms = delay.as_millis(),
                status = failure.status,
                category = ?failure.category,
                "provider request failed, retrying: {}",
                failure.message
            );
            // The receiver may be gone if the loop stopped listening; the retry happens anyway.
            let _ = events.send(ProviderEvent::Retry(RetryNotice {
                attempt,
                max,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                status: failure.status,
                category: failure.category,
                message: failure.message,
            }));
            tokio::time::sleep(delay).await;
        }
    }

    fn failed(&self, attempts: u32, failure: Failure) -> ProviderError {
        ProviderError::Failed {
            provider: self.provider,
            attempts,
            category: failure.category,
            status: failure.status,
            message: failure.message,
        }
    }

    fn scrubbed(&self, mut failure: Failure) -> Failure {
        if let Some(key) = &self.settings.api_key {
            failure.message = key.scrub(&failure.message);
        }
        failure
    }

    async fn attempt<P: SseParser>(
        &self,
        url: &str,
        body: &bytes::Bytes,
        reading: &Reading<'_, P>,
    ) -> Result<ModelResponse, Failure> {
        let timeouts = self.settings.timeouts;
        let started = Instant::now();
        // A whole response's headers come after the whole answer is generated: only
        // `timeouts.request` bounds it.
        let first = match reading {
            Reading::Events(_) => timeouts.first_event,
            Reading::Whole(_) => timeouts.request,
        };
        let whole = self.exchange(url, body, reading, deadline(started, first));
        match timeout_at(deadline(started, timeouts.request), whole).await {
            Ok(result) => result,
            Err(_) => Err(Failure::new(
                FailureCategory::RequestTimeout,
                format!(
                    "the request took longer than timeouts.request = {}s",
                    timeouts.request.as_secs_f64()
                ),
            )),
        }
    }

    async fn exchange<P: SseParser>(
        &self,
        url: &str,
        body: &bytes::Bytes,
        reading: &Reading<'_, P>,
        first_deadline: Instant,
    ) -> Result<ModelResponse, Failure> {
        let timeouts = self.settings.timeouts;
        let first_event_timeout = || {
            Failure::new(
                FailureCategory::FirstEventTimeout,
                format!(
                    "no response within timeouts.first_event = {}s",
                    timeouts.first_event.as_secs_f64()
                ),
            )
        };
        let mut headers = self.headers.clone();
        if let Reading::Whole(_) = reading {
            headers.insert(
                reqwest::header::ACCEPT,
                HeaderValue::from_static("application/json"),
            );
        }
        if let Some(auth) = &self.auth {
            // Signed per attempt: a signature carries its time, a token may need renewing.
            auth.apply(url, body, &mut headers).await?;
        }
        let request = self
            .client
            .post(url)
            .headers(headers)
            .body(body.clone())
            .send();
        let response = timeout_at(first_deadline, request)
            .await
            .map_err(|_| first_event_timeout())?
            .map_err(|err| {
                // Past the connect phase, a failed send means the server dropped the exchange.
                let category = if err.is_connect() {
                    FailureCategory::Connect
                } else {
                    FailureCategory::StreamCut
                };
                Failure::new(category, error_chain(&err))
            })?;
        let status = response.status();
        if status.is_redirection() {
            return Err(Failure {
                category: FailureCategory::from_status(status.as_u16()),
                status: Some(status.as_u16()),
                message: redirect_refused(status, response.headers()),
                retry_after: None,
                empty_200: false,
            });
        }
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            // Capped like every body: a gateway's 1.5 GB error page must not be held whole.
            let body = timeout_at(
                deadline(Instant::now(), timeouts.idle),
                read_capped(response, ERROR_BODY_CAP),
            )
            .await
            .unwrap_or_default();
            let message = api_message(&body.text).unwrap_or_else(|| {
                let text = body.text.trim();
                if text.is_empty() {
                    status
                        .canonical_reason()
                        .unwrap_or("no message")
                        .to_string()
                } else {
                    crate::base::truncate_middle(text, 500)
                }
            });
            return Err(Failure {
                category: FailureCategory::from_response(status.as_u16(), &body.text),
                status: Some(status.as_u16()),
                message: body.named(message),
                retry_after,
                empty_200: false,
            });
        }
        let mut parser = match reading {
            Reading::Events(new_parser) => new_parser(),
            Reading::Whole(parse) => {
                let body = read_capped(response, WHOLE_BODY_CAP).await;
                if body.cut {
                    return Err(Failure::new(
                        FailureCategory::Protocol,
                        format!(
                            "the response is larger than the {} MiB cap",
                            WHOLE_BODY_CAP / (1024 * 1024)
                        ),
                    ));
                }
                return parse(&body.text).and_then(checked);
            }
        };
        if !is_event_stream(response.headers()) {
            let whole = parser.takes_whole();
            let cap = if whole {
                WHOLE_BODY_CAP
            } else {
                ERROR_BODY_CAP
            };
            let body = timeout_at(
                deadline(Instant::now(), timeouts.idle),
                read_capped(response, cap),
            )
            .await
            .unwrap_or_default();
            if whole && !body.cut {
                return parser.whole(&body.text).and_then(checked);
            }
            let mut failure = not_an_event_stream(&body.text);
            failure.message = body.named(failure.message);
            failure.empty_200 = body.text.trim().is_empty() && !body.cut;
            return Err(failure);
        }
        let mut chunks = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        // The body's start while no event has come, to quote if the stream ends without one.
        let mut head: Option<Vec<u8>> = Some(Vec::new());
        let mut next_deadline = first_deadline;
        let mut seen_event = false;
        loop {
            let next = match timeout_at(next_deadline, chunks.next()).await {
                Ok(next) => next,
                Err(_) if !seen_event => return Err(first_event_timeout()),
                Err(_) => {
                    return Err(Failure::new(
                        FailureCategory::IdleTimeout,
                        format!(
                            "the stream was silent for timeouts.idle = {}s",
                            timeouts.idle.as_secs_f64()
                        ),
                    ));
                }
            };
            let events = match next {
                None => {
                    return match (decoder.finish().map_err(sse_failure)?, head) {
                        (Some(data), _) => match parser.event(&data)? {
                            Some(response) => checked(response),
                            None => parser.end(),
                        },
                        (None, Some(head)) => {
                            let mut failure = not_an_event_stream(&String::from_utf8_lossy(&head));
                            failure.empty_200 = head.iter().all(u8::is_ascii_whitespace);
                            Err(failure)
                        }
                        (None, None) => parser.end(),
                    };
                }
                Some(Err(err)) => {
                    let mut failure = Failure::new(
                        FailureCategory::StreamCut,
                        format!("the stream broke off: {}", error_chain(&err)),
                    );
                    failure.empty_200 = head.as_ref().is_some_and(Vec::is_empty);
                    return Err(failure);
                }
                Some(Ok(chunk)) => {
                    if let Some(start) = &mut head {
                        let room = ERROR_BODY_CAP.saturating_sub(start.len());
                        start.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    }
                    decoder.feed(&chunk).map_err(sse_failure)?
                }
            };
            // Only a whole event restarts the clock: a `: keepalive` comment or a byte a
            // second without an event must not hold the run until `timeouts.request`.
            if !events.is_empty() {
                head = None;
                seen_event = true;
                next_deadline = deadline(Instant::now(), timeouts.idle);
            }
            for data in events {
                if let Some(response) = parser.event(&data)? {
                    return checked(response);
                }
            }
        }
    }
}

/// A whole response is still refused if two of its tool calls share an id.
fn checked(response: ModelResponse) -> Result<ModelResponse, Failure> {
    match response.repeated_tool_id() {
        Some(id) => Err(Failure::new(
            FailureCategory::Protocol,
            format!("the response uses the tool_use id {id:?} more than once"),
        )),
        None => Ok(response),
    }
}

/// A response whose stream carried no usage gets the estimate for its request and content,
/// so budgets still hold.
fn with_usage(mut response: ModelResponse, request_bytes: usize) -> ModelResponse {
    if response.usage == ReportedUsage::Missing {
        response.usage = ReportedUsage::Estimated(estimate_usage(request_bytes, &response.content));
    }
    response
}

fn sse_failure(err: SseError) -> Failure {
    Failure::new(
        FailureCategory::Protocol,
        format!("bad event stream: {err}"),
    )
}

/// `text/event-stream` as the APIs send it; a server that names no type is given the
/// benefit of the doubt unless its body shows otherwise (see `not_an_event_stream`).
fn is_event_stream(headers: &HeaderMap) -> bool {
    match headers.get(reqwest::header::CONTENT_TYPE) {
        None => true,
        Some(value) => value
            .to_str()
            .map(|value| {
                value
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            })
            .unwrap_or(false),
    }
}

/// The most of a non-stream body read for its message: an error body is small, and an
/// endless one must not hold the run.
const ERROR_BODY_CAP: usize = 64 * 1024;
/// The most of a whole message read from a non-streaming endpoint (Bedrock's `invoke`, an
/// OpenAI-compatible server asked for `stream: false`):
/// far above any answer `max_tokens` allows, still a bound on a runaway body.
const WHOLE_BODY_CAP: usize = 32 * 1024 * 1024;

/// The start of a body that is no event stream, and whether there was more.
#[derive(Debug, Default)]
struct BodyStart {
    text: String,
    cut: bool,
    cap: usize,
}

impl BodyStart {
    /// `message`, saying that the body it came from was cut, when it was.
    fn named(&self, message: String) -> String {
        if self.cut {
            format!(
                "{message} [the body was cut at {} KiB; the rest was not read]",
                self.cap / 1024
            )
        } else {
            message
        }
    }
}

/// Streams at most `cap` bytes of the body; the rest is never read (the connection is
/// dropped with the response).
async fn read_capped(response: reqwest::Response, cap: usize) -> BodyStart {
    let mut body = Vec::new();
    let mut cut = false;
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = cap - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room || body.len() >= cap {
            cut = chunk.len() > room || chunks.next().await.is_some();
            break;
        }
    }
    BodyStart {
        text: String::from_utf8_lossy(&body).into_owned(),
        cut,
        cap,
    }
}

/// An HTTP 200 whose body is not an event stream: the API's error shape is classified by
/// its error type; anything else (a proxy's HTML page) is quoted, shortened.
fn not_an_event_stream(body: &str) -> Failure {
    if let Some((kind, message)) = api_error(body) {
        let category = match FailureCategory::from_error_event(&kind, &message) {
            FailureCategory::Other => FailureCategory::NotEventStream,
            category => category,
        };
        let message = if kind.is_empty() {
            message
        } else {
            format!("{kind}: {message}")
        };
        return Failure::new(
            category,
            format!("HTTP 200 with an error instead of an event stream: {message}"),
        );
    }
    if body.trim().is_empty() {
        return Failure::new(
            FailureCategory::NotEventStream,
            "HTTP 200 with an empty body instead of an event stream",
        );
    }
    let shown = html_title(body).unwrap_or_else(|| body.trim().to_string());
    Failure::new(
        FailureCategory::NotEventStream,
        format!(
            "HTTP 200 without an event stream; the body began: {}",
            crate::base::truncate_middle(&shown, 500)
        ),
    )
}

/// An HTML page's `<title>`, which says more than its markup.
fn html_title(body: &str) -> Option<String> {
    let lower = body.to_ascii_lowercase();
    let start = lower.find("<title>")? + "<title>".len();
    let end = start + lower[start..].find("</title>")?;
    Some(format!("HTML page \"{}\"", body[start..end].trim()))
}

/// Redirects within the base URL's origin (scheme, host, port) are followed, a few; one to
/// any other origin is not, and its 3xx is the request's failure. reqwest would follow it
/// and strip only `Authorization`, so `x-api-key`, the provider's headers and the request
/// body would reach the other origin.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    const MAX_REDIRECTS: usize = 5;
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same_origin && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// The failure's message for a redirect that was not followed.
fn redirect_refused(status: reqwest::StatusCode, headers: &HeaderMap) -> String {
    let to = headers
        .get(reqwest::header::LOCATION)
        .and_then(|location| location.to_str().ok())
        .unwrap_or("no Location");
    format!(
        "the API answered HTTP {} redirecting to {to}; a redirect to another origin is not followed, so the key and the request stay with the configured base_url",
        status.as_u16()
    )
}

/// TLS that trusts no certificate, for a plain-http base URL: no TLS connection is made
/// then, and building reqwest's default verifier would load the system certificate store,
/// a third of a run's start-up. A redirect to https fails verification instead of
/// connecting.
fn trusting_nothing() -> Result<rustls::ClientConfig, ProviderError> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| ProviderError::Setup(format!("cannot set up TLS: {err}")))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth())
}

/// rustls without a bundled provider needs one chosen once per process; ring keeps the build
/// free of C toolchains beyond a compiler (no aws-lc, no OpenSSL).
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The error message of an API error body (`{"error": {"type", "message"}}` in both APIs),
/// with OpenAI's `code` when it names one the message does not (`context_length_exceeded`).
pub fn api_message(body: &str) -> Option<String> {
    let (kind, message) = api_error(body)?;
    let code = api_code(body).filter(|code| !message.contains(code.as_str()));
    let message = match code {
        Some(code) => format!("{message} [{code}]"),
        None => message,
    };
    if kind.is_empty() {
        Some(message)
    } else {
        Some(format!("{kind}: {message}"))
    }
}

/// An error body's `code`, when it is a name (not a number or an HTTP status as text).
fn api_code(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let code = value.get("error")?.get("code")?.as_str()?;
    code.chars()
        .any(|c| c.is_ascii_alphabetic())
        .then(|| code.to_string())
}

/// The error type (empty when absent) and message of an API error body.
fn api_error(body: &str) -> Option<(String, String)> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let error = value.get("error")?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())?;
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((kind.to_string(), message.to_string()))
}

/// reqwest's top-level message says little ("error sending request"); the causes say why.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_never_shows() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey([REDACTED])");
        assert_eq!(
            key.scrub("bad key sk-secret-123 given"),
            "bad key [REDACTED] given"
        );
    }

    #[test]
    fn api_messages_are_read_from_either_shape() {
        assert_eq!(
            api_message(
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            ),
            Some("authentication_error: invalid x-api-key".into())
        );
        assert_eq!(
            api_message(
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#
            ),
            Some("invalid_request_error: Incorrect API key [invalid_api_key]".into())
        );
        assert_eq!(api_message("<html>bad gateway</html>"), None);
    }
}
