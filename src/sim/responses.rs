//! OpenAI's Responses API (`POST /v1/responses`, which Ollama serves too): the Response
//! object, its output items (a message, or a call to the offered tool), and the opening of
//! the huge one. `events` has the event stream. Shapes follow the openai SDK's types
//! (`openai/types/responses/`): fields it requires are always present.
//!
//! The sim keeps no state, as Ollama's Responses are stateless: a `previous_response_id` is
//! echoed and otherwise ignored, and `store` is false.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use serde_json::{json, Value};

use super::ask::{Ask, ToolCall};

mod events;

pub(super) use events::script;

/// The opening of the huge answer: a completed Response saying "big", up to its padding.
pub(super) const HUGE_HEAD: &[u8] = br#"{"id":"resp_huge","object":"response","created_at":0,"status":"completed","model":"sim-model","output":[{"type":"message","id":"msg_huge","status":"completed","role":"assistant","content":[{"type":"output_text","text":"big","annotations":[]}]}],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"pad":""#;

/// The output tokens a whole answer reports (as the chat answer does).
const WHOLE_TOKENS: usize = 3;

/// An id no other answer of this process carries: `prefix_`, then the wall clock in
/// nanoseconds and a counter, both fixed-width hex (so clients that key on ids, as the
/// Agents SDK does, never mix two answers up, even across restarts).
fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = crate::clock::wall()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}_{nanos:020x}{n:08x}")
}

/// What one answer says: a text, or a call to a tool.
pub(super) enum Said<'a> {
    Text(&'a str),
    Call(&'a ToolCall),
}

/// One Response being answered: its ids, when, for which model, to which request.
pub(super) struct Reply<'a> {
    id: String,
    /// The id of its one output item (`msg_...` or `fc_...`).
    item_id: String,
    /// The `call_id` of its tool call, if it makes one.
    call_id: String,
    created_at: u64,
    model: &'a str,
    request: &'a Value,
    pub(super) ask: Ask,
}

impl<'a> Reply<'a> {
    /// A new Response to `request`, answered as `model`.
    pub(super) fn new(model: &'a str, request: &'a Value) -> Reply<'a> {
        let ask = Ask::responses(request);
        let item = match ask.tool {
            Some(_) => "fc",
            None => "msg",
        };
        let created_at = crate::clock::wall()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Reply {
            id: unique("resp"),
            item_id: unique(item),
            call_id: unique("call"),
            created_at,
            model,
            request,
            ask,
        }
    }

    /// The request's field `key` as sent, or `default` when it was not (or was null).
    fn sent(&self, key: &str, default: Value) -> Value {
        match self.request.get(key) {
            Some(v) if !v.is_null() => v.clone(),
            _ => default,
        }
    }

    /// The Response object: `status`, its `output` items, and `usage` once completed.
    pub(super) fn response(
        &self,
        status: &str,
        output: Vec<Value>,
        tokens: Option<usize>,
    ) -> Value {
        let completed = status == "completed";
        let usage = tokens.map(usage);
        json!({
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": status,
            "completed_at": completed.then_some(self.created_at),
            "error": null, "incomplete_details": null,
            "instructions": self.sent("instructions", Value::Null),
            "max_output_tokens": self.sent("max_output_tokens", Value::Null),
            "metadata": self.sent("metadata", json!({})),
            "model": self.model, "output": output,
            "parallel_tool_calls": self.sent("parallel_tool_calls", true.into()),
            "previous_response_id": self.sent("previous_response_id", Value::Null),
            "reasoning": {"effort": null, "summary": null},
            "store": false,
            "temperature": self.sent("temperature", 1.0.into()),
            "text": self.sent("text", json!({"format": {"type": "text"}})),
            "tool_choice": self.sent("tool_choice", "auto".into()),
            "tools": self.sent("tools", json!([])),
            "top_p": self.sent("top_p", 1.0.into()),
            "truncation": "disabled",
            "usage": usage, "user": null,
        })
    }

    /// The one output item, `status` (`in_progress` items say no text and empty arguments).
    pub(super) fn item(&self, said: &Said, status: &str) -> Value {
        let done = status == "completed";
        match said {
            Said::Text(text) => {
                let content = match done {
                    true => vec![part(text)],
                    false => Vec::new(),
                };
                json!({"type":"message","id":self.item_id,"status":status,"role":"assistant",
                    "content":content})
            }
            Said::Call(call) => {
                let arguments = match done {
                    true => call.arguments_text(),
                    false => String::new(),
                };
                json!({"type":"function_call","id":self.item_id,"call_id":self.call_id,
                    "name":call.name,"arguments":arguments,"status":status})
            }
        }
    }

    /// The whole answer: the tool call asked for, else `text`.
    pub(super) fn whole(&self, text: &str) -> Value {
        let said = match &self.ask.tool {
            Some(call) => Said::Call(call),
            None => Said::Text(text),
        };
        self.response(
            "completed",
            vec![self.item(&said, "completed")],
            Some(WHOLE_TOKENS),
        )
    }

    /// The id of the output item.
    pub(super) fn item_id(&self) -> &str {
        &self.item_id
    }
}

/// An `output_text` content part saying `text`.
pub(super) fn part(text: &str) -> Value {
    json!({"type":"output_text","text":text,"annotations":[]})
}

/// Usage with `output` output tokens (one input token, as the chat answers count).
fn usage(output: usize) -> Value {
    json!({"input_tokens":1,"input_tokens_details":{"cached_tokens":0},
        "output_tokens":output,"output_tokens_details":{"reasoning_tokens":0},
        "total_tokens":output + 1})
}
