//! An OpenAI whole answer as Ollama's whole answer.

use std::time::SystemTime;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value};

use super::line::{self, Line, Metrics, ToolCall, Usage};
use super::Timing;
use crate::ollama::Call;

#[cfg(test)]
mod tests;

/// An OpenAI whole answer (already checked to parse as a completion / embeddings list) as
/// Ollama's whole answer, one JSON object, no trailing newline. `model` is the name the
/// client asked for (as sent). Err if the answer lacks what is needed (then the caller
/// treats it as a malformed answer).
pub fn answer(call: Call, openai: &[u8], model: &str, timing: Timing) -> Result<Bytes, String> {
    answer_at(call, openai, model, timing, SystemTime::now())
}

/// [`answer`], made at wall time `now`.
fn answer_at(
    call: Call,
    openai: &[u8],
    model: &str,
    timing: Timing,
    now: SystemTime,
) -> Result<Bytes, String> {
    let v: Value =
        serde_json::from_slice(openai).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let out = match call {
        Call::Chat | Call::Generate => completion(call, &v, model, &line::created_at(now), timing)?,
        Call::Embed | Call::Embeddings => vectors(call, &v, model, timing)?,
    };
    Ok(Bytes::from(out))
}

/// A chat completion (or a text completion, for generate) as chat's or generate's answer.
fn completion(
    call: Call,
    v: &Value,
    model: &str,
    created_at: &str,
    timing: Timing,
) -> Result<Vec<u8>, String> {
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(Value::as_object)
        .ok_or("the answer has no choices[0]")?;
    let (content, thinking, calls) = match choice.get("message") {
        Some(Value::Object(m)) => {
            let content = m.get("content").and_then(Value::as_str);
            (
                content.unwrap_or_default(),
                line::reasoning(m),
                tool_calls(m),
            )
        }
        Some(_) => return Err("the answer's choices[0].message is not an object".into()),
        None => match choice.get("text") {
            Some(Value::String(text)) => (text.as_str(), None, None),
            _ => return Err("the answer's choices[0] has neither a message nor a text".into()),
        },
    };
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let mut out = Line::text(call, model, created_at, content, thinking);
    if let Some(message) = out.message.as_mut() {
        message.tool_calls = calls;
    }
    out.done = true;
    out.done_reason = Some(line::done_reason(finish));
    out.logprobs = line::logprobs(choice);
    out.metrics = Some(Metrics::new(timing, Usage::read(v.get("usage"))));
    Ok(out.to_vec())
}

/// An OpenAI message's `tool_calls` as Ollama's, their ids kept (None when there are none).
fn tool_calls(m: &Map<String, Value>) -> Option<Vec<ToolCall>> {
    let calls = m.get("tool_calls").and_then(Value::as_array)?;
    let list: Vec<ToolCall> = calls
        .iter()
        .filter_map(|c| Some((c.get("id").and_then(Value::as_str), c.get("function")?)))
        .enumerate()
        .map(|(index, (id, f))| {
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            line::tool_call(index, id, name, f.get("arguments"))
        })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// `/api/embed`'s answer.
#[derive(Serialize)]
struct Embed<'a> {
    model: &'a str,
    embeddings: Vec<&'a Value>,
    total_duration: u64,
    load_duration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_eval_count: Option<u64>,
}

/// `/api/embeddings`' answer: the first vector alone.
#[derive(Serialize)]
struct Embeddings<'a> {
    embedding: &'a Value,
}

/// An OpenAI embeddings list as embed's or embeddings' answer: vectors in `index` order.
fn vectors(call: Call, v: &Value, model: &str, timing: Timing) -> Result<Vec<u8>, String> {
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the answer has no data")?;
    let mut vectors = Vec::with_capacity(data.len());
    for (i, item) in data.iter().enumerate() {
        let vector = item
            .get("embedding")
            .filter(|e| e.is_array())
            .ok_or_else(|| format!("the answer's data[{i}] has no embedding array"))?;
        let index = item.get("index").and_then(Value::as_u64);
        vectors.push((index.unwrap_or(i as u64), vector));
    }
    // A stable sort: items without an index keep their place.
    vectors.sort_by_key(|(index, _)| *index);
    let embeddings: Vec<&Value> = vectors.into_iter().map(|(_, v)| v).collect();
    let out = if call == Call::Embeddings {
        let empty = Value::Array(Vec::new());
        let first = embeddings.first().copied().unwrap_or(&empty);
        serde_json::to_vec(&Embeddings { embedding: first })
    } else {
        serde_json::to_vec(&Embed {
            model,
            embeddings,
            total_duration: line::nanos(timing.total),
            load_duration: 0,
            prompt_eval_count: Usage::read(v.get("usage")).prompt,
        })
    };
    // Strings, numbers and JSON values only: serialising cannot fail.
    Ok(out.unwrap_or_default())
}
