//! OpenTelemetry (issue 51): a run with `TOLLGATE_ENABLE_TELEMETRY=1` exports its trace,
//! metrics and logs over OTLP/HTTP to a receiver on 127.0.0.1 that decodes them with the
//! official protobuf definitions (opentelemetry-proto). The spans nest run → turn → model
//! request / tool call under one trace, with the gate's decision on each call; the metrics
//! count tokens, cost, denials by layer and tool durations; nothing secret is in any of it;
//! and without the switch nothing is sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use crate::support::fake_model::{Api, FakeModel, Reply, Tokens, text, tool, turn};
use crate::support::runs::{Finished, Run};

const KEY: &str = "sk-telemetry-test-key-never-exported";
const SECRET: &str = "hunter2-telemetry-planted-secret";

#[derive(Default)]
struct Received {
    /// (path, content type, authorization header, body)
    posts: Vec<(String, String, String, Vec<u8>)>,
}

struct Receiver {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Received>>,
    _server: tokio::task::JoinHandle<()>,
}

async fn collect(
    State(received): State<Arc<Mutex<Received>>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    received.lock().unwrap().posts.push((
        uri.path().to_string(),
        header("content-type"),
        header("authorization"),
        body.to_vec(),
    ));
    StatusCode::OK
}

impl Receiver {
    async fn start() -> Receiver {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = Router::new()
            .route("/v1/traces", post(collect))
            .route("/v1/metrics", post(collect))
            .route("/v1/logs", post(collect))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            addr,
            received,
            _server: server,
        }
    }

    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        self.received
            .lock()
            .unwrap()
            .posts
            .iter()
            .filter(|(p, ..)| p == path)
            .map(|(.., body)| body.clone())
            .collect()
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn string(attributes: &[KeyValue], key: &str) -> String {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

fn integer(attributes: &[KeyValue], key: &str) -> i64 {
    match attribute(attributes, key) {
        Some(any_value::Value::IntValue(n)) => *n,
        other => panic!("{key}: {other:?}"),
    }
}

async fn run(server: &FakeModel, receiver: &Receiver, enable: bool) -> Finished {
    let mut run = Run::new()
        .file("ws/notes.txt", &format!("the password is {SECRET}\n"))
        .file("ws/.env", "TOKEN=x\n")
        .task(&format!(
            "version: 1\nname: telemetry\nprompt: Read the notes.\nworkdir: ws\nmode: dontAsk\ntools: [Read, Glob]\nfail_on: [check]\npermissions:\n  deny: ['Read(.env)']\nredact_env: [NOTES_SECRET]\n{}",
            server.model_block(Api::Anthropic, "  retries: {max: 0}\n")
        ))
        .env("TEST_MODEL_KEY", KEY)
        .env("NOTES_SECRET", SECRET)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}", receiver.addr),
        )
        .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20collector-token")
        .env("OTEL_SERVICE_NAME", "ci-agents");
    if enable {
        run = run.env("TOLLGATE_ENABLE_TELEMETRY", "1");
    }
    run.finish_async().await
}

fn replies() -> Vec<Reply> {
    let tokens = Tokens {
        input: 1200,
        output: 80,
        ..Tokens::default()
    };
    vec![
        Reply::Turn(turn(
            vec![
                text("Reading."),
                tool("Read", json!({"file_path": "notes.txt"})),
                tool("Read", json!({"file_path": ".env"})),
            ],
            tokens,
        )),
        Reply::Turn(turn(
            vec![tool("Glob", json!({"pattern": "*.txt"}))],
            tokens,
        )),
        Reply::Turn(turn(vec![text("The notes are read.")], tokens)),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_exports_its_trace_metrics_and_logs_over_otlp() {
    let server = FakeModel::start(KEY, replies()).await;
    let receiver = Receiver::start().await;
    let finished = run(&server, &receiver, true).await;
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    {
        let received = receiver.received.lock().unwrap();
        for (path, content_type, authorization, body) in &received.posts {
            assert_eq!(content_type, "application/x-protobuf", "{path}");
            assert_eq!(authorization, "Bearer collector-token", "{path}");
            let raw = String::from_utf8_lossy(body);
            assert!(!raw.contains(SECRET), "{path} carries the secret");
            assert!(!raw.contains(KEY), "{path} carries the model key");
        }
    }

    // The trace: every span of one trace id, nested run → turn → request / tool call.
    let spans: Vec<Span> = receiver
        .bodies("/v1/traces")
        .iter()
        .flat_map(|body| {
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            let resource = request.resource_spans[0].resource.clone().unwrap();
            assert_eq!(string(&resource.attributes, "service.name"), "ci-agents");
            request
                .resource_spans
                .into_iter()
                .flat_map(|rs| rs.scope_spans.into_iter().flat_map(|ss| ss.spans))
        })
        .collect();
    let trace_id = &spans[0].trace_id;
    assert_eq!(trace_id.len(), 16);
    assert!(spans.iter().all(|span| &span.trace_id == trace_id));
    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let parent = |span: &Span| {
        by_id
            .get(span.parent_span_id.as_slice())
            .map(|p| p.name.clone())
    };
    let runs: Vec<&Span> = spans.iter().filter(|s| s.name == "tollgate run").collect();
    assert_eq!(runs.len(), 1);
    let run_span = runs[0];
    assert!(run_span.parent_span_id.is_empty());
    assert_eq!(string(&run_span.attributes, "tollgate.outcome"), "success");
    assert_eq!(
        string(&run_span.attributes, "gen_ai.request.model"),
        "claude-sonnet-4-5"
    );
    let turns: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("turn "))
        .collect();
    assert_eq!(turns.len(), 3);
    assert!(
        turns
            .iter()
            .all(|t| parent(t).as_deref() == Some("tollgate run"))
    );
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == "model request").collect();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert!(parent(request).unwrap().starts_with("turn "));
        assert_eq!(
            integer(&request.attributes, "gen_ai.usage.input_tokens"),
            1200
        );
        assert!(request.start_time_unix_nano <= request.end_time_unix_nano);
    }
    let tools: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("tool "))
        .collect();
    assert_eq!(tools.len(), 3);
    for call in &tools {
        let expected = if call.name == "tool Read" {
            "turn 1"
        } else {
            "turn 2"
        };
        assert_eq!(parent(call).as_deref(), Some(expected), "{}", call.name);
    }
    let denied: Vec<&&Span> = tools
        .iter()
        .filter(|s| string(&s.attributes, "tollgate.decision") == "deny")
        .collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(
        string(&denied[0].attributes, "tollgate.decision.layer"),
        "rule"
    );
    assert_eq!(
        string(&denied[0].attributes, "tollgate.decision.rule"),
        "Read(.env)"
    );
    assert_eq!(
        string(&denied[0].attributes, "tollgate.decision.step"),
        "1d"
    );
    assert_eq!(
        denied[0].status.as_ref().unwrap().code,
        2,
        "an error status"
    );

    // The metrics, as the last export holds them (cumulative).
    let last = receiver.bodies("/v1/metrics").pop().expect("no metrics");
    let metrics = ExportMetricsServiceRequest::decode(last.as_slice()).unwrap();
    let metrics: HashMap<String, metric::Data> = metrics.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| (m.name.clone(), m.data.clone().unwrap()))
        .collect();
    let sum_of = |name: &str, key: &str, value: &str| -> i64 {
        let Some(metric::Data::Sum(sum)) = metrics.get(name) else {
            panic!("{name}");
        };
        sum.data_points
            .iter()
            .filter(|p| string(&p.attributes, key) == value)
            .map(|p| match p.value {
                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(
                    n,
                )) => n,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(sum_of("tollgate.tokens", "type", "input"), 3600);
    assert_eq!(sum_of("tollgate.tokens", "type", "output"), 240);
    assert_eq!(sum_of("tollgate.denials", "layer", "rule"), 1);
    assert_eq!(sum_of("tollgate.runs", "outcome", "success"), 1);
    let Some(metric::Data::Histogram(durations)) = metrics.get("tollgate.tool.duration") else {
        panic!("no tool durations");
    };
    let read = durations
        .data_points
        .iter()
        .find(|p| string(&p.attributes, "tool") == "Read")
        .unwrap();
    assert_eq!(read.count, 2);
    assert_eq!(read.bucket_counts.iter().sum::<u64>(), 2);

    // The logs: the denial and the run's end, tied to the trace.
    let logs: Vec<_> = receiver
        .bodies("/v1/logs")
        .iter()
        .flat_map(|body| {
            ExportLogsServiceRequest::decode(body.as_slice())
                .unwrap()
                .resource_logs
                .into_iter()
                .flat_map(|rl| rl.scope_logs.into_iter().flat_map(|sl| sl.log_records))
        })
        .collect();
    let events: Vec<String> = logs.iter().map(|l| l.event_name.clone()).collect();
    assert!(
        events.contains(&"tollgate.permission_decision".to_string()),
        "{events:?}"
    );
    assert!(
        events.contains(&"tollgate.run_finished".to_string()),
        "{events:?}"
    );
    assert!(logs.iter().all(|l| &l.trace_id == trace_id));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_switch_nothing_is_sent_and_a_bad_protocol_stops_the_run_before_it_starts() {
    let server = FakeModel::start(KEY, replies()).await;
    let receiver = Receiver::start().await;
    let finished = run(&server, &receiver, false).await;
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert!(receiver.received.lock().unwrap().posts.is_empty());

    let refused = Run::new()
        .task("version: 1\nname: t\nprompt: hi\nmodel:\n  provider: scripted\n  name: s\n  script:\n    - - text: done\n")
        .env("TOLLGATE_ENABLE_TELEMETRY", "1")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .finish_async()
        .await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("http/protobuf"),
        "{}",
        refused.stderr
    );
}

/// A batch's runs each export a trace of their own.
#[tokio::test(flavor = "multi_thread")]
async fn each_run_of_a_batch_is_a_trace_of_its_own() {
    let receiver = Receiver::start().await;
    let fleet = super::batch::Fleet::new(3, &[]);
    let output = fleet
        .command("out")
        .env("TOLLGATE_ENABLE_TELEMETRY", "1")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}", receiver.addr),
        )
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let roots: Vec<Span> = receiver
        .bodies("/v1/traces")
        .iter()
        .flat_map(|body| {
            ExportTraceServiceRequest::decode(body.as_slice())
                .unwrap()
                .resource_spans
                .into_iter()
                .flat_map(|rs| rs.scope_spans.into_iter().flat_map(|ss| ss.spans))
        })
        .filter(|span| span.name == "tollgate run")
        .collect();
    assert_eq!(roots.len(), 3);
    let traces: std::collections::BTreeSet<&Vec<u8>> = roots.iter().map(|s| &s.trace_id).collect();
    assert_eq!(traces.len(), 3, "one trace per repository");
}
