//! GitHub's own description of its REST API (npm `@octokit/openapi`) and of its webhook
//! payloads (npm `@octokit/openapi-webhooks`), both pinned in `tests/npm/package.json` and
//! installed by `npm ci --prefix tests/npm` (as `.ci/run` does). The fake forge checks every
//! request it gets and every answer it gives against the first; the GitHub tests check each
//! event payload they hand `tollgate github trigger` against the second. So tollgate is
//! tested against what GitHub says it accepts and sends, not against what its own authors
//! believed.
//!
//! The REST description is OpenAPI 3.0 (13 MB): its schemas say `nullable: true` where JSON
//! Schema says `"type": [..., "null"]`, so they are rewritten once on loading (below), and
//! every request's schemas (parameters, body, answers) are copied under `/x-tollgate/N` of
//! the same document, so a `$ref` to `#/components/...` inside them still resolves and the
//! validator's URI needs no escaping of the path templates' braces. The webhooks description
//! is OpenAPI 3.1, whose schemas are JSON Schema 2020-12 already. Both are loaded once per
//! test process: `tests/all.rs` is one binary, and many tests share it.
//!
//! Without the packages (a fresh clone with only Rust), [`github_or_skip`] names the skip;
//! the flows still run, unchecked.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::{Draft, Registry, Validator};
use serde_json::{Value, json};

const REST_URI: &str = "urn:tollgate-test:github-rest";
const WEBHOOKS_URI: &str = "urn:tollgate-test:github-webhooks";
const REST_PACKAGE: &str = "@octokit/openapi";
const WEBHOOKS_PACKAGE: &str = "@octokit/openapi-webhooks";

/// Both descriptions, ready to check against.
pub struct GitHubApi {
    /// The installed `@octokit/openapi` version.
    pub rest_version: String,
    /// The installed `@octokit/openapi-webhooks` version.
    pub webhooks_version: String,
    operations: Vec<Operation>,
    /// Each webhook's name (`issue-comment-created`) and the pointer to its payload schema.
    webhooks: BTreeMap<String, String>,
    registry: Registry<'static>,
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

/// One operation of the REST description.
struct Operation {
    method: String,
    /// The path template, `/repos/{owner}/{repo}/issues/comments/{comment_id}`.
    template: String,
    id: String,
    parameters: Vec<Parameter>,
    body: Option<Body>,
    /// Each documented status (`200`, `404`) and, when its answer is JSON, its schema's
    /// pointer in the REST document.
    responses: BTreeMap<String, Option<String>>,
}

struct Parameter {
    name: String,
    /// `path`, `query` or `header`.
    location: String,
    required: bool,
    pointer: String,
    /// The schema's `type` (`integer`, `string`, `array`…), for reading the text of a URL.
    kind: Option<String>,
}

struct Body {
    required: bool,
    /// The JSON body's schema; `None` when the operation takes no JSON.
    pointer: Option<String>,
}

/// A request checked against the description: which operation it is, if any, and what in
/// it GitHub's description does not allow.
#[derive(Debug, Default)]
pub struct Checked {
    /// Index of the operation, for [`GitHubApi::check_response`].
    pub operation: Option<usize>,
    /// `METHOD /path (operationId)`, or the method and path when no operation matched.
    pub name: String,
    pub violations: Vec<String>,
}

static API: OnceLock<Option<GitHubApi>> = OnceLock::new();

fn npm_root() -> PathBuf {
    crate::repo_root().join("tests/npm")
}

/// The installed version of `package`, or `None` when it is not installed.
fn installed_version(package: &str) -> Option<String> {
    let text = std::fs::read_to_string(
        npm_root()
            .join("node_modules")
            .join(package)
            .join("package.json"),
    )
    .ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    manifest["version"].as_str().map(str::to_string)
}

/// What is missing, when either package is not installed.
fn missing() -> Option<String> {
    let absent: Vec<&str> = [REST_PACKAGE, WEBHOOKS_PACKAGE]
        .into_iter()
        .filter(|package| installed_version(package).is_none())
        .collect();
    (!absent.is_empty()).then(|| {
        format!(
            "{} not installed in tests/npm/node_modules",
            absent.join(" and ")
        )
    })
}

/// Both descriptions, or `None` when the packages are not installed. Panics when they are
/// installed but not at the versions `tests/npm/package.json` pins, or cannot be read:
/// checking against another description than the pinned one would pass for the wrong reason.
pub fn github() -> Option<&'static GitHubApi> {
    API.get_or_init(|| {
        if missing().is_some() {
            return None;
        }
        Some(load().unwrap_or_else(|err| panic!("GitHub's API description: {err}")))
    })
    .as_ref()
}

/// [`github`], or a named skip of the checks `what` names (the test goes on unchecked).
pub fn github_or_skip(what: &str) -> Option<&'static GitHubApi> {
    let api = github();
    if api.is_none() {
        crate::skip::skip(&format!(
            "{what} are not checked against GitHub's API description: {} (`npm ci --prefix \
             tests/npm` installs them, as .ci/run does); the flow runs unchecked",
            missing().unwrap_or_default()
        ));
    }
    api
}

fn pinned(package: &str) -> Result<String, String> {
    let path = npm_root().join("package.json");
    let text =
        std::fs::read_to_string(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    let manifest: Value = serde_json::from_str(&text).map_err(|err| err.to_string())?;
    manifest["dependencies"][package]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("tests/npm/package.json does not pin {package}"))
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
    serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

fn load() -> Result<GitHubApi, String> {
    let mut versions = Vec::new();
    for package in [REST_PACKAGE, WEBHOOKS_PACKAGE] {
        let installed = installed_version(package).unwrap_or_default();
        let wanted = pinned(package)?;
        if installed != wanted {
            return Err(format!(
                "{package} {installed} is installed but tests/npm/package.json pins {wanted}: \
                 run `npm ci --prefix tests/npm`"
            ));
        }
        versions.push(installed);
    }
    let generated = |package: &str| {
        npm_root()
            .join("node_modules")
            .join(package)
            .join("generated/api.github.com.json")
    };
    let mut rest = read_json(&generated(REST_PACKAGE))?;
    if !rest["openapi"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.0"))
    {
        return Err(format!(
            "{REST_PACKAGE}: OpenAPI {} where 3.0 was expected (its `nullable` is rewritten)",
            rest["openapi"]
        ));
    }
    nullable_to_json_schema(&mut rest);
    let operations = index_operations(&mut rest)?;
    let webhooks_doc = read_json(&generated(WEBHOOKS_PACKAGE))?;
    if !webhooks_doc["openapi"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.1"))
    {
        return Err(format!(
            "{WEBHOOKS_PACKAGE}: OpenAPI {} where 3.1 (JSON Schema 2020-12) was expected",
            webhooks_doc["openapi"]
        ));
    }
    let webhooks = webhooks_doc["webhooks"]
        .as_object()
        .ok_or("the webhooks description has no `webhooks`")?
        .iter()
        .filter(|(_, hook)| {
            hook["post"]["requestBody"]["content"]["application/json"]["schema"].is_object()
        })
        .map(|(name, _)| {
            (
                name.clone(),
                format!("/webhooks/{name}/post/requestBody/content/application~1json/schema"),
            )
        })
        .collect();
    let registry = Registry::new()
        .draft(Draft::Draft202012)
        .add(REST_URI, Draft::Draft202012.create_resource(rest))
        .and_then(|builder| {
            builder.add(
                WEBHOOKS_URI,
                Draft::Draft202012.create_resource(webhooks_doc),
            )
        })
        .and_then(|builder| builder.prepare())
        .map_err(|err| format!("cannot register the descriptions: {err}"))?;
    let mut versions = versions.into_iter();
    Ok(GitHubApi {
        rest_version: versions.next().unwrap_or_default(),
        webhooks_version: versions.next().unwrap_or_default(),
        operations,
        webhooks,
        registry,
        validators: Mutex::new(HashMap::new()),
    })
}

/// Rewrites OpenAPI 3.0's `nullable: true` as JSON Schema says it: `null` added to `type`
/// (and to `enum`, which GitHub's description leaves without it where its answers carry
/// null, such as an issue's `state_reason`), or, beside no `type` (an `allOf`, an `anyOf`), the
/// schema made one branch of an `anyOf` whose other is `null`.
fn nullable_to_json_schema(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for child in map.values_mut() {
                nullable_to_json_schema(child);
            }
            if map.get("nullable") == Some(&Value::Bool(true)) {
                map.remove("nullable");
                if let Some(kind) = map.get("type").cloned() {
                    let mut kinds = match kind {
                        Value::Array(kinds) => kinds,
                        other => vec![other],
                    };
                    kinds.push(json!("null"));
                    map.insert("type".into(), Value::Array(kinds));
                    if let Some(Value::Array(options)) = map.get_mut("enum")
                        && !options.contains(&Value::Null)
                    {
                        options.push(Value::Null);
                    }
                } else {
                    let inner = Value::Object(std::mem::take(map));
                    map.insert("anyOf".into(), json!([inner, {"type": "null"}]));
                }
            } else if map.get("nullable") == Some(&Value::Bool(false)) {
                map.remove("nullable");
            }
        }
        Value::Array(items) => {
            for item in items {
                nullable_to_json_schema(item);
            }
        }
        _ => {}
    }
}

/// `#/components/...` followed in `doc`.
fn follow<'a>(doc: &'a Value, value: &'a Value) -> Result<&'a Value, String> {
    let mut value = value;
    for _ in 0..16 {
        match value["$ref"].as_str() {
            Some(reference) => {
                let pointer = reference
                    .strip_prefix('#')
                    .ok_or_else(|| format!("a $ref outside the document: {reference}"))?;
                value = doc
                    .pointer(pointer)
                    .ok_or_else(|| format!("a $ref to nothing: {reference}"))?;
            }
            None => return Ok(value),
        }
    }
    Err("a $ref chain longer than 16".into())
}

/// Every operation of the REST description, its schemas copied under `/x-tollgate/N`.
fn index_operations(doc: &mut Value) -> Result<Vec<Operation>, String> {
    let mut hoisted: Vec<Value> = Vec::new();
    let mut operations = Vec::new();
    let mut hoist = |schema: &Value| {
        hoisted.push(schema.clone());
        format!("/x-tollgate/{}", hoisted.len() - 1)
    };
    let paths = doc["paths"]
        .as_object()
        .ok_or("the REST description has no `paths`")?;
    for (template, item) in paths {
        let shared: Vec<Value> = item["parameters"].as_array().cloned().unwrap_or_default();
        for method in ["get", "put", "post", "delete", "patch", "head", "options"] {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let mut parameters = Vec::new();
            let own = operation["parameters"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for parameter in shared.iter().chain(own.iter()) {
                let parameter = follow(doc, parameter)?;
                let schema = &parameter["schema"];
                let kind = follow(doc, schema)?["type"].as_str().map(str::to_string);
                parameters.push(Parameter {
                    name: parameter["name"].as_str().unwrap_or_default().to_string(),
                    location: parameter["in"].as_str().unwrap_or_default().to_string(),
                    required: parameter["required"] == true,
                    pointer: hoist(schema),
                    kind,
                });
            }
            let body = match operation.get("requestBody") {
                Some(body) => {
                    let body = follow(doc, body)?;
                    let schema = &body["content"]["application/json"]["schema"];
                    Some(Body {
                        required: body["required"] == true,
                        pointer: schema.is_object().then(|| hoist(schema)),
                    })
                }
                None => None,
            };
            let mut responses = BTreeMap::new();
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                let response = follow(doc, response)?;
                let schema = &response["content"]["application/json"]["schema"];
                responses.insert(status.clone(), schema.is_object().then(|| hoist(schema)));
            }
            operations.push(Operation {
                method: method.to_uppercase(),
                template: template.clone(),
                id: operation["operationId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                parameters,
                body,
                responses,
            });
        }
    }
    doc["x-tollgate"] = Value::Array(hoisted);
    Ok(operations)
}

/// `%XX` decoded (and `+` as a space, in a query), as GitHub reads a URL.
pub fn decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit() =>
            {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
                continue;
            }
            b'+' if plus_is_space => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The text of a URL's parameter as the JSON its schema describes.
fn typed(text: &str, kind: Option<&str>) -> Value {
    match kind {
        Some("integer") => text
            .parse::<i64>()
            .map_or_else(|_| json!(text), Value::from),
        Some("number") => text
            .parse::<f64>()
            .map_or_else(|_| json!(text), Value::from),
        Some("boolean") => match text {
            "true" => json!(true),
            "false" => json!(false),
            _ => json!(text),
        },
        Some("array") => Value::Array(text.split(',').map(|item| json!(item)).collect()),
        _ => json!(text),
    }
}

impl GitHubApi {
    fn validator(&self, uri: &str) -> Result<Arc<Validator>, String> {
        let mut cache = self
            .validators
            .lock()
            .map_err(|_| "the validator cache is poisoned".to_string())?;
        if let Some(validator) = cache.get(uri) {
            return Ok(Arc::clone(validator));
        }
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .with_registry(&self.registry)
            .should_validate_formats(true)
            .build(&json!({"$ref": uri}))
            .map_err(|err| format!("cannot build a validator for {uri}: {err}"))?;
        let validator = Arc::new(validator);
        cache.insert(uri.to_string(), Arc::clone(&validator));
        Ok(validator)
    }

    /// What in `value` the schema at `pointer` of the REST (or webhooks) document refuses,
    /// each error with where it is; at most 8.
    fn errors(&self, document: &str, pointer: &str, value: &Value) -> Vec<String> {
        let validator = match self.validator(&format!("{document}#{pointer}")) {
            Ok(validator) => validator,
            Err(err) => return vec![err],
        };
        validator
            .iter_errors(value)
            .take(8)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("at {at}: {error}")
            })
            .collect()
    }

    /// The operation `method path` is, when one matches: of the templates that match, the
    /// one with the most fixed segments (`/pulls/comments` before `/pulls/{pull_number}`).
    fn find(&self, method: &str, segments: &[String]) -> Result<usize, String> {
        let mut best: Option<(usize, usize)> = None;
        let mut path_known = false;
        for (index, operation) in self.operations.iter().enumerate() {
            let template: Vec<&str> = operation.template.trim_matches('/').split('/').collect();
            if template.len() != segments.len() {
                continue;
            }
            let mut fixed = 0;
            let matches = template.iter().zip(segments).all(|(part, segment)| {
                if part.starts_with('{') && part.ends_with('}') {
                    !segment.is_empty()
                } else {
                    fixed += 1;
                    *part == segment
                }
            });
            if !matches {
                continue;
            }
            path_known = true;
            if operation.method == method && best.is_none_or(|(_, most)| fixed > most) {
                best = Some((index, fixed));
            }
        }
        match best {
            Some((index, _)) => Ok(index),
            None if path_known => Err(format!("GitHub's REST API has no {method} for this path")),
            None => Err("no operation of GitHub's REST API has this path".into()),
        }
    }

    /// Checks one request: that its method and path are an operation's, its path and query
    /// parameters conform, it names no parameter the operation lacks, and its body is the
    /// JSON the operation's request body schema describes.
    pub fn check_request(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        content_type: Option<&str>,
        body: &str,
    ) -> Checked {
        let segments: Vec<String> = path
            .trim_matches('/')
            .split('/')
            .map(|segment| decode(segment, false))
            .collect();
        let index = match self.find(method, &segments) {
            Ok(index) => index,
            Err(why) => {
                return Checked {
                    operation: None,
                    name: format!("{method} {path}"),
                    violations: vec![why],
                };
            }
        };
        let operation = &self.operations[index];
        let mut checked = Checked {
            operation: Some(index),
            name: format!("{method} {} ({})", operation.template, operation.id),
            violations: Vec::new(),
        };
        let template: Vec<&str> = operation.template.trim_matches('/').split('/').collect();
        let mut query_values: Vec<(String, String)> = query
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(name, true), decode(value, true))
            })
            .collect();
        for parameter in &operation.parameters {
            let text = match parameter.location.as_str() {
                "path" => template
                    .iter()
                    .position(|part| *part == format!("{{{}}}", parameter.name))
                    .map(|at| segments[at].clone()),
                "query" => {
                    let found = query_values
                        .iter()
                        .position(|(name, _)| *name == parameter.name);
                    found.map(|at| query_values.remove(at).1)
                }
                _ => continue,
            };
            match text {
                Some(text) => {
                    let value = typed(&text, parameter.kind.as_deref());
                    for error in self.errors(REST_URI, &parameter.pointer, &value) {
                        checked.violations.push(format!(
                            "{} parameter `{}` = {text:?}: {error}",
                            parameter.location, parameter.name
                        ));
                    }
                }
                None if parameter.required => checked.violations.push(format!(
                    "the required {} parameter `{}` is missing",
                    parameter.location, parameter.name
                )),
                None => {}
            }
        }
        for (name, _) in query_values {
            checked.violations.push(format!(
                "the query parameter `{name}` is not one the operation takes"
            ));
        }
        let sent = !body.trim().is_empty();
        match (&operation.body, sent) {
            (None, true) => checked
                .violations
                .push("the operation takes no request body, and one was sent".into()),
            (Some(spec), false) if spec.required => checked
                .violations
                .push("the operation's request body is required, and none was sent".into()),
            (Some(spec), true) => {
                if !content_type.is_some_and(|kind| kind.starts_with("application/json")) {
                    checked.violations.push(format!(
                        "the body's content-type is {content_type:?}, not application/json"
                    ));
                }
                match (&spec.pointer, serde_json::from_str::<Value>(body)) {
                    (None, _) => checked
                        .violations
                        .push("the operation takes no JSON body".into()),
                    (Some(_), Err(err)) => checked
                        .violations
                        .push(format!("the request body is not JSON: {err}")),
                    (Some(pointer), Ok(value)) => {
                        for error in self.errors(REST_URI, pointer, &value) {
                            checked.violations.push(format!("request body {error}"));
                        }
                    }
                }
            }
            _ => {}
        }
        checked
    }

    /// Checks an answer to operation `index`: its status is one the operation documents
    /// (or a client or server error, which any operation can give: GitHub's `basic-error`),
    /// and its body is what the description says that status carries.
    pub fn check_response(&self, index: usize, status: u16, body: &Value) -> Vec<String> {
        let operation = &self.operations[index];
        let documented = operation
            .responses
            .get(&status.to_string())
            .or_else(|| operation.responses.get("default"));
        let pointer = match documented {
            Some(pointer) => pointer.clone(),
            None if status >= 400 => Some("/components/schemas/basic-error".to_string()),
            None => {
                return vec![format!(
                    "status {status} is not one the operation answers with ({})",
                    operation
                        .responses
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )];
            }
        };
        match pointer {
            Some(pointer) => self
                .errors(REST_URI, &pointer, body)
                .into_iter()
                .map(|error| format!("answer {status} {error}"))
                .collect(),
            None if body.is_null() => Vec::new(),
            None => vec![format!(
                "answer {status} carries no body, and one was given"
            )],
        }
    }

    /// What GitHub's description of the `event`'s webhook refuses in `payload`: the webhook
    /// is `event` and `payload.action` (`issue_comment` + `created`: `issue-comment-created`),
    /// or `event` alone for an event without actions (`workflow_dispatch`). An event GitHub
    /// describes no webhook for is an error: there is nothing to hold its payload to.
    pub fn check_webhook(&self, event: &str, payload: &Value) -> Result<(), String> {
        let base = event.replace('_', "-");
        let name = match payload["action"].as_str() {
            Some(action) => format!("{base}-{action}"),
            None => base,
        };
        let pointer = self.webhooks.get(&name).ok_or_else(|| {
            format!(
                "{WEBHOOKS_PACKAGE} {} describes no `{name}` webhook",
                self.webhooks_version
            )
        })?;
        let errors = self.errors(WEBHOOKS_URI, pointer, payload);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the `{name}` payload is not what GitHub sends ({WEBHOOKS_PACKAGE} {}):\n  {}",
                self.webhooks_version,
                errors.join("\n  ")
            ))
        }
    }
}
