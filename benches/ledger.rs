//! Cost of the effect ledger per call: the snapshot before, the snapshot after and their
//! comparison, for a workspace of N files (nothing changed, the usual case), with
//! `effects.scope: workspace` and `guarded`. Workspaces of `SIZES` files in folders of
//! `PER_FOLDER`, or the folder named by `TOLLGATE_BENCH_WORKSPACE` (a real checkout, its
//! `target/` included). Prints the mean per call of each.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tollgate::ledger::{Allowance, GitWrites, Ledger, LedgerConfig, LedgerScope};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const PER_FOLDER: usize = 20;
const BUDGET: Duration = Duration::from_secs(3);

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return eprintln!("cannot start the runtime: {err}"),
    };
    let mut roots: Vec<(PathBuf, Option<tempfile::TempDir>)> = Vec::new();
    match std::env::var_os("TOLLGATE_BENCH_WORKSPACE") {
        Some(dir) => roots.push((PathBuf::from(dir), None)),
        None => {
            for size in SIZES {
                let scratch = match tempfile::tempdir() {
                    Ok(dir) => dir,
                    Err(err) => return eprintln!("cannot make a workspace: {err}"),
                };
                if let Err(err) = fill(scratch.path(), size) {
                    return eprintln!("cannot fill the workspace: {err}");
                }
                roots.push((scratch.path().to_path_buf(), Some(scratch)));
            }
        }
    }
    for (root, _keep) in &roots {
        let Ok(root) = root.canonicalize() else {
            return eprintln!("no such folder: {}", root.display());
        };
        let entries = count(&root);
        for scope in [LedgerScope::Workspace, LedgerScope::Guarded] {
            let config = LedgerConfig {
                scope,
                max_entries: 10_000_000,
            };
            let Some(mut ledger) = Ledger::new(config, &root, None, Vec::new()) else {
                return;
            };
            let (calls, mean) = runtime.block_on(async {
                let started = Instant::now();
                let mut calls = 0u32;
                while started.elapsed() < BUDGET || calls < 3 {
                    ledger.open().await;
                    let effects = ledger
                        .close(Allowance::nothing(GitWrites::None), Vec::new())
                        .await;
                    assert!(effects.changes.is_empty() && effects.incomplete.is_none());
                    calls += 1;
                }
                (calls, started.elapsed() / calls)
            });
            println!(
                "{entries:>7} entries, scope {:<9}: {mean:>10.2?} per call ({calls} calls)",
                scope.as_str()
            );
        }
    }
}

/// `files` files of a few bytes, `PER_FOLDER` to a folder, and a git directory.
fn fill(root: &Path, files: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join(".git/hooks"))?;
    std::fs::write(root.join(".git/config"), "[core]\n")?;
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n")?;
    for i in 0..files {
        let dir = root.join(format!("d{}/e{}", i / (PER_FOLDER * 50), i / PER_FOLDER));
        if i % PER_FOLDER == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        std::fs::write(dir.join(format!("f{i}.rs")), "fn f() {}\n")?;
    }
    // The ledger waits out the clock tick of a fresh change; the measure is of a settled
    // workspace, as between a model's turns.
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

fn count(root: &Path) -> usize {
    let mut count = 0;
    let mut folders = vec![root.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            count += 1;
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                folders.push(entry.path());
            }
        }
    }
    count
}
