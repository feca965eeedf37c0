//! Unit tests of the `server:` bounds on what a client may hold: `body_timeout` (how long a
//! request body may take to arrive), `max_detached` and `max_detached_bytes` (keyed requests
//! that run on after their clients left).

use super::{assert_rejected_at, parse, secs, BASE};

/// `server:` with `lines` under it, then the base registry.
fn with_server(lines: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["server:".into()];
    v.extend(lines.iter().map(|s| s.to_string()));
    v.extend(BASE.iter().map(|s| s.to_string()));
    v
}

#[test]
fn body_timeout_and_detached_bounds_have_defaults_and_are_read() {
    let d = parse(&BASE.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .unwrap()
        .server;
    assert_eq!(d.body_timeout, secs(60));
    assert_eq!((d.max_detached, d.max_detached_bytes), (64, 64 << 20));
    let s = parse(&with_server(&[
        "  body_timeout: 2m",
        "  max_detached: 0",
        "  max_detached_bytes: 8MiB",
    ]))
    .unwrap()
    .server;
    assert_eq!(s.body_timeout, secs(120));
    assert_eq!(
        s.max_detached, 0,
        "0: no keyed request runs on without its client"
    );
    assert_eq!(s.max_detached_bytes, 8 << 20);
}

#[test]
fn bad_body_timeouts_and_detached_bounds_are_rejected_where_they_are() {
    let bad = |line: &str, needle: &str, says: &[&str]| {
        assert_rejected_at(&with_server(&[line]), 2, needle, says);
    };
    bad(
        "  body_timeout: 0s",
        "0s",
        &["server.body_timeout", "above zero"],
    );
    bad("  body_timeout: soon", "soon", &["server.body_timeout"]);
    bad(
        "  body_timeout: 2h",
        "2h",
        &["server.body_timeout", "at most 1h"],
    );
    bad(
        "  max_detached: 100001",
        "100001",
        &["server.max_detached", "from 0 to 100000"],
    );
    bad("  max_detached: -1", "-1", &[]);
    bad("  max_detached: many", "many", &[]);
    bad(
        "  max_detached_bytes: 0",
        "0",
        &["server.max_detached_bytes", "above zero"],
    );
    bad(
        "  max_detached_bytes: 64 megs",
        "64 megs",
        &["server.max_detached_bytes"],
    );
    bad(
        "  max_detached_bytes: 17GiB",
        "17GiB",
        &["server.max_detached_bytes", "at most"],
    );
}
