//! Errors the router answers itself, before or beside any machine: one type, rendered once
//! into OpenAI's error envelope ([`Envelope`]: `{"error": {"type", "code", "message",
//! "param"}}`).
//!
//! A [`Code`] decides the HTTP status and whose fault the error is: a 4xx is the client's
//! (its request, its credentials, its origin), a 5xx is the router's own. Neither reached a
//! machine, so neither is anything a breaker hears of.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::outcome::Envelope;

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
    WrongKind,
    InvalidUpload,
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
    ResponseNotFound,
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
    // 503
    Busy,
    QueueUnavailable,
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
            | Code::WrongKind
            | Code::InvalidUpload
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
            | Code::NoTaskStore
            | Code::ResponseNotFound => StatusCode::NOT_FOUND,
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
            Code::Busy | Code::QueueUnavailable => StatusCode::SERVICE_UNAVAILABLE,
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

/// A name that is neither `auto`, a route nor a model: the client's to fix, and the route
/// module's words already say which names would do.
impl From<crate::route::UnknownName> for AppError {
    fn from(unknown: crate::route::UnknownName) -> AppError {
        AppError::new(Code::ModelNotFound, unknown.to_string())
    }
}

/// An upload that is not the multipart/form-data it says it is: where, in its own words.
impl From<crate::multipart::BadUpload> for AppError {
    fn from(e: crate::multipart::BadUpload) -> AppError {
        AppError::new(Code::InvalidUpload, e.to_string())
    }
}

/// A request routing refused: a name unknown, of the wrong kind, or needed and missing.
impl From<crate::route::RouteError> for AppError {
    fn from(e: crate::route::RouteError) -> AppError {
        let code = match &e {
            crate::route::RouteError::Unknown(_) => Code::ModelNotFound,
            crate::route::RouteError::WrongKind { .. } => Code::WrongKind,
            crate::route::RouteError::Required { .. } => Code::ModelRequired,
        };
        AppError::new(code, e.to_string())
    }
}

/// A body that is not the request it should be: its words say where.
impl From<crate::request::BadBody> for AppError {
    fn from(bad: crate::request::BadBody) -> AppError {
        AppError::new(Code::InvalidJson, bad.0)
    }
}

/// What the router's own refusals add to the envelope: OpenAI's `param`, always null.
#[derive(Serialize)]
struct Param {
    param: Option<()>,
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let kind = if self.code.is_internal() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        let mut resp = Envelope::new(kind, self.code, &self.message, Param { param: None })
            .respond(self.code.status());
        if self.code == Code::RequestTimeout {
            // The rest of a late body may still be on its way: the connection is not
            // reused, so it cannot be read as the next request.
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        if self.code == Code::QueueUnavailable {
            // Redis away or slow (README "Several routers"): try again shortly.
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(QUEUE_RETRY_AFTER),
            );
        }
        resp
    }
}

/// `Retry-After` (seconds) on a 503 `queue_unavailable`.
pub const QUEUE_RETRY_AFTER: &str = "2";

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

    #[test]
    fn an_unknown_name_becomes_model_not_found_in_the_router_s_own_words() {
        let unknown = crate::route::UnknownName {
            what: "model",
            name: "nope".into(),
            valid: "auto, code, chat".into(),
        };
        let err = AppError::from(unknown.clone());
        assert_eq!(err.code, Code::ModelNotFound);
        assert_eq!(err.message, unknown.to_string());
        assert_eq!(
            err.message,
            "model 'nope' does not exist; expected one of: auto, code, chat"
        );
    }

    #[test]
    fn a_body_that_is_not_a_request_becomes_invalid_json_in_its_own_words() {
        let err = AppError::from(crate::request::BadBody("'messages' must be a list".into()));
        assert_eq!(err.code, Code::InvalidJson);
        assert_eq!(err.message, "'messages' must be a list");
    }
}
