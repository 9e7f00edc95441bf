//! One start of a program tollgate runs for itself (a batch's git), each way the runner can
//! start it: forked with a keeper (`Reach::Tree`, how every command started before issue 51)
//! and cloned without copying tollgate (`Reach::Group`). `RUNS` starts of `true` each, with
//! this process's memory as it is after start-up and again with 256 MiB more in use: a fork
//! copies page tables in proportion to it, the clone copies none. Prints, per start, the
//! runner's own CPU (all its threads), its children's CPU (for a kept command the keeper's,
//! which includes the command it reaped) and the wall time.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tollgate::exec::{ChildEnv, Ending, ExecRequest, Reach, run};

// The peak-memory reading is not used here.
use tollgate_test_support::rusage;

const RUNS: u32 = 500;

fn request(reach: Reach) -> ExecRequest {
    let env = ChildEnv::default().with("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut request = ExecRequest::bash("", std::env::temp_dir(), env, Duration::from_secs(10));
    request.argv = vec!["true".into()];
    request.reach = reach;
    request
}

/// `count` starts; `Err` names the first that did not exit with 0.
async fn starts(reach: Reach, count: u32) -> Result<(), String> {
    for _ in 0..count {
        let outcome = run(request(reach), std::future::pending())
            .await
            .map_err(|err| format!("cannot start true: {err}"))?;
        if outcome.ending != Ending::Exited(0) {
            return Err(format!("true ended with {:?}", outcome.ending));
        }
    }
    Ok(())
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return eprintln!("cannot start the runtime: {err}"),
    };
    runtime.block_on(async {
        // The guardian starts with the first command; neither way should pay for it.
        for reach in [Reach::Tree, Reach::Group] {
            if let Err(err) = starts(reach, 20).await {
                return eprintln!("{err}");
            }
        }
        for extra_mib in [0usize, 256] {
            // Every page written, so each is mapped and a fork has its entry to copy.
            let ballast = black_box(vec![1u8; extra_mib << 20]);
            for reach in [Reach::Tree, Reach::Group] {
                let (own, children, wall) = (
                    rusage::own_cpu(),
                    rusage::children_cpu(),
                    Instant::now(),
                );
                if let Err(err) = starts(reach, RUNS).await {
                    return eprintln!("{err}");
                }
                let per = |spent: Duration| spent.as_secs_f64() * 1e6 / f64::from(RUNS);
                println!(
                    "{:<5} +{extra_mib:>3} MiB: own CPU {:>6.0} µs, children {:>6.0} µs, wall {:>6.0} µs per start",
                    format!("{reach:?}"),
                    per(rusage::own_cpu() - own),
                    per(rusage::children_cpu() - children),
                    per(wall.elapsed()),
                );
            }
            drop(ballast);
        }
    });
}
