//! The context windows of current models, in tokens, as the vendors publish them: how much
//! prompt one request may carry. Pure data; a task's `compaction.context_window` wins.

/// Model-name prefixes and their windows; the longest matching prefix wins (as for prices).
/// Anthropic's 1M-token window is a beta a request must ask for, so 200k is the window.
const TABLE: &[(&str, u64)] = &[
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o4-mini", 200_000),
    ("o3", 200_000),
];

/// The window of `model`, if the table knows its family; a gateway's vendor prefix
/// (`anthropic/claude-…`) is ignored.
pub fn context_window(model: &str) -> Option<u64> {
    let name = model.rsplit('/').next().unwrap_or(model);
    TABLE
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// The table as rows for documentation.
pub fn table() -> &'static [(&'static str, u64)] {
    TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_have_their_window() {
        assert_eq!(context_window("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(context_window("openai/gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("llama3.1:8b"), None);
    }

    /// docs/reliability.md lists this table.
    #[test]
    fn the_docs_list_the_table() {
        let docs = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reliability.md"
        ))
        .unwrap();
        for (prefix, window) in table() {
            let row = format!("| `{prefix}` | {window} |");
            assert!(docs.contains(&row), "docs/reliability.md lacks {row}");
        }
    }
}
