//! The answers every route builds on: a body with its status and content type, JSON, and
//! OpenAI's error shape.

use axum::body::Body;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

/// A response with this status, content type and body.
pub(super) fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Body>,
) -> Response<Body> {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A JSON response.
pub(super) fn json_reply(status: StatusCode, v: Value) -> Response<Body> {
    reply(status, "application/json", v.to_string())
}

/// An OpenAI-style error answer; `param` names the request field at fault, if one is.
pub(super) fn openai_error(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
) -> Response<Body> {
    let kind = match status.as_u16() {
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json_reply(
        status,
        json!({"error":{"message":message,"type":kind,"param":param,"code":null}}),
    )
}
