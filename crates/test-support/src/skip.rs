//! The one rule for a test that needs something from outside Rust — a program (chromium,
//! strace, node, go…), a package (GitHub's API description from npm) or a kernel feature
//! (a Landlock ABI) — that this machine may lack.
//!
//! Plain `cargo test` passes without it, and every skipped test says so in the default
//! output: one line on the process's stderr each (libtest captures `print!`/`eprint!` of a
//! passing test, not a direct write to the stream), and after libtest's own summary one line
//! with the count (an `atexit` handler, registered by the first skip, writes it). With
//! `TOLLGATE_TEST_REQUIRE_ALL=1` — `.ci/run` sets it, after installing what the suite needs —
//! every skip is a failure instead.
//!
//! The sandbox crate's unit tests include this file too (`test_skip` in
//! `crates/sandbox/src/lib.rs`, which cannot depend on this crate's HTTP fakes), so every
//! test binary follows the same rule; each keeps its own count.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The variable that turns every skip into a failure.
pub const REQUIRE_ALL: &str = "TOLLGATE_TEST_REQUIRE_ALL";

static SKIPPED: AtomicUsize = AtomicUsize::new(0);
static COUNT_AT_EXIT: Once = Once::new();

/// Whether a skip must fail instead.
pub fn required() -> bool {
    std::env::var(REQUIRE_ALL).as_deref() == Ok("1")
}

/// Records that the calling test does not run here, and why (say what is missing and how to
/// get it). Panics instead when `TOLLGATE_TEST_REQUIRE_ALL=1`. Call it from the test's own
/// thread: libtest names that thread after the test, and the line names it so.
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test outside libtest's threads")
        .to_owned();
    if required() {
        panic!("{test}: {REQUIRE_ALL}=1, so this skip fails: {reason}");
    }
    SKIPPED.fetch_add(1, Ordering::SeqCst);
    COUNT_AT_EXIT.call_once(|| {
        // SAFETY: `print_count` is an `extern "C" fn()` that touches only a static atomic and
        // the stderr stream; registering it has no precondition.
        let registered = unsafe { libc::atexit(print_count) };
        if registered != 0 {
            let _ = writeln!(
                std::io::stderr(),
                "(the skip count could not be registered)"
            );
        }
    });
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// Runs at exit, after libtest has printed its summary.
extern "C" fn print_count() {
    let skipped = SKIPPED.load(Ordering::SeqCst);
    let skips = if skipped == 1 { "skip" } else { "skips" };
    let _ = writeln!(
        std::io::stderr(),
        "{skipped} {skips} in this test binary, each named above by a SKIPPED line: a program, \
         package or kernel feature is missing ({REQUIRE_ALL}=1 makes a skip fail)"
    );
}

/// `program` as found on PATH, if it is there.
pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// `program` on PATH, or `None` after skipping the test with `install` as the way to get it.
pub fn need_program(program: &str, install: &str) -> Option<PathBuf> {
    let found = on_path(program);
    if found.is_none() {
        skip(&format!("no `{program}` on PATH ({install})"));
    }
    found
}

/// Whether the kernel's Landlock ABI (`offered`: `sandbox::kernel_abi()`) is at least `needed`
/// for `what`; skips the test when it is not.
pub fn need_landlock(offered: u32, needed: u32, what: &str) -> bool {
    if offered < needed {
        skip(&format!(
            "this kernel offers Landlock ABI {offered}; {what} needs {needed}"
        ));
        return false;
    }
    true
}
