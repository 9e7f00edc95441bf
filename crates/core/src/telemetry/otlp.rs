//! The recorder's spans, metrics and logs as OTLP protobuf messages (opentelemetry-proto's
//! generated types), and their export over HTTP (`application/x-protobuf`, one POST per
//! signal).

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message;

use super::config::Destination;
use super::record::{
    Attributes, DURATION_BOUNDS_MS, Metrics, Severity, SpanRecord, TraceId, Value,
};

fn any(value: &Value) -> AnyValue {
    let value = match value {
        Value::Str(text) => any_value::Value::StringValue(text.clone()),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Double(x) => any_value::Value::DoubleValue(*x),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
    };
    AnyValue { value: Some(value) }
}

fn key_values(attributes: &Attributes) -> Vec<KeyValue> {
    attributes
        .iter()
        .map(|(key, value)| KeyValue {
            key: key.clone(),
            value: Some(any(value)),
            ..KeyValue::default()
        })
        .collect()
}

fn resource(attributes: &[(String, String)]) -> Resource {
    let attributes: Attributes = attributes
        .iter()
        .map(|(k, v)| (k.clone(), Value::Str(v.clone())))
        .chain([(
            "service.version".to_string(),
            Value::Str(env!("CARGO_PKG_VERSION").to_string()),
        )])
        .collect();
    Resource {
        attributes: key_values(&attributes),
        ..Resource::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "tollgate".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..InstrumentationScope::default()
    }
}

pub fn traces(
    trace_id: TraceId,
    spans: &[SpanRecord],
    resource_attributes: &[(String, String)],
) -> Vec<u8> {
    let spans = spans
        .iter()
        .map(|record| Span {
            trace_id: trace_id.to_vec(),
            span_id: record.span_id.to_vec(),
            parent_span_id: record.parent.map(|p| p.to_vec()).unwrap_or_default(),
            name: record.name.clone(),
            kind: if record.parent.is_none() {
                span::SpanKind::Server as i32
            } else {
                span::SpanKind::Internal as i32
            },
            start_time_unix_nano: record.start_ns,
            end_time_unix_nano: record.end_ns,
            attributes: key_values(&record.attributes),
            status: Some(match &record.error {
                Some(message) => Status {
                    message: message.clone(),
                    code: status::StatusCode::Error as i32,
                },
                None => Status {
                    message: String::new(),
                    code: status::StatusCode::Ok as i32,
                },
            }),
            ..Span::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource(resource_attributes)),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

fn sum<T>(
    name: &str,
    description: &str,
    unit: &str,
    points: impl IntoIterator<Item = (Attributes, T)>,
    value: impl Fn(T) -> number_data_point::Value,
    window: (u64, u64),
) -> Metric {
    let data_points = points
        .into_iter()
        .map(|(attributes, n)| NumberDataPoint {
            attributes: key_values(&attributes),
            start_time_unix_nano: window.0,
            time_unix_nano: window.1,
            value: Some(value(n)),
            ..NumberDataPoint::default()
        })
        .collect();
    Metric {
        name: name.into(),
        description: description.into(),
        unit: unit.into(),
        data: Some(metric::Data::Sum(Sum {
            data_points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Metric::default()
    }
}

fn by(key: &str, value: &str) -> Attributes {
    vec![(key.to_string(), Value::Str(value.to_string()))]
}

pub fn metrics(
    metrics: &Metrics,
    now_ns: u64,
    resource_attributes: &[(String, String)],
) -> Vec<u8> {
    let window = (metrics.start_ns, now_ns.max(metrics.start_ns));
    let as_int = |n: u64| number_data_point::Value::AsInt(i64::try_from(n).unwrap_or(i64::MAX));
    let list = vec![
        sum(
            "tollgate.tokens",
            "Tokens the model requests used, by kind",
            "{token}",
            metrics
                .tokens
                .iter()
                .map(|(kind, n)| (by("type", kind), *n)),
            as_int,
            window,
        ),
        sum(
            "tollgate.cost",
            "What the model requests cost",
            "USD",
            [(Vec::new(), metrics.cost_usd)],
            number_data_point::Value::AsDouble,
            window,
        ),
        sum(
            "tollgate.denials",
            "Refused tool calls, by the layer that refused them",
            "{call}",
            metrics
                .denials
                .iter()
                .map(|(layer, n)| (by("layer", layer), *n)),
            as_int,
            window,
        ),
        sum(
            "tollgate.retries",
            "Retried model requests, by the failure's category",
            "{request}",
            metrics
                .retries
                .iter()
                .map(|(category, n)| (by("category", category), *n)),
            as_int,
            window,
        ),
        sum(
            "tollgate.runs",
            "Runs ended, by outcome",
            "{run}",
            metrics
                .runs
                .iter()
                .map(|(outcome, n)| (by("outcome", outcome), *n)),
            as_int,
            window,
        ),
        Metric {
            name: "tollgate.tool.duration".into(),
            description: "How long tool calls took, by tool".into(),
            unit: "ms".into(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: metrics
                    .tool_durations
                    .iter()
                    .map(|(tool, histogram)| HistogramDataPoint {
                        attributes: key_values(&by("tool", tool)),
                        start_time_unix_nano: window.0,
                        time_unix_nano: window.1,
                        count: histogram.count,
                        sum: Some(histogram.sum),
                        bucket_counts: histogram.buckets.clone(),
                        explicit_bounds: DURATION_BOUNDS_MS.to_vec(),
                        ..HistogramDataPoint::default()
                    })
                    .collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Metric::default()
        },
    ];
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(resource_attributes)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics: list,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
    .encode_to_vec()
}

pub fn logs(
    trace_id: TraceId,
    records: &[super::record::LogRecord],
    resource_attributes: &[(String, String)],
) -> Vec<u8> {
    let log_records = records
        .iter()
        .map(|record| {
            let (number, text) = match record.severity {
                Severity::Info => (SeverityNumber::Info, "INFO"),
                Severity::Warn => (SeverityNumber::Warn, "WARN"),
                Severity::Error => (SeverityNumber::Error, "ERROR"),
            };
            LogRecord {
                time_unix_nano: record.time_ns,
                observed_time_unix_nano: record.time_ns,
                severity_number: number as i32,
                severity_text: text.into(),
                body: Some(any(&Value::Str(record.body.clone()))),
                attributes: key_values(&record.attributes),
                trace_id: trace_id.to_vec(),
                span_id: record.span_id.map(|id| id.to_vec()).unwrap_or_default(),
                event_name: format!("tollgate.{}", record.body),
                ..LogRecord::default()
            }
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource(resource_attributes)),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records,
                ..ScopeLogs::default()
            }],
            ..ResourceLogs::default()
        }],
    }
    .encode_to_vec()
}

/// POSTs one export; the collector's refusal or an unreachable one is the error.
pub async fn send(
    client: &reqwest::Client,
    destination: &Destination,
    body: Vec<u8>,
) -> Result<(), String> {
    let mut request = client
        .post(&destination.url)
        .timeout(destination.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
        .body(body);
    for (name, value) in &destination.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .send()
        .await
        .map_err(|err| format!("{}: {err}", destination.url))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{}: HTTP {status}", destination.url))
    }
}
