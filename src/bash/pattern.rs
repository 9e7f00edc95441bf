//! Bash rule content (`git status`, `npm test:*`, `npm test *`): parsed once when a policy
//! loads, matched on word boundaries of a command's resolved argv.

use std::fmt;

/// A Bash rule's content. `git status` is exact; `npm test:*` and `npm test *` are prefixes
/// that match `npm test` and `npm test -x`, never `npm testx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandPattern {
    Exact(Vec<String>),
    Prefix(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("empty command pattern")]
    Empty,
    #[error("unbalanced quote in command pattern `{0}`")]
    UnbalancedQuote(String),
    #[error("`*` may only end a command pattern (as `cmd:*` or `cmd *`), in `{0}`")]
    InnerWildcard(String),
}

impl CommandPattern {
    pub fn parse(content: &str) -> Result<CommandPattern, PatternError> {
        let content = content.trim();
        let (body, prefix) = if let Some(body) = content.strip_suffix(":*") {
            (body, true)
        } else if content == "*" {
            ("", true)
        } else if let Some(body) = content.strip_suffix(" *") {
            (body, true)
        } else {
            (content, false)
        };
        let words =
            split_words(body).ok_or_else(|| PatternError::UnbalancedQuote(content.into()))?;
        if words.iter().any(|w| w.contains('*')) {
            return Err(PatternError::InnerWildcard(content.into()));
        }
        if words.is_empty() && !prefix {
            return Err(PatternError::Empty);
        }
        Ok(if prefix {
            CommandPattern::Prefix(words)
        } else {
            CommandPattern::Exact(words)
        })
    }

    /// Matches a resolved argv; a path-qualified command name (`/bin/rm`) is compared by its
    /// base name, so a deny rule for `rm` cannot be dodged by spelling out the path.
    pub fn matches(&self, argv: &[String]) -> bool {
        let words = self.words();
        if argv.len() < words.len()
            || (matches!(self, CommandPattern::Exact(_)) && argv.len() != words.len())
        {
            return false;
        }
        words.iter().zip(argv).enumerate().all(|(i, (want, got))| {
            if i == 0 {
                base_name(got) == want.as_str() || got == want
            } else {
                got == want
            }
        })
    }

    pub fn words(&self) -> &[String] {
        match self {
            CommandPattern::Exact(words) | CommandPattern::Prefix(words) => words,
        }
    }

    /// Why an allow rule with this pattern hands out more than it seems to, if it does.
    pub fn danger(&self) -> Option<&'static str> {
        let words = self.words();
        let Some(first) = words.first() else {
            return Some("allows every command");
        };
        let prefix = matches!(self, CommandPattern::Prefix(_));
        let first = base_name(first);
        const SHELLS: [&str; 8] = ["sh", "bash", "zsh", "dash", "ksh", "fish", "eval", "exec"];
        const INTERPRETERS: [&str; 10] = [
            "python",
            "python3",
            "node",
            "perl",
            "ruby",
            "php",
            "deno",
            "bun",
            "lua",
            "osascript",
        ];
        const PRIVILEGE: [&str; 4] = ["sudo", "su", "doas", "busybox"];
        const WRAPPERS: [&str; 8] = [
            "env", "xargs", "command", "nice", "nohup", "timeout", "time", "stdbuf",
        ];
        if SHELLS.contains(&first) {
            return Some("a shell runs any command it is given");
        }
        if PRIVILEGE.contains(&first) {
            return Some("runs any command with other privileges");
        }
        if prefix && INTERPRETERS.contains(&first) {
            return Some("an interpreter runs any code it is given");
        }
        if prefix && WRAPPERS.contains(&first) && words.len() == 1 {
            return Some("a wrapper runs any command it is given");
        }
        let runs_scripts = matches!(
            words
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice(),
            ["npx"]
                | ["npm", "exec"]
                | ["npm", "run"]
                | ["npm"]
                | ["yarn"]
                | ["pnpm"]
                | ["pnpm", "exec"]
                | ["pnpm", "dlx"]
                | ["uvx"]
                | ["pipx", "run"]
                | ["cargo", "run"]
        );
        if prefix && runs_scripts {
            return Some("a package manager's run/exec runs arbitrary scripts");
        }
        None
    }
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Splits rule content into words, honouring single and double quotes. `None` on an
/// unbalanced quote.
fn split_words(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(current);
    }
    Some(words)
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = self.words().join(" ");
        match self {
            CommandPattern::Exact(_) => f.write_str(&words),
            CommandPattern::Prefix(_) if words.is_empty() => f.write_str("*"),
            CommandPattern::Prefix(_) => write!(f, "{words}:*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn prefix_rules_match_on_word_boundaries() {
        let cases = [
            ("npm test:*", "npm test", true),
            ("npm test:*", "npm test -- -x", true),
            ("npm test:*", "npm testx", false),
            ("npm test *", "npm test --watch", true),
            ("npm test:*", "npm", false),
            ("git status", "git status", true),
            ("git status", "git status --short", false),
            ("rm:*", "/bin/rm -rf x", true),
            ("rm:*", "rmdir x", false),
            ("*", "anything at all", true),
            ("'git' status", "git status", true),
        ];
        for (pattern, command, expected) in cases {
            let pattern = CommandPattern::parse(pattern).unwrap();
            assert_eq!(
                pattern.matches(&argv(command)),
                expected,
                "{pattern} vs {command}"
            );
        }
    }

    #[test]
    fn bad_patterns_are_errors() {
        assert_eq!(CommandPattern::parse("  "), Err(PatternError::Empty));
        assert!(matches!(
            CommandPattern::parse("git 'st"),
            Err(PatternError::UnbalancedQuote(_))
        ));
        assert!(matches!(
            CommandPattern::parse("git * status"),
            Err(PatternError::InnerWildcard(_))
        ));
    }

    #[test]
    fn dangerous_allow_rules_are_named() {
        for dangerous in [
            "*",
            "sh:*",
            "bash -c:*",
            "python:*",
            "npx:*",
            "npm run:*",
            "sudo:*",
            "xargs:*",
        ] {
            assert!(
                CommandPattern::parse(dangerous).unwrap().danger().is_some(),
                "{dangerous}"
            );
        }
        for fine in [
            "npm test:*",
            "git status",
            "cargo test:*",
            "python --version",
        ] {
            assert_eq!(
                CommandPattern::parse(fine).unwrap().danger(),
                None,
                "{fine}"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["git status", "npm test:*", "*"] {
            assert_eq!(CommandPattern::parse(text).unwrap().to_string(), text);
        }
    }
}
