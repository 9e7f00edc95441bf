//! Reports a CI system reads after the run: JUnit XML, SARIF, the GitHub step summary,
//! outputs and annotations (and the text summary on stdout). They read a `RunReport`; the
//! caller redacts what they return before writing it.

pub mod github;
mod junit;
mod sarif;
mod summary;

pub use junit::junit_xml;
pub use sarif::sarif_json;
pub use summary::text_summary;

use serde_json::Value;

/// One line describing a call's input, for reports: the command for Bash, the path for file
/// tools, compact JSON otherwise.
pub fn input_summary(tool: &str, input: &Value) -> String {
    let field = match tool {
        "Bash" => "command",
        "Read" | "Write" | "Edit" => "file_path",
        "Glob" | "Grep" => "pattern",
        _ => "",
    };
    let text = input
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string());
    let one_line = text.replace('\n', "⏎");
    match one_line.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &one_line[..end]),
        None => one_line,
    }
}

/// A unit enum's serde name (`max_turns`, `1a`).
pub(crate) fn serde_plain<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
