//! A submit body read and checked (docs/api.md "Tasks"): everything wrong is said, with where,
//! before anything is stored.

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
/// here; that they name tasks of the same owner is the caller's (the store's) check. Fields
/// are checked in the order a reader meets them, so the first thing wrong is what is said.
pub fn read(body: &[u8], reg: &Registry, now: SystemTime) -> Result<NewTask, Invalid> {
    let b: Body<'_> = serde_json::from_slice(body)
        .map_err(|e| Invalid::Bad(format!("task: {}", crate::text::bounded(&e.to_string()))))?;
    let limits = &reg.tasks;
    let endpoint = endpoint(b.endpoint.as_deref())?;
    let request = request(b.request, endpoint, limits.max_request_body)?;
    if let Some(r) = &b.route {
        route(r, reg)?;
    }
    let after = after(&b.after)?;
    check_placeholders(b.request.get(), after.len())?;
    let deadline = match b.deadline.as_deref() {
        None => now + limits.default_deadline,
        Some(d) => deadline(d, now)?,
    };
    let priority = priority(b.priority)?;
    let max_attempts = match b.max_attempts {
        None => limits.max_attempts,
        Some(n) => max_attempts(n)?,
    };
    let callback = match b.callback {
        None => None,
        Some(c) => Some(callback_url(&c.url, reg)?),
    };
    metadata(&b.metadata)?;
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

/// `endpoint`: chat completions when absent.
fn endpoint(e: Option<&str>) -> Result<Endpoint, Invalid> {
    match e {
        None => Ok(Endpoint::Chat),
        Some(e) => endpoint_from(e).ok_or_else(|| {
            Invalid::Bad(format!(
                "endpoint: '{}' is not one of chat/completions, completions, embeddings, responses, images/generations, rerank (uploads and speech are answered only while their client waits)",
                crate::text::bounded(e)
            ))
        }),
    }
}

/// `request`: the body the client would POST to `endpoint`, within `max` bytes, kept whole
/// (not streamed), and naming its model when it embeds.
fn request(raw: &RawValue, endpoint: Endpoint, max: usize) -> Result<Bytes, Invalid> {
    let raw = raw.get().as_bytes();
    if raw.len() > max {
        return Err(Invalid::TooLarge(format!(
            "request: {} bytes is larger than tasks.max_request_body ({max} bytes)",
            raw.len(),
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
    Ok(request)
}

/// `route`: one of the registry's routes.
fn route(r: &str, reg: &Registry) -> Result<(), Invalid> {
    if reg.routes.iter().any(|x| x.name == r) {
        return Ok(());
    }
    let names: Vec<&str> = reg.routes.iter().map(|x| x.name.as_str()).collect();
    bad(format!(
        "route: no route '{}'; expected one of: {}",
        crate::text::bounded(r),
        names.join(", ")
    ))
}

/// `after`: at most [`MAX_AFTER`] task ids, each well formed and named once.
fn after(ids: &[String]) -> Result<Vec<TaskId>, Invalid> {
    if ids.len() > MAX_AFTER {
        return bad(format!("after: {} tasks; at most {MAX_AFTER}", ids.len()));
    }
    let mut after = Vec::with_capacity(ids.len());
    for (i, a) in ids.iter().enumerate() {
        let id: TaskId = a
            .parse()
            .map_err(|e: String| Invalid::Bad(format!("after[{i}]: {e}")))?;
        if after.contains(&id) {
            return bad(format!("after[{i}]: {id} is named twice"));
        }
        after.push(id);
    }
    Ok(after)
}

/// `priority`: -100 to 100, 0 when absent.
fn priority(p: Option<i64>) -> Result<i32, Invalid> {
    match p {
        None => Ok(0),
        Some(p) if (-100..=100).contains(&p) => Ok(p as i32),
        Some(p) => bad(format!("priority: {p} is outside -100..100")),
    }
}

/// `max_attempts`: 1 to 100.
fn max_attempts(n: i64) -> Result<u32, Invalid> {
    if (1..=100).contains(&n) {
        Ok(n as u32)
    } else {
        bad(format!("max_attempts: {n} is outside 1..100"))
    }
}

/// `metadata`: at most [`MAX_METADATA`] pairs, each of bounded size, so a task's row stays
/// small whatever a client sends.
fn metadata(pairs: &BTreeMap<String, String>) -> Result<(), Invalid> {
    if pairs.len() > MAX_METADATA {
        return bad(format!(
            "metadata: {} pairs; at most {MAX_METADATA}",
            pairs.len()
        ));
    }
    for (k, v) in pairs {
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
    Ok(())
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

#[cfg(test)]
mod tests;
