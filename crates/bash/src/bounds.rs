//! The analyser's bounds on work and depth: how deep a script may nest, how much hidden script
//! one call may make it read. Every recursive walk of the analyser is held to one of these,
//! and each ends in a refusal with a reason (deny, in every mode: what lies past a bound is
//! not analysed, so a deny rule could not reach it).

/// Brackets (`(`, `{`, `[`) open at once anywhere in a script, counted before it is parsed:
/// every construct the parse or the brace expansion nests (substitutions, subshells,
/// groups, arithmetic, parameter expansions, subscripts, brace lists) opens one, so a script
/// past this is refused before any recursive walk sees it.
pub(crate) const MAX_BRACKET_DEPTH: usize = 64;

/// Syntax-tree levels the walk of a parse descends (nesting without brackets: `if` in `if`,
/// `!` on `!`, `&&` chains).
pub(crate) const MAX_TREE_DEPTH: usize = 200;

/// Scripts inside scripts (`sh -c 'sh -c …'`, a hidden substitution, a subscript's code).
pub(crate) const MAX_NESTING: usize = 4;

/// Bytes of script one call's analysis reads in all, its hidden scripts included: nested
/// substitutions are read once per level that holds them.
pub(crate) const MAX_ANALYSED_BYTES: usize = 1 << 20;

/// The refusal for a script whose brackets nest deeper than [`MAX_BRACKET_DEPTH`], if so.
/// Quotes are not looked at: a bracket inside a string counts too, which can only refuse
/// more.
pub(crate) fn bracket_depth_refusal(script: &str) -> Option<String> {
    let mut depth = 0usize;
    for b in script.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                if depth > MAX_BRACKET_DEPTH {
                    return Some(format!(
                        "the command nests brackets more than {MAX_BRACKET_DEPTH} deep; deeper scripts are not analysed"
                    ));
                }
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::{BashEnv, BashRules, BashVerdict, CommandPattern, evaluate};

    /// A stack smaller than any thread tollgate decides on (tokio's workers have 2 MiB).
    const SMALL_STACK: usize = 256 * 1024;

    fn verdict_on_a_small_stack(script: String) -> BashVerdict {
        std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn(move || {
                let rules = BashRules {
                    deny: vec![(CommandPattern::parse("rm:*").unwrap(), 1)],
                    ..BashRules::default()
                };
                let roots = [PathBuf::from("/ws")];
                let env = BashEnv {
                    cwd: Path::new("/ws"),
                    workspace_roots: &roots,
                    home: Some(Path::new("/home/u")),
                    resolve: &tollgate_base::resolve_without_disk,
                    list_dir: &|_| Some(vec!["a".into(), "ab".into(), "b".into()]),
                    links_below: &|_| Ok(Vec::new()),
                };
                evaluate(&script, &rules, &env).verdict
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// `open` × n, the payload, `close` × n.
    fn nested(open: &str, payload: &str, close: &str, n: usize) -> String {
        format!("{}{payload}{}", open.repeat(n), close.repeat(n))
    }

    /// Every nesting construct, shallow and as deep as a command may be long, on a small
    /// stack: the analysis ends, and where the payload runs it is denied at every depth (by
    /// the rule, or by the bound); past the bounds, every construct is denied.
    #[test]
    fn deep_nesting_of_every_construct_ends_in_a_deny_on_a_small_stack() {
        let payload = "rm -rf x";
        // (open, close, whether the payload runs, what)
        let constructs: &[(&str, &str, bool, &str)] = &[
            ("echo {a,", "}", false, "brace list"),
            ("$(", ")", true, "command substitution"),
            ("echo $(", ")", true, "substitution in an argument"),
            ("( ", " )", true, "subshell"),
            ("echo $((", "))", false, "arithmetic"),
            ("echo $[", "]", false, "old arithmetic"),
            ("echo ${x:-", "}", false, "parameter expansion"),
            (
                "echo ${x:-$(",
                ")}",
                true,
                "substitution in a parameter expansion",
            ),
            ("echo \"$(", ")\"", true, "quoted substitution"),
            ("cat <(", ")", true, "process substitution"),
            ("{ ", "; }", true, "group"),
            ("if true; then ", "; fi", true, "if"),
            ("while true; do ", "; done", true, "while"),
            ("case x in x) ", ";; esac", true, "case"),
            ("f() { ", "; }", false, "function"),
            ("echo a[", "]", false, "subscript"),
            ("x=$(", ")", true, "assignment"),
            ("[[ ( x ) ]] && ", "", true, "test and-list"),
            ("! ", "", true, "negation"),
            ("true && ", "", true, "and-list"),
            ("true || ", "", true, "or-list"),
            ("true | ", "", true, "pipeline"),
            ("true; ", "", true, "sequence"),
            ("nice ", "", true, "wrapper"),
            ("env ", "", true, "env wrapper"),
            ("timeout 1 ", "", true, "timeout wrapper"),
            ("command ", "", true, "command builtin"),
            ("echo `", "`", true, "backquote"),
            (
                "cat <<E\n$(",
                ")\nE\n",
                true,
                "substitution in a here-document",
            ),
        ];
        // Repeated rather than nested: walked along, never one frame each.
        for (head, unit, what) in [
            ("echo ", "{a,b}", "brace lists in a row"),
            ("echo ", "x{a}", "literal braces in a row"),
            ("ls ", "*a", "glob stars"),
            ("ls ", "a*/", "glob folders"),
        ] {
            for n in [3, 30_000 / unit.len()] {
                let script = format!("{head}{}; {payload}", unit.repeat(n));
                let verdict = verdict_on_a_small_stack(script);
                assert!(
                    matches!(verdict, BashVerdict::Deny { .. }),
                    "{what} × {n}: {verdict:?}"
                );
            }
        }
        for (open, close, runs, what) in constructs {
            let deepest = 60_000 / (open.len() + close.len());
            for n in [1, 3, 30, 300, 3000, deepest] {
                if n > deepest {
                    continue;
                }
                let script = nested(open, payload, close, n);
                let verdict = verdict_on_a_small_stack(script);
                if *runs || n == deepest {
                    assert!(
                        matches!(verdict, BashVerdict::Deny { .. }),
                        "{what} × {n}: {verdict:?}"
                    );
                }
            }
        }
    }
}
