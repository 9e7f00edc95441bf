//! The module graph points one way: no top-level module of the core (`crates/core/src/`, with
//! the command line's `src/cli`) reaches itself through the
//! modules it names (`crate::x` anywhere in its files, tests included), no file reaches itself
//! through the files its paths name, and the edges the design forbids are absent. Read from the
//! source, so a new import that closes a loop fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module → the top-level modules its files name, over the core and the command
/// line (the `tollgate` crate re-exports the core's modules, so `crate::agent` in `cli/` is
/// the core's `agent`).
fn module_graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut graph = Graph::new();
    let entries = [root.join("src"), root.join("crates/core/src")]
        .into_iter()
        .flat_map(|src| std::fs::read_dir(src).unwrap());
    for entry in entries {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if matches!(stem, "lib" | "main") {
            continue;
        }
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else {
            files.push(path.clone());
        }
        let edges = graph.entry(stem.to_string()).or_default();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices("crate::") {
                let name: String = text[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() && name != stem {
                    edges.insert(name);
                }
            }
        }
    }
    graph
}

/// A cycle as the list of modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_reaches_itself() {
    let graph = module_graph();
    assert!(
        graph.contains_key("agent") && graph.contains_key("tools") && graph.contains_key("cli")
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the modules import each other: {}", cycle.join(" → "));
    }
}

#[test]
fn the_forbidden_edges_are_absent() {
    let graph = module_graph();
    // (from, to): the lower layer defines what it needs; the upper one implements it.
    // The gate (the `tollgate-policy` crate) cannot name any of them: its manifest does not
    // list the main crate (see the crate edges below).
    let forbidden = [
        ("report", "agent"),
        ("model", "tools"),
        ("hooks", "tools"),
        ("base", "policy"),
        // Tools sit below the loop: a sub-agent is the loop's to run, and skills name the
        // loop's sub-agents only through the tools' `Delegation`.
        ("tools", "agent"),
        ("tools", "skills"),
        ("skills", "agent"),
    ];
    let present: Vec<_> = forbidden
        .iter()
        .filter(|(from, to)| graph.get(*from).is_some_and(|edges| edges.contains(*to)))
        .collect();
    assert!(present.is_empty(), "forbidden imports: {present:?}");
    // The base layer names nothing of tollgate's.
    assert_eq!(graph.get("base"), Some(&BTreeSet::new()));
}

/// What cargo says each workspace crate depends on, by package name: each dependency with its
/// kind (`None` for a normal one, `Some("dev")`, `Some("build")`).
fn crate_edges() -> BTreeMap<String, BTreeSet<(String, Option<String>)>> {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let edges = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|dep| {
                    (
                        dep["name"].as_str().unwrap().to_string(),
                        dep["kind"].as_str().map(String::from),
                    )
                })
                .collect();
            (package["name"].as_str().unwrap().to_string(), edges)
        })
        .collect()
}

/// Each workspace crate's normal dependencies, by package name.
fn crate_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    crate_edges()
        .into_iter()
        .map(|(name, edges)| {
            let normal = edges
                .into_iter()
                .filter(|(_, kind)| kind.is_none())
                .map(|(dep, _)| dep)
                .collect();
            (name, normal)
        })
        .collect()
}

/// The crate edges: the Bash analyser reaches only the base crate and its parser, the gate
/// only those two and its parsers; no pure crate can depend on the runtime, the HTTP stack,
/// the sandbox or the process runner at compile time, and nothing below the main crate
/// names it.
#[test]
fn the_pure_crates_depend_only_downward_and_on_no_io_stack() {
    let crates = crate_dependencies();
    let of = |name: &str| {
        crates
            .get(name)
            .unwrap_or_else(|| panic!("no crate {name}: {crates:?}"))
    };
    let expected_bash: BTreeSet<String> = [
        "tollgate-base",
        "foldhash",
        "thiserror",
        "tree-sitter",
        "tree-sitter-bash",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(of("tollgate-bash"), &expected_bash);
    let expected_policy: BTreeSet<String> = [
        "tollgate-base",
        "tollgate-bash",
        "annotate-snippets",
        "foldhash",
        "globset",
        "serde",
        "serde-saphyr",
        "serde_json",
        "strsim",
        "thiserror",
        // A logging facade with no output of its own: a path rule that cannot be compiled
        // is found inside a decision and said there.
        "tracing",
        "url",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(of("tollgate-policy"), &expected_policy);
    let io_stack = [
        "tokio",
        "reqwest",
        "rustls",
        "hyper",
        "axum",
        "rmcp",
        "landlock",
        "seccompiler",
        "tracing",
        "tollgate",
    ];
    for pure in ["tollgate-base", "tollgate-bash", "tollgate-policy"] {
        let reached: Vec<&String> = of(pure)
            .iter()
            .filter(|dep| io_stack.contains(&dep.as_str()))
            .filter(|dep| !(pure == "tollgate-policy" && *dep == "tracing"))
            .collect();
        assert!(reached.is_empty(), "{pure} depends on {reached:?}");
    }
    assert!(
        !of("tollgate-base")
            .iter()
            .any(|dep| dep.starts_with("tollgate")),
        "the base crate names another of tollgate's: {:?}",
        of("tollgate-base")
    );
    assert!(!of("tollgate-bash").contains("tollgate-policy"));
    // Enforcement: the process runner, the sandbox and the proxy carry out what the gate
    // decided, so they may read the gate's types but not the loop, the tools or a provider,
    // and nothing pure names them.
    let expected_sandbox: BTreeSet<String> = [
        "tollgate-base",
        "tollgate-policy",
        "bytes",
        "landlock",
        "libc",
        "seccompiler",
        "serde",
        "thiserror",
        "tokio",
        "tracing",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(of("tollgate-sandbox"), &expected_sandbox);
    for pure in ["tollgate-base", "tollgate-bash", "tollgate-policy"] {
        assert!(
            !of(pure).contains("tollgate-sandbox"),
            "{pure} names the sandbox"
        );
    }
    for below in ["tollgate-bash", "tollgate-policy", "tollgate-sandbox"] {
        assert!(of("tollgate-core").contains(below), "the core lost {below}");
    }
    // The command line sits on the core; the core knows nothing of it: not the crate, not
    // what only a command line needs (argument parsing's completions and man page, the log
    // subscriber, the allocator, `anyhow`'s errors for a person).
    assert!(of("tollgate").contains("tollgate-core"));
    let cli_only = [
        "tollgate",
        "anyhow",
        "clap_complete",
        "clap_mangen",
        "tracing-subscriber",
        "libmimalloc-sys",
    ];
    let reached: Vec<&String> = of("tollgate-core")
        .iter()
        .filter(|dep| cli_only.contains(&dep.as_str()))
        .collect();
    assert!(reached.is_empty(), "the core depends on {reached:?}");
}

/// The test-support crate is for tests only: the product's crates reach it as a
/// dev-dependency or not at all (a normal or build edge would put the fakes in the release
/// binary), and it does not name the main crate, whose tests depend on it.
#[test]
fn the_test_support_crate_is_only_a_dev_dependency() {
    let crates = crate_edges();
    let support = "tollgate-test-support";
    assert!(
        crates.contains_key(support),
        "no crate {support}: {crates:?}"
    );
    for product in [
        "tollgate",
        "tollgate-base",
        "tollgate-bash",
        "tollgate-policy",
        "tollgate-sandbox",
    ] {
        let edges = crates
            .get(product)
            .unwrap_or_else(|| panic!("no crate {product}: {crates:?}"));
        let not_dev: Vec<_> = edges
            .iter()
            .filter(|(dep, kind)| dep == support && kind.as_deref() != Some("dev"))
            .collect();
        assert!(not_dev.is_empty(), "{product} depends on {not_dev:?}");
    }
    assert!(
        crates["tollgate"].contains(&(support.to_string(), Some("dev".to_string()))),
        "the main crate's tests no longer use {support}: {:?}",
        crates["tollgate"]
    );
    let named_main: Vec<_> = crates[support]
        .iter()
        .filter(|(dep, _)| dep == "tollgate")
        .collect();
    assert!(named_main.is_empty(), "{support} depends on {named_main:?}");
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    graph.entry("c".into()).or_default().remove("a");
    assert_eq!(find_cycle(&graph), None);
}

/// A source file's module path: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`, `src/lib.rs` is
/// the crate root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
        path.pop();
    }
    path
}

/// The files a file's paths name. A path counts from `crate::`, `super::` or `self::`, in
/// code, `use` trees and macro bodies alike, and names the file of the deepest module it goes
/// through; a parent naming its own children by their bare names is how it declares them,
/// not an import.
struct FileEdges<'m> {
    /// Module path → the file that holds it.
    files: &'m BTreeMap<Vec<String>, String>,
    /// The module the visitor is in: the file's, then any inline `mod` inside it.
    here: Vec<String>,
    named: BTreeSet<String>,
}

impl FileEdges<'_> {
    fn resolve(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut module = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.here.clone(),
            "super" => self.here[..self.here.len().saturating_sub(1)].to_vec(),
            _ => return,
        };
        let mut rest = &segments[1..];
        while rest.first().is_some_and(|s| s == "super") {
            module.pop();
            rest = &rest[1..];
        }
        for segment in rest {
            module.push(segment.clone());
            if !self.files.contains_key(&module) {
                module.pop();
                break;
            }
        }
        // The deepest module that is a file: an inline module lives in its parent's.
        while !self.files.contains_key(&module) && !module.is_empty() {
            module.pop();
        }
        if let Some(file) = self.files.get(&module) {
            self.named.insert(file.clone());
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.resolve(&prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for FileEdges<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.here.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.here.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments);
        syn::visit::visit_path(self, path);
    }

    /// A macro's body is tokens, not a syntax tree: its paths are read off the token text.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let text = mac.tokens.to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        for (at, word) in words.iter().enumerate() {
            if !matches!(*word, "crate" | "super" | "self") || words.get(at + 1) != Some(&"::") {
                continue;
            }
            if at > 0 && words[at - 1] == "::" {
                continue;
            }
            let mut segments = vec![word.to_string()];
            let mut next = at + 2;
            while let Some(segment) = words.get(next) {
                let ident = segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ident {
                    break;
                }
                segments.push(segment.to_string());
                if words.get(next + 1) != Some(&"::") {
                    break;
                }
                next += 2;
            }
            self.resolve(&segments);
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// File → the files it names, for sources given as (path under `src/`, text).
fn file_graph_of(sources: &[(PathBuf, String)]) -> Graph {
    let src = Path::new("");
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .map(|(path, _)| (module_of(src, path), path.display().to_string()))
        .collect();
    let mut graph = Graph::new();
    for (path, text) in sources {
        let name = path.display().to_string();
        let syntax = syn::parse_file(text).unwrap_or_else(|err| panic!("{name}: {err}"));
        let mut edges = FileEdges {
            files: &files,
            here: module_of(src, path),
            named: BTreeSet::new(),
        };
        edges.visit_file(&syntax);
        edges.named.remove(&name);
        graph.insert(name, edges.named);
    }
    graph
}

/// The library's files (`main.rs` is another crate, whose `crate::` is itself), or those of
/// the workspace crate in `crate_dir`.
fn file_graph_in(crate_dir: &str) -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter(|file| file != &src.join("main.rs"))
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect();
    file_graph_of(&sources)
}

fn file_graph() -> Graph {
    file_graph_in("")
}

#[test]
fn no_file_reaches_itself() {
    let graph = file_graph();
    assert!(graph["cli/check.rs"].contains("cli/mod.rs"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the files import each other: {}", cycle.join(" → "));
    }
    assert!(file_graph_in("crates/policy")["file.rs"].contains("rule.rs"));
    assert!(file_graph_in("crates/core")["tools/bash.rs"].contains("tools/path.rs"));
    for crate_dir in [
        "crates/base",
        "crates/bash",
        "crates/policy",
        "crates/sandbox",
        "crates/core",
        "crates/test-support",
    ] {
        let graph = file_graph_in(crate_dir);
        assert!(graph.len() > 5, "{crate_dir}: {graph:?}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "{crate_dir}: the files import each other: {}",
                cycle.join(" → ")
            );
        }
    }
}

#[test]
fn file_paths_resolve_to_the_file_of_the_deepest_module() {
    let sources = [
        ("lib.rs", "mod a; mod b;"),
        (
            "a/mod.rs",
            "mod x; mod y; use x::Local; pub fn f() { crate::b::g(); }",
        ),
        (
            "a/x.rs",
            "use super::{y::{self, Y}, Shared}; fn h() { format!(\"{}\", super::super::b::C); }",
        ),
        (
            "a/y.rs",
            "pub struct Y; #[cfg(test)] mod tests { use super::*; fn t() { super::Y; } }",
        ),
        (
            "b.rs",
            "pub fn g() {} pub const C: u8 = 0; fn k() { crate::a::y::Y; }",
        ),
    ];
    let sources: Vec<(PathBuf, String)> = sources
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect();
    let graph = file_graph_of(&sources);
    let edges = |file: &str| -> Vec<&str> { graph[file].iter().map(String::as_str).collect() };
    // A parent's bare names of its children declare them; `crate::b` is an import.
    assert_eq!(edges("a/mod.rs"), ["b.rs"]);
    // A group, `self` in it, an item of the parent, and a path inside a macro.
    assert_eq!(edges("a/x.rs"), ["a/mod.rs", "a/y.rs", "b.rs"]);
    // An inline test module's `super` is its own file.
    assert!(edges("a/y.rs").is_empty());
    assert_eq!(edges("b.rs"), ["a/y.rs"]);
    assert_eq!(find_cycle(&graph), None);
}
