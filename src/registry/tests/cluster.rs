//! Unit tests of `cluster:` and each machine's `shared:` (README "Several routers").

use std::time::Duration;

use super::{assert_rejected_at, base_with, parse, BASE, FILE};
use crate::outcome::MachineId;
use crate::registry::{share_key, Cluster, QueueMode, Registry};

/// `BASE` with `block` appended after it (lines 16 on).
fn with_cluster(block: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = BASE.iter().map(|s| s.to_string()).collect();
    v.extend(block.iter().map(|s| s.to_string()));
    v
}

#[test]
fn the_shipped_block_uncommented_is_what_it_says() {
    let shipped = include_str!("../../../registry.yaml");
    let mut inside = false;
    let text: String = shipped
        .lines()
        .map(|l| {
            inside = (inside && !l.trim().is_empty()) || l.starts_with("# cluster:");
            match l.strip_prefix("# ") {
                Some(rest) if inside => format!("{rest}\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect();
    assert!(text.contains("\ncluster:"), "the block is in registry.yaml");
    let reg = Registry::parse(&text, FILE).unwrap();
    assert_eq!(
        reg.cluster,
        Some(Cluster {
            redis_url_env: "LABROUTER_REDIS_URL".into(),
            prefix: "homelab".into(),
            node: "mac-mini".into(),
            timeout: Duration::from_millis(50),
            probe_lease: Duration::from_secs(15),
            tasks: QueueMode::Local,
            assume_durable: false,
            task_lease: Duration::from_secs(30),
            task_timeout: Duration::from_secs(1),
        })
    );
    // gpu-box.local is shared; the local model's 127.0.0.1 server is each host's own.
    let shared: Vec<(&str, bool)> = reg
        .machines
        .iter()
        .map(|m| (m.name.as_str(), m.shared))
        .collect();
    assert!(shared.contains(&("gpu-box", true)), "{shared:?}");
    assert!(shared.contains(&("local", false)), "{shared:?}");
}

#[test]
fn defaults_fill_what_is_not_written() {
    let reg = parse(&with_cluster(&["cluster:", "  redis_url_env: R"])).unwrap();
    let c = reg.cluster.unwrap();
    assert_eq!(c.prefix, "labrouter");
    assert!(!c.node.is_empty() && c.node.len() <= 64, "{}", c.node);
    assert_eq!(c.timeout, Duration::from_millis(50));
    assert_eq!(c.probe_lease, Duration::from_secs(15));
    assert_eq!(c.tasks, QueueMode::Local);
    assert!(!c.assume_durable);
    assert_eq!(c.task_lease, Duration::from_secs(30));
    assert_eq!(c.task_timeout, Duration::from_secs(1));
    assert_eq!(parse(&with_cluster(&[])).unwrap().cluster, None);
}

#[test]
fn bad_values_are_rejected_where_they_are_written() {
    let cases: &[(&[&str], usize, &str, &[&str])] = &[
        (
            &["cluster:", "  redis_url_env: redis://127.0.0.1:6379"],
            17,
            "redis://",
            &["cluster.redis_url_env", "name of an environment variable"],
        ),
        (
            &["cluster:", "  redis_url_env: R", "  prefix: home lab"],
            18,
            "home lab",
            &["cluster.prefix", "'home lab'"],
        ),
        (
            &["cluster:", "  redis_url_env: R", "  node: \"a:b\""],
            18,
            "\"a:b\"",
            &["cluster.node"],
        ),
        (
            &["cluster:", "  redis_url_env: R", "  timeout: 10s"],
            18,
            "10s",
            &["cluster.timeout"],
        ),
        (
            &["cluster:", "  redis_url_env: R", "  timeout: 0s"],
            18,
            "0s",
            &["cluster.timeout", "above zero"],
        ),
        (
            &[
                "cluster:",
                "  redis_url_env: R",
                "  timeout: 1s",
                "  probe_lease: 2s",
            ],
            19,
            "2s",
            &["cluster.probe_lease", "four times cluster.timeout"],
        ),
    ];
    for (block, line, needle, says) in cases {
        assert_rejected_at(&with_cluster(block), *line, needle, says);
    }
    let v = with_cluster(&["cluster:", "  redis_url_env: R", "  secret: x"]);
    let e = parse(&v).unwrap_err().to_string();
    assert!(e.contains("secret"), "unknown keys are errors: {e}");
}

#[test]
fn shared_is_auto_unless_written_and_says_what_it_accepts() {
    let reg = parse(&base_with(5, &["    url: http://127.0.0.1:11434/v1"])).unwrap();
    assert!(reg.machines[MachineId(0)].shared, "gpu-box.local: shared");
    assert!(
        !reg.machines[MachineId(1)].shared,
        "loopback: each host's own"
    );
    for (url, shared) in [
        ("http://localhost:11434/v1", false),
        ("http://169.254.10.1:11434/v1", false),
        ("http://[::1]:8000/v1", false),
        ("http://[fe80::1]:8000/v1", false),
        ("http://gpu-box.local:11434/v1", true),
    ] {
        let line = format!("    url: {url}");
        let reg = parse(&base_with(5, &[&line])).unwrap();
        assert_eq!(reg.machines[MachineId(1)].shared, shared, "{url}");
    }
    for (written, shared) in [("true", true), ("false", false), ("auto", false)] {
        let line = format!("    shared: {written}");
        let v = base_with(5, &["    url: http://127.0.0.1:11434/v1", &line]);
        assert_eq!(
            parse(&v).unwrap().machines[MachineId(1)].shared,
            shared,
            "{written}"
        );
    }
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    shared: maybe"],
    );
    assert_rejected_at(
        &v,
        6,
        "maybe",
        &["machine 'local': shared: expected auto, true or false, got 'maybe'"],
    );
}

#[test]
fn a_shared_verdict_is_keyed_by_the_normalised_url() {
    assert_eq!(
        share_key("HTTP://GPU-Box.Local:11434/v1/"),
        "http://gpu-box.local:11434/v1"
    );
    assert_eq!(
        share_key("http://gpu-box.local/v1"),
        "http://gpu-box.local:80/v1"
    );
    assert_eq!(
        share_key("https://gpu-box.local/v1"),
        "https://gpu-box.local:443/v1"
    );
    assert_eq!(share_key("http://[::1]:8000"), "http://[::1]:8000");
}

#[test]
fn the_task_queue_settings_are_read_as_written() {
    let reg = parse(&with_cluster(&[
        "cluster:",
        "  redis_url_env: R",
        "  tasks: local",
        "  assume_durable: true",
        "  task_lease: 10s",
        "  task_timeout: 2s",
    ]))
    .unwrap();
    let c = reg.cluster.unwrap();
    assert_eq!(c.tasks, QueueMode::Local);
    assert!(c.assume_durable);
    assert_eq!(c.task_lease, Duration::from_secs(10));
    assert_eq!(c.task_timeout, Duration::from_secs(2));
    let reg = parse(&with_cluster(&[
        "cluster:",
        "  redis_url_env: R",
        "  tasks: shared",
    ]))
    .unwrap();
    assert_eq!(reg.cluster.unwrap().tasks, QueueMode::Shared);
}

#[test]
fn bad_task_queue_settings_are_rejected_where_they_are_written() {
    let r = ["cluster:", "  redis_url_env: R"];
    let case = |extra: &[&str]| with_cluster(&[&r[..], extra].concat());
    let cases: &[(&[&str], usize, &str, &[&str])] = &[
        (
            &["  tasks: everywhere"],
            18,
            "everywhere",
            &["cluster.tasks", "local or shared", "'everywhere'"],
        ),
        (
            &["  task_lease: 0s"],
            18,
            "0s",
            &["cluster.task_lease", "above zero"],
        ),
        (
            &["  task_lease: 2h"],
            18,
            "2h",
            &["cluster.task_lease", "at most 1h"],
        ),
        (
            &["  task_timeout: 1m"],
            18,
            "1m",
            &["cluster.task_timeout", "at most"],
        ),
        (
            &["  task_timeout: 2s", "  task_lease: 5s"],
            19,
            "5s",
            &["cluster.task_lease", "four times cluster.task_timeout"],
        ),
        (
            &["  task_timeout: 10s"],
            18,
            "10s",
            &["cluster.task_timeout", "a quarter of cluster.task_lease"],
        ),
    ];
    for (extra, line, needle, says) in cases {
        assert_rejected_at(&case(extra), *line, needle, says);
    }
    let e = parse(&case(&["  assume_durable: maybe"]))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("registry.yaml:18:"), "{e}");
}
