//! A scripted machine for images, audio and rerank: it keeps every body it was sent (raw
//! bytes, uploads included), counts them, and answers as the OpenAI API does — or fails
//! on cue.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream;
use serde_json::json;

#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Ok,
    Status(u16),
    /// 200 JSON without what the endpoint's answer holds.
    Hollow,
    /// Speech: headers, then the connection cut after this many chunks (0: before any).
    CutAfter(usize),
}

pub struct Fake {
    pub name: String,
    pub base: String,
    mode: Mutex<Mode>,
    hits: AtomicU64,
    pub bodies: Mutex<Vec<(String, Bytes)>>,
    /// Speech: the last chunk was sent.
    pub finished: Arc<AtomicBool>,
}

/// The bytes of the WAV the fake speaks, in chunks.
pub const SPEECH: [&[u8]; 3] = [
    b"RIFF\x24\x00\x00\x00WAVEfmt ",
    b"\x00\x01\x02\x03",
    b"\xff\xfe\x00\x00",
];

impl Fake {
    pub async fn start(name: &str) -> Arc<Fake> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Arc::new(Fake {
            name: name.to_string(),
            base: format!("http://{}/v1", listener.local_addr().unwrap()),
            mode: Mutex::new(Mode::Ok),
            hits: AtomicU64::new(0),
            bodies: Mutex::new(Vec::new()),
            finished: Arc::new(AtomicBool::new(false)),
        });
        let app = Router::new()
            .route("/v1/images/generations", post(images))
            .route("/v1/images/edits", post(images))
            .route("/v1/audio/transcriptions", post(transcribe))
            .route("/v1/audio/speech", post(speech))
            .route("/v1/rerank", post(rerank))
            .route(
                "/v1/models",
                get(|| async { Json(json!({"object": "list", "data": []})) }),
            )
            .with_state(Arc::clone(&fake));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    pub fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn last_body(&self) -> Bytes {
        self.bodies
            .lock()
            .unwrap()
            .last()
            .map(|(_, b)| b.clone())
            .unwrap_or_default()
    }

    /// Counts the request and keeps its body; the answer when the mode fails it.
    fn took(&self, path: &str, body: Bytes) -> Option<Response> {
        self.hits.fetch_add(1, Ordering::SeqCst);
        self.bodies.lock().unwrap().push((path.to_string(), body));
        match self.mode.lock().unwrap().clone() {
            Mode::Status(code) => Some(
                (
                    StatusCode::from_u16(code).unwrap(),
                    Json(json!({"error": {"message": format!("HTTP {code}"), "type": "server_error"}})),
                )
                    .into_response(),
            ),
            Mode::Hollow => Some(Json(json!({"created": 1})).into_response()),
            _ => None,
        }
    }
}

async fn images(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    if let Some(r) = f.took("images", body) {
        return r;
    }
    Json(json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": f.name}]}))
        .into_response()
}

async fn transcribe(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    if let Some(r) = f.took("transcriptions", body) {
        return r;
    }
    Json(json!({"text": format!("heard by {}", f.name)})).into_response()
}

async fn rerank(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    if let Some(r) = f.took("rerank", body) {
        return r;
    }
    Json(json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]})).into_response()
}

async fn speech(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    let mode = f.mode.lock().unwrap().clone();
    if let Some(r) = f.took("speech", body) {
        return r;
    }
    f.finished.store(false, Ordering::SeqCst);
    let finished = Arc::clone(&f.finished);
    let cut = match mode {
        Mode::CutAfter(n) => Some(n),
        _ => None,
    };
    let s = stream::unfold(0usize, move |i| {
        let finished = Arc::clone(&finished);
        async move {
            if cut == Some(i) {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                return (i < usize::MAX).then(|| (Err(std::io::Error::other("cut")), usize::MAX));
            }
            if i == usize::MAX || i == SPEECH.len() {
                finished.store(true, Ordering::SeqCst);
                return None;
            }
            if i > 0 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Some((
                Ok::<_, std::io::Error>(Bytes::from_static(SPEECH[i])),
                i + 1,
            ))
        }
    });
    let _unused: Option<Infallible> = None;
    ([(header::CONTENT_TYPE, "audio/wav")], Body::from_stream(s)).into_response()
}
