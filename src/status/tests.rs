//! Unit tests of the `/status` view: its wire shape, its round trip, and the CLI table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use super::*;
use crate::breaker::{Event, Failure, FailureKind};
use crate::registry::Registry;

const YAML: &str = "\
machines:
  gpu-box:
    url: http://gpu-box.local:11434/v1
  apple:
    url: http://127.0.0.1:11434/v1
models:
  coder-gpu: { machine: gpu-box, name: \"qwen3-coder:30b\" }
  small: { machine: apple, name: \"qwen3:4b\" }
routes:
  - name: code
    keywords: [code, rust]
    chain: [coder-gpu, small]
  - name: chat
    default: true
    chain: [small]
";

fn fleet() -> Fleet {
    Fleet::new(Registry::parse(YAML, "registry.yaml").unwrap()).unwrap()
}

/// Every field set, `Some` and `None` both present.
fn sample() -> View {
    let open = MachineView {
        consecutive_failures: 3,
        cooldown_left_ms: 40_500,
        cooldown_ms: 60_000,
        in_flight: 1,
        last_reason: Some("HTTP 500".into()),
        local_rejections: 12,
        opened_at: Some("2026-11-30T14:02:11Z".into()),
        rate_limited_ms: Some(2_000),
        remote_attempts: 3,
        rerouted: 2,
        state: Phase::Open,
        url: "http://gpu-box.local:11434/v1".into(),
    };
    let closed = MachineView {
        remote_attempts: 10,
        url: "http://127.0.0.1:11434/v1".into(),
        ..MachineView::default()
    };
    View {
        host: Some(host::Stats {
            cpu_percent: Some(3.5),
            hostname: Some("mini".into()),
            load_1m: Some(Some(0.42)),
            mem_total_bytes: Some(16),
            mem_used_bytes: Some(9),
            uptime_s: Some(3600),
        }),
        machines: BTreeMap::from([("gpu-box".into(), open), ("apple".into(), closed)]),
        registry_version: "0123456789abcdef".into(),
        routes: vec![
            RouteView {
                chain: vec!["coder-gpu@gpu-box".into(), "small@apple".into()],
                name: "code".into(),
            },
            RouteView {
                chain: vec!["small@apple".into()],
                name: "chat".into(),
            },
        ],
    }
}

#[test]
fn a_view_round_trips_through_json() {
    let v = sample();
    let text = serde_json::to_string(&v).unwrap();
    assert_eq!(serde_json::from_str::<View>(&text).unwrap(), v);
    let bare = View::of(&fleet());
    let text = serde_json::to_string(&bare).unwrap();
    assert_eq!(serde_json::from_str::<View>(&text).unwrap(), bare);
}

/// The bytes the `json!` version wrote: keys sorted at every level, nulls kept, no host
/// block until the handler adds one.
#[test]
fn the_wire_shape_is_the_sorted_maps_it_always_was() {
    let v = View::of(&fleet());
    let text = serde_json::to_string(&v).unwrap();
    let machine = |url: &str| {
        format!(
            "{{\"consecutive_failures\":0,\"cooldown_left_ms\":0,\"cooldown_ms\":{},\
             \"in_flight\":0,\"last_reason\":null,\"local_rejections\":0,\"opened_at\":null,\
             \"rate_limited_ms\":null,\"remote_attempts\":0,\"rerouted\":0,\"state\":\"closed\",\
             \"url\":\"{url}\"}}",
            v.machines["apple"].cooldown_ms
        )
    };
    let want = format!(
        "{{\"machines\":{{\"apple\":{},\"gpu-box\":{}}},\"registry_version\":\"{}\",\
         \"routes\":[{{\"chain\":[\"{}\",\"{}\"],\"name\":\"code\"}},\
         {{\"chain\":[\"{}\"],\"name\":\"chat\"}}]}}",
        machine("http://127.0.0.1:11434/v1"),
        machine("http://gpu-box.local:11434/v1"),
        v.registry_version,
        v.routes[0].chain[0],
        v.routes[0].chain[1],
        v.routes[1].chain[0],
    );
    assert_eq!(text, want);
    assert!(!v.registry_version.is_empty());
    assert_eq!(v.routes[1].chain, v.routes[0].chain[1..]);

    let served: Value = serde_json::to_value(v.with_host(host::Stats::default())).unwrap();
    let keys: Vec<&String> = served.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["host", "machines", "registry_version", "routes"]);
    assert_eq!(
        served["host"],
        serde_json::json!({"hostname": null, "uptime_s": null})
    );
}

#[test]
fn an_open_breaker_shows_its_cooldown_and_when_it_opened() {
    let fleet = fleet();
    let i = fleet.registry.machine_index("gpu-box").unwrap();
    for _ in 0..10 {
        fleet.machines.step(
            i,
            Event::HealthFailed(Failure::of_kind(FailureKind::Refused)),
        );
    }
    let v = View::of(&fleet);
    let gpu = &v.machines["gpu-box"];
    assert_eq!(gpu.state, Phase::Open);
    assert!(gpu.cooldown_left_ms > 0 && gpu.cooldown_left_ms <= gpu.cooldown_ms);
    assert!(gpu.opened_at.as_deref().unwrap().ends_with('Z'));
    assert!(gpu.last_reason.is_some());
    let json: Value = serde_json::to_value(&v).unwrap();
    assert_eq!(json["machines"]["gpu-box"]["state"], "open");
    assert_eq!(v.machines["apple"].state, Phase::Closed);
}

#[test]
fn the_table_renders_from_a_view() {
    let want = "\
MACHINE  STATE   FAILS  COOLDOWN  ATTEMPTS  REJECTED  LAST REASON
apple    closed  0      -         10        0         -
gpu-box  open    3      41s       3         12        HTTP 500

route code: coder-gpu@gpu-box -> small@apple
route chat: small@apple
";
    let v = sample();
    assert_eq!(table(&v), want);
    let wire: View = serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
    assert_eq!(table(&wire), want);
}

#[test]
fn an_empty_status_renders_an_empty_table() {
    let text = table(&View::default());
    assert_eq!(
        text,
        "MACHINE  STATE  FAILS  COOLDOWN  ATTEMPTS  REJECTED  LAST REASON\n\n"
    );
}
