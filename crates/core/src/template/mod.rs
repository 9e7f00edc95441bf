//! The one template engine of tollgate's prompts: `{{ a.b.c }}` placeholders in text, for
//! `tollgate run` (parameters, `env.NAME`, `github.event.…`: see `context`) and for
//! `tollgate batch` (`repo.…`, in `fleet::template`). Placeholders are strict: a name the
//! context cannot fill is an error at its file:line:column, never an empty string. One pass:
//! a value is inserted as text and never read as a template (or as YAML) again, so a value
//! holding `{{ x }}` or `key: value` arrives as written.

mod context;

use std::path::{Path, PathBuf};

use crate::config::ConfigError;

pub use context::{EventPayload, RunContext, check_param_name};

/// Text with its placeholders located and checked for syntax.
#[derive(Debug, Clone)]
pub struct Template {
    file: PathBuf,
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    /// `{{ a.b.c }}`: its path and where it is written.
    Hole {
        path: Vec<String>,
        line: u64,
        column: u64,
    },
}

impl Template {
    /// Parses `text`, the content of `file` from `first_line` on. Inside `{{ }}` goes a
    /// dotted path of names (`repo.params.pkg`, `github.event.pull_request.title`, array
    /// items by number) or a quoted literal (`{{ "{{" }}` writes `{{`).
    pub fn parse(text: &str, file: &Path, first_line: u64) -> Result<Template, ConfigError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        let mut consumed = 0;
        while let Some(open) = rest.find("{{") {
            pieces.push(Piece::Text(rest[..open].to_string()));
            let (line, column) = position(text, consumed + open, first_line);
            let at = |message: String| ConfigError::new(file, line, column, message);
            let after = &rest[open + 2..];
            let close = closing(after).ok_or_else(|| at("`{{` without its closing `}}`".into()))?;
            let inner = after[..close].trim();
            pieces.push(match literal(inner) {
                Some(text) => Piece::Text(text.to_string()),
                None => Piece::Hole {
                    path: path(inner).ok_or_else(|| {
                        at(format!(
                            "`{{{{ {inner} }}}}` is not a placeholder: write a dotted name such as `{{{{ title }}}}` or `{{{{ env.NAME }}}}`, or `{{{{ \"{{{{\" }}}}` for a literal `{{{{`"
                        ))
                    })?,
                    line,
                    column,
                },
            });
            let used = open + 2 + close + 2;
            consumed += used;
            rest = &rest[used..];
        }
        pieces.push(Piece::Text(rest.to_string()));
        Ok(Template {
            file: file.to_path_buf(),
            pieces,
        })
    }

    /// Whether the text holds a placeholder at all.
    pub fn has_placeholders(&self) -> bool {
        self.pieces
            .iter()
            .any(|piece| matches!(piece, Piece::Hole { .. }))
    }

    /// Checks every placeholder with `known` (which says why a path cannot be filled); the
    /// first that cannot is the error, at its location.
    pub fn check(
        &self,
        mut known: impl FnMut(&[String]) -> Result<(), String>,
    ) -> Result<(), ConfigError> {
        for piece in &self.pieces {
            if let Piece::Hole { path, line, column } = piece {
                known(path).map_err(|why| ConfigError::new(&self.file, *line, *column, why))?;
            }
        }
        Ok(())
    }

    /// The text with every placeholder filled by `fill`; the first it cannot fill is the
    /// error, at its location.
    pub fn render(
        &self,
        mut fill: impl FnMut(&[String]) -> Result<String, String>,
    ) -> Result<String, ConfigError> {
        let mut text = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(part) => text.push_str(part),
                Piece::Hole { path, line, column } => {
                    let value = fill(path)
                        .map_err(|why| ConfigError::new(&self.file, *line, *column, why))?;
                    text.push_str(&value);
                }
            }
        }
        Ok(text)
    }
}

/// Where `}}` closes a placeholder, skipping one inside a quoted literal.
fn closing(after: &str) -> Option<usize> {
    let trimmed = after.trim_start();
    let lead = after.len() - trimmed.len();
    if let Some(quote) = trimmed.chars().next().filter(|c| *c == '"' || *c == '\'')
        && let Some(end) = trimmed[1..].find(quote)
    {
        let from = lead + 1 + end + 1;
        return after[from..].find("}}").map(|close| from + close);
    }
    after.find("}}")
}

/// `"text"` or `'text'`: the text, written as it is.
fn literal(inner: &str) -> Option<&str> {
    let quote = inner.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    inner
        .strip_prefix(quote)?
        .strip_suffix(quote)
        .filter(|text| !text.contains(quote))
}

/// A dotted path of names made of letters, digits, `_` and `-`.
fn path(inner: &str) -> Option<Vec<String>> {
    let segments: Vec<String> = inner.split('.').map(str::to_string).collect();
    segments
        .iter()
        .all(|segment| {
            !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .then_some(segments)
}

/// 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize, first_line: u64) -> (u64, u64) {
    let before = &text[..offset];
    let line = first_line + before.matches('\n').count() as u64;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |newline| {
            before[newline + 1..].chars().count()
        }) as u64
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Template, ConfigError> {
        Template::parse(text, Path::new("t.yaml"), 1)
    }

    #[test]
    fn values_are_inserted_once_and_never_read_again() {
        let template = parse("title: {{ title }} / {{a.b.0}}").unwrap();
        let text = template
            .render(|path| match path.join(".").as_str() {
                "title" => Ok("{{ x }}: y".into()),
                "a.b.0" => Ok("z".into()),
                other => Err(format!("unknown {other}")),
            })
            .unwrap();
        assert_eq!(text, "title: {{ x }}: y / z");
    }

    #[test]
    fn literals_write_braces() {
        let template = parse(r#"a {{ "{{" }} b {{ '}}' }} c"#).unwrap();
        assert!(!template.has_placeholders());
        assert_eq!(
            template.render(|_| Err(String::new())).unwrap(),
            "a {{ b }} c"
        );
    }

    #[test]
    fn errors_point_at_the_placeholder() {
        let cases: &[(&str, u64, u64, &str)] = &[
            ("x\n\n{{ title", 3, 1, "without its closing"),
            ("a\n  b {{ a b }}", 2, 5, "is not a placeholder"),
            ("{{ a..b }}", 1, 1, "is not a placeholder"),
            ("{{}}", 1, 1, "is not a placeholder"),
        ];
        for (text, line, column, message) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!((err.line, err.column), (*line, *column), "{text}");
            assert!(err.message.contains(message), "{}", err.message);
        }
        let err = parse("ok\n  {{ missing }}")
            .unwrap()
            .render(|_| Err("undefined".into()))
            .unwrap_err();
        assert_eq!(
            (err.line, err.column, err.message.as_str()),
            (2, 3, "undefined")
        );
    }
}
