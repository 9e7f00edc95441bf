//! Turning YAML/JSON configuration text into typed values, with errors that name the file,
//! line and column. Reads no files itself: callers hand in the text and where it came from.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A configuration error located in its file. `line`/`column` are 1-based; 0 means unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    pub message: String,
    /// The offending line, when the text was at hand ([`ConfigError::with_source`]): shown
    /// under the message with a caret, as a compiler shows it.
    pub snippet: Option<Box<SourceLine>>,
    /// What to do about it ("did you mean `limits`?"), shown last.
    pub hint: Option<Box<str>>,
    /// The key the file's type does not have, when that is the error: a loader may know the
    /// key from a neighbouring format (`batch:` in a task given to `tollgate run`).
    pub unknown_key: Option<Box<str>>,
    /// Further errors of the same file found in the same pass (every unknown key of a settings
    /// file at once), in file order: shown after this one, so one run reports them all.
    /// Boxed: most errors have none, and errors are passed by value everywhere.
    pub more: Option<Box<Vec<ConfigError>>>,
}

/// One line of a configuration file and the part of it an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// The line (or, for a very long one, the window around the error), without its break.
    pub text: String,
    /// Byte range of `text` the caret marks.
    pub span: Range<usize>,
}

impl ConfigError {
    pub fn new(file: &Path, line: u64, column: u64, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            line,
            column,
            message: message.into(),
            snippet: None,
            hint: None,
            unknown_key: None,
            more: None,
        }
    }

    /// The further errors of the same file (see `more`).
    pub fn more(&self) -> &[ConfigError] {
        self.more.as_deref().map_or(&[], Vec::as_slice)
    }

    /// This error and `others` of the same file as one: the first in file order, with the
    /// rest shown after it.
    pub fn with_others(self, others: Vec<ConfigError>) -> ConfigError {
        if others.is_empty() {
            return self;
        }
        let mut all: Vec<ConfigError> = std::iter::once(self).chain(others).collect();
        all.sort_by_key(|err| (err.line, err.column));
        // Not empty: it holds `self`.
        let mut first = all.remove(0);
        first.more.get_or_insert_default().extend(all);
        first
    }

    /// An error about the file as a whole (it could not be read, or it is empty).
    pub fn whole_file(file: &Path, message: impl Into<String>) -> Self {
        Self::new(file, 0, 0, message)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into().into());
        self
    }

    /// Attaches the offending line of `text`, the content of `file`, when the error is
    /// located there and has no snippet yet; an error about another file is left as it is.
    pub fn with_source(mut self, file: &Path, text: &str) -> Self {
        if self.snippet.is_none() && self.line > 0 && self.file == file {
            self.snippet = SourceLine::at(text, self.line, self.column).map(Box::new);
        }
        if let Some(more) = self.more.take() {
            let more = more
                .into_iter()
                .map(|more| more.with_source(file, text))
                .collect();
            self.more = Some(Box::new(more));
        }
        self
    }

    /// The first line alone: `file:line:column: message`.
    pub fn headline(&self) -> String {
        let message = tollgate_base::truncate_middle(&self.message, MAX_ECHO_CHARS);
        if self.line == 0 {
            format!("{}: {message}", self.file.display())
        } else {
            format!(
                "{}:{}:{}: {message}",
                self.file.display(),
                self.line,
                self.column
            )
        }
    }
}

/// The most of a line a snippet shows: a minified one-line JSON policy must not become a
/// megabyte of log.
const MAX_SNIPPET_CHARS: usize = 160;

impl SourceLine {
    /// Line `line` (1-based) of `text`, marking the token that starts at `column` (1-based,
    /// in characters); `None` when the text has no such line.
    pub fn at(text: &str, line: u64, column: u64) -> Option<SourceLine> {
        let index = usize::try_from(line.checked_sub(1)?).ok()?;
        let whole = text.split('\n').nth(index)?;
        let whole = whole.strip_suffix('\r').unwrap_or(whole);
        let chars: Vec<char> = whole.chars().collect();
        let start = usize::try_from(column.saturating_sub(1))
            .unwrap_or(usize::MAX)
            .min(chars.len());
        let end = token_end(&chars, start);
        // A window of the line around the token, so a long line stays short.
        let from = start.saturating_sub(MAX_SNIPPET_CHARS / 2);
        let to = chars.len().min(from + MAX_SNIPPET_CHARS);
        let mut shown = String::new();
        if from > 0 {
            shown.push('…');
        }
        let offset = |upto: usize| {
            shown.len()
                + chars[from..upto]
                    .iter()
                    .map(|c| c.len_utf8())
                    .sum::<usize>()
        };
        let span = offset(start)..offset(end.min(to));
        shown.extend(&chars[from..to]);
        if to < chars.len() {
            shown.push('…');
        }
        Some(SourceLine { text: shown, span })
    }
}

/// Where the token starting at `start` ends: a quoted string to its closing quote, else the
/// run of characters up to white space or YAML/JSON punctuation. At least one character when
/// the line has one, so the caret is never empty.
fn token_end(chars: &[char], start: usize) -> usize {
    let Some(&first) = chars.get(start) else {
        return start;
    };
    if first == '"' || first == '\'' {
        let close = chars[start + 1..]
            .iter()
            .position(|&c| c == first)
            .map_or(chars.len(), |at| start + 2 + at);
        return close;
    }
    let stop = |c: char| c.is_whitespace() || matches!(c, ',' | ']' | '}' | '#');
    let mut end = start;
    while end < chars.len() && !stop(chars[end]) {
        if chars[end] == ':' && chars.get(end + 1).is_none_or(|c| c.is_whitespace()) {
            break;
        }
        end += 1;
    }
    end.max(start + 1)
}

/// The most of a message (and so of a value it quotes) an error prints: a 5 MB value in a
/// task file must not become a 5 MB line on a CI log.
pub const MAX_ECHO_CHARS: usize = 1000;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_one(f)?;
        for more in self.more() {
            f.write_str("\n\n")?;
            more.fmt_one(f)?;
        }
        if !self.more().is_empty() {
            write!(
                f,
                "\n\n{} errors in {}",
                self.more().len() + 1,
                self.file.display()
            )?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// This error alone, without those in `more`.
    fn fmt_one(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        let hint = self
            .hint
            .as_deref()
            .map(|hint| tollgate_base::truncate_middle(hint, MAX_ECHO_CHARS));
        match &self.snippet {
            Some(snippet) => {
                use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
                let source = Snippet::source(snippet.text.as_str())
                    .line_start(usize::try_from(self.line).unwrap_or(usize::MAX))
                    .annotation(AnnotationKind::Primary.span(snippet.span.clone()));
                let mut group = Group::with_level(Level::ERROR).element(source);
                if let Some(hint) = &hint {
                    group = group.element(Level::HELP.message(hint.as_str()));
                }
                write!(f, "\n{}", Renderer::plain().render(&[group]))
            }
            None => match hint {
                Some(hint) => write!(f, "\n  = help: {hint}"),
                None => Ok(()),
            },
        }
    }
}

/// A source location inside a configuration file, kept on values (rules) whose later
/// decisions must point back at the line that made them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SourceLocation {
    pub file: PathBuf,
    pub line: u64,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Parses YAML (JSON is accepted too: it is YAML's flow style) into `T`. Unknown keys, wrong
/// types, duplicate keys and missing required keys are reported at their line and column, in
/// words (never the loader's own), with the line shown and a "did you mean" where one fits.
pub fn parse<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::whole_file(file, "the file is empty"));
    }
    serde_saphyr::from_str(text).map_err(|err| {
        let (line, column) = err
            .location()
            .map(|loc| (loc.line(), loc.column()))
            .unwrap_or((0, 0));
        let mut error = ConfigError::new(file, line, column, String::new()).with_source(file, text);
        if let Some(comment) = json_comment(text, line) {
            // YAML reads `// x` in a flow mapping as a key: say what it really is.
            error.message = format!("`{comment}` starts no comment in JSON");
            error.hint = Some(
                "JSON has no comments (JSONC, as in an editor's settings, is not JSON): remove \
them, or write the file as YAML, where `#` starts a comment"
                    .into(),
            );
            return error;
        }
        let token = error
            .snippet
            .as_ref()
            .and_then(|snippet| snippet.text.get(snippet.span.clone()))
            .unwrap_or_default()
            .to_string();
        describe(&err, &token, &mut error);
        error
    })
}

/// The keys a struct `T` takes (its fields and their aliases), as serde's derive lists them
/// for its own "unknown field" error: a check of every key at once then knows what the types
/// know, from the types. Empty for a type that is not a plain struct.
pub fn struct_keys<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut keys: &'static [&'static str] = &[];
    // The probe only records the field list and fails: no value is ever made.
    let _ = T::deserialize(FieldsOf(&mut keys));
    keys
}

/// A deserializer that answers nothing and remembers the fields a struct asks for.
struct FieldsOf<'a>(&'a mut &'static [&'static str]);

impl<'de> serde::Deserializer<'de> for FieldsOf<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(serde::de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// A document's mappings as far as their keys go: each key with its place and, when its value
/// is a mapping, that mapping's keys. What a check of every key at once walks, since serde
/// stops at the first unknown one.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeyTree(pub Vec<KeyNode>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyNode {
    pub key: String,
    pub line: u64,
    pub column: u64,
    /// The keys of its value, when that is a mapping.
    pub value: Option<KeyTree>,
}

impl KeyTree {
    /// The keys of `text`'s top-level mapping; `None` when it does not load as one (its
    /// parse error is then the error to show).
    pub fn of(text: &str) -> Option<KeyTree> {
        // YAML reads a JSON comment as part of a key: the keys it finds are not the file's.
        let jsonc = text.trim_start().starts_with('{')
            && text
                .lines()
                .any(|line| comment_outside_strings(line).is_some());
        if jsonc {
            return None;
        }
        match serde_saphyr::from_str::<Shape>(text).ok()? {
            Shape::Map(tree) => Some(tree),
            Shape::Other => None,
        }
    }
}

/// A value, seen only for whether it is a mapping.
enum Shape {
    Map(KeyTree),
    Other,
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Shape, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> serde::de::Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<serde_saphyr::Spanned<KeyText>>()? {
            let value = match map.next_value::<Shape>()? {
                Shape::Map(tree) => Some(tree),
                Shape::Other => None,
            };
            keys.push(KeyNode {
                key: key.value.0,
                line: key.referenced.line(),
                column: key.referenced.column(),
                value,
            });
        }
        Ok(Shape::Map(KeyTree(keys)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Shape::Other)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Shape, D::Error> {
        <Shape as serde::Deserialize>::deserialize(d)
    }

    fn visit_newtype_struct<D: serde::Deserializer<'de>>(self, d: D) -> Result<Shape, D::Error> {
        <Shape as serde::Deserialize>::deserialize(d)
    }

    fn visit_none<E>(self) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<Shape, E> {
        Ok(Shape::Other)
    }
}

/// A mapping key as text, whatever scalar it is written as (`1:` and `true:` are keys too).
struct KeyText(String);

impl<'de> serde::Deserialize<'de> for KeyText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<KeyText, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = KeyText;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_str<E>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }

            fn visit_bool<E>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }

            fn visit_i64<E>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }

            fn visit_u64<E>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }

            fn visit_f64<E>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }

            fn visit_unit<E>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_string()))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

/// Fills `error`'s message (and hint, and unknown key) from the loader's typed error.
/// `token` is the text at the error's location.
fn describe(err: &serde_saphyr::Error, token: &str, error: &mut ConfigError) {
    use serde_saphyr::Error as E;
    match innermost(err) {
        E::Budget { breach, .. } => error.message = budget_sentence(breach),
        E::SerdeUnknownField {
            field, expected, ..
        } => {
            error.message = format!("unknown field `{field}`");
            error.hint = Some(choice_hint(field, expected).into());
            error.unknown_key = Some(field.as_str().into());
        }
        E::SerdeUnknownVariant {
            variant, expected, ..
        } => {
            error.message = format!("unknown value `{variant}`");
            error.hint = Some(choice_hint(variant, expected).into());
        }
        E::DuplicateMappingKey { key, .. } => {
            error.message = match key {
                Some(key) => format!("`{key}` is given twice in the same mapping"),
                None => "a key is given twice in the same mapping".to_string(),
            };
            error.hint = Some("keep one of them".into());
        }
        E::SerdeMissingField { field, .. } => error.message = format!("missing field `{field}`"),
        E::InvalidScalar { ty, .. } => {
            error.message = format!("expected {}, found {}", plain_type(ty), found(token));
        }
        E::Unexpected { expected, .. } => {
            error.message = format!("expected {}, found {}", plain_type(expected), found(token));
        }
        E::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | E::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => {
            error.message = format!(
                "expected {}, found {}",
                plain_type(expected),
                plain_type(unexpected)
            );
        }
        E::SerdeInvalidLength { len, expected, .. } => {
            error.message = format!("expected {}, found {len} items", plain_type(expected));
        }
        E::InvalidBooleanStrict { .. } => {
            error.message = format!("expected true or false, found {}", found(token));
        }
        other => {
            error.message =
                headline(&other.render_with_formatter(&serde_saphyr::UserMessageFormatter));
        }
    }
}

/// The error itself, out of the loader's wrappers (a snippet, an alias's two locations).
fn innermost(err: &serde_saphyr::Error) -> &serde_saphyr::Error {
    match err.without_snippet() {
        serde_saphyr::Error::AliasError { error, .. } => innermost(error),
        other => other,
    }
}

/// "did you mean `x`?" when a close name exists, else the names there are.
fn choice_hint(given: &str, expected: &[&str]) -> String {
    match did_you_mean(given, expected.iter().copied()) {
        Some(close) => format!("did you mean `{close}`?"),
        None if expected.is_empty() => "nothing is accepted here".to_string(),
        None => format!("expected one of: {}", expected.join(", ")),
    }
}

/// The candidate closest to `given`, when it is close enough to be a slip (a transposition,
/// a letter or two, another case): the "did you mean" of every unknown name.
pub fn did_you_mean<'a>(
    given: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let given_lower = given.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| {
            let distance = strsim::damerau_levenshtein(&given_lower, &candidate.to_lowercase());
            (distance, candidate)
        })
        .filter(|(distance, candidate)| {
            let longer = given.chars().count().max(candidate.chars().count());
            *distance <= (longer / 4).max(1) && *distance < longer
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The text at an error, as the thing it is.
fn found(token: &str) -> String {
    match token.chars().next() {
        None => "nothing".to_string(),
        Some('[') => "a list".to_string(),
        Some('{') => "a mapping".to_string(),
        Some('-') if token == "-" => "a list".to_string(),
        Some(_) => format!("`{token}`"),
    }
}

/// Serde's type words (`u32`, `a map`, `struct Limits`) as a YAML user says them.
fn plain_type(words: &str) -> String {
    let whole = |max: u64| format!("a whole number from 0 to {max}");
    match words {
        "u8" => whole(u8::MAX.into()),
        "u16" => whole(u16::MAX.into()),
        "u32" => whole(u32::MAX.into()),
        "u64" | "usize" => whole(u64::MAX),
        "i8" | "i16" | "i32" | "i64" | "isize" | "an integer" => "a whole number".to_string(),
        "f32" | "f64" | "a float" => "a number".to_string(),
        "bool" => "true or false".to_string(),
        "a map" | "map" | "mapping start" | "empty mapping start" => "a mapping".to_string(),
        "a sequence" | "sequence" | "seq" | "sequence start" => "a list".to_string(),
        "bool expected" | "missing bool" => "true or false".to_string(),
        "scalar" | "string scalar" | "str expected" | "missing string" | "string" => {
            "a string".to_string()
        }
        "ptr expects number" | "missing numeric ptr" => "a number".to_string(),
        "ptr expects unsigned integer" => "a whole number".to_string(),
        "unit value" => "nothing".to_string(),
        other if other.starts_with("struct ") || other.starts_with("map ") => {
            "a mapping".to_string()
        }
        other if other.starts_with("a sequence") => "a list".to_string(),
        other if other.starts_with("option ") => other.trim_start_matches("option ").to_string(),
        other => other.to_string(),
    }
}

/// A `//` or `/*` outside a string on the error's line or the one before (YAML may report
/// the key after the comment), as a JSONC file has them.
fn json_comment(text: &str, line: u64) -> Option<&'static str> {
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let lines: Vec<&str> = text.split('\n').collect();
    let looks_like_json = text.trim_start().starts_with('{');
    if !looks_like_json {
        return None;
    }
    [index.checked_sub(1), Some(index)]
        .into_iter()
        .flatten()
        .filter_map(|at| lines.get(at))
        .find_map(|line| comment_outside_strings(line))
}

fn comment_outside_strings(line: &str) -> Option<&'static str> {
    let mut in_string = false;
    let mut escaped = false;
    let mut previous = ' ';
    for c in line.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else {
            match (previous, c) {
                ('/', '/') => return Some("//"),
                ('/', '*') => return Some("/*"),
                (_, '"') => in_string = true,
                _ => {}
            }
        }
        previous = c;
    }
    None
}

/// A JSON parser's error, located, without the parser's own " at line L column C" tail.
pub fn json_error(err: &serde_json::Error, file: &Path) -> ConfigError {
    let said = err.to_string();
    let message = match said.rfind(" at line ") {
        Some(at) => said[..at].to_string(),
        None => said,
    };
    ConfigError::new(file, err.line() as u64, err.column() as u64, message)
}

/// The YAML loader's safety limits, said as a sentence (its own message is a debug dump).
fn budget_sentence(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach;
    let what = match breach {
        BudgetBreach::Nodes { nodes } => format!("more than {} values", nodes - 1),
        BudgetBreach::Events { events } => format!("more than {} parser events", events - 1),
        BudgetBreach::Depth { depth } => format!("nesting deeper than {} levels", depth - 1),
        BudgetBreach::Aliases { aliases } => format!("more than {} aliases", aliases - 1),
        BudgetBreach::Anchors { anchors } => format!("more than {} anchors", anchors - 1),
        BudgetBreach::Documents { documents } => {
            format!("more than {} documents", documents - 1)
        }
        BudgetBreach::ScalarBytes { .. } | BudgetBreach::InputBytes { .. } => {
            "more text than the loader accepts".to_string()
        }
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => {
            format!("{aliases} aliases for {anchors} anchors, an alias bomb's shape")
        }
        _ => "more than the loader accepts".to_string(),
    };
    format!("the file is too large to load safely: it has {what}; split it into smaller files")
}

/// A unit enum's name as it is written in files and events (`dontAsk`, `max_turns`, `1a`),
/// so messages and reports spell values the way users write them.
pub fn serde_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// serde-saphyr renders "error: line L column C: message" followed by a source snippet; the
/// location is reported by `ConfigError` itself, so only the message is kept.
fn headline(rendered: &str) -> String {
    let first = rendered.lines().next().unwrap_or(rendered);
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = match first.split_once(": ") {
        Some((prefix, rest)) if prefix.starts_with("line ") => rest,
        _ => first,
    };
    // The location is the error's own; the loader may repeat it at the end.
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        count: Option<u32>,
    }

    fn err(text: &str) -> ConfigError {
        parse::<Doc>(text, Path::new("t.yaml")).unwrap_err()
    }

    #[test]
    fn unknown_key_is_located() {
        let e = err("name: x\nbogus: 1\n");
        assert_eq!((e.line, e.column), (2, 1));
        assert!(e.message.contains("unknown field `bogus`"), "{e}");
        assert!(
            e.to_string().starts_with("t.yaml:2:1: unknown field"),
            "{e}"
        );
    }

    #[test]
    fn struct_keys_lists_fields_and_their_aliases() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Aliased {
            #[serde(alias = "otherName")]
            one: u8,
            #[serde(rename = "two")]
            second: u8,
        }
        assert_eq!(struct_keys::<Doc>(), ["name", "count"]);
        assert_eq!(struct_keys::<Aliased>(), ["one", "otherName", "two"]);
        assert!(struct_keys::<Vec<String>>().is_empty());
    }

    #[test]
    fn the_key_tree_has_every_key_with_its_place() {
        let node = |key: &str, line, column, value| KeyNode {
            key: key.to_string(),
            line,
            column,
            value,
        };
        let yaml = "a: 1\nb:\n  c: [x, {y: 1}]\n  d: {e: 1}\n1: z\n";
        assert_eq!(
            KeyTree::of(yaml),
            Some(KeyTree(vec![
                node("a", 1, 1, None),
                node(
                    "b",
                    2,
                    1,
                    Some(KeyTree(vec![
                        node("c", 3, 3, None),
                        node("d", 4, 3, Some(KeyTree(vec![node("e", 4, 7, None)]))),
                    ]))
                ),
                node("1", 5, 1, None),
            ]))
        );
        let json = "{\n  \"p\": {\"q\": 1},\n  \"r\": null\n}";
        let tree = KeyTree::of(json).unwrap();
        assert_eq!(
            tree.0
                .iter()
                .map(|n| (n.key.as_str(), n.line, n.column))
                .collect::<Vec<_>>(),
            [("p", 2, 3), ("r", 3, 3)]
        );
        assert_eq!(KeyTree::of("[1, 2]\n"), None);
        assert_eq!(KeyTree::of("a: [\n"), None);
        assert_eq!(KeyTree::of("{\n  // why\n  \"a\": 1\n}"), None);
    }

    #[test]
    fn wrong_type_and_missing_key_are_located() {
        let e = err("name: x\ncount: lots\n");
        assert_eq!((e.line, e.column), (2, 8));
        let e = err("count: 3\n");
        assert!(e.message.contains("missing field `name`"), "{e}");
    }

    #[test]
    fn duplicate_keys_and_empty_files_are_errors() {
        assert_eq!(err("name: a\nname: b\n").line, 2);
        assert_eq!(err("  \n").message, "the file is empty");
    }

    #[test]
    fn json_is_accepted() {
        let doc: Doc = parse("{\"name\": \"a\",\n\t\"count\": 2}", Path::new("t.json")).unwrap();
        assert_eq!(doc.count, Some(2));
    }

    #[test]
    fn did_you_mean_takes_slips_not_other_words() {
        let keys = ["version", "name", "limits", "max_turns", "deny"];
        let cases = [
            ("limts", Some("limits")),
            ("Limits", Some("limits")),
            ("max_trns", Some("max_turns")),
            ("denny", Some("deny")),
            ("verison", Some("version")),
            ("x", None),
            ("prompt", None),
            ("named_thing", None),
        ];
        for (given, expected) in cases {
            assert_eq!(did_you_mean(given, keys), expected, "{given}");
        }
    }

    #[test]
    fn the_snippet_marks_the_token_and_keeps_a_long_line_short() {
        let line = SourceLine::at("a: 1\n  key: \"quoted value\", next\n", 2, 8).unwrap();
        assert_eq!(&line.text[line.span.clone()], "\"quoted value\"");
        let long = format!("{{{}\"bad\": 1}}", "\"k\": 1, ".repeat(2000));
        let column = long.find("\"bad\"").unwrap() as u64 + 1;
        let line = SourceLine::at(&long, 1, column).unwrap();
        assert!(
            line.text.chars().count() <= MAX_SNIPPET_CHARS + 2,
            "{}",
            line.text
        );
        assert_eq!(&line.text[line.span.clone()], "\"bad\"");
        assert!(line.text.starts_with('…'));
        assert_eq!(SourceLine::at("a: 1\n", 5, 1), None);
    }

    #[test]
    fn comments_in_json_are_named_and_those_in_strings_are_not() {
        assert_eq!(comment_outside_strings(r#"  "a": 1, // why"#), Some("//"));
        assert_eq!(comment_outside_strings(r#"  /* all */ "a": 1"#), Some("/*"));
        assert_eq!(
            comment_outside_strings(r#"  "url": "https://x.org/a""#),
            None
        );
        assert_eq!(comment_outside_strings(r#"  "q": "\" // \"""#), None);
        let e = err("{\n  \"name\": \"a\", // the name\n  \"count\": 1\n}");
        assert_eq!(e.message, "`//` starts no comment in JSON");
        assert!(e.hint.unwrap().contains("JSON has no comments"));
    }

    #[test]
    fn loader_words_become_plain_ones() {
        let e = err("name: x\nname: y\n");
        assert_eq!(e.message, "`name` is given twice in the same mapping");
        let e = err("name: x\ncount: -1\n");
        assert_eq!(
            e.message,
            "expected a whole number from 0 to 4294967295, found `-1`"
        );
        let e = err("name: [a]\n");
        assert!(e.message.starts_with("expected a string, found"), "{e}");
        let e = err("nmae: x\n");
        assert_eq!(e.hint.as_deref(), Some("did you mean `name`?"));
        assert_eq!(e.unknown_key.as_deref(), Some("nmae"));
        let shown = e.to_string();
        assert_eq!(
            shown,
            "t.yaml:1:1: unknown field `nmae`\n  |\n1 | nmae: x\n  | ^^^^\n  |\n  = help: did you mean `name`?"
        );
    }

    #[test]
    fn a_file_over_the_loader_limits_gets_a_sentence() {
        let list: String = (0..300_000).map(|i| format!("- r{i}\n")).collect();
        let e = parse::<Vec<String>>(&list, Path::new("big.yaml")).unwrap_err();
        assert_eq!(
            e.message,
            "the file is too large to load safely: it has more than 250000 values; split it into smaller files"
        );
    }
}
