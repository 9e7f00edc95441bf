//! An MCP server over streamable HTTP, before its session: the URL's host gated by the
//! `WebFetch(domain:…)` rules before anything connects, resolved once and checked as WebFetch
//! and the sandbox proxy check theirs (`net`: an internal address only when a rule names it),
//! the client pinned to the checked addresses, and the headers' `${env:NAME}` taken from the
//! runner's environment by name. Owns no session (`connection` does).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::McpError;
use crate::net::{Host, Resolver, names_address};
use crate::policy::{RuleKind, RuleSet, ToolName};
use crate::settings::McpTransport;
use crate::tools::{allow_patterns, domain_rule};

pub type HttpTransport = StreamableHttpClientTransport<reqwest::Client>;

/// Headers the transport sets itself; one in a server's `headers` would be refused by the SDK
/// at the first request, so it is refused before the server starts.
const RESERVED_HEADERS: [&str; 4] = ["accept", "mcp-session-id", "last-event-id", "host"];

/// Longest a connection attempt may take; the whole start is bounded by the server's
/// `startup_timeout` besides.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What an HTTP server entry asks for.
pub struct HttpTarget<'a> {
    pub url: &'a str,
    pub headers: &'a BTreeMap<String, String>,
    /// Whether `${env:NAME}` in a header is the runner's NAME (an operator's entry) or
    /// literal text (the repository's: it must not send a secret to a URL of its choosing).
    pub expand_env: bool,
}

/// The transport for `target`, once the rules admit its host and its addresses pass the
/// checks; the refusal says which rule or address stopped it.
pub async fn transport(
    target: &HttpTarget<'_>,
    rules: &RuleSet,
    resolver: &Resolver,
) -> Result<HttpTransport, McpError> {
    let url = reqwest::Url::parse(target.url)
        .map_err(|err| McpError::Start(format!("url `{}`: {err}", target.url)))?;
    let (host, port) = match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => (Host::parse(host), port),
        _ => {
            return Err(McpError::Start(format!(
                "url `{}` has no host or port",
                target.url
            )));
        }
    };
    admit(&host, rules)?;
    let addresses = resolver
        .checked(&host, port, |ip| names_address(allow_patterns(rules), ip))
        .await
        .map_err(|refusal| McpError::Start(format!("not connected: {refusal}")))?;
    let headers = headers(target)?;
    // rustls is built without a default provider; the model client installs the same one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
        // A proxy would resolve the name itself, after the check.
        .no_proxy()
        // A redirect could lead the session (and its headers) to a host no rule admitted.
        .redirect(reqwest::redirect::Policy::none())
        // As the SDK's own client: a reused connection whose last body was not drained
        // stalls on delayed ACKs.
        .pool_max_idle_per_host(0);
    if let Host::Name(name) = &host {
        // Connect to the addresses just checked, never to a second answer of the resolver.
        let pinned: Vec<std::net::SocketAddr> = addresses
            .iter()
            .map(|ip| std::net::SocketAddr::new(*ip, port))
            .collect();
        builder = builder.resolve_to_addrs(name, &pinned);
    }
    let client = builder
        .build()
        .map_err(|err| McpError::Start(format!("cannot build the HTTP client: {err}")))?;
    let config = StreamableHttpClientTransportConfig::with_uri(Arc::<str>::from(target.url))
        .custom_headers(headers);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Whether the rules let tollgate connect to `host`: a `WebFetch(domain:…)` deny rule refuses
/// it, an ask rule has nobody to ask before the run starts, and without an allow rule
/// admitting it (a wildcard never admits an address or an internal name) nothing connects.
fn admit(host: &Host, rules: &RuleSet) -> Result<(), McpError> {
    // A whole-tool WebFetch deny rule admits no domain: the domain rules are off as a whole.
    if let Some(rule) = rules.whole_tool(RuleKind::Deny, &ToolName::WebFetch) {
        return Err(McpError::Start(format!(
            "not connected: WebFetch is denied by rule {rule}, so no domain rule admits {host}"
        )));
    }
    if let Some(rule) = domain_rule(rules, RuleKind::Deny, host) {
        return Err(McpError::Start(format!(
            "not connected: {host} is denied by rule {}",
            rule.rule
        )));
    }
    if let Some(rule) = domain_rule(rules, RuleKind::Ask, host) {
        return Err(McpError::Start(format!(
            "not connected: {host} needs approval by rule {}, and nobody can approve a connection before the run",
            rule.rule
        )));
    }
    if domain_rule(rules, RuleKind::Allow, host).is_none() {
        return Err(McpError::Start(format!(
            "not connected: no rule admits {host}; an HTTP server is reached only where an allow rule such as WebFetch(domain:{}) admits its host",
            host.rule_text()
        )));
    }
    Ok(())
}

/// The entry's headers as the transport sends them, each value marked sensitive.
fn headers(target: &HttpTarget<'_>) -> Result<HashMap<HeaderName, HeaderValue>, McpError> {
    let mut headers = HashMap::new();
    for (name, value) in target.headers {
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(McpError::Start(format!(
                "header `{name}` is set by the transport itself"
            )));
        }
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| McpError::Start(format!("`{name}` is not a header name")))?;
        let value = if target.expand_env {
            expand(value)?
        } else {
            value.clone()
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            McpError::Start(format!("header `{name}` has a value HTTP cannot carry"))
        })?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The variables an operator's HTTP server entries name in their headers: their values are
/// secrets the run must redact wherever they show (a server may echo its token back).
pub fn header_variables(plan: &super::McpPlan) -> Vec<String> {
    plan.servers
        .iter()
        .filter(|server| server.expand_env)
        .filter_map(|server| match &server.spec.transport {
            McpTransport::Http { headers, .. } => Some(headers),
            McpTransport::Stdio { .. } => None,
        })
        .flat_map(|headers| headers.values())
        .flat_map(|value| named(value))
        .collect()
}

/// The names of `${env:NAME}` / `${NAME}` in `value`, as [`expand`] reads them.
fn named(value: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        let name = after[..end].strip_prefix("env:").unwrap_or(&after[..end]);
        names.push(name.to_string());
        rest = &after[end + 1..];
    }
    names
}

/// `${env:NAME}` and `${NAME}` anywhere in `value` are the runner's variable NAME, which must
/// be set; every other character is literal. Only variables a header names are read.
fn expand(value: &str) -> Result<String, McpError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(McpError::Start(format!(
                "a header value has `${{` without its `}}`: {}",
                crate::base::truncate_middle(value, 40)
            )));
        };
        let name = after[..end].strip_prefix("env:").unwrap_or(&after[..end]);
        let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain {
            return Err(McpError::Start(format!(
                "`${{{}}}` in a header names no environment variable",
                &after[..end]
            )));
        }
        let set = std::env::var(name)
            .map_err(|_| McpError::Start(format!("header: ${{env:{name}}} is not set")))?;
        out.push_str(&set);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Why an HTTP server's session could not start, in the operator's terms: the URL (without
/// any credentials in it), then the HTTP status, or the OS's or TLS's or the resolver's reason
/// for a connection that was not made. The SDK's own message names its internal types
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`) and drops the cause.
pub fn start_failure(url: &str, err: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as Init;
    let cause = match err {
        Init::TransportError { error, .. } => transport_cause(error.error.as_ref()),
        Init::ConnectionClosed(_) => {
            "the connection closed before the server answered `initialize`".to_string()
        }
        Init::JsonRpcError(data) => format!("the server refused `initialize`: {}", data.message),
        other => other.to_string(),
    };
    format!("cannot start the session at {}: {cause}", shown_url(url))
}

/// The cause inside the SDK's transport error: its HTTP error, the client's, or the OS's.
fn transport_cause(err: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError as Http;
    if let Some(http) = err.downcast_ref::<Http<reqwest::Error>>() {
        return match http {
            Http::Client(err) => client_cause(err),
            Http::HttpStatus(status) => answered(status.status),
            Http::UnexpectedServerResponse(text) => {
                format!(
                    "the server answered {}",
                    crate::base::truncate_middle(text, 500)
                )
            }
            Http::Io(err) => err.to_string(),
            other => other.to_string(),
        };
    }
    if let Some(client) = err.downcast_ref::<reqwest::Error>() {
        return client_cause(client);
    }
    match err.source() {
        Some(source) => transport_cause(source),
        None => err.to_string(),
    }
}

/// `HTTP 500 Internal Server Error`, as a status line says it.
fn answered(status: u16) -> String {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .map(|reason| format!(" {reason}"))
        .unwrap_or_default();
    format!("the server answered HTTP {status}{reason}")
}

/// What the HTTP client says went wrong, by its causes (its own top line only repeats the
/// URL): `could not connect: tcp connect error: Connection refused (os error 111)`.
fn client_cause(err: &reqwest::Error) -> String {
    if let Some(status) = err.status() {
        return answered(status.as_u16());
    }
    let what = if err.is_connect() {
        "could not connect"
    } else if err.is_timeout() {
        "timed out"
    } else {
        "the request failed"
    };
    let mut causes: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        // hyper's `client error (Connect)` says less than `is_connect` already did.
        if !text.starts_with("client error (") && !causes.contains(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    if causes.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {}", causes.join(": "))
    }
}

/// The URL as messages show it: a user name or password in it is left out.
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, PolicyOrigin};

    fn rules(yaml: &str) -> RuleSet {
        RuleSet::from_policy(
            &Policy::parse(
                yaml,
                PolicyOrigin {
                    file: std::path::Path::new("p.yaml"),
                    dir: std::path::Path::new("/"),
                    home: None,
                },
            )
            .unwrap(),
        )
    }

    #[test]
    fn header_values_take_named_variables_only() {
        // SAFETY: names no other test uses.
        unsafe { std::env::set_var("TOLLGATE_MCP_HTTP_TOKEN", "s3cret") };
        assert_eq!(
            expand("Bearer ${env:TOLLGATE_MCP_HTTP_TOKEN}").unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand("${TOLLGATE_MCP_HTTP_TOKEN}-${env:TOLLGATE_MCP_HTTP_TOKEN}").unwrap(),
            "s3cret-s3cret"
        );
        assert_eq!(expand("plain $HOME").unwrap(), "plain $HOME");
        for bad in [
            "${env:TOLLGATE_MCP_HTTP_UNSET}",
            "${}",
            "${env:}",
            "${A B}",
            "Bearer ${env:X",
            "${env:$(id)}",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
        let headers: BTreeMap<String, String> = [(
            "Authorization".to_string(),
            "Bearer ${env:TOLLGATE_MCP_HTTP_TOKEN}".to_string(),
        )]
        .into_iter()
        .collect();
        let literal = super::headers(&HttpTarget {
            url: "http://x",
            headers: &headers,
            expand_env: false,
        })
        .unwrap();
        assert_eq!(
            literal.values().next().unwrap(),
            "Bearer ${env:TOLLGATE_MCP_HTTP_TOKEN}"
        );
        assert_eq!(
            named("Bearer ${env:A_TOKEN} ${B} ${unclosed"),
            ["A_TOKEN", "B"]
        );
        for reserved in ["Accept", "Mcp-Session-Id", "HOST"] {
            let headers = [(reserved.to_string(), "x".to_string())]
                .into_iter()
                .collect();
            assert!(
                super::headers(&HttpTarget {
                    url: "http://x",
                    headers: &headers,
                    expand_env: true,
                })
                .is_err(),
                "{reserved}"
            );
        }
    }

    #[tokio::test]
    async fn a_server_is_reached_only_where_the_domain_rules_admit_its_host() {
        let headers = BTreeMap::new();
        let reach = |url: &'static str, yaml: &'static str| {
            let headers = &headers;
            async move {
                let target = HttpTarget {
                    url,
                    headers,
                    expand_env: true,
                };
                let resolver = Resolver::fixed([
                    (
                        "mcp.example.com".to_string(),
                        vec!["93.184.216.34".parse().unwrap()],
                    ),
                    (
                        "inside.example.com".to_string(),
                        vec!["10.0.0.7".parse().unwrap()],
                    ),
                ]);
                transport(&target, &rules(yaml), &resolver)
                    .await
                    .map(|_| ())
                    .map_err(|err| err.to_string())
            }
        };
        let allow_all = "permissions:\n  allow: ['WebFetch(domain:*.example.com)']\n";
        assert_eq!(
            reach("https://mcp.example.com/mcp", allow_all).await,
            Ok(())
        );
        // No rule, a deny rule, an ask rule: nothing connects.
        let none = reach("https://mcp.example.com/mcp", "permissions: {}\n")
            .await
            .unwrap_err();
        assert!(none.contains("no rule admits mcp.example.com"), "{none}");
        let denied = reach(
            "https://mcp.example.com/mcp",
            "permissions:\n  allow: ['WebFetch(domain:*.example.com)']\n  deny: ['WebFetch(domain:mcp.example.com)']\n",
        )
        .await
        .unwrap_err();
        assert!(denied.contains("denied by rule"), "{denied}");
        let asked = reach(
            "https://mcp.example.com/mcp",
            "permissions:\n  ask: ['WebFetch(domain:mcp.example.com)']\n",
        )
        .await
        .unwrap_err();
        assert!(asked.contains("needs approval"), "{asked}");
        let off = reach(
            "https://mcp.example.com/mcp",
            "permissions:\n  allow: ['WebFetch(domain:mcp.example.com)']\n  deny: [WebFetch]\n",
        )
        .await
        .unwrap_err();
        assert!(off.contains("WebFetch is denied by rule"), "{off}");
        // A name admitted by a wildcard that resolves inside is refused by the address check.
        let inside = reach("https://inside.example.com/mcp", allow_all)
            .await
            .unwrap_err();
        assert!(inside.contains("a private address"), "{inside}");
        // An address only by a rule naming it exactly; a wildcard never admits one.
        let loopback = reach(
            "http://127.0.0.1:9/mcp",
            "permissions:\n  allow: ['WebFetch(domain:*)']\n",
        )
        .await
        .unwrap_err();
        assert!(loopback.contains("no rule admits 127.0.0.1"), "{loopback}");
        assert_eq!(
            reach(
                "http://127.0.0.1:9/mcp",
                "permissions:\n  allow: ['WebFetch(domain:127.0.0.1)']\n"
            )
            .await,
            Ok(())
        );
        let metadata = reach(
            "http://169.254.169.254/mcp",
            "permissions:\n  allow: ['WebFetch(domain:*)']\n",
        )
        .await
        .unwrap_err();
        assert!(metadata.contains("no rule admits"), "{metadata}");
    }
}
