//! LiteLLM's proxy (from PyPI) as a real gateway: tollgate → `litellm` on 127.0.0.1, its
//! config pointing at the fake model server → the fake server. One proxy, started and
//! stopped here, serves both of its routes: Chat Completions (`/v1/chat/completions`, the
//! openai provider) and Anthropic's Messages (`/v1/messages`, the anthropic provider), the
//! latter both to an Anthropic backend and translated to an OpenAI one. Each run must make
//! its tool call through the proxy and finish.
//!
//! The proxy is found at `TOLLGATE_LITELLM` (what .ci/run sets, a virtualenv of its own),
//! else as `litellm` on PATH; without either the test is skipped, loudly.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::providers::{KEY, done_turn, read_turn, run_task_with};
use crate::support::Finished;
use crate::support::fake_model::{Api, FakeModel};
use crate::support::skip;

/// The key tollgate gives the proxy (its `master_key`); the proxy gives the fake server
/// [`KEY`].
const MASTER_KEY: &str = "sk-litellm-master-7d41";

fn litellm() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOLLGATE_LITELLM").map(PathBuf::from)
        && path.is_file()
    {
        return Some(path);
    }
    skip::need_program(
        "litellm",
        "pip install 'litellm[proxy]', or set TOLLGATE_LITELLM to its `litellm`; .ci/run installs it",
    )
}

/// The proxy's process, stopped (by its own id) when the test ends, however it ends.
struct Proxy {
    child: Child,
    port: u16,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the proxy with a config routing three model names to the fake server, and waits
/// until it answers its liveliness probe.
async fn start_proxy(program: &PathBuf, server: &FakeModel) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "model_list:
  - model_name: gpt-4.1
    litellm_params:
      model: openai/gpt-4.1
      api_base: {openai}
      api_key: {KEY}
  - model_name: claude-sonnet-4-5
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: {anthropic}
      api_key: {KEY}
  - model_name: claude-on-openai
    litellm_params:
      model: openai/gpt-4.1
      api_base: {openai}
      api_key: {KEY}
general_settings:
  master_key: {MASTER_KEY}
litellm_settings:
  telemetry: false
  # Its /v1/messages sends an OpenAI backend the Responses API unless told otherwise; the
  # fake server, as most OpenAI-compatible servers, has only Chat Completions.
  use_chat_completions_url_for_anthropic_messages: true
",
        openai = server.base_url(Api::OpenAi),
        anthropic = server.base_url(Api::Anthropic),
    );
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, config).unwrap();
    let log = dir.path().join("litellm.log");
    let port = free_port();
    let child = Command::new(program)
        .args(["--config"])
        .arg(&config_path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .current_dir(dir.path())
        // Offline: the bundled price map, no telemetry, no proxy between it and 127.0.0.1.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_TELEMETRY", "False")
        .env("LITELLM_LOG", "ERROR")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("DATABASE_URL")
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.path().join("litellm.err")).unwrap())
        .spawn()
        .unwrap();
    let mut proxy = Proxy {
        child,
        port,
        log,
        dir,
    };
    tollgate::model::install_crypto_provider();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let probe = format!("http://127.0.0.1:{port}/health/liveliness");
    loop {
        if let Ok(response) = client.get(&probe).send().await
            && response.status().is_success()
        {
            return proxy;
        }
        if let Some(status) = proxy.child.try_wait().unwrap() {
            let err = std::fs::read_to_string(proxy.dir.path().join("litellm.err"));
            panic!(
                "litellm exited with {status} before it served: {}\n{}",
                proxy.log(),
                err.unwrap_or_default()
            );
        }
        // Its imports alone take 10 s on a busy 2-core machine.
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "litellm did not serve within 180 s: {}",
            proxy.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn through_proxy(proxy: &Proxy, provider: &str, name: &str, base: &str) -> Finished {
    let model = format!(
        "model:\n  provider: {provider}\n  name: {name}\n  max_tokens: 1000\n  base_url: http://127.0.0.1:{}{base}\n  api_key_env: PROXY_KEY\n  pricing: {{input: 0, output: 0}}\n  timeouts: {{connect: 5, first_event: 60, idle: 60, request: 120}}\n  retries: {{max: 0}}\n",
        proxy.port
    );
    run_task_with(
        "mode: dontAsk\ntools: [Read, Glob, Grep]\n",
        &model,
        "limits: {max_turns: 6}\n",
        &[("PROXY_KEY", MASTER_KEY)],
        &[],
    )
    .await
}

fn assert_read_and_finished(run: &Finished, proxy: &Proxy) {
    assert_eq!(run.code, 0, "{}\nproxy: {}", run.stderr, proxy.log());
    assert_eq!(run.finished()["outcome"], "success");
    assert_eq!(run.result("Read", 0)["status"], "success");
    assert!(run.result_text("Read", 0).contains("the build is green"));
    run.assert_every_tool_use_answered_once();
}

/// The conversation the fake server saw last holds the tool result: the call went through
/// the proxy and its answer came back.
fn last_request_answers_the_call(body: &Value) -> bool {
    body["messages"].to_string().contains("the build is green")
}

#[tokio::test]
async fn litellm_proxy_carries_both_routes_to_a_tool_call_and_the_end() {
    let Some(program) = litellm() else {
        return;
    };
    let server = FakeModel::start(
        KEY,
        vec![
            read_turn(),
            done_turn(),
            read_turn(),
            done_turn(),
            read_turn(),
            done_turn(),
        ],
    )
    .await;
    let proxy = start_proxy(&program, &server).await;

    // Chat Completions through the proxy to an OpenAI backend.
    let run = through_proxy(&proxy, "openai", "gpt-4.1", "/v1").await;
    assert_read_and_finished(&run, &proxy);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{}", proxy.log());
    assert!(requests.iter().all(|r| r.api == Api::OpenAi));
    assert_eq!(requests[0].body["tool_choice"], "auto");
    assert_eq!(requests[0].body["stream"], true);
    assert!(last_request_answers_the_call(&requests[1].body));
    // The proxy passed the usage through: counted, not estimated.
    assert!(
        run.of_type("assistant_message")[0]
            .get("usage_source")
            .is_none()
    );
    assert!(run.of_type("streaming_off").is_empty());

    // Anthropic's Messages through the proxy to an Anthropic backend.
    let run = through_proxy(&proxy, "anthropic", "claude-sonnet-4-5", "").await;
    assert_read_and_finished(&run, &proxy);
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{}", proxy.log());
    assert!(requests[2..].iter().all(|r| r.api == Api::Anthropic));
    assert!(last_request_answers_the_call(&requests[3].body));

    // Anthropic's Messages through the proxy, translated to an OpenAI backend.
    let run = through_proxy(&proxy, "anthropic", "claude-on-openai", "").await;
    assert_read_and_finished(&run, &proxy);
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "{}", proxy.log());
    assert!(requests[4..].iter().all(|r| r.api == Api::OpenAi));
    assert!(last_request_answers_the_call(&requests[5].body));

    assert_eq!(server.violations(), Vec::<String>::new());
}
