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
        decided_by: Some("mac-mini".into()),
        in_flight: 1,
        last_reason: Some("HTTP 500".into()),
        local_rejections: 12,
        parallel: 2,
        discovered: vec!["llama3.2:3b".into()],
        opened_at: Some("2026-11-30T14:02:11Z".into()),
        rate_limited_ms: Some(2_000),
        remote_attempts: 3,
        rerouted: 2,
        shared: true,
        state: Phase::Open,
        url: "http://gpu-box.local:11434/v1".into(),
        warm: vec!["qwen3-coder:30b".into()],
    };
    let closed = MachineView {
        remote_attempts: 10,
        url: "http://127.0.0.1:11434/v1".into(),
        ..MachineView::default()
    };
    View {
        cluster: Some(ClusterView {
            bad_share_errors: BTreeMap::from([(
                "http://gpu-box.local:11434/v1".into(),
                "its gen key holds no whole number below 9e15".into(),
            )]),
            bad_shares: 1,
            last_error: Some("Connection refused (os error 111)".into()),
            last_sync: Some("2026-11-30T14:02:09Z".into()),
            node: "mini".into(),
            peers_seen: vec!["studio".into()],
            prefix: "homelab".into(),
            since: Some("2026-11-30T14:02:10Z".into()),
            state: "up".into(),
        }),
        detached: None,
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
                tiers: vec![vec!["coder-gpu@gpu-box".into(), "small@apple".into()]],
            },
            RouteView {
                chain: vec!["small@apple".into()],
                name: "chat".into(),
                tiers: vec![],
            },
        ],
        shared_queue: None,
        tasks: None,
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
             \"decided_by\":null,\"in_flight\":0,\"last_reason\":null,\"local_rejections\":0,\"opened_at\":null,\
             \"parallel\":1,\"rate_limited_ms\":null,\"remote_attempts\":0,\"rerouted\":0,\"shared\":false,\
             \"state\":\"closed\",\"url\":\"{url}\",\"warm\":[]}}",
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

/// The link hands over plain data; the view counts every bad share and names a few.
#[test]
fn the_cluster_block_counts_every_bad_share_and_names_at_most_sixteen() {
    let at = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_511_331);
    let shown = crate::cluster::Shown {
        node: "mini".into(),
        prefix: "homelab".into(),
        state: crate::cluster::State::Up,
        since: Some(at),
        last_sync: Some(at),
        last_error: None,
        peers_seen: vec!["studio".into()],
        bad_shares: (0..100)
            .map(|i| (format!("http://box-{i:03}.lan:11434/v1"), "why".to_string()))
            .collect(),
    };
    let v = ClusterView::of(shown);
    assert_eq!(v.bad_shares, 100);
    assert_eq!(v.bad_share_errors.len(), BAD_SHARES_SHOWN);
    assert!(v
        .bad_share_errors
        .contains_key("http://box-000.lan:11434/v1"));
    assert_eq!(
        (v.state.as_str(), v.since.as_deref(), v.node.as_str()),
        ("up", Some("2025-11-30T14:02:11Z"), "mini")
    );
    assert_eq!(v.peers_seen, ["studio"]);
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

// === the tasks block ===

fn tasks_sample() -> TasksView {
    TasksView {
        blocked: 1,
        cancelled_24h: 2,
        expired_24h: 1,
        failed_24h: 3,
        oldest_waiting: Some(OldestWaiting {
            id: "tsk_0000000000aaaaaaaaaaaaaaaa".parse().unwrap(),
            since: "2026-11-30T14:02:11Z".into(),
            waiting_for: Some("every target it accepts is held back: gpu-box open".into()),
        }),
        oldest_waiting_s: Some(125),
        queued: 4,
        recent_failures: vec![TaskFailure {
            code: Some(crate::outcome::TaskCode::DeadlineExceeded),
            finished_at: "2026-11-30T15:00:00Z".into(),
            id: "tsk_0000000000bbbbbbbbbbbbbbbb".parse().unwrap(),
            message: Some("its deadline passed before it finished".into()),
            status: crate::outcome::TaskStatus::Expired,
        }],
        running: 2,
        succeeded_24h: 40,
        waiting: 5,
    }
}

#[test]
fn the_tasks_block_is_added_last_with_sorted_keys_and_round_trips() {
    let v = sample().with_tasks(Some(tasks_sample()));
    let json: Value = serde_json::to_value(&v).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "cluster",
            "host",
            "machines",
            "registry_version",
            "routes",
            "tasks"
        ]
    );
    let text = serde_json::to_string(&json["tasks"]).unwrap();
    assert_eq!(
        text,
        "{\"blocked\":1,\"cancelled_24h\":2,\"expired_24h\":1,\"failed_24h\":3,\
         \"oldest_waiting\":{\"id\":\"tsk_0000000000aaaaaaaaaaaaaaaa\",\
         \"since\":\"2026-11-30T14:02:11Z\",\
         \"waiting_for\":\"every target it accepts is held back: gpu-box open\"},\
         \"oldest_waiting_s\":125,\"queued\":4,\
         \"recent_failures\":[{\"code\":\"deadline_exceeded\",\"finished_at\":\"2026-11-30T15:00:00Z\",\
         \"id\":\"tsk_0000000000bbbbbbbbbbbbbbbb\",\
         \"message\":\"its deadline passed before it finished\",\"status\":\"expired\"}],\
         \"running\":2,\"succeeded_24h\":40,\"waiting\":5}"
    );
    assert_eq!(serde_json::from_value::<View>(json).unwrap(), v);
}

#[test]
fn the_detached_block_sorts_after_cluster_and_round_trips() {
    let v = sample().with_detached((2, 2048));
    let json: Value = serde_json::to_value(&v).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "cluster",
            "detached",
            "host",
            "machines",
            "registry_version",
            "routes"
        ]
    );
    assert_eq!(
        serde_json::to_string(&json["detached"]).unwrap(),
        "{\"bytes\":2048,\"flights\":2}"
    );
    assert_eq!(serde_json::from_value::<View>(json).unwrap(), v);
    let old: View = serde_json::from_value(serde_json::json!({"routes": []})).unwrap();
    assert_eq!(old.detached, None, "an older router's status reads");
}

/// `labrouter status` against a router from before tasks, or one without a store.
#[test]
fn a_status_without_tasks_reads_and_prints_no_tasks_line() {
    let old = serde_json::json!({"machines": {}, "registry_version": "x", "routes": []});
    let v: View = serde_json::from_value(old).unwrap();
    assert_eq!(v.tasks, None);
    assert!(!table(&v).contains("tasks"));
    let nulled: View = serde_json::from_value(serde_json::json!({"tasks": null})).unwrap();
    assert_eq!(nulled.tasks, None);
    // A newer router's extra keys inside the block are ignored; missing ones are 0.
    let partial: View =
        serde_json::from_value(serde_json::json!({"tasks": {"queued": 3, "shiny_new": true}}))
            .unwrap();
    let t = partial.tasks.unwrap();
    assert_eq!((t.queued, t.waiting, t.oldest_waiting_s), (3, 0, None));
}

#[test]
fn the_table_ends_with_a_tasks_line() {
    let v = sample().with_tasks(Some(tasks_sample()));
    let text = table(&v);
    assert!(
        text.ends_with(
            "route chat: small@apple\n\ntasks: 4 queued, 5 waiting, 2 running, 1 blocked; \
             last 24 h: 40 succeeded, 3 failed, 1 expired, 2 cancelled; \
             oldest waiting 2m (tsk_0000000000aaaaaaaaaaaaaaaa)\n"
        ),
        "{text}"
    );
    let idle = View::default().with_tasks(Some(TasksView::default()));
    assert!(table(&idle).ends_with(
        "\ntasks: 0 queued, 0 waiting, 0 running, 0 blocked; \
         last 24 h: 0 succeeded, 0 failed, 0 expired, 0 cancelled\n"
    ));
}

#[test]
fn the_tasks_view_is_built_from_live_counts_and_the_stores_day() {
    use crate::outcome::{TaskCode, TaskStatus};
    use crate::store::tasks::Failure;
    use crate::task::TaskError;
    use crate::tasks::scheduler::Counts;

    let counts = Counts {
        blocked: 1,
        queued: 2,
        waiting: 3,
        running: 4,
        oldest_waiting_s: Some(60),
    };
    let failure = Failure {
        id: "tsk_0000000000cccccccccccccccc".parse().unwrap(),
        status: TaskStatus::Failed,
        finished_ms: 1_764_511_200_000,
        error: Some(TaskError {
            kind: "task_error".into(),
            code: TaskCode::AttemptsExhausted,
            message: "x".repeat(1000),
            upstream: None,
        }),
    };
    let finished = [
        (TaskStatus::Succeeded, 7),
        (TaskStatus::Failed, 1),
        (TaskStatus::Cancelled, 2),
    ];
    let v = TasksView::of(&counts, None, &finished, std::slice::from_ref(&failure));
    assert_eq!(
        (
            v.blocked,
            v.queued,
            v.waiting,
            v.running,
            v.oldest_waiting_s
        ),
        (1, 2, 3, 4, Some(60))
    );
    assert_eq!(
        (
            v.succeeded_24h,
            v.failed_24h,
            v.expired_24h,
            v.cancelled_24h
        ),
        (7, 1, 0, 2)
    );
    assert_eq!(v.oldest_waiting, None);
    let f = &v.recent_failures[0];
    assert_eq!(f.id, failure.id);
    assert_eq!(f.code, Some(TaskCode::AttemptsExhausted));
    assert_eq!(f.finished_at, "2025-11-30T14:00:00Z");
    assert!(
        f.message.as_ref().unwrap().chars().count() < 1000,
        "a long message is bounded"
    );
}
