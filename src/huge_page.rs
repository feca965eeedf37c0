//! Moving a range of this process's memory onto transparent huge pages, in place: the same
//! bytes at the same addresses, mapped by one page table entry for each 2 MiB instead of 512.
//!
//! The `labrouter` binary moves its serving path's machine code so, and its first 2 MiB of
//! read-only data (`src/huge_text.rs`):
//! on a virtual machine, after an idle spell, the first touch of each 4 KiB page costs
//! microseconds (docs/perf/README.md, "The serving path on a huge page").
//!
//! Where it cannot be done, nothing is changed and the reason is returned: no transparent
//! huge page to be had (`never`, or none free), a kernel before 6.1 (no `MADV_COLLAPSE`), or
//! executable memory denied (systemd's `MemoryDenyWriteExecute=`). Code is moved on x86-64
//! alone, whose instruction cache needs no upkeep after a copy.

use std::ffi::c_void;
use std::ptr;

/// A huge page (x86-64 and aarch64 with 4 KiB base pages).
pub const HUGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1): back the range with huge pages now, or fail.
const MADV_COLLAPSE: libc::c_int = 25;

/// Moves `[start, start + len)` onto huge pages in place, to be mapped with `prot` after.
/// `start` and `len` are multiples of [`HUGE`] and the range is mapped and readable.
///
/// # Safety
/// The range is memory this process mapped and nothing writes to while it moves (any
/// thread may read or run it: the bytes stay as they are). What it mapped is replaced by
/// an anonymous private mapping: a file behind it is no longer read or written through it.
pub unsafe fn move_in_place(
    start: usize,
    len: usize,
    prot: libc::c_int,
) -> Result<(), &'static str> {
    if !start.is_multiple_of(HUGE) || !len.is_multiple_of(HUGE) || len == 0 {
        return Err("the range is not whole huge pages");
    }
    // Elsewhere (aarch64) code copied through the data cache needs the instruction cache
    // told, which this does not do.
    if prot & libc::PROT_EXEC != 0 && !cfg!(target_arch = "x86_64") {
        return Err("code is moved on x86-64 only");
    }
    // SAFETY: a fresh anonymous mapping, aligned within; every path below either moves it
    // over the range or unmaps it. The copy reads `len` mapped, readable bytes (the caller's
    // word) into `len` bytes of it.
    unsafe {
        let raw = libc::mmap(
            ptr::null_mut(),
            len + HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if raw == libc::MAP_FAILED {
            return Err("no address space for a copy");
        }
        let raw = raw as usize;
        let copy = raw.next_multiple_of(HUGE);
        if copy > raw {
            libc::munmap(raw as *mut c_void, copy - raw);
        }
        libc::munmap((copy + len) as *mut c_void, raw + HUGE - copy);
        let copy = copy as *mut c_void;
        let undo = |why| {
            libc::munmap(copy, len);
            Err(why)
        };
        libc::madvise(copy, len, libc::MADV_HUGEPAGE);
        ptr::copy_nonoverlapping(start as *const u8, copy.cast::<u8>(), len);
        if libc::madvise(copy, len, MADV_COLLAPSE) != 0 {
            return undo("no transparent huge page to be had");
        }
        if libc::mprotect(copy, len, prot) != 0 {
            return undo("the protection is denied (executable memory?)");
        }
        let moved = libc::mremap(
            copy,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            start as *mut c_void,
        );
        if moved == libc::MAP_FAILED {
            return undo("the copy could not take the range's place");
        }
    }
    Ok(())
}

/// How long the read-only segment that starts at `base` is (its size in memory), by the
/// program headers of the ELF header there: the first loaded segment must start at `base`
/// and be readable only (neither writable nor executable).
///
/// # Safety
/// `base` is where this process mapped an ELF file's first page (its header), as the
/// linker's `__ehdr_start` is for the program itself.
pub unsafe fn read_only_head(base: usize) -> Result<usize, &'static str> {
    // SAFETY: the caller's word: an ELF header is mapped at `base`.
    let header = unsafe { &*(base as *const libc::Elf64_Ehdr) };
    if header.e_ident[..4] != *b"\x7fELF" {
        return Err("no ELF header there");
    }
    let (offset, count) = (header.e_phoff as usize, usize::from(header.e_phnum));
    let size = std::mem::size_of::<libc::Elf64_Phdr>();
    if usize::from(header.e_phentsize) != size || offset.saturating_add(count * size) > 4096 {
        return Err("the program headers are not in the header's page");
    }
    // SAFETY: `count` program headers of the checked size, inside the header's page.
    let headers =
        unsafe { std::slice::from_raw_parts((base + offset) as *const libc::Elf64_Phdr, count) };
    let first = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD)
        .min_by_key(|h| h.p_vaddr);
    match first {
        Some(h) if h.p_vaddr == 0 && h.p_offset == 0 && h.p_flags == libc::PF_R => {
            usize::try_from(h.p_memsz).map_err(|_| "the first segment is too large")
        }
        _ => Err("the first segment is not read-only data from the file's start"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's mappings: (start, end, permissions, path).
    #[cfg(target_arch = "x86_64")]
    fn maps() -> Vec<(usize, usize, String, String)> {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .map(|l| {
                let mut f = l.split_whitespace();
                let (a, b) = f.next().unwrap().split_once('-').unwrap();
                let perms = f.next().unwrap().to_string();
                let path = f.nth(3).unwrap_or("").to_string();
                let hex = |s| usize::from_str_radix(s, 16).unwrap();
                (hex(a), hex(b), perms, path)
            })
            .collect()
    }

    /// The `AnonHugePages:` (KiB) of the mapping that starts at `start`.
    #[cfg(target_arch = "x86_64")]
    fn anon_huge_kb(start: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let head = format!("{start:x}-");
        let tail = smaps.split_once(&head).map(|(_, t)| t).unwrap();
        let line = tail
            .lines()
            .find(|l| l.starts_with("AnonHugePages:"))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The first whole huge page of this test binary's machine code (its own file).
    #[cfg(target_arch = "x86_64")]
    fn own_code_window() -> usize {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        let (start, end, _, _) = maps()
            .into_iter()
            .find(|(a, b, perms, path)| {
                perms.starts_with("r-x") && *path == exe && b / HUGE > a.div_ceil(HUGE)
            })
            .expect("a test binary with 2 MiB of machine code");
        let window = start.next_multiple_of(HUGE);
        assert!(window + HUGE <= end);
        window
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn this_tests_own_machine_code_moves_onto_a_huge_page_and_keeps_running() {
        let window = own_code_window();
        // SAFETY: mapped and readable (r-x).
        let before = unsafe { std::slice::from_raw_parts(window as *const u8, HUGE) }.to_vec();
        // SAFETY: this binary's code, which nothing writes; other tests may run it meanwhile.
        let moved = unsafe { move_in_place(window, HUGE, libc::PROT_READ | libc::PROT_EXEC) };
        assert_eq!(
            moved,
            Ok(()),
            "needs transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled: madvise or always)"
        );
        // SAFETY: as above; still mapped, now anonymous.
        let after = unsafe { std::slice::from_raw_parts(window as *const u8, HUGE) };
        assert!(before == after, "the bytes moved");
        assert_eq!(anon_huge_kb(window), 2048);
        let (a, b, perms, path) = maps().into_iter().find(|m| m.0 == window).unwrap();
        assert_eq!(
            (a, b, &perms[..3], path.as_str()),
            (window, window + HUGE, "r-x", "")
        );
        // Code on both sides of it (this test, the harness) still runs.
        assert_eq!(format!("{}", 6 * 7), "42");
    }

    /// Run by the test below in a process of its own, where executable memory is denied as
    /// systemd's `MemoryDenyWriteExecute=` denies it (Linux's `PR_SET_MDWE`, 6.3).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn when_executable_memory_is_denied_the_code_stays_where_it_is_and_data_moves() {
        if std::env::var_os("LABROUTER_TEST_MDWE").is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "huge_page::tests::when_executable_memory_is_denied_the_code_stays_where_it_is_and_data_moves",
                ])
                .args(["--nocapture", "--test-threads", "1"])
                .env("LABROUTER_TEST_MDWE", "1")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // It ran there (not filtered out) and passed.
            assert!(said.contains("1 passed"), "{said}");
            return;
        }
        const PR_SET_MDWE: libc::c_int = 65;
        const PR_MDWE_REFUSE_EXEC_GAIN: libc::c_ulong = 1;
        // SAFETY: a prctl with plain arguments; it only restricts this (child) process.
        let set = unsafe { libc::prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) };
        assert_eq!(set, 0, "PR_SET_MDWE (Linux 6.3)");
        let window = own_code_window();
        let before = maps();
        // SAFETY: this binary's code, which nothing writes.
        let moved = unsafe { move_in_place(window, HUGE, libc::PROT_READ | libc::PROT_EXEC) };
        assert_eq!(moved, Err("the protection is denied (executable memory?)"));
        assert_eq!(maps(), before, "nothing mapped or unmapped");
        // Read-only data still moves: nothing of it becomes executable.
        move_read_only_data();
    }

    #[test]
    fn read_only_data_moves_onto_a_huge_page() {
        move_read_only_data();
    }

    /// Read-only data (no executable memory: allowed on any architecture, and where such
    /// memory is denied) moves with its bytes and stays read-only.
    fn move_read_only_data() {
        // SAFETY: a fresh private anonymous mapping, unmapped at the end.
        let raw = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * HUGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED);
        let window = (raw as usize).next_multiple_of(HUGE);
        // SAFETY: `window..window + HUGE` lies inside the mapping above.
        let data = unsafe { std::slice::from_raw_parts_mut(window as *mut u8, HUGE) };
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::mprotect(window as *mut c_void, HUGE, libc::PROT_READ) },
            0
        );
        // SAFETY: read-only data of this test alone, which nothing writes.
        assert_eq!(
            unsafe { move_in_place(window, HUGE, libc::PROT_READ) },
            Ok(())
        );
        // SAFETY: still mapped (read-only) at the same place.
        let after = unsafe { std::slice::from_raw_parts(window as *const u8, HUGE) };
        assert!(after.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(anon_huge_kb(window), 2048);
            let (_, end, perms, _) = maps().into_iter().find(|m| m.0 == window).unwrap();
            assert_eq!((end, &perms[..3]), (window + HUGE, "r--"));
        }
        // SAFETY: the mapping made above, whole.
        assert_eq!(unsafe { libc::munmap(raw, 2 * HUGE) }, 0);
    }

    /// The test binary's own first segment, read from its program headers, is the first
    /// read-only mapping of its file that /proc/self/maps shows.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_read_only_head_is_read_from_the_program_headers() {
        extern "C" {
            static __ehdr_start: u8;
        }
        let base = ptr::addr_of!(__ehdr_start) as usize;
        // SAFETY: the linker's symbol for this program's own ELF header.
        let len = unsafe { read_only_head(base) }.unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mapped: usize = maps()
            .into_iter()
            .skip_while(|m| m.0 != base)
            .take_while(|m| m.2.starts_with("r--") && *m.3 == *exe.to_string_lossy())
            .map(|m| m.1 - m.0)
            .sum();
        assert_eq!(len.next_multiple_of(4096), mapped);
        let not_elf = [0u8; 4096];
        // SAFETY: a readable page that is no ELF header.
        let r = unsafe { read_only_head(not_elf.as_ptr() as usize) };
        assert_eq!(r, Err("no ELF header there"));
    }

    #[test]
    fn a_range_not_of_whole_huge_pages_is_left_as_it_is() {
        let x = [7u8; 64];
        let at = x.as_ptr() as usize;
        // SAFETY: refused before anything is touched.
        let r = unsafe { move_in_place(at, HUGE, libc::PROT_READ) };
        assert_eq!(r, Err("the range is not whole huge pages"));
        // SAFETY: refused (no length) before anything is touched.
        let r = unsafe { move_in_place(at.next_multiple_of(HUGE), 0, libc::PROT_READ) };
        assert_eq!(r, Err("the range is not whole huge pages"));
        assert_eq!(x, [7u8; 64]);
    }
}
