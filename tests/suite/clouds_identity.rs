//! Anthropic models on Google Vertex AI and on Microsoft Foundry, and OpenAI models on Azure
//! OpenAI, end to end: the tollgate binary gets its bearer token from token endpoints that
//! check what Google's and Microsoft's check (crates/test-support/src/identity_fake.rs: a
//! service account's RS256 assertion against its public key and claims, STS's subject token and
//! types, impersonation with STS's token, Entra's client secret or federated assertion), and
//! the model endpoint (crates/test-support/src/fake_model.rs, bearer mode) answers only that
//! token. None of the secrets may appear in anything the run wrote.

use serde_json::{Value, json};

use crate::suite::clouds::assert_absent;
use crate::support::fake_model::{Api, FakeModel, Reply, reply, text, tool};
use crate::support::identity_fake::{
    ENTRA_AUDIENCE, Expect, ISSUER_KEY, IdentityFake, SERVICE_ACCOUNT_KEY, issuer_token,
};
use crate::support::{Finished, Run};

const ACCESS: &str = "ya29.access-token-never-print-0001";
const STS: &str = "sts-federated-token-never-print-0002";
const SA: &str = "tollgate-ci@my-project.iam.gserviceaccount.com";
const PROVIDER: &str =
    "projects/123456789/locations/global/workloadIdentityPools/ci/providers/github";
const VERTEX_MODEL: &str = "claude-sonnet-4-5@20250929";
const REQUEST_TOKEN: &str = "ghs_request-token-never-print-000000";
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT: &str = "0c5ff4d8-3f0b-4b4e-9b38-4a1c2d3e4f50";
const CLIENT_SECRET: &str = "entra~client-secret-never-print-0003";
const FOUNDRY_SCOPE: &str = "https://ai.azure.com/.default";
const COGNITIVE_SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// A Read call, then the summary.
fn replies() -> Vec<Reply> {
    vec![
        reply(vec![
            text("Reading."),
            tool("Read", json!({"file_path": "notes.txt"})),
        ]),
        reply(vec![text("The build is green.")]),
    ]
}

/// Every Google, Azure or GitHub variable a developer's or runner's environment might carry,
/// empty, so only the test's own reach the run.
const CLEARED: &[&str] = &[
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GCP_WORKLOAD_IDENTITY_PROVIDER",
    "GCP_SERVICE_ACCOUNT",
    "CLOUDSDK_CONFIG",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_CLOUD_PROJECT",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_FOUNDRY_BASE_URL",
    "TOLLGATE_GOOGLE_STS_URL",
    "TOLLGATE_GOOGLE_IAM_CREDENTIALS_URL",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_AUTHORITY_HOST",
    "AZURE_TOKEN_SCOPE",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
];

/// A task whose model block is `model` (its provider, platform, name, base URL…), run with
/// `env` and an empty home directory.
async fn run_task(model: &str, env: &[(&str, &str)]) -> Finished {
    let home = tempfile::tempdir().unwrap();
    let mut run = Run::new()
        .file("ws/notes.txt", "the build is green\n")
        .task(&format!(
            "version: 1\nname: cloud\nprompt: Read notes.txt and summarise it.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob, Grep]\nmodel:\n  max_tokens: 1000\n  pricing: {{input: 3, output: 15}}\n  timeouts: {{connect: 2, first_event: 5, idle: 2, request: 10}}\n  retries: {{max: 2, base_delay: 0.005, max_delay: 0.02}}\n{model}"
        ))
        .env("RUST_LOG", "trace")
        .env("HOME", home.path());
    for name in CLEARED {
        run = run.env(name, "");
    }
    run.envs(env).finish_async().await
}

fn vertex_block(model: &FakeModel, extra: &str) -> String {
    format!(
        "  provider: anthropic\n  platform: vertex\n  name: \"{VERTEX_MODEL}\"\n  base_url: {}\n{extra}",
        model.base_url(Api::Anthropic)
    )
}

const LOCATED: &str = "  region: us-east5\n  project: my-project\n";
const VERTEX_PATH: &str = "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict";

/// The run ended well after two requests the model endpoint accepted at `path`.
fn assert_two_turns(run: &Finished, model: &FakeModel, path: &str) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, path);
    }
    let finished = run
        .events()
        .iter()
        .find(|e| e["type"] == "run_finished")
        .cloned()
        .unwrap();
    assert_eq!(finished["outcome"], "success", "{finished}");
    assert!(run.stdout.contains("The build is green."), "{}", run.stdout);
}

/// Every request of `kind` the fake saw was accepted; how many there were.
fn accepted(fake: &IdentityFake, kind: &str) -> usize {
    let entries = fake.of_kind(kind);
    for entry in &entries {
        assert!(entry.get("refused").is_none(), "{entry}");
    }
    entries.len()
}

fn write_json(dir: &tempfile::TempDir, name: &str, value: &Value) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.display().to_string()
}

fn service_account_file(dir: &tempfile::TempDir, fake: &IdentityFake, key: &str) -> String {
    write_json(
        dir,
        "sa.json",
        &json!({"type": "service_account", "project_id": "my-project", "private_key_id": "k1",
                "private_key": key, "client_email": SA, "client_id": "1",
                "token_uri": format!("{}/token", fake.url())}),
    )
}

/// A line from the middle of the service account's key, as a tool reading the file would
/// show it.
fn key_line() -> &'static str {
    SERVICE_ACCOUNT_KEY.lines().nth(5).unwrap()
}

#[tokio::test]
async fn vertex_with_a_service_account_key_passes_the_assertion_check_and_keeps_its_token() {
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        expires_in: 3600,
        service_account: SA.into(),
        ..Expect::default()
    })
    .await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = service_account_file(&dir, &fake, SERVICE_ACCOUNT_KEY);
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[("GOOGLE_APPLICATION_CREDENTIALS", &file)],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    assert_eq!(
        accepted(&fake, "google_token"),
        1,
        "one token for both requests"
    );
    let first = &model.requests()[0];
    assert_eq!(first.body["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(first.body["stream"], true);
    assert!(first.headers.get("anthropic-version").is_none());
    assert_absent(&run, &[ACCESS, key_line()]);
}

#[tokio::test]
async fn a_short_lived_vertex_token_is_renewed_and_a_key_not_the_accounts_is_refused() {
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        // Inside the five minutes before expiry: every request needs a new one.
        expires_in: 120,
        service_account: SA.into(),
        ..Expect::default()
    })
    .await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = service_account_file(&dir, &fake, SERVICE_ACCOUNT_KEY);
    // Region and project from the variables Claude Code reads.
    let run = run_task(
        &vertex_block(&model, ""),
        &[
            ("GOOGLE_APPLICATION_CREDENTIALS", &file),
            ("CLOUD_ML_REGION", "us-east5"),
            ("ANTHROPIC_VERTEX_PROJECT_ID", "my-project"),
        ],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    assert_eq!(accepted(&fake, "google_token"), 2);

    let wrong = service_account_file(&dir, &fake, ISSUER_KEY);
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[("GOOGLE_APPLICATION_CREDENTIALS", &wrong)],
    )
    .await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("invalid_grant: Invalid JWT Signature."),
        "{}",
        run.stderr
    );
    let refused = fake.of_kind("google_token");
    assert_eq!(refused.len(), 3, "a refusal is not retried: {refused:?}");
    assert!(refused[2].get("refused").is_some());
    assert_eq!(
        model.requests().len(),
        2,
        "nothing was sent without a token"
    );
}

/// An `external_account` file's subject token: a JWT of the fake issuer for the provider.
fn subject_token() -> String {
    issuer_token(
        &format!("https://iam.googleapis.com/{PROVIDER}"),
        "system:serviceaccount:ci:runner",
        600,
    )
}

#[tokio::test]
async fn vertex_through_workload_identity_federation_from_a_token_file_and_impersonation() {
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        expires_in: 3600,
        provider: PROVIDER.into(),
        sts_token: STS.into(),
        impersonate: Some(SA.into()),
        ..Expect::default()
    })
    .await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let subject = subject_token();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{subject}\n")).unwrap();
    let file = write_json(
        &dir,
        "wif.json",
        &json!({"type": "external_account",
                "audience": format!("//iam.googleapis.com/{PROVIDER}"),
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": format!("{}/v1/token", fake.url()),
                "service_account_impersonation_url": format!("{}/v1/projects/-/serviceAccounts/{SA}:generateAccessToken", fake.url()),
                "credential_source": {"file": token_file}}),
    );
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[("GOOGLE_APPLICATION_CREDENTIALS", &file)],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    assert_eq!(accepted(&fake, "sts"), 1);
    assert_eq!(accepted(&fake, "impersonate"), 1);
    assert_eq!(
        fake.of_kind("impersonate")[0]["authorization"],
        format!("Bearer {STS}")
    );
    assert_absent(&run, &[&subject, STS, ACCESS]);
}

#[tokio::test]
async fn vertex_from_a_credential_source_url_as_google_github_actions_auth_writes_it() {
    let fake = IdentityFake::start(Expect {
        expires_in: 3600,
        provider: PROVIDER.into(),
        sts_token: STS.into(),
        request_token: REQUEST_TOKEN.into(),
        ..Expect::default()
    })
    .await;
    // No impersonation: the federated token itself is the bearer (direct resource access).
    let model = FakeModel::start_bearer(STS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = write_json(
        &dir,
        "wif.json",
        &json!({"type": "external_account",
                "audience": format!("//iam.googleapis.com/{PROVIDER}"),
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": format!("{}/v1/token", fake.url()),
                "credential_source": {
                    "url": format!("{}/oidc?api-version=2.0&audience=https://iam.googleapis.com/{PROVIDER}", fake.url()),
                    "headers": {"Authorization": format!("Bearer {REQUEST_TOKEN}")},
                    "format": {"type": "json", "subject_token_field_name": "value"}}}),
    );
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[("GOOGLE_APPLICATION_CREDENTIALS", &file)],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    assert_eq!(accepted(&fake, "oidc"), 1);
    assert_eq!(accepted(&fake, "sts"), 1);
    let oidc = fake.of_kind("oidc")[0]["issued"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_absent(&run, &[REQUEST_TOKEN, &oidc, STS]);
}

#[tokio::test]
async fn vertex_from_the_github_jobs_oidc_token_through_sts_with_no_file() {
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        expires_in: 3600,
        provider: PROVIDER.into(),
        sts_token: STS.into(),
        impersonate: Some(SA.into()),
        request_token: REQUEST_TOKEN.into(),
        ..Expect::default()
    })
    .await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let url = fake.url();
    let request_url = format!("{url}/oidc?api-version=2.0");
    let sts_url = format!("{url}/v1/token");
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[
            ("GCP_WORKLOAD_IDENTITY_PROVIDER", PROVIDER),
            ("GCP_SERVICE_ACCOUNT", SA),
            ("TOLLGATE_GOOGLE_STS_URL", &sts_url),
            ("TOLLGATE_GOOGLE_IAM_CREDENTIALS_URL", &url),
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &request_url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN),
        ],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    let asked = fake.of_kind("oidc");
    assert_eq!(accepted(&fake, "oidc"), 1);
    assert_eq!(
        asked[0]["query"]["audience"],
        format!("https://iam.googleapis.com/{PROVIDER}")
    );
    assert_eq!(asked[0]["query"]["api-version"], "2.0");
    assert_eq!(accepted(&fake, "sts"), 1);
    assert_eq!(accepted(&fake, "impersonate"), 1);
    let oidc = asked[0]["issued"]["value"].as_str().unwrap().to_string();
    assert_absent(&run, &[REQUEST_TOKEN, &oidc, STS, ACCESS]);
}

/// A run that must end with exit 2, saying `needle`, before any request.
async fn refused_setup(model: &str, env: &[(&str, &str)], needle: &str) {
    let run = run_task(model, env).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "expected {needle:?} in {}",
        run.stderr
    );
}

#[tokio::test]
async fn vertex_and_azure_without_what_they_need_stop_before_any_request() {
    let fake = IdentityFake::start(Expect::default()).await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = service_account_file(&dir, &fake, SERVICE_ACCOUNT_KEY);
    let credentials = [("GOOGLE_APPLICATION_CREDENTIALS", file.as_str())];
    let block = vertex_block(&model, "  region: us-east5\n");
    refused_setup(&block, &credentials, "platform vertex needs a project").await;
    let block = vertex_block(&model, "  project: my-project\n");
    let needle = "platform vertex needs a region: set model.region or CLOUD_ML_REGION";
    refused_setup(&block, &credentials, needle).await;
    let block = vertex_block(&model, LOCATED);
    refused_setup(&block, &[], "vertex: no Google credentials").await;
    let missing = [("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/sa.json")];
    // (The path itself is masked: the redactor takes any `*_CREDENTIALS` variable for a secret.)
    refused_setup(&block, &missing, "vertex: cannot read the credentials file").await;
    // Configuration errors, at their line and column in the task.
    let block = format!(
        "  provider: anthropic\n  name: claude-sonnet-4-5\n  base_url: {}\n  api_key_env: SOME_KEY\n  project: my-project\n",
        model.base_url(Api::Anthropic)
    );
    refused_setup(&block, &[], ".yaml:16:12: project is Vertex AI's").await;
    let block = "  provider: openai\n  platform: vertex\n  name: gpt-4.1\n  region: us-east5\n";
    let needle = ".yaml:13:13: platform vertex serves the anthropic provider's models, not openai";
    refused_setup(block, &[], needle).await;
    let block = "  provider: anthropic\n  platform: azure\n  name: claude-sonnet-4-5\n";
    refused_setup(block, &[], "platform azure needs model.base_url").await;
    let block = format!(
        "  provider: anthropic\n  platform: azure\n  name: claude-sonnet-4-5\n  base_url: {}\n",
        model.base_url(Api::Anthropic)
    );
    refused_setup(&block, &[], "azure: no Microsoft Entra credentials").await;
    assert!(fake.log().is_empty(), "{:?}", fake.log());
    assert!(model.requests().is_empty());
}

fn entra(scope: &str, secret: Option<&str>, expires_in: u64) -> Expect {
    Expect {
        access_token: ACCESS.into(),
        expires_in,
        request_token: REQUEST_TOKEN.into(),
        tenant: TENANT.into(),
        client_id: CLIENT.into(),
        scope: scope.into(),
        client_secret: secret.map(str::to_string),
        ..Expect::default()
    }
}

fn foundry_block(model: &FakeModel) -> String {
    format!(
        "  provider: anthropic\n  platform: azure\n  name: claude-sonnet-4-5\n  base_url: {}/anthropic\n",
        model.base_url(Api::Anthropic)
    )
}

#[tokio::test]
async fn foundry_with_an_entra_client_secret_and_a_wrong_secret_refused() {
    let fake = IdentityFake::start(entra(FOUNDRY_SCOPE, Some(CLIENT_SECRET), 3600)).await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let url = fake.url();
    let env = |secret| {
        vec![
            ("AZURE_TENANT_ID", TENANT),
            ("AZURE_CLIENT_ID", CLIENT),
            ("AZURE_CLIENT_SECRET", secret),
            ("AZURE_AUTHORITY_HOST", url.as_str()),
        ]
    };
    let run = run_task(&foundry_block(&model), &env(CLIENT_SECRET)).await;
    assert_two_turns(&run, &model, "/anthropic/v1/messages");
    assert_eq!(accepted(&fake, "entra"), 1);
    assert_eq!(fake.of_kind("entra")[0]["form"]["scope"], FOUNDRY_SCOPE);
    let first = &model.requests()[0];
    assert_eq!(first.body["model"], "claude-sonnet-4-5");
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    assert_absent(&run, &[CLIENT_SECRET, ACCESS]);

    let run = run_task(&foundry_block(&model), &env("not-the-secret-0000000000")).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("AADSTS7000215"), "{}", run.stderr);
    assert_eq!(fake.of_kind("entra").len(), 2, "a refusal is not retried");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn azure_openai_with_the_github_jobs_oidc_token_as_a_federated_credential() {
    let fake = IdentityFake::start(entra(COGNITIVE_SCOPE, None, 3600)).await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let url = fake.url();
    let request_url = format!("{url}/oidc?api-version=2.0");
    let block = format!(
        "  provider: openai\n  platform: azure\n  name: my-gpt-deployment\n  base_url: {}/openai/v1\n",
        model.base_url(Api::Anthropic)
    );
    let run = run_task(
        &block,
        &[
            ("AZURE_TENANT_ID", TENANT),
            ("AZURE_CLIENT_ID", CLIENT),
            ("AZURE_AUTHORITY_HOST", &url),
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &request_url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN),
        ],
    )
    .await;
    assert_two_turns(&run, &model, "/openai/v1/chat/completions");
    let asked = fake.of_kind("oidc");
    assert_eq!(accepted(&fake, "oidc"), 1);
    assert_eq!(asked[0]["query"]["audience"], ENTRA_AUDIENCE);
    assert_eq!(accepted(&fake, "entra"), 1);
    let form = &fake.of_kind("entra")[0]["form"];
    assert_eq!(form["scope"], COGNITIVE_SCOPE);
    assert!(form.get("client_secret").is_none());
    assert_eq!(model.requests()[0].body["model"], "my-gpt-deployment");
    let oidc = asked[0]["issued"]["value"].as_str().unwrap().to_string();
    assert_absent(&run, &[REQUEST_TOKEN, &oidc, ACCESS]);
}

#[tokio::test]
async fn a_federated_token_file_for_another_audience_is_refused_and_the_right_one_renewed() {
    // Short-lived: each of the two requests needs its own token.
    let fake = IdentityFake::start(entra(FOUNDRY_SCOPE, None, 120)).await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("azure-identity-token");
    let url = fake.url();
    let path = file.display().to_string();
    let env = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_FEDERATED_TOKEN_FILE", path.as_str()),
        ("AZURE_AUTHORITY_HOST", url.as_str()),
    ];
    std::fs::write(
        &file,
        issuer_token("sts.amazonaws.com", "system:serviceaccount:ci:runner", 600),
    )
    .unwrap();
    let run = run_task(&foundry_block(&model), &env).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("AADSTS700213"), "{}", run.stderr);
    // The right audience, expired.
    std::fs::write(
        &file,
        issuer_token(ENTRA_AUDIENCE, "system:serviceaccount:ci:runner", -60),
    )
    .unwrap();
    let run = run_task(&foundry_block(&model), &env).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("The token has expired."),
        "{}",
        run.stderr
    );
    assert!(model.requests().is_empty());

    let token = issuer_token(ENTRA_AUDIENCE, "system:serviceaccount:ci:runner", 600);
    std::fs::write(&file, &token).unwrap();
    let run = run_task(&foundry_block(&model), &env).await;
    assert_two_turns(&run, &model, "/anthropic/v1/messages");
    let exchanges = fake.of_kind("entra");
    assert_eq!(exchanges.len(), 4, "{exchanges:?}");
    assert!(exchanges[2..].iter().all(|e| e.get("refused").is_none()));
    assert_absent(&run, &[&token, ACCESS]);
}

#[tokio::test]
async fn vertex_with_gclouds_application_default_credentials_and_their_refresh_token() {
    const REFRESH: &str = "1//refresh-token-never-print-0004";
    const SECRET: &str = "client-secret-never-print-0005";
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        expires_in: 3600,
        refresh: Some((
            "test-client.apps.googleusercontent.com".into(),
            SECRET.into(),
            REFRESH.into(),
        )),
        ..Expect::default()
    })
    .await;
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    // gcloud's configuration folder, as `gcloud auth application-default login` leaves it.
    let config = tempfile::tempdir().unwrap();
    write_json(
        &config,
        "application_default_credentials.json",
        &json!({"type": "authorized_user", "account": "", "universe_domain": "googleapis.com",
                "client_id": "test-client.apps.googleusercontent.com",
                "client_secret": SECRET, "refresh_token": REFRESH,
                "token_uri": format!("{}/token", fake.url())}),
    );
    let folder = config.path().display().to_string();
    let run = run_task(
        &vertex_block(&model, LOCATED),
        &[("CLOUDSDK_CONFIG", &folder)],
    )
    .await;
    assert_two_turns(&run, &model, VERTEX_PATH);
    assert_eq!(accepted(&fake, "google_token"), 1);
    assert_eq!(
        fake.of_kind("google_token")[0]["form"]["grant_type"],
        "refresh_token"
    );
    assert_absent(&run, &[REFRESH, SECRET, ACCESS]);
}

#[tokio::test]
async fn another_provider_on_the_command_line_leaves_the_tasks_platform_behind() {
    let model = FakeModel::start_bearer(ACCESS, replies()).await;
    let mut run = Run::new()
        .task(&format!(
            "version: 1\nname: cloud\nprompt: hi\nmode: dontAsk\nmodel:\n{}",
            vertex_block(&model, LOCATED)
        ))
        .args(["--provider", "openai"]);
    for name in CLEARED.iter().chain(&["OPENAI_API_KEY"]) {
        run = run.env(name, "");
    }
    // Without the platform, the openai provider needs its key: no request goes out keyless.
    let run = run.finish_async().await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("OPENAI_API_KEY"), "{}", run.stderr);
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn the_token_endpoint_refuses_an_expired_assertion_or_one_for_another_endpoint() {
    use std::time::{Duration, SystemTime};
    use tollgate::model::cloud::google::{assertion, private_key};
    let fake = IdentityFake::start(Expect {
        access_token: ACCESS.into(),
        expires_in: 3600,
        service_account: SA.into(),
        ..Expect::default()
    })
    .await;
    let key = private_key(SERVICE_ACCOUNT_KEY).unwrap();
    tollgate::model::install_crypto_provider();
    let token_uri = format!("{}/token", fake.url());
    let post = |assertion: String| {
        let token_uri = token_uri.clone();
        async move {
            let body = format!(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
            );
            let response = reqwest::Client::new()
                .post(&token_uri)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let now = SystemTime::now();
    let fresh = assertion(&key, None, SA, &token_uri, now).unwrap();
    assert_eq!(post(fresh).await.0, 200);
    let expired = assertion(&key, None, SA, &token_uri, now - Duration::from_secs(7200)).unwrap();
    let (status, body) = post(expired).await;
    assert_eq!(status, 400);
    assert!(body.contains("short-lived token"), "{body}");
    let elsewhere = assertion(&key, None, SA, "https://oauth2.googleapis.com/token", now).unwrap();
    let (status, body) = post(elsewhere).await;
    assert_eq!(status, 400);
    assert!(body.contains("aud is not the token endpoint"), "{body}");
    let stranger = assertion(&key, None, "someone@else.iam", &token_uri, now).unwrap();
    assert_eq!(post(stranger).await.0, 400);
}
