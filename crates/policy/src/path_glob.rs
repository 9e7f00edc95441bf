//! The path globs matched without a regex: literal characters, `?`, `*` and `**` — what
//! nearly every path rule is made of. A glob is read exactly as the `globset` crate reads it
//! and matched with the meaning of the regex globset would build for it, in one pass over the
//! path with nothing compiled: compiling those regexes was nearly all of a large policy's
//! load time and memory. Classes, braces and escapes are not read here (`parse` says None);
//! their rules keep globset.

/// One step of a glob's program, as in the regex globset builds (`literal_separator` on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// This byte.
    Byte(u8),
    /// `?`: one byte that is not `/`.
    NotSlash,
    /// `*`: any run of bytes without `/`.
    StarNotSlash,
    /// Inside `**`: any run of bytes.
    StarAny,
    /// The next two steps (`StarAny`, `Byte(b'/')`) may be skipped: the `(?:.*/)?` that
    /// globset's leading and inner `**/` stand for.
    OptionalFolders,
}

/// A path glob in the subset this file reads, compiled into steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGlob {
    steps: Box<[Step]>,
    /// The glob is `**` alone, which globset makes match every path, the empty one too.
    everything: bool,
}

/// Where a glob can be looked up in an index before it is run, so a decision runs only the
/// globs that can match. Derived from the steps; every match of the glob implies its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobKey {
    /// `**` alone: every path.
    Everything,
    /// The glob is these bytes and nothing else: it matches a path equal to them or below
    /// them (see [`PathGlob::matches`]).
    Exact(Vec<u8>),
    /// A match starts with these bytes and a `/` (empty: nothing is known).
    Folder(Vec<u8>),
    /// A glob starting with `**/` whose first part is this literal name: a match has a
    /// component equal to it.
    Name(Vec<u8>),
    /// A glob starting with `**/` whose first part ends in a literal with a dot: a match has a
    /// component whose extension (after its last dot) is this.
    Extension(Vec<u8>),
}

/// globset's tokens for the subset read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(char),
    Any,
    ZeroOrMore,
    RecursivePrefix,
    RecursiveSuffix,
    RecursiveZeroOrMore,
}

/// The character reader of globset's parser: `prev` is the character before `cur`, which
/// decides what a `**` means.
struct Reader<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    prev: Option<char>,
    cur: Option<char>,
}

impl Reader<'_> {
    fn bump(&mut self) -> Option<char> {
        self.prev = self.cur;
        self.cur = self.chars.next();
        self.cur
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }
}

impl PathGlob {
    /// Reads `glob` as globset does with `literal_separator` and `backslash_escape` on;
    /// None when it holds a class, a brace, an escape or a comma, which this file leaves to
    /// globset.
    pub fn parse(glob: &str) -> Option<PathGlob> {
        let tokens = tokens(glob)?;
        if tokens == [Token::RecursivePrefix] {
            return Some(PathGlob {
                steps: Box::new([]),
                everything: true,
            });
        }
        let mut steps = Vec::new();
        for token in tokens {
            match token {
                Token::Literal(c) => {
                    let mut buf = [0; 4];
                    steps.extend(c.encode_utf8(&mut buf).bytes().map(Step::Byte));
                }
                Token::Any => steps.push(Step::NotSlash),
                // `**` inside a name is two stars; one is the same language.
                Token::ZeroOrMore if steps.last() == Some(&Step::StarNotSlash) => {}
                Token::ZeroOrMore => steps.push(Step::StarNotSlash),
                Token::RecursivePrefix => {
                    steps.extend([Step::OptionalFolders, Step::StarAny, Step::Byte(b'/')]);
                }
                Token::RecursiveSuffix => steps.extend([Step::Byte(b'/'), Step::StarAny]),
                Token::RecursiveZeroOrMore => steps.extend([
                    Step::Byte(b'/'),
                    Step::OptionalFolders,
                    Step::StarAny,
                    Step::Byte(b'/'),
                ]),
            }
        }
        Some(PathGlob {
            steps: steps.into_boxed_slice(),
            everything: false,
        })
    }

    /// Whether the glob matches `path` or one of its ancestors below the anchor (`path` cut
    /// before one of its `/`): the glob and its "everything inside" twin `glob/**` together,
    /// as a path rule means them.
    pub fn matches(&self, path: &[u8]) -> bool {
        if self.everything {
            return true;
        }
        let accept = self.steps.len();
        let mut now = vec![false; accept + 1];
        let mut next = vec![false; accept + 1];
        now[0] = true;
        self.close(&mut now);
        for &byte in path {
            if byte == b'/' && now[accept] {
                return true;
            }
            next.fill(false);
            let mut alive = false;
            for (pc, step) in self.steps.iter().enumerate() {
                if !now[pc] {
                    continue;
                }
                let target = match step {
                    Step::Byte(b) if *b == byte => pc + 1,
                    Step::NotSlash if byte != b'/' => pc + 1,
                    Step::StarNotSlash if byte != b'/' => pc,
                    Step::StarAny => pc,
                    _ => continue,
                };
                next[target] = true;
                alive = true;
            }
            if !alive {
                return false;
            }
            self.close(&mut next);
            std::mem::swap(&mut now, &mut next);
        }
        now[accept]
    }

    /// Adds what the states in `set` reach without reading a byte. Those moves only go
    /// forward, so one pass in order is the closure.
    fn close(&self, set: &mut [bool]) {
        for pc in 0..self.steps.len() {
            if !set[pc] {
                continue;
            }
            match self.steps[pc] {
                Step::StarNotSlash | Step::StarAny => set[pc + 1] = true,
                Step::OptionalFolders => {
                    set[pc + 1] = true;
                    set[pc + 3] = true;
                }
                Step::Byte(_) | Step::NotSlash => {}
            }
        }
    }

    /// The key an index files this glob under.
    pub fn key(&self) -> GlobKey {
        if self.everything {
            return GlobKey::Everything;
        }
        if let Some(rest) =
            self.steps
                .strip_prefix(&[Step::OptionalFolders, Step::StarAny, Step::Byte(b'/')])
        {
            return first_part_key(rest);
        }
        let prefix = literal_bytes(self.steps.iter());
        if prefix.len() == self.steps.len() {
            return GlobKey::Exact(prefix);
        }
        let folder = prefix.iter().rposition(|&b| b == b'/').unwrap_or(0);
        GlobKey::Folder(prefix[..folder].to_vec())
    }
}

/// The key of a glob that starts with `**/`, from its first part (`rest` up to the next `/`).
fn first_part_key(rest: &[Step]) -> GlobKey {
    let end = rest
        .iter()
        .position(|step| *step == Step::Byte(b'/'))
        .unwrap_or(rest.len());
    let part = &rest[..end];
    let mut tail = literal_bytes(part.iter().rev());
    tail.reverse();
    if tail.len() == part.len() && !part.is_empty() {
        return GlobKey::Name(tail);
    }
    match tail.iter().rposition(|&b| b == b'.') {
        Some(dot) => GlobKey::Extension(tail[dot + 1..].to_vec()),
        None => GlobKey::Folder(Vec::new()),
    }
}

/// The bytes of the leading `Byte` steps of `steps`.
fn literal_bytes<'s>(steps: impl Iterator<Item = &'s Step>) -> Vec<u8> {
    steps
        .map_while(|step| match step {
            Step::Byte(b) => Some(*b),
            _ => None,
        })
        .collect()
}

/// globset's parse of `glob` (`Parser::parse` and `parse_star`, without alternates), or None
/// for what this file leaves to globset.
fn tokens(glob: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut reader = Reader {
        chars: glob.chars().peekable(),
        prev: None,
        cur: None,
    };
    while let Some(c) = reader.bump() {
        match c {
            '?' => tokens.push(Token::Any),
            '*' => star(&mut tokens, &mut reader),
            '[' | '{' | '}' | ',' | '\\' => return None,
            c => tokens.push(Token::Literal(c)),
        }
    }
    Some(tokens)
}

/// A `*` was read: one star, or a `**` whose meaning depends on where it stands.
fn star(tokens: &mut Vec<Token>, reader: &mut Reader) {
    let prev = reader.prev;
    if reader.peek() != Some('*') {
        tokens.push(Token::ZeroOrMore);
        return;
    }
    reader.bump();
    if tokens.is_empty() {
        if reader.peek().is_some_and(|c| c != '/') {
            tokens.extend([Token::ZeroOrMore, Token::ZeroOrMore]);
        } else {
            tokens.push(Token::RecursivePrefix);
            reader.bump();
        }
        return;
    }
    if prev != Some('/') {
        tokens.extend([Token::ZeroOrMore, Token::ZeroOrMore]);
        return;
    }
    let is_suffix = match reader.peek() {
        None => true,
        Some('/') => {
            reader.bump();
            false
        }
        Some(_) => {
            tokens.extend([Token::ZeroOrMore, Token::ZeroOrMore]);
            return;
        }
    };
    // The `/` before the `**` is folded into it, as globset does.
    let recursive = match tokens.pop() {
        Some(Token::RecursivePrefix) => Token::RecursivePrefix,
        Some(Token::RecursiveSuffix) => Token::RecursiveSuffix,
        _ if is_suffix => Token::RecursiveSuffix,
        _ => Token::RecursiveZeroOrMore,
    };
    tokens.push(recursive);
}

#[cfg(test)]
mod tests {
    use globset::GlobBuilder;
    use proptest::prelude::*;

    use super::*;

    /// What globset's own regex says: the glob or its `/**` twin matches a path.
    fn globset_matcher(glob: &str) -> impl Fn(&str) -> bool {
        let compiled = |pattern: &str| {
            GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher()
        };
        let (glob, twin) = (compiled(glob), compiled(&format!("{glob}/**")));
        move |path| glob.is_match(path) || twin.is_match(path)
    }

    #[test]
    fn matches_as_globset_on_a_table() {
        let cases = [
            ("src/**", "src/a/b.rs", true),
            ("src/**", "src", false),
            ("src/**", "src/", true),
            ("src", "src/deep/file", true),
            ("src", "srcx", false),
            ("**/*.env", "a/b/prod.env", true),
            ("**/*.env", "prod.env/inner", true),
            ("**/*.env", "prod.envx", false),
            ("src/*.rs", "src/a/b.rs", false),
            ("src/*.rs", "src/a.rs", true),
            ("**", "", true),
            ("**", "anything/at/all", true),
            ("a/**/b", "a/b", true),
            ("a/**/b", "a/x/y/b/c", true),
            ("a/**/b", "ab", false),
            ("a?c", "abc", true),
            ("a?c", "a/c", false),
            ("a**b", "axxb", true),
            ("a**b", "ax/xb", false),
            ("**/**/x", "x", true),
            ("a/**/**", "a/q", true),
            ("a//b", "a//b", true),
            ("é*", "été", true),
            ("x", "", false),
        ];
        for (glob, path, expected) in cases {
            let parsed = PathGlob::parse(glob).unwrap();
            assert_eq!(
                parsed.matches(path.as_bytes()),
                expected,
                "{glob} vs {path}"
            );
            assert_eq!(
                globset_matcher(glob)(path),
                expected,
                "globset: {glob} vs {path}"
            );
        }
    }

    #[test]
    fn classes_braces_and_escapes_are_left_to_globset() {
        for glob in ["a[bc]", "{a,b}", "a\\*", "a,b"] {
            assert_eq!(PathGlob::parse(glob), None, "{glob}");
        }
    }

    #[test]
    fn keys_name_what_every_match_must_contain() {
        let key = |glob: &str| PathGlob::parse(glob).unwrap().key();
        assert_eq!(key("**"), GlobKey::Everything);
        assert_eq!(key("src/gen"), GlobKey::Exact(b"src/gen".to_vec()));
        assert_eq!(key("src/gen/*.rs"), GlobKey::Folder(b"src/gen".to_vec()));
        assert_eq!(key("src/ge*/x"), GlobKey::Folder(b"src".to_vec()));
        assert_eq!(key("*.rs"), GlobKey::Folder(Vec::new()));
        assert_eq!(key("**/.env"), GlobKey::Name(b".env".to_vec()));
        assert_eq!(
            key("**/node_modules/**"),
            GlobKey::Name(b"node_modules".to_vec())
        );
        assert_eq!(key("**/*.tar.gz"), GlobKey::Extension(b"gz".to_vec()));
        assert_eq!(key("**/id_rsa*"), GlobKey::Folder(Vec::new()));
    }

    /// Globs and paths over a small alphabet, so that stars, slashes and dots meet often.
    fn glob_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!["a", "b", ".", "/", "*", "?", "**", "**/", "/**", "é"]),
            1..7,
        )
        .prop_map(|parts| parts.concat())
    }

    fn path_text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", ".", "/", "é"]), 0..9)
            .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The whole point: the same answer as globset's regex, on any glob of the subset.
        #[test]
        fn agrees_with_globset(glob in glob_text(), paths in prop::collection::vec(path_text(), 16)) {
            let parsed = PathGlob::parse(&glob).unwrap();
            let oracle = globset_matcher(&glob);
            for path in &paths {
                prop_assert_eq!(
                    parsed.matches(path.as_bytes()),
                    oracle(path),
                    "{} vs {}", glob, path
                );
            }
        }

        /// An index may skip a glob whose key the path does not have: never one that matches.
        #[test]
        fn every_match_has_the_key(glob in glob_text(), path in path_text()) {
            let parsed = PathGlob::parse(&glob).unwrap();
            if parsed.matches(path.as_bytes()) {
                let path = path.as_bytes();
                let cuts: Vec<&[u8]> = path
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .map(|(i, _)| &path[..i])
                    .chain([path])
                    .collect();
                let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
                let extension = |part: &[u8]| {
                    part.iter().rposition(|b| *b == b'.').map(|dot| part[dot + 1..].to_vec())
                };
                let found = match parsed.key() {
                    GlobKey::Everything => true,
                    GlobKey::Exact(bytes) => cuts.contains(&bytes.as_slice()),
                    GlobKey::Folder(bytes) => bytes.is_empty() || cuts.contains(&bytes.as_slice()),
                    GlobKey::Name(name) => parts.contains(&name.as_slice()),
                    GlobKey::Extension(ext) => parts.iter().any(|part| extension(part) == Some(ext.clone())),
                };
                prop_assert!(found, "{} matches {:?} without its key {:?}", glob, String::from_utf8_lossy(path), parsed.key());
            }
        }
    }
}
