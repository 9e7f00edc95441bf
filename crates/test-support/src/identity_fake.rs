//! Token endpoints on 127.0.0.1 that check what the real ones check, for the Vertex AI and
//! Azure runs (tests/suite/clouds_identity.rs): Google's OAuth token endpoint (a service
//! account's JWT assertion verified RS256 against the account's public key, its `iss`,
//! `aud`, `scope`, `iat` and `exp`; or a refresh token), Google's STS (the subject token a JWT
//! of the fake issuer for the provider's audience, the grant and token types), IAM's
//! `generateAccessToken` (the STS token as bearer, the account allowed), a GitHub Actions
//! OIDC endpoint (the job's request token checked; a real RS256 JWT minted for the audience
//! asked) and Microsoft Entra's v2.0 token endpoint (tenant, client, scope, and the client
//! secret or a federated assertion from the fake issuer with audience
//! `api://AzureADTokenExchange`). Refusals carry the real services' error shapes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

pub const SERVICE_ACCOUNT_KEY: &str =
    include_str!("../../../tests/fixtures/cloud/service-account.pem");
const SERVICE_ACCOUNT_PUBLIC: &str =
    include_str!("../../../tests/fixtures/cloud/service-account.pub.pem");
pub const ISSUER_KEY: &str = include_str!("../../../tests/fixtures/cloud/issuer.pem");
const ISSUER_PUBLIC: &str = include_str!("../../../tests/fixtures/cloud/issuer.pub.pem");

pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
pub const GITHUB_ISSUER: &str = "https://token.actions.githubusercontent.com";
pub const ENTRA_AUDIENCE: &str = "api://AzureADTokenExchange";
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// What the endpoints accept and issue.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// What the last step of every exchange issues (the model's bearer token).
    pub access_token: String,
    /// Its lifetime, in seconds.
    pub expires_in: u64,
    /// The service account whose key (tests/fixtures/cloud/service-account.pem) signs.
    pub service_account: String,
    /// An `authorized_user`'s client id, client secret and refresh token.
    pub refresh: Option<(String, String, String)>,
    /// The workload identity provider, `projects/…/providers/…`.
    pub provider: String,
    /// What STS issues (the access token itself when no account is impersonated).
    pub sts_token: String,
    /// The account STS's token may impersonate.
    pub impersonate: Option<String>,
    /// The GitHub job's request token.
    pub request_token: String,
    /// Entra: tenant, client id, scope, and the client secret (`None`: only a federated
    /// assertion is accepted).
    pub tenant: String,
    pub client_id: String,
    pub scope: String,
    pub client_secret: Option<String>,
}

pub struct IdentityFake {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Value>>>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    expect: Arc<Expect>,
    log: Arc<Mutex<Vec<Value>>>,
    addr: SocketAddr,
}

impl IdentityFake {
    pub async fn start(expect: Expect) -> IdentityFake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            expect: Arc::new(expect),
            log: log.clone(),
            addr,
        };
        let app = Router::new().fallback(handle).with_state(shared);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        IdentityFake { addr, log, server }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request, in order: `kind`, what was sent, and `refused` when it was.
    pub fn log(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|entry| entry["kind"] == kind)
            .collect()
    }
}

impl Drop for IdentityFake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn pem_der(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    STANDARD.decode(body).unwrap()
}

/// A JWT with `claims`, signed RS256 by the fake issuer's key (or `key`, a PKCS#8 PEM).
pub fn mint_jwt(claims: &Value, key: &str) -> String {
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&pem_der(key)).unwrap();
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT", "kid": "test"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// An OIDC token of the fake issuer for `audience`, living `ttl` seconds (negative: expired).
pub fn issuer_token(audience: &str, subject: &str, ttl: i64) -> String {
    let now = now() as i64;
    mint_jwt(
        &json!({"iss": GITHUB_ISSUER, "aud": audience, "sub": subject, "iat": now - 5, "exp": now + ttl}),
        ISSUER_KEY,
    )
}

/// The claims of a JWT whose RS256 signature `public` (PKCS#1 PEM) verifies; else why not.
fn verified(jwt: &str, public: &str) -> Result<Value, String> {
    let parts: Vec<&str> = jwt.split('.').collect();
    if parts.len() != 3 {
        return Err("not a JWT".into());
    }
    let decode = |part: &str| -> Result<Value, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| "not base64url".to_string())?;
        serde_json::from_slice(&bytes).map_err(|_| "not JSON".to_string())
    };
    let header = decode(parts[0])?;
    if header["alg"] != "RS256" {
        return Err(format!("alg {} is not RS256", header["alg"]));
    }
    let signature = URL_SAFE_NO_PAD
        .decode(parts[2])
        .map_err(|_| "signature not base64url".to_string())?;
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        pem_der(public),
    )
    .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
    .map_err(|_| "Invalid JWT Signature.".to_string())?;
    decode(parts[1])
}

fn form(body: &[u8]) -> serde_json::Map<String, Value> {
    url_pairs(&String::from_utf8_lossy(body))
}

fn url_pairs(text: &str) -> serde_json::Map<String, Value> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), Value::String(decode(value)))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_reply(status: u16, body: Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let expect = &shared.expect;
    let (kind, mut entry, outcome) = if method == Method::GET && path == "/oidc" {
        let query = url_pairs(uri.query().unwrap_or_default());
        let entry = json!({"query": query});
        ("oidc", entry, github(expect, &bearer, &query))
    } else if path == "/token" {
        let form = form(&body);
        let entry = json!({"form": form});
        let url = format!("http://{}/token", shared.addr);
        ("google_token", entry, google_token(expect, &url, &form))
    } else if path == "/v1/token" {
        let form = form(&body);
        let entry = json!({"form": form});
        ("sts", entry, sts(expect, &form))
    } else if let Some(account) = path
        .strip_prefix("/v1/projects/-/serviceAccounts/")
        .and_then(|rest| rest.strip_suffix(":generateAccessToken"))
    {
        let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let entry = json!({"account": account, "body": json, "authorization": bearer});
        (
            "impersonate",
            entry,
            impersonate(expect, account, &bearer, &json),
        )
    } else if let Some(tenant) = path.strip_suffix("/oauth2/v2.0/token") {
        let form = form(&body);
        let entry = json!({"tenant": tenant.trim_start_matches('/'), "form": form});
        (
            "entra",
            entry,
            entra(expect, tenant.trim_start_matches('/'), &form),
        )
    } else {
        (
            "unknown",
            json!({"path": path}),
            Err((404, json!({"error": "not_found"}))),
        )
    };
    entry["kind"] = json!(kind);
    let response = match outcome {
        Ok(answer) => {
            entry["issued"] = answer.clone();
            json_reply(200, answer)
        }
        Err((status, error)) => {
            entry["refused"] = error.clone();
            json_reply(status, error)
        }
    };
    shared.log.lock().unwrap().push(entry);
    response
}

type Outcome = Result<Value, (u16, Value)>;

fn oauth_error(status: u16, error: &str, description: &str) -> (u16, Value) {
    (
        status,
        json!({"error": error, "error_description": description}),
    )
}

fn text<'a>(form: &'a serde_json::Map<String, Value>, name: &str) -> &'a str {
    form.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// GitHub's OIDC endpoint: the request token, then a token for the audience asked.
fn github(expect: &Expect, bearer: &str, query: &serde_json::Map<String, Value>) -> Outcome {
    if bearer != format!("Bearer {}", expect.request_token) {
        return Err((401, json!({"message": "Bad credentials"})));
    }
    let audience = text(query, "audience");
    let token = issuer_token(audience, "repo:example/tollgate:ref:refs/heads/main", 300);
    Ok(json!({"count": 1, "value": token}))
}

/// Google's OAuth token endpoint, as it checks a service account's assertion.
fn google_token(expect: &Expect, url: &str, form: &serde_json::Map<String, Value>) -> Outcome {
    let grant = text(form, "grant_type");
    if grant == "refresh_token" {
        let Some((id, secret, refresh)) = &expect.refresh else {
            return Err(oauth_error(
                400,
                "unsupported_grant_type",
                "Invalid grant_type",
            ));
        };
        if text(form, "client_id") != id || text(form, "client_secret") != secret {
            return Err(oauth_error(401, "invalid_client", "Unauthorized"));
        }
        if text(form, "refresh_token") != refresh {
            return Err(oauth_error(400, "invalid_grant", "Bad Request"));
        }
        return Ok(issue(expect, &expect.access_token));
    }
    if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
        return Err(oauth_error(
            400,
            "unsupported_grant_type",
            "Invalid grant_type",
        ));
    }
    let claims = verified(text(form, "assertion"), SERVICE_ACCOUNT_PUBLIC)
        .map_err(|why| oauth_error(400, "invalid_grant", &why))?;
    let number = |name: &str| claims[name].as_u64().unwrap_or(0);
    let (iat, exp, now) = (number("iat"), number("exp"), now());
    if claims["iss"] != expect.service_account.as_str() {
        return Err(oauth_error(
            400,
            "invalid_grant",
            "Invalid JWT: iss is not the key's account",
        ));
    }
    if claims["aud"] != url {
        return Err(oauth_error(
            400,
            "invalid_grant",
            "Invalid JWT: aud is not the token endpoint",
        ));
    }
    if !claims["scope"]
        .as_str()
        .is_some_and(|scope| scope.split(' ').any(|s| s == CLOUD_PLATFORM))
    {
        return Err(oauth_error(
            400,
            "invalid_scope",
            "Invalid OAuth scope or ID token audience provided.",
        ));
    }
    if iat > now + 60 || exp <= now || exp < iat || exp - iat > 3600 {
        return Err(oauth_error(
            400,
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.",
        ));
    }
    Ok(issue(expect, &expect.access_token))
}

fn issue(expect: &Expect, token: &str) -> Value {
    json!({"access_token": token, "expires_in": expect.expires_in, "token_type": "Bearer"})
}

/// A subject token of the fake issuer for `audience`, unexpired.
fn check_issuer_token(token: &str, audience: &str) -> Result<Value, String> {
    let claims = verified(token, ISSUER_PUBLIC)?;
    if claims["aud"] != audience {
        return Err(format!(
            "The audience {} does not match {audience}",
            claims["aud"]
        ));
    }
    if claims["exp"].as_u64().unwrap_or(0) <= now() {
        return Err("The token has expired.".into());
    }
    Ok(claims)
}

/// Google's STS token exchange.
fn sts(expect: &Expect, form: &serde_json::Map<String, Value>) -> Outcome {
    if text(form, "grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange"
        || text(form, "requested_token_type") != ACCESS_TYPE
    {
        return Err(oauth_error(
            400,
            "invalid_request",
            "Invalid value for grant_type or requested_token_type.",
        ));
    }
    if text(form, "subject_token_type") != JWT_TYPE {
        return Err(oauth_error(
            400,
            "invalid_request",
            "Invalid subject_token_type.",
        ));
    }
    if text(form, "audience") != format!("//iam.googleapis.com/{}", expect.provider) {
        return Err(oauth_error(
            400,
            "invalid_target",
            "The target service indicated by the \"audience\" parameters is invalid.",
        ));
    }
    if !text(form, "scope").split(' ').any(|s| s == CLOUD_PLATFORM) {
        return Err(oauth_error(400, "invalid_scope", "Invalid scope."));
    }
    let audience = format!("https://iam.googleapis.com/{}", expect.provider);
    check_issuer_token(text(form, "subject_token"), &audience)
        .map_err(|why| oauth_error(400, "invalid_grant", &why))?;
    Ok(
        json!({"access_token": expect.sts_token, "issued_token_type": ACCESS_TYPE,
              "token_type": "Bearer", "expires_in": expect.expires_in}),
    )
}

/// IAM credentials' generateAccessToken with STS's token.
fn impersonate(expect: &Expect, account: &str, bearer: &str, body: &Value) -> Outcome {
    let denied = |message: &str| {
        (
            403,
            json!({"error": {"code": 403, "status": "PERMISSION_DENIED", "message": message}}),
        )
    };
    if bearer != format!("Bearer {}", expect.sts_token) {
        return Err((
            401,
            json!({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "Request had invalid authentication credentials."}}),
        ));
    }
    if expect.impersonate.as_deref() != Some(account) {
        return Err(denied(
            "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).",
        ));
    }
    if !body["scope"]
        .as_array()
        .is_some_and(|scopes| scopes.iter().any(|s| s == CLOUD_PLATFORM))
    {
        return Err(denied("scope must include cloud-platform"));
    }
    let expire = chrono::Utc::now() + chrono::Duration::seconds(expect.expires_in as i64);
    Ok(json!({"accessToken": expect.access_token,
              "expireTime": expire.format("%Y-%m-%dT%H:%M:%SZ").to_string()}))
}

/// Microsoft Entra's v2.0 token endpoint, client credentials grant.
fn entra(expect: &Expect, tenant: &str, form: &serde_json::Map<String, Value>) -> Outcome {
    if tenant != expect.tenant {
        return Err(oauth_error(
            400,
            "invalid_request",
            &format!("AADSTS90002: Tenant '{tenant}' not found."),
        ));
    }
    if text(form, "grant_type") != "client_credentials" {
        return Err(oauth_error(
            400,
            "unsupported_grant_type",
            "AADSTS70003: The app requested an unsupported grant type.",
        ));
    }
    if text(form, "client_id") != expect.client_id {
        return Err(oauth_error(
            400,
            "unauthorized_client",
            "AADSTS700016: Application not found in the directory.",
        ));
    }
    if text(form, "scope") != expect.scope {
        return Err(oauth_error(
            400,
            "invalid_scope",
            "AADSTS1002012: The provided value for scope is not valid.",
        ));
    }
    if let Some(secret) = form.get("client_secret").and_then(Value::as_str) {
        if expect.client_secret.as_deref() != Some(secret) {
            return Err(oauth_error(
                401,
                "invalid_client",
                "AADSTS7000215: Invalid client secret provided.",
            ));
        }
    } else {
        if text(form, "client_assertion_type")
            != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        {
            return Err(oauth_error(
                400,
                "invalid_request",
                "AADSTS7000218: The request body must contain client_assertion or client_secret.",
            ));
        }
        check_issuer_token(text(form, "client_assertion"), ENTRA_AUDIENCE).map_err(|why| {
            oauth_error(
                400,
                "invalid_client",
                &format!("AADSTS700213: No matching federated identity record found ({why})"),
            )
        })?;
    }
    Ok(
        json!({"token_type": "Bearer", "expires_in": expect.expires_in,
              "ext_expires_in": expect.expires_in, "access_token": expect.access_token}),
    )
}
