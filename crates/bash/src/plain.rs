//! The plain reading of a script: one line of simple commands joined by `|`, `&&`, `||` and
//! `;`, whose words are bare text and single-quoted strings in which Bash expands nothing
//! (`git log --oneline HEAD~3`, `cat src/a.rs | grep -n 'fn main'`), each command perhaps
//! ending in simple redirections (`> out/x.txt`, `2>&1`, `< in`); and a loop over plain words
//! whose body is such a line (`for f in a b; do wc -c "$f"; done`). Most commands a model runs
//! are such lines, and a scan reads them in a fraction of a tree-sitter parse and walk.
//! The scan gives the very items the walk gives: a test holds the two readings equal on
//! tree-sitter-bash's corpus and on generated lines. Anything else — a newline, another
//! quote, an expansion, another redirection, a brace, a keyword, an assignment — is not
//! plain, and the script is parsed.

use super::syntax::{self, Item, SimpleCommand};
use super::word;

/// Whether `word` is syntax to Bash or tree-sitter-bash where it stands in a plain line: a
/// reserved word, or a declaration builtin that tree-sitter-bash reads as its own node. (A
/// reserved word that is punctuation, `{` or `!`, is syntax too, and only sends a line whose
/// quoted word spells it to the parser.)
fn syntax_word(word: &str) -> bool {
    super::command::reserved(word)
        || matches!(
            word,
            "time" | "coproc" | "declare" | "typeset" | "export" | "local" | "readonly" | "unset"
        )
}

/// A bare character of a plain word: none of them is quoting, an expansion, an operator, a
/// glob's bracket, a brace or a comment to Bash. `~` is taken apart (see `word_end`).
fn bare(c: u8) -> bool {
    BARE[usize::from(c)]
}

/// [`bare`] for every byte, built once: the scan asks it of every byte of every plain line.
const BARE: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        table[c] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'_' | b'.' | b'/' | b',' | b':' | b'+' | b'@' | b'%' | b'-' | b'=' | b'*' | b'?'
            );
        c += 1;
    }
    table
};

/// A character inside a plain single-quoted string: printable ASCII that is neither the
/// closing quote nor something a later evaluation of the text could run (`$`, `` ` ``, `\`).
fn quoted(c: u8) -> bool {
    c == b' ' || (c.is_ascii_graphic() && !matches!(c, b'\'' | b'$' | b'`' | b'\\'))
}

fn blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// How the command before an operator is joined to the next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Join {
    Pipe,
    List,
}

/// The items of `script` when it is plain, in the order the walk of its parse gives them;
/// `None` when it is not.
pub(super) fn items(script: &str) -> Option<Vec<Item>> {
    if script.starts_with("for ") {
        return for_loop(script);
    }
    line(script, 0, script.len(), None)
}

/// The body of a loop over `variable`, or a whole plain line: the items of the simple
/// commands in `script[from..to]`. In a loop's body, each command may run many times, and a
/// word may be a reference to the loop's variable alone (`"$f"`, `$f`).
fn line(script: &str, from: usize, to: usize, variable: Option<&str>) -> Option<Vec<Item>> {
    let b = &script.as_bytes()[..to];
    let mut items = Vec::new();
    // Where the current pipeline's commands start in `items`.
    let mut pipeline = 0;
    let mut i = from;
    loop {
        while i < b.len() && blank(b[i]) {
            i += 1;
        }
        let start = i;
        let mut words = Vec::new();
        let mut redirects = Vec::new();
        let mut end = i;
        while i < b.len() && !matches!(b[i], b'|' | b'&' | b';') {
            if let Some(operator_end) = redirect_operator(b, i) {
                // Only after the command's words: tree-sitter-bash hangs words that follow a
                // target on the redirection (`>out a b`), and one before the name is an item
                // of its own kind there. Those lines are left to the parser.
                if words.is_empty() {
                    return None;
                }
                redirects.push(redirect(script, to, i, operator_end)?);
                i = redirects.last().map_or(i, |r: &Redirect| r.end);
            } else {
                if !redirects.is_empty() {
                    return None;
                }
                let reference = variable
                    .filter(|_| !words.is_empty())
                    .and_then(|name| reference_end(b, i, name));
                let word_end = match reference {
                    Some(word_end) => {
                        words.push(word::variable_reference(script, i, word_end));
                        word_end
                    }
                    None => {
                        let word_end = word_end(b, i, words.is_empty())?;
                        words.push(word::plain(script, i, word_end));
                        word_end
                    }
                };
                end = word_end;
                i = word_end;
            }
            while i < b.len() && blank(b[i]) {
                i += 1;
            }
        }
        // `export''` is `export` to Bash too, so a word's value counts; and tree-sitter-bash
        // reads a keyword before a quote (`if';'`) as the keyword.
        let syntax = |w: &word::Word| {
            let bare_start = w.raw.split('\'').next().unwrap_or_default();
            syntax_word(bare_start) || w.value.as_deref().is_some_and(syntax_word)
        };
        if words.is_empty() || words.iter().any(syntax) {
            return None;
        }
        // The walk reads a redirected command's redirections before the command itself.
        items.extend(redirects.into_iter().map(|r| Item::Redirect(r.item)));
        items.push(Item::Command(SimpleCommand {
            text: script[start..end].to_owned(),
            assignments: Vec::new(),
            words,
            repeated: variable.is_some(),
            subshell: false,
        }));
        let join = match (b.get(i), b.get(i + 1)) {
            (None, _) => None,
            (Some(b'|'), Some(b'|')) | (Some(b'&'), Some(b'&')) => {
                i += 2;
                Some(Join::List)
            }
            (Some(b'|'), next) if next != Some(&b'&') => {
                i += 1;
                Some(Join::Pipe)
            }
            (Some(b';'), next) if next != Some(&b';') => {
                i += 1;
                Some(Join::List)
            }
            _ => return None,
        };
        if join != Some(Join::Pipe) {
            // The commands of a pipeline of several run in subshells of their own.
            let commands = items[pipeline..]
                .iter()
                .filter(|item| matches!(item, Item::Command(_)))
                .count();
            if commands > 1 {
                for item in &mut items[pipeline..] {
                    if let Item::Command(command) = item {
                        command.subshell = true;
                    }
                }
            }
            pipeline = items.len();
        }
        if join.is_none() {
            return Some(items);
        }
        // An operator must be followed by a command: `a &&` and `a;` are left to the parser.
        if b[i..].iter().all(|&c| blank(c)) {
            return None;
        }
    }
}

/// A redirection of a plain line and the byte after it.
struct Redirect {
    item: syntax::Redirect,
    end: usize,
}

/// Where the operator of a plain redirection starting at `start` ends, or `None` when no
/// redirection starts there. Plain redirections are `>`, `>>` and `<` to a plain word, and
/// `>&` to a descriptor's number; the output ones with an optional one-digit descriptor
/// before them (`2>`, `2>&1`). tree-sitter-bash reads the digit of `0< f` as a word of the
/// command, so that line, like any digit not directly followed by `>`, is not plain.
fn redirect_operator(b: &[u8], start: usize) -> Option<usize> {
    let at = start + usize::from(b[start].is_ascii_digit());
    match (b.get(at), b.get(at + 1)) {
        (Some(b'>'), Some(b'>' | b'&')) => Some(at + 2),
        (Some(b'>'), _) => Some(at + 1),
        (Some(b'<'), _) if at == start => Some(at + 1),
        _ => None,
    }
}

/// The redirection whose operator is `script[start..operator_end]`, with its target before
/// `to`; `None` when it is not plain (`>|`, `<>`, `<<`, `<(`, `>&-`, a target that is not a
/// plain word).
fn redirect(script: &str, to: usize, start: usize, operator_end: usize) -> Option<Redirect> {
    let b = &script.as_bytes()[..to];
    let op_start = start + usize::from(b[start].is_ascii_digit());
    let to_descriptor = b[operator_end - 1] == b'&';
    let mut i = operator_end;
    if !to_descriptor {
        while i < b.len() && blank(b[i]) {
            i += 1;
        }
    }
    let target_start = i;
    let target_end = if to_descriptor {
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        (digits > 0).then_some(i + digits)?
    } else {
        match b.get(i) {
            Some(&c) if bare(c) || c == b'\'' => word_end(b, i, false)?,
            _ => return None,
        }
    };
    // The target ends the redirection: `2>&1x` or `>a<b` are not plain.
    if b.get(target_end)
        .is_some_and(|&c| !blank(c) && !matches!(c, b'|' | b'&' | b';'))
    {
        return None;
    }
    let target = word::plain(script, target_start, target_end);
    if target.value.as_deref().is_some_and(syntax_word) {
        return None;
    }
    Some(Redirect {
        item: syntax::Redirect {
            op: script[op_start..operator_end].to_owned(),
            target: Some(target),
            text: script[start..target_end].to_owned(),
        },
        end: target_end,
    })
}

/// A plain loop, the whole script: `for NAME in WORDS; do BODY; done`, where NAME is a
/// lower-case name, WORDS are plain words, and BODY is a plain line whose words may also be
/// `"$NAME"` or `$NAME`. Its items are the walk's: the binding of NAME, its value when the
/// list is one word, then the body's commands, each of which may run many times.
fn for_loop(script: &str) -> Option<Vec<Item>> {
    let b = script.as_bytes();
    let skip_blanks = |mut i: usize| {
        while i < b.len() && blank(b[i]) {
            i += 1;
        }
        i
    };
    let name_start = skip_blanks("for ".len());
    let mut i = name_start;
    while i < b.len()
        && (b[i].is_ascii_lowercase() || b[i] == b'_' || (i > name_start && b[i].is_ascii_digit()))
    {
        i += 1;
    }
    let name = &script[name_start..i];
    if name.is_empty() || syntax_word(name) || !b.get(i).copied().is_some_and(blank) {
        return None;
    }
    i = skip_blanks(i);
    if !script[i..].starts_with("in") || !b.get(i + 2).copied().is_some_and(blank) {
        return None;
    }
    i = skip_blanks(i + 2);
    let mut words = Vec::new();
    while b.get(i) != Some(&b';') {
        let end = word_end(b, i, false)?;
        let word = word::plain(script, i, end);
        if end == i || word.value.as_deref().is_none_or(syntax_word) {
            return None;
        }
        words.push(word);
        i = skip_blanks(end);
    }
    if words.is_empty() {
        return None;
    }
    i = skip_blanks(i + 1);
    if !script[i..].starts_with("do") || !b.get(i + 2).copied().is_some_and(blank) {
        return None;
    }
    let body_start = i + 2;
    // `…; done`, perhaps with blanks after it: the body ends at that `;`.
    let loop_end = script.trim_end_matches([' ', '\t']).len();
    let done = loop_end.checked_sub("done".len())?;
    if &script[done..loop_end] != "done" {
        return None;
    }
    let mut body_end = done;
    while body_end > body_start && blank(b[body_end - 1]) {
        body_end -= 1;
    }
    if body_end <= body_start || b[body_end - 1] != b';' {
        return None;
    }
    let body = line(script, body_start, body_end - 1, Some(name))?;
    let value = syntax::loop_value(&words);
    let mut items = Vec::with_capacity(body.len() + 2);
    items.push(Item::Bind {
        via: "for".to_owned(),
        name: word::Word::literal(name),
    });
    items.push(syntax::loop_var(
        name.to_owned(),
        &script[..loop_end],
        value,
    ));
    items.extend(body);
    Some(items)
}

/// Where a word that is only a reference to variable `name` (`"$name"`, `$name`) starting at
/// `start` ends, or `None` when no such word starts there.
fn reference_end(b: &[u8], start: usize, name: &str) -> Option<usize> {
    let quoted = b.get(start) == Some(&b'"');
    let mut i = start + usize::from(quoted);
    if b.get(i) != Some(&b'$') || !b[i + 1..].starts_with(name.as_bytes()) {
        return None;
    }
    i += 1 + name.len();
    if quoted {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
    }
    match b.get(i) {
        None => Some(i),
        Some(&c) if blank(c) || matches!(c, b'|' | b'&' | b';') => Some(i),
        _ => None,
    }
}

/// Where the plain word starting at `start` ends, or `None` when it is not plain. A `~` is
/// taken only after a letter or digit of the word (`HEAD~3`, `git~1`), where Bash never
/// expands it. A command's first word holds no `=` (an assignment before the command), no
/// glob, and no `%`, `@`, `~`, `+`, `,` or `:` (tree-sitter-bash does not parse `a%`, `a@`,
/// `1?a` or `a+:` there).
fn word_end(b: &[u8], start: usize, first: bool) -> Option<usize> {
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'=' | b'%' | b'@' | b'*' | b'?' | b'~' | b'+' | b',' | b':' if first => return None,
            // tree-sitter-bash reads a word that starts with `=` as a test's operator.
            b'=' if i == start => return None,
            // and a command named `-…` as a broken expansion before some words (`- a@`).
            b'-' if first && i == start => return None,
            c if bare(c) => i += 1,
            b'~' if i > start && b[i - 1].is_ascii_alphanumeric() => i += 1,
            b'\'' => {
                let close = b[i + 1..].iter().position(|&c| !quoted(c))?;
                if b[i + 1 + close] != b'\'' {
                    return None;
                }
                i += close + 2;
            }
            c if blank(c) || matches!(c, b'|' | b'&' | b';') => break,
            _ => return None,
        }
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both readings of `script`: the plain scan's, and the parse's.
    fn readings(script: &str) -> (Option<String>, String) {
        let plain = items(script).map(|items| format!("{items:#?}"));
        let parsed = format!("{:#?}", super::super::syntax::items(script));
        (plain, parsed)
    }

    #[test]
    fn plain_lines_read_as_the_parse_reads_them() {
        let table = [
            "git log --oneline HEAD~3",
            "git diff HEAD~2 HEAD -- src/lib.rs",
            "cat src/module.rs | grep -n fn",
            "ls -la src/dir && wc -l src/dir/*.rs",
            "head -n 5 README.md; tail -n 3 Cargo.toml",
            "git show HEAD~1:src/lib.rs | head -5",
            "grep -r 'needle 3' src tests",
            "sed -n '5,+3p' src/main.rs",
            "python3 -c 'print(1)'",
            "find src -name '*x*.rs' -type f",
            "npm run build -- --id=5",
            "a | b | c && d || e; f | g",
            "  padded\t words  ",
            "x''y 'a'b'c' ''",
            "echo a=b -",
            "cargo test -- --nocapture ? *",
            "echo 5 > out/5.txt",
            "cargo build 2>&1 | tail -5",
            "a > f | b",
            "a | b > f",
            "a | b > f && c",
            "a >> f && b < g",
            "cmd > /dev/null 2>&1",
            "sort < in.txt > out.txt",
            "echo x 2> err.log; ls",
            "git diff > 'my file.patch'",
            "make >&2",
            "make 1>&2 < input",
            "head -n 5>f",
            "for f in src/a1.rs src/b1.rs; do wc -c \"$f\"; done",
            "for f in a; do cat $f | grep -n x; done",
            "for f in *.rs; do wc -l \"$f\" && echo ok; done",
            "for f in a b;do echo \"$f\";done",
            "for d in src tests ; do ls -la \"$d\" 2>&1 | head -5; done  ",
            "for f in 'a b' c; do echo \"$f\" > out.txt; cd $f; done",
            "for i_1 in 1 2 3; do echo $i_1; echo; done",
        ];
        for script in table {
            let (plain, parsed) = readings(script);
            let Some(plain) = plain else {
                panic!("{script:?} is not read as plain");
            };
            assert_eq!(plain, parsed, "{script:?}");
        }
    }

    #[test]
    fn what_is_not_plain_is_left_to_the_parser() {
        let table = [
            "",
            "   ",
            "echo $HOME",
            "echo \"a\"",
            "> f echo",
            "echo > f x",
            "echo >| f",
            "echo <> f",
            "cat << EOF",
            "cat <<< x",
            "diff <(a) b",
            "echo >&-",
            "echo >& f",
            "echo 2>&1x",
            "echo a>f",
            "echo >",
            "echo > ;",
            "echo &> f",
            "echo 12> f",
            "make 0< input",
            "echo > $f",
            "echo > ~/f",
            "a=1 cmd",
            "x=1",
            "a%",
            "0 ==",
            "echo =x",
            "- a@",
            "a+:",
            "1@ x",
            "ls | a%",
            "echo {a,b}",
            "echo [ab]",
            "ls ~",
            "ls ~/x",
            "echo a=~/x",
            "a &",
            "a && ",
            "a;",
            "a ;; b",
            "a |& b",
            "a\nb",
            "echo 'a$(b)'",
            "echo 'a\\b'",
            "echo 'open",
            "if true",
            "for x",
            "export A",
            "time ls",
            "ls # comment",
            "echo a\\ b",
            "(a)",
            "echo é",
            "for x in 1 2; do echo $x > out/$x.txt; done",
            "for f in; do echo; done",
            "for F in a; do echo; done",
            "for f in a; do echo $g; done",
            "for f in a; do echo \"$f\".txt; done",
            "for f in a; do $f; done",
            "for f in a; do echo; done; ls",
            "for f in a; do echo; done > out",
            "for f in do; do echo; done",
            "for f in a\ndo echo; done",
            "for f in a; do echo ${f}; done",
            "for f in a; do; done",
            "for f in a; do echo; done &",
            "for ((i=0;i<3;i++)); do echo; done",
            "for f; do echo; done",
            "for f in a; do echo $f > $f; done",
            "for f in a; do echo $PS4; done",
        ];
        for script in table {
            assert!(items(script).is_none(), "{script:?} was read as plain");
        }
    }

    /// The pieces of generated lines: plain words, operators, redirections and the
    /// characters next to them; with `references`, also words that refer to a loop's
    /// variable (or to one like it).
    fn token(references: bool) -> proptest::strategy::BoxedStrategy<String> {
        use proptest::prelude::*;
        let operators = proptest::sample::select(vec![" | ", " && ", " || ", "; ", "|", "&&", ";"]);
        let redirections = proptest::sample::select(vec![
            " > ", " >> ", " < ", " 2> ", " 2>&1", " >&2 ", ">", "<", " 1>", " 3<", " >&", "2>&1 ",
        ]);
        let odd = proptest::sample::select(vec![
            "if", "done", "in", "time", "export", "!", "{", "}", "#", "\\", "$x", "\t", "&", "[[",
        ]);
        // `@V` stands for the loop's variable (see the loop test).
        let reference = proptest::sample::select(vec![
            " \"$@V\"",
            " $@V",
            " \"$@V\" ",
            " $@V ",
            "\"$@V\"",
            " $@Vx",
            " \"$@V\".c",
            " ${@V}",
            " $g",
        ]);
        prop_oneof![
            8 => "[a-z0-9_./-]{1,6}",
            3 => "[a-z0-9_./,:+@%=*?~-]{1,6}",
            2 => "'[ a-z*?{}()\"!#;|&<>]{0,5}'",
            2 => operators.prop_map(str::to_owned),
            1 => redirections.prop_map(str::to_owned),
            1 => odd.prop_map(str::to_owned),
            8 => Just(" ".to_owned()),
            if references { 4 } else { 0 } => reference.prop_map(str::to_owned),
        ]
        .boxed()
    }

    /// Reads scripts of `strategy` both ways and holds the scan's items equal to the parse's
    /// wherever the scan takes a script: 4,000 of a fixed sequence by default, so CI reads
    /// the same ones every run; `TOLLGATE_PLAIN_CASES` sets how many fresh ones. Returns how
    /// many the scan took, and how many of those `marked` says are of the kind a test wants.
    fn scan_agrees_on(
        strategy: impl proptest::strategy::Strategy<Value = String>,
        marked: impl Fn(&str) -> bool,
    ) -> (usize, usize) {
        let cases: Option<u32> = std::env::var("TOLLGATE_PLAIN_CASES")
            .ok()
            .and_then(|n| n.parse().ok());
        let config = proptest::test_runner::Config {
            cases: cases.unwrap_or(4000),
            ..Default::default()
        };
        let mut runner = match cases {
            Some(_) => proptest::test_runner::TestRunner::new(config),
            None => proptest::test_runner::TestRunner::new_with_rng(
                config,
                proptest::test_runner::TestRng::deterministic_rng(
                    proptest::test_runner::RngAlgorithm::ChaCha,
                ),
            ),
        };
        let taken = std::cell::Cell::new(0usize);
        let marked_taken = std::cell::Cell::new(0usize);
        runner
            .run(&strategy, |script| {
                let (plain, parsed) = readings(&script);
                if let Some(plain) = plain {
                    taken.set(taken.get() + 1);
                    if marked(&script) {
                        marked_taken.set(marked_taken.get() + 1);
                    }
                    proptest::prop_assert_eq!(plain, parsed, "{:?}", script);
                }
                Ok(())
            })
            .unwrap_or_else(|err| panic!("{err}"));
        (taken.get(), marked_taken.get())
    }

    /// Generated lines over plain words, operators and the characters next to them: where
    /// the scan takes a line, its items are the parse's.
    #[test]
    fn generated_lines_read_as_the_parse_reads_them() {
        use proptest::prelude::*;
        let line = proptest::collection::vec(token(false), 1..14).prop_map(|t| t.concat());
        let (taken, redirected) = scan_agrees_on(line, |script| script.contains(['<', '>']));
        assert!(taken > 1000, "only {taken} generated lines were plain");
        assert!(
            redirected > 100,
            "only {redirected} plain generated lines had a redirection"
        );
    }

    /// Generated `for` loops, their names, lists, separators and bodies varied (bodies with
    /// references to the loop's variable and to others): where the scan takes a loop, its
    /// items are the parse's.
    #[test]
    fn generated_loops_read_as_the_parse_reads_them() {
        use proptest::prelude::*;
        let name = prop_oneof![
            6 => proptest::sample::select(vec!["f", "x", "d1"]),
            1 => proptest::sample::select(vec!["_", "F", "PS4", "in", "do", "fx"]),
        ];
        let words = prop_oneof![
            6 => proptest::collection::vec("[a-z0-9_./*?-]{1,6}|'[ a-z;]{0,4}'", 1..4)
                .prop_map(|w| w.join(" ")),
            1 => proptest::collection::vec(token(false), 0..5).prop_map(|t| t.concat()),
        ];
        let part = prop_oneof![
            4 => "[a-z0-9_./-]{1,6}",
            3 => proptest::sample::select(vec!["\"$@V\"", "$@V"]).prop_map(str::to_owned),
            1 => proptest::sample::select(vec!["$@Vx", "\"$@V\".c", "$g", "${@V}", "\"$@V"])
                .prop_map(str::to_owned),
            1 => proptest::sample::select(vec!["|", "&&", ";", "||", "> out", "2>&1", "<"])
                .prop_map(str::to_owned),
        ];
        let body = prop_oneof![
            3 => proptest::collection::vec(part, 1..8).prop_map(|p| p.join(" ")),
            1 => proptest::collection::vec(token(true), 1..8).prop_map(|t| t.concat()),
        ];
        let separator = proptest::sample::select(vec!["; ", ";", " ; ", "\n", ";  "]);
        let script = (name, words, separator.clone(), body, separator).prop_map(
            |(name, words, before_do, body, before_done)| {
                let body = body.replace("@V", name);
                format!("for {name} in {words}{before_do}do {body}{before_done}done")
            },
        );
        let (taken, referring) = scan_agrees_on(script, |script| script.contains('$'));
        assert!(taken > 300, "only {taken} generated loops were plain");
        assert!(
            referring > 100,
            "only {referring} plain generated loops referred to their variable"
        );
    }

    /// Every line of tree-sitter-bash's own corpus and example scripts that the scan takes.
    #[test]
    fn corpus_lines_read_as_the_parse_reads_them() {
        // In the workspace (tests/corpus/tree-sitter-bash/README.md says where it is from).
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/corpus/tree-sitter-bash");
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        assert!(!files.is_empty(), "no corpus under {}", root.display());
        let mut taken = 0usize;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines() {
                let (plain, parsed) = readings(line);
                if let Some(plain) = plain {
                    taken += 1;
                    assert_eq!(plain, parsed, "{line:?} of {}", file.display());
                }
            }
        }
        assert!(taken > 100, "only {taken} corpus lines were plain");
    }
}
