//! Pathname expansion as Bash does it by default (no dotglob, extglob, nocaseglob or
//! globstar): a word's glob pattern matched against directory listings the caller injects,
//! so every path a glob operand can reach is known and checked.

use std::path::{Path, PathBuf};

use super::word::{Piece, Quoting, Word};

/// More candidate paths than this make a glob unknowable (ask).
const MAX_MATCHES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pat {
    Lit(char),
    /// `?`
    One,
    /// `*`
    Star,
    /// `[…]`: ranges, negated or not.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// One path component of a pattern.
enum Component {
    Literal(String),
    Pattern(Vec<Pat>),
}

/// The word's characters with whether glob syntax applies to each; `None` when the word
/// holds an expansion or a backslash from a variable's value (whose meaning in a pattern is
/// not modelled).
fn active_chars(word: &Word) -> Option<Vec<(char, bool)>> {
    let value = word.value.as_deref()?;
    let from_pieces: Option<Vec<(char, bool)>> = word
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Char {
                c: '\\',
                q: Quoting::Expanded,
                ..
            } => None,
            Piece::Char { c, q, .. } => Some((*c, matches!(q, Quoting::Bare | Quoting::Expanded))),
            Piece::Dyn(_) => None,
        })
        .collect();
    match from_pieces {
        Some(chars)
            if chars.iter().map(|(c, _)| c).copied().eq(value.chars())
                && (!word.glob
                    || chars
                        .iter()
                        .any(|&(c, a)| a && matches!(c, '*' | '?' | '['))) =>
        {
            Some(chars)
        }
        // The value was rewritten after parsing (`git show REV:path`): every character is
        // taken as syntax, which matches at least what Bash would.
        _ => Some(value.chars().map(|c| (c, true)).collect()),
    }
}

/// Compiles one component; `None` for syntax not modelled (extglob, character classes).
fn compile(chars: &[(char, bool)]) -> Option<Vec<Pat>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (c, active) = chars[i];
        i += 1;
        if !active {
            out.push(Pat::Lit(c));
            continue;
        }
        match c {
            '*' => out.push(Pat::Star),
            '?' => out.push(Pat::One),
            '(' | ')' | '|' => return None,
            '[' => match bracket(&chars[i..])? {
                Some((pat, used)) => {
                    out.push(pat);
                    i += used;
                }
                None => out.push(Pat::Lit('[')),
            },
            c => out.push(Pat::Lit(c)),
        }
    }
    Some(out)
}

/// A bracket expression after its `[`: the pattern and how many characters it used, `Some(None)`
/// when there is no closing `]` (the `[` is literal), `None` for classes like `[:alpha:]`.
#[allow(clippy::type_complexity)]
fn bracket(chars: &[(char, bool)]) -> Option<Option<(Pat, usize)>> {
    let mut i = 0;
    let negated = matches!(chars.first(), Some(('!' | '^', true)));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while i < chars.len() {
        let (c, active) = chars[i];
        if c == ']' && active && !first {
            return Some(Some((Pat::Class { negated, ranges }, i + 1)));
        }
        if c == '[' && active && matches!(chars.get(i + 1), Some((':' | '=' | '.', _))) {
            return None;
        }
        first = false;
        if let (Some(('-', true)), Some(&(hi, _))) = (chars.get(i + 1), chars.get(i + 2))
            && hi != ']'
        {
            ranges.push((c, hi));
            i += 3;
            continue;
        }
        ranges.push((c, c));
        i += 1;
    }
    Some(None)
}

/// Whether `name` matches `pat` whole: a walk over both with one way back, to the last `*`
/// (a `*` that must match more only ever takes the next character), so the work is linear in
/// each and no pattern, however long, recurses.
fn matches(pat: &[Pat], name: &[char]) -> bool {
    let one = |p: &Pat, c: &char| match p {
        Pat::Lit(l) => l == c,
        Pat::One => true,
        Pat::Class { negated, ranges } => {
            ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated
        }
        Pat::Star => false,
    };
    let (mut p, mut n) = (0, 0);
    // The last `*` seen and the first name character it has not taken yet.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(Pat::Star) => {
                star = Some((p, n));
                p += 1;
            }
            Some(single) if one(single, &name[n]) => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((at, taken)) => {
                    star = Some((at, taken + 1));
                    p = at + 1;
                    n = taken + 1;
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|x| *x == Pat::Star)
}

/// Whether `name` (one path component) matches `pat` as Bash's globbing would: a leading
/// `.` only by a literal `.`, and `.`/`..` never.
fn matches_name(pat: &[Pat], name: &str) -> bool {
    if name == "." || name == ".." {
        return false;
    }
    if name.starts_with('.') && pat.first() != Some(&Pat::Lit('.')) {
        return false;
    }
    let chars: Vec<char> = name.chars().collect();
    matches(pat, &chars)
}

/// Whether a command word that is a glob could name the program `name` (a rule's first
/// word): its last component matched against the name's.
pub(crate) fn could_name(word: &Word, name: &str) -> bool {
    let Some(chars) = active_chars(word) else {
        return true;
    };
    let last: Vec<(char, bool)> = match chars.iter().rposition(|&(c, _)| c == '/') {
        Some(slash) if !name.contains('/') => chars[slash + 1..].to_vec(),
        _ => chars,
    };
    let target = name.rsplit('/').next().unwrap_or(name);
    match compile(&last) {
        Some(pat) => matches_name(&pat, target),
        None => true,
    }
}

/// Every path a glob word can expand to from `dir` (absolute; `home` for a leading `~`),
/// as Bash would produce them, listing folders with `list_dir`. A pattern that matches
/// nothing stays as written (one literal path). `None` when a listing fails, the syntax is
/// not modelled, or there are too many.
pub(crate) fn expand(
    word: &Word,
    dir: &Path,
    home: Option<&Path>,
    list_dir: &dyn Fn(&Path) -> Option<Vec<String>>,
) -> Option<Vec<PathBuf>> {
    let mut chars = active_chars(word)?;
    if word.tilde {
        let end = chars
            .iter()
            .position(|&(c, _)| c == '/')
            .unwrap_or(chars.len());
        if end != 1 {
            return None;
        }
        let home: Vec<(char, bool)> = home?.to_str()?.chars().map(|c| (c, false)).collect();
        chars.splice(0..1, home);
    }
    let absolute = chars.first().is_some_and(|&(c, _)| c == '/');
    let mut components = Vec::new();
    for part in chars.split(|&(c, _)| c == '/') {
        if part.is_empty() {
            continue;
        }
        let glob = part.iter().any(|&(c, a)| a && matches!(c, '*' | '?' | '['));
        components.push(if glob {
            Component::Pattern(compile(part)?)
        } else {
            Component::Literal(part.iter().map(|(c, _)| c).collect())
        });
    }
    let start = if absolute {
        PathBuf::from("/")
    } else {
        dir.to_path_buf()
    };
    let literal = {
        let text: String = chars.iter().map(|(c, _)| c).collect();
        if absolute {
            PathBuf::from(text)
        } else {
            dir.join(text)
        }
    };
    let mut paths = vec![start];
    for component in &components {
        match component {
            Component::Literal(name) => paths.iter_mut().for_each(|p| p.push(name)),
            Component::Pattern(pat) => {
                let mut next = Vec::new();
                for p in &paths {
                    let mut names = list_dir(p)?;
                    names.sort_unstable();
                    next.extend(
                        names
                            .iter()
                            .filter(|n| matches_name(pat, n))
                            .map(|n| p.join(n)),
                    );
                    if next.len() > MAX_MATCHES {
                        return None;
                    }
                }
                paths = next;
            }
        }
    }
    if paths.is_empty() {
        paths.push(literal);
    }
    Some(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain recursive reading of a pattern, for comparison with the walk.
    fn by_recursion(pat: &[Pat], name: &[char]) -> bool {
        match pat.split_first() {
            None => name.is_empty(),
            Some((Pat::Star, rest)) => (0..=name.len()).any(|k| by_recursion(rest, &name[k..])),
            Some((p, rest)) => match name.split_first() {
                None => false,
                Some((c, tail)) => {
                    let ok = match p {
                        Pat::Lit(l) => l == c,
                        Pat::One => true,
                        Pat::Class { negated, ranges } => {
                            ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated
                        }
                        Pat::Star => false,
                    };
                    ok && by_recursion(rest, tail)
                }
            },
        }
    }

    /// Every pattern of up to five of `a`, `b`, `*`, `?`, `[a]` against every name of up to
    /// five of `a`, `b`: the walk agrees with the recursion.
    #[test]
    fn the_walk_matches_as_the_recursion_does() {
        let atoms = ["a", "b", "*", "?", "[a]"];
        let mut patterns = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = patterns
                .iter()
                .flat_map(|p| atoms.iter().map(move |a| format!("{p}{a}")))
                .collect();
            patterns.extend(longer);
            patterns.sort();
            patterns.dedup();
        }
        let mut names = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = names
                .iter()
                .flat_map(|n| ["a", "b"].iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
            names.sort();
            names.dedup();
        }
        for p in &patterns {
            let compiled = pat(p);
            for n in &names {
                let chars: Vec<char> = n.chars().collect();
                assert_eq!(
                    matches(&compiled, &chars),
                    by_recursion(&compiled, &chars),
                    "{p} against {n}"
                );
            }
        }
        // A long pattern of stars ends at once, where the recursion would not.
        let long = pat(&"*a".repeat(20_000));
        assert!(!matches(&long, &['b'; 200]));
    }

    fn pat(s: &str) -> Vec<Pat> {
        let chars: Vec<(char, bool)> = s.chars().map(|c| (c, true)).collect();
        compile(&chars).unwrap()
    }

    #[test]
    fn patterns_match_like_bash() {
        let cases = [
            ("*.rs", "main.rs", true),
            ("*.rs", ".hidden.rs", false),
            (".*", ".env", true),
            ("r[m]", "rm", true),
            ("r?", "rm", true),
            ("r[!m]", "rm", false),
            ("r[^a-l]", "rm", true),
            ("[]x]", "]", true),
            ("p?", "p1", true),
            ("*", ".", false),
            ("-*", "-rf", true),
            ("[a-", "[a-", true),
        ];
        for (p, name, want) in cases {
            assert_eq!(matches_name(&pat(p), name), want, "{p} vs {name}");
        }
        let classes: Vec<(char, bool)> = "[[:alpha:]]".chars().map(|c| (c, true)).collect();
        assert!(compile(&classes).is_none());
    }

    #[test]
    fn expansion_lists_each_folder_and_keeps_a_pattern_that_matches_nothing() {
        let list = |dir: &Path| -> Option<Vec<String>> {
            match dir.to_str()? {
                "/ws/src" => Some(vec!["p1".into(), "a.rs".into(), ".env".into()]),
                _ => Some(Vec::new()),
            }
        };
        let word = Word::literal("src/p?/environ");
        let mut glob = word.clone();
        glob.glob = true;
        for p in &mut glob.pieces {
            if let Piece::Char { q, .. } = p {
                *q = Quoting::Bare;
            }
        }
        assert_eq!(
            expand(&glob, Path::new("/ws"), None, &list),
            Some(vec![PathBuf::from("/ws/src/p1/environ")])
        );
        let mut none = Word::literal("*.md");
        none.glob = true;
        assert_eq!(
            expand(&none, Path::new("/ws"), None, &list),
            Some(vec![PathBuf::from("/ws/*.md")])
        );
        let unlisted = |_: &Path| None;
        assert_eq!(expand(&glob, Path::new("/ws"), None, &unlisted), None);
    }
}
