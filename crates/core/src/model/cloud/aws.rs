//! AWS credentials and SigV4 signing for Amazon Bedrock. The credential chain follows the
//! AWS SDKs' order for what a CI job or a workstation has: the environment's keys, a profile
//! in the shared credentials file, a web-identity token file exchanged with STS
//! (AssumeRoleWithWebIdentity), and — tollgate's addition for GitHub Actions — the job's own
//! OIDC token exchanged the same way. Signing is the `aws-sigv4` crate's; STS's answer is
//! read here (four fields of XML) rather than through the whole SDK.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::oidc::{GithubOidc, form_encode};
use super::{SecretSink, exchange_client};
use crate::model::http::{Failure, RequestAuth};
use crate::model::retry::FailureCategory;

/// The audience AWS expects in a GitHub OIDC token (as aws-actions/configure-aws-credentials).
pub const STS_AUDIENCE: &str = "sts.amazonaws.com";
/// Credentials this close to their expiry are renewed before a request.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// One set of AWS credentials. `Debug` shows the key id only.
#[derive(Clone)]
pub struct AwsKeys {
    pub access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    expires: Option<SystemTime>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("access_key_id", &self.access_key_id)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl AwsKeys {
    pub fn new(access_key_id: &str, secret: &str, session_token: Option<&str>) -> AwsKeys {
        AwsKeys {
            access_key_id: access_key_id.to_string(),
            secret_access_key: secret.to_string(),
            session_token: session_token.map(str::to_string),
            expires: None,
        }
    }

    fn fresh(&self, now: SystemTime) -> bool {
        self.expires
            .is_none_or(|expires| now + RENEW_BEFORE < expires)
    }
}

/// Where a web-identity token comes from.
#[derive(Debug, Clone)]
pub enum WebToken {
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`, read at each exchange (the platform rotates it).
    File(PathBuf),
    /// The GitHub Actions job's OIDC token, for audience `sts.amazonaws.com`.
    Github(GithubOidc),
}

/// Where the credentials come from, as the chain found them.
#[derive(Debug, Clone)]
pub enum AwsSource {
    /// Keys as given (the environment's, a profile's).
    Keys { keys: AwsKeys, from: String },
    /// A role assumed with a web-identity token through STS.
    WebIdentity {
        role_arn: String,
        session_name: String,
        token: WebToken,
        /// STS's endpoint (`AWS_ENDPOINT_URL_STS`, else the region's).
        sts_endpoint: String,
    },
}

impl AwsSource {
    /// What the chain found, for the run's log: never a secret.
    pub fn describe(&self) -> String {
        match self {
            AwsSource::Keys { from, .. } => from.clone(),
            AwsSource::WebIdentity {
                role_arn, token, ..
            } => match token {
                WebToken::File(path) => format!(
                    "role {role_arn} with the web-identity token in {}",
                    path.display()
                ),
                WebToken::Github(_) => {
                    format!("role {role_arn} with the GitHub Actions OIDC token")
                }
            },
        }
    }
}

/// The environment the chain reads, as a function so tests give their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The first source the chain finds: the environment's keys; `AWS_PROFILE`'s (else
/// `default`'s) keys in the shared credentials file; `AWS_WEB_IDENTITY_TOKEN_FILE` with
/// `AWS_ROLE_ARN`; the GitHub job's OIDC token with `AWS_ROLE_ARN`. `None` says what to set.
pub fn find_source(env: Env<'_>, home: Option<&Path>, region: &str) -> Result<AwsSource, String> {
    let get = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    if let (Some(id), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
        return Ok(AwsSource::Keys {
            keys: AwsKeys::new(
                id.trim(),
                secret.trim(),
                get("AWS_SESSION_TOKEN").as_deref().map(str::trim),
            ),
            from: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        });
    }
    let profile = get("AWS_PROFILE").unwrap_or_else(|| "default".into());
    let file = get("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".aws/credentials")));
    if let Some(file) = file
        && let Ok(text) = std::fs::read_to_string(&file)
    {
        match profile_keys(&text, &profile) {
            Some(Ok(keys)) => {
                return Ok(AwsSource::Keys {
                    keys,
                    from: format!("profile {profile} in {}", file.display()),
                });
            }
            Some(Err(missing)) => {
                return Err(format!(
                    "profile {profile} in {} has no {missing}",
                    file.display()
                ));
            }
            None if get("AWS_PROFILE").is_some() => {
                return Err(format!(
                    "AWS_PROFILE names {profile}, which {} lacks",
                    file.display()
                ));
            }
            None => {}
        }
    }
    let sts_endpoint = get("AWS_ENDPOINT_URL_STS")
        .map(|url| url.trim().trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
    let session_name = get("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| "tollgate".into());
    if let Some(role_arn) = get("AWS_ROLE_ARN") {
        let token = match get("AWS_WEB_IDENTITY_TOKEN_FILE") {
            Some(path) => Some(WebToken::File(PathBuf::from(path))),
            None => GithubOidc::from_env().map(WebToken::Github),
        };
        if let Some(token) = token {
            return Ok(AwsSource::WebIdentity {
                role_arn,
                session_name,
                token,
                sts_endpoint,
            });
        }
        return Err("AWS_ROLE_ARN is set but there is no token to assume it with: set AWS_WEB_IDENTITY_TOKEN_FILE, or run in a GitHub Actions job with `permissions: id-token: write`".into());
    }
    Err("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), AWS_PROFILE for ~/.aws/credentials, or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE or a GitHub Actions OIDC token".into())
}

/// A profile's keys from the shared credentials file (INI: `[name]`, `key = value`).
/// `None` when the profile is absent; `Some(Err(key))` when a key is missing.
fn profile_keys(text: &str, profile: &str) -> Option<Result<AwsKeys, &'static str>> {
    let mut section: Option<&str> = None;
    let mut found = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.trim());
            found |= name.trim() == profile;
            continue;
        }
        if section != Some(profile) {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = Some(value.trim().to_string());
            match key.trim() {
                "aws_access_key_id" => id = value,
                "aws_secret_access_key" => secret = value,
                "aws_session_token" => token = value,
                _ => {}
            }
        }
    }
    if !found {
        return None;
    }
    Some(match (id, secret) {
        (Some(id), Some(secret)) => Ok(AwsKeys::new(&id, &secret, token.as_deref())),
        (None, _) => Err("aws_access_key_id"),
        (Some(_), None) => Err("aws_secret_access_key"),
    })
}

/// Signs each request with SigV4 for `service` in `region`, keeping the credentials until
/// they near their expiry.
pub struct SigV4 {
    region: String,
    service: &'static str,
    source: AwsSource,
    current: tokio::sync::Mutex<Option<AwsKeys>>,
    secrets: SecretSink,
}

impl std::fmt::Debug for SigV4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4")
            .field("region", &self.region)
            .field("service", &self.service)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl SigV4 {
    pub fn new(
        region: &str,
        service: &'static str,
        source: AwsSource,
        secrets: SecretSink,
    ) -> SigV4 {
        if let AwsSource::Keys { keys, .. } = &source {
            secrets.learn("AWS_SECRET_ACCESS_KEY", &keys.secret_access_key);
            if let Some(token) = &keys.session_token {
                secrets.learn("AWS_SESSION_TOKEN", token);
            }
        }
        SigV4 {
            region: region.to_string(),
            service,
            source,
            current: tokio::sync::Mutex::new(None),
            secrets,
        }
    }

    /// Credentials good for a while yet: the held ones, else new ones from the source.
    async fn keys(&self) -> Result<AwsKeys, Failure> {
        let mut current = self.current.lock().await;
        let now = SystemTime::now();
        if let Some(keys) = current.as_ref().filter(|keys| keys.fresh(now)) {
            return Ok(keys.clone());
        }
        let keys = match &self.source {
            AwsSource::Keys { keys, .. } => keys.clone(),
            AwsSource::WebIdentity {
                role_arn,
                session_name,
                token,
                sts_endpoint,
            } => {
                let token = match token {
                    WebToken::File(path) => std::fs::read_to_string(path)
                        .map(|text| text.trim().to_string())
                        .map_err(|err| {
                            Failure::new(
                                FailureCategory::Authentication,
                                format!(
                                    "cannot read the web-identity token {}: {err}",
                                    path.display()
                                ),
                            )
                        })?,
                    WebToken::Github(oidc) => oidc
                        .token(STS_AUDIENCE, &self.secrets)
                        .await
                        .map_err(|err| Failure::new(FailureCategory::Authentication, err))?,
                };
                self.secrets.learn("AWS_WEB_IDENTITY_TOKEN", &token);
                let keys =
                    assume_role_with_web_identity(sts_endpoint, role_arn, session_name, &token)
                        .await?;
                self.secrets
                    .learn("AWS_SECRET_ACCESS_KEY", &keys.secret_access_key);
                if let Some(session) = &keys.session_token {
                    self.secrets.learn("AWS_SESSION_TOKEN", session);
                }
                keys
            }
        };
        *current = Some(keys.clone());
        Ok(keys)
    }

    /// Adds `x-amz-date`, `x-amz-security-token` (temporary credentials) and `authorization`
    /// for a POST of `body` to `url`, signing `headers`' `content-type` and `host` with it.
    pub async fn sign(
        &self,
        url: &str,
        body: &[u8],
        headers: &mut HeaderMap,
    ) -> Result<(), Failure> {
        let keys = self.keys().await?;
        let signed = sign_request(
            &keys,
            &self.region,
            self.service,
            url,
            body,
            headers,
            SystemTime::now(),
        )
        .map_err(|err| Failure::new(FailureCategory::Protocol, err))?;
        for (name, value) in signed {
            headers.insert(name, value);
        }
        Ok(())
    }
}

impl RequestAuth for SigV4 {
    fn apply<'a>(
        &'a self,
        url: &'a str,
        body: &'a [u8],
        headers: &'a mut HeaderMap,
    ) -> futures_util::future::BoxFuture<'a, Result<(), Failure>> {
        Box::pin(self.sign(url, body, headers))
    }
}

/// The headers SigV4 adds to a POST of `body` to `url` at `time`. Only `content-type` of
/// the fixed headers is signed (beside `host`, which the signer takes from the URL): the
/// others may be changed by a proxy on the way without breaking the signature.
pub fn sign_request(
    keys: &AwsKeys,
    region: &str,
    service: &str,
    url: &str,
    body: &[u8],
    headers: &HeaderMap,
    time: SystemTime,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let credentials = Credentials::new(
        &keys.access_key_id,
        &keys.secret_access_key,
        keys.session_token.clone(),
        keys.expires,
        "tollgate",
    );
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|err| format!("cannot sign the request: {err}"))?
        .into();
    let content_type = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| ("content-type", value));
    let signable = SignableRequest::new(
        "POST",
        url,
        content_type.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|err| format!("cannot sign the request: {err}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|err| format!("cannot sign the request: {err}"))?
        .into_parts();
    instructions
        .headers()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("the signer made a bad header name {name}"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the signer made a bad value for {name}"))?;
            // The signature and the session token never reach a log line.
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// STS AssumeRoleWithWebIdentity: the web-identity token for the role's temporary keys.
/// The call is unsigned (the token is the proof).
async fn assume_role_with_web_identity(
    endpoint: &str,
    role_arn: &str,
    session_name: &str,
    token: &str,
) -> Result<AwsKeys, Failure> {
    let client = exchange_client().map_err(|err| Failure::new(FailureCategory::Connect, err))?;
    let form = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("WebIdentityToken", token),
    ]
    .iter()
    .map(|(key, value)| format!("{key}={}", form_encode(value)))
    .collect::<Vec<_>>()
    .join("&");
    let request = client
        .post(format!("{endpoint}/"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form);
    let (status, text) = super::exchange(request, "STS", endpoint).await?;
    if !status.is_success() {
        let code = xml_field(&text, "Code").unwrap_or_default();
        let message = xml_field(&text, "Message").unwrap_or_default();
        let category = if status.is_server_error() || status.as_u16() == 429 {
            FailureCategory::from_status(status.as_u16())
        } else {
            FailureCategory::Authentication
        };
        return Err(Failure {
            category,
            status: Some(status.as_u16()),
            message: format!(
                "STS AssumeRoleWithWebIdentity for {role_arn} refused: {code}: {message}"
            ),
            retry_after: None,
            empty_200: false,
        });
    }
    parse_assumed_keys(&text).map_err(|err| Failure::new(FailureCategory::Protocol, err))
}

/// The `<Credentials>` of STS's XML answer.
fn parse_assumed_keys(xml: &str) -> Result<AwsKeys, String> {
    let field =
        |name: &str| xml_field(xml, name).ok_or_else(|| format!("STS's answer has no {name}"));
    let expires = field("Expiration")?;
    let expires = chrono::DateTime::parse_from_rfc3339(&expires)
        .map_err(|err| format!("STS's Expiration {expires:?} is not a time: {err}"))?;
    let expires = SystemTime::UNIX_EPOCH
        + Duration::from_secs(u64::try_from(expires.timestamp()).unwrap_or(0));
    Ok(AwsKeys {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: Some(field("SessionToken")?),
        expires: Some(expires),
    })
}

/// The text of the first `<name>…</name>`, its five XML escapes undone.
fn xml_field(xml: &str, name: &str) -> Option<String> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cloud::env_of;

    #[test]
    fn the_chain_takes_the_environment_first_then_a_profile_then_a_web_identity() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n[ci]\n# comment\naws_access_key_id=AKIDCI\naws_secret_access_key=s2\naws_session_token=t2\n[broken]\naws_access_key_id=X\n",
        )
        .unwrap();
        let file_var: &'static str = Box::leak(file.display().to_string().into_boxed_str());
        let leak =
            |vars: Vec<(&'static str, &'static str)>| -> &'static [(&'static str, &'static str)] {
                Box::leak(vars.into_boxed_slice())
            };
        let keys = |source: AwsSource| match source {
            AwsSource::Keys { keys, .. } => keys,
            other => panic!("{other:?}"),
        };
        let env = env_of(leak(vec![
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s0"),
            ("AWS_SHARED_CREDENTIALS_FILE", file_var),
        ]));
        assert_eq!(
            keys(find_source(&env, None, "r").unwrap()).access_key_id,
            "AKIDENV"
        );
        let env = env_of(leak(vec![("AWS_SHARED_CREDENTIALS_FILE", file_var)]));
        assert_eq!(
            keys(find_source(&env, None, "r").unwrap()).access_key_id,
            "AKIDDEFAULT"
        );
        let env = env_of(leak(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", file_var),
            ("AWS_PROFILE", "ci"),
        ]));
        let ci = keys(find_source(&env, None, "r").unwrap());
        assert_eq!(
            (ci.access_key_id.as_str(), ci.session_token.as_deref()),
            ("AKIDCI", Some("t2"))
        );
        let env = env_of(leak(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", file_var),
            ("AWS_PROFILE", "broken"),
        ]));
        assert!(
            find_source(&env, None, "r")
                .unwrap_err()
                .contains("aws_secret_access_key")
        );
        let env = env_of(leak(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", file_var),
            ("AWS_PROFILE", "absent"),
        ]));
        assert!(find_source(&env, None, "r").unwrap_err().contains("lacks"));
        let env = env_of(leak(vec![
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/tmp/token"),
        ]));
        match find_source(&env, None, "eu-west-1").unwrap() {
            AwsSource::WebIdentity {
                sts_endpoint,
                token: WebToken::File(path),
                session_name,
                ..
            } => {
                assert_eq!(sts_endpoint, "https://sts.eu-west-1.amazonaws.com");
                assert_eq!(path, PathBuf::from("/tmp/token"));
                assert_eq!(session_name, "tollgate");
            }
            other => panic!("{other:?}"),
        }
        let env = env_of(leak(vec![("AWS_ROLE_ARN", "arn:aws:iam::1:role/r")]));
        // (ACTIONS_ID_TOKEN_* are read from the process: unset in tests.)
        if GithubOidc::from_env().is_none() {
            assert!(
                find_source(&env, None, "r")
                    .unwrap_err()
                    .contains("no token")
            );
        }
        let env = env_of(leak(vec![]));
        assert!(
            find_source(&env, Some(dir.path()), "r")
                .unwrap_err()
                .contains("no AWS credentials")
        );
    }

    #[test]
    fn sts_answers_are_read_with_their_escapes() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>a/b+c</SecretAccessKey><SessionToken>tok&amp;en</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        let keys = parse_assumed_keys(xml).unwrap();
        assert_eq!(keys.access_key_id, "ASIA1");
        assert_eq!(keys.secret_access_key, "a/b+c");
        assert_eq!(keys.session_token.as_deref(), Some("tok&en"));
        assert!(keys.fresh(SystemTime::now()));
        assert!(!keys.fresh(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_456_000)));
        assert!(
            parse_assumed_keys("<x/>")
                .unwrap_err()
                .contains("Expiration")
        );
    }

    #[test]
    fn a_signature_covers_the_body_the_url_and_the_time() {
        let keys = AwsKeys::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("tok"),
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/a.b-v1%3A0/invoke";
        let auth = |body: &[u8], url: &str, time| {
            let signed =
                sign_request(&keys, "us-east-1", "bedrock", url, body, &headers, time).unwrap();
            let get = |name: &str| {
                signed
                    .iter()
                    .find(|(key, _)| key.as_str() == name)
                    .map(|(_, value)| value.to_str().unwrap().to_string())
            };
            assert_eq!(get("x-amz-security-token").as_deref(), Some("tok"));
            assert_eq!(get("x-amz-date").as_deref(), Some("20231114T221320Z"));
            get("authorization").unwrap()
        };
        let first = auth(b"{}", url, time);
        assert!(
            first.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="),
            "{first}"
        );
        assert_eq!(first, auth(b"{}", url, time), "deterministic");
        assert_ne!(first, auth(b"{ }", url, time));
        assert_ne!(first, auth(b"{}", &url.replace("a.b", "a.c"), time));
    }
}
