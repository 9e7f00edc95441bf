//! A real headless browser for end-to-end checks of the HTML reports: Debian's `chromium`
//! driven by its `chromedriver` over the W3C WebDriver protocol, on 127.0.0.1 only.
//! `.ci/run` installs both; elsewhere `Browser::find` says what is missing, so the check
//! skips with that reason through `skip` (a failure under `TOLLGATE_TEST_REQUIRE_ALL=1`, as
//! in CI).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::skip::{on_path, skip};

/// The flags that keep chromium quiet and offline in a container: no sandbox (the test
/// user may be root), no GPU, no QUIC, no first-run, background or update traffic.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The W3C name of an element reference in a WebDriver answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct BrowserTools {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

impl BrowserTools {
    /// Both programs, or why the check cannot run here.
    pub fn find() -> Result<BrowserTools, String> {
        let chromium = std::env::var_os("TOLLGATE_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| on_path("chromium"))
            .ok_or("no chromium on PATH (Debian: apt-get install chromium chromium-driver)")?;
        let chromedriver = on_path("chromedriver")
            .ok_or("no chromedriver on PATH (Debian: apt-get install chromium-driver)")?;
        Ok(BrowserTools {
            chromium,
            chromedriver,
        })
    }

    /// `Some` when the check can run; `None` after skipping the test with the reason.
    pub fn or_skip() -> Option<BrowserTools> {
        BrowserTools::find().map_err(|reason| skip(&reason)).ok()
    }
}

/// One chromedriver and one browser session, ended when dropped.
pub struct Browser {
    driver: Child,
    client: reqwest::Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start(tools: &BrowserTools) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut driver = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Ready once it says so (its first line), not after a guessed delay.
        let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("started successfully") {
                break;
            }
        }
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = FLAGS.iter().map(|flag| flag.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push("--window-size=1000,900".into());
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": tools.chromium, "args": args},
        }}});
        // reqwest is built without a default TLS provider; plain HTTP still asks for one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let answer = call(
            &client,
            reqwest::Method::POST,
            &format!("{base}/session"),
            &capabilities,
        )
        .await;
        let session = answer["sessionId"].as_str().unwrap().to_string();
        Browser {
            driver,
            client,
            session: format!("{base}/session/{session}"),
            _profile: profile,
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let url = format!("{}/{path}", self.session);
        call(&self.client, reqwest::Method::POST, &url, &body).await
    }

    pub async fn open(&self, file: &Path) {
        let url = format!("file://{}", file.display());
        self.post("url", json!({ "url": url })).await;
    }

    /// Runs `script` (a function body) in the page and returns what it returns.
    pub async fn script(&self, script: &str) -> Value {
        self.post("execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// Clicks the first element `css` selects, as a user would (WebDriver's element click).
    pub async fn click(&self, css: &str) {
        let found = self
            .post("element", json!({"using": "css selector", "value": css}))
            .await;
        let id = found[ELEMENT].as_str().unwrap().to_string();
        self.post(&format!("element/{id}/click"), json!({})).await;
    }

    /// The page as the browser drew it: PNG bytes.
    pub async fn screenshot(&self) -> Vec<u8> {
        let url = format!("{}/screenshot", self.session);
        let answer = call(&self.client, reqwest::Method::GET, &url, &Value::Null).await;
        base64_decode(answer.as_str().unwrap())
    }

    pub async fn quit(mut self) {
        let url = self.session.clone();
        call(&self.client, reqwest::Method::DELETE, &url, &Value::Null).await;
        let _ = self.driver.kill().await;
    }
}

/// One WebDriver command; returns its `value`, panicking with the driver's error.
async fn call(client: &reqwest::Client, method: reqwest::Method, url: &str, body: &Value) -> Value {
    let mut request = client.request(method.clone(), url);
    if !body.is_null() {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let answer: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert!(status.is_success(), "{method} {url}: {status} {answer}");
    answer["value"].clone()
}

/// Standard base64 (RFC 4648, with padding), as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |byte: u8| -> u32 {
        match byte {
            b'A'..=b'Z' => u32::from(byte - b'A'),
            b'a'..=b'z' => u32::from(byte - b'a') + 26,
            b'0'..=b'9' => u32::from(byte - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not base64: {other}"),
        }
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.trim_end_matches('=').as_bytes().chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |bits, (i, byte)| bits | value(*byte) << (18 - 6 * i));
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_decodes_padded_and_unpadded_ends() {
    assert_eq!(base64_decode("TWFu"), b"Man");
    assert_eq!(base64_decode("TWE="), b"Ma");
    assert_eq!(base64_decode("TQ=="), b"M");
}
