//! Reloads (README "Safety", §8) that retune a machine while a probe is in flight, and settings a
//! reload may not change.

use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::Fault;

use crate::support::{header, registry_yaml_with, TestLab};

fn http500() -> Fault {
    Fault::Status {
        code: 500,
        retry_after: None,
    }
}

/// The reproduction: a reload that changed the GPU box's breaker while its probe was in
/// flight built a new cell with `probe_in_flight` set; the probe reported to the old one and
/// the machine answered `probe_in_flight` forever. One cell per machine, retuned in place.
#[tokio::test(start_paused = true)]
async fn a_reload_during_a_probe_keeps_its_verdict() {
    let t = TestLab::start().await;
    t.gpu.set(http500());
    for _ in 0..3 {
        assert_eq!(t.chat("code", "hello").await.status(), 200);
    }
    assert_eq!(t.state("gpu-box"), "open");
    tokio::time::sleep(Duration::from_secs(61)).await;
    // The probe: a slow but live generation, held open across the reload.
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(20)));
    let probe = {
        let client = t.client.clone();
        let url = format!("{}/v1/chat/completions", t.base);
        tokio::spawn(async move {
            client
                .post(url)
                .json(&serde_json::json!({"model": "coder-gpu", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(t.state("gpu-box"), "half_open");
    let yaml = registry_yaml_with(&t.gpu, &t.cpu, &t.local, "", "  max_concurrency: 4\n")
        .replace("cooldown: 60s", "cooldown: 30s");
    t.svc
        .swap(Registry::parse(&yaml, "test.yaml"))
        .expect("reload applies");
    let lab = t.svc.fleet();
    let gpu = lab.registry.machine_index("gpu-box").unwrap();
    assert_eq!(
        lab.machines.snapshot(gpu).inflight,
        1,
        "the probe still counts"
    );
    // Meanwhile others skip the machine: one probe at a time.
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=probe_in_flight"
    );
    let answer = probe.await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        lab.machines.phase(gpu).as_str(),
        "closed",
        "the probe's verdict landed"
    );
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(lab.machines.snapshot(gpu).inflight, 0);
    // The new policy is the one in force: the next trip cools down for 30 s, not 60 s.
    t.gpu.set(http500());
    for _ in 0..3 {
        t.chat("code", "hello").await;
    }
    let b = lab.machines.snapshot(gpu).breaker;
    assert_eq!(b.cooldown, Duration::from_secs(30));
}

/// A reload may not move the socket or switch auth: such a file is rejected ("restart to
/// change") and the old registry keeps serving.
#[tokio::test(start_paused = true)]
async fn a_reload_that_changes_listen_or_keys_is_rejected() {
    let t = TestLab::start().await;
    let version = t.svc.fleet().registry.version.clone();
    let base = registry_yaml_with(&t.gpu, &t.cpu, &t.local, "", "");
    for (changed, setting) in [
        (
            base.replace("listen: 127.0.0.1:0", "listen: 0.0.0.0:8080"),
            "server.listen",
        ),
        (
            base.replace(
                "  max_body: 64KiB\n",
                "  max_body: 64KiB\n  api_keys_env: HOME\n",
            ),
            "server.api_keys_env",
        ),
    ] {
        let e = t
            .svc
            .swap(Registry::parse(&changed, "test.yaml"))
            .expect_err("rejected");
        let msg = e.to_string();
        assert!(msg.contains(setting) && msg.contains("restart"), "{msg}");
        assert_eq!(t.svc.fleet().registry.version, version);
    }
    assert_eq!(t.chat("code", "hi").await.status(), 200);
}
