//! README "Safety": a web page must not be able to drive the router (CSRF, DNS rebinding), while
//! curl, SDKs, agents, Open WebUI, browser extensions and VS Code webviews keep working.

use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::Service;
use reqwest::header::{HOST, ORIGIN};
use serde_json::{json, Value};

use crate::support::{registry_yaml_with, serve, TestLab};

fn chat_body() -> Value {
    json!({"model": "code", "messages": [{"role": "user", "content": "hi"}]})
}

async fn error_of(resp: reqwest::Response) -> Value {
    resp.json::<Value>().await.unwrap()["error"].clone()
}

/// The reproduction: a `text/plain` POST from a page on evil.example opened a breaker.
#[tokio::test(start_paused = true)]
async fn a_cross_site_post_cannot_open_a_breaker() {
    let t = TestLab::start().await;
    let resp = t
        .client
        .post(format!("{}/admin/breakers/gpu-box/open", t.base))
        .header(ORIGIN, "https://evil.example")
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let e = error_of(resp).await;
    assert_eq!(e["code"], "cross_site_request");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("server.allowed_origins"));
    assert_eq!(t.state("gpu-box"), "closed");

    // A browser's cross-site request that carries no Origin is refused too.
    let resp = t
        .client
        .post(format!("{}/v1/chat/completions", t.base))
        .header("sec-fetch-site", "cross-site")
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(t.work(), (0, 0, 0));
}

/// The reproduction: `Host: rebind.attacker.example` got a completion.
#[tokio::test(start_paused = true)]
async fn a_rebound_host_name_is_refused_and_loopback_names_are_not() {
    let t = TestLab::start().await;
    let url = format!("{}/v1/chat/completions", t.base);
    let resp = t
        .client
        .post(&url)
        .header(HOST, "rebind.attacker.example:8080")
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let e = error_of(resp).await;
    assert_eq!(e["code"], "host_not_allowed");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("server.allowed_hosts"));
    assert_eq!(t.work(), (0, 0, 0));
    for host in [
        "localhost:8080",
        "127.0.0.1",
        "[::1]:11434",
        "host.docker.internal:8080",
    ] {
        let resp = t
            .client
            .post(&url)
            .header(HOST, host)
            .json(&chat_body())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "Host: {host}");
    }
    // /healthz answers anyone: it says nothing and changes nothing.
    let resp = t
        .client
        .get(format!("{}/healthz", t.base))
        .header(HOST, "rebind.attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test(start_paused = true)]
async fn allowed_hosts_and_origins_extend_the_defaults() {
    let t = TestLab::start_custom(
        "  allowed_hosts: [mac-mini.local]\n  allowed_origins: [\"http://webui.lan:3000\"]\n",
        "",
    )
    .await;
    let url = format!("{}/v1/chat/completions", t.base);
    let send = |host: &'static str, origin: &'static str| {
        t.client
            .post(&url)
            .header(HOST, host)
            .header(ORIGIN, origin)
            .json(&chat_body())
            .send()
    };
    assert_eq!(
        send("mac-mini.local:8080", "http://webui.lan:3000")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        send("mac-mini.local:8080", "http://localhost:5173")
            .await
            .unwrap()
            .status(),
        200
    );
    // The page the router served itself (same origin) may call it.
    assert_eq!(
        send("mac-mini.local:8080", "http://mac-mini.local:8080")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        send("mac-mini.local:8080", "http://other.lan:3000")
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        send("other.local", "http://webui.lan:3000")
            .await
            .unwrap()
            .status(),
        403
    );
}

/// Open WebUI's direct connections, browser extensions and VS Code webviews are browsers
/// on allowed origins: their preflights are answered and their requests served.
#[tokio::test(start_paused = true)]
async fn preflights_from_allowed_origins_are_answered() {
    let t = TestLab::start().await;
    let url = format!("{}/v1/chat/completions", t.base);
    for origin in [
        "http://localhost:3000",
        "http://127.0.0.1:8081",
        "vscode-webview://1a2b3c",
        "app://obsidian.md",
    ] {
        let pre = t
            .client
            .request(reqwest::Method::OPTIONS, &url)
            .header(ORIGIN, origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(pre.status(), 204, "{origin}");
        assert_eq!(
            pre.headers()["access-control-allow-origin"]
                .to_str()
                .unwrap(),
            origin
        );
        assert!(pre.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST"));
        let resp = t
            .client
            .post(&url)
            .header(ORIGIN, origin)
            .header("sec-fetch-site", "cross-site")
            .json(&chat_body())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{origin}");
        assert_eq!(
            resp.headers()["access-control-allow-origin"]
                .to_str()
                .unwrap(),
            origin
        );
    }
    let pre = t
        .client
        .request(reqwest::Method::OPTIONS, &url)
        .header(ORIGIN, "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 403);
    assert!(pre.headers().get("access-control-allow-origin").is_none());
    assert_eq!(t.work(), (4, 0, 0));
}

/// Serves the test lab's registry with `server_extra`, keys from `LR_TEST_KEYS_*`.
async fn keyed_lab(var: &str, server_extra: &str) -> (String, Sim, Sim, Sim) {
    let gpu = Sim::start("gpu-box").await.unwrap();
    let cpu = Sim::start("ubuntu-box").await.unwrap();
    let local = Sim::start("local").await.unwrap();
    std::env::set_var(var, "sekret-1, sekret-2");
    let extra = format!("  api_keys_env: {var}\n{server_extra}");
    let yaml = registry_yaml_with(&gpu, &cpu, &local, &extra, "");
    let reg = Registry::parse(&yaml, "test.yaml").unwrap();
    let svc = Arc::new(Service::in_memory(reg, None).unwrap());
    let (base, _) = serve(svc).await;
    (base, gpu, cpu, local)
}

/// With a valid key a request is never refused as cross-site: a page cannot attach one.
#[tokio::test(start_paused = true)]
async fn a_request_with_a_valid_key_is_never_cross_site() {
    let (base, gpu, _cpu, _local) = keyed_lab("LR_TEST_KEYS_CROSS", "").await;
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth("sekret-2")
        .header(ORIGIN, "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(gpu.work_hits(), 1);
}

/// Home Assistant on the LAN cannot send a key: `trusted_networks` lets it use the
/// inference routes, never the admin, status or task routes.
#[tokio::test(start_paused = true)]
async fn trusted_networks_reach_inference_routes_only() {
    let (base, gpu, _cpu, _local) = keyed_lab(
        "LR_TEST_KEYS_TRUSTED",
        "  trusted_networks: [\"127.0.0.0/8\", \"fd00::/8\"]\n",
    )
    .await;
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = client
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    for path in ["/status", "/status/events", "/metrics"] {
        let resp = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 401, "{path}");
    }
    let resp = client
        .post(format!("{base}/admin/breakers/gpu-box/open"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(gpu.work_hits(), 1);

    // A LAN browser on a page whose name was rebound to the router cannot ride on the
    // exemption: keyless requests from a trusted network get the Host check too. An IP
    // address as Host cannot be rebound (Home Assistant's base URL), and a key still wins.
    let send = |host: &'static str, key: Option<&'static str>| {
        let mut req = client
            .post(format!("{base}/v1/chat/completions"))
            .header(HOST, host)
            .json(&chat_body());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    let resp = send("rebind.attacker.example:8080", None).await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(error_of(resp).await["code"], "host_not_allowed");
    assert_eq!(send("192.168.1.10:8080", None).await.unwrap().status(), 200);
    assert_eq!(send("[fd00::10]:8080", None).await.unwrap().status(), 200);
    assert_eq!(
        send("rebind.attacker.example:8080", Some("sekret-1"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(gpu.work_hits(), 4);

    // A network that does not hold the client is no exemption.
    let (base, gpu, _cpu, _local) = keyed_lab(
        "LR_TEST_KEYS_UNTRUSTED",
        "  trusted_networks: [\"10.0.0.0/8\"]\n",
    )
    .await;
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(gpu.work_hits(), 0);
}
