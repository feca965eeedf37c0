//! The serving path's machine code on a huge page, and the read-only data that starts the
//! binary on another.
//!
//! `link/hot.ld` puts the functions a served request runs together at the start of the
//! machine code, on a 2 MiB boundary, and what startup and failing machines run right after
//! them. At startup, while this is the only thread, the huge pages that hold the serving path
//! are moved onto transparent huge pages in place (`labrouter::huge_page`): a request after
//! an idle spell then finds its code behind one page table entry, not ~220
//! (docs/perf/README.md, "The serving path on a huge page").
//!
//! The binary's first 2 MiB (its first segment: the ELF header, the dynamic symbols and
//! relocations, the serving path's jump tables (`.rodata.hot`) and the constants, which
//! `link/hot.ld` puts before the exception tables) are moved the same way, read-only: nothing
//! there becomes executable, so this one is done under systemd's `MemoryDenyWriteExecute=` as
//! well.
//!
//! Where that cannot be done the code (or data) stays as the loader mapped it.
//! `LABROUTER_NO_HUGE_TEXT=1` leaves both so as well: profilers that name code through its
//! file mapping (`perf`) see an anonymous range otherwise (scripts/flame.sh and
//! scripts/hot-code.sh set it).

use std::ptr;

use labrouter::huge_page::{self, HUGE};

extern "C" {
    // link/hot.ld's, around the serving path.
    static __labrouter_hot_text: u8;
    static __labrouter_hot_text_end: u8;
    // The linker's: the end of the machine code, and the ELF header (the binary's first byte).
    static etext: u8;
    static __ehdr_start: u8;
}

/// What startup moved, or why not, to be told once logging is up.
pub struct Moved {
    code: Result<usize, &'static str>,
    data: Result<usize, &'static str>,
}

/// Moves the serving path's code and the first read-only data onto huge pages, unless
/// `LABROUTER_NO_HUGE_TEXT` asks for everything to stay as the loader mapped it.
pub fn remap() -> Moved {
    let off = std::env::var_os("LABROUTER_NO_HUGE_TEXT").is_some_and(|v| !v.is_empty() && v != "0");
    if off {
        let why = Err("LABROUTER_NO_HUGE_TEXT is set");
        return Moved {
            code: why,
            data: why,
        };
    }
    Moved {
        code: code(),
        data: read_only_data(),
    }
}

impl Moved {
    /// A debug line for each: moved (how many bytes), or why not.
    pub fn log(self) {
        match self.code {
            Ok(bytes) => tracing::debug!(bytes, "the serving path's code is on a huge page"),
            Err(why) => tracing::debug!("the serving path's code stays on small pages: {why}"),
        }
        match self.data {
            Ok(bytes) => tracing::debug!(bytes, "the first read-only data is on a huge page"),
            Err(why) => tracing::debug!("the read-only data stays on small pages: {why}"),
        }
    }
}

/// Moves the serving path's code onto huge pages: how many bytes, or why not.
fn code() -> Result<usize, &'static str> {
    let start = ptr::addr_of!(__labrouter_hot_text) as usize;
    let end = ptr::addr_of!(__labrouter_hot_text_end) as usize;
    let text_end = ptr::addr_of!(etext) as usize;
    let len = end.saturating_sub(start).next_multiple_of(HUGE);
    if start + len > text_end {
        return Err("the machine code ends inside the serving path's last huge page");
    }
    // SAFETY: this binary's machine code (between link/hot.ld's symbols and the end of the
    // text), which nothing writes, moved while no other thread runs.
    unsafe { huge_page::move_in_place(start, len, libc::PROT_READ | libc::PROT_EXEC)? };
    Ok(len)
}

/// Moves the binary's first huge page, read-only data, onto a huge page: how many bytes, or
/// why not. Only when the binary starts on a huge page boundary with a read-only segment
/// (neither writable nor executable) that holds the whole 2 MiB.
fn read_only_data() -> Result<usize, &'static str> {
    let base = ptr::addr_of!(__ehdr_start) as usize;
    if !base.is_multiple_of(HUGE) {
        return Err("the binary is not loaded on a huge page boundary");
    }
    // SAFETY: the linker's symbol for this binary's own ELF header.
    if unsafe { huge_page::read_only_head(base)? } < HUGE {
        return Err("the first segment is shorter than a huge page");
    }
    // SAFETY: the first 2 MiB of this binary's read-only first segment, which nothing
    // writes, moved while no other thread runs.
    unsafe { huge_page::move_in_place(base, HUGE, libc::PROT_READ)? };
    Ok(HUGE)
}
