//! Small text helpers the tools share: binary detection and bounded output.

/// A file is treated as binary when its first 8 KiB hold a NUL byte or it is not UTF-8.
pub fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    head.contains(&0) || std::str::from_utf8(bytes).is_err()
}

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

/// Cuts one line to `max_chars`, marking the cut.
pub fn clip_line(line: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}… [line truncated]", &line[..end]).into(),
        None => line.into(),
    }
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

    #[test]
    fn binary_detection() {
        assert!(looks_binary(b"abc\0def"));
        assert!(looks_binary(&[0xff, 0xfe, 0x41]));
        assert!(!looks_binary("héllo\n".as_bytes()));
    }

    #[test]
    fn clip_line_marks_the_cut() {
        assert_eq!(clip_line("abcdef", 3), "abc… [line truncated]");
        assert_eq!(clip_line("abc", 3), "abc");
    }
}
