//! Start-up cost of a sandboxed command: 1,000 runs of `true` through the shell runner, with
//! and without the sandbox (Landlock ruleset built in the parent, applied in the child with
//! the socket filter, a pids cgroup where one can be made), and in the read-only domain
//! alone. Prints the mean per command of each, the differences, and the parent's share.

use std::path::Path;
use std::time::{Duration, Instant};

use tollgate::base::AbortHandle;
use tollgate::exec::RunEnv;
use tollgate::policy::Workspace;
use tollgate::sandbox::{
    ReadOnlyCommands, ReadOnlyDomain, Sandbox, SandboxConfig, SandboxSpec, kernel_abi, preflight,
    read_only_preflight,
};
use tollgate::tools::{Confinement, ShellEnv, run_confined};

const RUNS: u32 = 1000;

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return eprintln!("cannot start the runtime: {err}"),
    };
    if kernel_abi() < 4 {
        return eprintln!("skipped: the kernel offers Landlock ABI {}", kernel_abi());
    }
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(err) => return eprintln!("cannot make a workspace: {err}"),
    };
    let root = scratch.path().to_path_buf();
    runtime.block_on(async {
        let config = match SandboxConfig::from_yaml("", Path::new("bench")) {
            Ok(config) => config,
            Err(err) => return eprintln!("{err}"),
        };
        let status = match preflight(&config) {
            Ok(status) => status,
            Err(err) => return eprintln!("{err}"),
        };
        let spec = SandboxSpec { config, status };
        let workspace = Workspace::new(root.clone(), Vec::new(), None);
        let sandbox = match Sandbox::start(
            spec,
            &workspace,
            "bench",
            &std::env::temp_dir().join("tollgate-bench-out"),
        )
        .await
        {
            Ok(sandbox) => sandbox,
            Err(err) => return eprintln!("{err}"),
        };
        let plain = time(&root, None).await;
        let confined = time(&root, Some(&sandbox)).await;
        let prepared = Instant::now();
        for _ in 0..RUNS {
            if let Err(err) = sandbox.prepare() {
                return eprintln!("cannot prepare: {err}");
            }
        }
        let prepared = prepared.elapsed();
        let read_only = read_only_preflight(ReadOnlyCommands::Enforce);
        let domain = match ReadOnlyDomain::start(&read_only, None, "bench") {
            Ok(domain) => domain,
            Err(err) => return eprintln!("{err}"),
        };
        let in_domain = match &domain {
            Some(domain) => Some(
                time_confined(
                    &root,
                    Confinement {
                        sandbox: None,
                        read_only: Some(domain),
                    },
                )
                .await,
            ),
            None => None,
        };
        let per = |total: Duration| total.as_secs_f64() * 1e6 / f64::from(RUNS);
        println!("{}", sandbox.status().describe());
        println!("unsandboxed: {:.0} µs per `true` ({RUNS} runs)", per(plain));
        println!(
            "sandboxed:   {:.0} µs per `true` ({RUNS} runs)",
            per(confined)
        );
        println!(
            "added:       {:.0} µs per command",
            per(confined) - per(plain)
        );
        println!(
            "  of which the parent's preparation (ruleset, cgroup): {:.0} µs",
            per(prepared)
        );
        match in_domain {
            Some(total) => println!(
                "read-only domain alone: {:.0} µs per `true`, {:.0} µs over unconfined",
                per(total),
                per(total) - per(plain)
            ),
            None => println!("read-only domain: {}", read_only.describe()),
        }
    });
}

async fn time(root: &Path, sandbox: Option<&Sandbox>) -> Duration {
    time_confined(
        root,
        Confinement {
            sandbox,
            read_only: None,
        },
    )
    .await
}

async fn time_confined(root: &Path, confinement: Confinement<'_>) -> Duration {
    let (_handle, abort) = AbortHandle::new();
    let env = RunEnv::new(&Default::default()).model;
    let started = Instant::now();
    for _ in 0..RUNS {
        let run = run_confined(
            "true",
            root,
            Duration::from_secs(10),
            &abort,
            ShellEnv::Model(&env),
            None,
            confinement,
        )
        .await;
        if let Err(err) = run {
            eprintln!("`true` did not start: {err}");
        }
    }
    started.elapsed()
}
