//! A fetched HTML page as Markdown, in bounded time, depth and memory whatever the page holds.
//! It never hands input-controlled depth to recursion: the page is first re-tokenised into
//! HTML whose elements nest at most [`MAX_OPEN_ELEMENTS`] deep (and carry no huge attribute),
//! the parsed tree is cut at [`MAX_TREE_DEPTH`], and only then does `htmd` (which recurses)
//! convert it, on a thread of its own with a large stack.
//!
//! Why both cuts: html5ever's tree builder checks scopes by walking its stack of open
//! elements, so 5,000 nested `<div>` cost a quarter second and 5,000 reopened formatting
//! elements sixteen (the tree builder is quadratic or worse in depth); and the tree can still
//! come out deeper than the tags that made it (implied table parts, reconstructed formatting
//! elements), so the tree itself is bounded before anything walks it recursively.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use markup5ever_rcdom::{Handle, Node, NodeData};

/// Elements open at once in the HTML handed to the parser; deeper tags are dropped (their
/// text is kept).
const MAX_OPEN_ELEMENTS: usize = 128;
/// Depth of the parsed tree handed to the converter; below it an element keeps only its text.
const MAX_TREE_DEPTH: usize = 256;
/// Bytes of re-tokenised HTML kept; the rest of the page is cut.
const MAX_FLAT_BYTES: usize = 2 * 1024 * 1024;
/// An attribute value longer than this is dropped (a data: image, a tracking blob).
const MAX_ATTRIBUTE_BYTES: usize = 2048;
/// The converter's stack: the tree depth above needs a small part of it.
const CONVERTER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Elements whose content is not the page's text; they would only cost tokens.
const SKIPPED: [&str; 10] = [
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "noembed",
];

const VOID: [&str; 14] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("cannot start the HTML converter: {0}")]
    Thread(String),
    #[error("the HTML converter failed on this page")]
    Panicked,
}

/// The Markdown of `html`, and whether the page was cut to fit the bounds.
pub async fn html_to_markdown(html: String) -> Result<(String, bool), ConvertError> {
    let (send, receive) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("webfetch-markdown".into())
        .stack_size(CONVERTER_STACK_BYTES)
        .spawn(move || {
            // The receiver is gone only when the fetch was interrupted; nobody wants the text.
            let _ = send.send(convert(&html));
        })
        .map_err(|err| ConvertError::Thread(err.to_string()))?;
    // A dropped sender means the thread panicked (the converter is third-party code).
    receive.await.map_err(|_| ConvertError::Panicked)
}

/// Runs on the converter's thread: flatten, parse, cut, convert.
fn convert(html: &str) -> (String, bool) {
    let (flat, cut) = flatten(html);
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    let tree = match converter.html_to_tree(&flat) {
        Ok(tree) => tree,
        // html5ever's parser does not fail on a string; should it, the text is still the text.
        Err(_) => return (flat, cut),
    };
    let pruned = prune(&tree, MAX_TREE_DEPTH);
    (converter.tree_to_markdown(&tree), cut || pruned)
}

/// Re-tokenises `html` into HTML with at most [`MAX_OPEN_ELEMENTS`] open elements, every
/// element closed explicitly, skipped elements, comments and oversized attributes left out.
/// Returns it and whether anything of the page's text or structure was cut.
pub fn flatten(html: &str) -> (String, bool) {
    let tokenizer = Tokenizer::new(Flattener::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    // The sink never asks to stop for a script, so one feed reads everything.
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let sink = &tokenizer.sink;
    let mut out = sink.out.take();
    for open in sink.stack.take().iter().rev() {
        if !open.skipped {
            close_tag(&mut out, &open.name);
        }
    }
    (out, sink.cut.get())
}

struct Open {
    name: String,
    skipped: bool,
}

#[derive(Default)]
struct Flattener {
    out: RefCell<String>,
    stack: RefCell<Vec<Open>>,
    /// Skipped elements among the open ones: while any is, nothing is written.
    skipping: Cell<usize>,
    /// Inside the raw text of a script or style whose tag was dropped for depth.
    dropped_raw: Cell<bool>,
    cut: Cell<bool>,
}

impl Flattener {
    fn writing(&self) -> bool {
        self.skipping.get() == 0 && !self.dropped_raw.get()
    }

    /// Whether `more` bytes still fit; past the cap the rest of the page is cut.
    fn room(&self, more: usize) -> bool {
        let fits = self.out.borrow().len() + more <= MAX_FLAT_BYTES;
        if !fits {
            self.cut.set(true);
        }
        fits
    }

    fn start(&self, tag: &Tag) -> TokenSinkResult<()> {
        let name = tag.name.to_string();
        let raw = raw_kind(&name);
        let is_void = VOID.contains(&name.as_str()) || (tag.self_closing && raw.is_none());
        if is_void {
            if self.writing() && self.room(name.len() + 2) {
                open_tag(&mut self.out.borrow_mut(), tag, &self.cut);
                if !VOID.contains(&name.as_str()) {
                    close_tag(&mut self.out.borrow_mut(), &name);
                }
            }
            return TokenSinkResult::Continue;
        }
        if self.stack.borrow().len() >= MAX_OPEN_ELEMENTS {
            self.cut.set(true);
            if SKIPPED.contains(&name.as_str()) && raw.is_some() {
                self.dropped_raw.set(true);
            }
            return raw.unwrap_or(TokenSinkResult::Continue);
        }
        let skipped = SKIPPED.contains(&name.as_str());
        if skipped {
            self.skipping.set(self.skipping.get() + 1);
        } else if self.writing() && self.room(name.len() + 2) {
            open_tag(&mut self.out.borrow_mut(), tag, &self.cut);
        }
        self.stack.borrow_mut().push(Open { name, skipped });
        raw.unwrap_or(TokenSinkResult::Continue)
    }

    /// Closes `name` and every element opened inside it; an end tag that closes nothing
    /// open is dropped (the parser would mostly ignore it too).
    fn end(&self, name: &str) {
        self.dropped_raw.set(false);
        let mut stack = self.stack.borrow_mut();
        let Some(at) = stack.iter().rposition(|open| open.name == name) else {
            return;
        };
        for open in stack.drain(at..).rev() {
            if open.skipped {
                self.skipping.set(self.skipping.get() - 1);
            } else if self.skipping.get() == 0 {
                close_tag(&mut self.out.borrow_mut(), &open.name);
            }
        }
    }

    fn text(&self, text: &str) {
        if !self.writing() || !self.room(text.len()) {
            return;
        }
        let mut out = self.out.borrow_mut();
        for c in text.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                c => out.push(c),
            }
        }
    }
}

impl TokenSink for Flattener {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => return self.start(&tag),
                TagKind::EndTag => self.end(&tag.name),
            },
            Token::CharacterTokens(text) => self.text(&text),
            Token::DoctypeToken(_)
            | Token::CommentToken(_)
            | Token::NullCharacterToken
            | Token::EOFToken
            | Token::ParseError(_) => {}
        }
        TokenSinkResult::Continue
    }
}

/// How the tokenizer must read an element's content, as the tree builder would tell it.
fn raw_kind(name: &str) -> Option<TokenSinkResult<()>> {
    match name {
        "script" => Some(TokenSinkResult::RawData(RawKind::ScriptData)),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
            Some(TokenSinkResult::RawData(RawKind::Rawtext))
        }
        "title" | "textarea" => Some(TokenSinkResult::RawData(RawKind::Rcdata)),
        "plaintext" => Some(TokenSinkResult::Plaintext),
        _ => None,
    }
}

fn open_tag(out: &mut String, tag: &Tag, cut: &Cell<bool>) {
    out.push('<');
    out.push_str(&tag.name);
    for attr in &tag.attrs {
        let name = &attr.name.local;
        let plain_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'));
        if !plain_name || attr.value.len() > MAX_ATTRIBUTE_BYTES {
            cut.set(cut.get() || plain_name);
            continue;
        }
        out.push(' ');
        out.push_str(name);
        out.push_str("=\"");
        for c in attr.value.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '"' => out.push_str("&quot;"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('>');
}

fn close_tag(out: &mut String, name: &str) {
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

/// Cuts the tree under `root` at `max_depth`: an element there keeps only its text, as one
/// text node. Iterative, so the depth it meets costs no stack. Returns whether it cut.
fn prune(root: &Handle, max_depth: usize) -> bool {
    let mut cut = false;
    let mut pending: Vec<(Handle, usize)> = vec![(root.clone(), 0)];
    while let Some((node, depth)) = pending.pop() {
        if depth >= max_depth && !node.children.borrow().is_empty() {
            let text = Node::new(NodeData::Text {
                contents: RefCell::new(StrTendril::from(text_of(&node))),
            });
            text.parent.set(Some(Rc::downgrade(&node)));
            // The old subtree is dropped here; markup5ever_rcdom drops nodes iteratively.
            *node.children.borrow_mut() = vec![text];
            cut = true;
            continue;
        }
        for child in node.children.borrow().iter() {
            pending.push((child.clone(), depth + 1));
        }
    }
    cut
}

/// The text under `node`, in document order, without recursion.
fn text_of(node: &Handle) -> String {
    let mut text = String::new();
    let mut pending: Vec<Handle> = node.children.borrow().iter().rev().cloned().collect();
    while let Some(next) = pending.pop() {
        if let NodeData::Text { contents } = &next.data {
            text.push_str(&contents.borrow());
        }
        pending.extend(next.children.borrow().iter().rev().cloned());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, n: usize) -> String {
        let mut page = String::with_capacity(open.len() * n + 16);
        for _ in 0..n {
            page.push_str(open);
        }
        page.push_str("deep text");
        page
    }

    #[test]
    fn flattening_bounds_the_open_elements_and_keeps_the_text() {
        let (flat, cut) = flatten(&nested("<div>", 100_000));
        assert!(cut);
        assert_eq!(flat.matches("<div>").count(), MAX_OPEN_ELEMENTS);
        assert_eq!(flat.matches("</div>").count(), MAX_OPEN_ELEMENTS);
        assert!(flat.contains("deep text"));
        let (flat, cut) = flatten(
            "<p title=\"a&quot;b\" x\"y=1>x &lt; y<br/>z</p><!-- c --><script>if (a < b) {}</script>",
        );
        assert!(!cut);
        assert_eq!(flat, "<p title=\"a&quot;b\">x &lt; y<br>z</p>");
    }

    #[test]
    fn huge_attributes_are_dropped() {
        let page = format!(
            "<a href=\"https://x.example/\" data-x=\"{}\">link</a>",
            "y".repeat(1 << 20)
        );
        let (flat, cut) = flatten(&page);
        assert!(cut);
        assert_eq!(flat, "<a href=\"https://x.example/\">link</a>");
    }

    #[test]
    fn pruning_keeps_the_text_below_the_cut() {
        let tree = htmd::HtmlToMarkdown::new()
            .html_to_tree(&nested("<table><tr><td>", 200))
            .unwrap();
        assert!(prune(&tree, 40));
        let mut depth = 0;
        let mut node = tree.clone();
        loop {
            let last = node.children.borrow().last().cloned();
            match last {
                Some(child) => {
                    depth += 1;
                    node = child;
                }
                None => break,
            }
        }
        assert!(depth <= 41, "{depth}");
        assert_eq!(text_of(&tree), "deep text");
    }

    #[tokio::test]
    async fn hostile_pages_end_as_markdown() {
        // Each well past the bounds; larger pages only cost the tokenizer's linear time.
        let pages = [
            nested("<div>", 5_000),
            nested("<div>", 100_000),
            nested("<div><b id=x>", 5_000),
            (0..5_000)
                .map(|i| format!("<div><b id={i}></div>"))
                .collect::<String>()
                + "text",
            nested("<table><tr><td>", 5_000),
            nested("<ul><li>", 5_000),
            nested("<blockquote>", 5_000),
            nested("<span>", 20_000),
            nested("<p><i><b><u><s>", 5_000),
        ];
        for page in pages {
            let (markdown, _) = html_to_markdown(page.clone()).await.unwrap();
            assert!(markdown.contains("text"), "{}", &page[..40]);
        }
        let (markdown, _) = html_to_markdown(nested("<svg><g>", 5_000)).await.unwrap();
        assert_eq!(markdown, "");
        let (markdown, cut) = html_to_markdown(
            "<h1>Title</h1><p>Some <b>bold</b> words.</p><script>x()</script>".into(),
        )
        .await
        .unwrap();
        assert_eq!(markdown, "# Title\n\nSome **bold** words.");
        assert!(!cut);
    }
}
