//! The serving path's machine code on a huge page.
//!
//! `link/hot.ld` puts the functions a served request runs together at the start of the
//! machine code, on a 2 MiB boundary, and what startup and failing machines run right after
//! them. At startup, while this is the only thread, the huge pages that hold the serving path
//! are moved onto transparent huge pages in place (`labrouter::huge_page`): a request after
//! an idle spell then finds its code behind one page table entry, not ~220
//! (docs/perf/README.md, "The serving path on a huge page").
//!
//! Where that cannot be done the code stays as the loader mapped it. `LABROUTER_NO_HUGE_TEXT=1`
//! leaves it so as well: profilers that name code through its file mapping (`perf`) see an
//! anonymous range otherwise (scripts/flame.sh and scripts/hot-code.sh set it).

use std::ptr;

use labrouter::huge_page::{self, HUGE};

extern "C" {
    // link/hot.ld's, around the serving path.
    static __labrouter_hot_text: u8;
    static __labrouter_hot_text_end: u8;
    // The linker's: the end of the machine code.
    static etext: u8;
}

/// Moves the serving path's code onto huge pages: how many bytes, or why not.
pub fn remap() -> Result<usize, &'static str> {
    if std::env::var_os("LABROUTER_NO_HUGE_TEXT").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err("LABROUTER_NO_HUGE_TEXT is set");
    }
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
