//! Secret redaction: every byte tollgate writes (transcript, offloaded results, reports,
//! GitHub outputs, logs) passes through one `Redactor` first. It never decides what runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Captures, Regex};

use crate::base::is_secret_env_name;

mod git;

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

    /// Adds the credentials the workspace's git configuration holds (a checkout's
    /// `extraheader`, a remote URL's password), so that they are found by value, in every
    /// derived form, and not only while their key stands before them.
    pub fn add_git_credentials(&self, workdir: &std::path::Path) {
        self.add_vars(git::credentials(workdir));
    }

    /// Adds a secret the run obtained after start-up (a cloud platform's short-lived
    /// token, the CI job's OIDC token), named for its `[REDACTED:NAME]`.
    pub fn add_value(&self, name: &str, value: &str) {
        self.add_vars([(name.to_string(), value.to_string())]);
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
            let derived = derived_forms(&value);
            for value in std::iter::once(value).chain(escaped).chain(derived) {
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
                    replaced += across_breaks(finder, &literals.secrets, &mut out);
                    out
                }
                None => text.to_string(),
            },
            Err(_) => text.to_string(),
        };
        if let Some(keyed) = keyed_credentials()
            && keyed.is_match(&out)
        {
            out = keyed
                .replace_all(&out, |captures: &Captures| {
                    let part = |names: [&str; 3]| {
                        names
                            .iter()
                            .find_map(|name| captures.name(name))
                            .map_or("", |part| part.as_str())
                    };
                    let keep = part(["keep", "keep2", "keep3"]);
                    let value = part(["value", "value2", "value3"]);
                    let at = captures.name("at").map_or("", |at| at.as_str());
                    // Already replaced by value: the count says so once.
                    if value.starts_with("[REDACTED:") {
                        return format!("{keep}{value}{at}");
                    }
                    replaced += 1;
                    let name = if at.is_empty() {
                        "http_authorization"
                    } else {
                        "url_password"
                    };
                    format!("{keep}{}{at}", label(name))
                })
                .into_owned();
        }
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

/// Replaces, in `out`, the known values that stand split by white space or line breaks
/// (also as JSON writes them, `\n`): base64 wrapped at 76 columns (`base64`, MIME), hex
/// wrapped or spaced (`xxd -p`, `od -An -tx1`), a token broken across lines. The text is
/// read with those separators left out, and a value found across one is replaced together
/// with the separators inside it. Returns how many were replaced.
fn across_breaks(finder: &AhoCorasick, secrets: &[Secret], out: &mut String) -> u64 {
    let bytes = out.as_bytes();
    let mut squeezed = Vec::with_capacity(bytes.len());
    // For each byte of `squeezed`, where it stands in `out`.
    let mut origin = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b' ' | b'\t' | b'\n' | b'\r' => at += 1,
            b'\\' => {
                if matches!(bytes.get(at + 1), Some(b'n' | b'r' | b't')) {
                    at += 2;
                } else {
                    // An escape pair is kept whole: `\\n` is a backslash and an `n`.
                    let end = (at + 2).min(bytes.len());
                    squeezed.extend_from_slice(&bytes[at..end]);
                    origin.extend(at..end);
                    at = end;
                }
            }
            byte => {
                squeezed.push(byte);
                origin.push(at);
                at += 1;
            }
        }
    }
    if squeezed.len() == bytes.len() {
        return 0;
    }
    let mut ranges: Vec<(usize, usize, usize)> = Vec::new();
    for found in finder.find_iter(&squeezed) {
        let (start, end) = (origin[found.start()], origin[found.end() - 1] + 1);
        // Found whole on one line already by the first pass.
        if end - start == found.len() {
            continue;
        }
        ranges.push((start, end, found.pattern().as_usize()));
    }
    if ranges.is_empty() {
        return 0;
    }
    let mut rebuilt = String::with_capacity(out.len());
    let mut last = 0;
    for (start, end, pattern) in &ranges {
        // The squeezed text removed only ASCII, so both ends fall on char boundaries.
        rebuilt.push_str(out.get(last..*start).unwrap_or_default());
        rebuilt.push_str(&label(&secrets[*pattern].name));
        last = *end;
    }
    rebuilt.push_str(out.get(last..).unwrap_or_default());
    *out = rebuilt;
    ranges.len() as u64
}

/// Credentials found by the key they stand after, whatever their value: an HTTP
/// `Authorization` (or `Proxy-Authorization`) header's basic, bearer or token credential —
/// the header actions/checkout writes into `.git/config` as
/// `extraheader = AUTHORIZATION: basic <base64 of x-access-token:TOKEN>` — and the value of
/// any git `extraheader`, which is a header a server sees as the caller's credential. What
/// stands before the value (`keep`) is kept. Found before the token shapes, so a token in the
/// header is named for the header. An `extraheader` counts only with a header's
/// `Name:` after it, so prose that mentions the word is left alone. The password of a URL's
/// userinfo (`https://x-access-token:TOKEN@github.com`, `postgres://u:PASSWORD@db`) is
/// found the same way, named `url_password`.
fn keyed_credentials() -> Option<&'static Regex> {
    static KEYED: OnceLock<Option<Regex>> = OnceLock::new();
    KEYED
        .get_or_init(|| {
            Regex::new(concat!(
                r#"(?i)(?P<keep>\bextraheader\s*=?\s*"?[A-Za-z0-9-]+:\s*)(?P<value>\[REDACTED:[^\]]*\]|[^\s"\\][^"\\\r\n]*)"#,
                r#"|(?P<keep2>\b(?:proxy-)?authorization\s*:\s*(?:basic|bearer|token|digest)\s+)(?P<value2>[A-Za-z0-9+/=._~-]{8,})"#,
                r#"|(?P<keep3>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"'\\]+:)(?P<value3>[^\s/@"'\\]{8,})(?P<at>@)"#,
            ))
            .ok()
        })
        .as_ref()
}

/// The forms a secret takes once encoded, each found like the value itself: base64 (standard
/// and URL-safe) as it appears inside a longer encoding at each of the three byte
/// alignments — HTTP Basic's `base64(user:TOKEN)` among them, whatever the user — hex (both
/// cases), and percent-encoding (both cases; only the characters a URL must encode, and
/// every byte). Of a base64 encoding only the characters that depend on the secret alone are
/// taken: the one or two at each end that also carry a neighbour's bits are left, which
/// tells at most a few bits of the secret's first and last byte.
fn derived_forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = Vec::new();
    for alphabet in [BASE64, BASE64_URL] {
        for offset in 0..3 {
            let core = base64_core(bytes, offset, alphabet);
            if core.len() >= MIN_SECRET_CHARS {
                forms.push(core);
            }
        }
    }
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    forms.push(hex.to_ascii_uppercase());
    forms.push(hex);
    let unreserved = |byte: u8| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte);
    let percent = |every: bool, upper: bool| -> String {
        bytes
            .iter()
            .map(|&byte| {
                if !every && unreserved(byte) {
                    char::from(byte).to_string()
                } else if upper {
                    format!("%{byte:02X}")
                } else {
                    format!("%{byte:02x}")
                }
            })
            .collect()
    };
    for every in [false, true] {
        for upper in [true, false] {
            forms.push(percent(every, upper));
        }
    }
    // Encoded twice (`%2541`: a URL inside a URL's query), and reversed (`rev`).
    for upper in [true, false] {
        forms.push(percent(true, upper).replace('%', "%25"));
    }
    forms.push(value.chars().rev().collect());
    forms.retain(|form| form != value);
    forms.sort();
    forms.dedup();
    forms
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters that encode only `bytes` when they start `offset` bytes (0..3)
/// into a 3-byte group of a longer encoding.
fn base64_core(bytes: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let end = offset + bytes.len();
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(bytes);
    padded.resize(end.div_ceil(3) * 3, 0);
    let mut core = String::new();
    for (group, chunk) in padded.chunks(3).enumerate() {
        let bits = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        for char_at in 0..4 {
            // The bytes of the group this character's six bits come from.
            let (first, last) = match char_at {
                0 => (0, 0),
                1 => (0, 1),
                2 => (1, 2),
                _ => (2, 2),
            };
            let (first, last) = (group * 3 + first, group * 3 + last);
            if first >= offset && last < end {
                let index = (bits >> (18 - 6 * char_at)) & 0x3f;
                core.push(char::from(alphabet[index as usize]));
            }
        }
    }
    core
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

    /// Standard base64, as a test writes it independently of the redactor.
    fn b64(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(BASE64[((n >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn encoded_forms_of_a_known_value_are_found_wherever_they_stand() {
        let token = "ghs_0123456789abcdefghijABCDEFGHIJ0123";
        let plain = "p4ss w/ord+&=é!";
        let redactor =
            Redactor::with_vars(vars(&[("GITHUB_TOKEN", token), ("DB_PASSWORD", plain)]));
        let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
        let url: String = plain
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        // Each form, and how many bytes follow the value inside it.
        let mut forms = vec![
            (b64(token.as_bytes()), 0),
            (b64(format!("x-access-token:{token}").as_bytes()), 0),
            (b64(format!("u:{token}").as_bytes()), 0),
            (b64(format!("{{\"auth\":\"{token}\"}}").as_bytes()), 2),
            (
                b64(format!("ab{token}cd").as_bytes())
                    .replace('+', "-")
                    .replace('/', "_"),
                2,
            ),
            (hex.clone(), 0),
            (hex.to_uppercase(), 0),
            (url.clone(), 0),
            (url.to_lowercase(), 0),
            (plain.bytes().map(|b| format!("%{b:02x}")).collect(), 0),
            (b64(plain.as_bytes()), 0),
        ];
        // Inside a longer run of base64, at each of the three alignments.
        for pad in ["", "Q", "QU", "QUI"] {
            forms.push((
                format!("{pad}{}", b64(format!("xyz:{token}").as_bytes())),
                0,
            ));
        }
        for (form, after) in &forms {
            let text = format!("out: {form} end");
            let got = redactor.redact(&text);
            assert!(got.contains("[REDACTED:"), "{form} -> {got}");
            // What is left after the value's encoding is a boundary character or two, the
            // padding, and what encodes the bytes after it.
            let tail = got
                .trim_end_matches(" end")
                .rsplit(']')
                .next()
                .unwrap_or_default();
            assert!(tail.len() <= 4 + 4 * after, "{form} -> {got}");
        }
        // Plain words are not taken for an encoding.
        let text = "the quick brown fox 0123 deadbeef QUJDRA==";
        assert_eq!(redactor.redact(text), text);
    }

    #[test]
    fn a_checkout_extraheader_is_redacted_even_with_an_unknown_token() {
        let redactor = Redactor::default();
        let unknown = b64(b"x-access-token:ghs_notknowntotheredactorXXXXXXXXXXXXXXXX");
        let cases = [
            format!(
                "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {unknown}\n"
            ),
            format!("http.https://github.com/.extraheader=AUTHORIZATION: basic {unknown}"),
            format!("http.https://github.com/.extraheader AUTHORIZATION: basic {unknown}"),
            format!("git -c http.extraheader=\"Authorization: Bearer {unknown}\" fetch"),
            format!("curl -H 'Authorization: token {unknown}' https://api.github.com"),
            format!("Proxy-Authorization: Basic {unknown}"),
            serde_json::to_string(&format!(
                "a\n\textraheader = AUTHORIZATION: basic {unknown}\nb"
            ))
            .unwrap(),
        ];
        for text in cases {
            let got = redactor.redact(&text);
            assert!(!got.contains(&unknown), "{text} -> {got}");
            assert!(got.contains("[REDACTED:http_authorization]"), "{got}");
        }
        // A JSON line stays JSON.
        let line = serde_json::to_string(&serde_json::json!({"out": format!("extraheader = AUTHORIZATION: basic {unknown}\nnext")})).unwrap();
        let value: serde_json::Value = serde_json::from_str(&redactor.redact(&line)).unwrap();
        assert_eq!(
            value["out"],
            "extraheader = AUTHORIZATION: [REDACTED:http_authorization]\nnext"
        );
        for (text, expected) in [
            (
                "git clone https://x-access-token:abcdefgh1234@github.com/o/r",
                "git clone https://x-access-token:[REDACTED:url_password]@github.com/o/r",
            ),
            (
                r#"{"url":"postgres://app:s3cr3t-pass@db:5432/x"}"#,
                r#"{"url":"postgres://app:[REDACTED:url_password]@db:5432/x"}"#,
            ),
            // A port, a short password and mail addresses are not credentials.
            (
                "http://host:8080/a@b and ssh://u:short@h and a@b.c",
                "http://host:8080/a@b and ssh://u:short@h and a@b.c",
            ),
        ] {
            assert_eq!(redactor.redact(text), expected);
        }
        let prose = "the extraheader line and the authorization header are explained here";
        assert_eq!(redactor.redact(prose), prose);
    }

    #[test]
    fn values_split_by_line_breaks_or_spaces_are_found() {
        let token = "ghs_0123456789abcdefghijABCDEFGHIJ0123";
        let redactor = Redactor::with_vars(vars(&[("GITHUB_TOKEN", token)]));
        // `base64` wraps at 76 columns: a token inside a file's encoding spans a break.
        let file = format!("{}TOKEN={token}\nmore", "a".repeat(40));
        let wrapped: Vec<String> = b64(file.as_bytes())
            .as_bytes()
            .chunks(76)
            .map(|line| String::from_utf8_lossy(line).into_owned())
            .collect();
        let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
        let cases = [
            wrapped.join("\n"),
            wrapped.join("\r\n"),
            // As a transcript line holds it.
            serde_json::to_string(&wrapped.join("\n")).unwrap(),
            // `xxd -p` wraps at 60 columns; `od -An -tx1` spaces every byte.
            format!("{}\n{}", &hex[..60], &hex[60..]),
            token
                .bytes()
                .map(|b| format!(" {b:02x}"))
                .collect::<Vec<_>>()
                .join(""),
            format!("{}\n{}", &token[..10], &token[10..]),
            format!("{}\\n{}", &token[..10], &token[10..]),
            token.chars().rev().collect(),
            token.bytes().map(|b| format!("%25{b:02X}")).collect(),
        ];
        for text in cases {
            let got = redactor.redact(&text);
            assert!(got.contains("[REDACTED:GITHUB_TOKEN]"), "{text} -> {got}");
            for piece in [&token[4..14], &token[14..24], &token[24..]] {
                assert!(!got.contains(piece), "{text} -> {got}");
            }
        }
        // Separators inside ordinary text join nothing into a secret.
        let text = "a line\nanother line\\nand an escaped backslash";
        assert_eq!(redactor.redact(text), text);
    }

    #[test]
    fn longer_secrets_win_and_names_can_be_added() {
        let redactor = Redactor::with_vars(vars(&[("A_TOKEN", "abcdefgh")]));
        redactor.add_vars(vars(&[("B_TOKEN", "abcdefgh-ijkl")]));
        assert_eq!(redactor.redact("abcdefgh-ijkl"), "[REDACTED:B_TOKEN]");
        assert_eq!(redactor.redact("abcdefgh"), "[REDACTED:A_TOKEN]");
    }
}
