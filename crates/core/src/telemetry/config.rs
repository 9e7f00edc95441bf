//! Where telemetry goes, read once at start from the standard `OTEL_*` variables: off unless
//! `TOLLGATE_ENABLE_TELEMETRY=1`, so a CI job that sets `OTEL_EXPORTER_OTLP_ENDPOINT` for
//! other tools does not start sending tollgate's runs by accident.

use std::time::Duration;

/// The switch: telemetry is off without it.
pub const ENABLE_VAR: &str = "TOLLGATE_ENABLE_TELEMETRY";

/// OTLP over HTTP's default collector address.
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TelemetryError {
    #[error(
        "{var}={value}: tollgate exports OTLP over HTTP with protobuf bodies only (http/protobuf)"
    )]
    Protocol { var: &'static str, value: String },
    #[error("{var}={value}: a signal's exporter is `otlp` or `none`")]
    Exporter { var: &'static str, value: String },
    #[error("{var}: `{entry}` is not KEY=VALUE")]
    Pair { var: &'static str, entry: String },
    #[error("{var}={value}: not an http(s) URL")]
    Endpoint { var: &'static str, value: String },
    #[error("{var}={value}: not a whole number of milliseconds")]
    Timeout { var: &'static str, value: String },
}

/// One signal's destination: its URL and the headers its requests carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

/// What the operator's environment asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    pub traces: Option<Destination>,
    pub metrics: Option<Destination>,
    pub logs: Option<Destination>,
    /// `service.name` and `OTEL_RESOURCE_ATTRIBUTES`, in order.
    pub resource: Vec<(String, String)>,
}

/// One signal's variables and its path under the shared endpoint.
struct Signal {
    exporter: &'static str,
    protocol: &'static str,
    endpoint: &'static str,
    headers: &'static str,
    timeout: &'static str,
    path: &'static str,
}

const SIGNALS: [Signal; 3] = [
    Signal {
        exporter: "OTEL_TRACES_EXPORTER",
        protocol: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        endpoint: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        headers: "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        timeout: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        path: "/v1/traces",
    },
    Signal {
        exporter: "OTEL_METRICS_EXPORTER",
        protocol: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        endpoint: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        headers: "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        timeout: "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
        path: "/v1/metrics",
    },
    Signal {
        exporter: "OTEL_LOGS_EXPORTER",
        protocol: "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
        endpoint: "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        headers: "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        timeout: "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT",
        path: "/v1/logs",
    },
];

impl TelemetryConfig {
    /// The configuration `var` (the environment, in production) gives; `None` when off.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TelemetryConfig>, TelemetryError> {
        let on = var(ENABLE_VAR).is_some_and(|v| matches!(v.trim(), "1" | "true"));
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true");
        if !on || disabled {
            return Ok(None);
        }
        let nonempty = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut destinations = Vec::new();
        for signal in &SIGNALS {
            let exporter_var = signal.exporter;
            match nonempty(exporter_var).as_deref().map(str::trim) {
                None | Some("otlp") => {}
                Some("none") => {
                    destinations.push(None);
                    continue;
                }
                Some(other) => {
                    return Err(TelemetryError::Exporter {
                        var: exporter_var,
                        value: other.to_string(),
                    });
                }
            }
            for protocol_var in [signal.protocol, "OTEL_EXPORTER_OTLP_PROTOCOL"] {
                if let Some(value) = nonempty(protocol_var) {
                    if value.trim() != "http/protobuf" {
                        return Err(TelemetryError::Protocol {
                            var: protocol_var,
                            value,
                        });
                    }
                    break;
                }
            }
            let own_var = signal.endpoint;
            // A signal's own endpoint is used as it is; the shared one gets the signal's path.
            let (url, url_var) = match nonempty(own_var) {
                Some(url) => (url.trim().to_string(), own_var),
                None => {
                    let base = nonempty("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
                    (
                        format!("{}{}", base.trim().trim_end_matches('/'), signal.path),
                        "OTEL_EXPORTER_OTLP_ENDPOINT",
                    )
                }
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(TelemetryError::Endpoint {
                    var: url_var,
                    value: url,
                });
            }
            let mut headers = Vec::new();
            for headers_var in ["OTEL_EXPORTER_OTLP_HEADERS", signal.headers] {
                if let Some(list) = nonempty(headers_var) {
                    for (key, value) in pairs(headers_var, &list)? {
                        headers.retain(|(k, _): &(String, String)| !k.eq_ignore_ascii_case(&key));
                        headers.push((key, value));
                    }
                }
            }
            let mut timeout = Duration::from_secs(10);
            for timeout_var in [signal.timeout, "OTEL_EXPORTER_OTLP_TIMEOUT"] {
                if let Some(value) = nonempty(timeout_var) {
                    let ms: u64 = value.trim().parse().map_err(|_| TelemetryError::Timeout {
                        var: timeout_var,
                        value: value.clone(),
                    })?;
                    timeout = Duration::from_millis(ms);
                    break;
                }
            }
            destinations.push(Some(Destination {
                url,
                headers,
                timeout,
            }));
        }
        let mut resource = vec![(
            "service.name".to_string(),
            nonempty("OTEL_SERVICE_NAME").unwrap_or_else(|| "tollgate".into()),
        )];
        if let Some(list) = nonempty("OTEL_RESOURCE_ATTRIBUTES") {
            for (key, value) in pairs("OTEL_RESOURCE_ATTRIBUTES", &list)? {
                // OTEL_SERVICE_NAME wins over a service.name in the list, as the spec says.
                if key == "service.name" && nonempty("OTEL_SERVICE_NAME").is_some() {
                    continue;
                }
                resource.retain(|(k, _)| *k != key);
                resource.push((key, value));
            }
        }
        let mut destinations = destinations.into_iter();
        Ok(Some(TelemetryConfig {
            traces: destinations.next().flatten(),
            metrics: destinations.next().flatten(),
            logs: destinations.next().flatten(),
            resource,
        }))
    }
}

/// `k=v,k2=v2` with percent-encoded values, as the OTLP exporter specification writes them.
fn pairs(var: &'static str, list: &str) -> Result<Vec<(String, String)>, TelemetryError> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (key, value) = entry.split_once('=').ok_or_else(|| TelemetryError::Pair {
                var,
                entry: entry.to_string(),
            })?;
            Ok((key.trim().to_string(), percent_decode(value.trim())))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Option<TelemetryConfig>, TelemetryError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TelemetryConfig::from_env(|name| map.get(name).cloned())
    }

    #[test]
    fn off_unless_switched_on() {
        assert_eq!(
            config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]),
            Ok(None)
        );
        assert_eq!(
            config(&[(ENABLE_VAR, "1"), ("OTEL_SDK_DISABLED", "true")]),
            Ok(None)
        );
    }

    #[test]
    fn the_standard_variables_place_each_signal() {
        let config = config(&[
            (ENABLE_VAR, "1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m.example/x"),
            ("OTEL_LOGS_EXPORTER", "none"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20t,x-a=1",
            ),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-a=2"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "ci-agents"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=ignored,deployment.environment=prod",
            ),
        ])
        .unwrap()
        .unwrap();
        let traces = config.traces.unwrap();
        assert_eq!(traces.url, "http://c:4318/v1/traces");
        assert_eq!(
            traces.headers,
            vec![
                ("authorization".to_string(), "Bearer t".to_string()),
                ("x-a".to_string(), "2".to_string())
            ]
        );
        assert_eq!(traces.timeout, Duration::from_millis(2500));
        assert_eq!(config.metrics.unwrap().url, "https://m.example/x");
        assert!(config.logs.is_none());
        assert_eq!(
            config.resource,
            vec![
                ("service.name".to_string(), "ci-agents".to_string()),
                ("deployment.environment".to_string(), "prod".to_string())
            ]
        );
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        let on = (ENABLE_VAR, "1");
        let err = config(&[on, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert!(err.to_string().contains("http/protobuf"), "{err}");
        let err = config(&[on, ("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(err.to_string().contains("OTEL_TRACES_EXPORTER"), "{err}");
        let err = config(&[on, ("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).unwrap_err();
        assert!(err.to_string().contains("KEY=VALUE"), "{err}");
        let err = config(&[on, ("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")]).unwrap_err();
        assert!(err.to_string().contains("http(s)"), "{err}");
    }
}
