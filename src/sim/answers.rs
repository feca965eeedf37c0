//! The OpenAI-shaped answers: whole answers and the SSE scripts of streams, plain or with
//! what the request asked for (a tool call, reasoning, JSON, a usage chunk). A plain request
//! gets exactly the bytes it always did.

use bytes::Bytes;
use serde_json::{json, Value};

use super::ask::{thinking, Ask, ToolCall};
use super::feed::Script;
use super::routes::OpenAiWork;

/// The id every tool call carries.
const CALL_ID: &str = "call_sim_0";

/// The model list `GET /v1/models` answers.
pub(super) fn models(name: &str) -> Value {
    json!({"object":"list","data":[{"id":"sim-model","object":"model","owned_by":name}]})
}

/// The complete non-stream answer for a work route; `text` is the assistant's text.
pub(super) fn whole(work: OpenAiWork, model: &str, name: &str, text: &str, ask: &Ask) -> Value {
    match work {
        OpenAiWork::Chat => {
            let (message, finish) = chat_message(name, text, ask);
            json!({"id":"chatcmpl-sim","object":"chat.completion","created":0,"model":model,
            "choices":[{"index":0,"message":message,"finish_reason":finish}],
            "usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}})
        }
        OpenAiWork::Completions => {
            json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":model,
            "choices":[{"index":0,"text":text,"finish_reason":"stop"}]})
        }
        OpenAiWork::Embeddings => json!({"object":"list","model":model,
            "data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}]}),
    }
}

/// A whole answer's message and finish reason: the text, or a call to the asked tool; with
/// `reasoning_content` when thinking was asked.
fn chat_message(name: &str, text: &str, ask: &Ask) -> (Value, &'static str) {
    let (mut message, finish) = match &ask.tool {
        Some(call) => (
            json!({"role":"assistant","content":null,"tool_calls":[tool_call(call)]}),
            "tool_calls",
        ),
        None => (json!({"role":"assistant","content":text}), "stop"),
    };
    if let (true, Some(m)) = (ask.think, message.as_object_mut()) {
        m.insert("reasoning_content".into(), thinking(name).into());
    }
    (message, finish)
}

/// One whole tool call, its arguments a JSON text.
fn tool_call(call: &ToolCall) -> Value {
    json!({"id":CALL_ID,"type":"function",
        "function":{"name":call.name,"arguments":call.arguments_text()}})
}

/// One SSE event.
fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// One chat stream chunk with this delta and finish reason.
fn chat_chunk(model: &str, delta: Value, finish: Value) -> Bytes {
    sse(
        &json!({"id":"chatcmpl-sim","object":"chat.completion.chunk","created":0,
        "model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]}),
    )
}

/// One completions stream chunk with this text and finish reason.
fn completion_chunk(model: &str, text: &str, finish: Value) -> Bytes {
    sse(
        &json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":model,
        "choices":[{"index":0,"text":text,"finish_reason":finish}]}),
    )
}

/// The chunk that carries only usage, after the finish chunk.
fn usage_chunk(work: OpenAiWork, model: &str, tokens: usize) -> Bytes {
    let (id, object) = match work {
        OpenAiWork::Chat => ("chatcmpl-sim", "chat.completion.chunk"),
        _ => ("cmpl-sim", "text_completion"),
    };
    sse(
        &json!({"id":id,"object":object,"created":0,"model":model,"choices":[],
        "usage":{"prompt_tokens":1,"completion_tokens":tokens,"total_tokens":tokens + 1}}),
    )
}

/// The SSE script of a stream: a thinking delta if asked, then a tool call, one fixed text,
/// or `pieces` pieces `NAME-i `; with usage asked, a finish chunk and a usage chunk (one
/// completion token per frame before them); then `[DONE]`.
pub(super) fn script(
    work: OpenAiWork,
    model: &str,
    name: &str,
    ask: &Ask,
    pieces: usize,
) -> Script {
    let chat = work == OpenAiWork::Chat;
    let mut head = Vec::new();
    if chat && ask.think {
        let delta = json!({"reasoning_content":thinking(name)});
        head.push(chat_chunk(model, delta, Value::Null));
    }
    let fixed = ask.fixed_text(name);
    let tool = ask.tool.as_ref().filter(|_| chat);
    if let Some(call) = tool {
        head.extend(tool_call_chunks(model, call));
    } else if let Some(text) = &fixed {
        head.push(match chat {
            true => chat_chunk(model, json!({"content":text}), Value::Null),
            false => completion_chunk(model, text, Value::Null),
        });
    }
    let pieces = match tool.is_some() || fixed.is_some() {
        true => 0,
        false => pieces,
    };
    let mut tail = Vec::new();
    if ask.usage {
        let tokens = head.len() + pieces;
        tail.push(match (chat, tool.is_some()) {
            (true, true) => chat_chunk(model, json!({}), "tool_calls".into()),
            (true, false) => chat_chunk(model, json!({}), "stop".into()),
            (false, _) => completion_chunk(model, "", "stop".into()),
        });
        tail.push(usage_chunk(work, model, tokens));
    } else if tool.is_some() {
        tail.push(chat_chunk(model, json!({}), "tool_calls".into()));
    }
    let (model, name) = (model.to_owned(), name.to_owned());
    Script {
        head,
        pieces,
        piece: Box::new(move |i| {
            let piece = format!("{name}-{i} ");
            match chat {
                true => chat_chunk(&model, json!({"content":piece}), Value::Null),
                false => completion_chunk(&model, &piece, Value::Null),
            }
        }),
        tail,
        last: Some(Bytes::from_static(b"data: [DONE]\n\n")),
    }
}

/// A streamed tool call: its id, type and name with empty arguments, then the arguments in
/// two fragments.
fn tool_call_chunks(model: &str, call: &ToolCall) -> Vec<Bytes> {
    let opening = json!({"tool_calls":[{"index":0,"id":CALL_ID,"type":"function",
        "function":{"name":call.name,"arguments":""}}]});
    let arguments = call.arguments_text();
    let (first, second) = halves(&arguments);
    let fragment = |part: &str| json!({"tool_calls":[{"index":0,"function":{"arguments":part}}]});
    [opening, fragment(first), fragment(second)]
        .into_iter()
        .map(|delta| chat_chunk(model, delta, Value::Null))
        .collect()
}

/// `s` split near its middle, on a character boundary.
fn halves(s: &str) -> (&str, &str) {
    let mid = (s.len() / 2..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s.split_at_checked(mid).unwrap_or((s, ""))
}
