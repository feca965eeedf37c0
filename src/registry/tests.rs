//! Unit tests of registry.yaml parsing and validation (docs/registry.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::*;
use crate::outcome::{MachineId, ModelId, RouteId};

mod api;
mod callback_allow;
mod cluster;
mod front_door;
mod kinds;
mod task_slots;
mod tasks;
mod tiers;

const FILE: &str = "registry.yaml";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A small valid registry, one line per entry so tests can point at lines.
const BASE: &[&str] = &[
    "machines:",                                                    // 1
    "  gpu-box:",                                                   // 2
    "    url: http://gpu-box.local:11434/v1",                       // 3
    "  local:",                                                     // 4
    "    url: http://127.0.0.1:11434/v1",                           // 5
    "models:",                                                      // 6
    "  coder-gpu: { machine: gpu-box, name: \"qwen3-coder:30b\" }", // 7
    "  small: { machine: local, name: \"qwen3:4b\" }",              // 8
    "routes:",                                                      // 9
    "  - name: code",                                               // 10
    "    keywords: [code, rust]",                                   // 11
    "    chain: [coder-gpu, small]",                                // 12
    "  - name: chat",                                               // 13
    "    default: true",                                            // 14
    "    chain: [small]",                                           // 15
];

fn join(lines: &[&str]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// `BASE` with line `n` (1-based) replaced by `with` (which may hold several lines).
fn base_with(n: usize, with: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = BASE.iter().map(|s| s.to_string()).collect();
    v.splice(n - 1..n, with.iter().map(|s| s.to_string()));
    v
}

/// `file:line:col` of the first occurrence of `needle` on line `line` (1-based) of `lines`.
fn place_of(lines: &[String], line: usize, needle: &str) -> String {
    let text = &lines[line - 1];
    let col = text
        .find(needle)
        .unwrap_or_else(|| panic!("'{needle}' is not on line {line}: {text:?}"))
        + 1;
    format!("{FILE}:{line}:{col}")
}

fn parse(lines: &[String]) -> Result<Registry, RegistryError> {
    Registry::parse(
        &join(&lines.iter().map(String::as_str).collect::<Vec<_>>()),
        FILE,
    )
}

/// Parses `lines`, expects a rejection, and returns its Display.
fn rejection(lines: &[String]) -> String {
    match parse(lines) {
        Ok(_) => panic!("expected a rejection of:\n{}", lines.join("\n")),
        Err(e) => e.to_string(),
    }
}

/// The error names `file:line:col` of `needle` on `line` and says what was expected.
fn assert_rejected_at(lines: &[String], line: usize, needle: &str, says: &[&str]) {
    let msg = rejection(lines);
    let at = place_of(lines, line, needle);
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(
        msg.contains("expected"),
        "the error does not say what was expected: {msg}"
    );
    for s in says {
        assert!(
            msg.contains(s),
            "expected the error to mention {s:?}, got: {msg}"
        );
    }
    assert!(!msg.contains('\n'), "the error is one line: {msg:?}");
}

// === the shipped registry ===

#[test]
fn shipped_registry_parses() {
    let reg =
        Registry::parse(include_str!("../../registry.yaml"), FILE).expect("registry.yaml is valid");
    let machines: Vec<&str> = reg.machines.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(machines, ["gpu-box", "ubuntu-box", "local"]);
    assert_eq!(reg.models.len(), 5);
    assert!(reg.model_ids.iter().map(|m| m.0).eq(0..5));
    let routes: Vec<&str> = reg.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(routes, ["code", "vision", "chat"]);
    assert_eq!(reg.routes[reg.default_route].name, "chat");

    let local = &reg.machines[reg.machine_index("local").unwrap()];
    assert_eq!(local.max_concurrency, 2);
    assert_eq!(local.url, "http://127.0.0.1:11434/v1");
    let ubuntu = &reg.machines[reg.machine_index("ubuntu-box").unwrap()];
    assert_eq!(ubuntu.timeouts.first_byte, secs(10));
    assert_eq!(ubuntu.timeouts.connect, secs(5), "inherited from defaults");
    assert_eq!(ubuntu.timeouts.idle, secs(30));
    assert_eq!(ubuntu.timeouts.total, secs(600));
    assert_eq!(ubuntu.max_concurrency, 8);
    let gpu = &reg.machines[reg.machine_index("gpu-box").unwrap()];
    assert_eq!(gpu.timeouts.first_byte, secs(5));
    assert_eq!(gpu.breaker, Policy::default());
    assert_eq!(gpu.health, None);

    assert_eq!(reg.server.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(reg.server.max_body, 16 << 20);
    assert_eq!(reg.server.api_keys_env, None);
    assert_eq!(reg.telegram, None);

    let code = &reg.routes[RouteId(0)];
    assert!(code.keywords.contains(&"unit test".to_string()));
    let chain: Vec<String> = code.chain.iter().map(|&m| reg.target_name(m)).collect();
    assert_eq!(
        chain,
        ["coder-gpu@gpu-box", "coder-cpu@ubuntu-box", "small@local"]
    );
    assert!(reg.routes[RouteId(1)].images);
    assert!(!reg.routes[RouteId(0)].images);
    let coder_cpu = &reg.models[ModelId(1)];
    assert_eq!(
        (coder_cpu.name.as_str(), coder_cpu.backend.as_str()),
        ("coder-cpu", "qwen3-coder:30b")
    );
    assert_eq!(reg.machines[coder_cpu.machine].name, "ubuntu-box");

    // docs/api.md "Tasks": the `tasks:` block is commented out, so every default holds.
    assert!(reg.machines.iter().all(|m| m.task_slots == 1));
    let t = &reg.tasks;
    assert_eq!(
        (t.max_running, t.max_queued, t.max_attempts),
        (4, 10_000, 3)
    );
    assert_eq!(t.default_deadline, secs(86_400));
    assert_eq!(t.keep, secs(7 * 86_400));
    assert_eq!(t.max_request_body, 1 << 20);
    let allow: Vec<String> = t.callback_allow.iter().map(|r| r.to_string()).collect();
    assert_eq!(allow, ["http://127.0.0.1:", "http://localhost:"]);
    assert_eq!(t.callback_secret_env, None);
}

#[test]
fn version_is_stable_and_tells_files_apart() {
    let text = join(BASE);
    let a = Registry::parse(&text, FILE).unwrap();
    let b = Registry::parse(&text, FILE).unwrap();
    assert_eq!(a.version, b.version);
    assert_eq!(a.version.len(), 16);
    let c = Registry::parse(&format!("{text}# a comment\n"), FILE).unwrap();
    assert_ne!(a.version, c.version);
}

#[test]
fn minimal_registry_takes_defaults() {
    let reg = parse(&base_with(1, &["machines:"])).unwrap();
    assert_eq!(reg.server.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(reg.server.max_body, 16 << 20);
    let m = &reg.machines[MachineId(0)];
    assert_eq!(m.max_concurrency, 8);
    assert_eq!(m.breaker, Policy::default());
    assert_eq!(
        m.timeouts,
        Timeouts {
            connect: secs(5),
            first_byte: secs(5),
            idle: secs(30),
            total: secs(600),
        }
    );
    assert_eq!(reg.default_route, RouteId(1));
}

#[test]
fn default_route_is_the_first_when_none_is_marked() {
    let lines = base_with(14, &[]);
    let reg = parse(&lines).unwrap();
    assert_eq!(reg.default_route, RouteId(0));
}

#[test]
fn machines_inherit_defaults_and_override_them() {
    let mut lines: Vec<String> = [
        "defaults:",
        "  timeouts: { connect: 2s, total: 1m }",
        "  breaker:",
        "    failure_threshold: 5",
        "    cooldown: 30s",
        "  max_concurrency: 4",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    lines.extend(base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1/",
            "    api_key_env: GPU_BOX_KEY",
            "    health: { every: 30s }",
            "    timeouts: { first_byte: 10s }",
            "    breaker: { success_threshold: 2, max_cooldown: 1h }",
            "    max_concurrency: 1",
        ],
    ));
    let reg = parse(&lines).unwrap();
    let gpu = &reg.machines[MachineId(0)];
    assert_eq!(
        gpu.url, "http://gpu-box.local:11434/v1",
        "trailing slash dropped"
    );
    assert_eq!(gpu.api_key_env.as_deref(), Some("GPU_BOX_KEY"));
    assert_eq!(
        gpu.health,
        Some(Health {
            path: "/models".into(),
            every: secs(30),
        })
    );
    assert_eq!(gpu.timeouts.connect, secs(2));
    assert_eq!(gpu.timeouts.first_byte, secs(10));
    assert_eq!(gpu.timeouts.total, secs(60));
    assert_eq!(gpu.breaker.failure_threshold, 5);
    assert_eq!(gpu.breaker.cooldown, secs(30));
    assert_eq!(gpu.breaker.success_threshold, 2);
    assert_eq!(gpu.breaker.max_cooldown, secs(3600));
    assert_eq!(gpu.max_concurrency, 1);
    let local = &reg.machines[MachineId(1)];
    assert_eq!(local.breaker.failure_threshold, 5);
    assert_eq!(local.breaker.success_threshold, 1);
    assert_eq!(local.timeouts.first_byte, secs(5));
    assert_eq!(local.max_concurrency, 4);
}

#[test]
fn telegram_section_parses() {
    let mut lines = base_with(15, &["    chain: [small]"]);
    lines.extend(
        [
            "telegram:",
            "  token_env: TELEGRAM_BOT_TOKEN",
            "  chat_id: 123456789",
            "  api_url: http://127.0.0.1:9999",
            "  digest_at: \"07:30\"",
            "  timezone: Europe/Berlin",
            "  alert_on_trip: false",
            "  page_after_cycles: 3",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let t = parse(&lines).unwrap().telegram.unwrap();
    assert_eq!(t.token_env, "TELEGRAM_BOT_TOKEN");
    assert_eq!(t.chat_id, 123_456_789);
    assert_eq!(t.api_url.as_deref(), Some("http://127.0.0.1:9999"));
    assert_eq!(t.digest_at, (7, 30));
    assert_eq!(t.timezone, "Europe/Berlin");
    assert!(!t.alert_on_trip);
    assert_eq!(t.page_after_cycles, 3);
}

// === rejections (docs/registry.md): each names file:line:col and what was expected ===

#[test]
fn rejects_an_unknown_key() {
    let mut lines: Vec<String> = vec!["server:".into(), "  listn: 127.0.0.1:8080".into()];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    let msg = rejection(&lines);
    let at = place_of(&lines, 2, "listn");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(msg.contains("listn"), "{msg}");
    assert!(msg.contains("expected"), "{msg}");
    assert!(
        msg.contains("listen"),
        "the error should name the valid key: {msg}"
    );
}

#[test]
fn rejects_an_unknown_key_in_a_machine() {
    let lines = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    max_concurency: 2",
        ],
    );
    let msg = rejection(&lines);
    let at = place_of(&lines, 4, "max_concurency");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(msg.contains("max_concurency"), "{msg}");
}

#[test]
fn rejects_a_chain_naming_an_unknown_model() {
    let lines = base_with(12, &["    chain: [coder-gpu, nosuch]"]);
    assert_rejected_at(&lines, 12, "nosuch", &["nosuch", "coder-gpu, small"]);
}

#[test]
fn rejects_a_model_naming_an_unknown_machine() {
    let lines = base_with(8, &["  small: { machine: nowhere, name: \"qwen3:4b\" }"]);
    assert_rejected_at(&lines, 8, "nowhere", &["nowhere", "gpu-box, local"]);
}

#[test]
fn rejects_a_route_with_no_chain() {
    let lines = base_with(12, &[]);
    assert_rejected_at(&lines, 10, "code", &["code", "chain"]);
}

#[test]
fn rejects_a_route_with_an_empty_chain() {
    let lines = base_with(12, &["    chain: []"]);
    assert_rejected_at(&lines, 12, "[]", &["code", "chain"]);
}

#[test]
fn rejects_two_default_routes() {
    let lines = base_with(11, &["    keywords: [code, rust]", "    default: true"]);
    // The second `default: true` (line 15) is the one in error.
    assert_rejected_at(&lines, 15, "true", &["default", "code"]);
}

fn duplicate_route_lines() -> Vec<String> {
    base_with(13, &["  - name: code"])
}

#[test]
fn rejects_duplicate_route_names() {
    let lines = duplicate_route_lines();
    let msg = rejection(&lines);
    let at = place_of(&lines, 13, "code");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(msg.contains("duplicate route name 'code'"), "{msg}");
}

#[test]

fn duplicate_route_name_error_says_what_was_expected() {
    assert_rejected_at(&duplicate_route_lines(), 13, "code", &["duplicate", "code"]);
}

fn duplicate_machine_lines() -> Vec<String> {
    base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "  gpu-box:",
            "    url: http://gpu-box.local:1/v1",
        ],
    )
}

#[test]
fn rejects_a_duplicate_machine_key() {
    let lines = duplicate_machine_lines();
    let msg = rejection(&lines);
    let at = place_of(&lines, 6, "gpu-box");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(msg.contains("gpu-box"), "{msg}");
    assert!(msg.to_lowercase().contains("duplicate"), "{msg}");
}

#[test]

fn duplicate_machine_key_error_says_what_was_expected() {
    let lines = duplicate_machine_lines();
    assert_rejected_at(&lines, 6, "gpu-box", &["gpu-box"]);
    let msg = rejection(&lines);
    assert!(
        !msg.contains("DuplicateKeyPolicy"),
        "library advice is no help to a user: {msg}"
    );
}

#[test]
fn rejects_a_duplicate_model_key() {
    let lines = base_with(
        8,
        &[
            "  small: { machine: local, name: \"qwen3:4b\" }",
            "  small: { machine: local, name: \"x\" }",
        ],
    );
    let msg = rejection(&lines);
    let at = place_of(&lines, 9, "small");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
    assert!(msg.contains("small"), "{msg}");
    assert!(msg.to_lowercase().contains("duplicate"), "{msg}");
}

#[test]
fn rejects_a_route_named_like_a_model() {
    let lines = base_with(13, &["  - name: small"]);
    assert_rejected_at(&lines, 13, "small", &["small"]);
}

#[test]
fn rejects_a_zero_failure_threshold() {
    let mut lines: Vec<String> = vec![
        "defaults:".into(),
        "  breaker:".into(),
        "    failure_threshold: 0".into(),
    ];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 3, "0", &["failure_threshold"]);
}

#[test]
fn rejects_a_zero_success_threshold_on_a_machine() {
    let lines = base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    breaker: { success_threshold: 0 }",
        ],
    );
    assert_rejected_at(&lines, 6, "0", &["success_threshold"]);
}

#[test]
fn rejects_a_zero_cooldown() {
    let mut lines: Vec<String> = vec![
        "defaults:".into(),
        "  breaker:".into(),
        "    cooldown: 0s".into(),
    ];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 3, "0s", &["cooldown"]);
}

#[test]
fn rejects_max_cooldown_below_cooldown() {
    let mut lines: Vec<String> = vec![
        "defaults:".into(),
        "  breaker:".into(),
        "    cooldown: 10m".into(),
        "    max_cooldown: 5m".into(),
    ];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 4, "5m", &["max_cooldown", "cooldown"]);
}

#[test]
fn rejects_a_machine_cooldown_above_the_inherited_max_cooldown() {
    // Only `cooldown` is written: the error points at it.
    let lines = base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    breaker: { cooldown: 1h }",
        ],
    );
    assert_rejected_at(&lines, 6, "1h", &["max_cooldown"]);
}

#[test]
fn rejects_a_backoff_below_one() {
    let mut lines: Vec<String> = vec![
        "defaults:".into(),
        "  breaker:".into(),
        "    backoff: 0.5".into(),
    ];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 3, "0.5", &["backoff"]);
}

#[test]
fn rejects_a_url_that_is_not_http() {
    let lines = base_with(3, &["    url: ftp://gpu-box.local/v1"]);
    assert_rejected_at(&lines, 3, "ftp://", &["ftp://gpu-box.local/v1", "http"]);
}

#[test]
fn rejects_a_url_that_does_not_parse() {
    let lines = base_with(3, &["    url: gpu-box.local:11434"]);
    assert_rejected_at(&lines, 3, "gpu-box.local", &["http"]);
}

#[test]
fn rejects_an_unknown_timezone() {
    let mut lines = base_with(15, &["    chain: [small]"]);
    lines.extend(
        [
            "telegram:",
            "  token_env: TELEGRAM_BOT_TOKEN",
            "  chat_id: 1",
            "  timezone: Europe/Atlantis",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    assert_rejected_at(
        &lines,
        19,
        "Europe/Atlantis",
        &["timezone", "Europe/Atlantis"],
    );
}

#[test]
fn rejects_a_bad_digest_time() {
    let mut lines = base_with(15, &["    chain: [small]"]);
    lines.extend(
        [
            "telegram:",
            "  token_env: T",
            "  chat_id: 1",
            "  digest_at: \"25:00\"",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    assert_rejected_at(&lines, 19, "\"25:00\"", &["digest_at"]);
}

#[test]
fn rejects_a_bad_duration() {
    let lines = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    timeouts: { connect: 5 seconds }",
        ],
    );
    assert_rejected_at(&lines, 4, "5 seconds", &["timeouts.connect", "5 seconds"]);
}

#[test]
fn rejects_a_bad_size() {
    let mut lines: Vec<String> = vec!["server:".into(), "  max_body: 16 mebibytes".into()];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 2, "16 mebibytes", &["max_body", "16 mebibytes"]);
}

#[test]
fn rejects_a_bad_listen_address() {
    let mut lines: Vec<String> = vec!["server:".into(), "  listen: gpu-box:8080".into()];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    assert_rejected_at(&lines, 2, "gpu-box:8080", &["listen"]);
}

#[test]
fn rejects_a_zero_max_concurrency() {
    let lines = base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    max_concurrency: 0",
        ],
    );
    assert_rejected_at(&lines, 6, "0", &["max_concurrency"]);
}

fn wrong_type_lines() -> Vec<String> {
    base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    max_concurrency: lots",
        ],
    )
}

#[test]
fn rejects_a_wrong_type() {
    let lines = wrong_type_lines();
    let msg = rejection(&lines);
    let at = place_of(&lines, 6, "lots");
    assert!(
        msg.starts_with(&format!("{at}: ")),
        "expected the error at {at}, got: {msg}"
    );
}

#[test]

fn wrong_type_error_says_what_was_expected() {
    assert_rejected_at(&wrong_type_lines(), 6, "lots", &["max_concurrency"]);
}

#[test]
fn rejects_a_missing_section() {
    let lines = base_with(6, &["modells:"]);
    let msg = rejection(&lines);
    assert!(msg.starts_with(&format!("{FILE}:")), "{msg}");
    assert!(msg.contains("modells"), "{msg}");
}

#[test]
fn load_names_a_missing_file() {
    let e =
        Registry::load(std::path::Path::new("/nonexistent/labrouter/registry.yaml")).unwrap_err();
    assert!(matches!(e, RegistryError::Read { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/labrouter/registry.yaml: cannot read"),
        "{e}"
    );
}

// === units ===

#[test]
fn parse_duration_accepts_the_documented_forms() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("5s"), Ok(secs(5)));
    assert_eq!(parse_duration("1m"), Ok(secs(60)));
    assert_eq!(parse_duration("15m"), Ok(secs(900)));
    assert_eq!(parse_duration("10m"), Ok(secs(600)));
    assert_eq!(parse_duration("1h"), Ok(secs(3600)));
    assert_eq!(parse_duration("1m30s"), Ok(secs(90)));
    assert_eq!(
        parse_duration("1h2m3s4ms"),
        Ok(secs(3723) + Duration::from_millis(4))
    );
    assert_eq!(parse_duration(" 5s "), Ok(secs(5)));
    assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
}

#[test]
fn parse_duration_rejects_other_forms() {
    for bad in [
        "",
        " ",
        "5",
        "s",
        "5 s",
        "5sec",
        "five",
        "-5s",
        "1.5s",
        "5S",
        "m5",
        "1m30",
        "99999999999999999999s",
    ] {
        let e = parse_duration(bad).expect_err(bad);
        assert!(e.contains("expected a duration"), "{bad:?}: {e}");
        assert!(e.contains(&format!("'{bad}'")), "{bad:?}: {e}");
    }
}

#[test]
fn parse_size_accepts_the_documented_forms() {
    assert_eq!(parse_size("512"), Ok(512));
    assert_eq!(parse_size("512B"), Ok(512));
    assert_eq!(parse_size("64KiB"), Ok(64 << 10));
    assert_eq!(parse_size("16MiB"), Ok(16 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("2KB"), Ok(2_000));
    assert_eq!(parse_size("2kB"), Ok(2_000));
    assert_eq!(parse_size("3MB"), Ok(3_000_000));
    assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
    assert_eq!(parse_size(" 16 MiB "), Ok(16 << 20));
}

#[test]
fn parse_size_rejects_other_forms() {
    for bad in [
        "",
        "MiB",
        "16mib",
        "16XB",
        "-1",
        "1.5MiB",
        "16 mebibytes",
        "99999999999999999999",
        "99999999999999GiB",
    ] {
        let e = parse_size(bad).expect_err(bad);
        assert!(e.contains("expected a size"), "{bad:?}: {e}");
    }
}

// === README "Safety": bounded values, settings for browsers and connections ===

#[test]
fn huge_durations_are_rejected_with_their_place() {
    for (key, value) in [
        ("total", "18446744073709551615s"),
        ("total", "31d"),
        ("first_byte", "99999999999999999999h"),
    ] {
        let lines = base_with(
            3,
            &[
                "    url: http://gpu-box.local:11434/v1",
                &format!("    timeouts: {{ {key}: {value} }}"),
            ],
        );
        assert_rejected_at(&lines, 4, value, &[key, "at most"]);
    }
    let lines = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    breaker: { cooldown: 18446744073709551615s }",
        ],
    );
    assert_rejected_at(&lines, 4, "18446744073709551615s", &["cooldown", "at most"]);
    let lines = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    health: { path: /models, every: 40d }",
        ],
    );
    assert_rejected_at(&lines, 4, "40d", &["health.every", "at most 30d"]);
    // 30 days itself is fine.
    let lines = base_with(
        3,
        &[
            "    url: http://gpu-box.local:11434/v1",
            "    timeouts: { total: 30d }",
        ],
    );
    assert_eq!(
        parse(&lines).unwrap().machines[MachineId(0)].timeouts.total,
        secs(30 * 86_400)
    );
}

#[test]
fn parse_duration_bounds_everything_it_reads() {
    assert_eq!(parse_duration("7d"), Ok(secs(7 * 86_400)));
    assert_eq!(parse_duration("1d12h"), Ok(secs(36 * 3600)));
    for bad in [
        "18446744073709551615s",
        "99999999999999999999999ms",
        "4000d",
        "584942417355y",
    ] {
        let e = parse_duration(bad).expect_err(bad);
        assert!(e.contains("expected"), "{e}");
    }
    assert!(parse_duration_max("2d", Duration::from_secs(86_400)).is_err());
}

#[test]
fn a_password_in_a_machine_url_is_rejected_without_repeating_it() {
    let lines = base_with(3, &["    url: http://admin:hunter2@gpu-box.local:11434/v1"]);
    let msg = rejection(&lines);
    assert!(msg.contains("api_key_env"), "{msg}");
    assert!(!msg.contains("hunter2"), "the password leaked: {msg}");
    assert!(msg.starts_with(&format!("{FILE}:3:")), "{msg}");
    let lines = base_with(3, &["    url: http://token@gpu-box.local:11434/v1"]);
    assert!(rejection(&lines).contains("user name or password"));
    // Unparseable URLs with a password do not repeat it either.
    let lines = base_with(3, &["    url: http://admin:hunter2@[gpu-box/v1"]);
    assert!(!rejection(&lines).contains("hunter2"));
}

#[test]
fn server_settings_for_browsers_and_connections() {
    let mut lines: Vec<String> = vec![
        "server:".into(),
        "  allowed_hosts: [Mac-Mini.local]".into(),
        "  allowed_origins: [\"http://webui.lan:3000/\"]".into(),
        "  trusted_networks: [192.168.1.0/24, \"fd00::/8\", 10.1.2.3]".into(),
        "  header_timeout: 5s".into(),
        "  idle_timeout: 2m".into(),
        "  max_connections: 64".into(),
        "  max_upstream_body: 8MiB".into(),
        "  keep_ledger: 30d".into(),
        "  keep_responses: 2h".into(),
    ];
    lines.extend(BASE.iter().map(|s| s.to_string()));
    let reg = parse(&lines).unwrap();
    let s = &reg.server;
    assert_eq!(s.allowed_hosts, ["mac-mini.local"]);
    assert!(s
        .allowed_origins
        .contains(&"http://webui.lan:3000".to_string()));
    assert!(s
        .allowed_origins
        .contains(&"vscode-webview://*".to_string()));
    let ip = |t: &str| t.parse::<std::net::IpAddr>().unwrap();
    assert!(s.trusted_networks[0].contains(ip("192.168.1.77")));
    assert!(s.trusted_networks[0].contains(ip("::ffff:192.168.1.77")));
    assert!(!s.trusted_networks[0].contains(ip("192.168.2.1")));
    assert!(s.trusted_networks[1].contains(ip("fd12::1")));
    assert!(s.trusted_networks[2].contains(ip("10.1.2.3")));
    assert!(!s.trusted_networks[2].contains(ip("10.1.2.4")));
    assert_eq!(s.header_timeout, secs(5));
    assert_eq!(s.idle_timeout, secs(120));
    assert_eq!(s.max_connections, 64);
    assert_eq!(s.max_upstream_body, 8 << 20);
    assert_eq!(s.keep_ledger, secs(30 * 86_400));
    assert_eq!(s.keep_responses, secs(7200));

    let defaults = parse(&BASE.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let d = &defaults.server;
    assert_eq!(
        (
            d.header_timeout,
            d.idle_timeout,
            d.max_connections,
            d.max_upstream_body,
            d.keep_ledger
        ),
        (secs(10), secs(60), 1024, 64 << 20, secs(90 * 86_400))
    );
    assert!(d.trusted_networks.is_empty() && d.allowed_hosts.is_empty());
    assert_eq!(d.keep_responses, secs(86_400), "a day by default");

    let bad = |line: &str, needle: &str, says: &[&str]| {
        let mut lines: Vec<String> = vec!["server:".into(), line.into()];
        lines.extend(BASE.iter().map(|s| s.to_string()));
        assert_rejected_at(&lines, 2, needle, says);
    };
    bad(
        "  trusted_networks: [192.168.1.0/33]",
        "192.168.1.0/33",
        &["trusted_networks"],
    );
    bad("  trusted_networks: [lan]", "lan", &["trusted_networks"]);
    bad("  allowed_origins: [webui]", "webui", &["allowed_origins"]);
    bad("  max_connections: 0", "0", &["max_connections"]);
    bad("  keep_ledger: 0s", "0s", &["keep_ledger"]);
    bad("  keep_responses: 0s", "0s", &["keep_responses"]);
    bad("  keep_responses: soon", "soon", &["keep_responses"]);
    bad(
        "  allowed_hosts: [\"http://x/\"]",
        "\"http://x/\"",
        &["allowed_hosts"],
    );
}

#[test]
fn ipv4_mapped_loopback_is_loopback() {
    let ip = |t: &str| t.parse::<std::net::IpAddr>().unwrap();
    assert!(is_loopback(ip("::ffff:127.0.0.1")));
    assert!(is_loopback(ip("127.0.0.1")) && is_loopback(ip("::1")));
    assert!(!is_loopback(ip("::ffff:192.168.1.1")));
}
