//! Secret redaction: every byte tollgate writes (transcript, offloaded results, reports,
//! GitHub outputs, logs) passes through one `Redactor` first. It never decides what runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Captures, Regex};

use crate::base::is_secret_env_name;

/// Values shorter than this are not redacted by value: `API_KEY=1` would blank every `1`.
const MIN_SECRET_CHARS: usize = 8;

/// Well-known token shapes, found whatever variable (if any) they came from. Order matters:
/// the Anthropic prefix is tried before the OpenAI one it starts like. A shape marked glued is
/// distinctive enough to be found right after a word character too (`xxghp_…`, a token pasted
/// onto other text); the others need what `TOKEN_PREFIX` allows before them, so `disk-…` or
/// `task-…` words are never taken for an OpenAI key.
const TOKEN_SHAPES: [(&str, &str, Glued); 6] = [
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
        Glued::Yes,
    ),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,}", Glued::Yes),
    ("github_token", r"github_pat_[A-Za-z0-9_]{22,}", Glued::Yes),
    (
        "anthropic_api_key",
        r"sk-ant-[A-Za-z0-9_\-]{20,}",
        Glued::Yes,
    ),
    (
        "openai_api_key",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        Glued::No,
    ),
    (
        "aws_access_key_id",
        r"(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        Glued::Yes,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Glued {
    Yes,
    No,
}

/// What may stand before a token that is not glued: the start, a non-word character, or a
/// JSON escape such as `\n` (a serialised line has `\nsk-…` where the text had a line
/// break). The regex crate has no look-behind, so the prefix is captured and put back.
const TOKEN_PREFIX: &str = r"(?P<pre>^|[^A-Za-z0-9_]|\\[nrt])";

/// Every token shape in one regex, compiled once per process: the shapes are constants, so
/// every redactor of a run or a batch shares them. Two groups: the shapes that need a prefix
/// (with every shape listed before the last of them, so that where a prefix stands the
/// leftmost-first alternation still keeps `TOKEN_SHAPES`' order) and the glued ones. A
/// shape's group is named `b{index}` in the first, `g{index}` in the second.
fn token_shapes() -> Option<&'static Regex> {
    static SHAPES: OnceLock<Option<Regex>> = OnceLock::new();
    SHAPES
        .get_or_init(|| {
            let last_bounded = TOKEN_SHAPES
                .iter()
                .rposition(|(_, _, glued)| *glued == Glued::No)?;
            let bounded: Vec<String> = TOKEN_SHAPES[..=last_bounded]
                .iter()
                .enumerate()
                .map(|(index, (_, pattern, _))| format!("(?P<b{index}>{pattern})"))
                .collect();
            let glued: Vec<String> = TOKEN_SHAPES
                .iter()
                .enumerate()
                .filter(|(_, (_, _, glued))| *glued == Glued::Yes)
                .map(|(index, (_, pattern, _))| format!("(?P<g{index}>{pattern})"))
                .collect();
            Regex::new(&format!(
                "{TOKEN_PREFIX}(?:{})|(?:{})",
                bounded.join("|"),
                glued.join("|")
            ))
            .ok()
        })
        .as_ref()
}

/// A value to replace, and the name it is replaced by.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Secret {
    value: String,
    name: String,
}

/// The known secret values and one automaton that finds them all in a single pass, the
/// longest at each place first (so a secret that contains another is replaced whole).
#[derive(Debug, Default)]
struct Literals {
    secrets: Vec<Secret>,
    finder: Option<AhoCorasick>,
}

/// Replaces secrets with `[REDACTED:NAME]` and counts the replacements. Built once at
/// start-up from the environment; the task's `redact_env` names are added once it is read.
#[derive(Debug)]
pub struct Redactor {
    literals: RwLock<Literals>,
    count: AtomicU64,
}

impl Redactor {
    /// Secrets from this process's environment: the values of variables whose names look
    /// secret.
    pub fn from_env() -> Redactor {
        Redactor::with_vars(std::env::vars().filter(|(name, _)| is_secret_env_name(name)))
    }

    /// A redactor that knows only the token shapes and the given `(name, value)` pairs.
    pub fn with_vars(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let redactor = Redactor {
            literals: RwLock::new(Literals::default()),
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
        let Ok(mut literals) = self.literals.write() else {
            return;
        };
        let known = literals.secrets.len();
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
                if !literals.secrets.iter().any(|known| known.value == value) {
                    literals.secrets.push(Secret {
                        value,
                        name: name.clone(),
                    });
                }
            }
        }
        if literals.secrets.len() == known {
            return;
        }
        // Rebuilt only when a value was added: at start-up and once for `redact_env`.
        literals.finder = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(literals.secrets.iter().map(|secret| secret.value.as_str()))
            .ok();
    }

    /// `text` with every known secret and token shape replaced: one pass for the known
    /// values, one for the token shapes.
    pub fn redact(&self, text: &str) -> String {
        let (out, replaced) = self.replace(text);
        self.count.fetch_add(replaced, Ordering::Relaxed);
        out
    }

    /// Redacted as [`Redactor::redact`] does, but not counted: for log lines, which are not
    /// part of the run's record whose replacements the count reports.
    pub fn redact_uncounted(&self, text: &str) -> String {
        self.replace(text).0
    }

    fn replace(&self, text: &str) -> (String, u64) {
        let mut replaced = 0u64;
        let mut out = match self.literals.read() {
            Ok(literals) => match &literals.finder {
                Some(finder) => {
                    let mut out = String::with_capacity(text.len());
                    let mut last = 0;
                    for found in finder.find_iter(text) {
                        out.push_str(&text[last..found.start()]);
                        out.push_str(&label(&literals.secrets[found.pattern().as_usize()].name));
                        last = found.end();
                        replaced += 1;
                    }
                    out.push_str(&text[last..]);
                    out
                }
                None => text.to_string(),
            },
            Err(_) => text.to_string(),
        };
        if let Some(shapes) = token_shapes()
            && shapes.is_match(&out)
        {
            out = shapes
                .replace_all(&out, |captures: &Captures| {
                    replaced += 1;
                    let name = (0..TOKEN_SHAPES.len())
                        .find(|index| {
                            captures.name(&format!("b{index}")).is_some()
                                || captures.name(&format!("g{index}")).is_some()
                        })
                        .map_or("secret", |index| TOKEN_SHAPES[index].0);
                    let pre = captures.name("pre").map_or("", |pre| pre.as_str());
                    format!("{pre}{}", label(name))
                })
                .into_owned();
        }
        (out, replaced)
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
            // Pasted onto other text: distinctive shapes are found all the same.
            (
                "xxxxghp_0123456789abcdefghijABCDEFGHIJ0123456789 x",
                "xxxx[REDACTED:github_token] x",
            ),
            (
                "tokensk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
                "token[REDACTED:anthropic_api_key]",
            ),
            ("idAKIAIOSFODNN7EXAMPLE", "id[REDACTED:aws_access_key_id]"),
            (
                "key:github_pat_11AAAAAAA0123456789_abcdefghijklmnopqrstuvwxyz",
                "key:[REDACTED:github_token]",
            ),
            // The generic OpenAI shape still needs a boundary.
            (
                "disk-abcdefghijklmnopqrstuvwxyz0123",
                "disk-abcdefghijklmnopqrstuvwxyz0123",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redactor.redact(input), expected, "{input}");
        }
        assert_eq!(redactor.count(), 12);
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
