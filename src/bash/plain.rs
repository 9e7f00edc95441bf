//! The plain reading of a script: one line of simple commands joined by `|`, `&&`, `||` and
//! `;`, whose words are bare text and single-quoted strings in which Bash expands nothing
//! (`git log --oneline HEAD~3`, `cat src/a.rs | grep -n 'fn main'`), each command perhaps
//! ending in simple redirections (`> out/x.txt`, `2>&1`, `< in`). Most commands a model runs
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
    let b = script.as_bytes();
    let mut items = Vec::new();
    // Where the current pipeline's commands start in `items`.
    let mut pipeline = 0;
    let mut i = 0;
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
                redirects.push(redirect(script, i, operator_end)?);
                i = redirects.last().map_or(i, |r: &Redirect| r.end);
            } else {
                if !redirects.is_empty() {
                    return None;
                }
                let word_end = word_end(b, i, words.is_empty())?;
                words.push(word::plain(script, i, word_end));
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
            repeated: false,
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

/// The redirection whose operator is `script[start..operator_end]`, with its target; `None`
/// when it is not plain (`>|`, `<>`, `<<`, `<(`, `>&-`, a target that is not a plain word).
fn redirect(script: &str, start: usize, operator_end: usize) -> Option<Redirect> {
    let b = script.as_bytes();
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
        ];
        for script in table {
            assert!(items(script).is_none(), "{script:?} was read as plain");
        }
    }

    /// Generated lines over plain words, operators and the characters next to them: where
    /// the scan takes a line, its items are the parse's. `TOLLGATE_PLAIN_CASES` sets how many
    /// (4,000 of a fixed sequence by default).
    #[test]
    fn generated_lines_read_as_the_parse_reads_them() {
        use proptest::prelude::*;
        let operators = proptest::sample::select(vec![" | ", " && ", " || ", "; ", "|", "&&", ";"]);
        let redirections = proptest::sample::select(vec![
            " > ", " >> ", " < ", " 2> ", " 2>&1", " >&2 ", ">", "<", " 1>", " 3<", " >&", "2>&1 ",
        ]);
        let odd = proptest::sample::select(vec![
            "if", "done", "in", "time", "export", "!", "{", "}", "#", "\\", "$x", "\t", "&", "[[",
        ]);
        let token = prop_oneof![
            8 => "[a-z0-9_./-]{1,6}",
            3 => "[a-z0-9_./,:+@%=*?~-]{1,6}",
            2 => "'[ a-z*?{}()\"!#;|&<>]{0,5}'",
            2 => operators.prop_map(str::to_owned),
            1 => redirections.prop_map(str::to_owned),
            1 => odd.prop_map(str::to_owned),
            8 => Just(" ".to_owned()),
        ];
        let line = proptest::collection::vec(token, 1..14).prop_map(|t| t.concat());
        // A fixed sequence by default, so CI reads the same lines every run; a count given
        // explores fresh ones.
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
        let redirected = std::cell::Cell::new(0usize);
        runner
            .run(&line, |script| {
                let (plain, parsed) = readings(&script);
                if let Some(plain) = plain {
                    taken.set(taken.get() + 1);
                    if script.contains(['<', '>']) {
                        redirected.set(redirected.get() + 1);
                    }
                    prop_assert_eq!(plain, parsed, "{:?}", script);
                }
                Ok(())
            })
            .unwrap_or_else(|err| panic!("{err}"));
        let taken = taken.get();
        assert!(taken > 1000, "only {taken} generated lines were plain");
        let redirected = redirected.get();
        assert!(
            redirected > 100,
            "only {redirected} plain generated lines had a redirection"
        );
    }

    /// Every line of tree-sitter-bash's own corpus and example scripts that the scan takes.
    #[test]
    fn corpus_lines_read_as_the_parse_reads_them() {
        // Beside the repository, or one level further up from a worktree under `wt/`.
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = [
            manifest.join("../shared/corpora"),
            manifest.join("../../shared/corpora"),
        ]
        .into_iter()
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("no ../shared/corpora beside {}", manifest.display()));
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
