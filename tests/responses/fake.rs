//! A scripted machine that serves the Responses API the way real servers do (Ollama 0.13,
//! llama-server, vLLM): stateless, each Response's output the text it is told, streamed as
//! typed SSE events. It counts what reached it and keeps every body it was sent.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream;
use serde_json::{json, Value};

/// How the machine answers its next requests.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Ok,
    /// Every request gets this status (and an OpenAI error body).
    Status(u16),
    /// 200, JSON that is not a Response.
    NotAResponse,
    /// Streams: headers, then the connection cut after this many events (0: before any).
    CutAfter(usize),
    /// Streams: the first event at once, the rest after this long.
    SlowAfterFirst(Duration),
    /// Nothing listens (connection refused).
    Down,
    /// Streams as llama-server's `/v1/responses` does (its `tools/server/server-task.cpp`):
    /// no `sequence_number`, a bare `response.created`, the text's `done` events, and the
    /// whole Response in `response.completed`.
    LlamaServer,
}

pub struct Fake {
    pub name: String,
    pub base: String,
    mode: Mutex<Mode>,
    hits: AtomicU64,
    seq: AtomicU64,
    pub bodies: Mutex<Vec<Value>>,
    text: Mutex<Option<String>>,
    /// The last streamed Response was sent whole.
    pub finished: Arc<std::sync::atomic::AtomicBool>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    addr: std::net::SocketAddr,
}

impl Fake {
    pub async fn start(name: &str) -> Arc<Fake> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = Arc::new(Fake {
            name: name.to_string(),
            base: format!("http://{addr}/v1"),
            mode: Mutex::new(Mode::Ok),
            hits: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            bodies: Mutex::new(Vec::new()),
            text: Mutex::new(None),
            finished: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            stop: Mutex::new(None),
            addr,
        });
        fake.listen(listener);
        fake
    }

    fn listen(self: &Arc<Self>, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/v1/responses", post(respond))
            .route("/v1/chat/completions", post(chat))
            .route(
                "/v1/models",
                get(|| async { Json(json!({"object": "list", "data": []})) }),
            )
            .with_state(Arc::clone(self));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        *self.stop.lock().unwrap() = Some(tx);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
    }

    pub async fn set(self: &Arc<Self>, mode: Mode) {
        let was = std::mem::replace(&mut *self.mode.lock().unwrap(), mode.clone());
        if mode == Mode::Down && was != Mode::Down {
            if let Some(stop) = self.stop.lock().unwrap().take() {
                let _ = stop.send(());
            }
            tokio::task::yield_now().await;
        }
        if was == Mode::Down && mode != Mode::Down {
            let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
            self.listen(listener);
        }
    }

    pub fn set_text(&self, text: &str) {
        *self.text.lock().unwrap() = Some(text.to_string());
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn last_body(&self) -> Value {
        self.bodies
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        self.text
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| format!("ok from {}", self.name))
    }

    /// A Response as the machine makes one: a new id each time, stateless.
    fn response(&self, model: &str, status: &str, text: &str) -> Value {
        let n = self.seq.fetch_add(1, Ordering::SeqCst);
        json!({
            "id": format!("resp_{}_{n}", self.name.replace('-', "_")),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": model,
            "previous_response_id": null,
            "output": if text.is_empty() { json!([]) } else { json!([{
                "type": "message", "id": format!("msg_{n}"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]
            }]) },
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
        })
    }
}

fn sse(kind: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

async fn chat(State(fake): State<Arc<Fake>>) -> Response {
    fake.hits.fetch_add(1, Ordering::SeqCst);
    Json(json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": fake.text()}, "finish_reason": "stop"}]})).into_response()
}

async fn respond(State(fake): State<Arc<Fake>>, Json(body): Json<Value>) -> Response {
    fake.hits.fetch_add(1, Ordering::SeqCst);
    fake.bodies.lock().unwrap().push(body.clone());
    let mode = fake.mode.lock().unwrap().clone();
    let model = body["model"].as_str().unwrap_or("m").to_string();
    match mode {
        Mode::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap();
            let err = json!({"error": {"message": format!("HTTP {code} from {}", fake.name), "type": "server_error"}});
            return (status, Json(err)).into_response();
        }
        Mode::NotAResponse => {
            return Json(json!({"object": "chat.completion", "choices": []})).into_response()
        }
        _ => {}
    }
    let text = fake.text();
    if body["stream"] != true {
        return Json(fake.response(&model, "completed", &text)).into_response();
    }
    let done = fake.response(&model, "completed", &text);
    let mut created = done.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    let item = done["output"][0].clone();
    let events = vec![
        sse(
            "response.created",
            json!({"type": "response.created", "sequence_number": 0, "response": created}),
        ),
        sse(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "message", "id": item["id"], "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        sse(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text}),
        ),
        sse(
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item}),
        ),
        sse(
            "response.completed",
            json!({"type": "response.completed", "sequence_number": 4, "response": done}),
        ),
    ];
    fake.finished.store(false, Ordering::SeqCst);
    let finished = Arc::clone(&fake.finished);
    if mode == Mode::LlamaServer {
        return llama_server(&fake, &model, &text);
    }
    let body = match mode {
        Mode::CutAfter(n) => {
            // The events go out, a moment passes (so they reach the router whole), then
            // the connection is cut.
            let s = stream::unfold(0usize, move |i| {
                let events = events.clone();
                async move {
                    if i < n.min(events.len()) {
                        return Some((Ok(events[i].clone()), i + 1));
                    }
                    if i == n && n > 0 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    (i <= n).then(|| (Err(std::io::Error::other("cut")), i + 1))
                }
            });
            Body::from_stream(s)
        }
        Mode::SlowAfterFirst(wait) => {
            let s = stream::unfold((0usize, events), move |(i, events)| {
                let finished = Arc::clone(&finished);
                async move {
                    if i == events.len() {
                        finished.store(true, Ordering::SeqCst);
                        return None;
                    }
                    if i == 1 {
                        tokio::time::sleep(wait).await;
                    }
                    Some((Ok::<_, Infallible>(events[i].clone()), (i + 1, events)))
                }
            });
            Body::from_stream(s)
        }
        _ => {
            finished.store(true, Ordering::SeqCst);
            Body::from_stream(stream::iter(events.into_iter().map(Ok::<_, Infallible>)))
        }
    };
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// A stream shaped the way llama-server sends one (its event names, field order and
/// minimal objects, read from llama.cpp's server source), one delta per word.
fn llama_server(fake: &Fake, model: &str, text: &str) -> Response {
    let id = format!("resp_{}", fake.seq.fetch_add(1, Ordering::SeqCst));
    let msg = "msg_0abc";
    let mut events = vec![
        sse(
            "response.created",
            json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress"}}),
        ),
        sse(
            "response.in_progress",
            json!({"type": "response.in_progress", "response": {"id": id, "object": "response", "status": "in_progress"}}),
        ),
        sse(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "item": {"content": [], "id": msg, "role": "assistant", "status": "in_progress", "type": "message"}}),
        ),
        sse(
            "response.content_part.added",
            json!({"type": "response.content_part.added", "item_id": msg, "part": {"type": "output_text", "text": ""}}),
        ),
    ];
    for word in text.split_inclusive(' ') {
        events.push(sse(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": msg, "delta": word}),
        ));
    }
    let part = json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
    let item = json!({"type": "message", "status": "completed", "id": msg, "content": [part], "role": "assistant"});
    events.extend([
        sse("response.output_text.done", json!({"type": "response.output_text.done", "item_id": msg, "text": text})),
        sse("response.content_part.done", json!({"type": "response.content_part.done", "item_id": msg, "part": part})),
        sse("response.output_item.done", json!({"type": "response.output_item.done", "item": item})),
        sse("response.completed", json!({"type": "response.completed", "response": {"id": id, "object": "response", "created_at": 1_700_000_000, "status": "completed", "model": model, "output": [item], "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}}})),
    ]);
    fake.finished.store(true, Ordering::SeqCst);
    let body = Body::from_stream(stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}
