//! Cost of keeping git's and the guardrails' files read-only for sandboxed commands: the
//! baseline taken at the sandbox's start, and the comparison every sandboxed command ends
//! with (nothing changed, the usual case). The workspace is a git repository (`git init`'s
//! sample hooks) with a submodule-like `.git/modules/lib` and a tree of `DIRS` folders of
//! `FILES` files each, or the folder named by `TOLLGATE_BENCH_WORKSPACE` (a real checkout,
//! its `target/` included). Prints the mean of each, the check both while the workspace is
//! seconds old and once it has settled.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tollgate::policy::Workspace;
use tollgate::sandbox::{Sandbox, SandboxConfig, SandboxSpec, Violation, kernel_abi, preflight};

const DIRS: usize = 1000;
const FILES: usize = 10;
const RUNS: u32 = 50;

fn main() {
    if kernel_abi() < 3 {
        return eprintln!("skipped: the kernel offers Landlock ABI {}", kernel_abi());
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return eprintln!("cannot start the runtime: {err}"),
    };
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(err) => return eprintln!("cannot make a workspace: {err}"),
    };
    let root = match std::env::var_os("TOLLGATE_BENCH_WORKSPACE") {
        Some(dir) => PathBuf::from(dir),
        None => match synthetic(scratch.path()) {
            Ok(root) => root,
            Err(err) => return eprintln!("cannot fill the workspace: {err}"),
        },
    };
    let entries = count(&root);
    runtime.block_on(async {
        let config = match SandboxConfig::from_yaml("", Path::new("bench")) {
            Ok(config) => config,
            Err(err) => return eprintln!("{err}"),
        };
        let status = match preflight(&config) {
            Ok(status) => status,
            Err(err) => return eprintln!("{err}"),
        };
        let workspace = Workspace::new(root.clone(), Vec::new(), None);
        let out = scratch.path().join("out");
        let started = Instant::now();
        let mut sandbox = None;
        for _ in 0..RUNS {
            let spec = SandboxSpec {
                config: config.clone(),
                status: status.clone(),
            };
            match Sandbox::start(spec, &workspace, "bench", &out).await {
                Ok(started) => sandbox = Some(started),
                Err(err) => return eprintln!("{err}"),
            }
        }
        let start = started.elapsed() / RUNS;
        let Some(sandbox) = sandbox else { return };
        let fresh = match checks(&sandbox) {
            Ok(mean) => mean,
            Err(changed) => return eprintln!("the workspace changed while measuring: {changed:?}"),
        };
        // What the check remembers is trusted only once a change is older than the kernel's
        // clock can blur (2 s): a checkout seconds old is re-listed, an older one is not.
        std::thread::sleep(Duration::from_millis(2500));
        let settled = match checks(&sandbox) {
            Ok(mean) => mean,
            Err(changed) => return eprintln!("the workspace changed while measuring: {changed:?}"),
        };
        println!("workspace: {} ({entries} entries)", root.display());
        println!("sandbox start (baseline included): {start:?} per run ({RUNS} runs)");
        println!("check after each command, workspace changed < 2 s ago: {fresh:?} per command ({RUNS} runs)");
        println!("check after each command, workspace settled:           {settled:?} per command ({RUNS} runs)");
    });
}

/// The mean of `RUNS` checks that find nothing changed, or what one of them found.
fn checks(sandbox: &Sandbox) -> Result<Duration, Vec<Violation>> {
    let started = Instant::now();
    for _ in 0..RUNS {
        let changed = sandbox.restore_protected();
        if !changed.is_empty() {
            return Err(changed);
        }
    }
    Ok(started.elapsed() / RUNS)
}

fn synthetic(scratch: &Path) -> std::io::Result<PathBuf> {
    let root = scratch.join("ws");
    std::fs::create_dir_all(&root)?;
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&root)
        .status()?;
    if !init.success() {
        return Err(std::io::Error::other("git init failed"));
    }
    let lib = root.join(".git/modules/lib");
    std::fs::create_dir_all(lib.join("hooks"))?;
    std::fs::write(lib.join("config"), "[core]\n")?;
    std::fs::write(lib.join("HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(root.join(".gitmodules"), "[submodule \"lib\"]\n")?;
    for dir in 0..DIRS {
        let folder = root.join(format!("src/m{}/d{dir}", dir % 20));
        std::fs::create_dir_all(&folder)?;
        for file in 0..FILES {
            std::fs::write(folder.join(format!("f{file}.rs")), "fn f() {}\n")?;
        }
    }
    Ok(root)
}

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => 1 + count(&entry.path()),
            _ => 1,
        })
        .sum()
}
