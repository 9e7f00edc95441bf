//! Secret redaction: every byte tollgate writes (transcript, offloaded results, reports,
//! GitHub outputs, logs) passes through one `Redactor` first. It never decides what runs.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::Regex;

use crate::base::is_secret_env_name;

/// Values shorter than this are not redacted by value: `API_KEY=1` would blank every `1`.
const MIN_SECRET_CHARS: usize = 8;

/// Well-known token shapes, found whatever variable (if any) they came from. Order matters:
/// the Anthropic prefix is tried before the OpenAI one it starts like.
const TOKEN_SHAPES: [(&str, &str); 6] = [
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    ),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,}"),
    ("github_token", r"github_pat_[A-Za-z0-9_]{22,}"),
    ("anthropic_api_key", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    (
        "openai_api_key",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    ),
    ("aws_access_key_id", r"(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
];

/// What may stand before a token: the start, a non-word character, or a JSON escape such
/// as `\n` (a serialised line has `\nsk-ant-…` where the text had a line break). The regex
/// crate has no look-behind, so the prefix is captured and put back.
const TOKEN_PREFIX: &str = r"(?P<pre>^|[^A-Za-z0-9_]|\\[nrt])";

/// A value to replace, and the name it is replaced by.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Secret {
    value: String,
    name: String,
}

/// Replaces secrets with `[REDACTED:NAME]` and counts the replacements. Built once at
/// start-up from the environment; the task's `redact_env` names are added once it is read.
#[derive(Debug)]
pub struct Redactor {
    secrets: RwLock<Vec<Secret>>,
    shapes: Vec<(&'static str, Regex)>,
    count: AtomicU64,
}

impl Redactor {
    /// Secrets from this process's environment: the values of variables whose names look
    /// secret.
    pub fn from_env() -> Redactor {
        let redactor = Redactor::with_vars(std::iter::empty());
        redactor.add_vars(std::env::vars().filter(|(name, _)| is_secret_env_name(name)));
        redactor
    }

    /// A redactor that knows only the token shapes and the given `(name, value)` pairs.
    pub fn with_vars(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let shapes = TOKEN_SHAPES
            .iter()
            .filter_map(|(name, pattern)| {
                Regex::new(&format!("{TOKEN_PREFIX}(?:{pattern})"))
                    .ok()
                    .map(|re| (*name, re))
            })
            .collect();
        let redactor = Redactor {
            secrets: RwLock::new(Vec::new()),
            shapes,
            count: AtomicU64::new(0),
        };
        redactor.add_vars(vars);
        redactor
    }

    /// Adds the values of the named environment variables (the task's `redact_env`).
    pub fn add_env_names(&self, names: &[String]) {
        self.add_vars(
            names
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value))),
        );
    }

    fn add_vars(&self, vars: impl IntoIterator<Item = (String, String)>) {
        let Ok(mut secrets) = self.secrets.write() else {
            return;
        };
        for (name, value) in vars {
            let value = value.trim().to_string();
            if value.chars().count() < MIN_SECRET_CHARS {
                continue;
            }
            // The transcript and JSON reports are redacted after serialisation, where a
            // value with quotes, backslashes or newlines appears escaped.
            let escaped = serde_json::to_string(&value)
                .ok()
                .map(|quoted| quoted[1..quoted.len() - 1].to_string())
                .filter(|escaped| *escaped != value);
            for value in std::iter::once(value).chain(escaped) {
                if !secrets.iter().any(|known| known.value == value) {
                    secrets.push(Secret {
                        value,
                        name: name.clone(),
                    });
                }
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.value.len()));
    }

    /// `text` with every known secret and token shape replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        let mut replaced = 0u64;
        if let Ok(secrets) = self.secrets.read() {
            for secret in secrets.iter() {
                let hits = out.matches(secret.value.as_str()).count();
                if hits > 0 {
                    replaced += hits as u64;
                    out = out.replace(secret.value.as_str(), &label(&secret.name));
                }
            }
        }
        for (name, shape) in &self.shapes {
            let hits = shape.find_iter(&out).count();
            if hits > 0 {
                replaced += hits as u64;
                let replacement = format!("${{pre}}{}", label(name));
                out = shape.replace_all(&out, replacement.as_str()).into_owned();
            }
        }
        self.count.fetch_add(replaced, Ordering::Relaxed);
        out
    }

    /// Replacements made so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

fn label(name: &str) -> String {
    format!("[REDACTED:{name}]")
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::with_vars(std::iter::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn replaces_env_values_and_token_shapes() {
        let redactor = Redactor::with_vars(vars(&[
            ("DB_PASSWORD", "hunter2-hunter2"),
            ("SHORT_TOKEN", "abc"),
        ]));
        let cases = [
            ("pw=hunter2-hunter2.", "pw=[REDACTED:DB_PASSWORD]."),
            ("abc stays", "abc stays"),
            (
                "t ghp_0123456789abcdefghijABCDEFGHIJ0123456789 x",
                "t [REDACTED:github_token] x",
            ),
            (
                "github_pat_11AAAAAAA0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:github_token]",
            ),
            (
                "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
                "key [REDACTED:anthropic_api_key]",
            ),
            (
                "key sk-proj-abcdefghijklmnopqrstuvwxyz0123",
                "key [REDACTED:openai_api_key]",
            ),
            ("AKIAIOSFODNN7EXAMPLE!", "[REDACTED:aws_access_key_id]!"),
            (
                "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz\naGVsbG8=\n-----END OPENSSH PRIVATE KEY-----\nz",
                "a\n[REDACTED:private_key]\nz",
            ),
            (
                "task-shaped words like sk-8 stay",
                "task-shaped words like sk-8 stay",
            ),
            (
                "no-task-abcdefghijklmnopqrstuvwxyz",
                "no-task-abcdefghijklmnopqrstuvwxyz",
            ),
            (
                r#""a\nsk-ant-abcdefghijklmnopqrstuvwxyz""#,
                r#""a\n[REDACTED:anthropic_api_key]""#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redactor.redact(input), expected, "{input}");
        }
        assert_eq!(redactor.count(), 8);
    }

    #[test]
    fn json_escaped_values_are_found_too() {
        let redactor = Redactor::with_vars(vars(&[("MY_SECRET", "line1\n\"quoted\"")]));
        let json =
            serde_json::to_string(&serde_json::json!({ "out": "x line1\n\"quoted\" y" })).unwrap();
        assert_eq!(
            redactor.redact(&json),
            r#"{"out":"x [REDACTED:MY_SECRET] y"}"#
        );
    }

    #[test]
    fn longer_secrets_win_and_names_can_be_added() {
        let redactor = Redactor::with_vars(vars(&[("A_TOKEN", "abcdefgh")]));
        redactor.add_vars(vars(&[("B_TOKEN", "abcdefgh-ijkl")]));
        assert_eq!(redactor.redact("abcdefgh-ijkl"), "[REDACTED:B_TOKEN]");
        assert_eq!(redactor.redact("abcdefgh"), "[REDACTED:A_TOKEN]");
    }
}
