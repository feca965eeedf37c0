//! Unit tests of the `tasks:` block (docs/api.md "Tasks"): its defaults, its values, and an error
//! with line:col for each rule.

use std::time::Duration;

use super::callback_allow::rule;
use super::{assert_rejected_at, base_with, parse, rejection, secs, BASE, FILE};
use crate::registry::{AllowRule, Tasks};

pub(super) fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `BASE` and then a `tasks:` block (line 16) holding `block` (from line 17).
pub(super) fn with_tasks(block: &[&str]) -> Vec<String> {
    let mut v = lines(BASE);
    v.push("tasks:".into());
    v.extend(lines(block));
    v
}

/// `tasks:` holding only `line` is rejected at `needle` on that line (17).
pub(super) fn rejected(line: &str, needle: &str, says: &[&str]) {
    assert_rejected_at(&with_tasks(&[line]), 17, needle, says);
}

fn rules(written: &[&str]) -> Vec<AllowRule> {
    written.iter().map(|s| rule(s)).collect()
}

/// What a registry without `tasks:` gets, with thresholds of 3 and `max_body` of 1MiB or more.
fn defaults() -> Tasks {
    Tasks {
        max_running: 4,
        max_queued: 10_000,
        max_queued_per_key: None,
        max_finished: 100_000,
        max_finished_bytes: 1 << 30,
        default_deadline: secs(86_400),
        max_attempts: 3,
        keep: secs(7 * 86_400),
        max_request_body: 1 << 20,
        callback_allow: rules(&["http://127.0.0.1:", "http://localhost:"]),
        callback_secret_env: None,
    }
}

// === defaults and values ===

#[test]
fn a_registry_without_the_block_gets_the_defaults() {
    let reg = parse(&lines(BASE)).unwrap();
    assert_eq!(reg.tasks, defaults());
    assert!(reg.machines.iter().all(|m| m.task_slots == 1));
    assert_eq!(
        reg.tasks.callback_allow[0],
        AllowRule {
            scheme: "http".into(),
            host: "127.0.0.1".into(),
            port: None,
        }
    );
    // An empty block, in either style, is the defaults too.
    assert_eq!(parse(&with_tasks(&[])).unwrap().tasks, defaults());
    let mut v = lines(BASE);
    v.push("tasks: {}".into());
    assert_eq!(parse(&v).unwrap().tasks, defaults());
}

#[test]
fn the_shipped_block_uncommented_is_the_defaults() {
    let shipped = include_str!("../../../registry.yaml");
    let mut inside = false;
    let text: String = shipped
        .lines()
        .map(|l| {
            // The block runs from `# tasks:` to the next blank line.
            inside = (inside && !l.trim().is_empty()) || l.starts_with("# tasks:");
            match l.strip_prefix("# ") {
                Some(rest) if inside => format!("{rest}\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect();
    assert!(text.contains("\ntasks:"), "the block is in registry.yaml");
    let reg = crate::registry::Registry::parse(&text, FILE).unwrap();
    let mut expected = defaults();
    expected.callback_secret_env = Some("LABROUTER_WEBHOOK_SECRET".into());
    // Optional, shown at the most it may be: the whole queue.
    expected.max_queued_per_key = Some(10_000);
    assert_eq!(reg.tasks, expected);
}

#[test]
fn every_field_is_read() {
    let reg = parse(&with_tasks(&[
        "  max_running: 2",
        "  max_queued: 50",
        "  max_queued_per_key: 10",
        "  max_finished: 500",
        "  max_finished_bytes: 64MiB",
        "  default_deadline: 2h",
        "  max_attempts: 7",
        "  keep: 30d",
        "  max_request_body: 256KiB",
        "  callback_allow: [\"https://hooks.example:8443\", \"http://[::1]:\", \"https://ci.lan/\"]",
        "  callback_secret_env: WEBHOOK_SECRET",
    ]))
    .unwrap();
    assert_eq!(
        reg.tasks,
        Tasks {
            max_running: 2,
            max_queued: 50,
            max_queued_per_key: Some(10),
            max_finished: 500,
            max_finished_bytes: 64 << 20,
            default_deadline: secs(7200),
            max_attempts: 7,
            keep: secs(30 * 86_400),
            max_request_body: 256 << 10,
            callback_allow: vec![
                AllowRule {
                    scheme: "https".into(),
                    host: "hooks.example".into(),
                    port: Some(8443),
                },
                AllowRule {
                    scheme: "http".into(),
                    host: "[::1]".into(),
                    port: None,
                },
                AllowRule {
                    scheme: "https".into(),
                    host: "ci.lan".into(),
                    port: Some(443),
                },
            ],
            callback_secret_env: Some("WEBHOOK_SECRET".into()),
        }
    );
}

#[test]
fn the_bounds_themselves_are_accepted() {
    let reg = parse(&with_tasks(&[
        "  max_running: 10000",
        "  max_queued: 10000000",
        "  default_deadline: 30d",
        "  max_attempts: 100",
        "  keep: 365d",
        "  max_request_body: 16MiB",
        "  callback_allow: []",
    ]))
    .unwrap();
    let t = &reg.tasks;
    assert_eq!(
        (t.max_running, t.max_queued, t.max_attempts),
        (10_000, 10_000_000, 100)
    );
    assert_eq!(t.default_deadline, crate::registry::SPAN_MAX);
    assert_eq!(t.keep, secs(365 * 86_400));
    assert_eq!(
        t.max_request_body, reg.server.max_body,
        "up to server.max_body"
    );
    assert!(t.callback_allow.is_empty(), "[] refuses every callback");
    let reg = parse(&with_tasks(&[
        "  max_running: 1",
        "  max_queued: 1",
        "  keep: 1ms",
    ]))
    .unwrap();
    assert_eq!((reg.tasks.max_running, reg.tasks.max_queued), (1, 1));
    assert_eq!(reg.tasks.keep, Duration::from_millis(1));
}

#[test]
fn the_default_request_body_is_at_most_server_max_body() {
    let mut v = lines(&["server:", "  max_body: 64KiB"]);
    v.extend(lines(BASE));
    assert_eq!(parse(&v).unwrap().tasks.max_request_body, 64 << 10);
}

#[test]
fn max_attempts_defaults_to_the_largest_failure_threshold_above_three() {
    let mut v = lines(&["defaults:", "  breaker: { failure_threshold: 2 }"]);
    v.extend(lines(BASE));
    assert_eq!(parse(&v).unwrap().tasks.max_attempts, 3, "never below 3");
    let mut v = lines(&["defaults:", "  breaker: { failure_threshold: 5 }"]);
    v.extend(lines(BASE));
    assert_eq!(parse(&v).unwrap().tasks.max_attempts, 5);
    let v = base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    breaker: { failure_threshold: 9 }",
        ],
    );
    assert_eq!(parse(&v).unwrap().tasks.max_attempts, 9);
    // Written at or above every threshold: taken as written.
    let mut v = with_tasks(&["  max_attempts: 4"]);
    v.splice(
        4..5,
        lines(&[
            "    url: http://127.0.0.1:11434/v1",
            "    breaker: { failure_threshold: 4 }",
        ]),
    );
    assert_eq!(parse(&v).unwrap().tasks.max_attempts, 4);
}

// === rejections: each names the key, line:col and what was expected ===

#[test]
fn counts_out_of_range_are_rejected() {
    rejected(
        "  max_running: 0",
        "0",
        &["tasks.max_running", "from 1 to 10000", "got 0"],
    );
    rejected(
        "  max_running: 10001",
        "10001",
        &["tasks.max_running", "10001"],
    );
    rejected(
        "  max_queued: 0",
        "0",
        &["tasks.max_queued", "from 1 to 10000000"],
    );
    rejected("  max_queued: 10000001", "10000001", &["tasks.max_queued"]);
    rejected(
        "  max_queued: 99999999999999",
        "99999999999999",
        &["tasks.max_queued", "99999999999999"],
    );
    rejected(
        "  max_attempts: 0",
        "0",
        &["tasks.max_attempts", "from 1 to 100"],
    );
    rejected(
        "  max_attempts: 101",
        "101",
        &["tasks.max_attempts", "from 1 to 100"],
    );
    // Not a number at all: the YAML library's error, with the key and place.
    rejected(
        "  max_running: lots",
        "lots",
        &["max_running", "whole number"],
    );
    rejected("  max_queued: -1", "-1", &["max_queued"]);
    rejected(
        "  max_finished: 0",
        "0",
        &["tasks.max_finished", "from 1 to 10000000"],
    );
    rejected(
        "  max_queued_per_key: 0",
        "0",
        &["tasks.max_queued_per_key", "from 1 to 10000"],
    );
    // One key's share is at most the whole queue.
    rejected(
        "  max_queued_per_key: 10001",
        "10001",
        &["tasks.max_queued_per_key", "from 1 to 10000", "got 10001"],
    );
    rejected(
        "  max_finished_bytes: 64KiB",
        "64KiB",
        &["tasks.max_finished_bytes", "at least 1MiB", "64KiB"],
    );
    rejected(
        "  max_finished_bytes: lots",
        "lots",
        &["tasks.max_finished_bytes"],
    );
}

#[test]
fn durations_out_of_range_are_rejected() {
    rejected(
        "  default_deadline: 0s",
        "0s",
        &["tasks.default_deadline", "above zero"],
    );
    rejected(
        "  default_deadline: 31d",
        "31d",
        &["tasks.default_deadline", "at most 30d"],
    );
    rejected(
        "  default_deadline: soon",
        "soon",
        &["tasks.default_deadline", "'soon'"],
    );
    rejected("  keep: 0s", "0s", &["tasks.keep", "above zero"]);
    rejected("  keep: 366d", "366d", &["tasks.keep", "at most 365d"]);
    rejected("  keep: forever", "forever", &["tasks.keep", "'forever'"]);
}

#[test]
fn a_request_body_limit_is_above_zero_and_within_server_max_body() {
    rejected(
        "  max_request_body: 0",
        "0",
        &["tasks.max_request_body", "above zero"],
    );
    rejected(
        "  max_request_body: lots",
        "lots",
        &["tasks.max_request_body", "'lots'"],
    );
    let mut v = lines(&["server:", "  max_body: 1MiB"]);
    v.extend(with_tasks(&["  max_request_body: 2MiB"]));
    assert_rejected_at(
        &v,
        19,
        "2MiB",
        &[
            "tasks.max_request_body",
            "server.max_body (1048576 bytes)",
            "'2MiB'",
        ],
    );
}

#[test]
fn max_attempts_below_a_failure_threshold_is_rejected_naming_the_machine() {
    let mut v = with_tasks(&["  max_attempts: 3"]);
    v.splice(
        4..5,
        lines(&[
            "    url: http://127.0.0.1:11434/v1",
            "    breaker: { failure_threshold: 5 }",
        ]),
    );
    assert_rejected_at(
        &v,
        18,
        "3",
        &[
            "tasks.max_attempts: 3 is below breaker.failure_threshold 5 of machine 'local'",
            "from 5 to 100",
            "keep max_attempts ≥ failure_threshold so a lone task that meets a fresh outage waits rather than fails",
            "(docs/api.md, Tasks)",
        ],
    );
    // Inherited from defaults: the first machine is named.
    let mut v = lines(&["defaults:", "  breaker: { failure_threshold: 4 }"]);
    v.extend(with_tasks(&["  max_attempts: 3"]));
    assert_rejected_at(&v, 19, "3", &["threshold 4 of machine 'gpu-box'"]);
}

#[test]
fn a_failure_threshold_above_any_max_attempts_is_rejected_at_the_threshold() {
    let v = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    breaker: { failure_threshold: 101 }",
        ],
    );
    assert_rejected_at(
        &v,
        4,
        "101",
        &[
            "machine 'gpu-box': breaker.failure_threshold: 101",
            "tasks.max_attempts",
            "at most 100",
        ],
    );
    let mut v = lines(&["defaults:", "  breaker:", "    failure_threshold: 500"]);
    v.extend(lines(BASE));
    assert_rejected_at(&v, 3, "500", &["machine 'gpu-box'", "(docs/api.md, Tasks)"]);
    // max_attempts written or not, the threshold is the value to fix.
    let mut v = with_tasks(&["  max_attempts: 100"]);
    v.splice(
        2..3,
        lines(&[
            "    url: http://gpu-box.local:1/v1",
            "    breaker: { failure_threshold: 200 }",
        ]),
    );
    assert_rejected_at(&v, 4, "200", &["failure_threshold: 200"]);
}

#[test]
fn callback_secret_env_is_a_name_and_a_wrong_one_is_not_repeated() {
    let reg = parse(&with_tasks(&["  callback_secret_env: _Hook_2"])).unwrap();
    assert_eq!(reg.tasks.callback_secret_env.as_deref(), Some("_Hook_2"));
    for bad in [
        "\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+\"",
        "\"2FAST\"",
        "\"\"",
        "\"A B\"",
    ] {
        let line = format!("  callback_secret_env: {bad}");
        rejected(
            &line,
            bad,
            &[
                "tasks.callback_secret_env",
                "name of an environment variable",
            ],
        );
        let msg = rejection(&with_tasks(&[&line]));
        assert!(
            !msg.contains(bad.trim_matches('"')) || bad == "\"\"",
            "{msg}"
        );
    }
}

#[test]
fn an_unknown_key_in_tasks_is_an_error() {
    let v = with_tasks(&["  max_runing: 2"]);
    let msg = rejection(&v);
    assert!(msg.starts_with(&format!("{FILE}:17:3: ")), "{msg}");
    assert!(
        msg.contains("max_runing") && msg.contains("max_running"),
        "{msg}"
    );
}
