//! A simulated OpenAI-compatible LLM server on loopback, scriptable into faults at runtime.
//!
//! Owns the fault vocabulary ([`Fault`]) and the [`Sim`] handle that tests, the demo and the
//! benchmarks use to make a "machine" misbehave on cue and to count what reached it. It runs
//! entirely in the caller's tokio runtime and waits only with `tokio::time`, so paused-clock
//! tests drive it deterministically.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{pending, poll_fn};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{watch, Notify};

/// The most work-request arrival times a sim remembers (a soak of hours stays bounded).
pub const HIT_LOG_MAX: usize = 1 << 22;

/// How the simulated machine misbehaves; switch it at any time with [`Sim::set`].
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer normally.
    Ok,
    /// Nothing listens: the listener is closed (connection refused) and every open connection is
    /// dropped with a TCP reset. Switching back to any other fault rebinds the same port.
    Refuse,
    /// Hard freeze: accept connections and read requests, never answer anything (every path,
    /// including /v1/models).
    Hang,
    /// Read the request (count it), then reset the TCP connection, no response bytes.
    Reset,
    /// Answer every work request with this HTTP status and an OpenAI-style JSON error body;
    /// `retry_after` (if Some) is sent verbatim as Retry-After. /v1/models still answers 200.
    Status {
        code: u16,
        retry_after: Option<String>,
    },
    /// 200 with content-type application/json whose body is not JSON, for work requests.
    Malformed,
    /// Normal answer, but response headers are delayed by this long (a slow generation);
    /// /v1/models answers at once: the machine is alive.
    SlowFirstByte(Duration),
    /// Streams: send each SSE content chunk with this delay before it (the first chunk too);
    /// non-stream answers normally. /v1/models answers at once.
    Drip(Duration),
    /// Streams: send headers and N chunks, then cut the connection with a TCP reset (no [DONE],
    /// no chunked terminator). N = 0 cuts before any body byte. Non-stream: headers then cut.
    CutAfter(usize),
    /// Streams: send headers and N chunks, then go silent forever with the connection open;
    /// meanwhile the whole machine is frozen (/v1/models hangs too). Non-stream: like Hang.
    StallAfter(usize),
    /// 200 application/json whose body is this many bytes, sent in 64 KiB frames and never
    /// built whole: a valid completion's opening, then spaces, then its end.
    Huge(usize),
}

/// Handle to one simulated machine; clones share it. Dropping handles does not stop serving
/// (the accept loop is a detached task): call [`Sim::shutdown`].
#[derive(Clone)]
pub struct Sim {
    inner: Arc<Inner>,
}

/// State shared by the handle, the accept loop and every connection task.
struct Inner {
    name: String,
    addr: SocketAddr,
    /// Runtime the sim was started in, so a synchronous `set` can rebind a tokio listener.
    rt: tokio::runtime::Handle,
    fault: watch::Sender<Fault>,
    stopped: watch::Sender<bool>,
    /// Bumped to drop every live connection at once (Refuse, shutdown).
    epoch: watch::Sender<u64>,
    /// The listener lives here (not in the accept task) so `set(Refuse)` closes it synchronously.
    listener: Mutex<Option<TcpListener>>,
    chunks: AtomicUsize,
    hits: Mutex<HashMap<String, u64>>,
    /// Wall-clock arrival of each work request (every path but /v1/models), oldest first,
    /// at most [`HIT_LOG_MAX`] of them.
    hit_log: Mutex<Vec<SystemTime>>,
    connections: AtomicU64,
    last_body: Mutex<Option<Bytes>>,
}

/// Locks a std mutex, shrugging off poisoning: the guarded data are plain counters.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sim {
    /// Binds 127.0.0.1:0 and serves in a spawned task. `name` appears in answers.
    pub async fn start(name: &str) -> io::Result<Sim> {
        Sim::start_on(name, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Same, on a given loopback address (demo and benchmarks use fixed ports).
    pub async fn start_on(name: &str, addr: SocketAddr) -> io::Result<Sim> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "sim binds loopback only",
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let inner = Arc::new(Inner {
            name: name.to_owned(),
            addr: listener.local_addr()?,
            rt: tokio::runtime::Handle::current(),
            fault: watch::Sender::new(Fault::Ok),
            stopped: watch::Sender::new(false),
            epoch: watch::Sender::new(0),
            listener: Mutex::new(Some(listener)),
            chunks: AtomicUsize::new(3),
            hits: Mutex::new(HashMap::new()),
            hit_log: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            last_body: Mutex::new(None),
        });
        tokio::spawn(accept_loop(inner.clone()));
        Ok(Sim { inner })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// "http://127.0.0.1:PORT/v1" — the OpenAI base URL a registry names.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.inner.addr)
    }

    /// Switches the fault; Refuse closes the port now, anything else reopens it now.
    pub fn set(&self, fault: Fault) {
        let refuse = fault == Fault::Refuse;
        self.inner.fault.send_replace(fault);
        if refuse {
            self.inner.close();
        } else {
            self.inner.ensure_listener();
        }
    }

    pub fn fault(&self) -> Fault {
        self.inner.fault.borrow().clone()
    }

    /// Number of SSE content chunks a stream sends before `data: [DONE]` (default 3).
    pub fn set_chunks(&self, n: usize) {
        self.inner.chunks.store(n, Ordering::Relaxed);
    }

    /// Requests received on this exact path, counted when the request head arrived, whatever
    /// the fault (Hang and Reset requests count; refused connections do not).
    pub fn hits(&self, path: &str) -> u64 {
        lock(&self.inner.hits).get(path).copied().unwrap_or(0)
    }

    /// Requests on every path except /v1/models (the work that reached the machine).
    pub fn work_hits(&self) -> u64 {
        let hits = lock(&self.inner.hits);
        hits.iter()
            .filter(|(p, _)| p.as_str() != "/v1/models")
            .map(|(_, n)| n)
            .sum()
    }

    /// When each work request arrived (wall clock, so it compares with the router's ledger),
    /// oldest first: the same requests [`Sim::work_hits`] counts, the first
    /// [`HIT_LOG_MAX`] of them.
    pub fn hit_times(&self) -> Vec<SystemTime> {
        lock(&self.inner.hit_log).clone()
    }

    /// Accepted TCP connections.
    pub fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::Relaxed)
    }

    /// The body of the last work request received (tests check the router rewrote only `model`).
    pub fn last_body(&self) -> Option<Bytes> {
        lock(&self.inner.last_body).clone()
    }

    /// Forgets hits, connections and the last body, so a test phase starts from zero.
    pub fn reset_counts(&self) {
        lock(&self.inner.hits).clear();
        lock(&self.inner.hit_log).clear();
        self.inner.connections.store(0, Ordering::Relaxed);
        *lock(&self.inner.last_body) = None;
    }

    /// Stops serving: closes the listener and drops every connection.
    pub fn shutdown(&self) {
        self.inner.stopped.send_replace(true);
        self.inner.close();
    }
}

impl Inner {
    fn current(&self) -> Fault {
        self.fault.borrow().clone()
    }

    /// True when nothing may listen or be served (Refuse or shut down).
    fn closed(&self) -> bool {
        *self.stopped.borrow() || *self.fault.borrow() == Fault::Refuse
    }

    /// Drops the listener and resets every live connection.
    fn close(&self) {
        drop(lock(&self.listener).take());
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Rebinds the same port if the sim should listen and does not; true if listening.
    /// Checked under the lock so a racing `set(Refuse)` can never be undone.
    fn ensure_listener(&self) -> bool {
        let mut slot = lock(&self.listener);
        if self.closed() {
            *slot = None;
            return false;
        }
        if slot.is_none() {
            let _rt = self.rt.enter();
            let bound = std::net::TcpListener::bind(self.addr).and_then(|l| {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l)
            });
            match bound {
                Ok(l) => *slot = Some(l),
                Err(e) => tracing::warn!(sim = %self.name, addr = %self.addr, "rebind failed: {e}"),
            }
        }
        slot.is_some()
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        match lock(&self.listener).as_ref() {
            Some(l) => l.poll_accept(cx),
            None => Poll::Pending,
        }
    }

    fn count(&self, path: &str) {
        *lock(&self.hits).entry(path.to_owned()).or_insert(0) += 1;
        if path != "/v1/models" {
            let mut log = lock(&self.hit_log);
            if log.len() < HIT_LOG_MAX {
                log.push(SystemTime::now());
            }
        }
    }
}

/// Accepts while listening; wakes on every fault change to close or rebind the port.
async fn accept_loop(inner: Arc<Inner>) {
    let mut fault_rx = inner.fault.subscribe();
    let mut stop_rx = inner.stopped.subscribe();
    loop {
        if *stop_rx.borrow_and_update() {
            return;
        }
        fault_rx.borrow_and_update();
        let listening = inner.ensure_listener();
        let retry_bind = !listening && !inner.closed();
        tokio::select! {
            res = poll_fn(|cx| inner.poll_accept(cx)), if listening => match res {
                Ok((stream, _)) => {
                    inner.connections.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(serve_conn(inner.clone(), stream));
                }
                Err(e) => {
                    tracing::debug!(sim = %inner.name, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = fault_rx.changed() => {}
            _ = stop_rx.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(50)), if retry_bind => {}
        }
    }
}

/// Serves one connection until it ends, a handler asks to kill it, or every connection is
/// dropped. A twin descriptor lets a kill set SO_LINGER 0 so the peer sees a reset, while
/// ordinary closes stay graceful.
async fn serve_conn(inner: Arc<Inner>, stream: TcpStream) {
    let mut epoch = inner.epoch.subscribe();
    let _ = stream.set_nodelay(true);
    let split = stream.into_std().and_then(|s| {
        let twin = s.try_clone()?;
        Ok((TcpStream::from_std(s)?, twin))
    });
    let (stream, twin) = match split {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(sim = %inner.name, "connection setup failed: {e}");
            return;
        }
    };
    if inner.closed() {
        return reset(twin);
    }
    let kill = Arc::new(Notify::new());
    let service = {
        let (inner, kill) = (inner.clone(), kill.clone());
        hyper::service::service_fn(move |req| {
            let (inner, kill) = (inner.clone(), kill.clone());
            async move { Ok::<_, Infallible>(handle(inner, kill, req).await) }
        })
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => return,
        () = kill.notified() => {}
        _ = epoch.changed() => {}
    }
    reset(twin);
}

/// Sets SO_LINGER 0 on the socket; once both descriptors close the kernel sends a RST.
fn reset(twin: std::net::TcpStream) {
    if let Err(e) = TcpSocket::from_std_stream(twin).set_zero_linger() {
        tracing::debug!("set_zero_linger failed: {e}");
    }
}

/// Kills the connection carrying this request and never answers.
async fn cut(kill: &Notify) -> Response<Body> {
    kill.notify_one();
    pending().await
}

#[derive(Clone, Copy, PartialEq)]
enum Route {
    Chat,
    Completions,
    Embeddings,
    Models,
    Unknown,
}

/// Answers one request according to the current fault.
async fn handle(inner: Arc<Inner>, kill: Arc<Notify>, req: Request<Incoming>) -> Response<Body> {
    if inner.closed() {
        return cut(&kill).await;
    }
    let path = req.uri().path().to_owned();
    inner.count(&path);
    let route = match (req.method(), path.as_str()) {
        (&Method::POST, "/v1/chat/completions") => Route::Chat,
        (&Method::POST, "/v1/completions") => Route::Completions,
        (&Method::POST, "/v1/embeddings") => Route::Embeddings,
        (&Method::GET, "/v1/models") => Route::Models,
        _ => Route::Unknown,
    };
    if route == Route::Models {
        return match inner.current() {
            Fault::Hang | Fault::StallAfter(_) => pending().await,
            Fault::Reset => cut(&kill).await,
            _ => json_reply(
                StatusCode::OK,
                json!({"object":"list","data":[{"id":"sim-model","object":"model","owned_by":inner.name}]}),
            ),
        };
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::BAD_REQUEST, "could not read the request body"),
    };
    *lock(&inner.last_body) = Some(body.clone());
    let fault = inner.current();
    match &fault {
        Fault::Hang => return pending().await,
        Fault::Reset => return cut(&kill).await,
        Fault::Status { code, retry_after } => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = error(
                status,
                &format!("{} answers {code} (simulated)", inner.name),
            );
            if let Some(v) = retry_after
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                resp.headers_mut().insert(RETRY_AFTER, v);
            }
            return resp;
        }
        Fault::Malformed => return reply(StatusCode::OK, "application/json", "<html>oops</html>"),
        Fault::Huge(n) => return reply(StatusCode::OK, "application/json", huge_body(*n)),
        Fault::SlowFirstByte(d) => tokio::time::sleep(*d).await,
        _ => {}
    }
    if route == Route::Unknown {
        return error(StatusCode::NOT_FOUND, &format!("no route for {path}"));
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "request body is not valid JSON");
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-model")
        .to_owned();
    let streams = route != Route::Embeddings && request.get("stream") == Some(&Value::Bool(true));
    let (chunks, end) = match fault {
        Fault::CutAfter(n) => (n, End::Cut),
        Fault::StallAfter(_) if !streams => return pending().await,
        Fault::StallAfter(n) => (n, End::Stall),
        _ => (inner.chunks.load(Ordering::Relaxed), End::Done),
    };
    let delay = match fault {
        Fault::Drip(d) => Some(d),
        _ => None,
    };
    let name = inner.name.clone();
    if streams || end == End::Cut {
        // A non-stream cut sends JSON headers, then resets before any body byte.
        let (chunks, kind) = match streams {
            true => (chunks, "text/event-stream"),
            false => (0, "application/json"),
        };
        let feed = Feed {
            route,
            model,
            name,
            chunks,
            delay,
            end,
            kill,
        };
        return reply(StatusCode::OK, kind, feed.into_body());
    }
    json_reply(StatusCode::OK, answer(route, &model, &name))
}

/// The complete non-stream answer for a work route.
fn answer(route: Route, model: &str, name: &str) -> Value {
    let text = format!("ok from {name}");
    match route {
        Route::Chat => {
            json!({"id":"chatcmpl-sim","object":"chat.completion","created":0,"model":model,
            "choices":[{"index":0,"message":{"role":"assistant","content":text},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}})
        }
        Route::Completions => {
            json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":model,
            "choices":[{"index":0,"text":text,"finish_reason":"stop"}]})
        }
        _ => json!({"object":"list","model":model,
            "data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}]}),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum End {
    Done,
    Cut,
    Stall,
}

/// A scripted body: `chunks` SSE chunks (each its own frame), then [DONE], a reset, or silence.
struct Feed {
    route: Route,
    model: String,
    name: String,
    chunks: usize,
    delay: Option<Duration>,
    end: End,
    kill: Arc<Notify>,
}

impl Feed {
    fn chunk(&self, i: usize) -> Bytes {
        let piece = format!("{}-{i} ", self.name);
        let v = match self.route {
            Route::Chat => json!({"id":"chatcmpl-sim","object":"chat.completion.chunk","created":0,
                "model":self.model,"choices":[{"index":0,"delta":{"content":piece},"finish_reason":null}]}),
            _ => json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":self.model,
                "choices":[{"index":0,"text":piece,"finish_reason":null}]}),
        };
        Bytes::from(format!("data: {v}\n\n"))
    }

    fn into_body(self) -> Body {
        let feed = Arc::new(self);
        Body::from_stream(futures_util::stream::unfold(0usize, move |i| {
            let feed = feed.clone();
            async move {
                if i < feed.chunks {
                    if let Some(d) = feed.delay {
                        tokio::time::sleep(d).await;
                    }
                    return Some((Ok::<_, Infallible>(feed.chunk(i)), i + 1));
                }
                match feed.end {
                    End::Done if i == feed.chunks => {
                        Some((Ok(Bytes::from_static(b"data: [DONE]\n\n")), i + 1))
                    }
                    End::Done => None,
                    End::Cut => {
                        // Let the chunks already handed to hyper reach the socket first.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        feed.kill.notify_one();
                        pending().await
                    }
                    End::Stall => pending().await,
                }
            }
        }))
    }
}

/// `n` bytes of a valid chat completion padded with spaces, streamed in 64 KiB frames.
fn huge_body(n: usize) -> Body {
    const FRAME: usize = 64 << 10;
    let head: &'static [u8] =
        br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"big"}}],"pad":""#;
    let tail: &'static [u8] = br#""}"#;
    let pad = n.saturating_sub(head.len() + tail.len());
    let frames = futures_util::stream::iter(
        std::iter::once(Bytes::from_static(head))
            .chain((0..pad.div_ceil(FRAME)).map(move |i| {
                let len = FRAME.min(pad - i * FRAME);
                Bytes::from(vec![b' '; len])
            }))
            .chain(std::iter::once(Bytes::from_static(tail)))
            .map(Ok::<_, Infallible>),
    );
    Body::from_stream(frames)
}

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response<Body> {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn json_reply(status: StatusCode, v: Value) -> Response<Body> {
    reply(status, "application/json", v.to_string())
}

/// An OpenAI-style error answer.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    let kind = match status.as_u16() {
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json_reply(
        status,
        json!({"error":{"message":message,"type":kind,"param":null,"code":null}}),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// No pooling: each request opens a fresh connection, so faults apply to it cleanly.
    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    }

    async fn chat(sim: &Sim, stream: bool) -> reqwest::Result<reqwest::Response> {
        let body =
            json!({"model":"m1","stream":stream,"messages":[{"role":"user","content":"hi"}]});
        client()
            .post(format!("{}/chat/completions", sim.base_url()))
            .json(&body)
            .send()
            .await
    }

    /// Reads a stream until it ends or fails; returns the text and whether it failed.
    async fn drain(resp: reqwest::Response) -> (String, bool) {
        let (mut text, mut body) = (String::new(), resp.bytes_stream());
        while let Some(item) = body.next().await {
            match item {
                Ok(b) => text.push_str(&String::from_utf8_lossy(&b)),
                Err(_) => return (text, true),
            }
        }
        (text, false)
    }

    #[tokio::test]
    async fn ok_answers_echo_and_count() {
        let sim = Sim::start("alpha").await.unwrap();
        let v: Value = chat(&sim, false).await.unwrap().json().await.unwrap();
        assert_eq!(v["model"], "m1");
        assert_eq!(v["choices"][0]["message"]["content"], "ok from alpha");
        let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
        assert!(!failed);
        assert_eq!(text.matches("data: ").count(), 4);
        assert!(text.contains("alpha-2 ") && text.ends_with("data: [DONE]\n\n"));
        let sent: Value = serde_json::from_slice(&sim.last_body().unwrap()).unwrap();
        assert_eq!(sent["stream"], true);
        let url = format!("{}/models", sim.base_url());
        let models: Value = client()
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(models["data"][0]["owned_by"], "alpha");
        let bad = client()
            .post(format!("{}/embeddings", sim.base_url()))
            .body("{nope");
        assert_eq!(bad.send().await.unwrap().status(), 400);
        assert_eq!(
            client()
                .get(format!("{}/x", sim.base_url()))
                .send()
                .await
                .unwrap()
                .status(),
            404
        );
        assert_eq!(sim.hits("/v1/chat/completions"), 2);
        assert_eq!(sim.hits("/v1/models"), 1);
        assert_eq!(sim.work_hits(), 4);
        assert_eq!(sim.hit_times().len(), 4);
        assert!(sim.hit_times().windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(sim.connections(), 5);
        sim.reset_counts();
        assert_eq!(
            (sim.work_hits(), sim.connections(), sim.last_body()),
            (0, 0, None)
        );
        assert!(sim.hit_times().is_empty());
    }

    #[tokio::test]
    async fn refuse_then_ok_on_the_same_port() {
        let sim = Sim::start("beta").await.unwrap();
        sim.set(Fault::Refuse);
        assert!(chat(&sim, false).await.unwrap_err().is_connect());
        assert_eq!((sim.work_hits(), sim.connections()), (0, 0));
        sim.set(Fault::Ok);
        assert_eq!(chat(&sim, false).await.unwrap().status(), 200);
        assert_eq!(sim.work_hits(), 1);
        sim.shutdown();
        assert!(chat(&sim, false).await.unwrap_err().is_connect());
    }

    #[tokio::test]
    async fn status_with_retry_after_and_reset() {
        let sim = Sim::start("gamma").await.unwrap();
        sim.set(Fault::Status {
            code: 503,
            retry_after: Some("7".into()),
        });
        let resp = chat(&sim, false).await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()[RETRY_AFTER], "7");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["type"], "server_error");
        sim.set(Fault::Reset);
        let err = chat(&sim, false).await.unwrap_err();
        assert!(!err.is_connect() && !err.is_status());
        assert_eq!(sim.hits("/v1/chat/completions"), 2);
    }

    #[tokio::test]
    async fn cut_after_yields_chunks_then_a_body_error() {
        let sim = Sim::start("delta").await.unwrap();
        sim.set(Fault::CutAfter(1));
        let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
        assert!(failed);
        assert_eq!(text.matches("data: ").count(), 1);
        assert!(text.contains("delta-0 ") && !text.contains("[DONE]"));
        sim.set(Fault::CutAfter(0));
        let resp = chat(&sim, false).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(drain(resp).await, (String::new(), true));
    }

    #[tokio::test(start_paused = true)]
    async fn hang_counts_but_never_answers() {
        let sim = Sim::start("eps").await.unwrap();
        sim.set(Fault::Hang);
        let url = format!("{}/models", sim.base_url());
        let task = tokio::spawn(async move { client().get(url).send().await });
        for _ in 0..10_000 {
            if sim.hits("/v1/models") == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(sim.hits("/v1/models"), 1);
        assert!(tokio::time::timeout(Duration::from_secs(3600), task)
            .await
            .is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn drip_spaces_chunks_in_virtual_time() {
        let sim = Sim::start("zeta").await.unwrap();
        sim.set(Fault::Drip(Duration::from_secs(2)));
        let start = tokio::time::Instant::now();
        let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
        assert!(!failed && text.ends_with("data: [DONE]\n\n"));
        assert!(start.elapsed() >= Duration::from_secs(6));
    }
}
