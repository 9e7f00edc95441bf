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
        let floor = bash_floor();
        let Spent {
            wall: plain,
            cpu: plain_cpu,
        } = time(&root, None).await;
        let Spent {
            wall: confined,
            cpu: confined_cpu,
        } = time(&root, Some(&sandbox)).await;
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
        println!(
            "CPU per command: `bash -c true` alone {:.0} µs; unsandboxed {:.0} µs ({:.0} µs beyond bash); sandboxed {:.0} µs ({:.0} µs beyond unsandboxed)",
            per(floor),
            per(plain_cpu),
            per(plain_cpu) - per(floor),
            per(confined_cpu),
            per(confined_cpu) - per(plain_cpu)
        );
        match in_domain {
            Some(total) => println!(
                "read-only domain alone: {:.0} µs per `true`, {:.0} µs over unconfined",
                per(total.wall),
                per(total.wall) - per(plain)
            ),
            None => println!("read-only domain: {}", read_only.describe()),
        }
    });
}

async fn time(root: &Path, sandbox: Option<&Sandbox>) -> Spent {
    time_confined(
        root,
        Confinement {
            sandbox,
            read_only: None,
        },
    )
    .await
}

/// CPU time (user + system) of this process and of its reaped children: a command's keeper
/// is reaped by the runner, and the command by its keeper, so both are counted.
fn cpu_so_far() -> Duration {
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let mut total = 0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage(2) fills the struct we own.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut usage);
            usage
        };
        total += micros(usage.ru_utime) + micros(usage.ru_stime);
    }
    Duration::from_micros(total)
}

/// The floor: `bash -c true` started directly (`posix_spawn`, no runner, no keeper), waited
/// for; CPU time per run.
fn bash_floor() -> Duration {
    let cpu = cpu_so_far();
    for _ in 0..RUNS {
        let status = std::process::Command::new("/bin/bash")
            .args(["-c", "true"])
            .env_clear()
            .status();
        if let Err(err) = status {
            eprintln!("bash did not start: {err}");
        }
    }
    cpu_so_far() - cpu
}

async fn time_confined(root: &Path, confinement: Confinement<'_>) -> Spent {
    let (_handle, abort) = AbortHandle::new();
    let env = RunEnv::new(&Default::default()).model;
    let cpu = cpu_so_far();
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
    Spent {
        wall: started.elapsed(),
        cpu: cpu_so_far() - cpu,
    }
}

/// Wall and CPU time of [`RUNS`] commands.
struct Spent {
    wall: Duration,
    cpu: Duration,
}
