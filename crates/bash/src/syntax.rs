//! Parses a script with tree-sitter-bash and flattens it into items in execution-ish order.
//! Node kinds outside the allowlist, ERROR and MISSING become problems; commands are still extracted.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

use super::evaluated::{
    heredoc_delimiter, inert_transformation, inert_variable_name, runs_code, substitutions_loose,
};
use super::kind::kind;
use super::unproven::Unproven;
use super::word::{Expanded, Value, Word, resolve, resolve_all, resolve_expanded};

use super::bounds::{MAX_ANALYSED_BYTES, MAX_TREE_DEPTH};

/// One simple command as written: `NAME=v cmd arg…`.
#[derive(Debug, Clone)]
pub(crate) struct SimpleCommand {
    pub text: String,
    pub assignments: Vec<Assignment>,
    pub words: Vec<Word>,
    /// Inside a loop or function body: it may run many times, in any working directory.
    pub repeated: bool,
    /// Runs in a subshell (`( … )`, a substitution, a part of a pipeline): a `cd` there does
    /// not move the commands after the subshell.
    pub subshell: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Assignment {
    pub name: String,
    pub text: String,
    /// The value, when it is literal and the assignment runs unconditionally in the script's
    /// own shell, in order (a top-level `x=rm`, `x=(a b)`): later `$x` expand to it.
    pub value: Option<Value>,
}

/// A redirection operator with its target.
#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub op: String,
    /// `None` for a process substitution target (its commands are items of their own) and for
    /// a closed descriptor (`2>&-`).
    pub target: Option<Word>,
    pub text: String,
}

#[derive(Debug, Clone)]
pub(crate) enum Item {
    Command(SimpleCommand),
    Redirect(Redirect),
    /// `x=1` standing alone.
    Assign(Assignment),
    /// The variable of a `for` loop, with its list's value when that is one known word.
    LoopVar(Assignment),
    /// `export`/`declare`/`typeset`/`local`/`readonly`.
    Declare {
        keyword: String,
        flags: Vec<Word>,
        names: Vec<String>,
        text: String,
    },
    Unset {
        flags: Vec<Word>,
        names: Vec<String>,
        text: String,
    },
    /// `for NAME in …`, `select NAME in …`: NAME is bound like `NAME=value`.
    Bind {
        via: String,
        name: Word,
    },
    /// `[ … ]`, `[[ … ]]`.
    Test {
        text: String,
    },
    Function {
        name: String,
        /// Names its body may call as functions (command names, and what `time` runs).
        calls: Vec<String>,
    },
    /// A command substitution tree-sitter-bash left as text (backticks inside `${…}` or a
    /// here-document): analysed as a script of its own.
    Hidden(String),
    /// Something that makes the script unprovable, with a reason for the model.
    Problem(String),
    /// Something past the analyser's bounds (see `bounds`): refused in every mode, since what
    /// it holds was not analysed.
    Refused(String),
}

thread_local! {
    // Building a parser costs more than parsing a short command; one per thread keeps the
    // analysis pure (no shared state crosses calls) and fast.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse_tree(text: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        let parser = slot.as_mut()?;
        parser.reset();
        parser.parse(text, None)
    })
}

/// The first character tree-sitter-bash 0.25's external scanner cannot take: it passes the
/// lookahead code point to C's `isdigit`/`isalpha`, which index a 256-entry table, so a code
/// point above U+00FF reads out of bounds and can crash the process (seen: SIGSEGV in
/// `scan`, scanner.c:1158, on `{` followed by such a character).
fn unsafe_for_the_scanner(script: &str) -> Option<char> {
    script.chars().find(|c| u32::from(*c) > 0xFF)
}

/// Parses `script` and returns its items as the walk of its parse finds them; never fails
/// (problems are items).
pub(crate) fn items(script: &str) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(c) = unsafe_for_the_scanner(script) {
        items.push(Item::Problem(format!(
            "the command contains {c:?} (U+{:04X}); characters beyond Latin-1 are not analysed, since the Bash parser cannot take them safely",
            u32::from(c)
        )));
        return items;
    }
    let mut text = prepare(script, &mut items);
    let Some(mut tree) = parse_tree(&text) else {
        items.push(Item::Problem("the script could not be parsed".to_owned()));
        return items;
    };
    // tree-sitter-bash takes a word like `{rm,-f,x}` or `r[m]` in command position for the
    // start of a group or an array assignment; Bash runs it as a word. Read again with an
    // empty quote before each such word, which Bash expands the same.
    let mut injected = Vec::new();
    if tree.root_node().has_error()
        && let Some((quoted, at)) = quote_word_starts(&text)
        && let Some(again) = parse_tree(&quoted)
    {
        text = quoted;
        tree = again;
        injected = at;
    }
    let mut walker = Walker {
        src: &text,
        injected: &injected,
        items,
        evaluates: false,
        data: Vec::new(),
        broken: false,
        heredoc_starts: Vec::new(),
        heredoc_unsure: false,
        hung_redirects: Vec::new(),
        hidden_bytes: 0,
        refused: false,
    };
    walker.node(tree.root_node(), 0, Ctx::default());
    walker.finish()
}

/// The script with `''` before every unquoted word that starts with `{` and is not a group's
/// brace (`{rm,-f,x}`), or that reads like a subscript but assigns nothing (`r[m]`): words
/// whose meaning, brace and glob expansion included, the empty quote does not change.
/// Returns the new text and where each inserted quote starts in it: a word that brace
/// expansion leaves as nothing but such a quote is no word, as it would be without it
/// (`{sed,}` is `sed` alone). `None` when there is no such word, or the script has a
/// here-document (whose body this scan cannot tell apart).
fn quote_word_starts(text: &str) -> Option<(String, Vec<usize>)> {
    if text.contains("<<") {
        return None;
    }
    let b = text.as_bytes();
    let boundary = |c: u8| c.is_ascii_whitespace() || b";&|()`".contains(&c);
    let mut out: Vec<u8> = Vec::with_capacity(text.len() + 8);
    let mut injected = Vec::new();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                } else if q == b'"' && c == b'\\' && i + 1 < b.len() {
                    out.extend_from_slice(&b[i..i + 2]);
                    i += 2;
                    continue;
                }
            }
            None => {
                let word_start = i == 0 || boundary(b[i - 1]);
                if c == b'\\' && i + 1 < b.len() {
                    out.extend_from_slice(&b[i..i + 2]);
                    i += 2;
                    continue;
                }
                if word_start && c == b'#' {
                    let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                    out.extend_from_slice(&b[i..end]);
                    i = end;
                    continue;
                }
                if c == b'\'' || c == b'"' {
                    quote = Some(c);
                } else if word_start {
                    let end = (i..b.len()).find(|&k| boundary(b[k])).unwrap_or(b.len());
                    let word = &text[i..end];
                    let brace = c == b'{' && end > i + 1 && b[i + 1] != b'}';
                    let ident = word.find('[').filter(|&k| k > 0).is_some_and(|k| {
                        word[..k]
                            .bytes()
                            .all(|x| x.is_ascii_alphanumeric() || x == b'_')
                            && !word.contains('=')
                            && word[k..].contains(']')
                    });
                    if brace || ident {
                        injected.push(out.len());
                        out.extend_from_slice(b"''");
                    }
                }
            }
        }
        out.push(c);
        i += 1;
    }
    if injected.is_empty() {
        None
    } else {
        String::from_utf8(out).ok().map(|out| (out, injected))
    }
}

/// CR before LF is a Windows line ending: Bash would keep it inside the last word, which can
/// only make that word differ from what we check, so it is read as a space. A CR elsewhere, or
/// after a backslash (where the two disagree on line continuation), is asked about.
fn prepare(script: &str, items: &mut Vec<Item>) -> String {
    if joins_words(script) {
        items.push(Item::Problem(
            "a line continuation inside a word (`tr\\<newline>uncate` is `truncate` to Bash) is not analysed"
                .to_owned(),
        ));
    }
    if !script.contains(['\r', '\0']) {
        return script.to_owned();
    }
    let bytes = script.as_bytes();
    let mut out = String::with_capacity(script.len());
    let mut lone_cr = false;
    for (i, c) in script.char_indices() {
        match c {
            '\r' => {
                let before_lf = bytes.get(i + 1) == Some(&b'\n');
                let after_backslash = i > 0 && bytes[i - 1] == b'\\';
                if !before_lf || after_backslash {
                    lone_cr = true;
                }
                out.push(' ');
            }
            '\0' => {
                items.push(Item::Problem("the script contains a NUL byte".to_owned()));
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    if lone_cr {
        items.push(Item::Problem(
            "a carriage return that is not a Windows line ending makes the command ambiguous"
                .to_owned(),
        ));
    }
    out
}

/// Bash deletes backslash-newline before splitting words, so `tr\<newline>uncate` runs
/// `truncate`; tree-sitter-bash splits it into `tr uncate`. Such a join is refused.
fn joins_words(script: &str) -> bool {
    let b = script.as_bytes();
    let blank = |c: u8| c.is_ascii_whitespace() || matches!(c, b';' | b'&' | b'|' | b'(' | b')');
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            let start = i;
            while i < b.len() && b[i] == b'\\' {
                i += 1;
            }
            let odd = (i - start) % 2 == 1;
            let newline = match b.get(i) {
                Some(b'\n') => Some(i + 1),
                Some(b'\r') if b.get(i + 1) == Some(&b'\n') => Some(i + 2),
                _ => None,
            };
            if let Some(after) = newline
                && odd
                && start > 0
                && !blank(b[start - 1])
                && b.get(after).is_some_and(|&c| !blank(c))
            {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

#[derive(Clone, Copy, Default)]
struct Ctx {
    repeated: bool,
    /// Inside `( … )`, `$( … )`, `<( … )` or a pipeline of several commands.
    subshell: bool,
    /// A `variable_assignment` here belongs to a command or declaration, not a bare assignment.
    owned_assignment: bool,
    /// Inside a here-document whose delimiter is quoted: its body is not expanded.
    quoted_heredoc: bool,
}

struct Walker<'s> {
    src: &'s str,
    /// Where `quote_word_starts` put an empty quote into `src`.
    injected: &'s [usize],
    items: Vec<Item>,
    /// The script has a place where Bash evaluates a value as code.
    evaluates: bool,
    /// Quoted or escaped text that could become such a value (`x='a[$(cmd)]'`).
    data: Vec<String>,
    /// A part of the script did not parse.
    broken: bool,
    /// Every here-document's delimiter word (byte range), and whether tree-sitter-bash's view of
    /// where one ends may differ from Bash's.
    heredoc_starts: Vec<(usize, usize)>,
    heredoc_unsure: bool,
    /// Redirected statements whose redirections tree-sitter-bash hung on a list or pipeline
    /// (see `redirected_statement`), by node id, until the command they belong to is reached.
    hung_redirects: Vec<usize>,
    /// Bytes of hidden scripts found so far (see `push_hidden`).
    hidden_bytes: usize,
    /// A bound was reached and the refusal is among the items.
    refused: bool,
}

impl<'s> Walker<'s> {
    /// When the script evaluates data somewhere, every quoted text that could be that data is
    /// analysed for what it would run, so deny rules reach `x='a[$(rm y)]'; echo $((x))`.
    fn finish(mut self) -> Vec<Item> {
        if self.broken {
            self.lines_alone();
        }
        if self.heredoc_unsure
            && let Some(script) = self.as_bash_reads_heredocs()
        {
            self.push_hidden(script);
        }
        if self.evaluates {
            for text in std::mem::take(&mut self.data) {
                self.evaluated_text(&text);
            }
        }
        self.items
    }

    /// A script that does not parse is asked about; so that deny rules still reach what Bash
    /// would run, each piece of it between newlines and control operators is also analysed
    /// alone (pieces that were data or quoted only add commands to the analysis).
    fn lines_alone(&mut self) {
        let pieces: Vec<&str> = self
            .src
            .split(['\n', ';', '&', '|', '(', ')', '`'])
            .filter(|p| !p.trim().is_empty())
            .collect();
        if pieces.len() < 2 {
            return;
        }
        for piece in pieces {
            self.push_hidden(piece.to_owned());
        }
    }

    /// What Bash would run when it evaluates `template` again: the substitutions in it, found
    /// both by tree-sitter-bash (as the word of a `:` command, which handles `case … )` inside
    /// `$( )`) and by the loose scan (which quotes cannot hide from).
    fn evaluated_text(&mut self, template: &str) {
        if !runs_code(template) {
            return;
        }
        self.push_hidden(format!(": {template}"));
        for inner in substitutions_loose(template) {
            self.push_hidden(inner);
        }
    }

    /// The script with every here-document delimiter rewritten to the plain quoted word Bash
    /// waits for (`<<E"O"F` → `<<'EOF'`), which both parsers read alike: analysing it lets
    /// deny rules reach the lines Bash runs after the body. `None` when a delimiter cannot be
    /// written so.
    fn as_bash_reads_heredocs(&self) -> Option<String> {
        let mut script = self.src.to_owned();
        let mut starts = self.heredoc_starts.clone();
        starts.sort_unstable();
        starts.dedup();
        for (start, end) in starts.into_iter().rev() {
            let delimiter = heredoc_delimiter(&self.src[start..end])?;
            let plain = !delimiter.is_empty()
                && delimiter
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !plain {
                return None;
            }
            script.replace_range(start..end, &format!("'{delimiter}'"));
        }
        (script != self.src).then_some(script)
    }

    /// Keeps an assigned value as Bash stores it, in case the script evaluates it later.
    fn record_value(&mut self, assignment: Node) {
        // Prompt strings are expanded like `${x@P}` (PS4 under `set -x`).
        if assignment
            .child_by_field_name("name")
            .is_some_and(|n| super::bindings::expanded_later(&self.src[n.byte_range()]))
        {
            self.evaluates = true;
        }
        if let Some(value) = assignment.child_by_field_name("value") {
            let template = resolve(value, self.src).template().to_owned();
            if runs_code(&template) {
                self.data.push(template);
            }
        }
    }

    /// `for NAME in …` and `select NAME in …` bind NAME to each value in turn: a binding like
    /// `NAME=value`, and a prompt variable's values are code (`for PS4 in '$(cmd)'`).
    fn loop_variable(&mut self, n: Node) {
        let Some(variable) = n.child_by_field_name("variable") else {
            return;
        };
        // tree-sitter-bash only reads a plain name here: `for "$v" in` does not parse.
        let name = Word::literal(&self.text(variable));
        if name.fixed().is_none_or(super::bindings::expanded_later) {
            self.evaluates = true;
        }
        let via = n
            .child(0)
            .map_or_else(|| "for".to_owned(), |k| self.text(k));
        self.items.push(Item::Bind { via, name });
    }

    /// Marks a place where Bash evaluates data as code: a problem (ask), and the script's
    /// quoted data is searched for what it would run.
    fn evaluation(&mut self, reason: String) {
        self.evaluates = true;
        self.problem(reason);
    }

    fn text(&self, n: Node) -> String {
        self.src[n.byte_range()].to_owned()
    }

    fn problem(&mut self, reason: String) {
        self.items.push(Item::Problem(reason));
    }

    /// The walk reached [`MAX_TREE_DEPTH`], or the end of the stack it may use: what lies
    /// deeper is not analysed, so the script is refused (once).
    fn too_deep(&mut self) {
        if !self.refused {
            self.refused = true;
            self.items.push(Item::Refused(format!(
                "the script nests too deep to analyse (more than {MAX_TREE_DEPTH} levels, or more than the analysis's stack holds)"
            )));
        }
    }

    /// A script found inside this one, to be analysed as a script of its own; past
    /// [`MAX_ANALYSED_BYTES`] of them (nested substitutions are found once per level that
    /// holds them), the script is refused.
    fn push_hidden(&mut self, script: String) {
        self.hidden_bytes += script.len();
        if self.hidden_bytes > MAX_ANALYSED_BYTES {
            if !self.refused {
                self.refused = true;
                self.items.push(Item::Refused(format!(
                    "the command hides more than {MAX_ANALYSED_BYTES} bytes of nested scripts; they are not analysed"
                )));
            }
            return;
        }
        self.items.push(Item::Hidden(script));
    }

    fn children(&mut self, n: Node, depth: usize, ctx: Ctx) {
        // The cursor is this call's own, so the children are walked in place, without a Vec.
        let mut cursor = n.walk();
        for child in n.named_children(&mut cursor) {
            self.node(child, depth + 1, ctx);
        }
    }

    fn node(&mut self, n: Node, depth: usize, ctx: Ctx) {
        if depth > MAX_TREE_DEPTH || tollgate_base::stack_is_low() {
            self.too_deep();
            return;
        }
        if n.is_missing() {
            let reason = format!("the script is incomplete (missing `{}`)", kind(&n));
            self.problem(reason);
            return;
        }
        if n.is_error() {
            self.heredoc_unsure = true;
            self.broken = true;
            let snippet: String = self.text(n).chars().take(60).collect();
            self.problem(format!("the script does not parse near `{snippet}`"));
            return self.children(n, depth, Ctx::default());
        }
        let inner = Ctx {
            owned_assignment: false,
            ..ctx
        };
        if !self.hung_redirects.is_empty()
            && let Some(statement) = hung_on(n)
            && let Some(at) = self
                .hung_redirects
                .iter()
                .position(|id| *id == statement.id())
        {
            self.hung_redirects.swap_remove(at);
            self.redirects_of(statement, depth, inner);
        }
        match kind(&n) {
            "heredoc_redirect" => {
                if let Err(reason) = self.heredoc_agrees(n) {
                    self.heredoc_unsure = true;
                    self.problem(reason.to_string());
                }
                let mut cursor = n.walk();
                let kids: Vec<Node> = n.named_children(&mut cursor).collect();
                let quoted = kids
                    .iter()
                    .find(|c| kind(c) == "heredoc_start")
                    .is_some_and(|c| self.src[c.byte_range()].contains(['\'', '"', '\\']));
                for child in kids {
                    // Only the body is data; a pipeline or redirect after `<<'EOF'` is code.
                    let body_ctx = Ctx {
                        quoted_heredoc: quoted && kind(&child) == "heredoc_body",
                        ..inner
                    };
                    self.node(child, depth + 1, body_ctx);
                }
            }
            "heredoc_body" => {
                if ctx.quoted_heredoc {
                    self.data.push(self.text(n));
                } else {
                    self.heredoc_gaps(n);
                }
                self.children(n, depth, inner);
            }
            "word" | "string_content" | "heredoc_content" | "regex" => {
                let text = &self.src[n.byte_range()];
                // tree-sitter-bash glues a line that starts with a backslash to the line
                // before (`echo hi` + `\rm x` becomes one `echo` command); Bash does not.
                if kind(&n) == "word" && unescaped_newline(text) {
                    self.broken = true;
                    self.problem(format!(
                        "the word `{}` spans lines, which the parser and Bash read differently",
                        text.trim()
                    ));
                }
                if !ctx.quoted_heredoc {
                    self.hidden(text);
                }
            }
            "string" => self.children(n, depth, inner),
            "raw_string" | "ansi_c_string" => {
                let text = &self.src[n.byte_range()];
                self.data.push(text.to_owned());
            }
            "pipeline" => self.pipeline(n, depth, inner),
            "subshell" | "command_substitution" | "process_substitution" => self.children(
                n,
                depth,
                Ctx {
                    subshell: true,
                    ..inner
                },
            ),
            "program"
            | "list"
            | "do_group"
            | "if_statement"
            | "elif_clause"
            | "else_clause"
            | "case_statement"
            | "case_item"
            | "negated_command"
            | "herestring_redirect"
            | "concatenation"
            | "number"
            | "command_name"
            | "translated_string"
            | "variable_assignments" => self.children(n, depth, inner),
            "heredoc_start" => {
                let end = word_end(self.src, n.start_byte()).max(n.end_byte());
                self.heredoc_starts.push((n.start_byte(), end));
            }
            "comment"
            | "heredoc_end"
            | "file_descriptor"
            | "variable_name"
            | "special_variable_name"
            | "extglob_pattern"
            | "test_operator"
            | "brace_expression"
            | "simple_expansion" => {}
            "for_statement" => {
                self.loop_variable(n);
                self.loop_value(n);
                self.children(
                    n,
                    depth,
                    Ctx {
                        repeated: true,
                        ..inner
                    },
                );
            }
            "while_statement" => self.children(
                n,
                depth,
                Ctx {
                    repeated: true,
                    ..inner
                },
            ),
            "c_style_for_statement" | "arithmetic_expansion" => {
                self.arithmetic(n);
                self.children(
                    n,
                    depth,
                    Ctx {
                        repeated: true,
                        ..inner
                    },
                );
            }
            "compound_statement" => {
                if n.child(0).is_some_and(|c| kind(&c) == "((") {
                    self.arithmetic(n);
                }
                self.children(n, depth, inner);
            }
            "binary_expression"
            | "unary_expression"
            | "ternary_expression"
            | "postfix_expression"
            | "parenthesized_expression" => self.children(n, depth, inner),
            "subscript" => {
                let index = n.child_by_field_name("index");
                // `a[@]` and `a[*]` list the elements; any other index is arithmetic.
                let listing = index.is_some_and(|i| matches!(&self.src[i.byte_range()], "@" | "*"));
                if let Some(index) = index.filter(|_| !listing) {
                    self.arithmetic(index);
                }
                self.children(n, depth, inner);
            }
            "expansion" => {
                self.expansion(n);
                self.children(n, depth, inner);
            }
            "array" => {
                let mut cursor = n.walk();
                let elements: Vec<Node> = n.named_children(&mut cursor).collect();
                for element in elements {
                    self.array_key(element);
                    self.node(element, depth + 1, inner);
                }
            }
            "function_definition" => {
                if let Some(name) = n.child_by_field_name("name") {
                    let name = self.text(name);
                    let calls = n
                        .child_by_field_name("body")
                        .map(|body| self.calls(body))
                        .unwrap_or_default();
                    self.items.push(Item::Function { name, calls });
                }
                self.children(
                    n,
                    depth,
                    Ctx {
                        repeated: true,
                        ..inner
                    },
                );
            }
            "redirected_statement" => self.redirected_statement(n, depth, inner),
            "file_redirect" => {
                self.redirect(n);
                self.children(n, depth, inner);
            }
            "test_command" => {
                self.test(n);
                self.children(n, depth, inner);
            }
            "command" => self.command(n, depth, inner),
            "variable_assignment" => {
                self.record_value(n);
                if !ctx.owned_assignment {
                    let mut assignment = self.assignment(n);
                    assignment.value = self.literal_value(n);
                    self.items.push(Item::Assign(assignment));
                }
                self.children(n, depth, inner);
            }
            "unset_command"
                if n.child(0)
                    .is_some_and(|k| &self.src[k.byte_range()] == "unsetenv") =>
            {
                self.unsetenv(n, depth, inner);
            }
            "declaration_command" | "unset_command" => {
                self.declaration(n);
                self.children(
                    n,
                    depth,
                    Ctx {
                        owned_assignment: true,
                        ..inner
                    },
                );
            }
            other => {
                self.problem(format!("unsupported shell syntax `{other}`"));
                self.children(n, depth, inner);
            }
        }
    }

    /// A command with its redirections. Bash performs them as the command starts, so their
    /// items come before the command's. tree-sitter-bash reads a redirection written after the
    /// last command of a list or pipeline as one of the whole (`cd .git && echo x > config`,
    /// `a | b > f`); Bash gives it to that last command alone, after the commands before it
    /// have run (there, after the `cd`). Such redirections wait for their command (see
    /// `hung_on`); should the walk not reach it, they are read after the body and the script
    /// is asked about.
    fn redirected_statement(&mut self, n: Node, depth: usize, ctx: Ctx) {
        let body = n.child_by_field_name("body");
        match body {
            Some(body) if hangs_redirects(body) => {
                self.hung_redirects.push(n.id());
                self.node(body, depth + 1, ctx);
                if let Some(at) = self.hung_redirects.iter().position(|id| *id == n.id()) {
                    self.hung_redirects.swap_remove(at);
                    self.problem(format!(
                        "`{}`: a redirection after a list or pipeline whose last command could not be found",
                        self.text(n)
                    ));
                    self.redirects_of(n, depth, ctx);
                }
            }
            _ => {
                self.redirects_of(n, depth, ctx);
                if let Some(body) = body {
                    self.node(body, depth + 1, ctx);
                }
            }
        }
    }

    /// The redirections of redirected statement `n`: every named child but its body.
    fn redirects_of(&mut self, n: Node, depth: usize, ctx: Ctx) {
        let body = n.child_by_field_name("body");
        let mut cursor = n.walk();
        let redirects: Vec<Node> = n
            .named_children(&mut cursor)
            .filter(|k| Some(*k) != body)
            .collect();
        for redirect in redirects {
            self.node(redirect, depth + 1, ctx);
        }
    }

    /// The parts of a pipeline run in subshells of their own. tree-sitter-bash reads
    /// `a | b | c && d` as `a | (b | c && d)`: a pipeline whose last part is a list. Bash's
    /// pipeline ends at the `&&`: the list's first part is the pipeline's last command and
    /// the rest runs in this shell, where a `cd` moves the commands after it. It reads
    /// `a && b | c` as `(a && b) | c` too: there the list's last part is the pipeline's first
    /// command, and `a` runs in this shell.
    fn pipeline(&mut self, n: Node, depth: usize, outer: Ctx) {
        let piped = Ctx {
            subshell: true,
            ..outer
        };
        self.pipeline_parts(n, depth, piped, outer);
    }

    /// The parts of pipeline `n`: piped, but for what a list hung on it runs outside it.
    fn pipeline_parts(&mut self, n: Node, depth: usize, piped: Ctx, outer: Ctx) {
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        let last = kids.len().saturating_sub(1);
        for (i, child) in kids.into_iter().enumerate() {
            match (i, kind(&child)) {
                (0, "list") if last > 0 => {
                    self.list_before_pipeline(child, depth + 1, piped, outer);
                }
                (_, "list") => self.list_after_pipeline(child, depth + 1, piped, outer),
                _ => self.node(child, depth + 1, piped),
            }
        }
    }

    /// A list tree-sitter-bash put first in a pipeline (see `pipeline`): its rightmost part
    /// is piped, every other part runs where the pipeline itself runs.
    fn list_before_pipeline(&mut self, list: Node, depth: usize, piped: Ctx, outer: Ctx) {
        if depth > MAX_TREE_DEPTH || tollgate_base::stack_is_low() {
            self.too_deep();
            return;
        }
        let mut cursor = list.walk();
        let kids: Vec<Node> = list.named_children(&mut cursor).collect();
        let last = kids.len().saturating_sub(1);
        for (i, child) in kids.into_iter().enumerate() {
            match kind(&child) {
                "list" if i == last => self.list_before_pipeline(child, depth + 1, piped, outer),
                _ if i == last => self.node(child, depth + 1, piped),
                _ => self.node(child, depth + 1, outer),
            }
        }
    }

    /// A list tree-sitter-bash hung on a pipeline (see `pipeline`): its leftmost part is
    /// piped, every other part runs where the pipeline itself runs.
    fn list_after_pipeline(&mut self, list: Node, depth: usize, piped: Ctx, outer: Ctx) {
        if depth > MAX_TREE_DEPTH || tollgate_base::stack_is_low() {
            self.too_deep();
            return;
        }
        let mut cursor = list.walk();
        let kids: Vec<Node> = list.named_children(&mut cursor).collect();
        for (i, child) in kids.into_iter().enumerate() {
            match (i, kind(&child)) {
                (0, "list") => self.list_after_pipeline(child, depth + 1, piped, outer),
                // Itself read with a list hung on it (`! a | b | c | d && e`): the same.
                (0, "pipeline") => self.pipeline_parts(child, depth + 1, piped, outer),
                (0, _) => self.node(child, depth + 1, piped),
                _ => self.node(child, depth + 1, outer),
            }
        }
    }

    /// Bash ends a here-document at the first line equal to its delimiter after quote removal
    /// (`<<E"O"F` ends at `EOF`); tree-sitter-bash may keep the raw word and read later lines
    /// as data. Both views must agree on where the body ends.
    fn heredoc_agrees(&self, n: Node) -> Result<(), Unproven> {
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.children(&mut cursor).collect();
        let strip_tabs = kids.iter().any(|k| kind(k) == "<<-");
        let start = kids.iter().find(|k| kind(k) == "heredoc_start");
        // tree-sitter-bash may end the word early (`<<'E'"O"F`): Bash reads it whole.
        let raw = start
            .map(|s| self.src[s.start_byte()..word_end(self.src, s.start_byte())].to_owned())
            .unwrap_or_default();
        if start.is_some_and(|s| word_end(self.src, s.start_byte()) != s.end_byte()) {
            return Err(Unproven::HeredocWord(raw));
        }
        let unsure = || Unproven::HeredocEnd(raw.clone());
        let delimiter = heredoc_delimiter(&raw).ok_or_else(unsure)?;
        let line = |text: &'s str| {
            if strip_tabs {
                text.trim_start_matches('\t')
            } else {
                text
            }
        };
        let src = self.src;
        let end = kids
            .iter()
            .find(|k| kind(k) == "heredoc_end")
            .ok_or_else(unsure)?;
        let line_start = src[..end.start_byte()].rfind('\n').map_or(0, |i| i + 1);
        let after = src[end.end_byte()..].chars().next();
        if line(&src[line_start..end.end_byte()]) != delimiter || after.is_some_and(|c| c != '\n') {
            return Err(unsure());
        }
        for body in kids.iter().filter(|k| kind(k) == "heredoc_body") {
            let mut pos = body.start_byte();
            for text in src[body.start_byte()..body.end_byte()].split('\n') {
                let whole_line = pos == 0 || src.as_bytes()[pos - 1] == b'\n';
                if whole_line && line(text) == delimiter {
                    return Err(unsure());
                }
                pos += text.len() + 1;
            }
        }
        Ok(())
    }

    /// `${…}`: the operators that only read or reshape a value are allowed; substring offsets
    /// are arithmetic; `${!x}` and `${x@P}` evaluate the value; `${x:=v}` assigns.
    fn expansion(&mut self, n: Node) {
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.children(&mut cursor).collect();
        let text = self.text(n);
        let inner = match kids.as_slice() {
            [open, inner @ .., close] if kind(open) == "${" && kind(close) == "}" => inner,
            _ => {
                self.problem(format!("the expansion `{text}` is not understood"));
                return;
            }
        };
        let (prefix, rest) = match inner.split_first() {
            Some((p, rest)) if matches!(kind(p), "!" | "#") && !p.is_named() => {
                (Some(kind(p)), rest)
            }
            _ => (None, inner),
        };
        let (param, ops) = match rest.split_first() {
            Some((p, ops))
                if matches!(
                    kind(p),
                    "variable_name" | "special_variable_name" | "subscript"
                ) =>
            {
                (Some(*p), ops)
            }
            _ => (None, rest),
        };
        let listing_subscript = param.is_some_and(|p| {
            kind(&p) == "subscript"
                && p.child_by_field_name("index")
                    .is_some_and(|i| matches!(&self.src[i.byte_range()], "@" | "*"))
        });
        // Backquotes inside `${…}` are left as text and split around `$VAR`; scanned whole.
        if let (Some(first), Some(last)) = (ops.first(), ops.last())
            && text.contains('`')
        {
            let src = self.src;
            self.hidden(&src[first.end_byte()..last.end_byte().max(first.end_byte())]);
        }
        let op_kinds: Vec<&str> = ops.iter().map(|k| kind(k)).collect();
        match (prefix, param, op_kinds.as_slice()) {
            // `${#}`, `${!}`: the argument count and the last background pid.
            (Some(_), None, []) => {}
            (Some("#"), Some(_), []) => {}
            // `${!prefix*}`, `${!prefix@}`, `${!a[@]}` list names or keys; nothing is evaluated.
            (Some("!"), Some(p), ["*" | "@"]) if kind(&p) == "variable_name" => {}
            (Some("!"), Some(_), []) if listing_subscript => {}
            (Some("!"), _, _) => self.evaluation(format!(
                "`{text}` uses a variable's value as a name, which Bash evaluates (a subscript in it runs commands)"
            )),
            (None, Some(_), []) => {}
            (None, Some(_), [":", ..]) => {
                for operand in ops.iter().filter(|k| k.is_named()) {
                    self.arithmetic(*operand);
                }
            }
            (None, Some(_), ["@", op]) if inert_transformation(op) => {}
            (None, Some(_), ["@", ..]) => self.evaluation(format!(
                "`{text}` expands the value like a prompt, which runs the substitutions it holds"
            )),
            (None, Some(p), [":=" | "=", ..]) => {
                let name = self.text(p);
                self.items.push(Item::Assign(Assignment {
                    name,
                    text: text.clone(),
                    value: None,
                }));
            }
            (
                None,
                Some(_),
                [
                    ":-" | "-" | ":?" | "?" | ":+" | "+" | "#" | "##" | "%" | "%%" | "/" | "//"
                    | "/#" | "/%" | "^" | "^^" | "," | ",,",
                    ..,
                ],
            ) => {}
            _ => self.problem(format!(
                "the parameter expansion `{text}` uses an operator not known to be harmless"
            )),
        }
    }

    /// `a=([k]=v)`: an indexed array's key is arithmetic.
    fn array_key(&mut self, element: Node) {
        let text = &self.src[element.byte_range()];
        let Some(rest) = text.strip_prefix('[') else {
            return;
        };
        let key = rest
            .split_once("]=")
            .or_else(|| rest.split_once("]+="))
            .map(|(k, _)| k);
        if key.is_some_and(super::evaluated::plain_number) {
            return;
        }
        let snippet: String = text.chars().take(60).collect();
        self.evaluation(format!(
            "the array key in `{snippet}` is arithmetic, which can run commands hidden in variables"
        ));
        self.loose_leaves(element, 0);
    }

    /// The names a function body may call as shell functions: every command's name, and the
    /// command `time` or `coproc` runs (a keyword, so it can run a function).
    fn calls(&self, body: Node) -> Vec<String> {
        let mut names = Vec::new();
        let mut stack = vec![(body, 0)];
        while let Some((node, depth)) = stack.pop() {
            if depth > MAX_TREE_DEPTH {
                break;
            }
            if kind(&node) == "command" {
                let mut cursor = node.walk();
                let words: Vec<Word> = node
                    .children(&mut cursor)
                    .filter(|c| {
                        matches!(
                            kind(c),
                            "command_name" | "word" | "string" | "raw_string" | "concatenation"
                        )
                    })
                    .flat_map(|c| resolve_all(c, self.src, self.injected))
                    .collect();
                let mut rest = words.iter().filter_map(|w| w.value.clone());
                if let Some(name) = rest.next() {
                    if matches!(name.as_str(), "time" | "coproc") {
                        names.extend(rest.find(|w| !w.starts_with('-')));
                    }
                    names.push(name);
                }
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor).map(|c| (c, depth + 1)));
        }
        names
    }

    /// The text of a here-document body that lies between its parsed children.
    fn heredoc_gaps(&mut self, n: Node) {
        let mut pos = n.start_byte();
        let mut cursor = n.walk();
        // Only command substitutions are reliably parsed inside a body (tree-sitter-bash leaves
        // `$(` unparsed under `<<-` and splits backquotes around `$VAR`); the rest is scanned.
        let spans: Vec<(usize, usize)> = n
            .named_children(&mut cursor)
            .filter(|c| kind(c) == "command_substitution")
            .map(|c| (c.start_byte(), c.end_byte()))
            .collect();
        let src = self.src;
        for (start, end) in spans {
            if start > pos {
                self.hidden(&src[pos..start]);
            }
            pos = pos.max(end);
        }
        if n.end_byte() > pos {
            self.hidden(&src[pos..n.end_byte()]);
        }
    }

    /// Finds `` `…` `` and `$(…)` in text that Bash expands but tree-sitter left unparsed.
    fn hidden(&mut self, text: &str) {
        if !text.contains(['`', '$']) {
            return;
        }
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'`' => {
                    let start = i + 1;
                    let mut j = start;
                    while j < b.len() && b[j] != b'`' {
                        j += if b[j] == b'\\' { 2 } else { 1 };
                    }
                    if j >= b.len() {
                        // Asked about; what follows is still analysed so deny rules reach
                        // a command Bash may find in it where this scan found no end.
                        self.problem("an unterminated backquote".to_owned());
                        self.unsure_rest(&text[start..]);
                        return;
                    }
                    self.push_hidden(text[start..j].to_owned());
                    i = j + 1;
                }
                b'$' if b.get(i + 1) == Some(&b'(') && b.get(i + 2) != Some(&b'(') => {
                    let start = i + 2;
                    let Some(end) = substitution_end(text, start) else {
                        self.problem("an unterminated `$(`".to_owned());
                        self.unsure_rest(&text[start..]);
                        return;
                    };
                    self.push_hidden(text[start..end].to_owned());
                    i = end + 1;
                }
                b'$' if b.get(i + 1) == Some(&b'(') => {
                    self.problem("arithmetic that tree-sitter-bash did not parse".to_owned());
                    return;
                }
                _ => i += 1,
            }
        }
    }

    /// Text after a substitution whose end the scan did not find: already asked about, it
    /// is analysed as a script and searched loosely, quotes or not, for the substitutions Bash
    /// may run from it (`$(x="a[\$(cmd)]"; echo $((x)))`), so deny rules reach them.
    fn unsure_rest(&mut self, rest: &str) {
        self.push_hidden(rest.to_owned());
        for inner in substitutions_loose(rest) {
            self.push_hidden(inner);
        }
    }

    fn assignment(&self, n: Node) -> Assignment {
        let name = n
            .child_by_field_name("name")
            .map(|c| self.text(c))
            .unwrap_or_default();
        Assignment {
            name,
            text: self.text(n),
            value: None,
        }
    }

    /// The value of a bare assignment Bash runs unconditionally, in order, in this shell
    /// (directly in the script's top-level list, not in the background), when it is literal.
    fn literal_value(&self, n: Node) -> Option<Value> {
        let parent = n.parent()?;
        if kind(&parent) != "program" || n.next_sibling().is_some_and(|s| kind(&s) == "&") {
            return None;
        }
        let name = n.child_by_field_name("name")?;
        if kind(&name) != "variable_name" || self.src[name.end_byte()..].starts_with("+=") {
            return None;
        }
        let Some(value) = n.child_by_field_name("value") else {
            return Some(Value::Scalar(String::new()));
        };
        if kind(&value) == "array" {
            let mut cursor = value.walk();
            let mut elements = Vec::new();
            for element in value.named_children(&mut cursor) {
                if self.src[element.byte_range()].starts_with('[') {
                    return None;
                }
                for w in resolve_all(element, self.src, self.injected) {
                    elements.push(w.fixed().filter(|_| !w.tilde)?.to_owned());
                }
            }
            return Some(Value::Array(elements));
        }
        let w = resolve(value, self.src);
        if self.src[value.byte_range()].contains('~') {
            return None;
        }
        w.value.map(Value::Scalar)
    }

    /// `for NAME in WORD`: NAME takes each word WORD expands to; when that is one literal
    /// word or one glob, later `"$NAME"` is known to be it (or one of its matches).
    fn loop_value(&mut self, n: Node) {
        let Some(variable) = n.child_by_field_name("variable") else {
            return;
        };
        let mut cursor = n.walk();
        let values: Vec<Node> = n.children_by_field_name("value", &mut cursor).collect();
        let words: Vec<Word> = values
            .iter()
            .flat_map(|v| resolve_all(*v, self.src, self.injected))
            .collect();
        let value = if kind(&variable) == "variable_name" {
            loop_value(&words)
        } else {
            None
        };
        self.items.push(loop_var(
            self.text(variable),
            &self.src[n.byte_range()],
            value,
        ));
    }

    /// Bash evaluates variables met in arithmetic recursively, so `x='a[$(cmd)]'; echo $((x))`
    /// runs `cmd`: arithmetic is only proven safe when it holds numbers alone.
    fn arithmetic(&mut self, n: Node) {
        if has_non_numeric(n, self.src, 0) {
            let snippet: String = self.text(n).chars().take(60).collect();
            self.evaluation(format!(
                "arithmetic on variables (`{snippet}`) can run commands hidden in their values"
            ));
            self.loose_leaves(n, 0);
            // Bash reads `$((…))` that is not arithmetic as `$( (…) )`, a subshell in a
            // command substitution (`$((cmd) &\nwait)`): already asked about, that reading is
            // analysed too so deny rules reach what it runs.
            let text = self.text(n);
            if let Some(inner) = text.strip_prefix("$(") {
                let inner = inner.strip_suffix(')').unwrap_or(inner);
                self.push_hidden(inner.to_owned());
            }
        }
    }

    /// Quoted text inside an evaluated operand (`${a['$(cmd)']}`, `[[ 'a[$(cmd)]' -eq 1 ]]`):
    /// Bash removes the quotes and evaluates the rest, so what it would run is analysed.
    fn loose_leaves(&mut self, n: Node, depth: usize) {
        if depth > MAX_TREE_DEPTH || tollgate_base::stack_is_low() {
            self.too_deep();
            return;
        }
        match kind(&n) {
            "command_substitution" | "process_substitution" => {}
            "raw_string" | "ansi_c_string" | "word" | "string" | "concatenation" => {
                let template = resolve(n, self.src).template().to_owned();
                self.evaluated_text(&template);
            }
            _ => {
                let mut cursor = n.walk();
                let kids: Vec<Node> = n.named_children(&mut cursor).collect();
                for k in kids {
                    self.loose_leaves(k, depth + 1);
                }
            }
        }
    }

    fn test(&mut self, n: Node) {
        self.variable_tests(n);
        let double = n.child(0).is_some_and(|c| kind(&c) == "[[");
        if double {
            let mut stack = vec![n];
            while let Some(node) = stack.pop() {
                let op = node
                    .child_by_field_name("operator")
                    .map(|o| &self.src[o.byte_range()]);
                if kind(&node) == "binary_expression"
                    && op
                        .is_some_and(|o| matches!(o, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"))
                {
                    self.arithmetic(node);
                }
                let mut cursor = node.walk();
                stack.extend(node.named_children(&mut cursor));
            }
        }
        self.items.push(Item::Test { text: self.text(n) });
    }

    /// `-v name` and `-R name` evaluate the name's subscript as arithmetic.
    fn variable_tests(&mut self, n: Node) {
        let mut stack = vec![(n, 0)];
        while let Some((node, depth)) = stack.pop() {
            if depth > MAX_TREE_DEPTH {
                return;
            }
            let mut cursor = node.walk();
            let kids: Vec<Node> = node.named_children(&mut cursor).collect();
            if kind(&node) == "unary_expression"
                && let [op, operand] = kids.as_slice()
                && matches!(&self.src[op.byte_range()], "-v" | "-R")
            {
                let name = resolve(*operand, self.src);
                if !name.fixed().is_some_and(inert_variable_name) {
                    self.evaluation(format!(
                        "`{} {}` evaluates the subscript of a name not known statically",
                        self.text(*op),
                        name.raw
                    ));
                    self.loose_leaves(*operand, 0);
                }
            }
            stack.extend(kids.into_iter().map(|k| (k, depth + 1)));
        }
    }

    fn redirect(&mut self, n: Node) {
        let mut op = String::new();
        let mut target = None;
        let mut cursor = n.walk();
        for (i, child) in n.children(&mut cursor).enumerate() {
            if !child.is_named() {
                if op.is_empty() {
                    op = self.text(child);
                }
                continue;
            }
            if n.field_name_for_child(i as u32) == Some("destination") && target.is_none() {
                target = Some(if kind(&child) == "process_substitution" {
                    None
                } else {
                    let mut words = resolve_all(child, self.src, self.injected);
                    if words.len() == 1 {
                        // What Bash opens: `< {secret,}` is `< secret`.
                        words.pop()
                    } else {
                        // Bash refuses it ("ambiguous redirect"); not modelled further.
                        self.problem(format!(
                            "`{}`: brace expansion in a redirection target",
                            self.text(n)
                        ));
                        Some(resolve(child, self.src))
                    }
                });
            }
        }
        self.items.push(Item::Redirect(Redirect {
            op,
            target: target.flatten(),
            text: self.text(n),
        }));
    }

    fn command(&mut self, n: Node, depth: usize, ctx: Ctx) {
        let mut assignments = Vec::new();
        let mut words: Vec<(usize, Word)> = Vec::new();
        // Each child's field read off the cursor that walks them: `field_name_for_child`
        // searches the field map again for every child.
        let mut cursor = n.walk();
        let mut kids: Vec<(Option<&str>, Node)> = Vec::with_capacity(n.child_count() as usize);
        if cursor.goto_first_child() {
            loop {
                kids.push((cursor.field_name(), cursor.node()));
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut redirect_starts: Vec<usize> = Vec::new();
        for (field, child) in &kids {
            if *field == Some("redirect") {
                redirect_starts.push(child.start_byte());
            }
            match (*field, kind(child)) {
                (Some("name") | Some("argument"), _) => {
                    spans.push((child.start_byte(), child.end_byte()));
                    let at = child.start_byte();
                    match resolve_expanded(*child, self.src, self.injected) {
                        Expanded::One(word) => words.push((at, word)),
                        Expanded::Many(all) => words.extend(all.into_iter().map(|w| (at, w))),
                    }
                }
                (Some("redirect"), _) => self.extra_destinations(*child, &mut words),
                (None, "variable_assignment") => assignments.push(self.assignment(*child)),
                (None, "subshell") => {
                    self.problem("a subshell inside a command's words is not supported".into());
                }
                _ => {}
            }
        }
        // Every statement whose redirections are this command's: its own, and one that
        // tree-sitter-bash hung on a list ending in it (`x && cat > f a` runs `cat a`).
        let mut owner = n;
        while let Some(statement) = redirected_by(owner) {
            let mut cursor = statement.walk();
            let redirects: Vec<Node> = statement
                .children_by_field_name("redirect", &mut cursor)
                .collect();
            for r in redirects {
                redirect_starts.push(r.start_byte());
                self.extra_destinations(r, &mut words);
            }
            owner = statement;
        }
        self.descriptor_variables(&spans, &redirect_starts, &mut words);
        words.sort_by_key(|(pos, _)| *pos);
        let words = words.into_iter().map(|(_, w)| w).collect();
        let children: Vec<Node> = kids.iter().map(|(_, child)| *child).collect();
        self.push_command(n, assignments, words, &children, depth, ctx);
    }

    /// The end of reading a simple command: what its words may hand to an evaluation, its
    /// `children` walked for what they run, and its item.
    fn push_command(
        &mut self,
        n: Node,
        assignments: Vec<Assignment>,
        words: Vec<Word>,
        children: &[Node],
        depth: usize,
        ctx: Ctx,
    ) {
        for w in &words {
            if runs_code(w.template()) {
                self.data.push(w.template().to_owned());
            }
        }
        // The declaration builtins reach here as plain words when tree-sitter-bash misreads
        // the line (`! declare -a d='([$(cmd)]=1)'`) or through `builtin`/`command`; they
        // evaluate a quoted array value's keys as they do in a declaration.
        let fixed: Vec<&str> = words.iter().filter_map(|w| w.fixed()).collect();
        if fixed
            .iter()
            .any(|v| matches!(*v, "eval" | "-v" | "-R" | "trap"))
            || super::bindings::may_bind(&fixed)
        {
            self.evaluates = true;
        }
        for child in children {
            self.node(
                *child,
                depth + 1,
                Ctx {
                    owned_assignment: true,
                    ..ctx
                },
            );
        }
        self.items.push(Item::Command(SimpleCommand {
            text: self.text(n),
            assignments,
            words,
            repeated: ctx.repeated,
            subshell: ctx.subshell,
        }));
    }

    /// `{NAME}>file` (also `<`, `>&`, `<&-`…) opens a descriptor and binds its number to NAME
    /// (a subscript is evaluated); tree-sitter-bash reads `{NAME}` as a word of the command.
    /// Bash does not pass it on: it is a binding, taken out of the words.
    fn descriptor_variables(
        &mut self,
        spans: &[(usize, usize)],
        redirect_starts: &[usize],
        words: &mut Vec<(usize, Word)>,
    ) {
        for &(start, end) in spans {
            let text = &self.src[start..end];
            let Some(name) = text
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .filter(|name| !name.is_empty() && !name.contains(['{', '}', ',']))
            else {
                continue;
            };
            if !redirect_starts.contains(&end) {
                continue;
            }
            words.retain(|(pos, _)| *pos != start);
            let name = Word::literal(name);
            if super::evaluated::runs_code(name.template()) {
                self.evaluates = true;
            }
            self.items.push(Item::Bind {
                via: format!("{text} redirection"),
                name,
            });
        }
    }

    /// tree-sitter-bash hangs words that follow a redirect target (`>out a b`) on the redirect;
    /// for Bash they are arguments of the command.
    fn extra_destinations(&self, redirect: Node, words: &mut Vec<(usize, Word)>) {
        if kind(&redirect) != "file_redirect" {
            return;
        }
        let mut cursor = redirect.walk();
        let dests: Vec<Node> = redirect
            .children_by_field_name("destination", &mut cursor)
            .collect();
        for extra in dests.iter().skip(1) {
            let at = extra.start_byte();
            words.extend(
                resolve_all(*extra, self.src, self.injected)
                    .into_iter()
                    .map(|w| (at, w)),
            );
        }
    }

    /// tree-sitter-bash reads `unsetenv` (a C shell builtin) as `unset`; to Bash it is a
    /// program like any other, run with its words.
    fn unsetenv(&mut self, n: Node, depth: usize, ctx: Ctx) {
        let mut words = Vec::new();
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.children(&mut cursor).collect();
        for (i, child) in kids.iter().enumerate() {
            if i == 0 || kind(child) == "variable_name" {
                // The keyword and the names are bare words of letters, digits and `_`.
                words.push(super::word::plain(
                    self.src,
                    child.start_byte(),
                    child.end_byte(),
                ));
            } else if !child.is_named() {
                self.problem(format!("`{}` in `unsetenv`", self.text(*child)));
            } else {
                match resolve_expanded(*child, self.src, self.injected) {
                    Expanded::One(word) => words.push(word),
                    Expanded::Many(all) => words.extend(all),
                }
            }
        }
        let children: Vec<Node> = kids.into_iter().filter(|k| k.is_named()).collect();
        self.push_command(n, Vec::new(), words, &children, depth, ctx);
    }

    fn declaration(&mut self, n: Node) {
        let keyword = n.child(0).map(|c| self.text(c)).unwrap_or_default();
        let mut flags = Vec::new();
        let mut names = Vec::new();
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        for child in kids {
            match kind(&child) {
                "variable_assignment" => {
                    if let Some(value) = child.child_by_field_name("value")
                        && kind(&value) != "array"
                        && resolve(value, self.src)
                            .value
                            .unwrap_or_else(|| self.text(value))
                            .trim_start_matches(['\'', '"'])
                            .starts_with('(')
                    {
                        self.evaluation(format!(
                            "`{}` is a quoted array assignment, whose keys Bash evaluates",
                            self.text(child)
                        ));
                    }
                    names.push(self.assignment(child).name)
                }
                "variable_name" => names.push(self.text(child)),
                _ => {
                    let w = resolve(child, self.src);
                    if w.value
                        .as_deref()
                        .is_some_and(|v| v.starts_with(['-', '+']))
                    {
                        flags.push(w);
                    } else {
                        // A name built from an expansion (`export "$v"=1`) is not known.
                        names.push(w.value.unwrap_or_else(|| w.raw.clone()));
                    }
                }
            }
        }
        if flags.iter().any(|f| {
            f.value
                .as_deref()
                .is_none_or(|v| v.contains(['i', 'a', 'A', 'n']))
        }) || names.iter().any(|name| name.contains(['=', '[']))
        {
            self.evaluates = true;
        }
        let text = self.text(n);
        self.items.push(if kind(&n) == "unset_command" {
            Item::Unset { flags, names, text }
        } else {
            Item::Declare {
                keyword,
                flags,
                names,
                text,
            }
        });
    }
}

/// What a `for` loop's variable is known to hold after the loop's list expands to `words`:
/// one literal word, or one of a glob's matches; anything else is not known.
pub(crate) fn loop_value(words: &[Word]) -> Option<Value> {
    match words {
        [w] if !w.tilde => match (w.fixed(), &w.value) {
            (Some(v), _) => Some(Value::Scalar(v.to_owned())),
            (None, Some(_)) => Some(Value::OneOf(w.clone())),
            (None, None) => None,
        },
        _ => None,
    }
}

/// The item of a `for` loop's variable `name`, in the loop written `text`.
pub(crate) fn loop_var(name: String, text: &str, value: Option<Value>) -> Item {
    Item::LoopVar(Assignment {
        name,
        text: text.chars().take(60).collect(),
        value,
    })
}

/// Whether tree-sitter-bash has hung the redirections of a statement with this body on a
/// whole list or pipeline (see `Walker::redirected_statement`).
fn hangs_redirects(body: Node) -> bool {
    matches!(kind(&body), "list" | "pipeline" | "negated_command")
}

/// The last part of a list or pipeline, the command Bash gives a redirection written after it:
/// its last named child that is not a comment.
fn last_part(n: Node) -> Option<Node> {
    let mut cursor = n.walk();
    let mut last = None;
    for child in n.named_children(&mut cursor) {
        if kind(&child) != "comment" {
            last = Some(child);
        }
    }
    last
}

/// The redirected statement whose redirections Bash gives to `n`: its parent when `n` is the
/// statement's body, or the statement whose list or pipeline body ends in `n` (see
/// `Walker::redirected_statement`).
fn redirected_by(n: Node) -> Option<Node> {
    let mut child = n;
    let mut parent = n.parent()?;
    loop {
        if kind(&parent) == "redirected_statement" {
            return (parent.child_by_field_name("body") == Some(child)).then_some(parent);
        }
        if !hangs_redirects(parent) || last_part(parent) != Some(child) {
            return None;
        }
        child = parent;
        parent = parent.parent()?;
    }
}

/// The statement whose redirections tree-sitter-bash hung on a list or pipeline that ends in
/// `n`, when `n` is the command Bash gives them to (not a list or pipeline itself).
fn hung_on(n: Node) -> Option<Node> {
    if hangs_redirects(n) {
        return None;
    }
    redirected_by(n).filter(|statement| {
        statement
            .child_by_field_name("body")
            .is_some_and(hangs_redirects)
    })
}

/// Where the `$(` whose body starts at `start` closes: the first `)` before which the body
/// parses cleanly (so `$(case a in a) x;; esac)` closes after `esac`), else where the
/// parentheses balance. `None` when nothing closes it.
fn substitution_end(text: &str, start: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 1;
    let mut balanced = None;
    let mut candidates = Vec::new();
    for (j, &c) in b.iter().enumerate().skip(start) {
        match c {
            b'(' => depth += 1,
            b')' => {
                candidates.push(j);
                depth -= 1;
                if depth == 0 && balanced.is_none() {
                    balanced = Some(j);
                }
            }
            _ => {}
        }
    }
    let parses = |end: usize| {
        parse_tree(&text[start..end]).is_some_and(|tree| !tree.root_node().has_error())
    };
    candidates
        .into_iter()
        .take(16)
        .find(|&end| parses(end))
        .or(balanced)
}

/// A newline not removed by a backslash before it.
fn unescaped_newline(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        c == b'\n' && {
            let backslashes = b[..i].iter().rev().take_while(|&&c| c == b'\\').count();
            backslashes % 2 == 0
        }
    })
}

/// Where the shell word starting at `start` ends, quotes and backslashes considered.
fn word_end(src: &str, start: usize) -> usize {
    let b = src.as_bytes();
    let mut i = start;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(b'"') if c == b'\\' => i += 1,
            Some(_) => {}
            None => match c {
                b'\\' => i += 1,
                b'\'' | b'"' => quote = Some(c),
                c if c.is_ascii_whitespace() || b";|&<>()".contains(&c) => return i,
                _ => {}
            },
        }
        i += 1;
    }
    b.len()
}

fn has_non_numeric(n: Node, src: &str, depth: usize) -> bool {
    if depth > MAX_TREE_DEPTH || tollgate_base::stack_is_low() {
        return true;
    }
    match kind(&n) {
        "number" if n.named_child_count() == 0 => false,
        "binary_expression"
        | "unary_expression"
        | "ternary_expression"
        | "postfix_expression"
        | "parenthesized_expression"
        | "arithmetic_expansion"
        | "compound_statement"
        | "c_style_for_statement" => {
            let mut cursor = n.walk();
            let kids: Vec<Node> = n.named_children(&mut cursor).collect();
            kids.into_iter().any(|k| has_non_numeric(k, src, depth + 1))
        }
        "test_operator" | "comment" => false,
        // `$?`, `$#`, `$$`, `$!` are numbers Bash itself sets.
        "simple_expansion" => !matches!(
            n.named_child(0).map(|c| (kind(&c), &src[c.byte_range()])),
            Some(("special_variable_name", "?" | "#" | "$" | "!"))
        ),
        // `${#x}` is a length; a subscript inside is checked where it stands.
        "expansion" => n.child(1).is_none_or(|c| kind(&c) != "#"),
        _ => n.is_named(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `unsetenv` is a program to Bash: a command, which rules naming it reach.
    #[test]
    fn unsetenv_is_a_command_not_unset() {
        for script in ["unsetenv -f ONE", "ls | unsetenv x", "unsetenv"] {
            let items = items(script);
            let named = items.iter().any(|item| {
                matches!(item, Item::Command(c)
                    if c.words.first().and_then(|w| w.value.as_deref()) == Some("unsetenv"))
            });
            assert!(named, "{script}: {items:?}");
            assert!(
                !items.iter().any(|i| matches!(i, Item::Unset { .. })),
                "{script}"
            );
        }
    }

    #[test]
    fn code_points_the_scanner_cannot_take_are_refused_before_parsing() {
        // Each of these can crash the process inside tree-sitter-bash's scanner (the proptest
        // of arbitrary text found it under load); now they never reach it.
        for script in ["echo ${Ā}", "{ǿ", "ｒｍ -rf /", "echo ✓ done", "x=${a:-😀}"] {
            let found = items(script);
            assert!(
                matches!(found.as_slice(), [Item::Problem(reason)] if reason.contains("beyond Latin-1")),
                "{script}: {found:?}"
            );
        }
        // Latin-1 stays analysable.
        let latin = items("echo 'héllo wörld'");
        assert!(
            !latin.iter().any(|item| matches!(item, Item::Problem(_))),
            "{latin:?}"
        );
    }

    /// Bash's pipeline binds tighter than `&&` and `||` on both sides of it, whichever way
    /// tree-sitter-bash nests them: only the commands joined by `|` run in subshells.
    #[test]
    fn only_piped_commands_are_subshells_on_either_side_of_a_list() {
        let piped = |script: &str| -> Vec<(String, bool)> {
            items(script)
                .into_iter()
                .filter_map(|item| match item {
                    Item::Command(c) => Some((c.text.to_string(), c.subshell)),
                    _ => None,
                })
                .collect()
        };
        let owned = |list: &[(&str, bool)]| -> Vec<(String, bool)> {
            list.iter().map(|(t, s)| (t.to_string(), *s)).collect()
        };
        assert_eq!(
            piped("cd src && ls | head"),
            owned(&[("cd src", false), ("ls", true), ("head", true)])
        );
        assert_eq!(
            piped("a && b || c | d"),
            owned(&[("a", false), ("b", false), ("c", true), ("d", true)])
        );
        assert_eq!(
            piped("a | b && cd x"),
            owned(&[("a", true), ("b", true), ("cd x", false)])
        );
        assert_eq!(
            piped("a && b | c && d"),
            owned(&[("a", false), ("b", true), ("c", true), ("d", false)])
        );
    }
}
