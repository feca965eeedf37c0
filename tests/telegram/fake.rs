//! A fake Telegram Bot API server on 127.0.0.1 (axum): records what teloxide posts and
//! answers as scripted — ok, 500, a hang, or a 429 with `retry_after`.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
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
    /// tokio's clock (paused in some tests).
    pub at: Instant,
    pub reply: Reply,
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
            .filter(|p| p.reply == Reply::Ok)
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
    body: Bytes,
) -> Response {
    let path = format!("/{bot}/{method}");
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
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
            at: Instant::now(),
            reply: reply.clone(),
        });
        reply
    };
    match reply {
        Reply::Ok => {
            let n = inner.lock().expect("lock").posts.len();
            axum::Json(json!({"ok": true, "result": {
                "message_id": n, "date": 1_764_489_600,
                "chat": {"id": v["chat_id"], "type": "private", "first_name": "Lab"},
                "text": v["text"]}}))
            .into_response()
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
