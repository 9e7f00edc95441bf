//! The content of a `Bash(…)` rule: parsed once at policy load, matched on word boundaries
//! against the resolved argv of one simple command, and judged for how much it lets through.

use std::fmt;

use super::word::Word;

/// A Bash rule's content, parsed once when the policy loads. Words are compared after the
/// command's own quoting is resolved. `git status` = Exact; `npm test:*` and `npm test *` = Prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandPattern {
    Exact(Vec<String>),
    Prefix(Vec<String>),
}

/// Why a rule's content could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("empty Bash rule: name a command, e.g. Bash(git status) or Bash(npm test:*)")]
    Empty,
    #[error(
        "`{0}` has a wildcard but no command: write e.g. `npm test:*`, or `*` for every command"
    )]
    LoneWildcard(String),
    #[error("unbalanced quote in Bash rule `{0}`")]
    UnbalancedQuote(String),
    #[error("`{0}`: a wildcard is only supported at the end, as `:*` or ` *`")]
    InnerWildcard(String),
}

/// How a pattern relates to a command whose words may not all be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    Yes,
    /// It matches if some dynamic word takes the right value.
    Maybe,
    No,
}

impl CommandPattern {
    /// Errors on empty content, a lone `:*`, unbalanced quotes, or a wildcard inside a word.
    pub fn parse(content: &str) -> Result<CommandPattern, PatternError> {
        let trimmed = content.trim();
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        if trimmed == "*" {
            return Ok(CommandPattern::Prefix(Vec::new()));
        }
        let (body, prefix) = if let Some(body) = trimmed.strip_suffix(":*") {
            (body, true)
        } else if let Some(body) = trimmed
            .strip_suffix('*')
            .filter(|b| b.ends_with(char::is_whitespace))
        {
            (body, true)
        } else {
            (trimmed, false)
        };
        let words = split_words(body, trimmed)?;
        if words.is_empty() {
            return Err(PatternError::LoneWildcard(trimmed.to_owned()));
        }
        Ok(if prefix {
            CommandPattern::Prefix(words)
        } else {
            CommandPattern::Exact(words)
        })
    }

    /// Word-boundary match against a resolved argv (argv[0] compared by base name when it is
    /// path-qualified, e.g. `/bin/rm` matches `rm:*`).
    pub fn matches(&self, argv: &[String]) -> bool {
        let words: Vec<Word> = argv.iter().map(|a| Word::literal(a)).collect();
        self.match_words(&words, true) == Match::Yes
    }

    pub(crate) fn words(&self) -> &[String] {
        match self {
            CommandPattern::Exact(w) | CommandPattern::Prefix(w) => w,
        }
    }

    /// Matches words that may be dynamic. `base_name` says whether a path-qualified argv[0]
    /// may match by its base name (always for deny and ask rules; the analyser restricts
    /// allow rules to system folders so that `./ls` is not `ls`).
    pub(crate) fn match_words(&self, argv: &[Word], base_name: bool) -> Match {
        let pattern = self.words();
        let any_dynamic = argv.iter().any(|w| w.fixed().is_none());
        let mut result = Match::Yes;
        for (i, p) in pattern.iter().enumerate() {
            let Some(word) = argv.get(i) else {
                return if any_dynamic { Match::Maybe } else { Match::No };
            };
            match word.fixed() {
                Some(v) if i == 0 => {
                    let same = v == p || (base_name && v.contains('/') && base(v) == p);
                    if !same {
                        return Match::No;
                    }
                }
                Some(v) => {
                    if v != p {
                        return Match::No;
                    }
                }
                // An unknown command name may be the rule's: a glob that can match it, or
                // an expansion whose value is not known (`$x`, `$(…)`) unless its last
                // component is literal.
                None if i == 0 => {
                    if !could_name(word, p) {
                        return Match::No;
                    }
                    result = Match::Maybe;
                }
                None => result = Match::Maybe,
            }
        }
        match self {
            CommandPattern::Prefix(_) => result,
            CommandPattern::Exact(_) if argv.len() == pattern.len() => result,
            CommandPattern::Exact(_) if any_dynamic => Match::Maybe,
            CommandPattern::Exact(_) => Match::No,
        }
    }

    /// Why this allow rule is dangerous, if it is — used by `policy lint` and at policy load.
    pub fn danger(&self) -> Option<&'static str> {
        let words = self.words();
        let Some(first) = words.first() else {
            return Some("`*` allows every command");
        };
        let prefix = matches!(self, CommandPattern::Prefix(_));
        let open = prefix || words.len() == 1;
        let name = base(first);
        let second = words.get(1).map(String::as_str);
        if SHELLS.contains(&name) && (open || second.is_some_and(|s| s.starts_with('-'))) {
            return Some("a shell runs any command it is given");
        }
        if matches!(name, "eval" | "source" | "." | "exec" | "busybox") && open {
            return Some("it runs whatever code or command follows");
        }
        if matches!(name, "sudo" | "su" | "doas" | "pkexec") {
            return Some("it runs commands as another user");
        }
        if INTERPRETERS.contains(&name) && open && !second.is_some_and(is_script_file) {
            return Some("an interpreter runs any code it is given (`-c`, `-e`, stdin)");
        }
        if WRAPPERS.contains(&name) && prefix && words.len() == 1 {
            return Some("it runs any command given as its arguments");
        }
        if prefix && runs_packages(words) {
            return Some("it downloads or runs arbitrary packages or scripts");
        }
        if prefix && words.len() == 1 {
            return match name {
                "git" => Some("`git -c …` and aliases can run any command"),
                "find" => Some("`find -exec` runs any command and `-delete` removes files"),
                "sed" | "awk" | "gawk" | "perl" => {
                    Some("its scripts can write files and run commands")
                }
                _ => None,
            };
        }
        None
    }
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
];

const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "deno",
    "bun",
    "perl",
    "ruby",
    "php",
    "lua",
    "Rscript",
    "pwsh",
    "powershell",
    "osascript",
    "tclsh",
    "irb",
    "julia",
];

const WRAPPERS: &[&str] = &[
    "env", "command", "builtin", "nice", "nohup", "timeout", "time", "stdbuf", "xargs", "coproc",
];

fn is_script_file(word: &str) -> bool {
    const EXTS: &[&str] = &[
        ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".lua",
    ];
    EXTS.iter().any(|e| word.ends_with(e))
}

fn runs_packages(words: &[String]) -> bool {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    matches!(
        w.as_slice(),
        ["npx"]
            | ["bunx"]
            | ["uvx"]
            | ["pnpx"]
            | [
                "npm" | "pnpm" | "yarn" | "bun",
                "exec" | "x" | "dlx" | "run" | "run-script"
            ]
            | ["npm" | "pnpm" | "yarn" | "bun"]
            | ["pipx", "run"]
            | ["uv", "run"]
    )
}

/// Whether a command word not known statically could name the program `name`.
fn could_name(word: &Word, name: &str) -> bool {
    use super::word::Piece;
    if word.value.is_some() {
        return super::glob::could_name(word, name);
    }
    // `"$dir"/tool`: quoted expansions before the last `/`, a literal name after it.
    let slash = word
        .pieces
        .iter()
        .rposition(|p| matches!(p, Piece::Char { c: '/', .. }));
    let Some(slash) = slash else { return true };
    let before_quoted = word.pieces[..slash]
        .iter()
        .all(|p| !matches!(p, Piece::Dyn { quoted: false, .. }));
    let tail: Option<String> = word.pieces[slash + 1..]
        .iter()
        .map(|p| match p {
            Piece::Char { c, .. } if !matches!(c, '*' | '?' | '[') => Some(*c),
            _ => None,
        })
        .collect();
    match tail {
        Some(tail) if before_quoted && !tail.is_empty() => base(name) == tail,
        _ => true,
    }
}

/// The last path component of a command word (`/usr/bin/rm` → `rm`).
pub(crate) fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Splits rule content into words with shell-like quoting; `whole` is for error messages.
fn split_words(body: &str, whole: &str) -> Result<Vec<String>, PatternError> {
    let mut words = Vec::new();
    let mut current: Option<String> = None;
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = current.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = current.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err(PatternError::UnbalancedQuote(whole.to_owned())),
                    }
                }
            }
            '"' => {
                let w = current.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) if matches!(ch, '"' | '\\' | '$' | '`') => w.push(ch),
                            Some(ch) => {
                                w.push('\\');
                                w.push(ch);
                            }
                            None => return Err(PatternError::UnbalancedQuote(whole.to_owned())),
                        },
                        Some(ch) => w.push(ch),
                        None => return Err(PatternError::UnbalancedQuote(whole.to_owned())),
                    }
                }
            }
            '\\' => {
                let w = current.get_or_insert_with(String::new);
                w.push(chars.next().unwrap_or('\\'));
            }
            '*' => return Err(PatternError::InnerWildcard(whole.to_owned())),
            c => current.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = current {
        words.push(w);
    }
    Ok(words)
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<String> = self.words().iter().map(|w| quote(w)).collect();
        match self {
            CommandPattern::Prefix(w) if w.is_empty() => f.write_str("*"),
            CommandPattern::Prefix(_) => write!(f, "{}:*", words.join(" ")),
            CommandPattern::Exact(_) => f.write_str(&words.join(" ")),
        }
    }
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_exact_and_both_prefix_forms() {
        assert_eq!(
            CommandPattern::parse("git status"),
            Ok(CommandPattern::Exact(argv("git status")))
        );
        assert_eq!(
            CommandPattern::parse("npm test:*"),
            Ok(CommandPattern::Prefix(argv("npm test")))
        );
        assert_eq!(
            CommandPattern::parse("npm test *"),
            Ok(CommandPattern::Prefix(argv("npm test")))
        );
        assert_eq!(
            CommandPattern::parse("*"),
            Ok(CommandPattern::Prefix(vec![]))
        );
        assert_eq!(
            CommandPattern::parse("grep 'a b':*"),
            Ok(CommandPattern::Prefix(vec!["grep".into(), "a b".into()]))
        );
    }

    #[test]
    fn rejects_bad_content_with_clear_messages() {
        assert_eq!(CommandPattern::parse("  "), Err(PatternError::Empty));
        assert!(matches!(
            CommandPattern::parse(":*"),
            Err(PatternError::LoneWildcard(_))
        ));
        assert!(matches!(
            CommandPattern::parse("echo 'hi"),
            Err(PatternError::UnbalancedQuote(_))
        ));
        let inner = CommandPattern::parse("git l*g");
        assert!(matches!(inner, Err(PatternError::InnerWildcard(_))));
        if let Err(e) = inner {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn prefix_matches_on_word_boundaries_only() {
        let p = CommandPattern::parse("npm test:*").unwrap();
        assert!(p.matches(&argv("npm test")));
        assert!(p.matches(&argv("npm test -- -x")));
        assert!(!p.matches(&argv("npm testx")));
        assert!(!p.matches(&argv("npm")));
        let rm = CommandPattern::parse("rm:*").unwrap();
        assert!(rm.matches(&argv("/bin/rm -rf x")));
        let exact = CommandPattern::parse("git status").unwrap();
        assert!(exact.matches(&argv("git status")));
        assert!(!exact.matches(&argv("git status --short")));
    }

    #[test]
    fn displays_the_content_back() {
        for s in ["npm test:*", "git status", "*", "grep 'a b':*"] {
            assert_eq!(CommandPattern::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn flags_dangerous_allow_rules() {
        for s in [
            "*",
            "bash:*",
            "sh -c:*",
            "python:*",
            "node",
            "eval:*",
            "sudo apt",
            "npx:*",
            "npm run:*",
            "xargs:*",
            "git:*",
            "find:*",
        ] {
            assert!(CommandPattern::parse(s).unwrap().danger().is_some(), "{s}");
        }
        for s in [
            "git status",
            "npm test:*",
            "cargo test:*",
            "python scripts/check.py:*",
            "ls:*",
        ] {
            assert_eq!(CommandPattern::parse(s).unwrap().danger(), None, "{s}");
        }
    }
}
