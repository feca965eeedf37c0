//! A drip's waits on the kernel's high-resolution timers (a timerfd), for benchmarks: tokio's
//! timer wheel fires on whole milliseconds, so a 20 ms wait lasts 20–21 ms by where in its
//! millisecond the request came — up to a millisecond of noise in the difference between a
//! direct and a proxied stream's first chunk, where the goal is 0.2 ms. Not for tests: it
//! ignores tokio's paused clock.

use std::io;
use std::time::Duration;

/// A one-shot kernel timer, armed again for each wait (one per stream).
pub(super) struct Precise {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl Precise {
    /// A timer; `Unsupported` off Linux.
    #[cfg(target_os = "linux")]
    pub(super) fn new() -> io::Result<Precise> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: timerfd_create takes no pointers; the descriptor it returns is owned here.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let interest = tokio::io::Interest::READABLE;
        // SAFETY: the AsyncFd owns `fd`, so it stays open and the same until it is dropped.
        let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, interest) }?;
        Ok(Precise { fd })
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn new() -> io::Result<Precise> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Waits `d` (to the microsecond, plus the wake-up).
    #[cfg(target_os = "linux")]
    pub(super) async fn sleep(&self, d: Duration) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if d.is_zero() {
            return Ok(()); // a zero expiry would disarm the timer, not fire it
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; a null old value is allowed.
        let set =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.fd.readable().await?;
            // Reading the expiry count clears the readiness; WouldBlock: not yet expired.
            let read = ready.try_io(|fd| {
                let mut expiries = [0u8; 8];
                // SAFETY: reads at most 8 bytes into an 8-byte buffer.
                let n = unsafe { libc::read(fd.as_raw_fd(), expiries.as_mut_ptr().cast(), 8) };
                match n {
                    8 => Ok(()),
                    _ => Err(io::Error::last_os_error()),
                }
            });
            if let Ok(done) = read {
                return done;
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) async fn sleep(&self, _d: Duration) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}
