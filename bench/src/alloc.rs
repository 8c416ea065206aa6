//! A global allocator that counts live heap bytes, for bytes-per-timer figures.
//!
//! Counting is off unless a memory measurement turns it on, so timed runs of
//! allocation-heavy peers do not pay for it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

pub struct Counting;

static ENABLED: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ENABLED.load(Relaxed) {
            LIVE_BYTES.fetch_add(layout.size() as isize, Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ENABLED.load(Relaxed) {
            LIVE_BYTES.fetch_sub(layout.size() as isize, Relaxed);
        }
        // SAFETY: `ptr` was allocated by `System` with `layout` (we never allocate elsewhere).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ENABLED.load(Relaxed) {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        }
        // SAFETY: as for `dealloc`; `new_size` is checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` with counting on and returns how many heap bytes it left allocated
/// (frees of blocks allocated before the call count against it, so callers
/// keep `f` to pure growth).
pub fn bytes_retained<R>(f: impl FnOnce() -> R) -> (R, isize) {
    let before = LIVE_BYTES.load(Relaxed);
    ENABLED.store(true, Relaxed);
    let result = f();
    ENABLED.store(false, Relaxed);
    (result, LIVE_BYTES.load(Relaxed) - before)
}
