//! The allocator: mimalloc, with a heap of their own for the serving threads' requests.
//!
//! Why a heap of their own: after a burst, the pages that bore it are given back only when
//! every block in them is free (mimalloc v3 returns whole pages, never the free part of a
//! page in use). In one heap, the blocks a serving thread keeps for its life (its runtime's
//! event buffer, its router, its tasks, its handle on the metrics' epoch) sit in the same
//! pages as the requests' blocks: a burst filled the rest of those pages, and one 12 KiB
//! event buffer kept a 512 KiB page of freed connection buffers resident for as long as the
//! router idled (docs/perf/README.md, "What a burst leaves in the heap"). A serving thread
//! makes what it keeps first, in the default heap, and then allocates its connections and
//! requests from the requests' heap ([`own_heap`]): the pages a burst filled hold only its
//! blocks and go back when it is over.
//!
//! One requests' heap serves every serving thread: mimalloc v3 gives each thread its own
//! pages in a heap all the same, and each heap keeps bitmaps of its pages in every arena it
//! uses, made on its first block: 164 KB resident, once per heap rather than once a thread.
//!
//! What a request makes to keep for the router's life (a lazily made shared state, a new
//! metric series, a breaker's transition kept for late subscribers) is made in the default
//! heap ([`in_default`]): one such block in a page of the requests' heap kept the 64 KB
//! page a burst had filled resident.
//!
//! Only a block made in the requests' heap grows there; any other grows in the default
//! heap. So what the thread made before its switch (its runtime's run queue, say, which a
//! burst's wake-ups grow) stays out of the pages the burst fills, where one grown block
//! would keep a page of them resident.
//!
//! A thread that never calls [`own_heap`] allocates from mimalloc's default heap, as the
//! stock allocator does. Blocks are freed from any thread, whichever heap they came from.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use libmimalloc_sys as mi;

extern "C" {
    /// The heap a block belongs to (mimalloc v3; not in `libmimalloc-sys`'s list).
    fn mi_heap_of(block: *const c_void) -> *mut mi::mi_heap_t;
}

/// The global allocator of the `labrouter` binary (`src/main.rs`).
pub struct Alloc;

thread_local! {
    /// This thread's own heap; null: mimalloc's default.
    static HEAP: Cell<*mut mi::mi_heap_t> = const { Cell::new(ptr::null_mut()) };
}

fn own() -> *mut mi::mi_heap_t {
    HEAP.with(Cell::get)
}

// SAFETY: every path hands the layout's size and alignment to mimalloc's aligned calls,
// which return null or a block of that size and alignment, and frees with `mi_free`, which
// takes a block of any heap from any thread.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let heap = own();
        let block = if heap.is_null() {
            mi::mi_malloc_aligned(layout.size(), layout.align())
        } else {
            mi::mi_heap_malloc_aligned(heap, layout.size(), layout.align())
        };
        block.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let heap = own();
        let block = if heap.is_null() {
            mi::mi_zalloc_aligned(layout.size(), layout.align())
        } else {
            mi::mi_heap_zalloc_aligned(heap, layout.size(), layout.align())
        };
        block.cast()
    }

    unsafe fn dealloc(&self, block: *mut u8, _: Layout) {
        mi::mi_free(block.cast::<c_void>());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let heap = own();
        // SAFETY: `block` is a live block of this allocator.
        let moved = if heap.is_null() || unsafe { mi_heap_of(block.cast()) } != heap {
            mi::mi_realloc_aligned(block.cast(), size, layout.align())
        } else {
            mi::mi_heap_realloc_aligned(heap, block.cast(), size, layout.align())
        };
        moved.cast()
    }
}

/// The requests' heap, made by the first serving thread to switch; null until then.
static REQUESTS: AtomicPtr<mi::mi_heap_t> = AtomicPtr::new(ptr::null_mut());

/// From now on, this thread allocates from the requests' heap (a serving thread, once it has
/// made what it keeps for its life). Where mimalloc cannot make one, it keeps the default.
pub fn own_heap() {
    let mut heap = REQUESTS.load(Ordering::Acquire);
    if heap.is_null() {
        // SAFETY: no preconditions; null when no heap could be made.
        let made = unsafe { mi::mi_heap_new() };
        if made.is_null() {
            return;
        }
        heap = match REQUESTS.compare_exchange(
            ptr::null_mut(),
            made,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => made,
            Err(first) => {
                // SAFETY: `made` is a heap no block was ever allocated from.
                unsafe { mi::mi_heap_delete(made) };
                first
            }
        };
    }
    HEAP.with(|h| h.set(heap));
}

/// Runs `f` with this thread allocating from the default heap: for what a request makes to
/// keep. What `f` makes grows there too.
pub fn in_default<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the thread's heap back, a panic in `f` included.
    struct Back(*mut mi::mi_heap_t);
    impl Drop for Back {
        fn drop(&mut self) {
            HEAP.with(|h| h.set(self.0));
        }
    }
    let _back = Back(HEAP.with(|h| h.replace(ptr::null_mut())));
    f()
}

/// `v`, cloned once and the clone dropped: for a header value or URI kept for the router's
/// life and cloned by every request. Their bytes, copied when they were made, become shared
/// at their first clone, which allocates (24 bytes, on the cloning thread): here, where they
/// are made, rather than in the requests' heap at the first request, where that one block
/// kept a 64 KB page of a burst resident.
pub fn cloned_once<T: Clone>(v: T) -> T {
    drop(v.clone());
    v
}

/// tokio's `spawn_blocking`, with what it makes in the default heap: on a serving thread,
/// its runtime's blocking pool keeps a record of the thread it starts (and the thread, 10 s
/// past its last work), which outlives the request.
pub fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    in_default(|| tokio::task::spawn_blocking(f))
}

/// Gives back to the system the pages this thread holds free, in the requests' heap and in
/// the default one.
pub fn give_back() {
    let heap = own();
    // SAFETY: `heap` is this thread's live heap (heaps are never deleted); both calls only
    // free pages that hold no block.
    unsafe {
        if !heap.is_null() {
            mi::mi_heap_collect(heap, true);
        }
        mi::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn a_block_made_before_the_switch_grows_in_the_default_heap() {
        std::thread::spawn(|| {
            let layout = Layout::from_size_align(1024, 8).unwrap();
            // SAFETY: a layout of non-zero size; the block is freed below.
            let block = unsafe { Alloc.alloc(layout) };
            // SAFETY: a live block.
            let default = unsafe { mi_heap_of(block.cast()) };
            own_heap();
            assert_ne!(default, own());
            // SAFETY: the block is live, of `layout`.
            let grown = unsafe { Alloc.realloc(block, layout, 64 * 1024) };
            // SAFETY: a live block.
            assert_eq!(unsafe { mi_heap_of(grown.cast()) }, default);
            // SAFETY: the live block of that size, freed once.
            unsafe { Alloc.dealloc(grown, Layout::from_size_align(64 * 1024, 8).unwrap()) };
        })
        .join()
        .unwrap();
    }

    #[test]
    fn serving_threads_share_the_requests_heap_in_pages_of_their_own() {
        let both = Arc::new(Barrier::new(2));
        let serve = || {
            let both = Arc::clone(&both);
            std::thread::spawn(move || {
                own_heap();
                let layout = Layout::from_size_align(48, 8).unwrap();
                // SAFETY: a layout of non-zero size; the block is freed by the test.
                let block = unsafe { Alloc.alloc(layout) };
                // SAFETY: a live block.
                let heap = unsafe { mi_heap_of(block.cast()) };
                // Both threads hold their pages at once: neither has left one to the other.
                both.wait();
                (block as usize, heap as usize)
            })
        };
        let (a, b) = (serve(), serve());
        let ((a, heap_a), (b, heap_b)) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(heap_a, heap_b, "one requests' heap");
        assert_eq!(heap_a, REQUESTS.load(Ordering::Acquire) as usize);
        let page = |block: usize| block / (64 * 1024);
        assert_ne!(page(a), page(b), "each thread fills pages of its own");
        for block in [a, b] {
            // SAFETY: the live blocks made above, each freed once.
            unsafe { Alloc.dealloc(block as *mut u8, Layout::from_size_align(48, 8).unwrap()) };
        }
    }

    #[test]
    fn what_a_request_keeps_is_made_in_the_default_heap() {
        std::thread::spawn(|| {
            own_heap();
            let layout = Layout::from_size_align(200, 8).unwrap();
            // SAFETY: a layout of non-zero size; both blocks are freed below.
            let kept = in_default(|| unsafe { Alloc.alloc(layout) });
            // SAFETY: as above.
            let passing = unsafe { Alloc.alloc(layout) };
            // SAFETY: live blocks.
            let (kept_in, passing_in) =
                unsafe { (mi_heap_of(kept.cast()), mi_heap_of(passing.cast())) };
            assert_ne!(kept_in, own(), "kept: the default heap");
            assert_eq!(
                passing_in,
                own(),
                "the thread is back on the requests' heap"
            );
            // SAFETY: the live blocks of `layout`, each freed once.
            unsafe {
                Alloc.dealloc(kept, layout);
                Alloc.dealloc(passing, layout);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_with_its_own_heap_allocates_there_and_frees_anywhere() {
        let (block, layout) = std::thread::spawn(|| {
            own_heap();
            let layout = Layout::from_size_align(12 * 1024, 64).unwrap();
            // SAFETY: a layout of non-zero size; the block is freed below.
            let block = unsafe { Alloc.alloc(layout) };
            assert!(!block.is_null());
            assert_eq!(block as usize % 64, 0);
            // SAFETY: a live block.
            assert_eq!(unsafe { mi_heap_of(block.cast()) }, own());
            // SAFETY: the block is live, of `layout`; grown in place or moved, still aligned.
            let grown = unsafe { Alloc.realloc(block, layout, 40 * 1024) };
            assert_eq!(grown as usize % 64, 0);
            // SAFETY: a live block.
            assert_eq!(
                unsafe { mi_heap_of(grown.cast()) },
                own(),
                "grown where it was made"
            );
            give_back();
            (
                grown as usize,
                Layout::from_size_align(40 * 1024, 64).unwrap(),
            )
        })
        .join()
        .unwrap();
        // SAFETY: the live block of that layout, freed once, on another thread.
        unsafe { Alloc.dealloc(block as *mut u8, layout) };
        // SAFETY: a zeroed block of a valid layout, freed at once.
        unsafe {
            let layout = Layout::from_size_align(100, 8).unwrap();
            let zeroed = Alloc.alloc_zeroed(layout);
            assert!(std::slice::from_raw_parts(zeroed, 100)
                .iter()
                .all(|&b| b == 0));
            Alloc.dealloc(zeroed, layout);
        }
    }
}
