//! Images, audio and rerank on the sim (the media endpoints): what each request asks, the
//! answer it gets, and how the faults that reach past [`super::respond`]'s shared ones
//! (Drip, CutAfter, StallAfter) shape it.
//!
//! `image` makes the PNG answers (generations from JSON, edits and variations from an
//! upload), `audio` the transcripts and the WAV speech streams, `rerank` the scores, and
//! `form` reads a multipart/form-data upload into its fields. Every answer echoes the model
//! the request names (the first the sim lists when it names none).

use std::future::pending;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use hyper::header::HeaderValue;
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::Notify;

use super::feed::{End, Feed, Script};
use super::reply::{json_reply, openai_error, reply};
use super::routes::Media;
use super::{lock, Fault, Inner, DEFAULT_MODEL};

mod audio;
mod form;
mod image;
mod rerank;

use form::Form;

#[cfg(test)]
pub(super) use audio::CHUNK as SPEECH_CHUNK;

impl Media {
    /// Whether its request is multipart/form-data (an upload), not JSON.
    fn uploads(self) -> bool {
        matches!(
            self,
            Media::Edits | Media::Variations | Media::Transcriptions | Media::Translations
        )
    }
}

/// Why the sim refuses a request, as OpenAI does: the field at fault (if one is) and what
/// is wrong with it.
#[derive(Debug, PartialEq)]
pub(super) struct Refusal {
    pub(super) param: Option<&'static str>,
    pub(super) message: String,
}

/// A refusal naming `param`.
pub(super) fn refuse<T>(param: &'static str, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        param: Some(param),
        message: message.into(),
    })
}

/// What a media request is answered with, before the fault shapes how it is sent.
pub(super) enum Answer {
    /// A whole JSON answer.
    Json(Value),
    /// A whole answer of another content type (a transcript as text, SRT or VTT).
    Text(&'static str, String),
    /// A stream: speech's WAV in chunks, or a transcription's events.
    Stream(Script, &'static str),
}

/// Answers a media request (its fault let it through `shared_fault`): refused with 400 if
/// it is not what the endpoint takes, else whole, streamed, dripped, cut or stalled.
pub(super) async fn answer(
    inner: &Inner,
    kill: Arc<Notify>,
    fault: Fault,
    work: Media,
    content_type: Option<&HeaderValue>,
    body: Bytes,
) -> Response<Body> {
    if matches!(work, Media::Generations | Media::Edits | Media::Variations) {
        let drawing = *lock(&inner.image_time);
        tokio::time::sleep(drawing).await;
    }
    let answer = match ask(inner, work, content_type, body) {
        Ok(a) => a,
        Err(r) => return openai_error(StatusCode::BAD_REQUEST, &r.message, r.param),
    };
    let (limit, delay, end) = match fault {
        Fault::CutAfter(n) => (n, None, End::Cut),
        Fault::StallAfter(n) => (n, None, End::Stall),
        Fault::Drip(d) => (usize::MAX, Some(d), End::Done),
        _ => (usize::MAX, None, End::Done),
    };
    let (script, kind) = match answer {
        Answer::Stream(script, kind) => (script, kind),
        _ if end == End::Stall => return pending().await,
        // A whole answer cut: its headers, then a reset before any body byte.
        Answer::Json(_) if end == End::Cut => (Script::empty(), "application/json"),
        Answer::Text(kind, _) if end == End::Cut => (Script::empty(), kind),
        Answer::Json(v) => return json_reply(StatusCode::OK, v),
        Answer::Text(kind, text) => return reply(StatusCode::OK, kind, text),
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

/// The answer `work` gives this request, or why it refuses it.
fn ask(
    inner: &Inner,
    work: Media,
    content_type: Option<&HeaderValue>,
    body: Bytes,
) -> Result<Answer, Refusal> {
    if work.uploads() {
        let form = Form::read(content_type, body).map_err(|message| Refusal {
            param: None,
            message,
        })?;
        let said = said(inner);
        return match work {
            Media::Edits => image::edit(&form).map(Answer::Json),
            Media::Variations => image::vary(&form).map(Answer::Json),
            _ => audio::transcript(work == Media::Translations, &form, &said, inner),
        };
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return Err(Refusal {
            param: None,
            message: "request body is not valid JSON".into(),
        });
    };
    let model = model(inner, request.get("model").and_then(Value::as_str));
    match work {
        Media::Speech => audio::speech(&request, inner),
        Media::Rerank => rerank::answer(&model, &request).map(Answer::Json),
        _ => image::generate(&request).map(Answer::Json),
    }
}

/// The model a request names, else the first the sim lists.
fn model(inner: &Inner, named: Option<&str>) -> String {
    match named.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.to_owned(),
        None => lock(&inner.models)
            .first()
            .cloned()
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
    }
}

/// What the machine says in a whole answer: [`Sim::set_text`]'s text, else "ok from NAME".
///
/// [`Sim::set_text`]: super::Sim::set_text
fn said(inner: &Inner) -> String {
    lock(&inner.text)
        .clone()
        .unwrap_or_else(|| format!("ok from {}", inner.name))
}

/// Now, in seconds since the Unix epoch (an answer's `created`).
pub(super) fn created() -> u64 {
    crate::clock::wall()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The huge answer (Fault::Huge) of a media route: a valid answer padded to `n` bytes,
/// streamed in 64 KiB frames and never built whole.
pub(super) fn huge(work: Media, n: usize) -> Body {
    use super::feed::padded_body;
    match work {
        Media::Generations | Media::Edits | Media::Variations => padded_body(n, image::HUGE_HEAD),
        Media::Transcriptions | Media::Translations => padded_body(n, br#"{"text":"big","pad":""#),
        Media::Rerank => padded_body(
            n,
            br#"{"results":[{"index":0,"relevance_score":1.0}],"pad":""#,
        ),
        Media::Speech => audio::huge_wav(n),
    }
}
