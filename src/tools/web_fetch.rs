//! WebFetch (S1): fetches one http(s) URL whose host the gate allowed (`WebFetch(domain:…)`
//! rules, judged before any connection), converts HTML to Markdown and returns it with the
//! model's prompt. Redirects are followed only to the same host; any other host goes back to
//! the model as a new URL to fetch, so it passes the gate as its own call.

use std::borrow::Cow;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input,
};
use crate::policy::{
    AskCause, PermissionContext, RuleContent, RuleKind, RuleRef, ToolCheck, ToolName,
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
    /// Lower-case, as the domain rules compare it.
    host: String,
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
             Only hosts the policy allows can be fetched; a redirect to another host is returned as a URL to fetch.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "An http:// or https:// URL"},
                "prompt": {"type": "string", "description": "What you want to learn from the page"}
            },
            "required": ["url", "prompt"],
            "additionalProperties": false
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
            .map(|host| host.trim_end_matches('.').to_ascii_lowercase())
            .filter(|host| !host.is_empty())
            .ok_or_else(|| ToolError::Invalid(format!("`{url}` has no host")))?;
        Ok(Box::new(WebFetchInput {
            url,
            host,
            prompt: raw.prompt,
        }))
    }
}

/// The first content rule of `kind` whose domain pattern matches `host`.
fn domain_rule(ctx: &PermissionContext, kind: RuleKind, host: &str) -> Option<RuleRef> {
    ctx.rules
        .content_rules(kind, &ToolName::WebFetch)
        .find(|rule| matches!(&rule.content, Some(RuleContent::Domain(pattern)) if pattern.matches(host)))
        .map(RuleRef::from)
}

impl ToolInput for WebFetchInput {
    // Nothing on disk changes; what may be fetched is the domain rules' business.
    fn is_read_only(&self) -> bool {
        true
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }

    fn is_destructive(&self) -> bool {
        false
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        let host = &self.host;
        if let Some(rule) = domain_rule(ctx, RuleKind::Deny, host) {
            return ToolCheck::Deny {
                reason: format!("fetching {host} is denied by rule {}", rule.rule),
                rule: Some(rule),
            };
        }
        if let Some(rule) = domain_rule(ctx, RuleKind::Ask, host) {
            return ToolCheck::Ask {
                reason: format!("fetching {host} needs approval by rule {}", rule.rule),
                cause: AskCause::ContentRule(rule),
            };
        }
        if let Some(rule) = domain_rule(ctx, RuleKind::Allow, host) {
            return ToolCheck::Allow {
                reason: format!("{host} is allowed by rule {}", rule.rule),
                rule: Some(rule),
                updated_input: None,
            };
        }
        ToolCheck::Passthrough {
            reason: format!("fetching {host} needs an allow rule such as WebFetch(domain:{host})"),
        }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            tokio::select! {
                fetched = fetch(&self.url) => fetched.map(|page| ToolOutput::new(answer(self, page))),
                _ = ctx.abort.aborted() => Err(ToolError::Stopped("the fetch was interrupted".into())),
            }
        })
    }
}

/// What came back: a page's text, or a redirect to another host for the model to follow.
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

async fn fetch(url: &Url) -> Result<Page, ToolError> {
    // rustls is built without a default provider; the model client installs the same one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same_host =
                attempt.previous().first().and_then(Url::host_str) == attempt.url().host_str();
            if same_host && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
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
    let markdown = if is_html {
        // Scripts, styles and the head are not the page's text; they would only cost tokens.
        htmd::HtmlToMarkdown::builder()
            .skip_tags(vec![
                "head", "script", "style", "noscript", "template", "svg",
            ])
            .build()
            .convert(&text)
            .map_err(|err| {
                ToolError::Failed(format!("cannot convert {final_url} to Markdown: {err}"))
            })?
    } else {
        text.into_owned()
    };
    Ok(Page::Text {
        url: final_url,
        status: status.as_u16(),
        markdown,
        truncated,
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
            "{from} redirected (HTTP {status}) to another host: {to}\n\
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
                text.push_str("\n\n[the page was cut here: it is larger than WebFetch reads]");
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
}
