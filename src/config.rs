//! Turning YAML/JSON configuration text into typed values, with errors that name the file,
//! line and column. Reads no files itself: callers hand in the text and where it came from.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A configuration error located in its file. `line`/`column` are 1-based; 0 means unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl ConfigError {
    pub fn new(file: &Path, line: u64, column: u64, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }

    /// An error about the file as a whole (it could not be read, or it is empty).
    pub fn whole_file(file: &Path, message: impl Into<String>) -> Self {
        Self::new(file, 0, 0, message)
    }
}

/// The most of a message (and so of a value it quotes) an error prints: a 5 MB value in a
/// task file must not become a 5 MB line on a CI log.
pub const MAX_ECHO_CHARS: usize = 1000;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = crate::base::truncate_middle(&self.message, MAX_ECHO_CHARS);
        if self.line == 0 {
            write!(f, "{}: {message}", self.file.display())
        } else {
            write!(
                f,
                "{}:{}:{}: {message}",
                self.file.display(),
                self.line,
                self.column,
            )
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
/// types, duplicate keys and missing required keys are reported at their line and column.
pub fn parse<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::whole_file(file, "the file is empty"));
    }
    serde_saphyr::from_str(text).map_err(|err| {
        let (line, column) = err
            .location()
            .map(|loc| (loc.line(), loc.column()))
            .unwrap_or((0, 0));
        let message = match err.without_snippet() {
            serde_saphyr::Error::Budget { breach, .. } => budget_sentence(breach),
            _ => headline(&err.to_string()),
        };
        ConfigError::new(file, line, column, message)
    })
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
    match first.split_once(": ") {
        Some((prefix, rest)) if prefix.starts_with("line ") => rest.to_string(),
        _ => first.to_string(),
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
    fn a_file_over_the_loader_limits_gets_a_sentence() {
        let list: String = (0..300_000).map(|i| format!("- r{i}\n")).collect();
        let e = parse::<Vec<String>>(&list, Path::new("big.yaml")).unwrap_err();
        assert_eq!(
            e.message,
            "the file is too large to load safely: it has more than 250000 values; split it into smaller files"
        );
    }
}
