//! How one request is answered under the current fault, and the OpenAI-shaped answers.

use std::future::pending;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::feed::{huge_body, End, Feed};
use super::{Fault, Inner};

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Route {
    Chat,
    Completions,
    Embeddings,
    Models,
    Unknown,
}

/// Kills the connection carrying this request and never answers.
async fn cut(kill: &Notify) -> Response<Body> {
    kill.notify_one();
    pending().await
}

/// Answers one request according to the current fault.
pub(super) async fn handle(
    inner: Arc<Inner>,
    kill: Arc<Notify>,
    req: Request<Incoming>,
) -> Response<Body> {
    if inner.closed() {
        return cut(&kill).await;
    }
    let path = req.uri().path().to_owned();
    inner.counts.count(&path);
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
    inner.counts.keep_body(body.clone());
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
    let text = super::lock(&inner.text)
        .clone()
        .unwrap_or_else(|| format!("ok from {name}"));
    json_reply(StatusCode::OK, answer(route, &model, &text))
}

/// The complete non-stream answer for a work route.
fn answer(route: Route, model: &str, text: &str) -> Value {
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
