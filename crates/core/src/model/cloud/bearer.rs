//! A short-lived OAuth access token sent as `Authorization: Bearer …` (Google Vertex AI,
//! Microsoft Entra for Azure): obtained from its source before the first request, kept until
//! shortly before it expires, then obtained again. Also the token endpoints' one request
//! shape (a form or JSON POST answered with JSON) and how their refusals are read.

use std::time::{Duration, SystemTime};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;

use super::oidc::form_encode;
use super::{SecretSink, exchange_client};
use crate::model::http::{Failure, RequestAuth};
use crate::model::retry::FailureCategory;

/// A token this close to its expiry is renewed before a request: a long request must not
/// outlive it, and Google's and Microsoft's libraries renew a few minutes early too.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// One access token and when it stops working. `Debug` shows the expiry only.
#[derive(Clone)]
pub struct AccessToken {
    pub value: String,
    pub expires: SystemTime,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl AccessToken {
    fn fresh(&self, now: SystemTime) -> bool {
        now + RENEW_BEFORE < self.expires
    }

    /// A token that lives `expires_in` seconds from now, as OAuth answers say.
    pub fn lasting(value: String, expires_in: u64) -> AccessToken {
        AccessToken {
            value,
            expires: SystemTime::now() + Duration::from_secs(expires_in),
        }
    }
}

/// Where a platform's tokens come from (Google's credential chain, Entra's): a trait this
/// file owns and each platform's file implements, so neither imports the other.
pub trait TokenSource: std::fmt::Debug + Send + Sync {
    fn fetch<'a>(
        &'a self,
        secrets: &'a SecretSink,
    ) -> futures_util::future::BoxFuture<'a, Result<AccessToken, Failure>>;
}

/// Puts a held-or-renewed bearer token on every request.
pub struct BearerAuth {
    source: Box<dyn TokenSource>,
    current: tokio::sync::Mutex<Option<AccessToken>>,
    secrets: SecretSink,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl BearerAuth {
    pub fn new(source: impl TokenSource + 'static, secrets: SecretSink) -> BearerAuth {
        BearerAuth {
            source: Box::new(source),
            current: tokio::sync::Mutex::new(None),
            secrets,
        }
    }

    /// A token good for a while yet: the held one, else a new one. The lock is held across
    /// the fetch so concurrent requests share one exchange.
    async fn token(&self) -> Result<String, Failure> {
        let mut current = self.current.lock().await;
        if let Some(token) = current
            .as_ref()
            .filter(|token| token.fresh(SystemTime::now()))
        {
            return Ok(token.value.clone());
        }
        let token = self.source.fetch(&self.secrets).await?;
        self.secrets.learn("ACCESS_TOKEN", &token.value);
        let value = token.value.clone();
        *current = Some(token);
        Ok(value)
    }

    async fn authorize(&self, headers: &mut HeaderMap) -> Result<(), Failure> {
        let token = self.token().await?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            Failure::new(
                FailureCategory::Protocol,
                "the access token has characters a header cannot carry",
            )
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
        Ok(())
    }
}

impl RequestAuth for BearerAuth {
    fn apply<'a>(
        &'a self,
        _url: &'a str,
        _body: &'a [u8],
        headers: &'a mut HeaderMap,
    ) -> futures_util::future::BoxFuture<'a, Result<(), Failure>> {
        Box::pin(self.authorize(headers))
    }
}

/// What a token endpoint is sent.
pub enum Payload<'a> {
    /// `application/x-www-form-urlencoded` (OAuth's token requests).
    Form(&'a [(&'a str, &'a str)]),
    /// A JSON body (IAM credentials' `generateAccessToken`).
    Json(&'a Value),
}

/// POSTs `payload` to a token endpoint (`what` names it in messages) and returns its JSON
/// answer. A refusal is an authentication failure that is not retried, carrying the
/// endpoint's `error` and `error_description`; a 5xx or 429 is retried as the model's are.
pub async fn post(
    what: &str,
    url: &str,
    payload: Payload<'_>,
    bearer: Option<&str>,
) -> Result<Value, Failure> {
    let client = exchange_client().map_err(|err| Failure::new(FailureCategory::Connect, err))?;
    let mut request = client
        .post(url)
        .header(reqwest::header::ACCEPT, "application/json");
    request = match payload {
        Payload::Form(fields) => request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(
                fields
                    .iter()
                    .map(|(key, value)| format!("{key}={}", form_encode(value)))
                    .collect::<Vec<_>>()
                    .join("&"),
            ),
        Payload::Json(value) => request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(value.to_string()),
    };
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let (status, text) = super::exchange(request, what, url).await?;
    let json = serde_json::from_str::<Value>(&text).ok();
    if !status.is_success() {
        let category = if status.is_server_error() || status.as_u16() == 429 {
            FailureCategory::from_status(status.as_u16())
        } else {
            FailureCategory::Authentication
        };
        return Err(Failure {
            category,
            status: Some(status.as_u16()),
            message: format!(
                "{what} refused (HTTP {}): {}",
                status.as_u16(),
                refusal(json.as_ref())
            ),
            retry_after: None,
            empty_200: false,
        });
    }
    json.ok_or_else(|| {
        Failure::new(
            FailureCategory::Protocol,
            format!("{what}'s answer is not JSON"),
        )
    })
}

/// The reason in an OAuth error (`error`, `error_description`) or a Google API error
/// (`error.status`, `error.message`); never the whole body, which might echo a credential.
fn refusal(json: Option<&Value>) -> String {
    let Some(json) = json else {
        return "no JSON reason given".into();
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    match json.get("error") {
        Some(Value::Object(error)) => format!(
            "{}: {}",
            text(error.get("status")).unwrap_or_default(),
            text(error.get("message")).unwrap_or_default()
        ),
        Some(Value::String(code)) => format!(
            "{code}: {}",
            text(json.get("error_description")).unwrap_or_default()
        ),
        _ => "no reason given".into(),
    }
}

/// A string field of a token endpoint's answer, or a protocol failure naming it.
pub fn field(answer: &Value, what: &str, name: &str) -> Result<String, Failure> {
    answer
        .get(name)
        .and_then(Value::as_str)
        .filter(|value| !value.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            Failure::new(
                FailureCategory::Protocol,
                format!("{what}'s answer has no {name}"),
            )
        })
}

/// An OAuth answer's `access_token` and `expires_in` (seconds; a number, or a string as
/// some endpoints send it; an hour when absent, OAuth's usual lifetime).
pub fn oauth_token(answer: &Value, what: &str) -> Result<AccessToken, Failure> {
    let value = field(answer, what, "access_token")?;
    let expires_in = match answer.get("expires_in") {
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.parse().ok(),
        _ => Some(3600),
    }
    .ok_or_else(|| {
        Failure::new(
            FailureCategory::Protocol,
            format!("{what}'s expires_in is not a number of seconds"),
        )
    })?;
    Ok(AccessToken::lasting(value, expires_in))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_token_is_renewed_five_minutes_before_it_expires() {
        let now = SystemTime::now();
        let token = |seconds| AccessToken {
            value: "t".into(),
            expires: now + Duration::from_secs(seconds),
        };
        assert!(token(3600).fresh(now));
        assert!(!token(299).fresh(now));
    }

    #[test]
    fn oauth_answers_and_refusals_are_read() {
        let token = oauth_token(&json!({"access_token": "a", "expires_in": "120"}), "x").unwrap();
        assert!(!token.fresh(SystemTime::now()));
        assert!(oauth_token(&json!({"expires_in": 1}), "x").is_err());
        assert!(oauth_token(&json!({"access_token": "a", "expires_in": "soon"}), "x").is_err());
        assert_eq!(
            refusal(Some(
                &json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            )),
            "invalid_grant: Invalid JWT Signature."
        );
        assert_eq!(
            refusal(Some(
                &json!({"error": {"status": "PERMISSION_DENIED", "message": "no"}})
            )),
            "PERMISSION_DENIED: no"
        );
    }
}
