//! Who may drive the router (README "Safety"): bearer keys, the Host check against DNS rebinding,
//! the Origin / Sec-Fetch-Site check against cross-site requests, CORS for the origins
//! allowed, and the trusted networks that may call the inference routes without a key.
//!
//! Clients that are not browsers (curl, SDKs, agents) send neither `Origin` nor
//! `Sec-Fetch-Site` and are never refused as cross-site; a request with a valid key never
//! is either, since a page cannot attach one unasked.
//!
//! Every request it lets through carries its [`Owner`]: the hash of the key it was accepted
//! with, or "" without one.

use std::borrow::Cow;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::error::{AppError, Code};
use super::owner::Owner;
use crate::fleet::Fleet;
use crate::registry::Server;
use crate::service::Service;
use crate::text::bounded;

/// Host names a loopback router answers to without keys (any port).
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]", "host.docker.internal"];

/// A browser's word on where a request comes from.
static SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// Headers a browser page may send us, for CORS preflights.
const ALLOWED_HEADERS: &str =
    "authorization, content-type, x-labrouter-route, x-labrouter-wait, idempotency-key";

/// Headers a page may read from our answers.
const EXPOSED_HEADERS: &str =
    "x-labrouter-route, x-labrouter-target, x-labrouter-pick, x-labrouter-skipped, retry-after, idempotent-replayed";

/// The middleware: every request the router walks passes here before any handler.
pub async fn guard(State(svc): State<Arc<Service>>, req: Request, next: Next) -> Response {
    guarded(&svc, req, |req| next.run(req)).await
}

/// The guard around `next`: for the router's middleware, and for the hot POSTs served
/// without the router's walk ([`super::hot`]).
pub async fn guarded<F, Fut>(svc: &Service, req: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    // Ollama's clients read `{"error": "..."}`: every refusal on its routes, the guard's own
    // included, is shaped so (docs/api.md "The Ollama endpoints"). One layer for both: a request
    // pays for one.
    let ollama = req.uri().path().starts_with("/api/");
    let fleet = svc.fleet();
    let access = fleet.registry.server.access_log;
    let access = access.then(|| super::access::Access::of(&req));
    let started = Instant::now();
    let resp = check(svc, req, next).await;
    if let Some(crate::proxy::Waited(waited)) = resp.extensions().get() {
        let own = started.elapsed().saturating_sub(*waited);
        fleet.record_overhead(own.as_secs_f64());
    }
    let resp = if ollama {
        super::ollama::shape(resp).await
    } else {
        resp
    };
    if let Some(access) = access {
        access.log(&resp);
    }
    resp
}

async fn check<F, Fut>(svc: &Service, mut req: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let fleet = svc.fleet();
    let path = req.uri().path();
    // The router's own liveness answers everyone: it says nothing and changes nothing.
    if path == "/healthz" {
        return next(req).await;
    }
    let headers = req.headers();
    let keyed = !fleet.api_keys.is_empty();
    let key = valid_key(headers, &fleet);
    let has_key = key.is_some();
    let owner = key.map_or_else(Owner::keyless, Owner::of_key);
    let server = &fleet.registry.server;
    // Served without a key from a trusted network: a LAN browser on a page whose name was
    // rebound to this router must not ride on that exemption, so the Host is checked too;
    // an IP address as Host cannot be rebound, so it passes (Home Assistant's base URL).
    let trusted_keyless = keyed && !has_key && trusted(path, &req, server);
    if !keyed || trusted_keyless {
        if let Some(host) = host_of(&req) {
            let ip_literal = trusted_keyless
                && host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok();
            if !ip_literal && !host_allowed(&host, server) {
                return forbidden(
                    Code::HostNotAllowed,
                    format!("Host '{}' is not allowed (DNS rebinding protection): add it to server.allowed_hosts if this router is meant to answer to that name", bounded(&host)),
                );
            }
        }
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let origin_ok = origin.map(|o| origin_allowed(o, &req, &fleet.registry.server));
    if req.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return match (origin, origin_ok) {
            (Some(o), Some(true)) => preflight(o, headers),
            _ => cross_site(origin),
        };
    }
    if !has_key {
        if keyed && path != "/" && !trusted_keyless {
            return AppError::new(
                Code::InvalidApiKey,
                "missing or wrong API key: send Authorization: Bearer <key>",
            )
            .into_response();
        }
        let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
        let fetch_site = headers
            .get(&SEC_FETCH_SITE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let from_elsewhere = matches!(fetch_site, "cross-site" | "same-site");
        let refused = match origin_ok {
            Some(ok) => !ok,
            // A browser's cross-site request without an Origin: nothing vouches for it.
            None => from_elsewhere,
        };
        if !safe && refused {
            return cross_site(origin);
        }
    }
    let cors_origin = match (origin, origin_ok) {
        (Some(o), Some(true)) => HeaderValue::from_str(o).ok(),
        _ => None,
    };
    req.extensions_mut().insert(owner);
    let mut resp = next(req).await;
    if let Some(o) = cors_origin {
        allow_origin(&mut resp, o);
    }
    resp
}

/// CORS on an answer to an allowed origin: it may read the answer and our headers.
fn allow_origin(resp: &mut Response, origin: HeaderValue) {
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED_HEADERS),
    );
    h.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// With keys set, what may be called without one: the dashboard page (it holds no data
/// and fetches /status with the key it asks for; a browser cannot send a bearer header when
/// it first opens it), and the inference routes from `server.trusted_networks`.
fn trusted(path: &str, req: &Request, server: &Server) -> bool {
    let inference = matches!(
        path,
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings" | "/v1/models"
    ) || path.starts_with("/v1/models/")
        || path.starts_with("/api/")
        || path == "/v1/responses"
        || path.starts_with("/v1/responses/")
        || path.starts_with("/v1/images/")
        || path.starts_with("/v1/audio/")
        || matches!(path, "/v1/rerank" | "/v1/reranking" | "/rerank");
    inference && peer(req).is_some_and(|ip| server.trusted_networks.iter().any(|n| n.contains(ip)))
}

fn peer(req: &Request) -> Option<IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The configured key the request's bearer token matches, if any.
fn valid_key<'f>(headers: &HeaderMap, fleet: &'f Fleet) -> Option<&'f str> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)?;
    fleet
        .api_keys
        .iter()
        .find(|k| constant_time_eq(k.as_bytes(), token.as_bytes()))
        .map(String::as_str)
}

/// The token of `Bearer TOKEN`. The scheme is matched in any case, as RFC 9110 says
/// authentication schemes are (clients send `bearer` too); the token is taken as sent.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Compares without stopping at the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request's host name, lower case, without its port; `None` when it names none
/// (an HTTP/1.0 client: no browser, so no rebinding).
/// The request's host, without its port, in lower case: borrowed from the request unless
/// it had capitals.
fn host_of(req: &Request) -> Option<Cow<'_, str>> {
    let raw = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))?;
    let host = strip_port(raw.trim());
    Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

/// `host:port` → `host`; `[::1]:8080` → `[::1]`.
fn strip_port(hostport: &str) -> &str {
    if hostport.starts_with('[') {
        return match hostport.find(']') {
            Some(end) => &hostport[..=end],
            None => hostport,
        };
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => hostport,
    }
}

fn host_allowed(host: &str, server: &Server) -> bool {
    LOOPBACK_HOSTS.contains(&host) || server.allowed_hosts.iter().any(|h| h == host)
}

/// An origin is allowed when a pattern of `server.allowed_origins` matches it, or when it
/// is the request's own origin (same Host: a page the router itself served).
fn origin_allowed(origin: &str, req: &Request, server: &Server) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    if server.allowed_origins.iter().any(|p| glob(p, &origin)) {
        return true;
    }
    let authority = origin.split_once("://").map(|(_, a)| a);
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    matches!((authority, host), (Some(a), Some(h)) if a == h)
}

/// `*` matches any run of characters (none included); everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return pattern == text;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The answer to a CORS preflight from an allowed origin.
fn preflight(origin: &str, headers: &HeaderMap) -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    if let Ok(o) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
    }
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, HEAD, OPTIONS"),
    );
    let asked = headers
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or(HeaderValue::from_static(ALLOWED_HEADERS));
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    resp
}

fn cross_site(origin: Option<&str>) -> Response {
    let who = match origin {
        Some(o) => format!("origin '{}'", bounded(o)),
        None => "a cross-site page".to_string(),
    };
    forbidden(
        Code::CrossSiteRequest,
        format!("a request from {who} was refused (CSRF protection): add the origin to server.allowed_origins, or send an API key (server.api_keys_env)"),
    )
}

fn forbidden(code: Code, message: String) -> Response {
    AppError::new(code, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_ollama_style_patterns() {
        assert!(glob("http://localhost:*", "http://localhost:3000"));
        assert!(glob("http://localhost", "http://localhost"));
        assert!(!glob("http://localhost", "http://localhost.evil.example"));
        assert!(!glob("http://localhost:*", "http://localhostx:3000"));
        assert!(glob("vscode-webview://*", "vscode-webview://1abc"));
        assert!(glob("*", "anything"));
        assert!(glob("https://*.example.com", "https://a.example.com"));
        assert!(!glob("https://*.example.com", "https://a.example.com.evil"));
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case_and_the_token_as_sent() {
        for v in ["Bearer k", "bearer k", "BEARER k", "bEaReR k", "Bearer  k "] {
            assert_eq!(bearer_token(v), Some("k"), "{v}");
        }
        assert_eq!(bearer_token("bearer K"), Some("K"));
        for v in ["Basic k", "Bearerk", "k", "Bearer:k", ""] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
    }

    #[test]
    fn ports_are_stripped_from_hosts() {
        assert_eq!(strip_port("localhost:8080"), "localhost");
        assert_eq!(strip_port("[::1]:8080"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(
            strip_port("rebind.attacker.example"),
            "rebind.attacker.example"
        );
    }
}
