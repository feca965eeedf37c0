//! Messages and verdicts read from Redis: outside input, validated and clamped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::*;

#[test]
fn a_published_message_reads_back() {
    let m = br#"{"m":"http://gpu-box.local:11434/v1","g":7,"s":"open","c":120000,"l":90000,"n":"mac-mini","i":"abc","r":"connection refused","f":3}"#;
    let h = Heard::parse(m).unwrap();
    assert_eq!(h.share, "http://gpu-box.local:11434/v1");
    assert_eq!((h.generation, h.instance.as_str()), (7, "abc"));
    assert_eq!(h.adopted.state, Phase::Open);
    assert_eq!(h.adopted.cooldown, Duration::from_secs(120));
    assert_eq!(h.adopted.left, Duration::from_secs(90));
    assert_eq!(&*h.adopted.node, "mac-mini");
    assert_eq!(h.adopted.failures, 3);
}

#[test]
fn garbage_is_refused_with_what_was_wrong() {
    let cases: &[(&[u8], &str)] = &[
        (b"not json", "not JSON"),
        (br#"{"g":1,"s":"open","c":1,"l":1,"n":"a"}"#, "machine key"),
        (
            br#"{"m":"u","g":"seven","s":"open","c":1,"l":1,"n":"a"}"#,
            "generation",
        ),
        (
            br#"{"m":"u","g":0,"s":"open","c":1,"l":1,"n":"a"}"#,
            "generation",
        ),
        (
            br#"{"m":"u","g":-4,"s":"open","c":1,"l":1,"n":"a"}"#,
            "generation",
        ),
        (
            br#"{"m":"u","g":1,"s":"banana","c":1,"l":1,"n":"a"}"#,
            "'banana'",
        ),
        (
            br#"{"m":"u","g":1,"s":"half_open","c":1,"l":1,"n":"a"}"#,
            "not open",
        ),
        (br#"{"m":"u","g":1,"s":"open","l":1,"n":"a"}"#, "(c)"),
        (br#"{"m":"u","g":1,"s":"open","c":1,"l":1}"#, "node name"),
        (
            br#"{"m":"u","g":1,"s":"open","c":1,"l":1,"n":"a b\n"}"#,
            "node name",
        ),
    ];
    for (bytes, says) in cases {
        let e = Heard::parse(bytes).unwrap_err();
        assert!(
            e.contains(says),
            "{} -> {e}",
            String::from_utf8_lossy(bytes)
        );
    }
    let huge = vec![b' '; MAX_MESSAGE + 1];
    assert!(Heard::parse(&huge).unwrap_err().contains("more than"));
}

#[test]
fn absurd_numbers_are_clamped_not_believed() {
    let m = br#"{"m":"u","g":3,"s":"open","c":1e30,"l":1e300,"n":"a","f":1e12,"r":"x"}"#;
    let h = Heard::parse(m).unwrap();
    assert_eq!(h.adopted.cooldown, crate::registry::SPAN_MAX);
    assert_eq!(h.adopted.left, crate::registry::SPAN_MAX);
    assert_eq!(h.adopted.failures, u32::MAX);
    for negative in [
        br#"{"m":"u","g":3,"s":"open","c":-5,"l":1,"n":"a"}"#.as_slice(),
        br#"{"m":"u","g":3,"s":"open","c":5,"l":-1,"n":"a"}"#,
        br#"{"m":"u","g":3,"s":"open","c":5,"l":1,"n":"a","f":-1}"#,
    ] {
        assert!(
            Heard::parse(negative).is_err(),
            "{}",
            String::from_utf8_lossy(negative)
        );
    }
}

#[test]
fn a_long_reason_is_bounded() {
    let reason = "x".repeat(5000);
    let m = format!(r#"{{"m":"u","g":3,"s":"closed","c":1,"l":0,"n":"a","r":"{reason}"}}"#);
    let h = Heard::parse(m.as_bytes()).unwrap();
    assert!(h.adopted.reason.chars().count() <= crate::text::MAX_CHARS + 1);
}
