//! Parses a script with tree-sitter-bash and flattens it into items in execution-ish order.
//! Node kinds outside the allowlist, ERROR and MISSING become problems; commands are still extracted.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

use super::word::{Word, resolve};

/// Deeper syntax trees than this are not walked (the rest becomes a problem, hence ask).
const MAX_TREE_DEPTH: usize = 200;

/// One simple command as written: `NAME=v cmd arg…`.
#[derive(Debug, Clone)]
pub(crate) struct SimpleCommand {
    pub text: String,
    pub assignments: Vec<Assignment>,
    pub words: Vec<Word>,
    /// Inside a loop or function body: it may run many times, in any working directory.
    pub repeated: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Assignment {
    pub name: String,
    pub text: String,
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
    /// `[ … ]`, `[[ … ]]`.
    Test {
        text: String,
    },
    Function {
        name: String,
    },
    /// A command substitution tree-sitter-bash left as text (backticks inside `${…}` or a
    /// here-document): analysed as a script of its own.
    Hidden(String),
    /// Something that makes the script unprovable, with a reason for the model.
    Problem(String),
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

#[cfg(test)]
thread_local! {
    static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many scripts this thread has parsed, for tests that count analyses per call.
#[cfg(test)]
pub(crate) fn parses_on_this_thread() -> usize {
    PARSES.with(std::cell::Cell::get)
}

/// Parses `script` and returns its items; never fails (problems are items).
pub(crate) fn items(script: &str) -> Vec<Item> {
    #[cfg(test)]
    PARSES.with(|count| count.set(count.get() + 1));
    let mut items = Vec::new();
    if let Some(c) = unsafe_for_the_scanner(script) {
        items.push(Item::Problem(format!(
            "the command contains {c:?} (U+{:04X}); characters beyond Latin-1 are not analysed, since the Bash parser cannot take them safely",
            u32::from(c)
        )));
        return items;
    }
    let text = prepare(script, &mut items);
    let Some(tree) = parse_tree(&text) else {
        items.push(Item::Problem("the script could not be parsed".to_owned()));
        return items;
    };
    let mut walker = Walker { src: &text, items };
    walker.node(tree.root_node(), 0, Ctx::default());
    walker.items
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
    /// A `variable_assignment` here belongs to a command or declaration, not a bare assignment.
    owned_assignment: bool,
    /// Inside a here-document whose delimiter is quoted: its body is not expanded.
    quoted_heredoc: bool,
}

struct Walker<'s> {
    src: &'s str,
    items: Vec<Item>,
}

impl<'s> Walker<'s> {
    fn text(&self, n: Node) -> String {
        self.src[n.byte_range()].to_owned()
    }

    fn problem(&mut self, reason: String) {
        self.items.push(Item::Problem(reason));
    }

    fn children(&mut self, n: Node, depth: usize, ctx: Ctx) {
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        for child in kids {
            self.node(child, depth + 1, ctx);
        }
    }

    fn node(&mut self, n: Node, depth: usize, ctx: Ctx) {
        if depth > MAX_TREE_DEPTH {
            self.problem("the script is nested too deeply to analyse".to_owned());
            return;
        }
        if n.is_missing() {
            let reason = format!("the script is incomplete (missing `{}`)", n.kind());
            self.problem(reason);
            return;
        }
        if n.is_error() {
            let snippet: String = self.text(n).chars().take(60).collect();
            self.problem(format!("the script does not parse near `{snippet}`"));
            return self.children(n, depth, Ctx::default());
        }
        let inner = Ctx {
            owned_assignment: false,
            ..ctx
        };
        match n.kind() {
            "heredoc_redirect" => {
                let mut cursor = n.walk();
                let kids: Vec<Node> = n.named_children(&mut cursor).collect();
                let quoted = kids
                    .iter()
                    .find(|c| c.kind() == "heredoc_start")
                    .is_some_and(|c| self.src[c.byte_range()].contains(['\'', '"', '\\']));
                for child in kids {
                    // Only the body is data; a pipeline or redirect after `<<'EOF'` is code.
                    let body_ctx = Ctx {
                        quoted_heredoc: quoted && child.kind() == "heredoc_body",
                        ..inner
                    };
                    self.node(child, depth + 1, body_ctx);
                }
            }
            "heredoc_body" => {
                if !ctx.quoted_heredoc {
                    self.heredoc_gaps(n);
                }
                self.children(n, depth, inner);
            }
            "word" | "string_content" | "heredoc_content" | "regex" => {
                if !ctx.quoted_heredoc {
                    let text = &self.src[n.byte_range()];
                    self.hidden(text);
                }
            }
            "program"
            | "list"
            | "pipeline"
            | "subshell"
            | "do_group"
            | "if_statement"
            | "elif_clause"
            | "else_clause"
            | "case_statement"
            | "case_item"
            | "negated_command"
            | "herestring_redirect"
            | "concatenation"
            | "string"
            | "array"
            | "number"
            | "command_name"
            | "translated_string"
            | "expansion"
            | "command_substitution"
            | "process_substitution"
            | "variable_assignments" => self.children(n, depth, inner),
            "comment"
            | "heredoc_start"
            | "heredoc_end"
            | "file_descriptor"
            | "variable_name"
            | "special_variable_name"
            | "raw_string"
            | "ansi_c_string"
            | "extglob_pattern"
            | "test_operator"
            | "brace_expression"
            | "simple_expansion" => {}
            "while_statement" | "for_statement" => self.children(
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
                if n.child(0).is_some_and(|c| c.kind() == "((") {
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
                if let Some(index) = n.child_by_field_name("index") {
                    self.arithmetic(index);
                }
                self.children(n, depth, inner);
            }
            "function_definition" => {
                if let Some(name) = n.child_by_field_name("name") {
                    let name = self.text(name);
                    self.items.push(Item::Function { name });
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
            "redirected_statement" => {
                let mut cursor = n.walk();
                let kids: Vec<Node> = n.named_children(&mut cursor).collect();
                let body = n.child_by_field_name("body");
                for child in kids.iter().filter(|k| Some(**k) != body) {
                    self.node(*child, depth + 1, inner);
                }
                if let Some(body) = body {
                    self.node(body, depth + 1, inner);
                }
            }
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
                if !ctx.owned_assignment {
                    let assignment = self.assignment(n);
                    self.items.push(Item::Assign(assignment));
                }
                self.children(n, depth, inner);
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

    /// The text of a here-document body that lies between its parsed children.
    fn heredoc_gaps(&mut self, n: Node) {
        let mut pos = n.start_byte();
        let mut cursor = n.walk();
        let spans: Vec<(usize, usize)> = n
            .named_children(&mut cursor)
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
                        self.problem("an unterminated backquote".to_owned());
                        return;
                    }
                    self.items.push(Item::Hidden(text[start..j].to_owned()));
                    i = j + 1;
                }
                b'$' if b.get(i + 1) == Some(&b'(') && b.get(i + 2) != Some(&b'(') => {
                    let start = i + 2;
                    let mut depth = 1;
                    let mut j = start;
                    while j < b.len() && depth > 0 {
                        match b[j] {
                            b'(' => depth += 1,
                            b')' => depth -= 1,
                            _ => {}
                        }
                        j += 1;
                    }
                    if depth > 0 {
                        self.problem("an unterminated `$(`".to_owned());
                        return;
                    }
                    self.items.push(Item::Hidden(text[start..j - 1].to_owned()));
                    i = j;
                }
                b'$' if b.get(i + 1) == Some(&b'(') => {
                    self.problem("arithmetic that tree-sitter-bash did not parse".to_owned());
                    return;
                }
                _ => i += 1,
            }
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
        }
    }

    /// Bash evaluates variables met in arithmetic recursively, so `x='a[$(cmd)]'; echo $((x))`
    /// runs `cmd`: arithmetic is only proven safe when it holds numbers alone.
    fn arithmetic(&mut self, n: Node) {
        if has_non_numeric(n, 0) {
            let snippet: String = self.text(n).chars().take(60).collect();
            self.problem(format!(
                "arithmetic on variables (`{snippet}`) can run commands hidden in their values"
            ));
        }
    }

    fn test(&mut self, n: Node) {
        let double = n.child(0).is_some_and(|c| c.kind() == "[[");
        if double {
            let mut stack = vec![n];
            while let Some(node) = stack.pop() {
                let op = node
                    .child_by_field_name("operator")
                    .map(|o| &self.src[o.byte_range()]);
                if node.kind() == "binary_expression"
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
                target = Some(if child.kind() == "process_substitution" {
                    None
                } else {
                    Some(resolve(child, self.src))
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
        let mut cursor = n.walk();
        let kids: Vec<(Option<&str>, Node)> = n
            .children(&mut cursor)
            .enumerate()
            .map(|(i, c)| (n.field_name_for_child(i as u32), c))
            .collect();
        for (field, child) in &kids {
            match (*field, child.kind()) {
                (Some("name") | Some("argument"), _) => {
                    words.push((child.start_byte(), resolve(*child, self.src)));
                }
                (Some("redirect"), _) => self.extra_destinations(*child, &mut words),
                (None, "variable_assignment") => assignments.push(self.assignment(*child)),
                (None, "subshell") => {
                    self.problem("a subshell inside a command's words is not supported".into());
                }
                _ => {}
            }
        }
        if let Some(parent) = n.parent()
            && parent.kind() == "redirected_statement"
            && parent.child_by_field_name("body") == Some(n)
        {
            let mut cursor = parent.walk();
            let redirects: Vec<Node> = parent
                .children_by_field_name("redirect", &mut cursor)
                .collect();
            for r in redirects {
                self.extra_destinations(r, &mut words);
            }
        }
        words.sort_by_key(|(pos, _)| *pos);
        for (_, child) in &kids {
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
            words: words.into_iter().map(|(_, w)| w).collect(),
            repeated: ctx.repeated,
        }));
    }

    /// tree-sitter-bash hangs words that follow a redirect target (`>out a b`) on the redirect;
    /// for Bash they are arguments of the command.
    fn extra_destinations(&self, redirect: Node, words: &mut Vec<(usize, Word)>) {
        if redirect.kind() != "file_redirect" {
            return;
        }
        let mut cursor = redirect.walk();
        let dests: Vec<Node> = redirect
            .children_by_field_name("destination", &mut cursor)
            .collect();
        for extra in dests.iter().skip(1) {
            words.push((extra.start_byte(), resolve(*extra, self.src)));
        }
    }

    fn declaration(&mut self, n: Node) {
        let keyword = n.child(0).map(|c| self.text(c)).unwrap_or_default();
        let mut flags = Vec::new();
        let mut names = Vec::new();
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        for child in kids {
            match child.kind() {
                "variable_assignment" => names.push(self.assignment(child).name),
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
        let text = self.text(n);
        self.items.push(if n.kind() == "unset_command" {
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

fn has_non_numeric(n: Node, depth: usize) -> bool {
    if depth > MAX_TREE_DEPTH {
        return true;
    }
    match n.kind() {
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
            kids.into_iter().any(|k| has_non_numeric(k, depth + 1))
        }
        "test_operator" | "comment" => false,
        _ => n.is_named(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
