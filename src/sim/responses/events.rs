//! The event stream of a streamed Response, in the order OpenAI sends it: `event: <type>`
//! and `data: <json>` lines, every event numbered by `sequence_number`, no `[DONE]`.
//!
//! A text answer: created, in progress, the message item and its text part added, one text
//! delta per piece, the text, part and item done, completed (with the whole Response). A
//! tool call: created, in progress, the call added, its arguments in two deltas, the
//! arguments and the item done, completed.

use bytes::Bytes;
use serde_json::{json, Value};

use super::{part, Reply, Said};
use crate::sim::ask::{halves, ToolCall};
use crate::sim::feed::Script;

/// One SSE event of `kind`, numbered `seq`, with `fields`.
fn event(kind: &str, seq: usize, fields: Value) -> Bytes {
    let mut data = json!({"type": kind, "sequence_number": seq});
    if let (Some(d), Value::Object(f)) = (data.as_object_mut(), fields) {
        d.extend(f);
    }
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// Events numbered in the order they are pushed, from `next`.
struct Numbered {
    frames: Vec<Bytes>,
    next: usize,
}

impl Numbered {
    fn starting_at(next: usize) -> Numbered {
        Numbered {
            frames: Vec::new(),
            next,
        }
    }

    fn push(&mut self, kind: &str, fields: Value) {
        self.frames.push(event(kind, self.next, fields));
        self.next += 1;
    }
}

/// A text delta of item `item_id` numbered `seq`.
fn text_delta(item_id: &str, seq: usize, delta: &str) -> Bytes {
    let fields = json!({"item_id": item_id, "output_index": 0, "content_index": 0,
        "delta": delta, "logprobs": []});
    event("response.output_text.delta", seq, fields)
}

/// The stream's script: a tool call if the request asks for one, else a text in `pieces`
/// pieces `NAME-i ` (one piece when the text is fixed: JSON, or a tool's output echoed).
pub(in crate::sim) fn script(reply: &Reply, name: &str, pieces: usize) -> Script {
    let mut head = Numbered::starting_at(0);
    let opening = json!({"response": reply.response("in_progress", Vec::new(), None)});
    head.push("response.created", opening.clone());
    head.push("response.in_progress", opening);
    match &reply.ask.tool {
        Some(call) => call_script(reply, call, head),
        None => text_script(reply, name, pieces, head),
    }
}

/// The script of a text answer, after `head`'s opening events.
fn text_script(reply: &Reply, name: &str, pieces: usize, mut head: Numbered) -> Script {
    let item_id = reply.item_id().to_owned();
    let at = |fields: Value| {
        let mut v = json!({"item_id": item_id, "output_index": 0, "content_index": 0});
        if let (Some(v), Value::Object(f)) = (v.as_object_mut(), fields) {
            v.extend(f);
        }
        v
    };
    let added = reply.item(&Said::Text(""), "in_progress");
    head.push(
        "response.output_item.added",
        json!({"output_index": 0, "item": added}),
    );
    head.push("response.content_part.added", at(json!({"part": part("")})));
    let fixed = reply.ask.fixed_text(name);
    if let Some(text) = &fixed {
        head.frames.push(text_delta(&item_id, head.next, text));
        head.next += 1;
    }
    let pieces = if fixed.is_some() { 0 } else { pieces };
    let deltas = if fixed.is_some() { 1 } else { pieces };
    let text = fixed.unwrap_or_else(|| (0..pieces).map(|i| format!("{name}-{i} ")).collect());
    let first_piece = head.next;
    let mut tail = Numbered::starting_at(head.next + pieces);
    tail.push(
        "response.output_text.done",
        at(json!({"text": text, "logprobs": []})),
    );
    tail.push(
        "response.content_part.done",
        at(json!({"part": part(&text)})),
    );
    let item = reply.item(&Said::Text(&text), "completed");
    tail.push(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
    let done = reply.response("completed", vec![item], Some(deltas));
    tail.push("response.completed", json!({"response": done}));
    let name = name.to_owned();
    Script {
        head: head.frames,
        pieces,
        piece: Box::new(move |i| text_delta(&item_id, first_piece + i, &format!("{name}-{i} "))),
        tail: tail.frames,
        last: None,
    }
}

/// The script of a tool call, after `head`'s opening events.
fn call_script(reply: &Reply, call: &ToolCall, mut head: Numbered) -> Script {
    let item_id = reply.item_id();
    let added = reply.item(&Said::Call(call), "in_progress");
    head.push(
        "response.output_item.added",
        json!({"output_index": 0, "item": added}),
    );
    let arguments = call.arguments_text();
    let (first, second) = halves(&arguments);
    for delta in [first, second] {
        let fields = json!({"item_id": item_id, "output_index": 0, "delta": delta});
        head.push("response.function_call_arguments.delta", fields);
    }
    let mut tail = Numbered::starting_at(head.next);
    let fields = json!({"item_id": item_id, "output_index": 0, "name": call.name,
        "arguments": arguments});
    tail.push("response.function_call_arguments.done", fields);
    let item = reply.item(&Said::Call(call), "completed");
    tail.push(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
    let done = reply.response("completed", vec![item], Some(2));
    tail.push("response.completed", json!({"response": done}));
    Script {
        head: head.frames,
        pieces: 0,
        piece: Box::new(|_| Bytes::new()),
        tail: tail.frames,
        last: None,
    }
}
