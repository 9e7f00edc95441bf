//! WebFetch (S1): fetches one http(s) URL whose host the gate allowed (`WebFetch(domain:…)`
//! rules, judged before any connection), converts HTML to Markdown and returns it with the
//! model's prompt. The host is resolved once and the connection pinned to the addresses
//! checked (no internal address unless a rule names it); redirects are followed only within
//! the same origin (scheme, host, port), any other goes back to the model as a new URL to
//! fetch, so it passes the gate and the address check as its own call.

use std::borrow::Cow;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input,
};
use crate::net::{Host, names_address, pattern_admits};
use crate::policy::{
    AskCause, DomainPattern, PermissionContext, RuleContent, RuleKind, RuleRef, RuleSet, ToolCheck,
    ToolName,
};

/// Bytes of a response read at most; the rest is not downloaded.
const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// The whole fetch, redirects included.
const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_REDIRECTS: usize = 5;
/// Markdown returned at most; past the tool's threshold the land step offloads it anyway.
const MAX_MARKDOWN_CHARS: usize = 200_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    url: String,
    prompt: String,
}

struct WebFetchInput {
    url: Url,
    host: Host,
    prompt: String,
}

pub struct WebFetchTool;

impl Tool for WebFetchTool {
    fn name(&self) -> ToolName {
        ToolName::WebFetch
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Fetches an http(s) URL and returns the page as Markdown with your prompt, for you to answer from it. \
             Only hosts the policy allows can be fetched; a redirect to another host or port is returned as a URL to fetch.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "An http:// or https:// URL"},
                "prompt": {"type": "string", "description": "What you want to learn from the page"}
            },
            "required": ["url", "prompt"]
        })
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let raw: RawInput = parse_input(&self.name(), input)?;
        let url = Url::parse(raw.url.trim())
            .map_err(|err| ToolError::Invalid(format!("`{}` is not a URL: {err}", raw.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::Invalid(format!(
                "only http and https URLs can be fetched, not {}",
                url.scheme()
            )));
        }
        // Credentials in a URL would be sent to the host and written to the transcript.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::Invalid(
                "a URL with a user name or password is refused".into(),
            ));
        }
        let host = url
            .host_str()
            .filter(|host| !host.trim_end_matches('.').is_empty())
            .map(Host::parse)
            .ok_or_else(|| ToolError::Invalid(format!("`{url}` has no host")))?;
        Ok(Box::new(WebFetchInput {
            url,
            host,
            prompt: raw.prompt,
        }))
    }
}

/// The first content rule of `kind` whose domain pattern matches `host`. An allow rule with
/// a wildcard never admits an address or an internal name (`net::pattern_admits`); deny and
/// ask rules match as written, so `WebFetch(domain:*)` in `deny` refuses addresses too. The
/// same rules decide which HTTP MCP servers tollgate connects to (`mcp::http`).
pub fn domain_rule(rules: &RuleSet, kind: RuleKind, host: &Host) -> Option<RuleRef> {
    let text = host.rule_text();
    rules
        .content_rules(kind, &ToolName::WebFetch)
        .find(|rule| match &rule.content {
            Some(RuleContent::Domain(pattern)) if kind == RuleKind::Allow => {
                pattern_admits(pattern, host)
            }
            Some(RuleContent::Domain(pattern)) => pattern.matches(&text),
            _ => false,
        })
        .map(RuleRef::from)
}

/// The domain patterns of the allow rules: an internal address is reached only when one of
/// them names it exactly.
pub fn allow_patterns(rules: &RuleSet) -> impl Iterator<Item = &DomainPattern> {
    rules
        .content_rules(RuleKind::Allow, &ToolName::WebFetch)
        .filter_map(|rule| match &rule.content {
            Some(RuleContent::Domain(pattern)) => Some(pattern),
            _ => None,
        })
}

impl ToolInput for WebFetchInput {
    // Nothing on disk changes; what may be fetched is the domain rules' business.
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        let host = &self.host;
        if let Some(rule) = domain_rule(ctx.rules, RuleKind::Deny, host) {
            return ToolCheck::Deny {
                reason: format!("fetching {host} is denied by rule {}", rule.rule),
                rule: Some(rule),
            };
        }
        if let Some(rule) = domain_rule(ctx.rules, RuleKind::Ask, host) {
            return ToolCheck::Ask {
                reason: format!("fetching {host} needs approval by rule {}", rule.rule),
                cause: AskCause::ContentRule(rule),
            };
        }
        if let Some(rule) = domain_rule(ctx.rules, RuleKind::Allow, host) {
            return ToolCheck::Allow {
                reason: format!("{host} is allowed by rule {}", rule.rule),
                rule: Some(rule),
                updated_input: None,
            };
        }
        let reason = match host {
            Host::Ip(std::net::IpAddr::V6(_)) => {
                format!("fetching {host} needs approval: an IPv6 address has no domain rule form")
            }
            _ => format!(
                "fetching {host} needs an allow rule such as WebFetch(domain:{})",
                host.rule_text()
            ),
        };
        ToolCheck::Passthrough { reason }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            tokio::select! {
                fetched = fetch(&self.url, &self.host, ctx) => fetched.map(|page| ToolOutput::new(answer(self, page))),
                _ = ctx.abort.aborted() => Err(ToolError::Stopped("the fetch was interrupted".into())),
            }
        })
    }
}

/// What came back: a page's text, or a redirect to another origin for the model to follow.
enum Page {
    Text {
        url: Url,
        status: u16,
        markdown: String,
        truncated: bool,
    },
    Redirect {
        from: Url,
        to: String,
        status: u16,
    },
}

async fn fetch(url: &Url, host: &Host, ctx: &ToolContext) -> Result<Page, ToolError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| ToolError::Invalid(format!("`{url}` has no port")))?;
    let addresses = ctx
        .resolver
        .checked(host, port, |ip| {
            names_address(allow_patterns(&ctx.rules), ip)
        })
        .await
        .map_err(|refusal| ToolError::Failed(format!("not fetched: {refusal}")))?;
    // rustls is built without a default provider; the model client installs the same one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let origin = url.origin();
    let mut builder = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
        // A proxy would resolve the name itself, after the check.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.url().origin() == origin && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }));
    if let Host::Name(name) = host {
        // Connect to the addresses just checked, never to a second answer of the resolver.
        let pinned: Vec<std::net::SocketAddr> = addresses
            .iter()
            .map(|ip| std::net::SocketAddr::new(*ip, port))
            .collect();
        builder = builder.resolve_to_addrs(name, &pinned);
    }
    let client = builder
        .build()
        .map_err(|err| ToolError::Failed(format!("cannot build the HTTP client: {err}")))?;
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|err| ToolError::Failed(format!("cannot fetch {url}: {err}")))?;
    let status = response.status();
    let final_url = response.url().clone();
    if status.is_redirection() {
        let to = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|location| location.to_str().ok())
            .and_then(|location| final_url.join(location).ok())
            .map(String::from)
            .ok_or_else(|| {
                ToolError::Failed(format!("{url} redirected without a usable Location"))
            })?;
        return Ok(Page::Redirect {
            from: final_url,
            to,
            status: status.as_u16(),
        });
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let is_html = content_type.contains("html");
    let is_text = is_html
        || content_type.starts_with("text/")
        || content_type.contains("json")
        || content_type.contains("xml")
        || content_type.is_empty();
    if !is_text {
        return Err(ToolError::Failed(format!(
            "{final_url} is {content_type}, not text; WebFetch reads text and HTML only"
        )));
    }
    let (body, truncated) = read_capped(response).await?;
    let text = String::from_utf8_lossy(&body);
    let (markdown, cut) = if is_html {
        super::page_markdown::html_to_markdown(text.into_owned())
            .await
            .map_err(|err| {
                ToolError::Failed(format!("cannot convert {final_url} to Markdown: {err}"))
            })?
    } else {
        (text.into_owned(), false)
    };
    Ok(Page::Text {
        url: final_url,
        status: status.as_u16(),
        markdown,
        truncated: truncated || cut,
    })
}

/// The body up to [`MAX_BODY_BYTES`], and whether there was more.
async fn read_capped(response: reqwest::Response) -> Result<(Vec<u8>, bool), ToolError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|err| ToolError::Failed(format!("the download failed: {err}")))?;
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// v1 asks no second model to answer the prompt: the page's text goes back with the prompt,
/// and the model answers it itself (the README says so).
fn answer(input: &WebFetchInput, page: Page) -> String {
    match page {
        Page::Redirect { from, to, status } => format!(
            "{from} redirected (HTTP {status}) to another origin: {to}\n\
             To read it, call WebFetch again with that URL (the policy must allow its host)."
        ),
        Page::Text {
            url,
            status,
            markdown,
            truncated,
        } => {
            let total = markdown.chars().count();
            let mut text: String = markdown.chars().take(MAX_MARKDOWN_CHARS).collect();
            if truncated || total > MAX_MARKDOWN_CHARS {
                text.push_str(
                    "\n\n[the page was cut: it is larger or nested deeper than WebFetch reads]",
                );
            }
            format!(
                "Fetched {url} (HTTP {status}). Answer this from the page below: {}\n\n---\n{text}",
                input.prompt
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PermissionMode, Policy, PolicyOrigin, RuleSet, Workspace};

    #[test]
    fn domain_rules_decide_deny_then_ask_then_allow() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['WebFetch(domain:*.example.com)', 'WebFetch(domain:docs.rs)']\n  deny: ['WebFetch(domain:evil.example.com)']\n  ask: ['WebFetch(domain:review.example.com)']\n",
            PolicyOrigin { file: std::path::Path::new("p.yaml"), dir: std::path::Path::new("/"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            disk: None,
            auto_allow_bash: false,
            mode: PermissionMode::DontAsk,
            rules: &rules,
            workspace: &workspace,
        };
        let table = [
            ("https://docs.rs/serde", "allow"),
            ("https://DOCS.rs./serde", "allow"),
            ("http://api.example.com:8080/v1", "allow"),
            ("https://evil.example.com/", "deny"),
            ("https://review.example.com/", "ask-rule"),
            // A `*` is one label: neither the bare domain nor two labels match.
            ("https://example.com/", "passthrough"),
            ("https://a.b.example.com/", "passthrough"),
            ("https://docs.rs.evil.org/", "passthrough"),
        ];
        for (url, want) in table {
            let input = WebFetchTool
                .prepare(&json!({"url": url, "prompt": "p"}))
                .unwrap();
            let got = match input.check_permissions(&ctx) {
                ToolCheck::Allow { .. } => "allow",
                ToolCheck::Deny { .. } => "deny",
                ToolCheck::Ask {
                    cause: AskCause::ContentRule(_),
                    ..
                } => "ask-rule",
                ToolCheck::Ask { .. } => "ask",
                ToolCheck::Passthrough { .. } => "passthrough",
            };
            assert_eq!(got, want, "{url}");
        }
    }

    #[test]
    fn only_plain_http_urls_with_a_host_are_prepared() {
        let tool = WebFetchTool;
        let prepare = |url: &str| tool.prepare(&json!({"url": url, "prompt": "p"}));
        assert!(prepare("https://docs.rs/serde").is_ok());
        assert!(prepare("http://127.0.0.1:8080/x").is_ok());
        for bad in [
            "file:///etc/passwd",
            "ftp://example.com/x",
            "https://user:pw@example.com/",
            "not a url",
            "data:text/plain,hi",
        ] {
            assert!(matches!(prepare(bad), Err(ToolError::Invalid(_))), "{bad}");
        }
    }

    fn rules(allow: &[&str]) -> RuleSet {
        let quoted: Vec<String> = allow.iter().map(|rule| format!("'{rule}'")).collect();
        let policy = Policy::parse(
            &format!("permissions:\n  allow: [{}]\n", quoted.join(", ")),
            PolicyOrigin {
                file: std::path::Path::new("p.yaml"),
                dir: std::path::Path::new("/"),
                home: None,
            },
        )
        .unwrap();
        RuleSet::from_policy(&policy)
    }

    fn verdict(rules: &RuleSet, url: &str) -> &'static str {
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            disk: None,
            auto_allow_bash: false,
            mode: PermissionMode::DontAsk,
            rules,
            workspace: &workspace,
        };
        let input = WebFetchTool
            .prepare(&json!({"url": url, "prompt": "p"}))
            .unwrap();
        match input.check_permissions(&ctx) {
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Passthrough { .. } => "passthrough",
        }
    }

    #[test]
    fn a_wildcard_never_allows_an_address_or_an_internal_name() {
        let star = rules(&[
            "WebFetch(domain:*)",
            "WebFetch(domain:*.*.*.*)",
            "WebFetch(domain:*.localhost)",
            "WebFetch(domain:*.internal)",
            "WebFetch(domain:*.google.internal)",
        ]);
        for url in [
            "http://localhost:8080/",
            "http://LOCALHOST./",
            "http://metadata/computeMetadata/v1/",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://[::1]/",
            "http://[::ffff:7f00:1]/",
            "http://[fd00:ec2::254]/",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://api.localhost/",
        ] {
            assert_eq!(verdict(&star, url), "passthrough", "{url}");
        }
        assert_eq!(verdict(&star, "https://docs/"), "allow");
        let exact = rules(&["WebFetch(domain:127.0.0.1)", "WebFetch(domain:localhost)"]);
        assert_eq!(verdict(&exact, "http://127.0.0.1:9/"), "allow");
        assert_eq!(
            verdict(&exact, "http://2130706433:9/"),
            "allow",
            "the URL standard's form"
        );
        assert_eq!(verdict(&exact, "http://localhost/"), "allow");
        assert_eq!(verdict(&exact, "http://[::ffff:7f00:1]/"), "passthrough");
    }

    /// A server on 127.0.0.1 answering every request with `reply(path)`; returns its port.
    async fn serve(reply: fn(&str, u16) -> String) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = stream.read(&mut buf).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        head.extend_from_slice(&buf[..n]);
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                    let _ = stream.write_all(reply(&path, port).as_bytes()).await;
                });
            }
        });
        port
    }

    fn page(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn context(rules: RuleSet, resolver: crate::net::Resolver) -> ToolContext {
        let (_handle, abort) = crate::base::AbortHandle::new();
        ToolContext {
            resolver,
            workspace: std::sync::Arc::new(Workspace::new("/ws".into(), vec![], None)),
            rules: std::sync::Arc::new(rules),
            limits: crate::tools::ToolLimits::default(),
            abort,
            files: crate::tools::FileStateCache::default(),
            progress: None,
            sandbox: None,
            read_only: None,
            allow_basis: Default::default(),
            command_env: crate::exec::RunEnv::new(&Default::default()).model,
            state: Default::default(),
        }
    }

    async fn run(ctx: &ToolContext, url: &str) -> Result<String, ToolError> {
        let input = WebFetchTool
            .prepare(&json!({"url": url, "prompt": "p"}))
            .unwrap();
        input.run(ctx).await.map(|output| output.content)
    }

    #[tokio::test]
    async fn names_are_resolved_once_and_internal_addresses_refused() {
        let port = serve(|_, _| page("<p>inside</p>")).await;
        let loopback = vec!["127.0.0.1".parse().unwrap()];
        let resolver = crate::net::Resolver::fixed([
            ("rebind.test".to_string(), loopback.clone()),
            ("metadata.google.internal".to_string(), loopback.clone()),
        ]);
        // Allowed by name, but the name leads to 127.0.0.1, which no rule names.
        let ctx = context(
            rules(&[
                "WebFetch(domain:rebind.test)",
                "WebFetch(domain:*.google.internal)",
                "WebFetch(domain:metadata.google.internal)",
            ]),
            resolver.clone(),
        );
        for host in ["rebind.test", "metadata.google.internal"] {
            let err = run(&ctx, &format!("http://{host}:{port}/"))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ToolError::Failed(text) if text.contains("127.0.0.1, a loopback address")),
                "{err:?}"
            );
        }
        // A rule naming the address lets it through, and the connection goes to the address
        // the table gave (the name exists in no DNS).
        let ctx = context(
            rules(&["WebFetch(domain:rebind.test)", "WebFetch(domain:127.0.0.1)"]),
            resolver,
        );
        let text = run(&ctx, &format!("http://rebind.test:{port}/"))
            .await
            .unwrap();
        assert!(text.contains("inside"), "{text}");
        let text = run(&ctx, &format!("http://127.0.0.1:{port}/"))
            .await
            .unwrap();
        assert!(text.contains("inside"), "{text}");
    }

    #[tokio::test]
    async fn a_redirect_to_another_port_or_scheme_is_a_new_origin() {
        let admin = serve(|_, _| page("<p>internal admin</p>")).await;
        // The redirecting server learns the admin port through a static: fn pointers hold no state.
        static ADMIN: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        ADMIN.store(admin, std::sync::atomic::Ordering::SeqCst);
        let front = serve(|path, port| {
            let admin = ADMIN.load(std::sync::atomic::Ordering::SeqCst);
            let location = match path {
                "/same" => format!("http://127.0.0.1:{port}/landed"),
                "/port" => format!("http://127.0.0.1:{admin}/internal-admin"),
                "/scheme" => format!("https://127.0.0.1:{port}/x"),
                "/landed" => return page("<p>same origin</p>"),
                _ => format!("http://127.0.0.1:{admin}/"),
            };
            format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        })
        .await;
        let ctx = context(rules(&["WebFetch(domain:127.0.0.1)"]), Default::default());
        let text = run(&ctx, &format!("http://127.0.0.1:{front}/same"))
            .await
            .unwrap();
        assert!(text.contains("same origin"), "{text}");
        for path in ["/port", "/scheme"] {
            let text = run(&ctx, &format!("http://127.0.0.1:{front}{path}"))
                .await
                .unwrap();
            assert!(
                text.contains("redirected (HTTP 307) to another origin"),
                "{text}"
            );
            assert!(!text.contains("internal admin"), "{text}");
        }
    }
}
