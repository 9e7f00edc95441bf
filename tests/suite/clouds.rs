//! Anthropic models on Amazon Bedrock end to end: the tollgate binary against a fake that
//! checks what AWS checks (crates/test-support/aws_fake.py: the SigV4 signature recomputed by
//! botocore, the scope, the session token, the clock), with credentials from the
//! environment, a profile, a web-identity token file through STS, and a GitHub Actions OIDC
//! token through STS — and none of the secrets in anything the run wrote.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::suite::providers::visit;
use crate::support::{Finished, Run};

const MODEL: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const KEY_ID: &str = "AKIDTOLLGATETEST0001";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYsecret-never-print";
const SESSION: &str = "IQoJb3JpZ2luX2VjEsession-token-never-print";
const ROLE: &str = "arn:aws:iam::123456789012:role/tollgate-ci";

/// The fake, running; killed when dropped.
struct AwsFake {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl AwsFake {
    /// `None` (the test skipped, loudly) when python3 with botocore is missing.
    fn start(config: Value) -> Option<AwsFake> {
        let found = Command::new("python3")
            .args(["-c", "import botocore"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            crate::support::skip::skip(
                "python3 with botocore is missing (pip install botocore; .ci/run installs it)",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.jsonl");
        let mut config = config;
        config["log"] = json!(log);
        let file = dir.path().join("config.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let script = crate::support::aws_fake_script();
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        Some(AwsFake {
            child,
            port,
            log,
            _dir: dir,
        })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request the fake saw, in order.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|entry| entry["kind"] == kind)
            .collect()
    }
}

impl Drop for AwsFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two Messages API answers: a Read call, then the summary.
fn replies() -> Value {
    json!([
        {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
         "content": [{"type": "text", "text": "Reading."},
                     {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "notes.txt"}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 120, "output_tokens": 20}},
        {"id": "msg_2", "type": "message", "role": "assistant", "model": MODEL,
         "content": [{"type": "text", "text": "The build is green."}],
         "stop_reason": "end_turn", "usage": {"input_tokens": 160, "output_tokens": 8}}
    ])
}

fn config(keys: Value) -> Value {
    json!({"region": "us-east-1", "keys": keys, "replies": replies()})
}

/// Every AWS or GitHub variable a developer's or runner's environment might carry, empty,
/// so only the test's own reach the run.
const CLEARED: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
];

/// A Bedrock task against `fake` (`extra`: more of the model block), run with `env`.
async fn run_bedrock(fake: &AwsFake, extra: &str, env: &[(&str, &str)]) -> Finished {
    let mut run = Run::new()
        .file("ws/notes.txt", "the build is green\n")
        .task(&format!(
            "version: 1\nname: bedrock\nprompt: Read notes.txt and summarise it.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, Grep]\nmodel:\n  provider: anthropic\n  platform: bedrock\n  name: \"{MODEL}\"\n  max_tokens: 1000\n  base_url: {}\n  pricing: {{input: 3, output: 15}}\n  timeouts: {{connect: 2, first_event: 5, idle: 2, request: 10}}\n  retries: {{max: 2, base_delay: 0.005, max_delay: 0.02}}\n{extra}",
            fake.url()
        ))
        .env("RUST_LOG", "trace");
    for name in CLEARED {
        run = run.env(name, "");
    }
    run.envs(env).finish_async().await
}

/// A run that must end with `code` and say `needle` on stderr.
async fn run_failing(
    fake: &AwsFake,
    extra: &str,
    env: &[(&str, &str)],
    code: i32,
    needle: &str,
) -> Finished {
    let run = run_bedrock(fake, extra, env).await;
    assert_eq!(run.code, code, "{}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "expected {needle:?} in {}",
        run.stderr
    );
    run
}

/// None of `secrets` in the run's stdout, stderr (trace level) or any file it wrote.
pub(crate) fn assert_absent(run: &Finished, secrets: &[&str]) {
    for secret in secrets {
        assert!(!run.stdout.contains(secret), "stdout has {secret}");
        assert!(!run.stderr.contains(secret), "stderr has {secret}");
        visit(&run.out, &mut |path| {
            let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
            assert!(!text.contains(secret), "{} has {secret}", path.display());
        });
    }
}

/// The run ended well, after two signed requests the fake accepted.
fn assert_two_signed_turns(run: &Finished, fake: &AwsFake, key_id: &str) {
    assert_eq!(run.code, 0, "{}\n{:?}", run.stderr, fake.log());
    let requests = fake.of_kind("bedrock");
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        assert!(request.get("refused").is_none(), "{request}");
        // The model id's `:` is escaped in the path, and signed as escaped.
        assert_eq!(
            request["path"],
            "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
        );
        let authorization = request["headers"]["authorization"].as_str().unwrap();
        assert!(
            authorization.starts_with(&format!("AWS4-HMAC-SHA256 Credential={key_id}/")),
            "{authorization}"
        );
        assert_eq!(request["body"]["anthropic_version"], "bedrock-2023-05-31");
        assert!(request["headers"].get("x-api-key").is_none());
    }
    let last = requests[1]["body"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["content"][0]["type"], "tool_result");
    let events = run.events();
    let finished = events.iter().find(|e| e["type"] == "run_finished").unwrap();
    assert_eq!(finished["outcome"], "success", "{finished}");
    assert!(run.stdout.contains("The build is green."), "{}", run.stdout);
}

#[tokio::test]
async fn bedrock_requests_signed_with_environment_keys_pass_botocores_check() {
    let Some(fake) = AwsFake::start(config(json!({KEY_ID: [SECRET, SESSION]}))) else {
        return;
    };
    let run = run_bedrock(
        &fake,
        "  region: us-east-1\n",
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", SESSION),
        ],
    )
    .await;
    assert_two_signed_turns(&run, &fake, KEY_ID);
    let first = &fake.of_kind("bedrock")[0];
    assert_eq!(first["headers"]["x-amz-security-token"], SESSION);
    assert!(first["body"].get("model").is_none() && first["body"].get("stream").is_none());
    let events = run.events();
    let message = events
        .iter()
        .find(|e| e["type"] == "assistant_message")
        .unwrap();
    assert_eq!(message["usage"]["input_tokens"], 120, "{message}");
    assert_absent(&run, &[SECRET, SESSION]);
}

#[tokio::test]
async fn a_wrong_secret_is_refused_by_the_signature_check_and_not_retried() {
    let Some(fake) = AwsFake::start(config(json!({KEY_ID: [SECRET, null]}))) else {
        return;
    };
    // The region from the environment, as the AWS SDKs read it.
    let run = run_bedrock(
        &fake,
        "",
        &[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", "not-the-secret-at-all-0000000000"),
        ],
    )
    .await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("HTTP 403")
            && run
                .stderr
                .contains("signature we calculated does not match"),
        "{}",
        run.stderr
    );
    let requests = fake.of_kind("bedrock");
    assert_eq!(requests.len(), 1, "a refused signature is not retried");
    assert_eq!(requests[0]["refused"], "InvalidSignatureException");
    // Another region in the scope is refused as AWS refuses it.
    let keys = [
        ("AWS_ACCESS_KEY_ID", KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
    ];
    let needle = "scoped to a valid region";
    run_failing(&fake, "  region: eu-west-1\n", &keys, 4, needle).await;
}

#[tokio::test]
async fn bedrock_keys_from_a_profile_in_the_shared_credentials_file() {
    let Some(fake) = AwsFake::start(config(json!({KEY_ID: [SECRET, null]}))) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials");
    std::fs::write(
        &file,
        format!("[default]\naws_access_key_id = AKIDWRONGDEFAULT\naws_secret_access_key = x\n\n[ci]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"),
    )
    .unwrap();
    let run = run_bedrock(
        &fake,
        "  region: us-east-1\n",
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", file.to_str().unwrap()),
            ("AWS_PROFILE", "ci"),
        ],
    )
    .await;
    assert_two_signed_turns(&run, &fake, KEY_ID);
    assert!(
        fake.of_kind("bedrock")[0]["headers"]
            .get("x-amz-security-token")
            .is_none()
    );
    assert_absent(&run, &[SECRET]);
}

/// STS's side: the role, the token it must be given, and the keys it issues.
fn sts(web_token: &str) -> Value {
    json!({"role_arn": ROLE, "web_token": web_token,
           "issue": ["ASIATOLLGATEISSUED01", "issued/secret+never-print-0001", "issued-session-token-never-print"]})
}

#[tokio::test]
async fn bedrock_keys_from_a_web_identity_token_file_through_sts() {
    let token = "eyJhbGciOiJSUzI1NiJ9.web-identity-token-never-print.sig";
    let mut config = config(json!({}));
    config["sts"] = sts(token);
    let Some(fake) = AwsFake::start(config) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let url = fake.url();
    let run = run_bedrock(
        &fake,
        "  region: us-east-1\n",
        &[
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", file.to_str().unwrap()),
            ("AWS_ENDPOINT_URL_STS", &url),
        ],
    )
    .await;
    assert_two_signed_turns(&run, &fake, "ASIATOLLGATEISSUED01");
    let exchanges = fake.of_kind("sts");
    assert_eq!(exchanges.len(), 1, "the keys are kept for both requests");
    assert_eq!(exchanges[0]["form"]["RoleArn"], ROLE);
    assert_eq!(exchanges[0]["form"]["RoleSessionName"], "tollgate");
    assert_eq!(
        fake.of_kind("bedrock")[0]["headers"]["x-amz-security-token"],
        "issued-session-token-never-print"
    );
    assert_absent(
        &run,
        &[
            token,
            "issued/secret+never-print-0001",
            "issued-session-token-never-print",
        ],
    );
}

#[tokio::test]
async fn bedrock_keys_from_the_github_jobs_oidc_token_through_sts() {
    let request_token = "ghs_request-token-never-print-000000";
    let oidc = "eyJhbGciOiJSUzI1NiJ9.github-oidc-never-print";
    let mut config = config(json!({}));
    // The fake's OIDC endpoint appends the audience it was asked for, so STS only accepts
    // a token minted for `sts.amazonaws.com`.
    config["sts"] = sts(&format!("{oidc}.sts.amazonaws.com"));
    config["oidc"] = json!({"request_token": request_token, "token": oidc});
    let Some(fake) = AwsFake::start(config) else {
        return;
    };
    let url = fake.url();
    let request_url = format!("{url}/oidc?api-version=2.0");
    let run = run_bedrock(
        &fake,
        "  region: us-east-1\n",
        &[
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_ENDPOINT_URL_STS", &url),
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &request_url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", request_token),
        ],
    )
    .await;
    assert_two_signed_turns(&run, &fake, "ASIATOLLGATEISSUED01");
    let asked = fake.of_kind("oidc");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["query"]["audience"], "sts.amazonaws.com");
    assert_eq!(asked[0]["query"]["api-version"], "2.0");
    assert!(asked[0].get("refused").is_none());
    assert_absent(
        &run,
        &[
            request_token,
            oidc,
            "issued/secret+never-print-0001",
            "issued-session-token-never-print",
        ],
    );
}

#[tokio::test]
async fn a_role_sts_refuses_ends_the_run_with_stss_reason() {
    let mut config = config(json!({}));
    config["sts"] = sts("the-right-token");
    let Some(fake) = AwsFake::start(config) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "a-wrong-token").unwrap();
    let url = fake.url();
    let run = run_bedrock(
        &fake,
        "  region: us-east-1\n",
        &[
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", file.to_str().unwrap()),
            ("AWS_ENDPOINT_URL_STS", &url),
        ],
    )
    .await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("InvalidIdentityToken"),
        "{}",
        run.stderr
    );
    assert!(
        fake.of_kind("bedrock").is_empty(),
        "nothing unsigned was sent"
    );
    assert_eq!(fake.of_kind("sts").len(), 1, "a refusal is not retried");
}

#[tokio::test]
async fn bedrock_without_credentials_or_region_stops_before_any_request() {
    let Some(fake) = AwsFake::start(config(json!({}))) else {
        return;
    };
    let keys = [
        ("AWS_ACCESS_KEY_ID", KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
    ];
    let region = "  region: us-east-1\n";
    run_failing(&fake, region, &[], 2, "bedrock: no AWS credentials").await;
    let needle = "platform bedrock needs a region: set model.region or AWS_REGION";
    run_failing(&fake, "", &keys, 2, needle).await;
    // The platform is the anthropic provider's, and takes no API key variable.
    run_failing(
        &fake,
        "  api_key_env: SOME_KEY\n",
        &[],
        2,
        "drop api_key_env",
    )
    .await;
    assert!(fake.log().is_empty(), "{:?}", fake.log());
}
