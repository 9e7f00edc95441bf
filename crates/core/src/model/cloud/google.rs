//! Google OAuth access tokens for Vertex AI, found as Google's application default
//! credentials (ADC) find them: the file `GOOGLE_APPLICATION_CREDENTIALS` names, else — a
//! tollgate addition for GitHub Actions — the job's OIDC token exchanged through Google's STS
//! for the workload identity provider `GCP_WORKLOAD_IDENTITY_PROVIDER` names, else gcloud's
//! `application_default_credentials.json`. A file is a `service_account` (a JWT assertion
//! signed RS256 with its key), an `authorized_user` (a refresh token) or an
//! `external_account` (workload identity federation: a subject token from a file or a URL,
//! exchanged at STS, then optionally a service account impersonated).
//!
//! Written on reqwest and ring rather than a crate: `gcp_auth` and `yup-oauth2` bring hyper
//! 0.14/1.x clients with their own rustls versions (a second TLS stack beside reqwest's),
//! and the three exchanges are a form POST each. The JWT is signed with `ring`, which the
//! TLS stack already links.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::{Value, json};

use super::bearer::{AccessToken, Payload, field, oauth_token, post};
use super::oidc::GithubOidc;
use super::{SecretSink, exchange_client};
use crate::model::http::Failure;
use crate::model::retry::FailureCategory;

/// The one scope Vertex AI needs.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's STS, where federated tokens are exchanged.
pub const STS_URL: &str = "https://sts.googleapis.com/v1/token";
/// The IAM credentials API, where a service account is impersonated.
pub const IAM_CREDENTIALS_URL: &str = "https://iamcredentials.googleapis.com";
/// gcloud's refresh-token endpoint, for `authorized_user` files without a `token_uri`.
const OAUTH_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
/// A JWT assertion's lifetime: Google accepts at most an hour.
const ASSERTION_LIFETIME: u64 = 3600;

/// How a subject token read from a file or a URL is laid out.
#[derive(Debug, Clone)]
pub enum Format {
    Text,
    /// A JSON object; the token is this field.
    Json(String),
}

/// Where an `external_account`'s subject token comes from.
#[derive(Clone)]
pub enum Subject {
    /// Read at each exchange (the platform rotates it).
    File { path: PathBuf, format: Format },
    /// GET at each exchange, with these headers.
    Url {
        url: String,
        headers: Vec<(String, String)>,
        format: Format,
    },
    /// The GitHub Actions job's OIDC token for this audience.
    Github { oidc: GithubOidc, audience: String },
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::File { path, .. } => write!(f, "File({})", path.display()),
            // The headers may carry a credential.
            Subject::Url { url, .. } => write!(f, "Url({url})"),
            Subject::Github { audience, .. } => write!(f, "Github({audience})"),
        }
    }
}

/// Where the access tokens come from, as the chain found them.
#[derive(Clone)]
pub enum GoogleSource {
    ServiceAccount {
        client_email: String,
        key_id: Option<String>,
        key: Arc<RsaKeyPair>,
        token_uri: String,
        file: PathBuf,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        file: PathBuf,
    },
    External {
        /// STS's `audience`: `//iam.googleapis.com/{provider}`.
        audience: String,
        subject_token_type: String,
        token_url: String,
        subject: Subject,
        /// `…/serviceAccounts/{email}:generateAccessToken`, when a service account is
        /// impersonated with the federated token.
        impersonation_url: Option<String>,
        file: Option<PathBuf>,
    },
}

impl std::fmt::Debug for GoogleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl GoogleSource {
    /// What the chain found, for the run's log: never a secret.
    pub fn describe(&self) -> String {
        match self {
            GoogleSource::ServiceAccount {
                client_email, file, ..
            } => format!("service account {client_email} ({})", file.display()),
            GoogleSource::AuthorizedUser { file, .. } => {
                format!("authorized user ({})", file.display())
            }
            GoogleSource::External {
                audience,
                subject,
                impersonation_url,
                ..
            } => {
                let through = match subject {
                    Subject::Github { .. } => "the GitHub Actions OIDC token".to_string(),
                    Subject::File { path, .. } => format!("the token in {}", path.display()),
                    Subject::Url { url, .. } => format!("the token from {url}"),
                };
                let acting = if impersonation_url.is_some() {
                    ", impersonating a service account"
                } else {
                    ""
                };
                format!("workload identity {audience} with {through}{acting}")
            }
        }
    }

    /// A new access token.
    pub async fn token(&self, secrets: &SecretSink) -> Result<AccessToken, Failure> {
        match self {
            GoogleSource::ServiceAccount {
                client_email,
                key_id,
                key,
                token_uri,
                ..
            } => {
                let assertion = assertion(
                    key,
                    key_id.as_deref(),
                    client_email,
                    token_uri,
                    SystemTime::now(),
                )
                .map_err(|err| Failure::new(FailureCategory::Authentication, err))?;
                let answer = post(
                    "Google's token endpoint",
                    token_uri,
                    Payload::Form(&[("grant_type", JWT_BEARER), ("assertion", &assertion)]),
                    None,
                )
                .await?;
                oauth_token(&answer, "Google's token endpoint")
            }
            GoogleSource::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
                ..
            } => {
                let answer = post(
                    "Google's token endpoint",
                    token_uri,
                    Payload::Form(&[
                        ("grant_type", "refresh_token"),
                        ("client_id", client_id),
                        ("client_secret", client_secret),
                        ("refresh_token", refresh_token),
                    ]),
                    None,
                )
                .await?;
                oauth_token(&answer, "Google's token endpoint")
            }
            GoogleSource::External {
                audience,
                subject_token_type,
                token_url,
                subject,
                impersonation_url,
                ..
            } => {
                let subject_token = subject_token(subject, secrets).await?;
                secrets.learn("GOOGLE_SUBJECT_TOKEN", &subject_token);
                let answer = post(
                    "Google STS",
                    token_url,
                    Payload::Form(&[
                        ("grant_type", TOKEN_EXCHANGE),
                        ("audience", audience),
                        ("scope", CLOUD_PLATFORM),
                        ("requested_token_type", ACCESS_TOKEN_TYPE),
                        ("subject_token", &subject_token),
                        ("subject_token_type", subject_token_type),
                    ]),
                    None,
                )
                .await?;
                let federated = oauth_token(&answer, "Google STS")?;
                secrets.learn("GOOGLE_STS_TOKEN", &federated.value);
                let Some(url) = impersonation_url else {
                    return Ok(federated);
                };
                let body = json!({"scope": [CLOUD_PLATFORM], "lifetime": "3600s"});
                let answer = post(
                    "IAM generateAccessToken",
                    url,
                    Payload::Json(&body),
                    Some(&federated.value),
                )
                .await?;
                let value = field(&answer, "IAM generateAccessToken", "accessToken")?;
                let expire = field(&answer, "IAM generateAccessToken", "expireTime")?;
                let expires = chrono::DateTime::parse_from_rfc3339(&expire).map_err(|err| {
                    Failure::new(
                        FailureCategory::Protocol,
                        format!("IAM's expireTime {expire:?} is not a time: {err}"),
                    )
                })?;
                let expires = SystemTime::UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(expires.timestamp()).unwrap_or(0));
                Ok(AccessToken { value, expires })
            }
        }
    }
}

/// The environment the chain reads, as a function so tests give their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The first source the chain finds (see the module's comment). Every secret a file holds
/// is told to `secrets` here, before any request. `Err` says what to set.
pub fn find_source(
    env: Env<'_>,
    home: Option<&Path>,
    secrets: &SecretSink,
) -> Result<GoogleSource, String> {
    let get = |name: &str| {
        env(name)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    };
    if let Some(path) = get("GOOGLE_APPLICATION_CREDENTIALS") {
        return from_file(Path::new(&path), secrets);
    }
    if let Some(provider) = get("GCP_WORKLOAD_IDENTITY_PROVIDER") {
        let Some(oidc) = GithubOidc::from_env() else {
            return Err("GCP_WORKLOAD_IDENTITY_PROVIDER is set but this is no GitHub Actions job allowed an OIDC token (`permissions: id-token: write`)".into());
        };
        let provider = provider.trim_start_matches("//iam.googleapis.com/");
        if !provider.starts_with("projects/") || !provider.contains("/providers/") {
            return Err(format!(
                "GCP_WORKLOAD_IDENTITY_PROVIDER {provider:?} is not projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER"
            ));
        }
        let iam = get("TOLLGATE_GOOGLE_IAM_CREDENTIALS_URL")
            .unwrap_or_else(|| IAM_CREDENTIALS_URL.into());
        return Ok(GoogleSource::External {
            audience: format!("//iam.googleapis.com/{provider}"),
            subject_token_type: JWT_TOKEN_TYPE.into(),
            token_url: get("TOLLGATE_GOOGLE_STS_URL").unwrap_or_else(|| STS_URL.into()),
            // The OIDC token's audience as google-github-actions/auth asks for it, the
            // provider's default allowed audience.
            subject: Subject::Github {
                oidc,
                audience: format!("https://iam.googleapis.com/{provider}"),
            },
            impersonation_url: get("GCP_SERVICE_ACCOUNT").map(|account| {
                format!(
                    "{}/v1/projects/-/serviceAccounts/{account}:generateAccessToken",
                    iam.trim_end_matches('/')
                )
            }),
            file: None,
        });
    }
    let well_known = get("CLOUDSDK_CONFIG")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".config/gcloud")))
        .map(|dir| dir.join("application_default_credentials.json"));
    if let Some(path) = well_known.filter(|path| path.is_file()) {
        return from_file(&path, secrets);
    }
    Err("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service account key or an external_account file, run `gcloud auth application-default login`, or in a GitHub Actions job set GCP_WORKLOAD_IDENTITY_PROVIDER (the action's gcp-workload-identity-provider input)".into())
}

/// A credentials file, checked whole now so a broken one stops the run before any request.
fn from_file(path: &Path, secrets: &SecretSink) -> Result<GoogleSource, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read the credentials file {shown}: {err}"))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|err| format!("the credentials file {shown} is not JSON: {err}"))?;
    let text_of = |name: &str| {
        json.get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_string)
    };
    let need = |name: &str| {
        text_of(name).ok_or_else(|| format!("the credentials file {shown} has no {name}"))
    };
    let kind = need("type")?;
    let file = path.to_path_buf();
    match kind.as_str() {
        "service_account" => {
            let pem = need("private_key")?;
            secrets.learn("GOOGLE_PRIVATE_KEY", &pem);
            let key = private_key(&pem).map_err(|err| format!("{shown}: {err}"))?;
            Ok(GoogleSource::ServiceAccount {
                client_email: need("client_email")?,
                key_id: text_of("private_key_id"),
                key: Arc::new(key),
                token_uri: text_of("token_uri").unwrap_or_else(|| OAUTH_TOKEN_URL.into()),
                file,
            })
        }
        "authorized_user" => {
            let client_secret = need("client_secret")?;
            let refresh_token = need("refresh_token")?;
            secrets.learn("GOOGLE_CLIENT_SECRET", &client_secret);
            secrets.learn("GOOGLE_REFRESH_TOKEN", &refresh_token);
            Ok(GoogleSource::AuthorizedUser {
                client_id: need("client_id")?,
                client_secret,
                refresh_token,
                token_uri: text_of("token_uri").unwrap_or_else(|| OAUTH_TOKEN_URL.into()),
                file,
            })
        }
        "external_account" => {
            let source = json
                .get("credential_source")
                .ok_or_else(|| format!("the credentials file {shown} has no credential_source"))?;
            let format = match source.get("format") {
                None => Format::Text,
                Some(format) => match format.get("type").and_then(Value::as_str) {
                    None | Some("text") => Format::Text,
                    Some("json") => Format::Json(
                        format
                            .get("subject_token_field_name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| format!("{shown}: credential_source.format of type json needs subject_token_field_name"))?
                            .to_string(),
                    ),
                    Some(other) => {
                        return Err(format!(
                            "{shown}: credential_source.format type {other:?} is neither text nor json"
                        ));
                    }
                },
            };
            let subject = if let Some(path) = source.get("file").and_then(Value::as_str) {
                Subject::File {
                    path: PathBuf::from(path),
                    format,
                }
            } else if let Some(url) = source.get("url").and_then(Value::as_str) {
                let headers = match source.get("headers") {
                    None => Vec::new(),
                    Some(Value::Object(headers)) => headers
                        .iter()
                        .map(|(name, value)| {
                            let value = value.as_str().unwrap_or_default().to_string();
                            // An `Authorization: Bearer …` header's token may appear alone.
                            secrets.learn("GOOGLE_SUBJECT_HEADER", &value);
                            if let Some(token) = value.strip_prefix("Bearer ") {
                                secrets.learn("GOOGLE_SUBJECT_HEADER", token);
                            }
                            (name.clone(), value)
                        })
                        .collect(),
                    Some(_) => {
                        return Err(format!(
                            "{shown}: credential_source.headers is not an object"
                        ));
                    }
                };
                Subject::Url {
                    url: url.to_string(),
                    headers,
                    format,
                }
            } else {
                return Err(format!(
                    "{shown}: only a credential_source with a file or a url is supported (not AWS's or an executable's)"
                ));
            };
            Ok(GoogleSource::External {
                audience: need("audience")?,
                subject_token_type: need("subject_token_type")?,
                token_url: text_of("token_url").unwrap_or_else(|| STS_URL.into()),
                subject,
                impersonation_url: text_of("service_account_impersonation_url"),
                file: Some(file),
            })
        }
        other => Err(format!(
            "the credentials file {shown} is of type {other:?}: tollgate reads service_account, authorized_user and external_account"
        )),
    }
}

/// An RSA private key from its PKCS#8 PEM (what Google's key files hold).
pub fn private_key(pem: &str) -> Result<RsaKeyPair, String> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = STANDARD
        .decode(body.as_bytes())
        .map_err(|_| "private_key is not a PEM key".to_string())?;
    RsaKeyPair::from_pkcs8(&der)
        .map_err(|err| format!("private_key is not a PKCS#8 RSA key: {err}"))
}

/// The signed JWT a service account trades for a token: RS256, `iss` the account, `aud`
/// the token endpoint, the cloud-platform scope, an hour's life from `now`.
pub fn assertion(
    key: &RsaKeyPair,
    key_id: Option<&str>,
    client_email: &str,
    token_uri: &str,
    now: SystemTime,
) -> Result<String, String> {
    let iat = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| "the clock is before 1970".to_string())?
        .as_secs();
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(key_id) = key_id {
        header["kid"] = json!(key_id);
    }
    let claims = json!({
        "iss": client_email,
        "scope": CLOUD_PLATFORM,
        "aud": token_uri,
        "iat": iat,
        "exp": iat + ASSERTION_LIFETIME,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "cannot sign the service account's assertion".to_string())?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// The subject token an `external_account` exchanges, fetched anew each time.
async fn subject_token(subject: &Subject, secrets: &SecretSink) -> Result<String, Failure> {
    let auth = |message: String| Failure::new(FailureCategory::Authentication, message);
    let (text, format) = match subject {
        Subject::Github { oidc, audience } => {
            return oidc.token(audience, secrets).await.map_err(auth);
        }
        Subject::File { path, format } => (
            std::fs::read_to_string(path).map_err(|err| {
                auth(format!(
                    "cannot read the subject token {}: {err}",
                    path.display()
                ))
            })?,
            format,
        ),
        Subject::Url {
            url,
            headers,
            format,
        } => {
            let client =
                exchange_client().map_err(|err| Failure::new(FailureCategory::Connect, err))?;
            let mut request = client.get(url);
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let response = request.send().await.map_err(|err| {
                Failure::new(
                    FailureCategory::Connect,
                    format!("cannot reach the subject token's URL {url}: {err}"),
                )
            })?;
            let status = response.status();
            if !status.is_success() {
                return Err(auth(format!(
                    "the subject token's URL {url} answered HTTP {status}"
                )));
            }
            let text = response.text().await.map_err(|err| {
                Failure::new(
                    FailureCategory::StreamCut,
                    format!("the subject token's answer broke off: {err}"),
                )
            })?;
            (text, format)
        }
    };
    let token = match format {
        Format::Text => text.trim().to_string(),
        Format::Json(name) => serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|json| json.get(name)?.as_str().map(str::to_string))
            .ok_or_else(|| auth(format!("the subject token has no field {name}")))?,
    };
    if token.is_empty() {
        return Err(auth("the subject token is empty".into()));
    }
    Ok(token)
}

impl super::bearer::TokenSource for GoogleSource {
    fn fetch<'a>(
        &'a self,
        secrets: &'a SecretSink,
    ) -> futures_util::future::BoxFuture<'a, Result<AccessToken, Failure>> {
        Box::pin(self.token(secrets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = include_str!("../../../../../tests/fixtures/cloud/service-account.pem");
    const PUBLIC: &str =
        include_str!("../../../../../tests/fixtures/cloud/service-account.pub.pem");

    fn env_of(vars: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.clone())
        }
    }

    #[test]
    fn an_assertion_is_rs256_over_the_claims_google_checks() {
        let key = private_key(KEY).unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let jwt = assertion(&key, Some("k1"), "sa@p.iam", "https://t/token", now).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, json!({"alg": "RS256", "typ": "JWT", "kid": "k1"}));
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "sa@p.iam");
        assert_eq!(claims["aud"], "https://t/token");
        assert_eq!(claims["scope"], CLOUD_PLATFORM);
        assert_eq!(claims["exp"], 1_700_003_600u64);
        let public_body: String = PUBLIC.lines().filter(|l| !l.starts_with("-----")).collect();
        let public = STANDARD.decode(public_body).unwrap();
        let verify = |input: &str, signature: &str| {
            ring::signature::UnparsedPublicKey::new(
                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                &public,
            )
            .verify(
                input.as_bytes(),
                &URL_SAFE_NO_PAD.decode(signature).unwrap(),
            )
        };
        let input = format!("{}.{}", parts[0], parts[1]);
        assert!(verify(&input, parts[2]).is_ok());
        assert!(verify(&format!("{input}x"), parts[2]).is_err());
    }

    #[test]
    fn the_chain_reads_each_file_type_and_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, value: Value| {
            let path = dir.path().join(name);
            std::fs::write(&path, value.to_string()).unwrap();
            path.display().to_string()
        };
        let sa = write(
            "sa.json",
            json!({"type": "service_account", "client_email": "sa@p.iam", "private_key": KEY, "token_uri": "http://127.0.0.1:9/token"}),
        );
        let learned = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = {
            let learned = learned.clone();
            SecretSink::new(move |name, _| learned.lock().unwrap().push(name))
        };
        let found = find_source(
            &env_of(vec![("GOOGLE_APPLICATION_CREDENTIALS", sa)]),
            None,
            &sink,
        )
        .unwrap();
        assert!(matches!(found, GoogleSource::ServiceAccount { .. }));
        assert_eq!(*learned.lock().unwrap(), vec!["GOOGLE_PRIVATE_KEY"]);
        let broken = write(
            "broken.json",
            json!({"type": "service_account", "client_email": "sa@p.iam", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}),
        );
        let err = find_source(
            &env_of(vec![("GOOGLE_APPLICATION_CREDENTIALS", broken)]),
            None,
            &sink,
        )
        .unwrap_err();
        assert!(err.contains("not a PKCS#8 RSA key"), "{err}");
        let external = write(
            "ext.json",
            json!({"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
                   "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                   "credential_source": {"url": "http://127.0.0.1:9/t", "headers": {"Authorization": "Bearer x"}, "format": {"type": "json", "subject_token_field_name": "value"}}}),
        );
        match find_source(
            &env_of(vec![("GOOGLE_APPLICATION_CREDENTIALS", external)]),
            None,
            &sink,
        )
        .unwrap()
        {
            GoogleSource::External {
                subject: Subject::Url {
                    headers, format, ..
                },
                token_url,
                impersonation_url: None,
                ..
            } => {
                assert_eq!(headers, vec![("Authorization".into(), "Bearer x".into())]);
                assert!(matches!(format, Format::Json(name) if name == "value"));
                assert_eq!(token_url, STS_URL);
            }
            other => panic!("{other:?}"),
        }
        let aws = write(
            "aws.json",
            json!({"type": "external_account", "audience": "a", "subject_token_type": "t", "credential_source": {"environment_id": "aws1"}}),
        );
        let err = find_source(
            &env_of(vec![("GOOGLE_APPLICATION_CREDENTIALS", aws)]),
            None,
            &sink,
        )
        .unwrap_err();
        assert!(err.contains("not AWS's"), "{err}");
        // gcloud's file in the home directory, when nothing else is set.
        let gcloud = dir.path().join(".config/gcloud");
        std::fs::create_dir_all(&gcloud).unwrap();
        std::fs::write(
            gcloud.join("application_default_credentials.json"),
            json!({"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r"}).to_string(),
        )
        .unwrap();
        match find_source(&env_of(vec![]), Some(dir.path()), &sink).unwrap() {
            GoogleSource::AuthorizedUser { token_uri, .. } => {
                assert_eq!(token_uri, OAUTH_TOKEN_URL)
            }
            other => panic!("{other:?}"),
        }
        let err = find_source(&env_of(vec![]), None, &sink).unwrap_err();
        assert!(err.contains("no Google credentials"), "{err}");
        if GithubOidc::from_env().is_none() {
            let err = find_source(
                &env_of(vec![(
                    "GCP_WORKLOAD_IDENTITY_PROVIDER",
                    "projects/1/x".into(),
                )]),
                None,
                &sink,
            )
            .unwrap_err();
            assert!(err.contains("id-token: write"), "{err}");
        }
    }
}
