//! The CI job's own identity: a GitHub Actions OIDC token, asked for with the job's request
//! token (`ACTIONS_ID_TOKEN_REQUEST_URL` / `ACTIONS_ID_TOKEN_REQUEST_TOKEN`, present when the
//! workflow grants `id-token: write`) for one audience, and exchanged by the platform's STS
//! for short-lived credentials. The request token and the OIDC token go to the redactor.

use serde_json::Value;

use super::{SecretSink, exchange_client};

pub const REQUEST_URL_ENV: &str = "ACTIONS_ID_TOKEN_REQUEST_URL";
pub const REQUEST_TOKEN_ENV: &str = "ACTIONS_ID_TOKEN_REQUEST_TOKEN";

/// Where the job's OIDC token comes from.
#[derive(Clone)]
pub struct GithubOidc {
    request_url: String,
    request_token: String,
}

impl std::fmt::Debug for GithubOidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubOidc")
            .field("request_url", &self.request_url)
            .finish_non_exhaustive()
    }
}

impl GithubOidc {
    /// The job's token endpoint, when this process runs in a job allowed to ask for one.
    pub fn from_env() -> Option<GithubOidc> {
        let nonempty = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Some(GithubOidc {
            request_url: nonempty(REQUEST_URL_ENV)?,
            request_token: nonempty(REQUEST_TOKEN_ENV)?,
        })
    }

    /// A fresh OIDC token (a JWT) for `audience`.
    pub async fn token(&self, audience: &str, secrets: &SecretSink) -> Result<String, String> {
        secrets.learn(REQUEST_TOKEN_ENV, &self.request_token);
        let client = exchange_client()?;
        // The URL already has a query (`?api-version=…`); the audience is one more parameter.
        let separator = if self.request_url.contains('?') {
            '&'
        } else {
            '?'
        };
        let url = format!(
            "{}{separator}audience={}",
            self.request_url,
            form_encode(audience)
        );
        let response = client
            .get(&url)
            .bearer_auth(&self.request_token)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|err| format!("cannot reach the GitHub OIDC endpoint: {err}"))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|err| format!("the GitHub OIDC endpoint's answer broke off: {err}"))?;
        if !status.is_success() {
            return Err(format!(
                "the GitHub OIDC endpoint answered HTTP {status} (does the workflow grant `permissions: id-token: write`?)"
            ));
        }
        let token = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|value| value.get("value")?.as_str().map(str::to_string))
            .filter(|token| !token.is_empty())
            .ok_or("the GitHub OIDC endpoint's answer has no `value`")?;
        secrets.learn("GITHUB_OIDC_TOKEN", &token);
        Ok(token)
    }
}

/// `application/x-www-form-urlencoded` for one value (RFC 3986 unreserved kept).
pub fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(form_encode("sts.amazonaws.com"), "sts.amazonaws.com");
        assert_eq!(
            form_encode("arn:aws:iam::1:role/x y+z"),
            "arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx%20y%2Bz"
        );
        assert_eq!(form_encode("é"), "%C3%A9");
    }
}
