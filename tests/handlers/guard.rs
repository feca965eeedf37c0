//! The guard in front of every handler (README "Safety"): API keys, the Host check against DNS
//! rebinding, the Origin / Sec-Fetch-Site check against cross-site requests, and the trusted
//! networks, which it reads from `ConnectInfo` (put there by the server; here by the test).

use axum::body::Body;

use crate::lab::{chat, from_loopback, get, post, request, Lab};

/// A lab whose `server.api_keys_env` names `var`, set here to two keys. Each test names its
/// own variable: tests run in parallel in one process.
async fn keyed(var: &str, server_extra: &str) -> Lab {
    // SAFETY of set_var: this variable is read by the calling test alone.
    std::env::set_var(var, "k-one, k-two");
    Lab::in_memory(&format!("  api_keys_env: {var}\n{server_extra}")).await
}

const REBOUND: &str = "rebind.attacker.example";
const EVIL: &str = "http://evil.example";

#[tokio::test]
async fn without_a_key_everything_but_healthz_is_invalid_api_key() {
    let t = keyed("LABROUTER_HANDLERS_KEYS_REQUIRED", "").await;
    let auth = |v: &'static str| vec![("authorization", v)];
    let cases = [
        ("POST", "/v1/chat/completions", vec![]),
        ("POST", "/v1/chat/completions", auth("Bearer nope")),
        ("POST", "/v1/chat/completions", auth("k-one")),
        ("POST", "/v1/chat/completions", auth("Bearer k-one, k-two")),
        ("POST", "/v1/embeddings", auth("Basic k-one")),
        ("GET", "/v1/models", vec![]),
        ("GET", "/status", vec![]),
        ("GET", "/status/events", auth("Bearer ")),
        ("GET", "/metrics", vec![]),
        ("POST", "/admin/breakers/gpu-box/open", vec![]),
        ("POST", "/admin/reload", auth("Bearer k-three")),
        ("GET", "/no/such/path", vec![]),
    ];
    for (method, path, headers) in cases {
        let body = if path == "/v1/chat/completions" {
            Body::from(chat("small", "hello"))
        } else {
            Body::empty()
        };
        t.send(request(method, path, &headers, body)).await.error(
            401,
            "invalid_api_key",
            &["missing or wrong API key", "Authorization: Bearer"],
        );
    }
    assert_eq!(t.send(get("/healthz")).await.status, 200);
    t.untouched();

    // The control: either key is let in.
    let a = t
        .send(request(
            "GET",
            "/status",
            &[("authorization", "Bearer k-two")],
            Body::empty(),
        ))
        .await;
    assert_eq!(a.status, 200);
    let a = t
        .send(request(
            "POST",
            "/v1/chat/completions",
            &[("authorization", "Bearer k-one")],
            chat("small", "hello"),
        ))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test]
async fn a_valid_key_is_never_cross_site() {
    let t = keyed("LABROUTER_HANDLERS_KEYS_NOT_CROSS_SITE", "").await;
    let req = request(
        "POST",
        "/admin/breakers/gpu-box/open",
        &[
            ("authorization", "Bearer k-one"),
            ("origin", EVIL),
            ("sec-fetch-site", "cross-site"),
            ("host", REBOUND),
        ],
        Body::empty(),
    );
    let a = t.send(req).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(t.state("gpu-box"), "forced_open");
}

#[tokio::test]
async fn a_rebound_host_is_host_not_allowed() {
    let t = Lab::in_memory("  allowed_hosts: [router.lan]\n").await;
    for host in [
        REBOUND,
        "rebind.attacker.example:8080",
        "REBIND.attacker.example",
    ] {
        let cases = [
            get("/status"),
            get("/v1/models"),
            get("/"),
            get("/status/events"),
            post("/v1/chat/completions", chat("small", "hello")),
            post("/admin/breakers/gpu-box/open", ""),
            post("/admin/reload", ""),
        ];
        for mut req in cases {
            req.headers_mut().insert("host", host.parse().unwrap());
            t.send(req).await.error(
                403,
                "host_not_allowed",
                &[
                    "Host 'rebind.attacker.example' is not allowed",
                    "DNS rebinding",
                    "server.allowed_hosts",
                ],
            );
        }
    }
    t.untouched();

    // The controls: loopback names on any port, and the names allowed.
    for host in [
        "localhost",
        "localhost:8080",
        "127.0.0.1:4000",
        "[::1]:4000",
        "host.docker.internal",
        "router.lan:4000",
    ] {
        let req = request("GET", "/status", &[("host", host)], Body::empty());
        assert_eq!(t.send(req).await.status, 200, "Host {host}");
    }
}

#[tokio::test]
async fn cross_site_writes_are_cross_site_request() {
    let t = Lab::in_memory("  allowed_hosts: [router.lan]\n").await;
    let from_evil: &[&[(&str, &str)]] = &[
        &[("origin", EVIL)],
        &[("origin", EVIL), ("sec-fetch-site", "same-origin")],
        &[("origin", "http://localhost.evil.example")],
    ];
    for headers in from_evil {
        for (path, body) in [
            ("/v1/chat/completions", chat("small", "hello")),
            ("/admin/breakers/gpu-box/open", String::new()),
            ("/admin/reload", String::new()),
        ] {
            let origin = headers[0].1;
            t.send(request("POST", path, headers, body)).await.error(
                403,
                "cross_site_request",
                &[
                    &format!("a request from origin '{origin}' was refused"),
                    "CSRF",
                    "server.allowed_origins",
                    "server.api_keys_env",
                ],
            );
        }
    }
    // A browser's cross-site request without an Origin: nothing vouches for it.
    for site in ["cross-site", "same-site"] {
        let req = request(
            "POST",
            "/v1/chat/completions",
            &[("sec-fetch-site", site)],
            chat("small", "hello"),
        );
        t.send(req).await.error(
            403,
            "cross_site_request",
            &["a cross-site page", "server.allowed_origins"],
        );
    }
    // A preflight from a page not allowed is refused too.
    let req = request(
        "OPTIONS",
        "/v1/chat/completions",
        &[("origin", EVIL), ("access-control-request-method", "POST")],
        Body::empty(),
    );
    t.send(req)
        .await
        .error(403, "cross_site_request", &["'http://evil.example'"]);
    // A read is no write: answered, but the page may not read it.
    let req = request("GET", "/v1/models", &[("origin", EVIL)], Body::empty());
    let a = t.send(req).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("access-control-allow-origin"), "");
    t.untouched();

    // The controls: an allowed origin, and the router's own page.
    for origin in ["http://localhost:3000", "http://127.0.0.1:4000"] {
        let req = request(
            "POST",
            "/v1/chat/completions",
            &[("origin", origin)],
            chat("small", "hello"),
        );
        let a = t.send(req).await;
        assert_eq!(a.status, 200, "{origin}: {:?}", a.body);
        assert_eq!(a.header("access-control-allow-origin"), origin);
    }
    let req = request(
        "POST",
        "/admin/breakers/gpu-box/open",
        &[
            ("origin", "http://router.lan:4000"),
            ("host", "router.lan:4000"),
        ],
        Body::empty(),
    );
    assert_eq!(t.send(req).await.status, 200);
    assert_eq!(t.work(), (0, 0, 2));
    assert_eq!(t.state("gpu-box"), "forced_open");
}

#[tokio::test]
async fn trusted_networks_reach_inference_routes_only() {
    let t = keyed(
        "LABROUTER_HANDLERS_KEYS_TRUSTED",
        "  trusted_networks: [\"127.0.0.0/8\"]\n",
    )
    .await;
    // From 127.0.0.1, without a key: the inference routes only.
    let a = t.send(from_loopback(get("/v1/models"))).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = t
        .send(from_loopback(post(
            "/v1/chat/completions",
            chat("small", "hello"),
        )))
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(t.work(), (0, 0, 1));
    for req in [
        get("/status"),
        get("/status/events"),
        post("/admin/breakers/gpu-box/open", ""),
        post("/admin/reload", ""),
    ] {
        t.send(from_loopback(req))
            .await
            .error(401, "invalid_api_key", &["Authorization: Bearer"]);
    }
    // No peer known (no socket, no ConnectInfo): nothing vouches for the request.
    t.send(get("/v1/models"))
        .await
        .error(401, "invalid_api_key", &["Authorization: Bearer"]);
    // A trusted peer's Host is still checked: a page whose name was rebound to the router
    // must not ride on the exemption; an IP address cannot be rebound.
    let rebound = request("GET", "/v1/models", &[("host", REBOUND)], Body::empty());
    t.send(from_loopback(rebound)).await.error(
        403,
        "host_not_allowed",
        &["'rebind.attacker.example'", "server.allowed_hosts"],
    );
    let by_ip = request(
        "GET",
        "/v1/models",
        &[("host", "127.0.0.1:4000")],
        Body::empty(),
    );
    assert_eq!(t.send(from_loopback(by_ip)).await.status, 200);
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test]
async fn a_peer_outside_the_trusted_networks_needs_a_key() {
    let t = keyed(
        "LABROUTER_HANDLERS_KEYS_UNTRUSTED",
        "  trusted_networks: [\"10.0.0.0/8\"]\n",
    )
    .await;
    let req = from_loopback(post("/v1/chat/completions", chat("small", "hello")));
    t.send(req)
        .await
        .error(401, "invalid_api_key", &["Authorization: Bearer"]);
    t.untouched();
}

#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let t = keyed("LABROUTER_HANDLERS_KEYS_SCHEME_CASE", "").await;
    // RFC 9110: an authentication scheme is case-insensitive; the token is not.
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} k-one");
        let a = t
            .send(request(
                "POST",
                "/v1/chat/completions",
                &[("authorization", &auth)],
                chat("small", "hello"),
            ))
            .await;
        assert_eq!(a.status, 200, "{auth}: {:?}", a.body);
        let a = t
            .send(request(
                "GET",
                "/status",
                &[("authorization", &auth)],
                Body::empty(),
            ))
            .await;
        assert_eq!(a.status, 200, "{auth}: {:?}", a.body);
    }
    assert_eq!(t.work(), (0, 0, 4));
    // The key itself is still compared exactly, and a scheme must be followed by a space.
    for auth in ["bearer K-ONE", "bearerk-one", "bearer: k-one"] {
        t.send(request(
            "GET",
            "/status",
            &[("authorization", auth)],
            Body::empty(),
        ))
        .await
        .error(401, "invalid_api_key", &["Authorization: Bearer"]);
    }
    assert_eq!(t.work(), (0, 0, 4));
}
