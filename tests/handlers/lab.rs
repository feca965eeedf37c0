//! The lab of the handler tests: the three simulated machines of `tests/e2e` on 127.0.0.1
//! behind a [`Service`] built without a socket, and requests sent through
//! `labrouter::app(svc).oneshot(request)`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode};
use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::Service;
use serde_json::{json, Value};
use tempfile::TempDir;
use tower::ServiceExt;

use crate::support::registry_yaml_with;

pub struct Lab {
    pub gpu: Sim,
    pub cpu: Sim,
    pub local: Sim,
    pub svc: Arc<Service>,
    /// Holds `state/` (the ledger, for services that keep one) and `registry.yaml` (for
    /// services opened from a file); removed when the test ends.
    pub dir: TempDir,
}

/// How the service of a lab is built.
enum Memory {
    /// `Service::in_memory`: no store, no ledger.
    None,
    /// `Service::remembering`: a ledger under `state_dir`.
    Ledger,
    /// `Service::open` on `registry.yaml` in the lab's directory: a ledger, and reloads.
    File,
}

impl Lab {
    /// A service without a ledger; `server_extra` is YAML under `server:`.
    pub async fn in_memory(server_extra: &str) -> Lab {
        Lab::start(server_extra, Memory::None).await
    }

    /// A service with a ledger in a temporary `state_dir`.
    pub async fn remembering(server_extra: &str) -> Lab {
        Lab::start(server_extra, Memory::Ledger).await
    }

    /// A service opened from `registry.yaml` in a temporary directory, so it can reload.
    pub async fn from_file(server_extra: &str) -> Lab {
        Lab::start(server_extra, Memory::File).await
    }

    async fn start(server_extra: &str, memory: Memory) -> Lab {
        let gpu = Sim::start("gpu-box").await.expect("sim");
        let cpu = Sim::start("ubuntu-box").await.expect("sim");
        let local = Sim::start("local").await.expect("sim");
        let dir = tempfile::tempdir().expect("tempdir");
        let yaml = lab_yaml(&gpu, &cpu, &local, &dir, server_extra);
        let svc = match memory {
            Memory::None => Service::in_memory(parse(&yaml), None),
            Memory::Ledger => Service::remembering(parse(&yaml), None),
            Memory::File => {
                let path = dir.path().join("registry.yaml");
                std::fs::write(&path, &yaml).expect("write registry");
                Service::open(&path)
            }
        };
        Lab {
            gpu,
            cpu,
            local,
            svc: Arc::new(svc.expect("service")),
            dir,
        }
    }

    /// The registry text of this lab with `server_extra` under `server:`.
    pub fn yaml(&self, server_extra: &str) -> String {
        lab_yaml(&self.gpu, &self.cpu, &self.local, &self.dir, server_extra)
    }

    /// Where a lab opened with [`Lab::from_file`] reads its registry.
    pub fn registry_path(&self) -> PathBuf {
        self.dir.path().join("registry.yaml")
    }

    /// Sends `req` through the whole router: guard, routing, handler, error rendering.
    pub async fn send(&self, req: Request<Body>) -> Answer {
        let resp = labrouter::app(Arc::clone(&self.svc))
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("answer body");
        Answer {
            status,
            headers,
            body,
        }
    }

    /// Work requests (not liveness checks) that reached each machine: (gpu, cpu, local).
    pub fn work(&self) -> (u64, u64, u64) {
        (
            self.gpu.work_hits(),
            self.cpu.work_hits(),
            self.local.work_hits(),
        )
    }

    /// No machine was reached, not even by a liveness check, and no breaker moved or counted.
    pub fn untouched(&self) {
        assert_eq!(self.work(), (0, 0, 0), "work reached a machine");
        let models = |s: &Sim| s.hits("/v1/models");
        assert_eq!(
            models(&self.gpu) + models(&self.cpu) + models(&self.local),
            0,
            "a liveness check reached a machine"
        );
        let fleet = self.svc.fleet();
        assert_eq!(fleet.machines.snapshots().count(), 3);
        for s in fleet.machines.snapshots() {
            assert_eq!(s.breaker.phase.as_str(), "closed", "{}", s.name);
            assert_eq!(
                (s.remote_attempts, s.local_rejections, s.breaker.failures),
                (0, 0, 0),
                "{}",
                s.name
            );
        }
    }

    /// The breaker phase of `machine` now.
    pub fn state(&self, machine: &str) -> String {
        let fleet = self.svc.fleet();
        let i = fleet.registry.machine_index(machine).expect("machine");
        fleet.machines.phase(i).as_str().to_string()
    }
}

fn lab_yaml(gpu: &Sim, cpu: &Sim, local: &Sim, dir: &TempDir, server_extra: &str) -> String {
    let state = dir.path().join("state");
    let server = format!("  state_dir: \"{}\"\n{server_extra}", state.display());
    registry_yaml_with(gpu, cpu, local, &server, "")
}

fn parse(yaml: &str) -> Registry {
    Registry::parse(yaml, "test.yaml").expect("valid registry")
}

/// A request; `headers` in order, `body` as given (no Content-Length unless named).
pub fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    b.body(body.into()).expect("request")
}

pub fn get(path: &str) -> Request<Body> {
    request("GET", path, &[], Body::empty())
}

pub fn post(path: &str, body: impl Into<Body>) -> Request<Body> {
    request("POST", path, &[], body)
}

/// `req` as if it came from 127.0.0.1 over a socket (the guard reads the peer from
/// `ConnectInfo` for `server.trusted_networks`).
pub fn from_loopback(mut req: Request<Body>) -> Request<Body> {
    let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 50_000));
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

/// A chat completion body with `model` and a last user message `text`.
pub fn chat(model: &str, text: &str) -> String {
    json!({"model": model, "messages": [{"role": "user", "content": text}]}).to_string()
}

/// What the router answered.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} answered no JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Asserts the answer is the router's own error in OpenAI's envelope, with `status`,
    /// `code`, the `type` its status class gives, and a message containing every one of
    /// `says`; returns the message.
    pub fn error(&self, status: u16, code: &str, says: &[&str]) -> String {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status.as_u16(), status, "{code}: {text}");
        assert!(
            self.header("content-type").starts_with("application/json"),
            "{code}: content-type {:?}",
            self.header("content-type")
        );
        let v = self.json();
        let e = v["error"].as_object().expect("an error object");
        let mut keys: Vec<&str> = e.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["code", "message", "param", "type"], "{text}");
        let kind = if status >= 500 {
            "server_error"
        } else {
            "invalid_request_error"
        };
        assert_eq!(e["type"], kind, "{text}");
        assert_eq!(e["code"], code, "{text}");
        assert_eq!(e["param"], Value::Null, "{text}");
        let message = e["message"].as_str().expect("a message").to_string();
        for word in says {
            assert!(
                message.contains(word),
                "{code}: the message should say {word:?}: {message}"
            );
        }
        message
    }
}
