//! Turns a tree-sitter word node into the literal argument Bash would pass, or marks it dynamic.
//! Resolves quoting, escapes and `$'…'`; reports (never performs) expansions, globs and tildes.

use tree_sitter::Node;

use super::kind::kind;

/// How a character of a word came to be there, which decides what Bash still does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quoting {
    /// Written bare: brace, tilde and glob syntax apply.
    Bare,
    /// Quoted or escaped: literal.
    Quoted,
    /// Backslash-escaped, as Bash's brace expansion sees it (never a brace comma).
    Escaped,
    /// From a variable's value, unquoted: glob syntax applies, braces and tilde do not.
    Expanded,
}

impl Quoting {
    fn literal(self) -> bool {
        matches!(self, Quoting::Quoted | Quoting::Escaped)
    }
}

/// A plain variable reference, whose value the analyser may know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VarRef {
    /// `$x`, `${x}`.
    Scalar(String),
    /// `${x[@]}`.
    All(String),
    /// `${x[*]}`.
    Star(String),
}

/// One piece of a word as written: a character, or an expansion whose value the parse alone
/// cannot know. `at` is the byte offset in the source (for brace expansion, which Bash does
/// on the word's text). A word holds one piece per character, so the rare expansion is boxed
/// to keep a character's piece at 16 bytes rather than an expansion's 80.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Char { c: char, q: Quoting, at: usize },
    Dyn(Box<Expansion>),
}

/// An expansion or substitution in a word, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expansion {
    pub raw: String,
    pub quoted: bool,
    pub var: Option<VarRef>,
    /// Its byte range in the source.
    pub start: usize,
    pub end: usize,
}

/// One shell word after brace expansion and quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The literal value, or `None` when it depends on an expansion or substitution.
    pub value: Option<String>,
    /// The source text, for messages.
    pub raw: String,
    /// For a dynamic word, the value with every expansion left as written (see `template`).
    expansions_kept: Option<String>,
    /// Contains an unquoted glob (`*`, `?`, `[`, extglob): it may stand for several words.
    pub glob: bool,
    /// Starts with an unquoted `~`, so Bash will expand it.
    pub tilde: bool,
    /// Its expansion could start with `-` (a dynamic word, or a glob that can match a name
    /// starting with `-`), so a command may read it as a flag.
    pub may_be_flag: bool,
    /// The word's pieces, with their quoting, for glob matching and variable substitution.
    pub(crate) pieces: Vec<Piece>,
}

/// The value of a process substitution (`<(cmd)`): the pipe Bash passes, by the name Bash
/// gives it.
pub(crate) const PROCESS_SUBSTITUTION: &str = "/dev/fd/63";

/// More words than this from one word's brace expansion make it unknowable (ask).
const MAX_BRACE_WORDS: usize = 256;

impl Word {
    /// A literal word that needs no quoting, as made by the analyser itself.
    pub fn literal(text: &str) -> Word {
        Word {
            value: Some(text.to_owned()),
            raw: text.to_owned(),
            expansions_kept: None,
            glob: false,
            tilde: false,
            may_be_flag: false,
            pieces: text
                .chars()
                .map(|c| Piece::Char {
                    c,
                    q: Quoting::Quoted,
                    at: 0,
                })
                .collect(),
        }
    }

    /// A word whose value is not known (`{}` of `find -exec`, an item xargs appends).
    pub fn dynamic(raw: &str) -> Word {
        Word {
            value: None,
            raw: raw.to_owned(),
            expansions_kept: None,
            glob: false,
            tilde: false,
            may_be_flag: true,
            pieces: vec![Piece::Dyn(Box::new(Expansion {
                raw: raw.to_owned(),
                quoted: false,
                var: None,
                start: 0,
                end: 0,
            }))],
        }
    }

    /// The value with every expansion left as written: what Bash evaluates again when the
    /// word is a subscript, an arithmetic operand or a variable's value there
    /// (`"a[\$(cmd "$x")]"` → `a[$(cmd $x)]`).
    pub fn template(&self) -> &str {
        self.expansions_kept
            .as_deref()
            .or(self.value.as_deref())
            .unwrap_or(&self.raw)
    }

    /// A process substitution standing alone (`<(cmd)`, `>(cmd)`): Bash passes the name of a
    /// pipe of the command's own, which its value stands for. A word that merely spells that
    /// name is not one.
    pub fn is_process_substitution(&self) -> bool {
        self.value.as_deref() == Some(PROCESS_SUBSTITUTION)
            && (self.raw.starts_with("<(") || self.raw.starts_with(">("))
            && self.raw.ends_with(')')
    }

    /// The literal value when it is a single, fixed word (no glob).
    pub fn fixed(&self) -> Option<&str> {
        if self.glob {
            None
        } else {
            self.value.as_deref()
        }
    }

    /// How the word appears in an explained argv.
    pub fn display(&self) -> String {
        match &self.value {
            Some(v) => v.clone(),
            None => format!("<dynamic {}>", self.raw),
        }
    }

    /// Whether the word holds a plain variable reference (`$x`, `"${x[@]}"`).
    pub fn refers_to_variables(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Dyn(d) if d.var.is_some()))
    }

    /// Builds a word from its pieces; `raw` is the source text it came from.
    pub(crate) fn from_pieces(pieces: Vec<Piece>, raw: &str) -> Word {
        let mut text = String::with_capacity(raw.len());
        let mut dynamic = false;
        let mut glob = false;
        for (i, p) in pieces.iter().enumerate() {
            match p {
                Piece::Char { c, q, .. } => {
                    text.push(*c);
                    if !q.literal() && glob_char(&pieces, i) {
                        glob = true;
                    }
                }
                Piece::Dyn(d) => {
                    dynamic = true;
                    text.push_str(&d.raw);
                }
            }
        }
        Word::finish(pieces, raw, text, dynamic, glob)
    }

    /// A word of bare ASCII text, without quotes or backslashes: one bare piece per byte, its
    /// value the text itself. What `from_pieces` makes of those pieces, without walking them
    /// to rebuild the text (a plain line's words are mostly such words).
    fn bare_ascii(raw: &str, at: usize) -> Word {
        let pieces: Vec<Piece> = raw
            .bytes()
            .enumerate()
            .map(|(i, c)| Piece::Char {
                c: char::from(c),
                q: Quoting::Bare,
                at: at + i,
            })
            .collect();
        let glob = (0..pieces.len()).any(|i| glob_char(&pieces, i));
        Word::finish(pieces, raw, raw.to_owned(), false, glob)
    }

    /// The word of `pieces`, whose characters spell `text` (expansions as written), once
    /// whether it holds an expansion (`dynamic`) or a glob is known.
    fn finish(pieces: Vec<Piece>, raw: &str, text: String, mut dynamic: bool, glob: bool) -> Word {
        // Bash expands `~` after the `=` of an argument shaped like an assignment, and after
        // each `:` of its value (`dd if=~/.ssh/key`, `make P=/a:~/b`): the word then depends
        // on HOME, and is taken as not known.
        dynamic |= assignment_tilde(&pieces);
        let first = pieces.first();
        let tilde = matches!(
            first,
            Some(Piece::Char {
                c: '~',
                q: Quoting::Bare,
                ..
            })
        );
        let leading_glob = match first {
            Some(Piece::Dyn(_)) => true,
            Some(Piece::Char { q, .. }) => !q.literal() && glob_char(&pieces, 0),
            None => false,
        };
        let leading_dash = matches!(first, Some(Piece::Char { c: '-', .. }));
        let (value, expansions_kept) = if dynamic {
            (None, Some(text))
        } else {
            (Some(text), None)
        };
        Word {
            value,
            raw: raw.to_owned(),
            expansions_kept,
            glob,
            tilde,
            may_be_flag: leading_glob || (glob && leading_dash),
            pieces,
        }
    }

    /// The words Bash makes of this one once the variables `lookup` knows are expanded
    /// (quoted or not: word splitting at blanks, an array's elements as words). `None` when
    /// no reference was replaced. `split` is false when `IFS` may differ from its default:
    /// unquoted references are then left unknown.
    pub(crate) fn substitute(
        &self,
        lookup: &dyn Fn(&str) -> Option<Value>,
        split: bool,
    ) -> Option<Vec<Word>> {
        let mut words: Vec<(Vec<Piece>, bool)> = vec![(Vec::new(), false)];
        let mut replaced = false;
        for piece in &self.pieces {
            let (var, quoted) = match piece {
                Piece::Dyn(d) if let Some(var) = &d.var => (var, d.quoted),
                Piece::Char { q, .. } => {
                    let last = words.last_mut()?;
                    last.0.push(piece.clone());
                    last.1 |= q.literal();
                    continue;
                }
                Piece::Dyn(d) => {
                    let last = words.last_mut()?;
                    last.0.push(piece.clone());
                    last.1 |= d.quoted;
                    continue;
                }
            };
            let name = match var {
                VarRef::Scalar(n) | VarRef::All(n) | VarRef::Star(n) => n,
            };
            let value = match lookup(name) {
                Some(v) if quoted || split || matches!(v, Value::OneOf(_)) => v,
                _ => {
                    let last = words.last_mut()?;
                    last.0.push(piece.clone());
                    last.1 |= quoted;
                    continue;
                }
            };
            let elements: Vec<String> = match (&value, var) {
                (Value::OneOf(w), VarRef::Scalar(_)) if quoted => {
                    replaced = true;
                    let last = words.last_mut()?;
                    last.0.extend(w.pieces.iter().cloned());
                    last.1 = true;
                    continue;
                }
                (Value::OneOf(_), _) => {
                    let last = words.last_mut()?;
                    last.0.push(piece.clone());
                    last.1 |= quoted;
                    continue;
                }
                (Value::Scalar(s), _) => vec![s.clone()],
                (Value::Array(a), VarRef::Scalar(_)) => {
                    vec![a.first().cloned().unwrap_or_default()]
                }
                (Value::Array(a), VarRef::Star(_)) => vec![a.join(" ")],
                (Value::Array(a), VarRef::All(_)) => a.clone(),
            };
            replaced = true;
            for (k, element) in elements.iter().enumerate() {
                if k > 0 {
                    words.push((Vec::new(), false));
                }
                if quoted {
                    let last = words.last_mut()?;
                    last.1 = true;
                    last.0.extend(element.chars().map(|c| Piece::Char {
                        c,
                        q: Quoting::Quoted,
                        at: 0,
                    }));
                    continue;
                }
                let mut field_open = true;
                for c in element.chars() {
                    if matches!(c, ' ' | '\t' | '\n') {
                        if field_open {
                            words.push((Vec::new(), false));
                            field_open = false;
                        }
                        continue;
                    }
                    field_open = true;
                    let last = words.last_mut()?;
                    last.0.push(Piece::Char {
                        c,
                        q: Quoting::Expanded,
                        at: 0,
                    });
                }
            }
        }
        if !replaced {
            return None;
        }
        Some(
            words
                .into_iter()
                .filter(|(pieces, quoted)| *quoted || !pieces.is_empty())
                .map(|(pieces, _)| Word::from_pieces(pieces, &self.raw))
                .collect(),
        )
    }
}

/// A value the analyser knows a variable holds.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Scalar(String),
    Array(Vec<String>),
    /// One of the words a `for` loop's list expands to (a glob: one of its matches).
    OneOf(Word),
}

/// Whether `pieces` spell an assignment (`NAME=…`, the name bare) with a bare `~` right after
/// its `=` or after a bare `:` of its value, which Bash tilde-expands in any command's words.
fn assignment_tilde(pieces: &[Piece]) -> bool {
    let bare =
        |p: &Piece, want: char| matches!(p, Piece::Char { c, q: Quoting::Bare, .. } if *c == want);
    let Some(eq) = pieces.iter().position(|p| bare(p, '=')) else {
        return false;
    };
    let name = &pieces[..eq];
    let is_name = !name.is_empty()
        && name.iter().enumerate().all(|(i, p)| {
            matches!(p, Piece::Char { c, q: Quoting::Bare, .. }
                if *c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
        });
    is_name
        && pieces[eq..]
            .windows(2)
            .any(|w| (bare(&w[0], '=') || bare(&w[0], ':')) && bare(&w[1], '~'))
}

/// Whether the character at `i` is glob syntax: `*`, `?`, `[`, or an extglob's `(`.
fn glob_char(pieces: &[Piece], i: usize) -> bool {
    match pieces.get(i) {
        Some(Piece::Char {
            c: '*' | '?' | '[', ..
        }) => true,
        Some(Piece::Char { c: '(', .. }) => true,
        Some(Piece::Char {
            c: '@' | '!' | '+', ..
        }) => matches!(pieces.get(i + 1), Some(Piece::Char { c: '(', q, .. }) if !q.literal()),
        _ => false,
    }
}

/// Accumulates the pieces of one word.
struct Builder {
    pieces: Vec<Piece>,
}

impl Builder {
    /// A word has no more pieces than its source has bytes, but for a rare decoded escape:
    /// reserved once rather than regrown character by character.
    fn for_node(node: Node) -> Builder {
        Builder {
            pieces: Vec::with_capacity(node.byte_range().len()),
        }
    }

    fn push(&mut self, c: char, q: Quoting, at: usize) {
        self.pieces.push(Piece::Char { c, q, at });
    }

    fn push_str(&mut self, s: &str, q: Quoting, at: usize) {
        for c in s.chars() {
            self.push(c, q, at);
        }
    }

    fn mark_dynamic(&mut self, node: Node, src: &str, quoted: bool) {
        self.pieces.push(Piece::Dyn(Box::new(Expansion {
            raw: src[node.byte_range()].to_owned(),
            quoted,
            var: var_ref(node, src),
            start: node.start_byte(),
            end: node.end_byte(),
        })));
    }
}

/// `$x`, `${x}`, `${x[@]}`, `${x[*]}`: a reference to a variable by name, nothing more.
fn var_ref(node: Node, src: &str) -> Option<VarRef> {
    let text = &src[node.byte_range()];
    let ident = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    match kind(&node) {
        "simple_expansion" => {
            let name = text.strip_prefix('$')?;
            ident(name).then(|| VarRef::Scalar(name.to_owned()))
        }
        "expansion" => {
            let inner = text.strip_prefix("${")?.strip_suffix('}')?;
            if ident(inner) {
                return Some(VarRef::Scalar(inner.to_owned()));
            }
            if let Some(name) = inner.strip_suffix("[@]").filter(|n| ident(n)) {
                return Some(VarRef::All(name.to_owned()));
            }
            inner
                .strip_suffix("[*]")
                .filter(|n| ident(n))
                .map(|name| VarRef::Star(name.to_owned()))
        }
        _ => None,
    }
}

/// Resolves a word-like node (argument, command name, assignment value, redirect target)
/// without brace expansion (assignment values and redirect targets get none).
pub(crate) fn resolve(node: Node, src: &str) -> Word {
    let mut b = Builder::for_node(node);
    add(node, src, &mut b);
    Word::from_pieces(b.pieces, &src[node.byte_range()])
}

/// Resolves a word that Bash brace-expands (a command's words, a `for` list, an array's
/// elements): one word per expansion, in Bash's order. Too many make one unknown word.
/// `injected` are the offsets of empty quotes the parser's second reading put into `src`:
/// they are not the script's, so they do not keep an otherwise empty word.
pub(crate) fn resolve_all(node: Node, src: &str, injected: &[usize]) -> Vec<Word> {
    match resolve_expanded(node, src, injected) {
        Expanded::One(word) => vec![word],
        Expanded::Many(words) => words,
    }
}

/// What one word brace-expands to: nearly always itself alone, which needs no list.
pub(crate) enum Expanded {
    One(Word),
    Many(Vec<Word>),
}

/// [`resolve_all`], without a list for a word that stays one word.
pub(crate) fn resolve_expanded(node: Node, src: &str, injected: &[usize]) -> Expanded {
    let mut b = Builder::for_node(node);
    add(node, src, &mut b);
    let raw = &src[node.byte_range()];
    let bare = |c: char| {
        b.pieces
            .iter()
            .any(|p| matches!(p, Piece::Char { c: x, q: Quoting::Bare, .. } if *x == c))
    };
    if !(bare('{') && bare('}')) {
        return Expanded::One(Word::from_pieces(b.pieces, raw));
    }
    let atoms: Vec<(usize, usize)> = b
        .pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Dyn(d) => Some((d.start, d.end)),
            Piece::Char { .. } => None,
        })
        .collect();
    let expander = super::brace::Expander {
        text: raw.as_bytes(),
        base: node.start_byte(),
        atoms: &atoms,
    };
    let Some(results) = expander.expand(MAX_BRACE_WORDS) else {
        return Expanded::One(Word::dynamic(raw));
    };
    // A word brace expansion left empty, with no quotes in it, is no word (`{a,}{,b}`).
    let empty = |segments: &[super::brace::Segment]| {
        segments.iter().all(|s| {
            matches!(s, super::brace::Segment::Source(a, b)
                if a == b || (b - a == 2 && injected.contains(a)))
        })
    };
    Expanded::Many(
        results
            .into_iter()
            .filter(|segments| !empty(segments))
            .map(|segments| {
                pieces_of(&b.pieces, &segments)
                    .map_or_else(|| Word::dynamic(raw), |p| Word::from_pieces(p, raw))
            })
            .collect(),
    )
}

/// The pieces that fall in `segments` (byte ranges of the source, or generated text); `None`
/// when a segment cuts an expansion in two.
fn pieces_of(pieces: &[Piece], segments: &[super::brace::Segment]) -> Option<Vec<Piece>> {
    use super::brace::Segment;
    let key = |p: &Piece| match p {
        Piece::Char { at, .. } => *at,
        Piece::Dyn(d) => d.start,
    };
    // Pieces come in source order: a segment's pieces are then found by a binary search, so
    // a word of many braces costs its length, not its length times its braces.
    let sorted = pieces.windows(2).all(|w| key(&w[0]) <= key(&w[1]));
    // For each index, the furthest end of an expansion before it.
    let mut reach_before = Vec::with_capacity(pieces.len() + 1);
    let mut furthest = 0;
    for p in pieces {
        reach_before.push(furthest);
        if let Piece::Dyn(d) = p {
            furthest = furthest.max(d.end);
        }
    }
    reach_before.push(furthest);
    let mut out = Vec::new();
    for segment in segments {
        match segment {
            Segment::Source(a, b) if sorted => {
                let from = pieces.partition_point(|p| key(p) < *a);
                // An expansion that starts before the segment and ends inside it is cut.
                if reach_before[from] > *a {
                    return None;
                }
                for p in pieces[from..].iter().take_while(|p| key(p) < *b) {
                    match p {
                        Piece::Dyn(d) if d.end > *b => return None,
                        _ => out.push(p.clone()),
                    }
                }
            }
            Segment::Source(a, b) => {
                for p in pieces {
                    match p {
                        Piece::Char { at, .. } if (*a..*b).contains(at) => out.push(p.clone()),
                        Piece::Char { .. } => {}
                        Piece::Dyn(d) => {
                            let inside = d.start >= *a && d.end <= *b;
                            let overlaps = d.start < *b && d.end > *a;
                            if inside {
                                out.push(p.clone());
                            } else if overlaps {
                                return None;
                            }
                        }
                    }
                }
            }
            Segment::Generated(text) => {
                // Bash re-reads a generated `\` or quote; only plain terms are taken as known.
                if !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    return None;
                }
                out.extend(text.chars().map(|c| Piece::Char {
                    c,
                    q: Quoting::Quoted,
                    at: usize::MAX,
                }));
            }
        }
    }
    Some(out)
}

fn add(node: Node, src: &str, b: &mut Builder) {
    let text = &src[node.byte_range()];
    let at = node.start_byte();
    match kind(&node) {
        "word" | "brace_expression" => unquoted(text, at, b),
        "number" if node.named_child_count() == 0 => unquoted(text, at, b),
        "raw_string" => b.push_str(strip(text, 1, 1), Quoting::Quoted, at),
        "string" => double_quoted(node, src, b),
        "ansi_c_string" => b.push_str(&decode_ansi_c(strip(text, 2, 1)), Quoting::Quoted, at),
        "extglob_pattern" => unquoted(text, at, b),
        // Bash passes a process substitution as a pipe's name; its commands are analysed
        // where they stand.
        "process_substitution" => b.push_str(PROCESS_SUBSTITUTION, Quoting::Quoted, at),
        "concatenation" | "command_name" => {
            let mut pos = node.start_byte();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                if child.start_byte() > pos {
                    unquoted(&src[pos..child.start_byte()], pos, b);
                }
                add(child, src, b);
                pos = child.end_byte();
            }
            if node.end_byte() > pos {
                unquoted(&src[pos..node.end_byte()], pos, b);
            }
        }
        _ => b.mark_dynamic(node, src, false),
    }
}

/// A word of a plain script (see `plain`): bare text and whole single-quoted strings, the
/// bytes `start..end` of `src`. Built as `add` builds the `word`, `raw_string` or
/// `concatenation` of them that tree-sitter-bash reads there.
pub(crate) fn plain(src: &str, start: usize, end: usize) -> Word {
    let raw = &src[start..end];
    if raw
        .bytes()
        .all(|c| c.is_ascii() && !matches!(c, b'\'' | b'\\'))
    {
        return Word::bare_ascii(raw, start);
    }
    let mut b = Builder {
        pieces: Vec::with_capacity(end - start),
    };
    let mut pos = start;
    while pos < end {
        let rest = &src[pos..end];
        if let Some(quoted) = rest.strip_prefix('\'') {
            let close = quoted.find('\'').unwrap_or(quoted.len());
            b.push_str(&quoted[..close], Quoting::Quoted, pos);
            pos += close + 2;
        } else {
            let bare = rest.find('\'').unwrap_or(rest.len());
            unquoted(&rest[..bare], pos, &mut b);
            pos += bare;
        }
    }
    Word::from_pieces(b.pieces, &src[start..end])
}

/// A word that is one variable reference and nothing else, `$name` or `"$name"`: the bytes
/// `start..end` of `src`. Built as `add` builds the `simple_expansion` or the `string`
/// holding only one that tree-sitter-bash reads there.
pub(crate) fn variable_reference(src: &str, start: usize, end: usize) -> Word {
    let raw = &src[start..end];
    let quoted = raw.starts_with('"');
    let (at, to) = if quoted {
        (start + 1, end - 1)
    } else {
        (start, end)
    };
    let reference = &src[at..to];
    let name = reference.strip_prefix('$').unwrap_or(reference);
    let expansion = Expansion {
        raw: reference.to_owned(),
        quoted,
        var: Some(VarRef::Scalar(name.to_owned())),
        start: at,
        end: to,
    };
    Word::from_pieces(vec![Piece::Dyn(Box::new(expansion))], raw)
}

fn strip(text: &str, front: usize, back: usize) -> &str {
    if text.len() >= front + back {
        text.get(front..text.len() - back).unwrap_or("")
    } else {
        ""
    }
}

/// Unquoted text starting at byte `at`: a backslash quotes the next character,
/// backslash-newline vanishes.
fn unquoted(text: &str, at: usize, b: &mut Builder) {
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some((_, '\n')) => {}
                Some((j, next)) => b.push(next, Quoting::Escaped, at + j),
                None => b.push('\\', Quoting::Quoted, at + i),
            }
        } else {
            b.push(c, Quoting::Bare, at + i);
        }
    }
}

/// Inside double quotes only `$ \` " \\` and newline are escapable; expansions make it dynamic.
fn double_quoted(node: Node, src: &str, b: &mut Builder) {
    let start = node.start_byte() + 1;
    let end = node.end_byte().saturating_sub(1).max(start);
    let mut pos = start;
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if child.start_byte() > pos {
            quoted_text(&src[pos..child.start_byte().min(end)], pos, b);
        }
        if kind(&child) == "string_content" {
            quoted_text(&src[child.byte_range()], child.start_byte(), b);
        } else {
            b.mark_dynamic(child, src, true);
        }
        pos = child.end_byte().max(pos);
    }
    if end > pos {
        quoted_text(&src[pos..end], pos, b);
    }
}

fn quoted_text(text: &str, at: usize, b: &mut Builder) {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            match chars.peek().copied() {
                Some((_, '\n')) => {
                    chars.next();
                }
                Some((j, n)) if matches!(n, '$' | '`' | '"' | '\\') => {
                    chars.next();
                    b.push(n, Quoting::Escaped, at + j);
                }
                Some((j, n)) => {
                    // Kept, but brace expansion still sees the character as escaped.
                    chars.next();
                    b.push('\\', Quoting::Quoted, at + i);
                    b.push(n, Quoting::Escaped, at + j);
                }
                None => b.push('\\', Quoting::Quoted, at + i),
            }
        } else {
            b.push(c, Quoting::Quoted, at + i);
        }
    }
}

/// Decodes the body of `$'…'` the way Bash does; a NUL ends the string, as in Bash.
pub(crate) fn decode_ansi_c(body: &str) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c != b'\\' || i >= bytes.len() {
            out.push(c);
            continue;
        }
        let e = bytes[i];
        i += 1;
        match e {
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'e' | b'E' => out.push(27),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'\\' | b'\'' | b'"' | b'?' => out.push(e),
            b'0'..=b'7' => {
                let (v, used) = digits(&bytes[i - 1..], 8, 3);
                i += used - 1;
                out.push((v & 0xff) as u8);
            }
            b'x' => match digits(&bytes[i..], 16, 2) {
                (_, 0) => out.extend_from_slice(b"\\x"),
                (v, used) => {
                    i += used;
                    out.push((v & 0xff) as u8);
                }
            },
            b'u' | b'U' => {
                let max = if e == b'u' { 4 } else { 8 };
                match digits(&bytes[i..], 16, max) {
                    (_, 0) => out.extend_from_slice(&[b'\\', e]),
                    (v, used) => {
                        i += used;
                        let ch = char::from_u32(v).unwrap_or('\u{fffd}');
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            b'c' if i < bytes.len() => {
                out.push(bytes[i] & 0x1f);
                i += 1;
            }
            _ => out.extend_from_slice(&[b'\\', e]),
        }
    }
    if let Some(nul) = out.iter().position(|&b| b == 0) {
        out.truncate(nul);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads up to `max` digits of `radix`; returns the value and how many bytes were used.
fn digits(bytes: &[u8], radix: u32, max: usize) -> (u32, usize) {
    let mut value: u32 = 0;
    let mut used = 0;
    for &b in bytes.iter().take(max) {
        match (b as char).to_digit(radix) {
            Some(d) => {
                value = value.wrapping_mul(radix).wrapping_add(d);
                used += 1;
            }
            None => break,
        }
    }
    (value, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The shortcut for bare ASCII words gives the word the general reading gives: every
    /// word of up to three characters over the bytes that decide a word's flags (globs,
    /// extglobs, tildes, assignments, a leading dash), each at an offset in its script.
    #[test]
    fn a_bare_ascii_word_reads_as_the_general_reading_does() {
        let alphabet = b"a1=~:*?[(@-/!+.";
        let mut words = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = words
                .iter()
                .flat_map(|w| {
                    alphabet
                        .iter()
                        .map(move |&c| format!("{w}{}", char::from(c)))
                })
                .collect();
            words.extend(longer);
        }
        words.extend(
            [
                "a=~/x",
                "P=/a:~/b",
                "HEAD~3",
                "-*",
                "--x=y",
                "src/**/*.rs",
                "@(a)",
            ]
            .map(String::from),
        );
        for raw in &words {
            let script = format!("echo {raw}");
            let mut general = Builder { pieces: Vec::new() };
            unquoted(raw, 5, &mut general);
            assert_eq!(
                Word::bare_ascii(raw, 5),
                Word::from_pieces(general.pieces, raw),
                "{raw:?}"
            );
            assert_eq!(
                plain(&script, 5, script.len()),
                Word::bare_ascii(raw, 5),
                "{raw:?}"
            );
        }
    }

    /// Bash tilde-expands an assignment-shaped argument after its `=` and each `:`; such a
    /// word depends on HOME, so its value is not known. Elsewhere a `~` stays a character.
    #[test]
    fn a_tilde_in_an_assignment_shaped_word_is_not_known() {
        let table = [
            ("if=~/.ssh/key", None),
            ("if=~root/.ssh/key", None),
            ("P=/a:~/b", None),
            ("A_1=~", None),
            ("if='~'/k", Some("if=~/k")),
            ("if=\\~/k", Some("if=~/k")),
            ("--in=~/k", Some("--in=~/k")),
            ("1a=~/k", Some("1a=~/k")),
            ("HEAD~3", Some("HEAD~3")),
            ("a=b~c", Some("a=b~c")),
        ];
        for (text, want) in table {
            let word = plain(text, 0, text.len());
            assert_eq!(word.value.as_deref(), want, "{text}");
        }
    }

    #[test]
    fn ansi_c_escapes_decode_like_bash() {
        assert_eq!(decode_ansi_c(r"\x72m"), "rm");
        assert_eq!(decode_ansi_c(r"\162\155"), "rm");
        assert_eq!(decode_ansi_c(r"\u0072m"), "rm");
        assert_eq!(decode_ansi_c(r"a\tb\'"), "a\tb'");
        assert_eq!(decode_ansi_c(r"rm\0 -rf"), "rm");
        assert_eq!(decode_ansi_c(r"\q\x"), r"\q\x");
    }
}

#[cfg(test)]
mod expansion_tests {
    use super::*;

    /// The words `: WORD` passes, as the analyser expands them.
    fn expand(word: &str) -> Vec<Option<String>> {
        expand_in(&format!(": {word}"), &[])
    }

    /// The same for the parser's second reading, which puts `''` before the word.
    fn expand_reread(word: &str) -> Vec<Option<String>> {
        expand_in(&format!(": ''{word}"), &[2])
    }

    fn expand_in(script: &str, injected: &[usize]) -> Vec<Option<String>> {
        let script = script.to_string();
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .unwrap();
        let tree = parser.parse(&script, None).unwrap();
        let mut stack = vec![tree.root_node()];
        let mut out = Vec::new();
        while let Some(node) = stack.pop() {
            if kind(&node) == "command" {
                let mut cursor = node.walk();
                for (i, child) in node.children(&mut cursor).enumerate() {
                    if node.field_name_for_child(i as u32) == Some("argument") {
                        out.extend(
                            resolve_all(child, &script, injected)
                                .into_iter()
                                .map(|w| w.value),
                        );
                    }
                }
                return out;
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        out
    }

    /// What Bash itself passes for `WORD` (globbing off, so only brace expansion and quote
    /// removal act).
    fn bash(word: &str) -> Vec<String> {
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("set -f; for w in {word}; do printf '%s\\0' \"$w\"; done"),
            ])
            .output()
            .expect("bash is needed to compare brace expansion with");
        assert!(out.status.success(), "bash refused {word}");
        let text = String::from_utf8(out.stdout).unwrap();
        text.split_terminator('\0').map(str::to_owned).collect()
    }

    #[test]
    fn brace_expansion_matches_bash() {
        let words = [
            "{rm,-f,x}",
            "{cu,}rl",
            "-{-open-files-in-pager='touch M #',-no-color}",
            "-{r,i}",
            "{src,tests}",
            "a{b,c{d,e}}f",
            "{a..e}",
            "{e..a}",
            "{1..10..2}",
            "{10..1..3}",
            "{01..10}",
            "{-3..3}",
            "{-05..5..5}",
            "{1..3}{a,b}",
            "{a}",
            "{}",
            "x{}y",
            "'{a,b}'",
            "\\{a,b}",
            "{a\\,b}",
            "{'a,b'}",
            "{\"a,b\",c}",
            "{a,'b c'}",
            "{a,b",
            "a,b}",
            "{a,b}}",
            "{{a,b}",
            "{a..}",
            "{1..a}",
            "{a,}{,b}",
            "x{a}{b,c}",
            "{,}",
            "{a,b}c{d,e}",
            "--{output,x}=y",
            "{1..3..0}",
            "{Z..b}",
            "{a..c..2}",
            "{+1..3}",
            "\"{a,b}\"",
            "{a\\}b,c}",
        ];
        let mut mismatches = Vec::new();
        for word in words {
            let want = bash(word);
            let got = expand(word);
            let known: Option<Vec<String>> = got.iter().cloned().collect();
            // An expansion the analyser does not model must be unknown, never wrong.
            if known.as_ref().is_some_and(|k| *k != want) {
                mismatches.push(format!("{word}: bash {want:?}, analyser {got:?}"));
            }
            if known.is_none() && !word.contains("Z..b") {
                mismatches.push(format!("{word}: unknown, bash {want:?}"));
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }

    /// The empty quote of the second reading keeps no word Bash drops: `{sed,}` is `sed` alone.
    #[test]
    fn the_second_reading_expands_as_bash_does() {
        for word in [
            "{sed,}",
            "{,rm}",
            "{s{,}ed,}",
            "{a,}{,b}",
            "{rm,-f,x}",
            "{,}",
            "{a}",
        ] {
            let want: Vec<Option<String>> = bash(word).into_iter().map(Some).collect();
            assert_eq!(expand_reread(word), want, "{word}");
        }
    }

    #[test]
    fn expansions_pass_through_brace_expansion_whole() {
        let got = expand("{$(echo a,b),\"${x}\"}{c,d}");
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got.iter().all(Option::is_none));
        assert_eq!(
            expand("${x}{a,b}").len(),
            2,
            "`${{` is not a brace, the list after it is"
        );
    }

    #[test]
    fn too_many_words_make_one_unknown_word() {
        let got = expand("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}");
        assert_eq!(got, vec![None]);
    }
}
