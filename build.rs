//! The release binary's serving path, put together at the start of its machine code:
//! `link/hot.ld` (written by `scripts/hot-code.sh`) lists the functions a served request runs,
//! then those startup and failing machines run, and the linker places them first, so that a
//! request after an idle spell touches about a quarter fewer pages of code
//! (docs/perf/README.md, "Pages a request touches") and startup maps 4 MB less of it.
//!
//! The serving path starts on a 2 MiB boundary, and the binary moves it onto a transparent
//! huge page when it starts to serve (`src/huge_text.rs`, compiled under the
//! `labrouter_hot_text` cfg set here, with the script).
//!
//! On ELF targets (Linux) and release builds only; the script augments the linker's default
//! layout (`INSERT BEFORE .text`), which lld (Rust's default linker here) and GNU ld accept.
//! `LABROUTER_NO_HOT_CODE=1` leaves it out, for linkers that do not (mold, gold).

use std::collections::hash_map::DefaultHasher;
use std::env;
use std::hash::{Hash, Hasher};
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link/hot.ld");
    println!("cargo:rerun-if-env-changed=LABROUTER_NO_HOT_CODE");
    println!("cargo::rustc-check-cfg=cfg(labrouter_hot_text)");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let off = env::var_os("LABROUTER_NO_HOT_CODE").is_some_and(|v| v != "0" && !v.is_empty());
    if !linux || !release || off {
        return;
    }
    // Cargo always sets it; without it the binary is linked as before.
    let Some(dir) = env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let script = Path::new(&dir).join("link").join("hot.ld");
    println!(
        "cargo:rustc-link-arg-bin=labrouter=-Wl,--script={}",
        script.display()
    );
    println!("cargo:rustc-cfg=labrouter_hot_text");
    // The link arg names the file, not what is in it: a changed list must relink too.
    let mut h = DefaultHasher::new();
    std::fs::read(&script).unwrap_or_default().hash(&mut h);
    println!("cargo:rustc-env=LABROUTER_HOT_LD={:016x}", h.finish());
}
