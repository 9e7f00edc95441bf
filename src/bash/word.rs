//! Turns a tree-sitter word node into the literal argument Bash would pass, or marks it dynamic.
//! Resolves quoting, escapes and `$'…'`; reports (never performs) expansions, globs and tildes.

use tree_sitter::Node;

use super::kind::kind;

/// One shell word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The literal value, or `None` when it depends on an expansion or substitution.
    pub value: Option<String>,
    /// The source text, for messages.
    pub raw: String,
    /// For a dynamic word, the value with every expansion left as written (see `template`).
    expansions_kept: Option<String>,
    /// Contains an unquoted glob (`*`, `?`, `[`, extglob) or brace expansion: it may stand for
    /// several words.
    pub glob: bool,
    /// Starts with an unquoted `~`, so Bash will expand it.
    pub tilde: bool,
    /// Its expansion could start with `-` (a dynamic word, or a glob in first position), so a
    /// command may read it as a flag.
    pub may_be_flag: bool,
}

impl Word {
    /// A literal word that needs no quoting, as made by the analyser itself.
    pub fn literal(text: &str) -> Word {
        Word {
            value: Some(text.to_owned()),
            raw: text.to_owned(),
            expansions_kept: None,
            glob: false,
            tilde: false,
            may_be_flag: false,
        }
    }

    /// A word whose value is not known (`{}` of `find -exec`, an item xargs appends).
    pub fn dynamic(raw: &str) -> Word {
        Word {
            value: None,
            raw: raw.to_owned(),
            expansions_kept: None,
            glob: false,
            tilde: false,
            may_be_flag: true,
        }
    }

    /// The value with every expansion left as written: what Bash evaluates again when the
    /// word is a subscript, an arithmetic operand or a variable's value there
    /// (`"a[\$(cmd "$x")]"` → `a[$(cmd $x)]`).
    pub fn template(&self) -> &str {
        self.expansions_kept
            .as_deref()
            .or(self.value.as_deref())
            .unwrap_or(&self.raw)
    }

    /// The literal value when it is a single, fixed word (no glob).
    pub fn fixed(&self) -> Option<&str> {
        if self.glob {
            None
        } else {
            self.value.as_deref()
        }
    }

    /// How the word appears in an explained argv.
    pub fn display(&self) -> String {
        match &self.value {
            Some(v) => v.clone(),
            None => format!("<dynamic {}>", self.raw),
        }
    }
}

/// Accumulates the pieces of one word; `chars` remembers which characters were quoted so that
/// brace expansion and globbing are judged on unquoted characters only.
struct Builder {
    /// The value; once an expansion is met, the value with expansions kept as written.
    text: String,
    chars: Vec<(char, bool)>,
    dynamic: bool,
    glob: bool,
    leading_glob: bool,
    tilde: bool,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            text: String::new(),
            chars: Vec::new(),
            dynamic: false,
            glob: false,
            leading_glob: false,
            tilde: false,
        }
    }

    fn push(&mut self, c: char, quoted: bool) {
        if !quoted && self.chars.is_empty() {
            if c == '~' {
                self.tilde = true;
            }
            if matches!(c, '*' | '?' | '[') {
                self.leading_glob = true;
            }
        }
        if !quoted && matches!(c, '*' | '?' | '[') {
            self.glob = true;
        }
        self.text.push(c);
        self.chars.push((c, quoted));
    }

    fn push_str(&mut self, s: &str, quoted: bool) {
        for c in s.chars() {
            self.push(c, quoted);
        }
    }

    fn mark_dynamic(&mut self, raw: &str) {
        self.text.push_str(raw);
        if self.chars.is_empty() {
            self.leading_glob = true;
        }
        self.dynamic = true;
        // A placeholder keeps "something came first" for the leading-position checks.
        self.chars.push(('\0', true));
    }

    fn finish(self, raw: &str) -> Word {
        let brace = has_brace_expansion(&self.chars);
        let starts_with_brace = brace && self.chars.first().is_some_and(|&(c, q)| c == '{' && !q);
        let (value, expansions_kept) = if self.dynamic {
            (None, Some(self.text))
        } else {
            (Some(self.text), None)
        };
        Word {
            value,
            raw: raw.to_owned(),
            expansions_kept,
            glob: self.glob || brace,
            tilde: self.tilde,
            may_be_flag: self.leading_glob || starts_with_brace,
        }
    }
}

/// `{a,b}` or `{1..3}` with unquoted braces: Bash turns it into several words.
fn has_brace_expansion(chars: &[(char, bool)]) -> bool {
    let mut open: Option<usize> = None;
    for (i, &(c, quoted)) in chars.iter().enumerate() {
        if quoted {
            continue;
        }
        match c {
            '{' => open = Some(i),
            '}' => {
                if let Some(start) = open {
                    let inner = &chars[start + 1..i];
                    let comma = inner.iter().any(|&(c, q)| c == ',' && !q);
                    let dots = inner
                        .windows(2)
                        .any(|w| w[0] == ('.', false) && w[1] == ('.', false));
                    if comma || dots {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// Resolves a word-like node (argument, command name, assignment value, redirect target).
pub(crate) fn resolve(node: Node, src: &str) -> Word {
    let mut b = Builder::new();
    add(node, src, &mut b);
    b.finish(&src[node.byte_range()])
}

fn add(node: Node, src: &str, b: &mut Builder) {
    let text = &src[node.byte_range()];
    match kind(&node) {
        "word" => unquoted(text, b),
        "number" if node.named_child_count() == 0 => unquoted(text, b),
        "raw_string" => b.push_str(strip(text, 1, 1), true),
        "string" => double_quoted(node, src, b),
        "ansi_c_string" => b.push_str(&decode_ansi_c(strip(text, 2, 1)), true),
        "extglob_pattern" => {
            unquoted(text, b);
            b.glob = true;
            if b.chars.len() == text.chars().count() {
                b.leading_glob = true;
            }
        }
        // Bash passes a process substitution as a pipe's name; its commands are analysed
        // where they stand.
        "process_substitution" => b.push_str("/dev/fd/63", true),
        "concatenation" | "command_name" => {
            let mut pos = node.start_byte();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                if child.start_byte() > pos {
                    unquoted(&src[pos..child.start_byte()], b);
                }
                add(child, src, b);
                pos = child.end_byte();
            }
            if node.end_byte() > pos {
                unquoted(&src[pos..node.end_byte()], b);
            }
        }
        _ => b.mark_dynamic(text),
    }
}

fn strip(text: &str, front: usize, back: usize) -> &str {
    if text.len() >= front + back {
        text.get(front..text.len() - back).unwrap_or("")
    } else {
        ""
    }
}

/// Unquoted text: a backslash quotes the next character, backslash-newline vanishes.
fn unquoted(text: &str, b: &mut Builder) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') => {}
                Some(next) => b.push(next, true),
                None => b.push('\\', true),
            }
        } else {
            b.push(c, false);
        }
    }
}

/// Inside double quotes only `$ \` " \\` and newline are escapable; expansions make it dynamic.
fn double_quoted(node: Node, src: &str, b: &mut Builder) {
    let start = node.start_byte() + 1;
    let end = node.end_byte().saturating_sub(1).max(start);
    let mut pos = start;
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if child.start_byte() > pos {
            quoted_text(&src[pos..child.start_byte().min(end)], b);
        }
        if kind(&child) == "string_content" {
            quoted_text(&src[child.byte_range()], b);
        } else {
            b.mark_dynamic(&src[child.byte_range()]);
        }
        pos = child.end_byte().max(pos);
    }
    if end > pos {
        quoted_text(&src[pos..end], b);
    }
}

fn quoted_text(text: &str, b: &mut Builder) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => {
                    chars.next();
                    b.push(n, true);
                }
                _ => b.push('\\', true),
            }
        } else {
            b.push(c, true);
        }
    }
}

/// Decodes the body of `$'…'` the way Bash does; a NUL ends the string, as in Bash.
pub(crate) fn decode_ansi_c(body: &str) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c != b'\\' || i >= bytes.len() {
            out.push(c);
            continue;
        }
        let e = bytes[i];
        i += 1;
        match e {
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'e' | b'E' => out.push(27),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'\\' | b'\'' | b'"' | b'?' => out.push(e),
            b'0'..=b'7' => {
                let (v, used) = digits(&bytes[i - 1..], 8, 3);
                i += used - 1;
                out.push((v & 0xff) as u8);
            }
            b'x' => match digits(&bytes[i..], 16, 2) {
                (_, 0) => out.extend_from_slice(b"\\x"),
                (v, used) => {
                    i += used;
                    out.push((v & 0xff) as u8);
                }
            },
            b'u' | b'U' => {
                let max = if e == b'u' { 4 } else { 8 };
                match digits(&bytes[i..], 16, max) {
                    (_, 0) => out.extend_from_slice(&[b'\\', e]),
                    (v, used) => {
                        i += used;
                        let ch = char::from_u32(v).unwrap_or('\u{fffd}');
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            b'c' if i < bytes.len() => {
                out.push(bytes[i] & 0x1f);
                i += 1;
            }
            _ => out.extend_from_slice(&[b'\\', e]),
        }
    }
    if let Some(nul) = out.iter().position(|&b| b == 0) {
        out.truncate(nul);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads up to `max` digits of `radix`; returns the value and how many bytes were used.
fn digits(bytes: &[u8], radix: u32, max: usize) -> (u32, usize) {
    let mut value: u32 = 0;
    let mut used = 0;
    for &b in bytes.iter().take(max) {
        match (b as char).to_digit(radix) {
            Some(d) => {
                value = value.wrapping_mul(radix).wrapping_add(d);
                used += 1;
            }
            None => break,
        }
    }
    (value, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn ansi_c_escapes_decode_like_bash() {
        assert_eq!(decode_ansi_c(r"\x72m"), "rm");
        assert_eq!(decode_ansi_c(r"\162\155"), "rm");
        assert_eq!(decode_ansi_c(r"\u0072m"), "rm");
        assert_eq!(decode_ansi_c(r"a\tb\'"), "a\tb'");
        assert_eq!(decode_ansi_c(r"rm\0 -rf"), "rm");
        assert_eq!(decode_ansi_c(r"\q\x"), r"\q\x");
    }

    #[test]
    fn brace_expansion_needs_unquoted_comma_or_dots() {
        let unq = |s: &str| s.chars().map(|c| (c, false)).collect::<Vec<_>>();
        assert!(has_brace_expansion(&unq("{a,b}")));
        assert!(has_brace_expansion(&unq("x{1..3}")));
        assert!(!has_brace_expansion(&unq("{}")));
        assert!(!has_brace_expansion(&[
            ('{', true),
            (',', false),
            ('}', true)
        ]));
    }
}
