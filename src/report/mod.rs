//! Reports a CI system reads after the run: JUnit XML (and the text summary on stdout).

mod junit;
mod summary;

pub use junit::junit_xml;
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
