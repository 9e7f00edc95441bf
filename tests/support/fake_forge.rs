//! A fake GitHub REST API on 127.0.0.1 for `tollgate batch`'s pull requests: lists, opens and
//! updates pull requests, answers the first opening with a 429 and `Retry-After`, and
//! records every request with the moment it arrived.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub at: Instant,
    pub status: u16,
    pub authorization: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub repo: String,
    pub head: String,
    pub base: String,
    pub body: String,
}

#[derive(Default)]
struct Log {
    requests: Vec<Request>,
    pulls: Vec<Pull>,
    limit_first_post_for: Option<u64>,
    /// Each collaborator's permission (`write`, `read`…); anyone else has `none`.
    permissions: std::collections::HashMap<String, String>,
    /// Each pull request's head repository (`owner/name`), for GET of one pull request.
    heads: std::collections::HashMap<u64, String>,
    /// Issue comments by id: (issue number, every body it had, first to last).
    comments: std::collections::BTreeMap<u64, (u64, Vec<String>)>,
    /// Pull request reviews as posted: (pull request number, the review's JSON).
    reviews: Vec<(u64, Value)>,
}

pub struct FakeForge {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    _server: tokio::task::JoinHandle<()>,
}

impl FakeForge {
    /// The first POST of a pull request gets a 429 with `Retry-After: retry_after` seconds.
    pub async fn start(retry_after: u64) -> FakeForge {
        let log = Arc::new(Mutex::new(Log {
            limit_first_post_for: Some(retry_after),
            ..Log::default()
        }));
        let app = Router::new()
            .route("/{*path}", any(handle))
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeForge {
            addr,
            log,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().requests.clone()
    }

    pub fn pulls(&self) -> Vec<Pull> {
        self.log.lock().unwrap().pulls.clone()
    }

    /// `user`'s permission on every repository, as the collaborator-permission API says it.
    pub fn set_permission(&self, user: &str, permission: &str) {
        let mut log = self.log.lock().unwrap();
        log.permissions.insert(user.into(), permission.into());
    }

    /// Each comment made: its issue number and every body it had, first to last.
    pub fn comments(&self) -> Vec<(u64, Vec<String>)> {
        self.log
            .lock()
            .unwrap()
            .comments
            .values()
            .cloned()
            .collect()
    }

    /// Each review posted: its pull request and the request's JSON.
    pub fn reviews(&self) -> Vec<(u64, Value)> {
        self.log.lock().unwrap().reviews.clone()
    }

    /// Pull request `number`'s head repository.
    pub fn set_pull_head(&self, number: u64, head: &str) {
        self.log.lock().unwrap().heads.insert(number, head.into());
    }
}

async fn handle(
    State(log): State<Arc<Mutex<Log>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, HeaderMap, String) {
    let at = Instant::now();
    let mut log = log.lock().unwrap();
    let path = uri.path().to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut out_headers = HeaderMap::new();
    let (status, answer) = match (method.clone(), parts.as_slice()) {
        (Method::POST, ["repos", _, _, "pulls"]) if log.limit_first_post_for.is_some() => {
            let seconds = log.limit_first_post_for.take().unwrap();
            out_headers.insert("retry-after", seconds.to_string().parse().unwrap());
            (
                StatusCode::TOO_MANY_REQUESTS,
                json!({"message": "slow down"}),
            )
        }
        (Method::GET, ["repos", owner, name, "pulls"]) => {
            let repo = format!("{owner}/{name}");
            let head = uri
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix("head="))
                .and_then(|head| head.split_once(':'))
                .map(|(_, branch)| branch.to_string())
                .unwrap_or_default();
            let open: Vec<Value> = log
                .pulls
                .iter()
                .filter(|pull| pull.repo == repo && pull.head == head)
                .map(|pull| json!({"number": pull.number}))
                .collect();
            (StatusCode::OK, Value::Array(open))
        }
        (Method::POST, ["repos", owner, name, "pulls"]) => {
            let request: Value = serde_json::from_str(&body).unwrap();
            let number = log.pulls.len() as u64 + 1;
            log.pulls.push(Pull {
                number,
                repo: format!("{owner}/{name}"),
                head: request["head"].as_str().unwrap().to_string(),
                base: request["base"].as_str().unwrap().to_string(),
                body: request["body"].as_str().unwrap().to_string(),
            });
            let url = format!("https://forge.test/{owner}/{name}/pull/{number}");
            (
                StatusCode::CREATED,
                json!({"number": number, "html_url": url}),
            )
        }
        (Method::POST, ["repos", _, _, "issues", number, "comments"]) => {
            let request: Value = serde_json::from_str(&body).unwrap();
            let id = 9000 + log.comments.len() as u64;
            let issue = number.parse().unwrap();
            let text = request["body"].as_str().unwrap().to_string();
            log.comments.insert(id, (issue, vec![text]));
            (StatusCode::CREATED, json!({"id": id}))
        }
        (Method::PATCH, ["repos", _, _, "issues", "comments", id]) => {
            let request: Value = serde_json::from_str(&body).unwrap();
            let id: u64 = id.parse().unwrap();
            match log.comments.get_mut(&id) {
                Some((_, bodies)) => {
                    bodies.push(request["body"].as_str().unwrap().to_string());
                    (StatusCode::OK, json!({"id": id}))
                }
                None => (StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
            }
        }
        (Method::POST, ["repos", _, _, "pulls", number, "reviews"]) => {
            let request: Value = serde_json::from_str(&body).unwrap();
            let number: u64 = number.parse().unwrap();
            log.reviews.push((number, request));
            (StatusCode::OK, json!({"id": log.reviews.len()}))
        }
        (Method::GET, ["repos", _, _, "pulls", number, "comments"]) => {
            let number: u64 = number.parse().unwrap();
            let comments: Vec<Value> = log
                .reviews
                .iter()
                .filter(|(pr, _)| *pr == number)
                .flat_map(|(_, review)| review["comments"].as_array().cloned().unwrap_or_default())
                .collect();
            (StatusCode::OK, Value::Array(comments))
        }
        (Method::GET, ["repos", _, _, "collaborators", user, "permission"]) => {
            let permission = log
                .permissions
                .get(*user)
                .cloned()
                .unwrap_or_else(|| "none".into());
            (
                StatusCode::OK,
                json!({"permission": permission, "user": {"login": user}}),
            )
        }
        (Method::GET, ["repos", _, _, "pulls", number]) => {
            match number.parse::<u64>().ok().and_then(|n| log.heads.get(&n)) {
                Some(head) => (
                    StatusCode::OK,
                    json!({"number": number.parse::<u64>().unwrap_or(0), "head": {"repo": {"full_name": head}}}),
                ),
                None => (StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
            }
        }
        (Method::PATCH, ["repos", owner, name, "pulls", number]) => {
            let url = format!("https://forge.test/{owner}/{name}/pull/{number}");
            (StatusCode::OK, json!({"number": number, "html_url": url}))
        }
        _ => (StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
    };
    log.requests.push(Request {
        method: method.to_string(),
        path,
        at,
        status: status.as_u16(),
        authorization: headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
    });
    (status, out_headers, answer.to_string())
}
