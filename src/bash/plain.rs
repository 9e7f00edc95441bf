//! The conservative gate for Bash until full analysis: a command proven to be nothing but
//! plain words (no operators, expansions, redirections or newlines) yields its argv.

/// Characters that make a command more than plain words when they stand outside quotes.
const SHELL_SYNTAX: &[char] = &[
    ';', '&', '|', '<', '>', '$', '`', '(', ')', '{', '}', '*', '?', '[', '~', '#', '!',
];

/// The literal argv of `command` if it is plain words; `None` for anything else. Single quotes
/// are literal; double quotes may not contain `$`, `` ` `` or `\`; a backslash outside quotes
/// escapes one plain character. Non-ASCII characters are refused so look-alikes cannot pass.
pub fn plain_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        if !c.is_ascii() || (c.is_ascii_control() && c != '\t') {
            return None;
        }
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c if c.is_ascii() && !c.is_ascii_control() => current.push(c),
                        _ => return None,
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' | '!' => return None,
                        c if c.is_ascii() && !c.is_ascii_control() => current.push(c),
                        _ => return None,
                    }
                }
            }
            '\\' => {
                let next = chars.next()?;
                if !next.is_ascii_graphic() {
                    return None;
                }
                current.push(next);
                in_word = true;
            }
            c if SHELL_SYNTAX.contains(&c) => return None,
            c => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(current);
    }
    // A leading `NAME=value` is an assignment that changes what the command does (PATH,
    // LD_PRELOAD, GIT_*): never plain.
    let first = words.first()?;
    (!first.contains('=')).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_resolve_quotes_and_escapes() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("git status", Some(&["git", "status"])),
            ("'git' status", Some(&["git", "status"])),
            ("\\rm -rf build", Some(&["rm", "-rf", "build"])),
            ("echo \"a b\"", Some(&["echo", "a b"])),
            ("r''m x", Some(&["rm", "x"])),
            (
                "git log --format=oneline",
                Some(&["git", "log", "--format=oneline"]),
            ),
        ];
        for (command, expected) in cases {
            let expected = expected.map(|e| e.iter().map(|w| w.to_string()).collect::<Vec<_>>());
            assert_eq!(plain_words(command), expected, "{command}");
        }
    }

    #[test]
    fn anything_but_plain_words_is_refused() {
        for command in [
            "git status && rm -rf /",
            "echo $(rm x)",
            "echo `rm x`",
            "ls | xargs rm",
            "echo hi > out",
            "cat < in",
            "echo \"$HOME\"",
            "echo a\nrm x",
            "echo a\r\nrm x",
            "(rm x)",
            "{ rm x; }",
            "ls *.rs",
            "cd ~",
            "echo 'unterminated",
            "ｒｍ -rf x",
            "",
            "   ",
            "rm x # comment",
            "sleep 1 &",
            "FOO=1 git status",
            "PATH=/tmp git status",
        ] {
            assert_eq!(plain_words(command), None, "{command:?}");
        }
    }
}
