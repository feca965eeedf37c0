//! A submit body read and checked (SPEC §10): everything wrong is said, with where, before
//! anything is stored.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::model::{endpoint_from, Accept, TaskId};
use crate::registry::{Registry, SPAN_MAX};
use crate::request::Parsed;
use crate::upstream::Endpoint;

/// At most this many `after` tasks, and this many metadata pairs of at most these sizes.
pub const MAX_AFTER: usize = 32;
pub const MAX_METADATA: usize = 16;
pub const MAX_METADATA_KEY: usize = 64;
pub const MAX_METADATA_VALUE: usize = 512;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    endpoint: Option<String>,
    #[serde(borrow)]
    request: &'a RawValue,
    route: Option<String>,
    accept: Option<Accept>,
    #[serde(default)]
    after: Vec<String>,
    deadline: Option<String>,
    priority: Option<i64>,
    max_attempts: Option<i64>,
    callback: Option<CallbackBody>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallbackBody {
    url: String,
}

/// A checked submit, ready to store.
#[derive(Clone, Debug)]
pub struct NewTask {
    pub endpoint: Endpoint,
    pub request: Bytes,
    pub route: Option<String>,
    pub accept: Accept,
    pub after: Vec<TaskId>,
    pub deadline: SystemTime,
    pub priority: i32,
    pub max_attempts: u32,
    pub callback: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

/// What was wrong with a submit: 400, or 413 for a request over `tasks.max_request_body`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("{0}")]
    Bad(String),
    #[error("{0}")]
    TooLarge(String),
}

fn bad<T>(msg: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid::Bad(msg.into()))
}

/// Reads a submit body against `reg` at `now`. The `after` ids are only checked for form
/// here; that they name tasks of the same owner is the caller's (the store's) check.
pub fn read(body: &[u8], reg: &Registry, now: SystemTime) -> Result<NewTask, Invalid> {
    let b: Body<'_> = serde_json::from_slice(body)
        .map_err(|e| Invalid::Bad(format!("task: {}", crate::text::bounded(&e.to_string()))))?;
    let limits = &reg.tasks;
    let endpoint = match b.endpoint.as_deref() {
        None => Endpoint::Chat,
        Some(e) => match endpoint_from(e) {
            Some(e) => e,
            None => {
                return bad(format!(
                    "endpoint: '{}' is not one of chat/completions, completions, embeddings",
                    crate::text::bounded(e)
                ))
            }
        },
    };
    let raw = b.request.get().as_bytes();
    if raw.len() > limits.max_request_body {
        return Err(Invalid::TooLarge(format!(
            "request: {} bytes is larger than tasks.max_request_body ({} bytes)",
            raw.len(),
            limits.max_request_body
        )));
    }
    if !raw.starts_with(b"{") {
        return bad("request: expected a JSON object (the body you would POST to the endpoint)");
    }
    let request = Bytes::copy_from_slice(raw);
    let parsed = Parsed::new(endpoint, request.clone())
        .map_err(|e| Invalid::Bad(format!("request: {}", e.0)))?;
    if parsed.stream {
        return bad("request: \"stream\": true is not for tasks; a task's answer is kept whole (read it with GET /v1/tasks/{id})");
    }
    if endpoint == Endpoint::Embeddings
        && matches!(parsed.model.as_deref(), None | Some("auto") | Some(""))
    {
        return bad("request: embeddings need a model: keyword routing could embed with a different model each time");
    }
    if let Some(r) = &b.route {
        if reg.routes.iter().all(|x| &x.name != r) {
            let names: Vec<&str> = reg.routes.iter().map(|x| x.name.as_str()).collect();
            return bad(format!(
                "route: no route '{}'; expected one of: {}",
                crate::text::bounded(r),
                names.join(", ")
            ));
        }
    }
    if b.after.len() > MAX_AFTER {
        return bad(format!(
            "after: {} tasks; at most {MAX_AFTER}",
            b.after.len()
        ));
    }
    let mut after = Vec::with_capacity(b.after.len());
    for (i, a) in b.after.iter().enumerate() {
        let id: TaskId = a
            .parse()
            .map_err(|e: String| Invalid::Bad(format!("after[{i}]: {e}")))?;
        if after.contains(&id) {
            return bad(format!("after[{i}]: {id} is named twice"));
        }
        after.push(id);
    }
    check_placeholders(b.request.get(), after.len())?;
    let deadline = match b.deadline.as_deref() {
        None => now + limits.default_deadline,
        Some(d) => deadline(d, now)?,
    };
    let priority = match b.priority {
        None => 0,
        Some(p) if (-100..=100).contains(&p) => p as i32,
        Some(p) => return bad(format!("priority: {p} is outside -100..100")),
    };
    let max_attempts = match b.max_attempts {
        None => limits.max_attempts,
        Some(n) if (1..=100).contains(&n) => n as u32,
        Some(n) => return bad(format!("max_attempts: {n} is outside 1..100")),
    };
    let callback = match b.callback {
        None => None,
        Some(c) => Some(callback_url(&c.url, reg)?),
    };
    if b.metadata.len() > MAX_METADATA {
        return bad(format!(
            "metadata: {} pairs; at most {MAX_METADATA}",
            b.metadata.len()
        ));
    }
    for (k, v) in &b.metadata {
        if k.is_empty() || k.len() > MAX_METADATA_KEY {
            return bad(format!(
                "metadata: key '{}' must be 1 to {MAX_METADATA_KEY} bytes",
                crate::text::bounded(k)
            ));
        }
        if v.len() > MAX_METADATA_VALUE {
            return bad(format!(
                "metadata['{}']: {} bytes; at most {MAX_METADATA_VALUE}",
                crate::text::bounded(k),
                v.len()
            ));
        }
    }
    Ok(NewTask {
        endpoint,
        request,
        route: b.route,
        accept: b.accept.unwrap_or_default(),
        after,
        deadline,
        priority,
        max_attempts,
        callback,
        metadata: b.metadata,
    })
}

/// `deadline`: a duration from now (`2h`) or an RFC 3339 time, in the future and within
/// 30 days.
fn deadline(s: &str, now: SystemTime) -> Result<SystemTime, Invalid> {
    if let Ok(d) = crate::registry::parse_duration_max(s, SPAN_MAX) {
        if d.is_zero() {
            return bad("deadline: expected a duration above zero");
        }
        return Ok(now + d);
    }
    let t: jiff::Timestamp = s.parse().map_err(|_| {
        Invalid::Bad(format!(
            "deadline: '{}' is neither a duration (like 2h) within 30 days nor an RFC 3339 time",
            crate::text::bounded(s)
        ))
    })?;
    let at = crate::store::from_ms(t.as_millisecond());
    match at.duration_since(now) {
        Ok(d) if !d.is_zero() && d <= SPAN_MAX => Ok(at),
        Ok(_) => bad(format!("deadline: {s} is more than 30 days away")),
        Err(_) => bad(format!("deadline: {s} has passed")),
    }
}

/// `{{after.N}}` must name an entry of `after`.
fn check_placeholders(request: &str, after: usize) -> Result<(), Invalid> {
    let mut rest = request;
    while let Some(i) = rest.find("{{after.") {
        let tail = &rest[i + 8..];
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        let closed = tail[digits.len()..].starts_with("}}");
        if let (Ok(n), true) = (digits.parse::<usize>(), closed) {
            if n >= after {
                return bad(format!(
                    "request: {{{{after.{n}}}}} names after[{n}], but after has {after} entries"
                ));
            }
        }
        rest = &tail[digits.len()..];
    }
    Ok(())
}

/// A callback URL allowed by `tasks.callback_allow`.
fn callback_url(url: &str, reg: &Registry) -> Result<String, Invalid> {
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        Invalid::Bad(format!(
            "callback.url: '{}' is not a URL ({e})",
            crate::text::bounded(url)
        ))
    })?;
    if !reg.tasks.callback_allow.iter().any(|r| r.allows(&parsed)) {
        let allowed: Vec<String> = reg
            .tasks
            .callback_allow
            .iter()
            .map(ToString::to_string)
            .collect();
        return bad(format!(
            "callback.url: '{}' is not allowed by tasks.callback_allow ({})",
            crate::text::bounded(url),
            allowed.join(", ")
        ));
    }
    Ok(parsed.to_string())
}

/// How long until `deadline`, zero when passed.
pub fn left(deadline: SystemTime, now: SystemTime) -> Duration {
    deadline.duration_since(now).unwrap_or(Duration::ZERO)
}
