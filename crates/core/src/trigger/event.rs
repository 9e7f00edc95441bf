//! A GitHub event payload read as a trigger: which event, who sent it, the words it carries
//! and the pull request it concerns.

use std::path::Path;

use serde_json::Value;

use super::{TriggerConfig, TriggerError};

/// How a run was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Comment,
    ReviewComment,
    Review,
    IssueBody,
    Label,
    Assignee,
    Dispatch,
    Schedule,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Comment => "in a comment",
            Kind::ReviewComment => "in a review comment",
            Kind::Review => "in a review",
            Kind::IssueBody => "in an issue",
            Kind::Label => "by adding a label",
            Kind::Assignee => "by an assignment",
            Kind::Dispatch => "by a workflow dispatch",
            Kind::Schedule => "on a schedule",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Comment => "comment",
            Kind::ReviewComment => "review_comment",
            Kind::Review => "review",
            Kind::IssueBody => "issue",
            Kind::Label => "label",
            Kind::Assignee => "assignee",
            Kind::Dispatch => "dispatch",
            Kind::Schedule => "schedule",
        }
    }
}

/// A triggering event's sender and words.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub kind: Kind,
    pub actor: String,
    pub actor_is_bot: bool,
    /// What the sender wrote (a comment's or review's body, an issue's title and body, a
    /// dispatch's `prompt` input): data for the model.
    pub text: String,
    /// The issue or pull request number, when there is one.
    pub number: Option<u64>,
    /// A pull request whose head must be looked up (a comment on one carries no head).
    pub pull_request: Option<u64>,
    /// The pull request's head repository, when the payload carries it (empty: deleted).
    pub head_repo: Option<String>,
}

/// The event payload the runner wrote (`GITHUB_EVENT_PATH`), within the event cap.
pub fn read_event(path: &Path) -> Result<Value, TriggerError> {
    let input = crate::input_file::Input {
        what: "event payload",
        cap: crate::input_file::EVENT_CAP,
        stdin_flag: false,
    };
    let text = crate::input_file::read_text(path, input)
        .map_err(|err| TriggerError::Event(err.to_string()))?;
    serde_json::from_str(&text)
        .map_err(|err| TriggerError::Event(format!("{}: not JSON: {err}", path.display())))
}

/// Whether `text` holds `phrase` as a word of its own: at the start or after a space, and
/// followed by the end, a space or punctuation (`@tollgate-bot` is not `@tollgate`).
pub fn mentions(text: &str, phrase: &str) -> bool {
    if phrase.is_empty() {
        return false;
    }
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        before.is_none_or(char::is_whitespace)
            && after.is_none_or(|c| c.is_whitespace() || ".,!?;:)".contains(c))
    })
}

fn string(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// The run `event` asks for, or why it asks for none.
pub(super) fn invocation(
    name: &str,
    event: &Value,
    config: &TriggerConfig,
) -> Result<Result<Invocation, String>, TriggerError> {
    let sender = &event["sender"];
    let actor = string(&sender["login"]);
    if actor.is_empty() && name != "schedule" {
        return Err(TriggerError::Event(format!(
            "a {name} event with no sender.login"
        )));
    }
    let actor_is_bot = sender["type"] == "Bot" || actor.ends_with("[bot]");
    let action = event["action"].as_str().unwrap_or_default();
    let pr_head = |pr: &Value| Some(string(&pr["head"]["repo"]["full_name"]));
    let make = |kind, text: String, number: Option<u64>, pull_request, head_repo| Invocation {
        kind,
        actor: actor.clone(),
        actor_is_bot,
        text,
        number,
        pull_request,
        head_repo,
    };
    let phrase = config.phrase.as_str();
    let absent = || format!("the text does not mention {phrase}");
    let invocation = match name {
        "issue_comment" if matches!(action, "created" | "edited") => {
            let body = string(&event["comment"]["body"]);
            if !mentions(&body, phrase) {
                return Ok(Err(absent()));
            }
            let number = event["issue"]["number"].as_u64();
            let on_pr = !event["issue"]["pull_request"].is_null();
            make(Kind::Comment, body, number, number.filter(|_| on_pr), None)
        }
        "pull_request_review_comment" if matches!(action, "created" | "edited") => {
            let body = string(&event["comment"]["body"]);
            if !mentions(&body, phrase) {
                return Ok(Err(absent()));
            }
            let pr = &event["pull_request"];
            make(
                Kind::ReviewComment,
                body,
                pr["number"].as_u64(),
                None,
                pr_head(pr),
            )
        }
        "pull_request_review" if action == "submitted" => {
            let body = string(&event["review"]["body"]);
            if !mentions(&body, phrase) {
                return Ok(Err(absent()));
            }
            let pr = &event["pull_request"];
            make(Kind::Review, body, pr["number"].as_u64(), None, pr_head(pr))
        }
        "issues" | "pull_request" | "pull_request_target" => {
            let item = if name == "issues" {
                &event["issue"]
            } else {
                &event["pull_request"]
            };
            let text = format!("{}\n\n{}", string(&item["title"]), string(&item["body"]));
            let number = item["number"].as_u64();
            let head = (name != "issues").then(|| pr_head(item)).flatten();
            let kind = match action {
                "labeled" => match &config.label {
                    Some(label) if event["label"]["name"] == label.as_str() => Kind::Label,
                    _ => return Ok(Err("the label added is not the trigger label".into())),
                },
                "assigned" => match &config.assignee {
                    Some(login) if event["assignee"]["login"] == login.as_str() => Kind::Assignee,
                    _ => return Ok(Err("the assignee is not the trigger assignee".into())),
                },
                "opened" | "edited" if name == "issues" => {
                    if !mentions(&text, phrase) {
                        return Ok(Err(absent()));
                    }
                    Kind::IssueBody
                }
                other => {
                    return Ok(Err(format!("a {name} event's `{other}` is not a trigger")));
                }
            };
            make(kind, text, number, None, head)
        }
        "workflow_dispatch" => {
            let text = string(&event["inputs"]["prompt"]);
            make(Kind::Dispatch, text, None, None, None)
        }
        "schedule" => make(Kind::Schedule, String::new(), None, None, None),
        other => {
            let why = if action.is_empty() {
                format!("a {other} event is not a trigger")
            } else {
                format!("a {other} event's `{action}` is not a trigger")
            };
            return Ok(Err(why));
        }
    };
    Ok(Ok(invocation))
}
