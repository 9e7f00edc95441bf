//! Owns the lookup of a syntax node's kind name by its numeric id.
//!
//! `Node::kind()` runs `strlen` and a UTF-8 check on every call, and the walk asks for a
//! node's kind several times; the language's names never change, so they are read once into
//! an immutable table indexed by `Node::kind_id()`.

use std::sync::OnceLock;

use tree_sitter::Node;

/// Every kind name of tree-sitter-bash, indexed by its id; read once, never changed.
fn names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
        (0..language.node_kind_count())
            .map(|id| {
                u16::try_from(id)
                    .ok()
                    .and_then(|id| language.node_kind_for_id(id))
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    })
}

/// The node's kind, as `Node::kind()` would say it.
pub(crate) fn kind<'a>(n: &Node<'a>) -> &'a str {
    // ERROR's id (u16::MAX) lies outside the table, and an empty name would be a wrong
    // answer: both are asked of the node itself.
    match names().get(usize::from(n.kind_id())) {
        Some(name) if !name.is_empty() => name.as_str(),
        _ => n.kind(),
    }
}

#[cfg(test)]
mod tests {
    use tree_sitter::Parser;

    use super::kind;

    #[test]
    fn every_node_of_a_varied_script_has_the_kind_tree_sitter_names() {
        let script = "x=1; for f in *.rs; do echo \"${f%.rs}\" | grep -q a && cat <<-EOF >> out\n\tbody $(ls)\n\tEOF\ndone; [[ -n $x ]] || (( x += 2 )); case $x in a) :;; esac; f() { declare -a y=(1 2); }; `echo` ) fi";
        let mut parser = Parser::new();
        assert!(
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .is_ok()
        );
        let Some(tree) = parser.parse(script, None) else {
            panic!("no tree");
        };
        let mut stack = vec![tree.root_node()];
        let mut seen_error = false;
        let mut count = 0;
        while let Some(n) = stack.pop() {
            assert_eq!(kind(&n), n.kind());
            seen_error |= n.kind() == "ERROR";
            count += 1;
            let mut cursor = n.walk();
            stack.extend(n.children(&mut cursor));
        }
        assert!(seen_error, "the script should hold an ERROR node");
        assert!(count > 100, "only {count} nodes");
    }
}
