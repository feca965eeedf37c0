//! OpenAI's error envelope, `{"error": {"type", "code", "message", ...}}`: the one shape of
//! every error body the router writes on the OpenAI side, its own refusals and the answer
//! when nothing in a chain served alike, so clients parse them all one way.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error body: `type`, `code` and `message` first, then the fields this kind of error
/// adds (`param` for the router's own refusals; `route`, `retry_after_ms` and `attempts`
/// when nothing served), in the order `more` writes them.
#[derive(Serialize)]
pub struct Envelope<'a, C, M> {
    error: Body<'a, C, M>,
}

#[derive(Serialize)]
struct Body<'a, C, M> {
    #[serde(rename = "type")]
    kind: &'static str,
    code: C,
    message: &'a str,
    #[serde(flatten)]
    more: M,
}

impl<'a, C: Serialize, M: Serialize> Envelope<'a, C, M> {
    /// `kind` is the body's `type`: whose fault, in OpenAI's words or ours.
    pub fn new(kind: &'static str, code: C, message: &'a str, more: M) -> Self {
        Envelope {
            error: Body {
                kind,
                code,
                message,
                more,
            },
        }
    }

    /// The answer: `status` and the envelope as JSON.
    pub fn respond(self, status: StatusCode) -> Response {
        (status, axum::Json(self)).into_response()
    }
}
