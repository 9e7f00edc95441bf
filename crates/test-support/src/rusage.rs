//! What the kernel counts for this process and its reaped children (`getrusage(2)`): the
//! benches' CPU and peak-memory figures, read one way.

use std::time::Duration;

fn usage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage(2) fills the zeroed struct we own.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    }
}

fn cpu(usage: &libc::rusage) -> Duration {
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// This process's CPU time so far (user + system).
pub fn own_cpu() -> Duration {
    cpu(&usage(libc::RUSAGE_SELF))
}

/// The CPU time (user + system) of this process's reaped children so far.
pub fn children_cpu() -> Duration {
    cpu(&usage(libc::RUSAGE_CHILDREN))
}

/// The peak RSS of the largest reaped child so far, in KiB.
pub fn children_peak_rss_kib() -> i64 {
    usage(libc::RUSAGE_CHILDREN).ru_maxrss
}
