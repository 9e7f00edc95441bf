//! The two pieces of Markdown the generated tables of `docs/bash.md` are made of.

/// A table cell: a `|`, even inside a code span, would end the cell.
pub(crate) fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Each word as code, joined by `separator`.
pub(crate) fn code_list(words: &[&str], separator: &str) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(separator)
}
