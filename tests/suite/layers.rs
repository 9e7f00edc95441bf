//! The module graph points one way: no top-level module of `src/` reaches itself through the
//! modules it names (`crate::x` anywhere in its files, tests included), and the edges the
//! design forbids are absent. Read from the source, so a new import that closes a loop fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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

/// Top-level module → the top-level modules its files name.
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    for entry in std::fs::read_dir(&src).unwrap() {
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
    assert!(graph.contains_key("policy") && graph.contains_key("tools"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the modules import each other: {}", cycle.join(" → "));
    }
}

#[test]
fn the_forbidden_edges_are_absent() {
    let graph = module_graph();
    // (from, to): the lower layer defines what it needs; the upper one implements it.
    let forbidden = [
        ("policy", "tools"),
        ("policy", "call"),
        ("bash", "policy"),
        ("report", "agent"),
        ("model", "tools"),
        ("hooks", "tools"),
        ("base", "policy"),
        // The pure cores never name the process runner.
        ("policy", "exec"),
        ("bash", "exec"),
        ("bash", "tools"),
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
