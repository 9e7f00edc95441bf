//! Brace expansion as Bash does it (braces.c): purely syntactic, on a word's source text,
//! before every other expansion. Yields each resulting word as pieces of that text (so the
//! caller keeps their quoting) or generated sequence terms.

/// A piece of one expanded word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// The source bytes `start..end` (absolute offsets).
    Source(usize, usize),
    /// A term of a sequence (`{1..3}`, `{a..e}`).
    Generated(String),
}

use super::bounds::MAX_BRACKET_DEPTH;

/// Every head continued by every tail, in order.
fn joined(mut heads: Words, tails: Words) -> Words {
    // One tail (a literal brace, a one-word list): the heads are continued where they are,
    // so a word of many such braces is not copied once per brace.
    if let [tail] = tails.as_slice() {
        for head in &mut heads {
            head.extend(tail.iter().cloned());
        }
        return heads;
    }
    heads
        .iter()
        .flat_map(|head| {
            tails.iter().map(move |tail| {
                let mut w = head.clone();
                w.extend(tail.iter().cloned());
                w
            })
        })
        .collect()
}

/// More terms than this in one sequence make the word unknowable.
const MAX_SEQUENCE: i64 = 1000;

pub(crate) struct Expander<'a> {
    /// The word's source text.
    pub text: &'a [u8],
    /// Where it starts in the source.
    pub base: usize,
    /// Expansions the parser found (`$(…)`, `${…}`, `<(…)`), as absolute byte ranges: Bash
    /// passes them through whole.
    pub atoms: &'a [(usize, usize)],
}

type Words = Vec<Vec<Segment>>;

impl Expander<'_> {
    /// Every word the text expands to, in Bash's order; `None` beyond `limit` words.
    pub fn expand(&self, limit: usize) -> Option<Words> {
        self.brace_expand(0, self.text.len(), limit, 0)
    }

    fn whole(&self, from: usize, to: usize) -> Words {
        vec![vec![Segment::Source(self.base + from, self.base + to)]]
    }

    /// Where a `$(`, `<(` or `>(` that starts at `i` ends (the index after it).
    fn skip_substitution(&self, i: usize, to: usize) -> usize {
        if let Some(&(_, end)) = self.atoms.iter().find(|(s, _)| *s == self.base + i) {
            return (end - self.base).min(to);
        }
        // Not seen by the parser: balance the parentheses.
        let mut depth = 0usize;
        let mut j = i + 1;
        while j < to {
            match self.text[j] {
                b'\\' => j += 1,
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        to
    }

    /// braces.c's `brace_gobbler`: from `i`, the first `satisfy` at brace level 0 outside
    /// quotes, or `None` at `to`.
    fn gobble(&self, mut i: usize, to: usize, satisfy: u8) -> Option<usize> {
        let t = self.text;
        let at = |k: usize| if k < to { t[k] } else { 0 };
        let mut level = 0usize;
        let mut quoted: u8 = 0;
        let mut pass_next = false;
        while i < to {
            let c = t[i];
            if pass_next {
                pass_next = false;
                i += 1;
                continue;
            }
            if c == b'\\' && (quoted == 0 || quoted == b'"' || quoted == b'`') {
                pass_next = true;
                i += 1;
                continue;
            }
            if c == b'$' && at(i + 1) == b'{' && quoted != b'\'' {
                pass_next = true;
                i += 1;
                if quoted == 0 {
                    level += 1;
                }
                continue;
            }
            if quoted != 0 {
                if c == quoted {
                    quoted = 0;
                }
                if quoted == b'"' && c == b'$' && at(i + 1) == b'(' {
                    i = self.skip_substitution(i + 1, to);
                    continue;
                }
                i += 1;
                continue;
            }
            if matches!(c, b'"' | b'\'' | b'`') {
                quoted = c;
                i += 1;
                continue;
            }
            if matches!(c, b'$' | b'<' | b'>') && at(i + 1) == b'(' {
                i = self.skip_substitution(i + 1, to);
                continue;
            }
            if c == satisfy && level == 0 {
                // An open brace alone, or right before a close brace, is left as it is.
                let blank = |b: u8| matches!(b, 0 | b' ' | b'\t' | b'\n');
                let alone = (i == 0 || blank(t[i - 1])) && (blank(at(i + 1)) || at(i + 1) == b'}');
                if c == b'{' && alone {
                    i += 1;
                    continue;
                }
                return Some(i);
            }
            if c == b'{' {
                level += 1;
            } else if c == b'}' && level > 0 {
                level -= 1;
            }
            i += 1;
        }
        None
    }

    /// braces.c's `brace_expand` over `text[from..to]`: braces.c recurses on the text after
    /// each brace, this walks along it (a word of a thousand `{a,b}` must not take a thousand
    /// frames); it recurses only into a list's parts, `depth` deep.
    fn brace_expand(&self, from: usize, to: usize, limit: usize, depth: usize) -> Option<Words> {
        if depth > MAX_BRACKET_DEPTH || tollgate_base::stack_is_low() {
            return None;
        }
        // The words so far, each to be continued by what follows `from`.
        let mut heads: Words = vec![Vec::new()];
        let mut from = from;
        loop {
            let Some((open, close, tack)) = self.next_brace(from, to, limit, depth)? else {
                return Some(joined(heads, self.whole(from, to)));
            };
            let preamble = Segment::Source(self.base + from, self.base + open);
            let tack: Words = tack
                .into_iter()
                .map(|mut w| {
                    w.insert(0, preamble.clone());
                    w
                })
                .collect();
            if heads.len().saturating_mul(tack.len()) > limit {
                return None;
            }
            heads = joined(heads, tack);
            if close + 1 >= to {
                return Some(heads);
            }
            from = close + 1;
        }
    }

    /// The first brace expression of `text[from..to]`: where it opens and closes and the
    /// words it expands to; `None` inside when the rest is taken whole, `None` outside past
    /// `limit` words.
    #[allow(clippy::type_complexity)]
    fn next_brace(
        &self,
        from: usize,
        to: usize,
        limit: usize,
        depth: usize,
    ) -> Option<Option<(usize, usize, Words)>> {
        let mut i = from;
        let open = loop {
            match self.gobble(i, to, b'{') {
                None => break None,
                Some(o) => {
                    if self.gobble(o + 1, to, b'}').is_some() {
                        break Some(o);
                    }
                    i = o + 1;
                }
            }
        };
        let Some(open) = open else {
            return Some(None);
        };
        let start = open + 1;
        let Some(close) = self.gobble(start, to, b'}') else {
            return Some(None);
        };
        let amble = &self.text[start..close];
        // Any comma not after a backslash makes it a list (quotes are not looked at here).
        let mut j = 0;
        let mut comma = false;
        while j < amble.len() {
            if amble[j] == b'\\' {
                j += 2;
                continue;
            }
            if amble[j] == b',' {
                comma = true;
                break;
            }
            j += 1;
        }
        // A list needs a comma outside quotes at its own level (`{'a,b'}` stays as it is).
        let list = comma && self.gobble(start, close, b',').is_some();
        let terms = if list { None } else { sequence(amble) };
        let tack: Words = if list {
            self.expand_amble(start, close, limit, depth + 1)?
        } else {
            match terms {
                Some(terms) => terms
                    .into_iter()
                    .map(|t| vec![Segment::Generated(t)])
                    .collect(),
                None if close + 1 < to => vec![vec![Segment::Source(
                    self.base + open,
                    self.base + close + 1,
                )]],
                None => return Some(None),
            }
        };
        (tack.len() <= limit).then_some(Some((open, close, tack)))
    }

    /// braces.c's `expand_amble`: the list between braces, split at level-0 commas, each
    /// part expanded in turn.
    fn expand_amble(&self, from: usize, to: usize, limit: usize, depth: usize) -> Option<Words> {
        let mut result = Vec::new();
        let mut start = from;
        loop {
            let end = self.gobble(start, to, b',');
            let part_end = end.unwrap_or(to);
            result.extend(self.brace_expand(start, part_end, limit, depth)?);
            if result.len() > limit {
                return None;
            }
            match end {
                Some(e) => start = e + 1,
                None => break,
            }
        }
        Some(result)
    }
}

/// `x..y[..incr]` of integers or single letters, as braces.c's `expand_seqterm`.
fn sequence(amble: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(amble).ok()?;
    let (lhs, rest) = text.split_once("..")?;
    if lhs.is_empty() || rest.is_empty() {
        return None;
    }
    let (rhs, incr) = match rest.split_once("..") {
        Some((r, i)) if !i.is_empty() => (r, Some(i)),
        Some(_) => return None,
        None => (rest, None),
    };
    let incr: i64 = match incr {
        Some(i) => integer(i)?,
        None => 1,
    };
    let letter = |s: &str| {
        let b = s.as_bytes();
        (b.len() == 1 && b[0].is_ascii_alphabetic()).then(|| i64::from(b[0]))
    };
    let (start, end, width) = match (integer(lhs), integer(rhs)) {
        (Some(l), Some(r)) => {
            let padded = |s: &str| {
                let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
                digits.len() > 1 && digits.starts_with('0')
            };
            let width = if padded(lhs) || padded(rhs) {
                lhs.len().max(rhs.len())
            } else {
                0
            };
            (l, r, Some(width))
        }
        (None, None) => (letter(lhs)?, letter(rhs)?, None),
        _ => return None,
    };
    let step = match incr.checked_abs()? {
        0 => 1,
        s => s,
    };
    let count = (end - start).checked_abs()? / step + 1;
    if count > MAX_SEQUENCE {
        return None;
    }
    let mut terms = Vec::new();
    let mut n = start;
    for _ in 0..count {
        terms.push(match width {
            Some(w) => format!("{n:0w$}"),
            None => char::from(u8::try_from(n).ok()?).to_string(),
        });
        n = if end >= start { n + step } else { n - step };
    }
    Some(terms)
}

/// A decimal integer as `strtoimax` takes a whole word (sign allowed).
fn integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = s.trim_start_matches('+').parse().ok()?;
    // Far beyond what a sequence may hold; keeps the arithmetic above in range.
    (v.abs() < 1 << 40).then_some(v)
}
