//! What one call of each file tool costs, run as the agent loop runs it (`prepare`, then `run`
//! on the runtime), without and with the sandbox: Read of a 200-line file, Write and Edit of
//! a small one, Glob and Grep over a tree of 200 files. `cargo bench --bench file_tools`
//!
//! The figures are wall time per call on an idle runtime (one call at a time), printed as the
//! rows of the table in benches/README.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tollgate::base::AbortHandle;
use tollgate::policy::{ToolName, Workspace};
use tollgate::sandbox::{Sandbox, SandboxConfig, SandboxSpec, kernel_abi, preflight};
use tollgate::tools::{FileStateCache, ToolContext, ToolLimits, builtin};

fn context(root: &Path, sandbox: Option<Arc<Sandbox>>) -> (ToolContext, AbortHandle) {
    let (handle, abort) = AbortHandle::new();
    let ctx = ToolContext {
        resolver: Default::default(),
        workspace: Arc::new(Workspace::new(root.to_path_buf(), vec![], None)),
        rules: Arc::default(),
        limits: ToolLimits::default(),
        abort,
        files: FileStateCache::default(),
        command_env: tollgate::exec::RunEnv::new(&Default::default()).model,
        progress: None,
        sandbox,
        read_only: None,
        allow_basis: Default::default(),
        state: Default::default(),
    };
    (ctx, handle)
}

/// A workspace with `notes.txt` (200 lines), `small.txt` and `tree/` (20 folders of 10 files).
fn workspace(root: &Path) {
    let lines: String = (0..200)
        .map(|i| format!("line {i} of the notes\n"))
        .collect();
    std::fs::write(root.join("notes.txt"), lines).unwrap();
    std::fs::write(root.join("small.txt"), "alpha\n").unwrap();
    for folder in 0..20 {
        let dir = root.join(format!("tree/d{folder}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in 0..10 {
            let text = if file == 3 {
                "fn main() { needle(); }\n"
            } else {
                "fn other() {}\n"
            };
            std::fs::write(dir.join(format!("f{file}.rs")), text).unwrap();
        }
    }
}

/// Runs `name` with `input` once; panics on an error result, so a bench never times failures.
async fn call(ctx: &ToolContext, name: ToolName, input: Value) {
    let tool = builtin(&name).unwrap();
    let prepared = tool.prepare(&input).unwrap();
    if let Err(err) = prepared.run(ctx).await {
        panic!("{name} {input}: {err}");
    }
}

/// Microseconds per call of `rounds` calls made by `one`.
fn per_call<'a>(
    runtime: &tokio::runtime::Runtime,
    rounds: u32,
    mut one: impl FnMut(u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>,
) -> f64 {
    // Warm the page cache and the blocking pool first.
    for round in 0..rounds / 10 {
        runtime.block_on(one(round));
    }
    let started = Instant::now();
    for round in 0..rounds {
        runtime.block_on(one(round));
    }
    started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
}

/// One row: its label, how many calls to time, and the call to make in a round (Edit's
/// alternates, so each call changes the file).
type Case = (&'static str, u32, fn(u32) -> (ToolName, Value));

const CASES: [Case; 5] = [
    ("Read, 200 lines", 2000, |_| {
        (ToolName::Read, json!({"file_path": "notes.txt"}))
    }),
    ("Write, 6 bytes", 2000, |_| {
        (
            ToolName::Write,
            json!({"file_path": "small.txt", "content": "alpha\n"}),
        )
    }),
    ("Edit, one replacement", 2000, |round| {
        let (old, new) = if round % 2 == 0 {
            ("alpha", "beta")
        } else {
            ("beta", "alpha")
        };
        (
            ToolName::Edit,
            json!({"file_path": "small.txt", "old_string": old, "new_string": new}),
        )
    }),
    ("Glob `**/*.rs`, 200 files", 300, |_| {
        (
            ToolName::Glob,
            json!({"pattern": "**/*.rs", "path": "tree"}),
        )
    }),
    ("Grep, 200 files", 300, |_| {
        (ToolName::Grep, json!({"pattern": "needle", "path": "tree"}))
    }),
];

fn measure(runtime: &tokio::runtime::Runtime, ctx: &ToolContext, label: &str) {
    runtime.block_on(call(ctx, ToolName::Read, json!({"file_path": "small.txt"})));
    for (what, rounds, input) in CASES {
        let micros = per_call(runtime, rounds, |round| {
            let (name, input) = input(round);
            Box::pin(call(ctx, name, input))
        });
        println!("| {what} | {label} | {micros:.1} µs |");
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    workspace(&root);
    let (plain, _plain_handle) = context(&root, None);
    measure(&runtime, &plain, "no sandbox");
    if kernel_abi() < 3 {
        return eprintln!(
            "sandboxed rows skipped: the kernel offers Landlock ABI {}",
            kernel_abi()
        );
    }
    let config = SandboxConfig::from_yaml("", Path::new("bench")).unwrap();
    let status = preflight(&config).unwrap();
    let workspace = Workspace::new(root.clone(), Vec::new(), None);
    let out = scratch.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let sandbox = runtime
        .block_on(Sandbox::start(
            SandboxSpec { config, status },
            &workspace,
            "bench-file-tools",
            &out,
        ))
        .unwrap();
    let (confined, _confined_handle) = context(&root, Some(Arc::new(sandbox)));
    measure(&runtime, &confined, "sandbox");
}
