//! Bounded text for what a person or a model reads (long output keeps its head and tail),
//! counted nouns ("1 turn", "2 turns"), the `*` wildcard that rule and matcher names share,
//! and text made safe to put in a URL.

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

/// `noun` as `count` of it reads: singular for one, plural otherwise. The nouns tollgate counts
/// are regular: a consonant and `y` at the end become `ies`, a final `s`, `x`, `ch` or `sh`
/// takes `es`, anything else `s` (the last word of a compound: "tool call" → "tool calls").
pub fn plural<C: PartialEq + From<u8>>(count: C, noun: &str) -> String {
    if count == C::from(1) {
        return noun.to_string();
    }
    let consonant_y = noun
        .strip_suffix('y')
        .and_then(|stem| stem.chars().last())
        .is_some_and(|before| !"aeiou".contains(before));
    if consonant_y {
        format!("{}ies", &noun[..noun.len() - 1])
    } else if ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end)) {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

/// `count` and its noun: "1 turn", "0 tool errors", "3 repositories".
pub fn counted<C: PartialEq + From<u8> + std::fmt::Display + Copy>(count: C, noun: &str) -> String {
    format!("{count} {}", plural(count, noun))
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

/// `text` as one part of a URL (a path segment, a query value): every byte but RFC 3986's
/// unreserved ones as `%XX`, so a `+`, `&`, `#` or `/` in it stays that character and does
/// not end or change the part (a bare `+` in a query is a space to the server).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1u64, "turn"), "1 turn");
        assert_eq!(counted(0u64, "turn"), "0 turns");
        assert_eq!(counted(2usize, "tool error"), "2 tool errors");
        assert_eq!(counted(1u32, "tool error"), "1 tool error");
        assert_eq!(counted(3usize, "repository"), "3 repositories");
        assert_eq!(counted(1usize, "repository"), "1 repository");
        assert_eq!(counted(2usize, "day"), "2 days");
        assert_eq!(counted(2usize, "cache hit"), "2 cache hits");
        assert_eq!(counted(2usize, "match"), "2 matches");
        assert_eq!(plural(7u8, "warning"), "warnings");
    }

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
    fn url_text_keeps_only_the_unreserved_bytes() {
        assert_eq!(
            percent_encode("acme:tollgate/c++#1&x=y"),
            "acme%3Atollgate%2Fc%2B%2B%231%26x%3Dy"
        );
        assert_eq!(percent_encode("a-b.c_d~e"), "a-b.c_d~e");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}
