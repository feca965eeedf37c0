//! Errors the router answers itself, before or beside any machine: one type, rendered once
//! into OpenAI's error envelope (`{"error": {"type", "code", "message", "param"}}`).
//!
//! A [`Code`] decides the HTTP status and whose fault the error is: a 4xx is the client's
//! (its request, its credentials, its origin), a 5xx is the router's own. Neither reached a
//! machine, so neither is anything a breaker hears of.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// What went wrong, as the error body's `code` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    // 400
    InvalidJson,
    InvalidHeader,
    InvalidQuery,
    InvalidPath,
    UnreadableBody,
    ModelNotFound,
    ModelRequired,
    InvalidTask,
    InvalidIdempotencyKey,
    IdempotencyKeyOnStream,
    // 401, 403
    InvalidApiKey,
    HostNotAllowed,
    CrossSiteRequest,
    // 404
    NotFound,
    NoLedger,
    MachineNotFound,
    UnknownAction,
    TaskNotFound,
    NoTaskStore,
    // 405
    MethodNotAllowed,
    // 409
    TaskFinished,
    // 429
    QueueFull,
    // 408, 413, 422
    RequestTimeout,
    RequestTooLarge,
    RegistryRejected,
    IdempotencyKeyReused,
    // 500, 502
    LedgerUnreadable,
    ReloadFailed,
    TaskStoreFailed,
    IdempotentRequestLost,
    AnswerTooLarge,
    // 501
    NotImplemented,
}

impl Code {
    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidJson
            | Code::InvalidHeader
            | Code::InvalidQuery
            | Code::InvalidPath
            | Code::UnreadableBody
            | Code::ModelNotFound
            | Code::ModelRequired
            | Code::InvalidTask
            | Code::InvalidIdempotencyKey
            | Code::IdempotencyKeyOnStream => StatusCode::BAD_REQUEST,
            Code::InvalidApiKey => StatusCode::UNAUTHORIZED,
            Code::HostNotAllowed | Code::CrossSiteRequest => StatusCode::FORBIDDEN,
            Code::NotFound
            | Code::NoLedger
            | Code::MachineNotFound
            | Code::UnknownAction
            | Code::TaskNotFound
            | Code::NoTaskStore => StatusCode::NOT_FOUND,
            Code::TaskFinished => StatusCode::CONFLICT,
            Code::QueueFull => StatusCode::TOO_MANY_REQUESTS,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::RegistryRejected | Code::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Code::LedgerUnreadable
            | Code::ReloadFailed
            | Code::TaskStoreFailed
            | Code::IdempotentRequestLost => StatusCode::INTERNAL_SERVER_ERROR,
            Code::AnswerTooLarge => StatusCode::BAD_GATEWAY,
            Code::NotImplemented => StatusCode::NOT_IMPLEMENTED,
        }
    }

    /// The router's own fault (a 5xx), not the client's.
    pub fn is_internal(self) -> bool {
        self.status().is_server_error()
    }
}

/// An error answer: its code and plain words saying what was wrong and where.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub code: Code,
    pub message: String,
}

impl AppError {
    pub fn new(code: Code, message: impl Into<String>) -> AppError {
        AppError {
            code,
            message: message.into(),
        }
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    code: Code,
    message: &'a str,
    param: Option<()>,
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let kind = if self.code.is_internal() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        let body = Envelope {
            error: Body {
                kind,
                code: self.code,
                message: &self.message,
                param: None,
            },
        };
        let mut resp = (self.code.status(), axum::Json(body)).into_response();
        if self.code == Code::RequestTimeout {
            // The rest of a late body may still be on its way: the connection is not
            // reused, so it cannot be read as the next request.
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_error_renders_as_openais_envelope() {
        let resp = AppError::new(Code::ModelNotFound, "no model 'x'").into_response();
        assert_eq!(resp.status(), 400);
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"error":{"type":"invalid_request_error","code":"model_not_found","message":"no model 'x'","param":null}}"#
        );
        let resp = AppError::new(Code::ReloadFailed, "x").into_response();
        assert_eq!(resp.status(), 500);
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        assert!(std::str::from_utf8(&bytes)
            .unwrap()
            .contains(r#""type":"server_error""#));
    }
}
