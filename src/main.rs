//! The `tollgate` binary: everything lives in the library; this only picks the allocator and
//! hands over the exit code.

/// mimalloc rather than the system's: a decision allocates many small, short-lived values,
/// and glibc's malloc and free were a sixth of the gate's time (benches/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tollgate::cli::main()
}
