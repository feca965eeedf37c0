//! A large body's own memory: an anonymous mapping the kernel may back with transparent
//! huge pages, given back to the system the moment the last piece of the body is dropped.
//!
//! Why not the heap: a 50 MiB upload copied into fresh heap memory took 12,800 page faults,
//! each zeroing a 4 KiB page — more than half of the router's CPU for an upload (perf: the
//! faults under the copy, not the copy) — and with 2 MiB pages it takes 25. And the
//! allocator kept a finished upload's pages resident until its next use; a mapping of its
//! own is given back when the body is dropped — but for one, kept a moment for the next
//! (`keep`).

use std::ptr::NonNull;
use std::sync::Mutex;
use std::time::Duration;

/// Bodies this long or longer are held in a mapping of their own (two huge pages).
pub(super) const MAPPED_MIN: usize = 4 << 20;

/// How long a finished large body's memory is kept for the next one (see [`keep`]).
const SPARE_FOR: Duration = Duration::from_secs(2);

/// Room for `cap` bytes, of which the first `len` are written.
pub(super) struct Mapped {
    /// Always `Some` until dropped (then handed to [`keep`]).
    region: Option<Region>,
    len: usize,
}

impl Mapped {
    /// Room for `cap` bytes (at least one): the spare region when it is large enough, else
    /// a new mapping; `None` when the system refuses one. Pages of a new mapping become
    /// resident only as they are written.
    pub(super) fn new(cap: usize) -> Option<Mapped> {
        let region = take(cap).or_else(|| Region::map(cap))?;
        Some(Mapped {
            region: Some(region),
            len: 0,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends `bytes`; `false` (nothing written) when they do not fit.
    pub(super) fn push(&mut self, bytes: &[u8]) -> bool {
        let Some(region) = &self.region else {
            return false;
        };
        if bytes.len() > region.cap - self.len {
            return false;
        }
        // SAFETY: `len + bytes.len() <= cap`, inside the mapping, which no slice of `bytes`
        // can overlap (it is owned here and not yet shared).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                region.ptr.as_ptr().add(self.len),
                bytes.len(),
            );
        }
        self.len += bytes.len();
        true
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        match &self.region {
            // SAFETY: the first `len` bytes of the mapping are written, and live as long
            // as `self`.
            Some(r) => unsafe { std::slice::from_raw_parts(r.ptr.as_ptr(), self.len) },
            None => &[],
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(region) = self.region.take() {
            keep(region);
        }
    }
}

/// An anonymous mapping of `cap` bytes, unmapped when dropped.
struct Region {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: the mapping is owned by this value alone; a `Mapped` writes it only through
// `&mut self` and reads it only through `&self`, like a `Vec<u8>`.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` gives no access to the bytes at all.
unsafe impl Sync for Region {}

impl Region {
    fn map(cap: usize) -> Option<Region> {
        let cap = cap.max(1);
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return None;
        }
        // Only advice: where huge pages are off, or refused, the body is held in small ones.
        #[cfg(target_os = "linux")]
        // SAFETY: `at..at + cap` is the mapping just made.
        unsafe {
            libc::madvise(at, cap, libc::MADV_HUGEPAGE);
        }
        let ptr = NonNull::new(at.cast::<u8>())?;
        Some(Region { ptr, cap })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no `Mapped` holds it any more.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.cap);
        }
    }
}

/// The last finished large body's region, with a count of the regions kept so far: its
/// pages are resident and need no zeroing, which a fresh region's do (in a VM, the larger
/// part of an upload's cost). One at most, for [`SPARE_FOR`].
static SPARE: Mutex<(u64, Option<Region>)> = Mutex::new((0, None));

/// Keeps `region` as the spare for [`SPARE_FOR`] when there is none and a runtime to
/// time it; otherwise it is unmapped now.
fn keep(region: Region) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let kept = {
        let Ok(mut spare) = SPARE.lock() else {
            return;
        };
        if spare.1.is_some() {
            return;
        }
        spare.0 += 1;
        spare.1 = Some(region);
        spare.0
    };
    runtime.spawn(async move {
        tokio::time::sleep(SPARE_FOR).await;
        let stale = match SPARE.lock() {
            Ok(mut spare) if spare.0 == kept => spare.1.take(),
            _ => None,
        };
        drop(stale);
    });
}

/// The spare region, when it holds `cap` bytes and not more than twice as many; a spare
/// that does not fit is unmapped, so that the spare and the bodies held never add up to
/// more than the bodies could hold.
fn take(cap: usize) -> Option<Region> {
    let spare = SPARE.lock().ok()?.1.take()?;
    (cap <= spare.cap && spare.cap / 2 <= cap).then_some(spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_fits_and_refuses_what_does_not() {
        let mut m = Mapped::new(5).unwrap();
        assert!(m.push(b"abc"));
        assert!(!m.push(b"def"), "past its room: nothing written");
        assert!(m.push(b"de"));
        assert_eq!(m.len(), 5);
        let body = bytes::Bytes::from_owner(m);
        assert_eq!(&body[..], b"abcde");
        assert_eq!(&body.slice(1..3)[..], b"bc");
    }

    #[tokio::test]
    async fn a_region_used_again_shows_only_its_new_bytes() {
        let mut first = Mapped::new(MAPPED_MIN).unwrap();
        assert!(first.push(&vec![b'a'; MAPPED_MIN]));
        drop(first);
        let mut next = Mapped::new(MAPPED_MIN).unwrap();
        assert_eq!(next.as_ref(), b"");
        assert!(next.push(b"bb"));
        assert_eq!(bytes::Bytes::from_owner(next).as_ref(), b"bb");
    }
}
