//! The run's HTTP/HTTPS proxy on 127.0.0.1 (`network.mode: proxy`): sandboxed commands may
//! connect to it and nowhere else; it lets through only hosts on `allowed_domains` and keeps a
//! record of every connection, allowed or refused. It never looks inside TLS.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::policy::DomainPattern;

/// A request head larger than this is refused (and nothing else is read).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// One connection a sandboxed command asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyConnection {
    /// `CONNECT` for HTTPS tunnels, else the HTTP method.
    pub method: String,
    pub host: String,
    pub port: u16,
    pub allowed: bool,
}

/// The running proxy; it stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    log: Arc<Mutex<Vec<ProxyConnection>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(allowed: Vec<DomainPattern>) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let allowed = Arc::new(allowed);
        let task = tokio::spawn(serve(listener, allowed, log.clone()));
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
    allowed: Arc<Vec<DomainPattern>>,
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
        let allowed = allowed.clone();
        let log = log.clone();
        tokio::spawn(async move {
            if let Err(err) = handle(client, &allowed, &log).await {
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
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(']') || host.ends_with(']') => {
            (host, port.parse().ok()?)
        }
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

async fn handle(
    mut client: TcpStream,
    allowed: &[DomainPattern],
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
    let is_allowed = allowed.iter().any(|pattern| pattern.matches(&target.host));
    if let Ok(mut log) = log.lock() {
        log.push(ProxyConnection {
            method: target.method.clone(),
            host: target.host.clone(),
            port: target.port,
            allowed: is_allowed,
        });
    }
    if !is_allowed {
        let body = format!(
            "tollgate sandbox: {} is not in sandbox.network.allowed_domains\n",
            target.host
        );
        return reply(&mut client, "403 Forbidden", &body).await;
    }
    let Ok(mut upstream) = TcpStream::connect((target.host.as_str(), target.port)).await else {
        return reply(&mut client, "502 Bad Gateway", "cannot reach the host\n").await;
    };
    match &target.origin_line {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            upstream.write_all(&buffer[head_end..]).await?;
        }
        Some(origin_line) => {
            let rest_of_head = head.split_once("\r\n").map_or("", |(_, rest)| rest);
            upstream
                .write_all(format!("{origin_line}\r\n{rest_of_head}").as_bytes())
                .await?;
            upstream.write_all(&buffer[head_end..]).await?;
        }
    }
    copy_bidirectional(&mut client, &mut upstream).await?;
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
}
