//! `labrouter check FILE` on a registry with `cluster:`: a Redis off loopback must be reached
//! with a password and `rediss://` (README "Several routers"), and the error says so without repeating the
//! password. The host is a `.invalid` name: nothing resolves it, nothing is dialled.

use std::process::Command;

const REGISTRY: &str = r#"server:
  listen: 127.0.0.1:0
cluster:
  redis_url_env: LABROUTER_REDIS_URL
  prefix: check
  node: r1
  timeout: 50ms
  probe_lease: 2s
machines:
  a-box: { url: "http://127.0.0.1:9/v1", shared: true }
models:
  a-m: { machine: a-box, name: a-model }
routes:
  - { name: chat, default: true, chain: [a-m] }
"#;

/// Runs `labrouter check` on [`REGISTRY`] with `LABROUTER_REDIS_URL=url`: whether it passed,
/// and what it printed.
fn check(url: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("registry.yaml");
    std::fs::write(&file, REGISTRY).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .arg("check")
        .arg(&file)
        .env("LABROUTER_REDIS_URL", url)
        .env_remove("LABROUTER_CONFIG")
        .output()
        .expect("the labrouter binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn check_refuses_a_redis_off_loopback_without_a_password_and_tls() {
    let (ok, text) = check("redis://127.0.0.1:6379/0");
    assert!(ok, "loopback without a password is fine: {text}");

    let (ok, text) = check("redis://cache.lab.invalid:6379/0");
    assert!(!ok, "off loopback, no password, no TLS: refused: {text}");
    let lower = text.to_lowercase();
    assert!(
        lower.contains("cluster") || text.contains("LABROUTER_REDIS_URL"),
        "the error names the cluster's Redis URL: {text}"
    );
    assert!(
        lower.contains("password") || lower.contains("rediss") || lower.contains("tls"),
        "the error says what is missing: {text}"
    );

    let (ok, text) = check("redis://:hunter2secret@cache.lab.invalid:6379/0");
    assert!(!ok, "a password without TLS: refused: {text}");
    let lower = text.to_lowercase();
    assert!(
        lower.contains("rediss") || lower.contains("tls"),
        "the error asks for rediss:// (TLS): {text}"
    );
    assert!(
        !text.contains("hunter2secret"),
        "the error does not repeat the password: {text}"
    );

    let (ok, text) = check("rediss://:hunter2secret@cache.lab.invalid:6380/0");
    assert!(ok, "a password over TLS is accepted: {text}");
    assert!(!text.contains("hunter2secret"), "{text}");
}
