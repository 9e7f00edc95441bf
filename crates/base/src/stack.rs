//! How much of the current thread's stack is left: recursive walks over input a model wrote
//! (the Bash analyser's) stop before they run out, whatever thread they run on and however
//! large their frames are in this build, rather than abort the process.

use std::cell::Cell;

/// Stack a walk keeps free below its last recursive step: room for the deepest call chain
/// that does not recurse (a parse, a rule match, a path lookup).
pub const STACK_MARGIN: usize = 64 * 1024;

thread_local! {
    /// The lowest address of this thread's stack, looked up once (`None` inside: unknown).
    static LOWEST: Cell<Option<Option<usize>>> = const { Cell::new(None) };
}

/// Whether less than [`STACK_MARGIN`] of this thread's stack is left; `false` where that
/// cannot be told.
pub fn stack_is_low() -> bool {
    let marker = 0u8;
    // The address of a local of this frame is where the stack is now (it grows down).
    let here = std::ptr::addr_of!(marker) as usize;
    lowest_address().is_some_and(|lowest| here.saturating_sub(lowest) < STACK_MARGIN)
}

fn lowest_address() -> Option<usize> {
    LOWEST.with(|cell| {
        if let Some(known) = cell.get() {
            return known;
        }
        let found = stack_bounds();
        cell.set(Some(found));
        found
    })
}

/// The lowest address of the calling thread's stack, from its attributes (for the main
/// thread glibc derives it from the stack's mapping and its size limit).
fn stack_bounds() -> Option<usize> {
    // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is read and destroyed
    // once; `addr` and `size` are plain out-parameters.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let got = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (got == 0 && !addr.is_null()).then_some(addr as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_reached(depth: usize) -> usize {
        if stack_is_low() {
            return depth;
        }
        // A frame of some size, kept by the optimiser.
        let pad = std::hint::black_box([0u8; 512]);
        depth_reached(depth + 1) + usize::from(pad[0])
    }

    /// A recursion that asks before each step stops with the margin left, on a small stack
    /// and a large one, instead of overflowing.
    #[test]
    fn a_walk_that_asks_stops_before_the_stack_ends() {
        for size in [256 * 1024, 2 * 1024 * 1024] {
            let reached = std::thread::Builder::new()
                .stack_size(size)
                .spawn(|| depth_reached(0))
                .unwrap()
                .join()
                .unwrap();
            assert!(reached > 10, "{size}: {reached}");
        }
        assert!(!stack_is_low());
    }
}
