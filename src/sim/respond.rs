//! How one request is answered under the current fault: its route, the faults every work
//! route shares, then the OpenAI (chat, completions, embeddings, Responses), media
//! (images, audio, rerank: [`super::media`]) or Ollama answer, whole or streamed.

use std::future::pending;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::answers;
use super::ask::Ask;
use super::embed;
use super::feed::{huge_body, padded_body, End, Feed, Script};
use super::media;
use super::ollama::{self, meta, Reply};
use super::reply::{json_reply, openai_error, reply};
use super::responses;
use super::routes::{self, Meta, NativeWork, OpenAiWork, Route};
use super::{lock, Fault, Inner, DEFAULT_MODEL};
use crate::registry::Api;

/// Which API's error body a request gets.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// `{"error":{"message","type","param","code"}}`
    OpenAi,
    /// `{"error":"..."}`
    Ollama,
}

impl Shape {
    /// Ollama's own routes, and unknown `/api/...` paths on an Ollama sim, answer errors as
    /// Ollama does; everything else as OpenAI does.
    fn of(route: Route, api: Api, path: &str) -> Shape {
        match route {
            Route::OpenAi(_) | Route::Meta(Meta::Models) => Shape::OpenAi,
            Route::Native(_) | Route::Meta(_) => Shape::Ollama,
            Route::Unknown if api == Api::Ollama && path.starts_with("/api/") => Shape::Ollama,
            Route::Unknown => Shape::OpenAi,
        }
    }
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
    let route = routes::route(inner.api, req.method(), &path);
    let shape = Shape::of(route, inner.api, &path);
    if let Route::Meta(meta) = route {
        return match inner.current() {
            Fault::Hang | Fault::StallAfter(_) => pending().await,
            Fault::Reset => cut(&kill).await,
            _ => metadata(&inner, meta, req).await,
        };
    }
    let _answering = inner.counts.answering();
    let content_type = req.headers().get(CONTENT_TYPE).cloned();
    let Some(body) = read(req).await else {
        return error(
            shape,
            StatusCode::BAD_REQUEST,
            "could not read the request body",
        );
    };
    inner.counts.keep_body(body.clone());
    let fault = inner.current();
    if let Some(resp) = shared_fault(&inner, &kill, &fault, route, shape).await {
        return resp;
    }
    if route == Route::Unknown {
        return error(
            shape,
            StatusCode::NOT_FOUND,
            &format!("no route for {path}"),
        );
    }
    if let Route::OpenAi(OpenAiWork::Media(m)) = route {
        return media::answer(&inner, kill, fault, m, content_type.as_ref(), body).await;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(
            shape,
            StatusCode::BAD_REQUEST,
            "request body is not valid JSON",
        );
    };
    work(&inner, kill, fault, route, &request).await
}

/// The whole request body; `None` if it could not be read.
async fn read(req: Request<Incoming>) -> Option<Bytes> {
    req.into_body().collect().await.ok().map(|b| b.to_bytes())
}

/// The faults every work route (and every unknown path) meets before its body is looked
/// at: an answer for Hang (never), Reset, Status, Malformed and Huge; SlowFirstByte waits,
/// then `None`, as for every other fault.
async fn shared_fault(
    inner: &Inner,
    kill: &Notify,
    fault: &Fault,
    route: Route,
    shape: Shape,
) -> Option<Response<Body>> {
    match fault {
        Fault::Hang => pending().await,
        Fault::Reset => Some(cut(kill).await),
        Fault::Status { code, retry_after } => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let message = format!("{} answers {code} (simulated)", inner.name);
            let mut resp = error(shape, status, &message);
            if let Some(v) = retry_after
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                resp.headers_mut().insert(RETRY_AFTER, v);
            }
            Some(resp)
        }
        Fault::Malformed => Some(reply(
            StatusCode::OK,
            "application/json",
            "<html>oops</html>",
        )),
        Fault::Huge(n) => Some(reply(StatusCode::OK, "application/json", huge(route, *n))),
        Fault::SlowFirstByte(d) => {
            let serial = inner.serial.load(std::sync::atomic::Ordering::Relaxed);
            let _turn = if serial {
                Some(inner.one.lock().await)
            } else {
                None
            };
            tokio::time::sleep(*d).await;
            None
        }
        _ => None,
    }
}

/// The huge answer for `route`: Ollama-shaped on Ollama's own routes, a Response on the
/// Responses API's.
fn huge(route: Route, n: usize) -> Body {
    match route {
        Route::Native(work) => padded_body(n, ollama::huge_head(work)),
        Route::OpenAi(OpenAiWork::Responses) => padded_body(n, responses::HUGE_HEAD),
        Route::OpenAi(OpenAiWork::Media(m)) => media::huge(m, n),
        _ => huge_body(n),
    }
}

/// Answers a work request (valid JSON) under a fault that lets it through: whole, streamed,
/// cut after some frames, or stalled after some.
async fn work(
    inner: &Inner,
    kill: Arc<Notify>,
    fault: Fault,
    route: Route,
    request: &Value,
) -> Response<Body> {
    let streamed = request.get("stream");
    let streams = match route {
        Route::OpenAi(w) => w != OpenAiWork::Embeddings && streamed == Some(&Value::Bool(true)),
        Route::Native(w) => !w.embeds() && streamed != Some(&Value::Bool(false)),
        _ => false,
    };
    let (pieces, limit, end) = match fault {
        Fault::CutAfter(n) => (n, n, End::Cut),
        Fault::StallAfter(_) if !streams => return pending().await,
        Fault::StallAfter(n) => (n, n, End::Stall),
        _ => (inner.chunks.load(Ordering::Relaxed), usize::MAX, End::Done),
    };
    let delay = match fault {
        Fault::Drip(d) => Some(d),
        _ => None,
    };
    if !streams && end != End::Cut {
        return whole(inner, route, request);
    }
    // A non-stream cut sends JSON headers, then resets before any body byte.
    let (script, kind) = match streams {
        true => stream_script(inner, route, request, pieces),
        false => (Script::empty(), "application/json"),
    };
    let feed = Feed {
        script,
        limit,
        delay,
        timer: inner.drip_timer(delay),
        end,
        kill,
    };
    reply(StatusCode::OK, kind, feed.into_body())
}

/// The model a request names, echoed in its answer; a request naming none is answered as
/// the first model the sim lists.
fn model(inner: &Inner, request: &Value) -> String {
    match request.get("model").and_then(Value::as_str) {
        Some(m) => m.to_owned(),
        None => lock(&inner.models)
            .first()
            .cloned()
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
    }
}

/// The text of a whole answer: a fixed one if asked, else [`Sim::set_text`]'s or
/// "ok from NAME".
///
/// [`Sim::set_text`]: super::Sim::set_text
fn text(inner: &Inner, ask: &Ask) -> String {
    ask.fixed_text(&inner.name).unwrap_or_else(|| {
        lock(&inner.text)
            .clone()
            .unwrap_or_else(|| format!("ok from {}", inner.name))
    })
}

/// The complete non-stream answer for a work route.
fn whole(inner: &Inner, route: Route, request: &Value) -> Response<Body> {
    let model = model(inner, request);
    let (model, name) = (model.as_str(), inner.name.as_str());
    let answer = match route {
        Route::OpenAi(OpenAiWork::Embeddings) => match embed::answer(model, request) {
            Ok(v) => v,
            Err(e) => return openai_error(StatusCode::BAD_REQUEST, &e.message, Some(e.param)),
        },
        Route::OpenAi(OpenAiWork::Responses) => {
            let reply = responses::Reply::new(model, request);
            reply.whole(&text(inner, &reply.ask))
        }
        Route::OpenAi(w) => {
            let chat = w == OpenAiWork::Chat;
            let ask = Ask::openai(request, chat);
            answers::whole(chat, model, name, &text(inner, &ask), &ask)
        }
        Route::Native(NativeWork::Embed) => match ollama::embed(model, request) {
            Ok(v) => v,
            Err(e) => return error(Shape::Ollama, StatusCode::BAD_REQUEST, &e),
        },
        Route::Native(NativeWork::Embeddings) => ollama::embeddings(),
        Route::Native(w) => native(inner, w, request, |r| r.whole(&text(inner, r.ask))),
        Route::Meta(_) | Route::Unknown => json!({}),
    };
    json_reply(StatusCode::OK, answer)
}

/// `f` of the Ollama chat (`work` Chat) or generate answer to `request`, made now.
fn native<R>(inner: &Inner, work: NativeWork, request: &Value, f: impl FnOnce(&Reply) -> R) -> R {
    let chat = work == NativeWork::Chat;
    let ask = Ask::ollama(request, chat);
    let created_at = ollama::now();
    f(&Reply {
        chat,
        model: &model(inner, request),
        name: &inner.name,
        created_at: &created_at,
        ask: &ask,
    })
}

/// A stream's script and content type: SSE for OpenAI routes, NDJSON for Ollama's.
fn stream_script(
    inner: &Inner,
    route: Route,
    request: &Value,
    pieces: usize,
) -> (Script, &'static str) {
    let model = model(inner, request);
    let (model, name) = (model.as_str(), inner.name.as_str());
    match route {
        Route::Native(w) => {
            let script = native(inner, w, request, |r| r.script(pieces));
            (script, "application/x-ndjson")
        }
        Route::OpenAi(OpenAiWork::Responses) => {
            let reply = responses::Reply::new(model, request);
            (responses::script(&reply, name, pieces), "text/event-stream")
        }
        Route::OpenAi(w) => {
            let ask = Ask::openai(request, w == OpenAiWork::Chat);
            let script = answers::script(w, model, name, &ask, pieces);
            (script, "text/event-stream")
        }
        Route::Meta(_) | Route::Unknown => (Script::empty(), "text/event-stream"),
    }
}

/// Answers a metadata route (the machine is not frozen).
async fn metadata(inner: &Inner, route: Meta, req: Request<Incoming>) -> Response<Body> {
    let models = lock(&inner.models).clone();
    let answer = match route {
        Meta::Models => answers::models(&inner.name, &models),
        Meta::Tags => meta::tags(&models),
        Meta::Ps => meta::ps(&models),
        Meta::Version => meta::version(),
        Meta::Root => return reply(StatusCode::OK, "text/plain; charset=utf-8", meta::BANNER),
        Meta::Show => {
            let request = read(req)
                .await
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            let Some(request) = request else {
                let message = "request body is not valid JSON";
                return error(Shape::Ollama, StatusCode::BAD_REQUEST, message);
            };
            match meta::show(&models, &request) {
                Ok(v) => v,
                Err((status, message)) => return error(Shape::Ollama, status, &message),
            }
        }
    };
    json_reply(StatusCode::OK, answer)
}

/// An error answer in `shape`.
fn error(shape: Shape, status: StatusCode, message: &str) -> Response<Body> {
    match shape {
        Shape::OpenAi => openai_error(status, message, None),
        Shape::Ollama => json_reply(status, ollama::error_body(message)),
    }
}
