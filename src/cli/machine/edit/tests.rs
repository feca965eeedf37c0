//! The text edits of `machine add`: sections found where a reader would say they end, entries
//! written in the section's own style, and every byte of the file kept.

use super::*;

/// A registry as people write them: comments at column 0 and indented, blank lines, flow
/// and block entries, a trailing commented-out entry, inline comments on key lines.
const FILE: &str = "\
# my lab
server:
  listen: 127.0.0.1:8080   # loopback

machines:                  # every box
  # The GPU box.
  gpu-box:
    url: http://gpu-box.local:11434/v1
    api: ollama

# column-0 comment inside the section
  cpu-box:
    url: http://cpu-box.local:8080/v1
  #   mac-studio:
  #     url: http://mac-studio.local:1234/v1

# models below
models:
  coder:  { machine: gpu-box, name: \"qwen3-coder:30b\" }   # the big one
  small:  { machine: cpu-box, name: \"qwen3:4b\" }

routes:
  - name: chat
    chain: [coder, small]
";

#[test]
fn a_block_section_ends_after_its_last_indented_line_comments_included() {
    let s = section(FILE, "machines").unwrap();
    let before = &FILE[..s.insert_at];
    assert!(
        before.ends_with("  #     url: http://mac-studio.local:1234/v1\n"),
        "{before}"
    );
    assert_eq!(
        (s.indent, s.field_indent, s.flow, s.needs_newline),
        (2, 4, false, false)
    );
    assert_eq!(s.eol, "\n");
    assert!(FILE[s.insert_at..].starts_with("\n# models below\nmodels:"));
}

#[test]
fn a_section_of_one_line_entries_gets_one_line_entries() {
    let s = section(FILE, "models").unwrap();
    assert!(FILE[..s.insert_at].ends_with("name: \"qwen3:4b\" }\n"));
    assert!(FILE[s.insert_at..].starts_with("\nroutes:"));
    assert!(s.flow);
    let line = s.entry(
        "qwen3-4b-box2",
        &[("machine", "box2".into()), ("name", quoted("qwen3:4b"))],
    );
    assert_eq!(
        line,
        "  qwen3-4b-box2: { machine: box2, name: \"qwen3:4b\" }\n"
    );
}

#[test]
fn a_block_entry_is_indented_as_its_neighbours() {
    let s = section(FILE, "machines").unwrap();
    let entry = s.entry(
        "box2",
        &[
            ("url", scalar("http://127.0.0.1:9/v1")),
            ("api", "ollama".into()),
        ],
    );
    assert_eq!(
        entry,
        "  box2:\n    url: http://127.0.0.1:9/v1\n    api: ollama\n"
    );
    let four =
        "machines:\n    a:\n        url: http://a/v1\nmodels:\n    m: {machine: a, name: x}\n";
    let s = section(four, "machines").unwrap();
    assert_eq!((s.indent, s.field_indent), (4, 8));
}

#[test]
fn inserting_keeps_every_old_byte_in_place() {
    let m = section(FILE, "machines").unwrap();
    let d = section(FILE, "models").unwrap();
    let add_m = m.addition(&[m.entry("box2", &[("url", scalar("http://127.0.0.1:9/v1"))])]);
    let add_d = d.addition(&[d.entry(
        "x-box2",
        &[("machine", "box2".into()), ("name", quoted("x"))],
    )]);
    // Given in either order, both land at their offsets of the original text.
    let new = insert(FILE, &[add_d.clone(), add_m.clone()]);
    assert_eq!(new, insert(FILE, &[add_m.clone(), add_d.clone()]));
    assert!(new.starts_with(&FILE[..m.insert_at]));
    let without = new.replacen(&add_m.1, "", 1).replacen(&add_d.1, "", 1);
    assert_eq!(without, FILE);
    let reg = crate::registry::Registry::parse(&new, "r.yaml").unwrap();
    assert_eq!(reg.machines.len(), 3);
    assert_eq!(reg.models.len(), 3);
}

#[test]
fn a_file_without_a_last_newline_or_with_crlf_keeps_its_ways() {
    let text =
        "machines:\r\n  a:\r\n    url: http://a/v1\r\nmodels:\r\n  m: { machine: a, name: x }";
    let d = section(text, "models").unwrap();
    assert_eq!(
        (d.eol, d.needs_newline, d.insert_at),
        ("\r\n", true, text.len())
    );
    let (at, add) = d.addition(&[d.entry("n", &[("machine", "a".into())])]);
    assert_eq!(add, "\r\n  n: { machine: a }\r\n");
    let new = insert(text, &[(at, add)]);
    assert!(new.starts_with(text));
    let m = section(text, "machines").unwrap();
    assert_eq!(
        m.entry("b", &[("url", "u".into())]),
        "  b:\r\n    url: u\r\n"
    );
}

#[test]
fn a_flow_section_is_refused_with_its_line() {
    let text =
        "# lab\nmachines: { a: { url: http://a/v1 } }\nmodels:\n  m: { machine: a, name: x }\n";
    let err = section(text, "machines").unwrap_err();
    assert!(
        err.starts_with("line 2: `machines:` is written in flow style"),
        "{err}"
    );
    assert!(err.contains("add the machine by hand"), "{err}");
    let next_line = "machines:\n  {a: {url: http://a/v1}}\n";
    let err = section(next_line, "machines").unwrap_err();
    assert!(err.starts_with("line 2: "), "{err}");
    let empty = "machines: {}\n";
    assert!(section(empty, "machines")
        .unwrap_err()
        .contains("flow style"));
}

#[test]
fn a_missing_or_empty_section_is_refused() {
    assert!(section("models:\n  m: {}\n", "machines")
        .unwrap_err()
        .contains("no top-level `machines:`"));
    // A key deeper in the file is not the section.
    assert!(section("x:\n  machines:\n    a: {}\n", "machines").is_err());
    // `machinesx:` is another key.
    assert!(section("machinesx:\n  a: {}\n", "machines").is_err());
    let err = section("machines:\n# nothing\nmodels:\n", "machines").unwrap_err();
    assert!(err.contains("line 1: `machines:` has no entries"), "{err}");
}

#[test]
fn scalars_are_plain_when_they_read_the_same_else_quoted() {
    assert_eq!(
        scalar("http://gpu-box.local:11434/v1"),
        "http://gpu-box.local:11434/v1"
    );
    assert_eq!(scalar("http://a/x,y/v1"), "\"http://a/x,y/v1\"");
    assert_eq!(scalar("null"), "\"null\"");
    assert_eq!(scalar("a:"), "\"a:\"");
    assert_eq!(quoted("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
    let reg_text = format!("machines:\n  a: {{ url: {} }}\nmodels:\n  m: {{ machine: a, name: {} }}\nroutes:\n  - name: r\n    chain: [m]\n", scalar("http://a/x,y/v1"), quoted("we\"ird\\name"));
    let reg = crate::registry::Registry::parse(&reg_text, "r.yaml").unwrap();
    assert_eq!(reg.machines.iter().next().unwrap().url, "http://a/x,y/v1");
    assert_eq!(reg.models.iter().next().unwrap().backend, "we\"ird\\name");
}
