//! The HTTP side of `labrouter task`: one call per `/v1/tasks` endpoint, the router's error
//! envelope read into [`CallError`] so the shell prints the router's own words.

use std::time::Duration;

use reqwest::{RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::view::{Page, TaskView};

/// Held answers (`?wait=`) get this much longer than the wait itself before the client
/// gives up on the router.
const SLACK: Duration = Duration::from_secs(30);

/// What went wrong talking to the router.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer at all: the router is not running there, or the connection broke.
    #[error("cannot reach the router at {url}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The router refused, in its error envelope: its message is what the user reads.
    #[error("{message} ({code}){hint}")]
    Router {
        status: StatusCode,
        code: String,
        message: String,
        hint: &'static str,
    },
    /// An answer that is neither the expected object nor an error envelope.
    #[error("{url} answered HTTP {status}, which is not what labrouter answers: {detail}")]
    Unexpected {
        url: String,
        status: StatusCode,
        detail: String,
    },
}

impl CallError {
    /// Worth asking again (a wait outlives a router restart): the router did not answer.
    pub fn is_transient(&self) -> bool {
        matches!(self, CallError::Unreachable { .. })
    }
}

/// An answer both ways: as sent (for `--json`) and read.
#[derive(Debug)]
pub struct Fetched<T> {
    pub raw: Value,
    pub view: T,
    /// `idempotent-replayed: true`: a submit that found its existing task.
    pub replayed: bool,
}

/// The body of `POST /v1/tasks` the CLI sends (docs/api.md "Tasks"): a chat request and the options.
#[derive(Debug, Serialize, PartialEq)]
pub struct NewTask {
    pub request: ChatRequest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

impl NewTask {
    /// A chat task asking `text` as one user message of `model`.
    pub fn chat(model: &str, text: &str) -> NewTask {
        NewTask {
            request: ChatRequest {
                model: model.to_string(),
                messages: vec![Message {
                    role: "user",
                    content: text.to_string(),
                }],
            },
            route: None,
            after: Vec::new(),
            priority: None,
            deadline: None,
        }
    }
}

/// The router's error envelope.
#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(default)]
    code: Option<String>,
    message: String,
}

/// A running router's task API.
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Client {
    /// `base` is the router's URL (`http://127.0.0.1:8080`); `key` its bearer key, if any.
    pub fn new(base: &str, key: Option<String>) -> Client {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            key: key.filter(|k| !k.is_empty()),
        }
    }

    /// [`Client::new`] with the key from `LABROUTER_API_KEY`, as `labrouter status` does.
    pub fn from_env(base: &str) -> Client {
        Client::new(base, std::env::var("LABROUTER_API_KEY").ok())
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST /v1/tasks`.
    pub async fn submit(
        &self,
        task: &NewTask,
        idempotency_key: Option<&str>,
    ) -> Result<Fetched<TaskView>, CallError> {
        let url = self.url("/v1/tasks");
        let mut req = self.http.post(&url).json(task).timeout(SLACK * 2);
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        self.call(url, req).await
    }

    /// `GET /v1/tasks/{id}`, held up to `wait` (a duration the router reads, like `30s`).
    pub async fn show(
        &self,
        id: &str,
        wait: Option<(&str, Duration)>,
    ) -> Result<Fetched<TaskView>, CallError> {
        let url = self.url(&format!("/v1/tasks/{id}"));
        let mut req = self.http.get(&url);
        match wait {
            Some((text, held)) => req = req.query(&[("wait", text)]).timeout(held + SLACK),
            None => req = req.timeout(SLACK),
        }
        self.call(url, req).await
    }

    /// `GET /v1/tasks?status=&limit=&before=`.
    pub async fn list(
        &self,
        status: Option<&str>,
        limit: Option<u32>,
        before: Option<String>,
    ) -> Result<Fetched<Page>, CallError> {
        let url = self.url("/v1/tasks");
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(s) = status {
            query.push(("status", s.to_string()));
        }
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        if let Some(b) = before {
            query.push(("before", b));
        }
        let req = self.http.get(&url).query(&query).timeout(SLACK);
        self.call(url, req).await
    }

    /// `POST /v1/tasks/{id}/cancel`.
    pub async fn cancel(&self, id: &str) -> Result<Fetched<TaskView>, CallError> {
        let url = self.url(&format!("/v1/tasks/{id}/cancel"));
        let req = self.http.post(&url).timeout(SLACK);
        self.call(url, req).await
    }

    /// Sends `req`; a 2xx is read as `T`, anything else as the router's error envelope.
    async fn call<T: DeserializeOwned>(
        &self,
        url: String,
        mut req: RequestBuilder,
    ) -> Result<Fetched<T>, CallError> {
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        let unreachable = |source| CallError::Unreachable {
            url: self.base.clone(),
            source,
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v.as_bytes() == b"true");
        let bytes = resp.bytes().await.map_err(unreachable)?;
        read(url, status, &bytes, replayed, self.key.is_some())
    }
}

/// Reads an answer: the object on a 2xx, the router's error otherwise.
fn read<T: DeserializeOwned>(
    url: String,
    status: StatusCode,
    bytes: &[u8],
    replayed: bool,
    keyed: bool,
) -> Result<Fetched<T>, CallError> {
    let unexpected = |detail: String| CallError::Unexpected {
        url: url.clone(),
        status,
        detail,
    };
    let raw: Value = serde_json::from_slice(bytes)
        .map_err(|_| unexpected(crate::text::bounded(String::from_utf8_lossy(bytes).trim())))?;
    if !status.is_success() {
        let Ok(env) = Envelope::deserialize(&raw) else {
            return Err(unexpected(crate::text::bounded(&raw.to_string())));
        };
        let code = env
            .error
            .code
            .unwrap_or_else(|| status.as_u16().to_string());
        let hint = match (code.as_str(), keyed) {
            ("invalid_api_key", false) => "; labrouter reads the key from LABROUTER_API_KEY",
            _ => "",
        };
        return Err(CallError::Router {
            status,
            code,
            message: crate::text::bounded(&env.error.message),
            hint,
        });
    }
    let view = T::deserialize(&raw).map_err(|e| unexpected(e.to_string()))?;
    Ok(Fetched {
        raw,
        view,
        replayed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_chat_task_sends_only_what_was_given() {
        let mut t = NewTask::chat("auto", "fix this bug");
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "fix this bug"}]}})
        );
        t.route = Some("code".into());
        t.after = vec!["tsk_a".into()];
        t.priority = Some(-5);
        t.deadline = Some("2h".into());
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["route"], "code");
        assert_eq!(v["after"], json!(["tsk_a"]));
        assert_eq!(v["priority"], -5);
        assert_eq!(v["deadline"], "2h");
    }

    #[test]
    fn the_router_error_is_its_message_and_code() {
        let body = br#"{"error": {"type": "invalid_request_error", "code": "task_finished",
            "message": "tsk_x already finished (succeeded); nothing to cancel", "param": null}}"#;
        let e = read::<TaskView>("u".into(), StatusCode::CONFLICT, body, false, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tsk_x already finished (succeeded); nothing to cancel (task_finished)"
        );
        assert!(!e.is_transient());
        let body =
            br#"{"error": {"code": "invalid_api_key", "message": "missing or wrong API key"}}"#;
        let e =
            read::<TaskView>("u".into(), StatusCode::UNAUTHORIZED, body, false, false).unwrap_err();
        assert!(e.to_string().contains("LABROUTER_API_KEY"), "{e}");
        let e = read::<TaskView>("u".into(), StatusCode::BAD_GATEWAY, b"<html>", false, false)
            .unwrap_err();
        assert!(e.to_string().contains("HTTP 502"), "{e}");
        assert!(e.to_string().contains("<html>"), "{e}");
    }
}
