//! Bounded text for what a person or a model reads (long output keeps its head and tail), and
//! the `*` wildcard that rule and matcher names share.

/// Keeps the head and tail of `text` within `max_chars`, saying how much was cut: the end
/// of a build log matters as much as its start.
pub fn truncate_middle(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let keep = max_chars.saturating_sub(80);
    let head_len = keep / 2;
    let tail_len = keep - head_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    format!(
        "{head}\n… [{} characters omitted] …\n{tail}",
        total - head_len - tail_len
    )
}

/// `*` matches any run of characters (including none); everything else matches itself.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let Some(first) = pieces.next() else {
        return pattern == name;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        // No `*` at all: the whole pattern was `first`.
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_both_ends() {
        let text = format!("{}{}", "a".repeat(500), "z".repeat(500));
        let cut = truncate_middle(&text, 200);
        assert!(cut.starts_with("aaa") && cut.ends_with("zzz"));
        assert!(cut.contains("characters omitted"));
        assert!(cut.chars().count() < 260);
        assert_eq!(truncate_middle("short", 200), "short");
    }
}
