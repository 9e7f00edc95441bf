//! Small text helpers the tools share: binary detection and bounded output.

/// A file is treated as binary when its first 8 KiB hold a NUL byte or it is not UTF-8.
pub fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    head.contains(&0) || std::str::from_utf8(bytes).is_err()
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
