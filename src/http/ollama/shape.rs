//! Error answers on `/api/...` in Ollama's shape, `{"error": "..."}`: Ollama's clients
//! read nothing else.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde_json::{json, Value};

/// The largest error body [`shape`] rewrites; larger ones pass unchanged.
const ERROR_BODY_MAX: usize = 64 * 1024;

/// Error answers on `/api/...` in Ollama's shape, `{"error": "..."}`, with their status and
/// headers kept: the router's own (OpenAI's envelope) and a machine's OpenAI-shaped
/// refusal alike. An answer already in Ollama's shape passes unchanged.
pub async fn shape(resp: Response) -> Response {
    if resp.status().is_success() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BODY_MAX).await else {
        parts.headers.remove(header::CONTENT_LENGTH);
        let body = json!({"error": format!("HTTP {}: its error answer was too large or cut to pass on", parts.status.as_u16())});
        return Response::from_parts(parts, Body::from(body.to_string()));
    };
    let message = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => match o.get("error") {
            Some(Value::String(_)) => return Response::from_parts(parts, Body::from(bytes)),
            Some(Value::Object(e)) => e.get("message").and_then(Value::as_str).map(str::to_string),
            _ => None,
        },
        _ => None,
    };
    let message = message.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            parts
                .status
                .canonical_reason()
                .unwrap_or("error")
                .to_string()
        } else {
            crate::text::bounded(text).to_string()
        }
    });
    let body = Bytes::from(json!({ "error": message }).to_string());
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body))
}
