//! Cloud platforms that serve the vendors' models under their own identity: what a request
//! carries that is made per request (Amazon Bedrock's SigV4 signature, Vertex AI's and
//! Azure's renewed OAuth bearer tokens: `bearer.rs`), and the short-lived
//! credentials behind it — from the environment, a profile, a web-identity token, or the CI
//! job's own OIDC token (`oidc.rs`). Nothing long-lived is stored; every token obtained is
//! handed to the run's redactor before it is used.

pub mod aws;
pub mod azure;
pub mod bearer;
pub mod google;
pub mod oidc;

use std::sync::Arc;

/// Tells the run's redactor a secret obtained while it runs (a session token, an OIDC
/// token), by name, so no record can carry it.
#[derive(Clone)]
pub struct SecretSink(Arc<Learn>);

/// What a sink does with a secret: its name and value.
type Learn = dyn Fn(&'static str, &str) + Send + Sync;

impl SecretSink {
    pub fn new(learn: impl Fn(&'static str, &str) + Send + Sync + 'static) -> SecretSink {
        SecretSink(Arc::new(learn))
    }

    /// A sink that forgets: for tools that write no records (benches, `auto eval`).
    pub fn none() -> SecretSink {
        SecretSink::new(|_, _| {})
    }

    pub fn learn(&self, name: &'static str, value: &str) {
        (self.0)(name, value)
    }
}

impl std::fmt::Debug for SecretSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretSink")
    }
}

/// A cloud platform serving Anthropic's models, as the provider config names it.
#[derive(Debug, Clone)]
pub enum Platform {
    /// Amazon Bedrock: `POST {base}/model/{id}/invoke`, SigV4-signed for service `bedrock`.
    Bedrock {
        region: String,
        source: aws::AwsSource,
        secrets: SecretSink,
    },
    /// Google Vertex AI: `POST {base}/v1/projects/{project}/locations/{region}/publishers/
    /// anthropic/models/{model}:streamRawPredict` with a Google OAuth bearer token.
    Vertex {
        region: String,
        project: String,
        source: google::GoogleSource,
        secrets: SecretSink,
    },
    /// Microsoft Foundry (Anthropic's API) or Azure OpenAI with a Microsoft Entra bearer
    /// token, at the task's base URL.
    Azure {
        source: azure::AzureSource,
        secrets: SecretSink,
    },
}

/// Sends one credential exchange and reads its whole answer: an endpoint out of reach and
/// an answer cut off are failures in those words, naming `what` was asked at `url`.
async fn exchange(
    request: reqwest::RequestBuilder,
    what: &str,
    url: &str,
) -> Result<(reqwest::StatusCode, String), super::http::Failure> {
    use super::retry::FailureCategory;
    let response = request.send().await.map_err(|err| {
        super::http::Failure::new(
            FailureCategory::Connect,
            format!("cannot reach {what} at {url}: {err}"),
        )
    })?;
    let status = response.status();
    let text = response.text().await.map_err(|err| {
        super::http::Failure::new(
            FailureCategory::StreamCut,
            format!("{what}'s answer broke off: {err}"),
        )
    })?;
    Ok((status, text))
}

/// The client the credential exchanges use: rustls with the ring provider as the model
/// requests have it, a short timeout, no redirects (a token must reach only the host named).
fn exchange_client() -> Result<reqwest::Client, String> {
    super::http::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot build the HTTP client: {err}"))
}

/// An environment of fixed variables, for the credential chains' tests.
#[cfg(test)]
pub(crate) fn env_of(
    vars: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_string())
    }
}
