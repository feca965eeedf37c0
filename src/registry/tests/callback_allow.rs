//! Unit tests of `tasks.callback_allow` (docs/api.md "Tasks"): the entries registry.yaml accepts,
//! the errors for the rest, and which URLs [`AllowRule::allows`].

use super::tasks::{rejected, with_tasks};
use super::{assert_rejected_at, rejection};
use crate::registry::AllowRule;

pub(super) fn rule(s: &str) -> AllowRule {
    AllowRule::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn url(s: &str) -> reqwest::Url {
    reqwest::Url::parse(s).unwrap()
}

// === rejections ===

#[test]
fn callback_allow_entries_that_are_not_scheme_host_port_are_rejected() {
    for (entry, why) in [
        ("ftp://127.0.0.1:", "not http or https"),
        ("ws://127.0.0.1:", "not http or https"),
        ("127.0.0.1:9000", "no scheme://"),
        ("http://127.0.0.1:9000/done", "path"),
        ("http://127.0.0.1:9000/?x=1", "query"),
        ("http://127.0.0.1:9000#top", "fragment"),
        ("http://", "host is empty"),
        ("http://:9000", "host is empty"),
        ("http://x:0", "port"),
        ("http://x:65536", "port"),
        ("http://x:+80", "port"),
        ("http://x:eighty", "port"),
        ("http://x:80:81", "port"),
        ("http://::1:", "brackets"),
        ("http://[::1", "IPv6"),
        ("http://[nothost]:", "IPv6"),
        ("http://[::1]9000", ":port"),
        ("http://exa mple:", "not a valid host"),
        ("http://a%2Fb:", "not a valid host"),
    ] {
        let line = format!("  callback_allow: [\"{entry}\"]");
        rejected(
            &line,
            &format!("\"{entry}"),
            &[
                "tasks.callback_allow[0]",
                why,
                "expected \"scheme://host:\" (any port)",
                "with scheme http or https",
                &format!("got '{entry}'"),
            ],
        );
    }
}

#[test]
fn callback_allow_errors_name_the_entry_and_keep_passwords_out() {
    let v = with_tasks(&[
        "  callback_allow:",
        "    - \"http://127.0.0.1:\"",
        "    - \"http://admin:hunter2@hooks.example:\"",
    ]);
    assert_rejected_at(
        &v,
        19,
        "\"http://admin",
        &[
            "tasks.callback_allow[1]: it carries user info (user:pass@)",
            "got 'http://***@hooks.example:'",
        ],
    );
    assert!(!rejection(&v).contains("hunter2"), "{}", rejection(&v));
    let v = with_tasks(&["  callback_allow: [\"http://user@127.0.0.1:\"]"]);
    assert_rejected_at(
        &v,
        17,
        "\"http",
        &["user info", "got 'http://***@127.0.0.1:'"],
    );
}

// === AllowRule ===

#[test]
fn allow_rules_parse_and_display_as_written() {
    for (written, scheme, host, port, shown) in [
        (
            "http://127.0.0.1:",
            "http",
            "127.0.0.1",
            None,
            "http://127.0.0.1:",
        ),
        (
            "http://localhost:/",
            "http",
            "localhost",
            None,
            "http://localhost:",
        ),
        (
            "https://hooks.example:8443",
            "https",
            "hooks.example",
            Some(8443),
            "https://hooks.example:8443",
        ),
        (
            "https://hooks.example",
            "https",
            "hooks.example",
            Some(443),
            "https://hooks.example",
        ),
        (
            "http://hooks.example/",
            "http",
            "hooks.example",
            Some(80),
            "http://hooks.example",
        ),
        (
            "http://hooks.example:80",
            "http",
            "hooks.example",
            Some(80),
            "http://hooks.example",
        ),
        (
            "https://hooks.example:80",
            "https",
            "hooks.example",
            Some(80),
            "https://hooks.example:80",
        ),
        (
            "HTTPS://Hooks.EXAMPLE:",
            "https",
            "hooks.example",
            None,
            "https://hooks.example:",
        ),
        ("http://[::1]:", "http", "[::1]", None, "http://[::1]:"),
        (
            "http://[0:0::1]:9000",
            "http",
            "[::1]",
            Some(9000),
            "http://[::1]:9000",
        ),
        ("http://[::1]", "http", "[::1]", Some(80), "http://[::1]"),
        (
            "http://127.1:",
            "http",
            "127.0.0.1",
            None,
            "http://127.0.0.1:",
        ),
        (" http://ci.lan: ", "http", "ci.lan", None, "http://ci.lan:"),
    ] {
        let r = rule(written);
        assert_eq!(
            (r.scheme.as_str(), r.host.as_str(), r.port),
            (scheme, host, port),
            "{written:?}"
        );
        assert_eq!(r.to_string(), shown, "{written:?}");
        assert_eq!(rule(&r.to_string()), r, "{written:?} round-trips");
    }
}

#[test]
fn a_rule_without_a_port_allows_any_port() {
    let r = rule("http://127.0.0.1:");
    assert!(r.allows(&url("http://127.0.0.1:9000/done")));
    assert!(r.allows(&url("http://127.0.0.1/done")), "80 is a port too");
    assert!(r.allows(&url("http://127.0.0.1:1/")));
    assert!(
        !r.allows(&url("https://127.0.0.1:9000/done")),
        "https is another scheme"
    );
    assert!(!r.allows(&url("http://127.0.0.2:9000/done")));
    assert!(
        !r.allows(&url("http://localhost:9000/done")),
        "hosts compare as written"
    );
}

#[test]
fn a_rule_with_no_port_written_allows_only_the_default_port() {
    let r = rule("https://hooks.example");
    assert!(r.allows(&url("https://hooks.example/lab")));
    assert!(r.allows(&url("https://hooks.example:443/lab")));
    assert!(!r.allows(&url("https://hooks.example:8443/lab")));
    assert!(
        !r.allows(&url("http://hooks.example/lab")),
        "http is another scheme"
    );
    let r = rule("http://hooks.example");
    assert!(r.allows(&url("http://hooks.example:80/x")));
    assert!(!r.allows(&url("http://hooks.example:8080/x")));
}

#[test]
fn a_rule_with_a_port_allows_that_port_only() {
    let r = rule("https://hooks.example:8443");
    assert!(r.allows(&url("https://hooks.example:8443/x?y=1")));
    assert!(!r.allows(&url("https://hooks.example/x")));
    assert!(!r.allows(&url("https://hooks.example:8444/x")));
    assert!(!r.allows(&url("http://hooks.example:8443/x")));
    let r = rule("http://hooks.example:80");
    assert!(
        r.allows(&url("http://hooks.example/x")),
        "the URL's default port"
    );
    let r = rule("http://hooks.example:443");
    assert!(
        !r.allows(&url("https://hooks.example/x")),
        "port matches, scheme does not"
    );
}

#[test]
fn hosts_compare_without_case() {
    let r = rule("http://LocalHost:");
    assert_eq!(r.host, "localhost");
    assert!(r.allows(&url("http://LOCALHOST:9000/")));
    let by_hand = AllowRule {
        scheme: "http".into(),
        host: "Hooks.Example".into(),
        port: None,
    };
    assert!(by_hand.allows(&url("http://hooks.example:1/")));
}

#[test]
fn user_info_is_never_allowed() {
    let r = rule("http://127.0.0.1:");
    assert!(!r.allows(&url("http://user:pass@127.0.0.1:9000/done")));
    assert!(!r.allows(&url("http://user@127.0.0.1:9000/done")));
    assert!(!r.allows(&url("http://:pass@127.0.0.1:9000/done")));
}

#[test]
fn a_prefix_is_not_enough() {
    let r = rule("http://localhost:");
    assert!(!r.allows(&url("http://localhost.evil.example:9000/")));
    let r = rule("http://127.0.0.1:80");
    // Reads as host evil.example with user 127.0.0.1 and password 80.
    assert!(!r.allows(&url("http://127.0.0.1:80@evil.example/")));
    assert!(!r.allows(&url("http://127.0.0.1:8080/")));
}

#[test]
fn ipv6_hosts_compare_as_addresses() {
    let r = rule("http://[::1]:");
    assert!(r.allows(&url("http://[::1]:8080/cb")));
    assert!(
        r.allows(&url("http://[0:0:0:0:0:0:0:1]:8080/cb")),
        "however written"
    );
    assert!(!r.allows(&url("http://[::2]:8080/cb")));
    assert!(!r.allows(&url("http://127.0.0.1:8080/cb")));
    let r = rule("http://[fd00::1]:8080");
    assert!(r.allows(&url("http://[FD00::1]:8080/")));
    assert!(!r.allows(&url("http://[fd00::1]:8081/")));
    assert!(!r.allows(&url("http://[fd00::1]/")));
}
