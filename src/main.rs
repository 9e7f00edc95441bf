//! The `tollgate` binary: everything lives in the library; this only picks the allocator and
//! hands over the exit code.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// mimalloc rather than the system's malloc: a decision allocates many small, short-lived
/// values, and glibc's malloc and free were a sixth of the gate's time (benches/README.md).
/// Every block mimalloc hands out is a whole number of words, so its plain entry points
/// already give word alignment; only a stricter alignment takes the slower aligned ones.
struct Mimalloc;

/// The alignment every mimalloc block has (its sizes are counted in words).
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each method forwards to the mimalloc function with the same contract (a block of
// at least the size asked, aligned as asked, or null; freed by `mi_free`); the plain ones
// are used only where word alignment is enough.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { by_alignment(layout, mi_malloc, mi_malloc_aligned) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { by_alignment(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

/// A block for `layout` from the plain entry point when word alignment is enough, else from
/// the aligned one.
///
/// # Safety
/// As for [`GlobalAlloc::alloc`]: `layout` has a non-zero size.
unsafe fn by_alignment(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: both are mimalloc allocation functions, called with the layout's size (and
    // alignment).
    unsafe {
        if layout.align() <= WORD {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

fn main() -> std::process::ExitCode {
    tollgate::cli::main()
}
