//! The content of a `Bash(…)` rule: parsed once at policy load, matched on word boundaries
//! against the resolved argv of one simple command, and judged for how much it lets through.

use std::fmt;

use super::word::Word;

/// A Bash rule's content, parsed once when the policy loads. Words are compared after the
/// command's own quoting is resolved. `git status` = Exact; `npm test:*` and `npm test *` =
/// Prefix; a `*` anywhere else (`ls*`, `* --version`, `git * main`) = Glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandPattern {
    Exact(Vec<String>),
    Prefix(Vec<String>),
    Glob(GlobPattern),
}

/// Claude Code's wildcard rule: `*` stands for any run of characters, spaces included, of one
/// simple command's words joined by single spaces — never of the text around it, since the
/// analyser matches rules against each simple command's expanded words, so a `*` cannot
/// reach across `;`, `&&`, `|`, a newline or into a substitution. A trailing ` *` or `:*`
/// also matches the words before it alone (`git * main:*` matches `git push main`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobPattern {
    /// The content as written, for messages.
    text: String,
    /// The pattern without its open tail.
    tokens: Vec<Token>,
    /// Ends in ` *` or `:*`: the words may go on after the match.
    open_tail: bool,
    /// The literal words before the first one with a `*` (what the rule spells out).
    leading: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Char(char),
    Star,
}

/// A command's text as a glob sees it: characters of known words, and the unknown value of
/// a dynamic word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Char(char),
    Unknown,
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
    /// Errors on empty content, a lone `:*` or unbalanced quotes.
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
        let tokens = glob_tokens(body.trim(), trimmed)?;
        if tokens.contains(&Token::Star) {
            return Ok(CommandPattern::Glob(GlobPattern::new(
                trimmed, tokens, prefix,
            )));
        }
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

    /// The literal words the pattern spells out from the start (a glob's up to its first
    /// wildcard).
    pub fn words(&self) -> &[String] {
        match self {
            CommandPattern::Exact(w) | CommandPattern::Prefix(w) => w,
            CommandPattern::Glob(glob) => &glob.leading,
        }
    }

    /// Matches words that may be dynamic. `base_name` says whether a path-qualified argv[0]
    /// may match by its base name (always for deny and ask rules; the analyser restricts
    /// allow rules to system folders so that `./ls` is not `ls`).
    pub(crate) fn match_words(&self, argv: &[Word], base_name: bool) -> Match {
        if let CommandPattern::Glob(glob) = self {
            return glob.match_words(argv, base_name);
        }
        let pattern = self.words();
        // Most rules name another program: told by the first word alone, before the rest of
        // the command is looked at (every command is held against every rule).
        if let (Some(p), Some(v)) = (pattern.first(), argv.first().and_then(Word::fixed))
            && v != p
            // A path to the program is longer than its name: most pairs end at the length.
            && !(base_name && v.len() > p.len() && base(v) == p)
        {
            return Match::No;
        }
        let any_dynamic = argv.iter().any(|w| w.fixed().is_none());
        let mut result = Match::Yes;
        for (i, p) in pattern.iter().enumerate() {
            let Some(word) = argv.get(i) else {
                return if any_dynamic { Match::Maybe } else { Match::No };
            };
            match word.fixed() {
                // A known program name was held to the rule's above.
                Some(_) if i == 0 => {}
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
            CommandPattern::Prefix(_) | CommandPattern::Glob(_) => result,
            CommandPattern::Exact(_) if argv.len() == pattern.len() => result,
            CommandPattern::Exact(_) if any_dynamic => Match::Maybe,
            CommandPattern::Exact(_) => Match::No,
        }
    }

    /// Why this allow rule is dangerous, if it is — used by `policy lint` and at policy load.
    pub fn danger(&self) -> Option<&'static str> {
        if let CommandPattern::Glob(glob) = self {
            if let Some(danger) = glob.danger() {
                return Some(danger);
            }
            // At least what a prefix rule of its leading words allows.
            return match glob.leading.as_slice() {
                [] => None,
                leading => CommandPattern::Prefix(leading.to_vec()).danger(),
            };
        }
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
        .all(|p| !matches!(p, Piece::Dyn(d) if !d.quoted));
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
    // A byte search: the analyser asks this of every command name, often several times.
    match word.as_bytes().iter().rposition(|&b| b == b'/') {
        Some(slash) => &word[slash + 1..],
        None => word,
    }
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
            CommandPattern::Glob(glob) => f.write_str(&glob.text),
        }
    }
}

/// Rule content as glob tokens: quoting resolved, runs of unquoted blanks one space, an
/// unquoted `*` a wildcard (a quoted or escaped one is a literal star).
fn glob_tokens(body: &str, whole: &str) -> Result<Vec<Token>, PatternError> {
    let mut tokens = Vec::new();
    let mut chars = body.chars();
    let unbalanced = || PatternError::UnbalancedQuote(whole.to_owned());
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if tokens.last() != Some(&Token::Char(' ')) {
                    tokens.push(Token::Char(' '));
                }
            }
            '\'' => loop {
                match chars.next() {
                    Some('\'') => break,
                    Some(ch) => tokens.push(Token::Char(ch)),
                    None => return Err(unbalanced()),
                }
            },
            '"' => loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(ch) if matches!(ch, '"' | '\\' | '$' | '`') => {
                            tokens.push(Token::Char(ch))
                        }
                        Some(ch) => tokens.extend([Token::Char('\\'), Token::Char(ch)]),
                        None => return Err(unbalanced()),
                    },
                    Some(ch) => tokens.push(Token::Char(ch)),
                    None => return Err(unbalanced()),
                }
            },
            '\\' => tokens.push(Token::Char(chars.next().unwrap_or('\\'))),
            '*' => tokens.push(Token::Star),
            c => tokens.push(Token::Char(c)),
        }
    }
    Ok(tokens)
}

impl GlobPattern {
    fn new(text: &str, tokens: Vec<Token>, open_tail: bool) -> GlobPattern {
        let mut leading = Vec::new();
        for word in tokens.split(|t| *t == Token::Char(' ')) {
            let literal: Option<String> = word
                .iter()
                .map(|t| match t {
                    Token::Char(c) => Some(*c),
                    Token::Star => None,
                })
                .collect();
            match literal {
                Some(word) if !word.is_empty() => leading.push(word),
                _ => break,
            }
        }
        GlobPattern {
            text: text.to_owned(),
            tokens,
            open_tail,
            leading,
        }
    }

    /// The pattern's alternatives: itself, and with an open tail itself followed by ` *`.
    fn alternatives(&self) -> Vec<Vec<Token>> {
        let mut alternatives = vec![self.tokens.clone()];
        if self.open_tail {
            let mut open = self.tokens.clone();
            open.extend([Token::Char(' '), Token::Star]);
            alternatives.push(open);
        }
        alternatives
    }

    fn match_words(&self, argv: &[Word], base_name: bool) -> Match {
        let mut subjects = vec![argv.iter().map(|w| w.fixed()).collect::<Vec<_>>()];
        if base_name
            && let Some(Some(first)) = subjects[0].first()
            && first.contains('/')
        {
            let mut by_base = subjects[0].clone();
            by_base[0] = Some(base(first));
            subjects.push(by_base);
        }
        let alternatives = self.alternatives();
        let mut best = Match::No;
        for words in &subjects {
            match glob_words(&alternatives, words) {
                Match::Yes => return Match::Yes,
                Match::Maybe => best = Match::Maybe,
                Match::No => {}
            }
        }
        best
    }

    /// Why this glob as an allow rule lets through more than it seems to.
    fn danger(&self) -> Option<&'static str> {
        if self.tokens.first() == Some(&Token::Star) {
            return Some(
                "a leading `*` matches any program (`Bash(* --version)` allows `rm -rf / --version`)",
            );
        }
        let first: Vec<Token> = self
            .tokens
            .split(|t| *t == Token::Char(' '))
            .next()
            .unwrap_or_default()
            .to_vec();
        if !first.contains(&Token::Star) {
            return None;
        }
        let runs_anything = SHELLS
            .iter()
            .chain(INTERPRETERS)
            .chain(WRAPPERS)
            .chain(&["eval", "exec", "sudo", "su", "npx", "bunx", "uvx", "pnpx"])
            .any(|name| glob_match(&first, &chars(name)));
        runs_anything.then_some(
            "its program name has a `*` that also matches a shell, an interpreter or a wrapper",
        )
    }
}

fn chars(text: &str) -> Vec<Subject> {
    text.chars().map(Subject::Char).collect()
}

/// A pattern's alternatives against a command's words (`None`: not known statically).
fn glob_words(alternatives: &[Vec<Token>], words: &[Option<&str>]) -> Match {
    let mut subject = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            subject.push(Subject::Char(' '));
        }
        match word {
            Some(word) => subject.extend(word.chars().map(Subject::Char)),
            None => subject.push(Subject::Unknown),
        }
    }
    let any = |text: &[Subject]| alternatives.iter().any(|p| glob_match(p, text));
    let Some(first_unknown) = words.iter().position(Option::is_none) else {
        return if any(&subject) { Match::Yes } else { Match::No };
    };
    if !alternatives.iter().any(|p| glob_may_match(p, &subject)) {
        return Match::No;
    }
    // Whatever the unknown words are, the known words before them already match a pattern
    // that ends in `*`; and, as an unknown word may expand to nothing, without the space
    // before it too.
    let known = &subject[..subject
        .iter()
        .position(|s| *s == Subject::Unknown)
        .unwrap_or(subject.len())];
    let without_space = known.strip_suffix(&[Subject::Char(' ')]).unwrap_or(known);
    let open_ended = alternatives
        .iter()
        .any(|p| p.last() == Some(&Token::Star) && glob_match(p, known));
    if open_ended && (first_unknown == 0 || any(without_space)) {
        Match::Yes
    } else {
        Match::Maybe
    }
}

/// Whether `pattern` matches `text` (all known characters).
fn glob_match(pattern: &[Token], text: &[Subject]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Token::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Token::Char(c)) if text[t] == Subject::Char(*c) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|t| *t == Token::Star)
}

/// Whether some values of the unknown words make `text` match `pattern`: a walk over both at
/// once, where a wildcard and an unknown word each stand for any run of characters.
fn glob_may_match(pattern: &[Token], text: &[Subject]) -> bool {
    let m = pattern.len();
    let mut column = vec![false; m + 1];
    column[0] = true;
    for j in 0..=text.len() {
        // Within a column: a wildcard may match nothing; an unknown word may produce the
        // pattern's next character.
        for i in 0..m {
            if column[i]
                && (pattern[i] == Token::Star
                    || (text.get(j) == Some(&Subject::Unknown)
                        && matches!(pattern[i], Token::Char(_))))
            {
                column[i + 1] = true;
            }
        }
        let Some(subject) = text.get(j) else { break };
        let mut next = vec![false; m + 1];
        for i in 0..=m {
            if !column[i] {
                continue;
            }
            match (pattern.get(i), subject) {
                // The wildcard eats the character or the unknown word whole; the unknown
                // word may end here.
                (Some(Token::Star), _) | (_, Subject::Unknown) => next[i] = true,
                (Some(Token::Char(c)), Subject::Char(s)) if c == s => next[i + 1] = true,
                _ => {}
            }
        }
        column = next;
    }
    column[m]
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
        assert!(matches!(
            CommandPattern::parse("git l*g 'x"),
            Err(PatternError::UnbalancedQuote(_))
        ));
    }

    fn words(line: &str) -> Vec<Word> {
        line.split_whitespace()
            .map(|w| match w.strip_prefix('$') {
                Some(_) => Word::dynamic(w),
                None => Word::literal(w),
            })
            .collect()
    }

    /// Claude Code's wildcards anywhere in the rule, matched against one simple command's
    /// words (`$x` stands for a word not known statically).
    #[test]
    fn wildcards_anywhere_match_like_claude_code() {
        use Match::{Maybe, No, Yes};
        let cases: &[(&str, &str, Match)] = &[
            ("ls*", "ls", Yes),
            ("ls*", "ls -la", Yes),
            ("ls*", "lsof -i", Yes),
            ("ls*", "cat ls", No),
            ("ls *", "lsof", No),
            ("ls *", "ls -la", Yes),
            ("* --version", "node --version", Yes),
            ("* --version", "cargo --version", Yes),
            ("* --version", "node --help", No),
            ("* --version", "node --version --x", No),
            ("scripts/*", "scripts/test.sh", Yes),
            ("scripts/*", "scripts/test.sh --all", Yes),
            ("scripts/*", "./scripts/test.sh", No),
            ("scripts/*", "cat scripts/test.sh", No),
            ("rm -rf /*", "rm -rf /", Yes),
            ("rm -rf /*", "rm -rf /home/u", Yes),
            ("rm -rf /*", "rm -rf ./build", No),
            ("rm -rf /*", "rm -fr /", No),
            ("git * main", "git push origin main", Yes),
            ("git * main", "git push origin main --force", No),
            ("git * main:*", "git push origin main --force", Yes),
            ("git * main:*", "git push origin main", Yes),
            ("git * main:*", "git push origin mainline", No),
            ("npm run *:ci", "npm run test:ci", Yes),
            ("npm run *:ci", "npm run test:cd", No),
            ("echo '*' *", "echo * hi", Yes),
            ("echo '*' *", "echo x hi", No),
            // Words not known statically.
            ("ls*", "ls $x", Yes),
            ("rm -rf /*", "rm -rf $x", Maybe),
            ("rm -rf /*", "rm $x /", Maybe),
            ("rm -rf /*", "cp $x /", No),
            ("* --version", "$x --version", Maybe),
            ("scripts/*", "$x", Maybe),
            ("git * main", "git $x main", Maybe),
            ("git * main:*", "git push main $x", Yes),
            ("npm run *:ci", "npm run $x", Maybe),
        ];
        for (rule, line, expected) in cases {
            let pattern = CommandPattern::parse(rule).unwrap();
            assert_eq!(
                pattern.match_words(&words(line), true),
                *expected,
                "Bash({rule}) on `{line}`"
            );
            if matches!(pattern, CommandPattern::Glob(_)) {
                assert_eq!(pattern.to_string(), *rule);
            }
        }
        // A path-qualified program matches by its base name where the caller allows it.
        let rm = CommandPattern::parse("rm -rf /*").unwrap();
        assert_eq!(rm.match_words(&words("/bin/rm -rf /x"), true), Yes);
        assert_eq!(rm.match_words(&words("/bin/rm -rf /x"), false), No);
        // The legacy suffix and a trailing ` *` stay prefix rules.
        assert!(matches!(
            CommandPattern::parse("npm test:*"),
            Ok(CommandPattern::Prefix(_))
        ));
        assert_eq!(
            CommandPattern::parse("git * main").unwrap().words(),
            ["git".to_string()]
        );
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
            "* --version",
            "py*",
            "ba* -c:*",
            "git * main",
        ] {
            assert!(CommandPattern::parse(s).unwrap().danger().is_some(), "{s}");
        }
        for s in [
            "git status",
            "npm test:*",
            "cargo test:*",
            "python scripts/check.py:*",
            "ls:*",
            "ls*",
            "scripts/*",
            "cargo test * --release",
        ] {
            assert_eq!(CommandPattern::parse(s).unwrap().danger(), None, "{s}");
        }
    }
}
