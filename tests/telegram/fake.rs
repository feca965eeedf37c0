//! A fake Telegram Bot API server on 127.0.0.1 (axum): records what teloxide posts (JSON,
//! or multipart/form-data for a photo) and answers as scripted — ok, 500, a hang, a 429
//! with `retry_after`, or a 400 for photos alone.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{json, Value};
use tokio::time::Instant;

/// How the fake answers a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ok,
    /// HTTP 500 with a Telegram-style error body.
    Fail500,
    /// Never answers.
    Hang,
    /// `{"ok":false,"error_code":429,...,"parameters":{"retry_after":N}}`.
    RateLimited(u32),
    /// A proxy's 502 page that echoes the request path, token and all (not JSON).
    ProxyEcho,
    /// Photos get Telegram's 400 `IMAGE_PROCESS_FAILED`; everything else is answered ok.
    RefusePhotos,
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Post {
    /// The first path segment, `bot<TOKEN>`.
    pub bot: String,
    /// The method as posted (teloxide writes `SendMessage`).
    pub method: String,
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
    /// The request's content type (`application/json`, `multipart/form-data; boundary=…`).
    pub content_type: String,
    /// A photo upload's file part: its bytes, its file name and its content type.
    pub photo: Option<Upload>,
    pub caption: Option<String>,
    /// tokio's clock (paused in some tests).
    pub at: Instant,
    pub reply: Reply,
}

/// A file part of a multipart upload.
#[derive(Clone, Debug)]
pub struct Upload {
    pub bytes: Vec<u8>,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
}

#[derive(Default)]
struct Inner {
    /// Answers used first, in order; then `mode`.
    script: VecDeque<Reply>,
    mode: Option<Reply>,
    posts: Vec<Post>,
}

#[derive(Clone)]
pub struct FakeTelegram {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeTelegram {
    pub async fn start() -> FakeTelegram {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/{bot}/{method}", post(handle))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeTelegram { url, inner }
    }

    /// The answer from now on (after any script).
    pub fn set(&self, reply: Reply) {
        self.inner.lock().expect("lock").mode = Some(reply);
    }

    /// Answers for the next requests, before the mode applies.
    pub fn script(&self, replies: &[Reply]) {
        self.inner
            .lock()
            .expect("lock")
            .script
            .extend(replies.iter().cloned());
    }

    /// Every request received, whatever it was answered.
    pub fn posts(&self) -> Vec<Post> {
        self.inner.lock().expect("lock").posts.clone()
    }

    /// The messages that were answered ok: what the chat shows.
    pub fn delivered(&self) -> Vec<Post> {
        self.posts()
            .into_iter()
            .filter(|p| {
                p.reply == Reply::Ok || (p.reply == Reply::RefusePhotos && p.photo.is_none())
            })
            .collect()
    }

    /// Waits (tokio's clock) until `n` messages were delivered, up to `limit`.
    pub async fn wait_delivered(&self, n: usize, limit: std::time::Duration) -> Vec<Post> {
        let until = Instant::now() + limit;
        loop {
            let got = self.delivered();
            if got.len() >= n || Instant::now() >= until {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((bot, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/{bot}/{method}");
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let (v, photo) = read_body(&content_type, &body);
    let reply = {
        let mut i = inner.lock().expect("lock");
        let reply = i
            .script
            .pop_front()
            .or_else(|| i.mode.clone())
            .unwrap_or(Reply::Ok);
        i.posts.push(Post {
            bot,
            method,
            chat_id: v["chat_id"].as_i64().unwrap_or(0),
            text: v["text"].as_str().unwrap_or("").to_string(),
            parse_mode: v["parse_mode"].as_str().map(str::to_string),
            content_type,
            caption: v["caption"].as_str().map(str::to_string),
            photo: photo.clone(),
            at: Instant::now(),
            reply: reply.clone(),
        });
        reply
    };
    match reply {
        Reply::RefusePhotos if photo.is_some() => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"ok": false, "error_code": 400,
                "description": "Bad Request: IMAGE_PROCESS_FAILED"})),
        )
            .into_response(),
        Reply::Ok | Reply::RefusePhotos => {
            let n = inner.lock().expect("lock").posts.len();
            let mut result = json!({
                "message_id": n, "date": 1_764_489_600,
                "chat": {"id": v["chat_id"], "type": "private", "first_name": "Lab"}});
            if let Some(p) = &photo {
                result["photo"] = json!([{"file_id": format!("photo-{n}"),
                    "file_unique_id": format!("u{n}"), "width": 800, "height": 400,
                    "file_size": p.bytes.len()}]);
                result["caption"] = v["caption"].clone();
            } else {
                result["text"] = v["text"].clone();
            }
            axum::Json(json!({"ok": true, "result": result})).into_response()
        }
        Reply::Fail500 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(
                json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
            ),
        )
            .into_response(),
        Reply::Hang => std::future::pending().await,
        Reply::ProxyEcho => (
            StatusCode::BAD_GATEWAY,
            format!("<html><body>502 Bad Gateway: no upstream for POST {path}</body></html>"),
        )
            .into_response(),
        Reply::RateLimited(s) => (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({"ok": false, "error_code": 429,
                "description": format!("Too Many Requests: retry after {s}"),
                "parameters": {"retry_after": s}})),
        )
            .into_response(),
    }
}

/// The request's fields as JSON, and its file part when it is a multipart upload (each text
/// field becomes a string, or a number when it reads as one, as `chat_id` does).
fn read_body(content_type: &str, body: &[u8]) -> (Value, Option<Upload>) {
    let Some(boundary) = content_type
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split("boundary=").nth(1))
    else {
        return (serde_json::from_slice(body).unwrap_or(Value::Null), None);
    };
    let boundary = boundary.trim_matches('"');
    let mut fields = serde_json::Map::new();
    let mut upload = None;
    for part in parts(body, boundary) {
        let Some(head_end) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..head_end]).to_string();
        let data = &part[head_end + 4..];
        let attr = |key: &str| {
            head.split(';')
                .filter_map(|kv| kv.trim().strip_prefix(&format!("{key}=\"")))
                .map(|v| v.split('"').next().unwrap_or("").to_string())
                .next()
        };
        let name = attr("name").unwrap_or_default();
        if let Some(file_name) = attr("filename") {
            let content_type = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("Content-Type: ")
                        .or(l.strip_prefix("content-type: "))
                })
                .map(str::to_string);
            upload = Some(Upload {
                bytes: data.to_vec(),
                file_name: Some(file_name),
                content_type,
            });
            fields.insert(name, Value::String("<file>".into()));
            continue;
        }
        let text = String::from_utf8_lossy(data).to_string();
        let value = text
            .parse::<i64>()
            .map_or_else(|_| Value::String(text.clone()), Value::from);
        fields.insert(name, value);
    }
    (Value::Object(fields), upload)
}

/// The parts between `--boundary` lines, each without its closing CRLF.
fn parts<'a>(body: &'a [u8], boundary: &str) -> Vec<&'a [u8]> {
    let delim = format!("--{boundary}");
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = find(rest, delim.as_bytes()) {
        let after = &rest[at + delim.len()..];
        if after.starts_with(b"--") {
            break;
        }
        let after = after.strip_prefix(b"\r\n").unwrap_or(after);
        let end = find(after, delim.as_bytes()).unwrap_or(after.len());
        let part = &after[..end];
        out.push(part.strip_suffix(b"\r\n").unwrap_or(part));
        rest = &after[end..];
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
