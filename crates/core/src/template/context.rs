//! What a single run's placeholders read: its parameters (`{{ NAME }}`), environment
//! variables by explicit name (`{{ env.NAME }}`, never one whose name looks like a secret or
//! that the run withholds), and the GitHub event payload (`{{ github.event.… }}`, from the
//! JSON file `GITHUB_EVENT_PATH` names). Each value is text for the prompt, nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

/// The event payload of a GitHub Actions job, read once when a placeholder needs it.
#[derive(Debug, Clone)]
pub enum EventPayload {
    /// `GITHUB_EVENT_PATH` is not set: not inside GitHub Actions.
    Unset,
    /// The file could not be read or is not JSON: the reason.
    Unreadable(String),
    Loaded(Value),
}

impl EventPayload {
    /// The payload `GITHUB_EVENT_PATH` names.
    pub fn from_env() -> EventPayload {
        match std::env::var_os("GITHUB_EVENT_PATH").filter(|path| !path.is_empty()) {
            None => EventPayload::Unset,
            Some(path) => EventPayload::read(PathBuf::from(path)),
        }
    }

    fn read(path: PathBuf) -> EventPayload {
        let event = crate::input_file::Input {
            what: "event payload (GITHUB_EVENT_PATH)",
            cap: crate::input_file::EVENT_CAP,
            stdin_flag: false,
        };
        let text = match crate::input_file::read_text(&path, event) {
            Ok(text) => text,
            Err(err) => return EventPayload::Unreadable(err.to_string()),
        };
        match serde_json::from_str(&text) {
            Ok(value) => EventPayload::Loaded(value),
            Err(err) => EventPayload::Unreadable(format!(
                "GITHUB_EVENT_PATH {} is not JSON: {err}",
                path.display()
            )),
        }
    }
}

/// Reads one environment variable by name.
pub type EnvReader = Box<dyn Fn(&str) -> Option<String>>;

/// Everything a run's prompt may read.
pub struct RunContext {
    pub params: BTreeMap<String, String>,
    /// Names the run withholds from its commands (the provider key, `redact_env`).
    pub withheld: BTreeSet<String>,
    pub event: EventPayload,
    /// Reads one variable by name (the process environment; tests give their own).
    pub env: EnvReader,
}

impl RunContext {
    /// The value for `path`, or why there is none.
    pub fn fill(&self, path: &[String]) -> Result<String, String> {
        match path {
            [name] if name != "env" && name != "github" => {
                self.params.get(name).cloned().ok_or_else(|| {
                    format!(
                        "`{{{{ {name} }}}}` is not defined: give it with --var {name}=VALUE or --vars-file, or declare it with a default under `params:`"
                    )
                })
            }
            [env, name] if env == "env" => self.variable(name),
            [github, event, rest @ ..] if github == "github" && event == "event" => {
                self.event_value(rest)
            }
            _ => Err(format!(
                "`{{{{ {} }}}}` is not known: placeholders are parameters (`{{{{ NAME }}}}`), `{{{{ env.NAME }}}}` and `{{{{ github.event.… }}}}`",
                path.join(".")
            )),
        }
    }

    fn variable(&self, name: &str) -> Result<String, String> {
        if crate::base::is_secret_env_name(name) || self.withheld.contains(name) {
            return Err(format!(
                "`{{{{ env.{name} }}}}`: {name} is withheld from the run (a credential's name, the provider key or `redact_env`), so it cannot reach the prompt"
            ));
        }
        (self.env)(name).ok_or_else(|| format!("`{{{{ env.{name} }}}}`: {name} is not set"))
    }

    fn event_value(&self, path: &[String]) -> Result<String, String> {
        let shown = || {
            format!(
                "github.event{}",
                path.iter().map(|s| format!(".{s}")).collect::<String>()
            )
        };
        let mut value = match &self.event {
            EventPayload::Loaded(value) => value,
            EventPayload::Unset => {
                return Err(format!(
                    "`{{{{ {} }}}}`: GITHUB_EVENT_PATH is not set (not inside GitHub Actions)",
                    shown()
                ));
            }
            EventPayload::Unreadable(why) => return Err(format!("`{{{{ {} }}}}`: {why}", shown())),
        };
        for segment in path {
            let next = match value {
                Value::Object(map) => map.get(segment),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            value = next.ok_or_else(|| {
                format!(
                    "`{{{{ {} }}}}`: the event payload has no `{segment}` there",
                    shown()
                )
            })?;
        }
        Ok(match value {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
    }
}

/// A parameter's name: letters, digits and `_`, not starting with a digit, and neither `env`
/// nor `github` (the placeholders' own namespaces).
pub fn check_param_name(name: &str) -> Result<(), String> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a parameter name (letters, digits and _, not starting with a digit)"
        ));
    }
    if name == "env" || name == "github" {
        return Err(format!("`{name}` is reserved for `{{{{ {name}.… }}}}`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(event: EventPayload) -> RunContext {
        RunContext {
            params: BTreeMap::from([("title".to_string(), "a: b".to_string())]),
            withheld: BTreeSet::from(["MY_PROVIDER".to_string()]),
            event,
            env: Box::new(|name| {
                ["GITHUB_EVENT_NAME", "MY_PROVIDER", "DEPLOY_TOKEN"]
                    .contains(&name)
                    .then(|| format!("value of {name}"))
            }),
        }
    }

    fn fill(context: &RunContext, path: &str) -> Result<String, String> {
        context.fill(&path.split('.').map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn each_namespace_fills_only_what_it_names() {
        let event = serde_json::json!({"pull_request": {"title": "x: {{ y }}", "number": 7, "labels": [{"name": "bug"}]}});
        let context = context(EventPayload::Loaded(event));
        assert_eq!(fill(&context, "title").unwrap(), "a: b");
        assert!(
            fill(&context, "other")
                .unwrap_err()
                .contains("--var other=VALUE")
        );
        assert_eq!(
            fill(&context, "env.GITHUB_EVENT_NAME").unwrap(),
            "value of GITHUB_EVENT_NAME"
        );
        assert!(
            fill(&context, "env.UNSET")
                .unwrap_err()
                .contains("is not set")
        );
        for withheld in [
            "env.MY_PROVIDER",
            "env.DEPLOY_TOKEN",
            "env.ANTHROPIC_API_KEY",
        ] {
            assert!(
                fill(&context, withheld).unwrap_err().contains("withheld"),
                "{withheld}"
            );
        }
        assert_eq!(
            fill(&context, "github.event.pull_request.title").unwrap(),
            "x: {{ y }}"
        );
        assert_eq!(
            fill(&context, "github.event.pull_request.number").unwrap(),
            "7"
        );
        assert_eq!(
            fill(&context, "github.event.pull_request.labels.0.name").unwrap(),
            "bug"
        );
        assert!(
            fill(&context, "github.event.issue.title")
                .unwrap_err()
                .contains("no `issue`")
        );
        assert!(fill(&context, "github.repository").is_err());
        assert!(fill(&context, "env").is_err());
        let outside = self::context(EventPayload::Unset);
        assert!(
            fill(&outside, "github.event.pull_request.title")
                .unwrap_err()
                .contains("GITHUB_EVENT_PATH is not set")
        );
    }

    #[test]
    fn parameter_names() {
        assert!(check_param_name("pr_title").is_ok());
        for bad in ["", "1x", "a-b", "a.b", "env", "github"] {
            assert!(check_param_name(bad).is_err(), "{bad}");
        }
    }
}
