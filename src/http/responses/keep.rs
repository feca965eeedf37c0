//! The front of a Responses request — its body sent with only `model` rewritten, its
//! stream framed as the Responses API frames it — and what keeps a streamed Response as
//! its events go by: the whole Response from the event that finished it, within
//! [`kept::MAX_KEPT`].

use std::sync::{mpsc, Mutex};

use axum::http::HeaderValue;
use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;

use crate::outcome::{Endpoint, Wire};
use crate::proxy::Front;
use crate::registry::Api;
use crate::request::Parsed;
use crate::store::responses as kept;
use crate::store::Msg;
use crate::upstream::{Framing, Keep, Payload};

/// Who keeps a Response, and what of this turn it keeps beside the machine's output.
#[derive(Clone)]
pub struct Keeper {
    pub writer: mpsc::Sender<Msg>,
    pub owner: String,
    /// The kept Response this turn continued (linked in the store).
    pub previous: Option<String>,
    /// `previous_response_id` as the client sent it, echoed in what is kept and shown.
    pub echo: Option<String>,
    /// This turn's own input items.
    pub input: Value,
}

/// A Responses request to any machine that serves `/v1/responses`.
pub struct Responses {
    parsed: Parsed,
    /// Taken by the stream that serves (one stream per request).
    keeper: Mutex<Option<Keeper>>,
}

impl Responses {
    pub fn new(parsed: Parsed, keeper: Option<Keeper>) -> Responses {
        Responses {
            parsed,
            keeper: Mutex::new(keeper),
        }
    }
}

impl Front for Responses {
    fn request(&self, backend: &str, _: Api) -> (Wire, Payload) {
        (
            Wire::OpenAi(Endpoint::Responses),
            self.parsed.body_for(backend).into(),
        )
    }

    fn embeds(&self) -> bool {
        false
    }

    fn answer(
        &self,
        _: Wire,
        body: Bytes,
        _: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String> {
        Ok((body, None))
    }

    fn framing(&self, _: Wire, _: Instant) -> (Framing, Option<HeaderValue>) {
        let keeper = self.keeper.lock().unwrap_or_else(|e| e.into_inner()).take();
        let keep = keeper.map(|k| Box::new(Stream::new(k)) as Box<dyn Keep>);
        (Framing::responses(keep), None)
    }
}

/// A streamed Response on its way to the client, read event by event for the one that
/// finished it (which carries the whole Response).
struct Stream {
    keeper: Keeper,
    /// The current event's bytes, up to its blank line.
    event: Vec<u8>,
    /// The Response the finishing event carried.
    done: Option<Value>,
    /// An event too large to keep went by: nothing is kept.
    over: bool,
}

impl Stream {
    fn new(keeper: Keeper) -> Stream {
        Stream {
            keeper,
            event: Vec::new(),
            done: None,
            over: false,
        }
    }

    /// One whole event: the finishing one's Response is kept aside.
    fn event_ended(&mut self) {
        let event = std::mem::take(&mut self.event);
        let text = String::from_utf8_lossy(&event);
        let data: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            return;
        };
        let kind = v["type"].as_str().unwrap_or_default();
        if matches!(
            kind,
            "response.completed" | "response.incomplete" | "response.failed"
        ) {
            self.done = Some(v["response"].clone());
        }
        self.event = event;
        self.event.clear();
    }
}

impl Keep for Stream {
    fn observe(&mut self, chunk: &[u8]) {
        if self.over {
            return;
        }
        for &b in chunk {
            self.event.push(b);
            if self.event.ends_with(b"\n\n") || self.event.ends_with(b"\r\n\r\n") {
                self.event_ended();
            }
        }
        if self.event.len() > kept::MAX_KEPT {
            self.over = true;
            self.event = Vec::new();
        }
    }

    fn finished(mut self: Box<Self>) {
        if !self.event.is_empty() {
            self.event_ended();
        }
        if let (Some(mut response), false) = (self.done.take(), self.over) {
            self.keeper.keep(&mut response);
        }
    }
}
