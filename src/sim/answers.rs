//! The OpenAI-shaped answers: whole answers and the SSE scripts of streams, plain or with
//! what the request asked for (a tool call, reasoning, JSON, a usage chunk), shaped as
//! OpenAI's own so that real clients (LiteLLM, LangChain, the openai SDK) read them.

use bytes::Bytes;
use serde_json::{json, Value};

use super::ask::{halves, thinking, Ask, ToolCall};
use super::feed::Script;
use super::routes::OpenAiWork;

/// The id every tool call carries.
const CALL_ID: &str = "call_sim_0";

/// The model list `GET /v1/models` answers: `models`, each owned by the sim `name` (so a
/// test can tell machines apart by it), created now.
pub(super) fn models(name: &str, models: &[String]) -> Value {
    let created = crate::clock::wall()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let data: Vec<Value> = models
        .iter()
        .map(|m| json!({"id":m,"object":"model","created":created,"owned_by":name}))
        .collect();
    json!({"object":"list","data":data})
}

/// The complete non-stream answer for a chat or completions request; `text` is the
/// assistant's text.
pub(super) fn whole(chat: bool, model: &str, name: &str, text: &str, ask: &Ask) -> Value {
    match chat {
        true => {
            let (message, finish) = chat_message(name, text, ask);
            json!({"id":"chatcmpl-sim","object":"chat.completion","created":0,"model":model,
            "choices":[{"index":0,"message":message,"finish_reason":finish}],
            "usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}})
        }
        // LangChain's `OpenAI` class reads `usage` and fails without it.
        false => {
            json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":model,
            "choices":[{"index":0,"text":text,"logprobs":null,"finish_reason":"stop"}],
            "usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}})
        }
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
/// or `pieces` pieces `NAME-i `; a finish chunk, and a usage chunk after it when asked (one
/// completion token per frame before them); then `[DONE]`. A chat stream's first chunk
/// carries the assistant's role, as OpenAI's does (clients that build the message from
/// the deltas read it there); every stream ends with its finish chunk, which LiteLLM needs.
pub(super) fn script(
    work: OpenAiWork,
    model: &str,
    name: &str,
    ask: &Ask,
    pieces: usize,
) -> Script {
    let chat = work == OpenAiWork::Chat;
    let tool = ask.tool.as_ref().filter(|_| chat);
    let fixed = ask.fixed_text(name);
    // Chat deltas, or completion texts, before the pieces.
    let mut opening: Vec<Value> = Vec::new();
    if chat && ask.think {
        opening.push(json!({"reasoning_content":thinking(name)}));
    }
    if let Some(call) = tool {
        opening.extend(tool_call_deltas(call));
    } else if let Some(text) = &fixed {
        opening.push(match chat {
            true => json!({"content":text}),
            false => text.as_str().into(),
        });
    }
    let pieces = match tool.is_some() || fixed.is_some() {
        true => 0,
        false => pieces,
    };
    // Where the role goes: the first chunk, whatever it carries.
    let role_in_piece = chat && opening.is_empty() && pieces > 0;
    let role_in_finish = chat && opening.is_empty() && pieces == 0;
    if let (true, Some(first)) = (chat, opening.first_mut()) {
        with_role(first);
    }
    let head: Vec<Bytes> = opening
        .into_iter()
        .map(|v| match chat {
            true => chat_chunk(model, v, Value::Null),
            false => completion_chunk(model, v.as_str().unwrap_or_default(), Value::Null),
        })
        .collect();
    let mut tail = vec![match chat {
        true => {
            let mut delta = json!({});
            if role_in_finish {
                with_role(&mut delta);
            }
            let finish = if tool.is_some() { "tool_calls" } else { "stop" };
            chat_chunk(model, delta, finish.into())
        }
        false => completion_chunk(model, "", "stop".into()),
    }];
    if ask.usage {
        tail.push(usage_chunk(work, model, head.len() + pieces));
    }
    let (model, name) = (model.to_owned(), name.to_owned());
    Script {
        head,
        pieces,
        piece: Box::new(move |i| {
            let piece = format!("{name}-{i} ");
            if !chat {
                return completion_chunk(&model, &piece, Value::Null);
            }
            let mut delta = json!({"content":piece});
            if role_in_piece && i == 0 {
                with_role(&mut delta);
            }
            chat_chunk(&model, delta, Value::Null)
        }),
        tail,
        last: Some(Bytes::from_static(b"data: [DONE]\n\n")),
    }
}

/// Puts the assistant's role into a chat delta.
fn with_role(delta: &mut Value) {
    if let Some(d) = delta.as_object_mut() {
        d.insert("role".into(), "assistant".into());
    }
}

/// The deltas of a streamed tool call: its id, type and name with empty arguments, then
/// the arguments in two fragments.
fn tool_call_deltas(call: &ToolCall) -> [Value; 3] {
    let opening = json!({"tool_calls":[{"index":0,"id":CALL_ID,"type":"function",
        "function":{"name":call.name,"arguments":""}}]});
    let arguments = call.arguments_text();
    let (first, second) = halves(&arguments);
    let fragment = |part: &str| json!({"tool_calls":[{"index":0,"function":{"arguments":part}}]});
    [opening, fragment(first), fragment(second)]
}
