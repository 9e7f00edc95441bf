//! Text that came from the model or a tool, made inert where tollgate writes it: on a log line
//! the GitHub Actions runner scans for workflow commands, and in XML and JSON reports. Pure.
//!
//! The runner (actions/runner `ActionCommand.cs`) splits output at CR, LF and CRLF, then takes
//! a line as a command when, after `TrimStart()` (any Unicode white space), it starts with `::`,
//! or when `##[` occurs anywhere in it (the legacy form, `##[stop-commands]` included). Both
//! comparisons are culture-sensitive, which may skip "ignorable" code points (soft hyphen,
//! zero-width characters), so the checks here look through every non-ASCII character.

/// Shown where a line break was.
const LINE_BREAK: char = '⏎';
/// Shown where a control or format character was.
const REPLACED: char = '\u{fffd}';

/// One line of a log: line breaks of every form become `⏎`, control and format characters
/// `�`, a `##[` gets a space before its `[`, and a line that would start with `::` is
/// prefixed with `> `.
pub fn log_line(text: &str) -> String {
    let visible: String = text.chars().map(visible_char).collect();
    let defused = break_legacy_prefix(&visible, " [");
    if starts_like_a_command(&defused) {
        format!("> {defused}")
    } else {
        defused
    }
}

/// Text of several lines tollgate composed (its own `\n` separate them), each made inert as
/// [`log_line`] does.
pub fn log_text(text: &str) -> String {
    text.split('\n')
        .map(log_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON line printed on a runner-scanned stream: every `[` that would complete a `##[` is
/// written `\u005b`, which JSON reads back as the same `[`. (A `[` after `#` can only be inside
/// a string: JSON syntax never puts one there.) serde_json already escapes CR and LF.
pub fn json_log_line(line: &str) -> String {
    break_legacy_prefix(line, "\\u005b")
}

/// The data of a workflow command (after `::name props::`): `%`, CR and LF escaped as the
/// runner unescapes them; other breaks and control characters made visible; `##[` broken.
pub fn command_data(text: &str) -> String {
    let escaped: String = text
        .chars()
        .map(|c| match c {
            '%' => "%25".to_string(),
            '\r' => "%0D".to_string(),
            '\n' => "%0A".to_string(),
            c => visible_char(c).to_string(),
        })
        .collect();
    break_legacy_prefix(&escaped, " [")
}

/// Text for an XML 1.0 document: characters outside its `Char` production (C0 controls
/// other than tab, LF and CR; U+FFFE; U+FFFF) are dropped. Rust strings hold no lone
/// surrogates, the production's other gap.
pub fn xml_text(text: &str) -> String {
    text.chars().filter(|c| xml_char(*c)).collect()
}

/// Every string of a JSON value (keys too) cleaned as [`xml_text`]: JSON itself escapes
/// control characters, but SARIF consumers should not see them, nor the noncharacters.
pub fn clean_json_strings(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            if !text.chars().all(xml_char) {
                *text = xml_text(text);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_json_strings),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                clean_json_strings(&mut item);
                map.insert(xml_text(&key), item);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

fn visible_char(c: char) -> char {
    match c {
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}' => LINE_BREAK,
        '\t' => ' ',
        c if c.is_control() || is_format(c) => REPLACED,
        c => c,
    }
}

/// Unicode format characters (category Cf) that a culture-sensitive comparison may ignore.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// Writes `replacement` instead of each `[` that two `#` precede, counting only ASCII
/// characters (anything else may be ignored by the runner's comparison).
fn break_legacy_prefix(text: &str, replacement: &str) -> String {
    // Without a `#` there is no `##[` to break: nearly every line (`check --calls` writes one
    // per decision) is copied as it is instead of char by char.
    if !text.contains('#') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut hashes = 0usize;
    for c in text.chars() {
        if c == '[' && hashes >= 2 {
            out.push_str(replacement);
            hashes = 0;
            continue;
        }
        out.push(c);
        if c == '#' {
            hashes += 1;
        } else if c.is_ascii() {
            hashes = 0;
        }
    }
    out
}

/// Whether the runner could read the line as `::command::`: its first two ASCII characters
/// after white space are `::` (non-ASCII characters may be ignored, so they are skipped).
fn starts_like_a_command(line: &str) -> bool {
    let mut ascii = line
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_whitespace());
    ascii.next() == Some(':') && ascii.next() == Some(':')
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn no_line_form_survives() {
        let cases = [
            ("ok", "ok"),
            ("a\r::add-mask::x", "a⏎::add-mask::x"),
            ("a\n::error::x", "a⏎::error::x"),
            ("a\r\n::error::x", "a⏎⏎::error::x"),
            ("a\u{85}b\u{2028}c\u{2029}d\u{b}e\u{c}f", "a⏎b⏎c⏎d⏎e⏎f"),
            ("\u{1b}[31mred\u{7f}\u{0}", "�[31mred��"),
            ("::error::forged", "> ::error::forged"),
            ("  \t::warning::forged", ">    ::warning::forged"),
            (
                "\u{a0}\u{3000}::set-output name=x::y",
                "> \u{a0}\u{3000}::set-output name=x::y",
            ),
            ("\u{ad}::x::y", "> �::x::y"),
            (":\u{200b}:x::y", "> :�:x::y"),
            ("é::x::y", "> é::x::y"),
            ("a::b", "a::b"),
            ("x ##[stop-commands]tok", "x ## [stop-commands]tok"),
            ("x #\u{ad}#[add-mask]s", "x #�# [add-mask]s"),
            ("x #é#[error]s", "x #é# [error]s"),
            ("# #[x]", "# #[x]"),
        ];
        for (input, expected) in cases {
            assert_eq!(log_line(input), expected, "{input:?}");
        }
        assert_eq!(log_text("one\ntwo\r::x::y"), "one\ntwo⏎::x::y");
    }

    #[test]
    fn command_data_escapes_what_the_runner_unescapes() {
        assert_eq!(
            command_data("50%\r\n::x::y\u{2028}##[z]\u{1}"),
            "50%25%0D%0A::x::y⏎## [z]�"
        );
    }

    #[test]
    fn json_lines_read_back_the_same() {
        let value = serde_json::json!({"text": "a ##[stop-commands]t #\u{200b}#[x]", "list": [1]});
        let line = json_log_line(&serde_json::to_string(&value).unwrap());
        assert!(!line.contains("##["), "{line}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            value
        );
    }

    #[test]
    fn xml_and_json_text_drop_what_xml_forbids() {
        assert_eq!(
            xml_text("a\u{0}\u{1}\u{8}\t\n\r\u{b}\u{c}\u{1f} \u{fffe}\u{ffff}\u{fffd}\u{10ffff}b"),
            "a\t\n\r \u{fffd}\u{10ffff}b"
        );
        let mut value = serde_json::json!({"k\u{1}": ["x\u{ffff}", {"y": "\u{fffe}z"}], "n": 1});
        clean_json_strings(&mut value);
        assert_eq!(value, serde_json::json!({"k": ["x", {"y": "z"}], "n": 1}));
    }
}
