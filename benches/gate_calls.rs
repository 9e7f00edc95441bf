//! `tollgate check --calls` on 100,000 generated unique calls against its floor. Run with
//! `cargo bench --bench gate_calls`; it builds nothing itself: set `TOLLGATE_BIN` to the
//! release binary to measure (default `target/release/tollgate`) and, to compare two builds
//! in one interleaved run, `TOLLGATE_BIN_BEFORE` to the other. `GATE_CALLS_RUNS` (default 3)
//! runs of each, alternating.
//!
//! The file: 60 % Bash (simple and compound commands, each line with a number of its own, so
//! no two lines are alike; git revisions and remotes, paths inside and outside the workspace),
//! and Read, Write, Edit, Grep and Glob calls, decided under `policies/ci-default.yaml` with
//! this repository as the workdir. The floor is what any gate of this design must do per
//! line, measured in this process: read the JSON line, parse a Bash command once with
//! tree-sitter and walk every node of its tree, write one JSON decision line.
//! CPU time (user + system) is the figure: wall time on a shared machine mostly measures the
//! wait for a core.

use tollgate_test_support::rusage;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const LINES: usize = 100_000;

fn bash_command(i: usize) -> String {
    let n = i / 20;
    match i % 20 {
        0 => format!("git log --oneline HEAD~{n}"),
        1 => format!("git diff HEAD~{} HEAD -- src/lib{n}.rs", n % 7 + 1),
        2 => format!("git push origin feature-{n}"),
        3 => format!("cat src/module{n}.rs | grep -n fn"),
        4 => format!("ls -la src/dir{n} && wc -l src/dir{n}/*.rs"),
        5 => format!("cargo test --test all case_{n}"),
        6 => format!("rm -rf target/tmp/run{n}"),
        7 => format!("echo {n} > out/{n}.txt"),
        8 => format!("grep -r 'needle{n}' src tests"),
        9 => format!("cat /usr/include/stdio{n}.h"),
        10 => format!("head -n {n} README.md; tail -n 3 Cargo.toml"),
        11 => format!("for f in src/a{n}.rs src/b{n}.rs; do wc -c \"$f\"; done"),
        12 => format!("npm run build -- --id={n}"),
        13 => format!("git checkout -b topic-{n} origin/main"),
        14 => format!("sed -n '{n},+3p' src/main.rs"),
        15 => format!("python3 -c 'print({n})'"),
        16 => format!("find src -name '*{n}*.rs' -type f"),
        17 => format!("git show HEAD~{}:src/lib.rs | head -{n}", n % 5),
        18 => format!("mkdir -p build/{n} && cp Cargo.toml build/{n}/"),
        _ => format!("diff -u /etc/hosts{n} docs/hosts{n}"),
    }
}

fn call(i: usize) -> Value {
    let n = i;
    let (tool, input) = match i % 10 {
        0..=5 => (
            "Bash",
            json!({"command": bash_command(i / 10 * 6 + i % 10)}),
        ),
        6 => (
            "Read",
            json!({"file_path": if n.is_multiple_of(3) { format!("/etc/conf{n}") } else { format!("src/file{n}.rs") }}),
        ),
        7 => match n % 2 {
            0 => (
                "Write",
                json!({"file_path": format!("src/new{n}.rs"), "content": format!("// {n}\n")}),
            ),
            _ => (
                "Edit",
                json!({"file_path": format!("src/lib{n}.rs"), "old_string": "a", "new_string": format!("b{n}")}),
            ),
        },
        8 => (
            "Grep",
            json!({"pattern": format!("fn name{n}"), "path": "src"}),
        ),
        _ => ("Glob", json!({"pattern": format!("src/**/*{n}*.rs")})),
    };
    json!({"id": i, "tool": tool, "input": input})
}

fn write_file(path: &Path) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..LINES {
        writeln!(out, "{}", call(i))?;
    }
    out.flush()
}

/// JSON in and out, one tree-sitter parse and a walk of every node for each Bash line.
fn floor(path: &Path) -> Duration {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{err}"));
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap_or_else(|err| panic!("{err}"));
    let mut sink = Vec::with_capacity(text.len());
    let start = rusage::own_cpu();
    let mut nodes = 0usize;
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}"));
        if value["tool"] == "Bash"
            && let Some(command) = value["input"]["command"].as_str()
            && let Some(tree) = parser.parse(command, None)
        {
            let mut cursor = tree.walk();
            'walk: loop {
                nodes += usize::from(cursor.node().kind_id());
                if cursor.goto_first_child() || cursor.goto_next_sibling() {
                    continue;
                }
                loop {
                    if !cursor.goto_parent() {
                        break 'walk;
                    }
                    if cursor.goto_next_sibling() {
                        break;
                    }
                }
            }
        }
        let decision = json!({"id": value["id"], "tool": value["tool"], "decision": "allow", "reason": "floor"});
        serde_json::to_writer(&mut sink, &decision).unwrap_or_else(|err| panic!("{err}"));
        sink.push(b'\n');
    }
    let spent = rusage::own_cpu() - start;
    std::hint::black_box((nodes, sink.len()));
    spent
}

/// One `check --calls` run of `bin`: its CPU time (user + system) and its output's length.
fn run(bin: &Path, calls: &Path, root: &Path) -> (Duration, usize) {
    let mut child = Command::new(bin)
        .args(["check", "--policy"])
        .arg(root.join("policies/ci-default.yaml"))
        .arg("--calls")
        .arg(calls)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", bin.display()));
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        std::io::Read::read_to_end(&mut stdout, &mut out).unwrap_or_else(|err| panic!("{err}"));
    }
    let before = rusage::children_cpu();
    let status = child
        .wait()
        .unwrap_or_else(|err| panic!("cannot wait for {}: {err}", bin.display()));
    let spent = rusage::children_cpu() - before;
    assert!(
        status.code().is_some(),
        "{} ended by {status}",
        bin.display()
    );
    let lines = out.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(lines, LINES, "{} answered {lines} lines", bin.display());
    (spent, out.len())
}

fn per_second(spent: Duration) -> f64 {
    LINES as f64 / spent.as_secs_f64()
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/tmp");
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
    let calls = dir.join("gate-calls-100k.jsonl");
    write_file(&calls).unwrap_or_else(|err| panic!("{err}"));
    let bin = std::env::var_os("TOLLGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/tollgate"));
    let before = std::env::var_os("TOLLGATE_BIN_BEFORE").map(PathBuf::from);
    let runs: usize = std::env::var("GATE_CALLS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let floors: Vec<Duration> = (0..runs).map(|_| floor(&calls)).collect();
    let floor = floors.iter().min().copied().unwrap_or_default();
    println!(
        "floor (JSON in/out, one tree-sitter parse and walk): {:.3} s CPU, {:.0} lines/s",
        floor.as_secs_f64(),
        per_second(floor)
    );
    let mut after = Vec::new();
    let mut earlier = Vec::new();
    for _ in 0..runs {
        if let Some(before) = &before {
            let (spent, _) = run(before, &calls, &root);
            println!(
                "before {}: {:.3} s CPU, {:.0} decisions/s",
                before.display(),
                spent.as_secs_f64(),
                per_second(spent)
            );
            earlier.push(spent);
        }
        let (spent, _) = run(&bin, &calls, &root);
        println!(
            "after  {}: {:.3} s CPU, {:.0} decisions/s",
            bin.display(),
            spent.as_secs_f64(),
            per_second(spent)
        );
        after.push(spent);
    }
    for (name, list) in [("before", &earlier), ("after", &after)] {
        if let Some(best) = list.iter().min() {
            println!(
                "{name}: best {:.0} decisions/s = {:.0} % of the floor",
                per_second(*best),
                100.0 * floor.as_secs_f64() / best.as_secs_f64()
            );
        }
    }
}
