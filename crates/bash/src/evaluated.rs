//! Where Bash reads data as code: arithmetic operands, array subscripts, `-v` names, indirect
//! and prompt expansion, here-document delimiters. Pure text helpers; the walker decides.

/// Every `$( … )` and `` ` … ` `` in `text`, read loosely: quotes and backslashes do not hide
/// them, because Bash expands the text again once it is a variable's value or a subscript
/// (`x='a[$(cmd)]'; echo $((x))` runs `cmd`). `text` is a word's template (quotes already
/// removed). Over-finding only adds commands to analyse.
pub(crate) fn substitutions_loose(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'`' => {
                let start = i + 1;
                let end = b[start..]
                    .iter()
                    .position(|&c| c == b'`')
                    .map_or(b.len(), |p| start + p);
                found.push(text[start..end].to_owned());
                i = end + 1;
            }
            // `$((…) …)` that is not arithmetic is a substitution of a subshell to Bash, so
            // `$((` is read as both.
            b'$' if b.get(i + 1) == Some(&b'(') => {
                let start = i + 2;
                let mut depth = 1;
                let mut j = start;
                while j < b.len() {
                    match b[j] {
                        b'(' => depth += 1,
                        b')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    j += 1;
                }
                found.push(text[start..j.min(b.len())].to_owned());
                i = start;
            }
            _ => i += 1,
        }
    }
    found
}

/// Text that runs a command once Bash evaluates it: it holds a substitution.
pub(crate) fn runs_code(text: &str) -> bool {
    text.contains("$(") || text.contains('`')
}

/// An arithmetic operand Bash cannot turn into code: digits (with a base or sign), nothing
/// that names a variable or holds a subscript.
pub(crate) fn plain_number(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '#') && {
        t.starts_with(|c: char| c.is_ascii_digit())
    }
}

/// The name operand of `test -v` / `[[ -v ]]` / `-R`: Bash evaluates its subscript as
/// arithmetic, so only a plain name, or one with a numeric, `@` or `*` subscript, is inert.
pub(crate) fn inert_variable_name(name: &str) -> bool {
    let (base, subscript) = match name.split_once('[') {
        None => (name, None),
        Some((base, rest)) => match rest.strip_suffix(']') {
            Some(sub) => (base, Some(sub)),
            None => return false,
        },
    };
    let base_ok = !base.is_empty()
        && !base.starts_with(|c: char| c.is_ascii_digit())
        && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    base_ok && subscript.is_none_or(|s| matches!(s, "@" | "*") || plain_number(s))
}

/// `${x@OP}` transformations that only quote or re-case the value; `P` (prompt expansion,
/// which runs substitutions) is not one of them.
pub(crate) fn inert_transformation(op: &str) -> bool {
    matches!(op, "Q" | "E" | "A" | "a" | "U" | "u" | "L" | "K" | "k")
}

/// The delimiter Bash waits for after `<<word`: the word after quote removal, no expansion
/// (`E"O"F`, `$'EOF'`, `\EOF` all end at `EOF`; `$x` ends at `$x`). `None` where Bash's
/// reading is not certain (escapes inside `$'…'`, an unterminated quote).
pub(crate) fn heredoc_delimiter(word: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => {
                        let next = chars.next()?;
                        if !matches!(next, '$' | '`' | '"' | '\\') {
                            out.push('\\');
                        }
                        out.push(next);
                    }
                    c => out.push(c),
                }
            },
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                loop {
                    match chars.next()? {
                        '\'' => break,
                        '\\' => return None,
                        c => out.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'"') => {}
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn loose_substitutions_see_through_quotes_and_escapes() {
        let table: &[(&str, &[&str])] = &[
            ("'a[$(rm y)]'", &["rm y"]),
            ("a[$(sh -c \"rm \\\"y\\\"\")]", &["sh -c \"rm \\\"y\\\"\""]),
            ("a[`rm y`]", &["rm y"]),
            ("$((1 + $(rm z)))", &["(1 + $(rm z))", "rm z"]),
            ("$((rm z) &)", &["(rm z) &"]),
            ("$(echo $(rm x))", &["echo $(rm x)", "rm x"]),
            ("a[$(rm", &["rm"]),
            ("plain text", &[]),
        ];
        for (text, want) in table {
            assert_eq!(substitutions_loose(text), want.to_vec(), "{text}");
        }
    }

    #[test]
    fn variable_names_for_dash_v() {
        for ok in ["x", "_a1", "a[0]", "a[@]", "a[*]", "a[-1]", "a[16#ff]"] {
            assert!(inert_variable_name(ok), "{ok}");
        }
        for bad in [
            "a[i]",
            "a[$(rm x)]",
            "a[1+x]",
            "1a",
            "a[0",
            "",
            "a b",
            "a[`x`]",
        ] {
            assert!(!inert_variable_name(bad), "{bad}");
        }
    }

    #[test]
    fn heredoc_delimiters_after_quote_removal() {
        let table = [
            ("EOF", Some("EOF")),
            ("'EOF'", Some("EOF")),
            ("E\"O\"F", Some("EOF")),
            ("\\EOF", Some("EOF")),
            ("E\\OF", Some("EOF")),
            ("$'EOF'", Some("EOF")),
            ("$\"EOF\"", Some("EOF")),
            ("$x", Some("$x")),
            ("'E'\"O\"F", Some("EOF")),
            ("$'E\\x4fF'", None),
            ("'EOF", None),
        ];
        for (word, want) in table {
            assert_eq!(heredoc_delimiter(word).as_deref(), want, "{word}");
        }
    }
}
