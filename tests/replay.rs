//! `labrouter replay` (docs/api.md "Command line", §9): determinism, the example traces, and named errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use labrouter::replay::{replay, Receipt, ReplayError};

const FLAKY_GPU: &str = include_str!("../examples/traces/flaky-gpu.json");
const PROBE_RECOVERY: &str = include_str!("../examples/traces/probe-recovery.json");

/// The docs/api.md "Command line" policy with the given events.
fn trace(events: &str) -> String {
    format!(
        r#"{{"breaker": {{"failure_threshold": 3, "cooldown": "20s", "backoff": 2.0,
             "max_cooldown": "15m", "success_threshold": 2}},
            "events": [{events}]}}"#
    )
}

fn error(json: &str) -> String {
    match replay(json) {
        Ok(r) => panic!("expected an error, got {}", r.to_json()),
        Err(e) => e.to_string(),
    }
}

/// (index, from, to) of every transition.
fn steps(r: &Receipt) -> Vec<(usize, &str, &str)> {
    let t = &r.run.transitions;
    t.iter()
        .map(|t| (t.index, t.from.as_str(), t.to.as_str()))
        .collect()
}

#[test]
fn the_same_trace_gives_byte_identical_receipts() {
    for json in [FLAKY_GPU, PROBE_RECOVERY] {
        let (a, b) = (replay(json).unwrap(), replay(json).unwrap());
        assert_eq!(a.to_json(), b.to_json());
        assert_eq!(a.sha256.len(), 64);
        assert!(a.sha256.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}

#[test]
fn flipping_one_failure_to_a_success_changes_the_receipt_and_hash() {
    let original = replay(FLAKY_GPU).unwrap();
    let flipped = FLAKY_GPU.replacen(
        r#""event": "failure", "reason": "timeout""#,
        r#""event": "success""#,
        1,
    );
    assert_ne!(flipped, FLAKY_GPU);
    let changed = replay(&flipped).unwrap();
    assert_ne!(changed.to_json(), original.to_json());
    assert_ne!(changed.sha256, original.sha256);
    // Two timeouts stay below the threshold: requests at 40s and 50s go through, and only
    // the failure at 71s (now the third in a row) opens the breaker.
    assert_eq!(steps(&changed)[0], (24, "closed", "open"));
    assert_eq!(changed.run.remote_attempts["gpu-box"], 9);
}

#[test]
fn the_spec_example_taken_literally_completes_a_call_twice() {
    // docs/api.md "Command line"'s three events admit one call and complete it twice.
    let e = error(&trace(
        r#"{"at_ms": 0, "machine": "search", "event": "request"},
           {"at_ms": 5, "machine": "search", "event": "failure", "reason": "timeout"},
           {"at_ms": 20030, "machine": "search", "event": "success"}"#,
    ));
    assert_eq!(e, "events[2]: no admitted call to complete on 'search'");
}

#[test]
fn the_spec_example_policy_opens_probes_and_counts_toward_two_successes() {
    let r = replay(&trace(
        r#"{"at_ms": 0, "machine": "search", "event": "request"},
           {"at_ms": 5, "machine": "search", "event": "failure", "reason": "timeout"},
           {"at_ms": 10, "machine": "search", "event": "request"},
           {"at_ms": 15, "machine": "search", "event": "failure", "reason": "timeout"},
           {"at_ms": 20, "machine": "search", "event": "request"},
           {"at_ms": 25, "machine": "search", "event": "failure", "reason": "timeout"},
           {"at_ms": 1000, "machine": "search", "event": "request"},
           {"at_ms": 20030, "machine": "search", "event": "request"},
           {"at_ms": 20030, "machine": "search", "event": "success"}"#,
    ))
    .unwrap();
    assert_eq!(steps(&r), [(5, "closed", "open"), (7, "open", "half_open")]);
    let open = &r.run.transitions[0];
    assert_eq!((open.at_ms, open.failures), (25, 3));
    assert_eq!(open.cooldown_until_ms, Some(20_025));
    assert_eq!(open.reason, "timeout");
    assert!(open.remote_attempted);
    assert!(!r.run.transitions[1].remote_attempted);
    assert_eq!(r.run.rejections.len(), 1);
    assert_eq!(r.run.rejections[0].skip, "circuit_open");
    assert_eq!(r.run.rejections[0].retry_after_ms, Some(19_025));
    assert_eq!(r.run.remote_attempts["search"], 4);
    assert_eq!(r.run.local_rejections["search"], 1);
    let s = &r.run.final_states["search"];
    assert_eq!((s.state.as_str(), s.probe_successes), ("half_open", 1));
    assert_eq!((s.cooldown_ms, s.open_until_ms), (20_000, None));
    assert_eq!(s.last_reason.as_deref(), Some("timeout"));
}

#[test]
fn flaky_gpu_opens_backs_off_and_recovers() {
    let r = replay(FLAKY_GPU).unwrap();
    let expected = [
        (11, "closed", "open"),
        (20, "open", "half_open"),
        (24, "half_open", "open"),
        (28, "open", "half_open"),
        (29, "half_open", "closed"),
    ];
    assert_eq!(steps(&r), expected);
    let until: Vec<_> = r
        .run
        .transitions
        .iter()
        .map(|t| t.cooldown_until_ms)
        .collect();
    // 30s after the third timeout; then 60s (doubled) after the failed probe.
    assert_eq!(until, [Some(65_000), None, Some(131_000), None, None]);
    let skips: Vec<_> = r.run.rejections.iter().map(|x| x.skip.as_str()).collect();
    assert_eq!(
        skips,
        [
            "circuit_open",
            "circuit_open",
            "probe_in_flight",
            "circuit_open"
        ]
    );
    assert_eq!(r.run.remote_attempts["gpu-box"], 7);
    assert_eq!(r.run.local_rejections["gpu-box"], 4);
    assert_eq!(r.run.local_rejections["cpu-box"], 0);
    for machine in ["gpu-box", "cpu-box"] {
        let s = &r.run.final_states[machine];
        assert_eq!((s.state.as_str(), s.consecutive_failures), ("closed", 0));
        assert_eq!((s.cooldown_ms, s.outstanding), (30_000, 0));
    }
}

#[test]
fn probe_recovery_survives_a_cancelled_probe_and_needs_two_successes() {
    let r = replay(PROBE_RECOVERY).unwrap();
    let expected = [
        (5, "closed", "open"),
        (13, "open", "half_open"),
        (21, "half_open", "closed"),
    ];
    assert_eq!(steps(&r), expected);
    // The cancel (14) released the lease: the next request (16) was admitted as a probe.
    let skips: Vec<_> = r
        .run
        .rejections
        .iter()
        .map(|x| (x.index, x.skip.as_str()))
        .collect();
    assert_eq!(skips, [(6, "circuit_open"), (14, "probe_in_flight")]);
    let gpu = &r.run.final_states["gpu-box"];
    assert_eq!(
        (gpu.state.as_str(), gpu.consecutive_failures),
        ("closed", 0)
    );
    let mac = &r.run.final_states["mac-mini"];
    assert_eq!(
        (mac.state.as_str(), mac.consecutive_failures),
        ("closed", 0)
    );
    assert_eq!(mac.last_reason.as_deref(), Some("HTTP 5xx"));
}

#[test]
fn an_invalid_policy_names_the_field() {
    let cases = [
        (r#""failure_threshold": 0"#, "breaker.failure_threshold: "),
        (r#""success_threshold": 1.5"#, "breaker.success_threshold: "),
        (r#""cooldown": "0s""#, "breaker.cooldown: "),
        (r#""cooldown": "soon""#, "breaker.cooldown: "),
        (r#""backoff": 0.5"#, "breaker.backoff: "),
        (r#""max_cooldown": 900"#, "breaker.max_cooldown: "),
        (r#""jitter": true"#, "breaker.jitter: unknown field"),
    ];
    for (field, prefix) in cases {
        let json = format!(r#"{{"breaker": {{{field}}}, "events": []}}"#);
        let e = error(&json);
        assert!(e.starts_with(prefix), "{field}: {e}");
    }
    let e = error(r#"{"breaker": {"cooldown": "20s", "max_cooldown": "10s"}, "events": []}"#);
    assert_eq!(
        e,
        "breaker.max_cooldown: must be at least breaker.cooldown (20s)"
    );
    // Defaults fill what is left out.
    assert!(replay(r#"{"events": []}"#).is_ok());
}

#[test]
fn a_bad_event_names_its_index() {
    let ok = r#"{"at_ms": 0, "machine": "m", "event": "request"}"#;
    let cases = [
        (
            r#"{"at_ms": 1, "machine": "m", "event": "explode"}"#,
            "events[1]: unknown event 'explode'; expected request, success, failure or cancel",
        ),
        (
            r#"{"at_ms": -1, "machine": "m", "event": "request"}"#,
            "events[1]: at_ms must be a whole number of milliseconds, 0 or more; got -1",
        ),
        (
            r#"{"at_ms": 5.5, "machine": "m", "event": "request"}"#,
            "events[1]: at_ms must be a whole number of milliseconds, 0 or more; got 5.5",
        ),
        (
            r#"{"at_ms": "NaN", "machine": "m", "event": "request"}"#,
            "events[1]: at_ms must be a whole number of milliseconds, 0 or more; got \"NaN\"",
        ),
        (
            r#"{"machine": "m", "event": "request"}"#,
            "events[1]: missing at_ms",
        ),
        (
            r#"{"at_ms": 1, "machine": "m", "event": "failure"}"#,
            "events[1]: a failure needs a reason",
        ),
        (
            r#"{"at_ms": 1, "machine": "m", "event": "failure", "reason": "gremlins"}"#,
            "events[1]: unknown reason \"gremlins\"",
        ),
        (
            r#"{"at_ms": 1, "machine": "m", "event": "request", "colour": "red"}"#,
            "events[1]: unknown field 'colour'",
        ),
        (
            r#"{"at_ms": 1, "machine": "other", "event": "success"}"#,
            "events[1]: no admitted call to complete on 'other'",
        ),
    ];
    for (bad, expected) in cases {
        let e = error(&trace(&format!("{ok}, {bad}")));
        assert!(e.starts_with(expected), "{bad}: {e}");
    }
    // Times going backwards.
    let e = error(&trace(&format!(
        r#"{{"at_ms": 10, "machine": "m", "event": "request"}}, {ok}"#
    )));
    assert_eq!(e, "events[1]: at_ms 0 is before the previous event's 10");
    // A bare NaN is not JSON at all: serde says where.
    assert!(matches!(
        replay(&trace(
            r#"{"at_ms": NaN, "machine": "m", "event": "request"}"#
        )),
        Err(ReplayError::Json(_))
    ));
}

#[test]
fn the_binary_prints_the_same_bytes_every_run() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/flaky-gpu.json"
    );
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
            .args(["replay", path])
            .output()
            .unwrap()
    };
    let (a, b) = (run(), run());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let printed: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(printed["sha256"], replay(FLAKY_GPU).unwrap().sha256);
}

#[test]
fn the_binary_fails_with_the_named_error() {
    let path = std::env::temp_dir().join(format!("labrouter-replay-{}.json", std::process::id()));
    std::fs::write(
        &path,
        trace(r#"{"at_ms": 0, "machine": "m", "event": "explode"}"#),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .arg("replay")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("events[0]: unknown event 'explode'"),
        "{stderr}"
    );
}
