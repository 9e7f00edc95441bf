//! A fake GitHub REST API on 127.0.0.1: the calls `tollgate batch` and `tollgate github`
//! make (pull requests listed, opened, updated and read; issue comments made and edited;
//! reviews posted and their comments listed; a collaborator's permission), each answered
//! with the body GitHub gives (`github_objects`). The first opening of a pull request can be
//! answered with a 429 and `Retry-After`. Every request is recorded with the moment it
//! arrived.
//!
//! When GitHub's API description is installed (`octokit.rs`), every request is checked
//! against it (an operation's method and path, its parameters, its JSON body) and so is
//! every answer the fake gives; a request outside it is answered 422, as GitHub would, and
//! each finding is kept. Dropping the forge fails the test that made it if any was found,
//! naming the operation and the schema's error. The few rules GitHub states in words rather
//! than in a schema (a review comment needs a `line` or a `position`) are checked the same
//! way.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use serde_json::{Value, json};

use crate::github_objects as objects;
use crate::octokit::{self, GitHubApi};

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
    pub title: String,
    pub body: String,
}

/// An issue comment the fake holds.
#[derive(Debug, Clone)]
pub struct Comment {
    pub id: u64,
    pub issue: u64,
    /// Every body it had, first to last.
    pub bodies: Vec<String>,
}

/// Who the job's token is: what GitHub names the author of what it makes.
const BOT: &str = "github-actions[bot]";

struct Log {
    requests: Vec<Request>,
    pulls: Vec<Pull>,
    limit_first_post_for: Option<u64>,
    /// Each collaborator's permission (`write`, `read`…); anyone else has `none`.
    permissions: BTreeMap<String, String>,
    /// Each pull request's head repository (`owner/name`), for GET of one pull request.
    heads: BTreeMap<u64, String>,
    comments: Vec<Comment>,
    /// Pull request reviews as posted: (pull request number, the request's JSON).
    reviews: Vec<(u64, Value)>,
    /// The review comments those reviews made: (pull request number, GitHub's object).
    review_comments: Vec<(u64, Value)>,
    /// Each pull request's changed files: (file name, its patch).
    files: BTreeMap<u64, Vec<(String, String)>>,
    /// What GitHub's description (or its stated rules) refused, in requests and answers.
    violations: Vec<String>,
    api: Option<&'static GitHubApi>,
}

pub struct FakeForge {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    _server: tokio::task::JoinHandle<()>,
}

impl FakeForge {
    /// The first POST of a pull request gets a 429 with `Retry-After: retry_after` seconds
    /// (0 too: an answer to send again at once). Without GitHub's API description installed, the test's skip of the
    /// checks is named, and the forge answers as it does with it.
    pub async fn start(retry_after: u64) -> FakeForge {
        let api = octokit::github_or_skip("the fake GitHub API's requests and answers");
        let log = Arc::new(Mutex::new(Log {
            requests: Vec::new(),
            pulls: Vec::new(),
            limit_first_post_for: Some(retry_after),
            permissions: BTreeMap::new(),
            heads: BTreeMap::new(),
            comments: Vec::new(),
            reviews: Vec::new(),
            review_comments: Vec::new(),
            files: BTreeMap::new(),
            violations: Vec::new(),
            api,
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

    /// Whether the requests and answers are checked against GitHub's description.
    pub fn checked(&self) -> bool {
        self.log.lock().unwrap().api.is_some()
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
            .iter()
            .map(|comment| (comment.issue, comment.bodies.clone()))
            .collect()
    }

    /// Each comment made, with the id the fake gave it.
    pub fn comment_records(&self) -> Vec<Comment> {
        self.log.lock().unwrap().comments.clone()
    }

    /// Each review posted: its pull request and the request's JSON.
    pub fn reviews(&self) -> Vec<(u64, Value)> {
        self.log.lock().unwrap().reviews.clone()
    }

    /// Pull request `number`'s changed files, each a name and its patch (from the first
    /// `@@`): what GitHub lists, and the only lines it lets a review comment sit on.
    pub fn set_pull_files(&self, number: u64, files: &[(&str, &str)]) {
        let files = files
            .iter()
            .map(|(name, patch)| (name.to_string(), patch.to_string()))
            .collect();
        self.log.lock().unwrap().files.insert(number, files);
    }

    /// Pull request `number`'s head repository.
    pub fn set_pull_head(&self, number: u64, head: &str) {
        self.log.lock().unwrap().heads.insert(number, head.into());
    }

    /// What GitHub's description refused so far, taken: a test that sends what it refuses
    /// on purpose takes them, so dropping the forge does not fail it.
    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut self.log.lock().unwrap().violations)
    }
}

impl Drop for FakeForge {
    /// Fails the test when a request or answer was outside GitHub's description; when the
    /// test fails already, says so on stderr, which libtest shows with that failure.
    fn drop(&mut self) {
        let violations = match self.log.lock() {
            Ok(log) => log.violations.clone(),
            Err(poisoned) => poisoned.into_inner().violations.clone(),
        };
        if violations.is_empty() {
            return;
        }
        let versions = octokit::github()
            .map(|api| format!("@octokit/openapi {}", api.rest_version))
            .unwrap_or_default();
        let report = format!(
            "the fake GitHub API saw {} request(s) or answer(s) outside GitHub's API description ({versions}):\n- {}",
            violations.len(),
            violations.join("\n- ")
        );
        if std::thread::panicking() {
            eprintln!("{report}");
        } else {
            panic!("{report}");
        }
    }
}

/// What the fake answers: a status, a JSON body, headers.
struct Answer {
    status: StatusCode,
    body: Value,
    headers: HeaderMap,
}

fn answer(status: StatusCode, body: Value) -> Answer {
    Answer {
        status,
        body,
        headers: HeaderMap::new(),
    }
}

fn not_found() -> Answer {
    answer(StatusCode::NOT_FOUND, objects::error("Not Found", 404))
}

/// A 422 as GitHub words it, for a request it refuses. What was wrong goes in the message:
/// operations describe their 422's `errors` differently (objects for most, strings for a
/// review's), and both descriptions take a body without them.
fn unprocessable(errors: &[String]) -> Answer {
    answer(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({
            "message": format!("Validation Failed: {}", errors.join("; ")),
            "documentation_url": "https://docs.github.com/rest",
            "status": "422",
        }),
    )
}

async fn handle(
    State(log): State<Arc<Mutex<Log>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, HeaderMap, String) {
    let at = Instant::now();
    let path = uri.path().to_string();
    let api = log.lock().unwrap().api;
    let checked = api.map(|api| {
        let content_type = headers
            .get("content-type")
            .and_then(|value| value.to_str().ok());
        api.check_request(method.as_str(), &path, uri.query(), content_type, &body)
    });
    let mut log = log.lock().unwrap();
    let mut refused: Vec<String> = checked
        .as_ref()
        .map(|checked| checked.violations.clone())
        .unwrap_or_default();
    if checked.is_some() {
        refused.extend(stated_rules(&method, &path, &body));
    }
    let reply = if refused.is_empty() {
        respond(&mut log, &method, &uri, &body)
    } else {
        unprocessable(&refused)
    };
    let mut found: Vec<String> = refused;
    if let (Some(api), Some(checked)) = (api, &checked)
        && let Some(operation) = checked.operation
    {
        found.extend(api.check_response(operation, reply.status.as_u16(), &reply.body));
    }
    if let Some(checked) = &checked {
        for violation in found {
            log.violations
                .push(format!("{}: {violation}", checked.name));
        }
    }
    log.requests.push(Request {
        method: method.to_string(),
        path,
        at,
        status: reply.status.as_u16(),
        authorization: headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
    });
    (reply.status, reply.headers, reply.body.to_string())
}

/// The rules GitHub states in words (the description's own) rather than in a schema: a
/// review comment needs a `line` (with a `side` of LEFT or RIGHT) or a `position`; a COMMENT
/// or REQUEST_CHANGES review needs a body; a pull request needs a title unless it is made
/// from an issue.
fn stated_rules(method: &Method, path: &str, body: &str) -> Vec<String> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let mut broken = Vec::new();
    match (method.clone(), parts.as_slice()) {
        (Method::POST, ["repos", _, _, "pulls", _, "reviews"]) => {
            let event = request["event"].as_str().unwrap_or("");
            if matches!(event, "COMMENT" | "REQUEST_CHANGES")
                && request["body"].as_str().is_none_or(str::is_empty)
            {
                broken.push(format!("a {event} review needs a body"));
            }
            for (n, comment) in request["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if comment["line"].is_null() && comment["position"].is_null() {
                    broken.push(format!("comment {n} has neither `line` nor `position`"));
                }
                for key in ["side", "start_side"] {
                    if let Some(side) = comment.get(key)
                        && !matches!(side.as_str(), Some("LEFT" | "RIGHT"))
                    {
                        broken.push(format!(
                            "comment {n}'s `{key}` is {side}, not LEFT or RIGHT"
                        ));
                    }
                }
            }
        }
        (Method::POST, ["repos", _, _, "pulls"])
            if request["title"].as_str().is_none_or(str::is_empty)
                && request["issue"].is_null() =>
        {
            broken.push("a pull request needs a title".into());
        }
        _ => {}
    }
    broken
}

fn respond(log: &mut Log, method: &Method, uri: &Uri, body: &str) -> Answer {
    let path = uri.path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let bot = objects::user(BOT, "Bot");
    match (method.clone(), parts.as_slice()) {
        (Method::POST, ["repos", _, _, "pulls"]) if log.limit_first_post_for.is_some() => {
            let seconds = log.limit_first_post_for.take().unwrap_or(0);
            let mut limited = answer(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                    "status": "429"}),
            );
            limited
                .headers
                .insert("retry-after", seconds.to_string().parse().unwrap());
            limited
        }
        (Method::GET, ["repos", owner, name, "pulls"]) => {
            let repo = format!("{owner}/{name}");
            let head = uri
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix("head="))
                .map(|head| octokit::decode(head, true))
                .and_then(|head| head.split_once(':').map(|(_, branch)| branch.to_string()))
                .unwrap_or_default();
            let open: Vec<Value> = log
                .pulls
                .iter()
                .filter(|pull| pull.repo == repo && pull.head == head)
                .map(pull_object)
                .collect();
            answer(StatusCode::OK, Value::Array(open))
        }
        (Method::POST, ["repos", owner, name, "pulls"]) => {
            let field = |key: &str| request[key].as_str().unwrap_or_default().to_string();
            let repo = format!("{owner}/{name}");
            // GitHub keeps one open pull request per head and base.
            if log.pulls.iter().any(|pull| {
                pull.repo == repo && pull.head == field("head") && pull.base == field("base")
            }) {
                return unprocessable(&[format!(
                    "A pull request already exists for {owner}:{}.",
                    field("head")
                )]);
            }
            let number = log.pulls.len() as u64 + 1;
            let pull = Pull {
                number,
                repo,
                head: field("head"),
                base: field("base"),
                title: field("title"),
                body: field("body"),
            };
            let object = pull_object(&pull);
            log.pulls.push(pull);
            answer(StatusCode::CREATED, object)
        }
        (Method::PATCH, ["repos", owner, name, "pulls", number]) => {
            let repo = format!("{owner}/{name}");
            let number: u64 = number.parse().unwrap_or(0);
            match log
                .pulls
                .iter_mut()
                .find(|pull| pull.repo == repo && pull.number == number)
            {
                Some(pull) => {
                    if let Some(title) = request["title"].as_str() {
                        pull.title = title.to_string();
                    }
                    if let Some(body) = request["body"].as_str() {
                        pull.body = body.to_string();
                    }
                    answer(StatusCode::OK, pull_object(pull))
                }
                None => not_found(),
            }
        }
        (Method::GET, ["repos", owner, name, "pulls", number]) => {
            let repo = format!("{owner}/{name}");
            match number
                .parse::<u64>()
                .ok()
                .and_then(|n| Some((n, log.heads.get(&n)?)))
            {
                Some((number, head)) => answer(
                    StatusCode::OK,
                    objects::pull_request(&objects::PullSpec {
                        repo: &repo,
                        number,
                        head_repo: head,
                        head: "fix-flaky-test",
                        base: "main",
                        title: "Fix the flaky test",
                        body: "The retry loop raced the timer.",
                        author: "maintainer",
                    }),
                ),
                None => not_found(),
            }
        }
        (Method::POST, ["repos", owner, name, "issues", number, "comments"]) => {
            let repo = format!("{owner}/{name}");
            let id = 9000 + log.comments.len() as u64;
            let issue: u64 = number.parse().unwrap_or(0);
            let text = request["body"].as_str().unwrap_or_default().to_string();
            let object = objects::issue_comment(&repo, issue, id, &text, &bot);
            log.comments.push(Comment {
                id,
                issue,
                bodies: vec![text],
            });
            answer(StatusCode::CREATED, object)
        }
        (Method::PATCH, ["repos", owner, name, "issues", "comments", id]) => {
            let repo = format!("{owner}/{name}");
            let id: u64 = id.parse().unwrap_or(0);
            let text = request["body"].as_str().unwrap_or_default().to_string();
            match log.comments.iter_mut().find(|comment| comment.id == id) {
                Some(comment) => {
                    comment.bodies.push(text.clone());
                    answer(
                        StatusCode::OK,
                        objects::issue_comment(&repo, comment.issue, id, &text, &bot),
                    )
                }
                None => not_found(),
            }
        }
        (Method::POST, ["repos", owner, name, "pulls", number, "reviews"]) => {
            let repo = format!("{owner}/{name}");
            let number: u64 = number.parse().unwrap_or(0);
            // GitHub refuses the whole review when one comment is on a line the diff does
            // not show.
            let shown = shown_lines(log.files.get(&number).map(Vec::as_slice).unwrap_or(&[]));
            let off_the_diff = request["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    let spot = (
                        c["path"].as_str().unwrap_or_default().to_string(),
                        c["line"].as_u64(),
                    );
                    c["side"].as_str().unwrap_or("RIGHT") == "RIGHT"
                        && !c["line"].is_null()
                        && !shown.contains(&(spot.0, spot.1.unwrap_or(0)))
                });
            if off_the_diff {
                return answer(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Unprocessable Entity",
                        "errors": ["Line could not be resolved"],
                        "documentation_url": "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
                        "status": "422"}),
                );
            }
            let head = objects::head_commit(&repo, number);
            let commit = request["commit_id"].as_str().unwrap_or(&head).to_string();
            let review_id = 7000 + log.reviews.len() as u64;
            for comment in request["comments"].as_array().into_iter().flatten() {
                let id = 5000 + log.review_comments.len() as u64;
                let spot = objects::CommentSpot {
                    path: comment["path"].as_str().unwrap_or_default(),
                    line: comment["line"].as_u64().unwrap_or(1),
                    side: comment["side"].as_str().unwrap_or("RIGHT"),
                };
                let text = comment["body"].as_str().unwrap_or_default();
                let object =
                    objects::review_comment(&repo, number, id, review_id, &spot, text, &bot);
                log.review_comments.push((number, object));
            }
            log.reviews.push((number, request.clone()));
            let text = request["body"].as_str().unwrap_or_default();
            answer(
                StatusCode::OK,
                objects::review(&repo, number, review_id, text, "COMMENTED", &bot, &commit),
            )
        }
        (Method::GET, ["repos", _, _, "pulls", number, "comments"]) => {
            let number: u64 = number.parse().unwrap_or(0);
            let comments = log
                .review_comments
                .iter()
                .filter(|(pr, _)| *pr == number)
                .map(|(_, comment)| comment.clone());
            answer(StatusCode::OK, one_page(uri, comments))
        }
        (Method::GET, ["repos", owner, name, "pulls", number, "reviews"]) => {
            let repo = format!("{owner}/{name}");
            let number: u64 = number.parse().unwrap_or(0);
            let head = objects::head_commit(&repo, number);
            let reviews = log
                .reviews
                .iter()
                .enumerate()
                .filter(|(_, (pr, _))| *pr == number)
                .map(|(n, (_, request))| {
                    let text = request["body"].as_str().unwrap_or_default();
                    objects::review(
                        &repo,
                        number,
                        7000 + n as u64,
                        text,
                        "COMMENTED",
                        &bot,
                        &head,
                    )
                });
            answer(StatusCode::OK, one_page(uri, reviews))
        }
        (Method::GET, ["repos", owner, name, "pulls", number, "files"]) => {
            let repo = format!("{owner}/{name}");
            let number: u64 = number.parse().unwrap_or(0);
            let files = log.files.get(&number).cloned().unwrap_or_default();
            let entries = files
                .iter()
                .map(|(file, patch)| objects::diff_entry(&repo, number, file, patch));
            answer(StatusCode::OK, one_page(uri, entries))
        }
        (Method::GET, ["repos", _, _, "collaborators", user, "permission"]) => {
            let permission = log
                .permissions
                .get(*user)
                .cloned()
                .unwrap_or_else(|| "none".into());
            answer(
                StatusCode::OK,
                objects::collaborator_permission(user, &permission),
            )
        }
        _ => not_found(),
    }
}

/// The pull request the fake holds, as GitHub answers with it.
fn pull_object(pull: &Pull) -> Value {
    objects::pull_request(&objects::PullSpec {
        repo: &pull.repo,
        number: pull.number,
        head_repo: &pull.repo,
        head: &pull.head,
        base: &pull.base,
        title: &pull.title,
        body: &pull.body,
        author: BOT,
    })
}

/// One page of `items`, as GitHub gives a list: `per_page` (30 unless asked, 100 at most)
/// from `page` (the first unless asked).
fn one_page(uri: &Uri, items: impl Iterator<Item = Value>) -> Value {
    let asked = |name: &str| {
        uri.query()
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.parse::<usize>().ok())
    };
    let per_page = asked("per_page").unwrap_or(30).min(100);
    let page = asked("page").unwrap_or(1).max(1);
    Value::Array(items.skip((page - 1) * per_page).take(per_page).collect())
}

/// The new file's lines each patch shows (added or context): where GitHub lets a review
/// comment sit on the RIGHT side. Read here apart from tollgate's own reading of them.
fn shown_lines(files: &[(String, String)]) -> std::collections::BTreeSet<(String, u64)> {
    let mut shown = std::collections::BTreeSet::new();
    for (file, patch) in files {
        let mut line = 0u64;
        for text in patch.lines() {
            if text.starts_with("@@") {
                let plus = text.split(' ').nth(2).unwrap_or("+0");
                line = plus
                    .trim_start_matches('+')
                    .split(',')
                    .next()
                    .and_then(|start| start.parse().ok())
                    .unwrap_or(0);
            } else if text.starts_with('+') || text.starts_with(' ') {
                shown.insert((file.clone(), line));
                line += 1;
            }
        }
    }
    shown
}
