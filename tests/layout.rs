//! The shape of the source, checked as the house style asks: no import circles between the
//! files `scripts/check-imports.sh` reads, and a module map in `src/lib.rs` that lists every
//! module. These read files and run the script; nothing is served.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn check_imports(args: &[&str]) -> Output {
    let root = env!("CARGO_MANIFEST_DIR");
    Command::new("bash")
        .arg(Path::new(root).join("scripts/check-imports.sh"))
        .args(args)
        .output()
        .expect("bash runs scripts/check-imports.sh")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A crate of `files` (path under src, text) in a temporary directory.
fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn the_import_check_finds_a_circle_between_two_sibling_files_and_names_both() {
    let dir = crate_of(&[
        ("lib.rs", "pub mod a;\n"),
        ("a.rs", "mod b;\nmod c;\npub struct Top;\n"),
        ("a/b.rs", "use super::c::C;\npub struct B(pub C);\n"),
        (
            "a/c.rs",
            "pub struct C;\npub fn f() { let _ = super::b::B(C); }\n",
        ),
    ]);
    let out = check_imports(&["--src", dir.path().to_str().unwrap()]);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("circle in crate::a: b <-> c"), "{text}");
    assert!(text.contains("a/b.rs:1 ->"), "{text}");
    assert!(text.contains("a/c.rs:2 ->"), "{text}");
}

#[test]
fn a_parent_and_its_own_children_using_each_other_is_no_circle() {
    let dir = crate_of(&[
        ("lib.rs", "pub mod a;\npub mod d;\n"),
        ("a.rs", "mod b;\npub use b::B;\npub struct Top;\n"),
        ("a/b.rs", "use super::Top;\npub struct B(pub Top);\n"),
        ("d.rs", "use crate::a::B;\n#[cfg(test)]\nmod tests;\n"),
        ("d/tests.rs", "use crate::d;\n"),
    ]);
    let out = check_imports(&["--src", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

#[test]
fn a_circle_through_a_child_and_another_module_is_found_between_the_two_modules() {
    let dir = crate_of(&[
        ("lib.rs", "pub mod a;\npub mod d;\n"),
        ("a.rs", "mod b;\npub struct Top;\n"),
        ("a/b.rs", "pub fn f() -> crate::d::D { crate::d::D }\n"),
        // The import that closes the circle follows a nested group.
        (
            "d.rs",
            "pub struct D;\nuse crate::{d::{D as Here}, a::Top};\n",
        ),
    ]);
    let out = check_imports(&["--src", dir.path().to_str().unwrap()]);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("circle in crate: a <-> d"), "{text}");
}

#[test]
fn registry_and_route_files_import_each_other_in_no_circle() {
    let out = check_imports(&["src/registry", "src/route"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

#[test]
fn every_module_of_the_library_is_on_its_module_map() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let map: String = lib
        .lines()
        .filter(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    let missing: Vec<&str> = modules
        .into_iter()
        .filter(|m| !map.contains(&format!("[`{m}`]")) && !map.contains(&format!("[`mod@{m}`]")))
        .collect();
    assert!(missing.is_empty(), "not on src/lib.rs's map: {missing:?}");
}
