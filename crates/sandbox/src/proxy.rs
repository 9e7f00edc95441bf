//! The run's HTTP/HTTPS proxy on 127.0.0.1 (`network.mode: proxy`): sandboxed commands may
//! connect to it and nowhere else; it lets through only hosts on `allowed_domains`, on the
//! allowed ports (`allowed_ports`, else 80 and 443), at addresses that are not internal unless
//! a domain entry names the address itself (the same classes as WebFetch, `crate::net`), and
//! connects to the address it checked. A plain-HTTP request is forwarded alone (one request a
//! connection) and only when its Host header names the host it was admitted for. It keeps a
//! record of every connection, allowed or refused, and never looks inside TLS.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::net::{Host, Resolver, names_address, pattern_admits};
use tollgate_policy::DomainPattern;

/// A request head larger than this is refused (and nothing else is read).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The ports a proxied connection may reach when the policy names none.
const WEB_PORTS: [u16; 2] = [80, 443];

/// One connection a sandboxed command asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyConnection {
    /// `CONNECT` for HTTPS tunnels, else the HTTP method.
    pub method: String,
    pub host: String,
    pub port: u16,
    pub allowed: bool,
}

/// Where the proxy may connect: `sandbox.network`'s domains and ports.
#[derive(Debug, Clone)]
pub struct ProxyRules {
    domains: Vec<DomainPattern>,
    ports: Vec<u16>,
}

impl ProxyRules {
    /// `allowed_ports` when the policy lists any, else the web's 80 and 443.
    pub fn new(domains: Vec<DomainPattern>, allowed_ports: &[u16]) -> ProxyRules {
        let ports = if allowed_ports.is_empty() {
            WEB_PORTS.to_vec()
        } else {
            allowed_ports.to_vec()
        };
        ProxyRules { domains, ports }
    }

    /// Why `host:port` is refused before any lookup, or `None`.
    fn refusal(&self, host: &Host, port: u16) -> Option<String> {
        if !self
            .domains
            .iter()
            .any(|pattern| pattern_admits(pattern, host))
        {
            return Some(format!(
                "{host} is not in sandbox.network.allowed_domains (a wildcard never admits an address or localhost)"
            ));
        }
        if !self.ports.contains(&port) {
            return Some(format!(
                "port {port} is not allowed (sandbox.network.allowed_ports, else 80 and 443)"
            ));
        }
        None
    }
}

/// The running proxy; it stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    log: Arc<Mutex<Vec<ProxyConnection>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(rules: ProxyRules, resolver: Resolver) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new((rules, resolver));
        let task = tokio::spawn(serve(listener, shared, log.clone()));
        Ok(Proxy { port, log, task })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connections recorded since the last call.
    pub fn take_log(&self) -> Vec<ProxyConnection> {
        match self.log.lock() {
            Ok(mut log) => std::mem::take(&mut *log),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    shared: Arc<(ProxyRules, Resolver)>,
    log: Arc<Mutex<Vec<ProxyConnection>>>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(err) => {
                // Out of descriptors, most likely: back off instead of spinning on it.
                tracing::warn!("the sandbox proxy cannot accept a connection: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let log = log.clone();
        tokio::spawn(async move {
            let (rules, resolver) = &*shared;
            if let Err(err) = handle(client, rules, resolver, &log).await {
                tracing::debug!("proxy connection ended: {err}");
            }
        });
    }
}

/// What the head of a proxied request asks for.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    method: String,
    host: String,
    port: u16,
    /// For plain HTTP: the request line rewritten to origin form (`GET /path HTTP/1.1`).
    origin_line: Option<String>,
}

fn parse_head(head: &str) -> Option<Target> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method == "CONNECT" {
        let (host, port) = split_host_port(target, 443)?;
        return Some(Target {
            method: method.into(),
            host,
            port,
            origin_line: None,
        });
    }
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let (host, port) = split_host_port(authority, 80)?;
    Some(Target {
        method: method.into(),
        host,
        port,
        origin_line: Some(format!("{method} {path} {version}")),
    })
}

fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    // Credentials or anything else before the host are not an authority a proxy accepts.
    if authority.contains('@') {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(']') || host.ends_with(']') => {
            (host, port.parse().ok()?)
        }
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.trim_end_matches('.');
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// A plain-HTTP request's head as forwarded: origin-form request line, the client's headers
/// less the hop-by-hop ones, `Connection: close`; and the body's length. `Err` says why the
/// request is refused: a Host header naming another host, a chunked or doubly-sized body,
/// a header the proxy cannot read unambiguously.
fn forwarded_head(head: &str, target: &Target, origin_line: &str) -> Result<(String, u64), String> {
    let mut out = format!("{origin_line}\r\n");
    let mut host_seen = false;
    let mut length: Option<u64> = None;
    let lines = head.trim_end_matches("\r\n").split("\r\n").skip(1);
    for line in lines.filter(|line| !line.is_empty()) {
        if line.contains(['\r', '\n']) || line.starts_with([' ', '\t']) {
            return Err("a header line is malformed".into());
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| "a header line has no name".to_string())?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "host" => {
                if host_seen {
                    return Err("the request has two Host headers".into());
                }
                host_seen = true;
                let named = split_host_port(value, 80);
                if named.as_ref() != Some(&(target.host.clone(), target.port)) {
                    return Err(format!(
                        "the Host header names {value}, not {}:{} the request was admitted for",
                        target.host, target.port
                    ));
                }
            }
            "content-length" => {
                let parsed: u64 = value
                    .parse()
                    .map_err(|_| "the Content-Length is not a number".to_string())?;
                if length.is_some() {
                    return Err("the request has two Content-Length headers".into());
                }
                length = Some(parsed);
            }
            "transfer-encoding" => {
                return Err(
                    "a chunked request body is not forwarded; send a Content-Length".into(),
                );
            }
            "connection"
            | "proxy-connection"
            | "keep-alive"
            | "upgrade"
            | "te"
            | "trailer"
            | "proxy-authorization" => continue,
            _ => {}
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    if !host_seen {
        let host = Host::parse(&target.host);
        out.push_str(&format!("Host: {host}:{}\r\n", target.port));
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok((out, length.unwrap_or(0)))
}

async fn handle(
    mut client: TcpStream,
    rules: &ProxyRules,
    resolver: &Resolver,
    log: &Mutex<Vec<ProxyConnection>>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return reply(&mut client, "431 Request Header Fields Too Large", "").await;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let Some(target) = parse_head(&head) else {
        return reply(
            &mut client,
            "400 Bad Request",
            "tollgate's sandbox proxy takes CONNECT host:port or an absolute http:// URL\n",
        )
        .await;
    };
    let host = Host::parse(&target.host);
    let forwarded = target
        .origin_line
        .as_ref()
        .map(|origin_line| forwarded_head(&head, &target, origin_line));
    let decided = match (rules.refusal(&host, target.port), &forwarded) {
        (Some(refusal), _) => Err(refusal),
        (None, Some(Err(refusal))) => Err(refusal.clone()),
        (None, _) => resolver
            .checked(&host, target.port, |ip| {
                names_address(rules.domains.iter(), ip)
            })
            .await
            .map_err(|refusal| refusal.to_string()),
    };
    if let Ok(mut log) = log.lock() {
        log.push(ProxyConnection {
            method: target.method.clone(),
            host: target.host.clone(),
            port: target.port,
            allowed: decided.is_ok(),
        });
    }
    let addresses = match decided {
        Ok(addresses) => addresses,
        Err(refusal) => {
            let body = format!("tollgate sandbox: {refusal}\n");
            return reply(&mut client, "403 Forbidden", &body).await;
        }
    };
    let candidates: Vec<SocketAddr> = addresses
        .iter()
        .map(|ip| SocketAddr::new(*ip, target.port))
        .collect();
    let Ok(mut upstream) = TcpStream::connect(candidates.as_slice()).await else {
        return reply(&mut client, "502 Bad Gateway", "cannot reach the host\n").await;
    };
    match forwarded {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            upstream.write_all(&buffer[head_end..]).await?;
            copy_bidirectional(&mut client, &mut upstream).await?;
        }
        Some(Ok((head, length))) => {
            upstream.write_all(head.as_bytes()).await?;
            // Exactly the body the head announced; whatever the client sends after it is not
            // forwarded (a second request on this connection would dodge the Host check).
            let early = &buffer[head_end..];
            let length_usize = usize::try_from(length).unwrap_or(usize::MAX);
            upstream
                .write_all(&early[..early.len().min(length_usize)])
                .await?;
            let rest = length.saturating_sub(early.len() as u64);
            let (mut from_client, _) = client.split();
            tokio::io::copy(&mut (&mut from_client).take(rest), &mut upstream).await?;
            tokio::io::copy(&mut upstream, &mut client).await?;
        }
        // Folded into `decided` above, which replied.
        Some(Err(_)) => {}
    }
    Ok(())
}

async fn reply(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_name_their_target() {
        let table = [
            (
                "CONNECT crates.io:443 HTTP/1.1\r\nHost: crates.io\r\n\r\n",
                Some(("CONNECT", "crates.io", 443, None)),
            ),
            (
                "GET http://LocalHost:8080/a?b HTTP/1.1\r\n\r\n",
                Some(("GET", "localhost", 8080, Some("GET /a?b HTTP/1.1"))),
            ),
            (
                "GET http://example.org HTTP/1.0\r\n\r\n",
                Some(("GET", "example.org", 80, Some("GET / HTTP/1.0"))),
            ),
            (
                "CONNECT [::1]:8443 HTTP/1.1\r\n\r\n",
                Some(("CONNECT", "::1", 8443, None)),
            ),
            ("GET /relative HTTP/1.1\r\n\r\n", None),
            ("CONNECT :443 HTTP/1.1\r\n\r\n", None),
            ("CONNECT host:notaport HTTP/1.1\r\n\r\n", None),
        ];
        for (head, want) in table {
            let got = parse_head(head);
            let got = got.as_ref().map(|t| {
                (
                    t.method.as_str(),
                    t.host.as_str(),
                    t.port,
                    t.origin_line.as_deref(),
                )
            });
            assert_eq!(got, want, "{head:?}");
        }
    }

    /// A server on 127.0.0.1 that records what each connection sent and answers `ok`.
    async fn upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let record = record.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // Read what arrives within a moment, then answer and close.
                    while let Ok(Ok(n)) = tokio::time::timeout(
                        std::time::Duration::from_millis(300),
                        stream.read(&mut chunk),
                    )
                    .await
                    {
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&chunk[..n]);
                    }
                    record
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&got).into_owned());
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        (port, seen)
    }

    async fn proxy(domains: &[&str], ports: &[u16]) -> Proxy {
        let rules = ProxyRules::new(
            domains
                .iter()
                .map(|d| DomainPattern::parse(d).unwrap())
                .collect(),
            ports,
        );
        let resolver = Resolver::fixed([
            (
                "allowed.test".to_string(),
                vec!["127.0.0.1".parse().unwrap()],
            ),
            (
                "rebind.test".to_string(),
                vec!["127.0.0.1".parse().unwrap()],
            ),
        ]);
        Proxy::start(rules, resolver).await.unwrap()
    }

    /// Sends `request` through the proxy and returns everything it answered.
    async fn send(proxy: &Proxy, request: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.read_to_end(&mut answer),
        )
        .await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_request_is_forwarded_only_for_the_host_it_was_admitted_for() {
        let (port, seen) = upstream().await;
        let proxy = proxy(&["allowed.test", "127.0.0.1"], &[port]).await;
        for host in [
            "evil.example",
            "evil.example:80",
            "allowed.test:1",
            "allowed.test\r\nHost: allowed.test",
        ] {
            let answer = send(
                &proxy,
                &format!("GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            )
            .await;
            assert!(answer.starts_with("HTTP/1.1 403"), "{host}: {answer}");
        }
        let twice = format!(
            "GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test:{port}\r\nhost: evil.example\r\n\r\n"
        );
        assert!(send(&proxy, &twice).await.starts_with("HTTP/1.1 403"));
        let chunked = format!(
            "POST http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        );
        assert!(send(&proxy, &chunked).await.starts_with("HTTP/1.1 403"));
        assert!(
            seen.lock().unwrap().is_empty(),
            "nothing reached the server"
        );

        // The right Host passes, and a second request on the same connection does not.
        let pipelined = format!(
            "POST http://allowed.test:{port}/x HTTP/1.1\r\nHost: ALLOWED.test:{port}\r\nContent-Length: 4\r\nConnection: keep-alive\r\n\r\nbodyGET /admin HTTP/1.1\r\nHost: evil.example\r\n\r\n"
        );
        let answer = send(&proxy, &pipelined).await;
        assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [format!(
                "POST /x HTTP/1.1\r\nHost: ALLOWED.test:{port}\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
            )]
        );
    }

    #[tokio::test]
    async fn ports_and_internal_addresses_are_refused_as_landlock_would() {
        let (port, seen) = upstream().await;
        // Without allowed_ports only 80 and 443 are reachable.
        let web_only = proxy(&["allowed.test", "127.0.0.1"], &[]).await;
        for request in [
            format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n"),
            "CONNECT allowed.test:22 HTTP/1.1\r\n\r\n".to_string(),
            format!(
                "GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n"
            ),
        ] {
            assert!(
                send(&web_only, &request).await.starts_with("HTTP/1.1 403"),
                "{request}"
            );
        }
        // A name leading to an internal address, an address or localhost under a wildcard.
        let wildcard = proxy(&["*", "*.test", "rebind.test"], &[port]).await;
        for target in [
            "rebind.test",
            "allowed.test",
            "127.0.0.1",
            "localhost",
            "[::1]",
            "[::ffff:7f00:1]",
            "metadata",
            "169.254.169.254",
        ] {
            let answer = send(
                &wildcard,
                &format!("CONNECT {target}:{port} HTTP/1.1\r\n\r\n"),
            )
            .await;
            assert!(answer.starts_with("HTTP/1.1 403"), "{target}: {answer}");
        }
        assert!(
            seen.lock().unwrap().is_empty(),
            "nothing reached the server"
        );
        let log = wildcard.take_log();
        assert_eq!(log.len(), 8);
        assert!(log.iter().all(|connection| !connection.allowed));
        // Named exactly, on an allowed port, the address is reached.
        let exact = proxy(&["allowed.test", "127.0.0.1"], &[port]).await;
        let answer = send(
            &exact,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\nhello"),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 200 Connection Established"),
            "{answer}"
        );
        assert_eq!(seen.lock().unwrap().clone(), ["hello"]);
    }
}
