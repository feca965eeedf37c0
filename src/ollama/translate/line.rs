//! The Ollama objects whole answers and stream lines are made of, serialised in Ollama's
//! field order, and the small readings of OpenAI's fields both sides share.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value};

use super::Timing;
use crate::ollama::Call;

/// One Ollama answer object: a whole answer, or one NDJSON line of a stream.
#[derive(Serialize)]
pub(super) struct Line<'a> {
    pub model: &'a str,
    pub created_at: &'a str,
    /// Chat's message (absent for generate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message<'a>>,
    /// Generate's text (absent for chat).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<&'a str>,
    /// Generate's reasoning text (chat carries it in `message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<&'a str>,
    pub done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done_reason: Option<&'a str>,
    /// The generated tokens' log probabilities, when the client asked for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<Value>>,
    /// Counts and durations, on the last line only.
    #[serde(flatten)]
    pub metrics: Option<Metrics>,
}

/// Chat's `message`.
#[derive(Serialize)]
pub(super) struct Message<'a> {
    pub role: &'static str,
    pub content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// One of Ollama's tool calls: `{"id","function":{"index","name","arguments":{...}}}`;
/// the machine's id kept (Ollama 0.13 carries ids, and a client sends them back).
#[derive(Serialize)]
pub(super) struct ToolCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub function: Function,
}

/// A tool call's function: its place among the message's calls, its name, and its
/// arguments as an object, not OpenAI's JSON string.
#[derive(Serialize)]
pub(super) struct Function {
    pub index: usize,
    pub name: String,
    pub arguments: Value,
}

/// The counts and durations (ns) of a last line. `load_duration` is always 0: a translated
/// answer cannot tell loading from evaluating.
#[derive(Serialize)]
pub(super) struct Metrics {
    pub total_duration: u64,
    pub load_duration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_eval_count: Option<u64>,
    pub prompt_eval_duration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_count: Option<u64>,
    pub eval_duration: u64,
}

/// What OpenAI's `usage` says, where it says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Usage {
    pub prompt: Option<u64>,
    pub completion: Option<u64>,
}

impl<'a> Line<'a> {
    /// A line carrying text: chat's `message`, or generate's `response` and `thinking`.
    pub fn text(
        call: Call,
        model: &'a str,
        created_at: &'a str,
        content: &'a str,
        thinking: Option<&'a str>,
    ) -> Line<'a> {
        let chat = call == Call::Chat;
        Line {
            model,
            created_at,
            message: chat.then_some(Message {
                role: "assistant",
                content,
                thinking,
                tool_calls: None,
            }),
            response: (!chat).then_some(content),
            thinking: if chat { None } else { thinking },
            done: false,
            done_reason: None,
            logprobs: None,
            metrics: None,
        }
    }

    /// The line as JSON, without a newline.
    pub fn to_vec(&self) -> Vec<u8> {
        // Strings, numbers and JSON values only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl Metrics {
    /// Counts from `usage`; prompt evaluation up to the first token, evaluation after it.
    pub fn new(timing: Timing, usage: Usage) -> Metrics {
        let first = timing.first_token.min(timing.total);
        Metrics {
            total_duration: nanos(timing.total),
            load_duration: 0,
            prompt_eval_count: usage.prompt,
            prompt_eval_duration: nanos(first),
            eval_count: usage.completion,
            eval_duration: nanos(timing.total.saturating_sub(first)),
        }
    }
}

impl Usage {
    /// `prompt_tokens` and `completion_tokens` of an OpenAI `usage` object, when there.
    pub fn read(usage: Option<&Value>) -> Usage {
        let count = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
        Usage {
            prompt: count("prompt_tokens"),
            completion: count("completion_tokens"),
        }
    }
}

/// A duration in whole nanoseconds, saturating (u64 ns is 584 years).
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `created_at`: RFC 3339 in UTC to the nanosecond, trailing zeros dropped, as Go's
/// `RFC3339Nano` (Ollama's) writes it (empty if `t` is beyond jiff's range).
pub(super) fn created_at(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|ts| ts.to_string())
        .unwrap_or_default()
}

/// Ollama's `done_reason` for OpenAI's `finish_reason`: a tool call ends a turn as a stop
/// does in Ollama; no reason at all is a stop.
pub(super) fn done_reason(finish: Option<&str>) -> &str {
    match finish {
        None | Some("tool_calls") | Some("function_call") => "stop",
        Some(other) => other,
    }
}

/// Reasoning text of an OpenAI message or delta: `reasoning_content` (llama-server,
/// DeepSeek, vLLM) or `reasoning` (vLLM's newer name, OpenRouter); None when empty.
pub(super) fn reasoning(m: &Map<String, Value>) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
}

/// The `index`-th Ollama tool call of a message, from an OpenAI one's id, name and
/// arguments. OpenAI's arguments are a JSON string (already an object from a few servers).
/// Ollama's are an object and its clients decode them as a map, so arguments that are not
/// a JSON object (a model's broken JSON, an empty string) become `{}` rather than breaking
/// the client's whole message.
pub(super) fn tool_call(
    index: usize,
    id: Option<&str>,
    name: &str,
    arguments: Option<&Value>,
) -> ToolCall {
    let arguments = match arguments {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) => serde_json::from_str::<Map<String, Value>>(s)
            .map(Value::Object)
            .unwrap_or_else(|_| Value::Object(Map::new())),
        _ => Value::Object(Map::new()),
    };
    ToolCall {
        id: id.filter(|id| !id.is_empty()).map(str::to_string),
        function: Function {
            index,
            name: name.to_string(),
            arguments,
        },
    }
}

/// A choice's log probabilities in Ollama's shape, `[{"token","logprob","bytes",
/// "top_logprobs":[...]}]`: chat's `logprobs.content` is that shape already (only its
/// known fields are kept); a text completion's parallel `tokens`, `token_logprobs` and
/// `top_logprobs` (a map per token) are zipped into it. None when the choice has none.
pub(super) fn logprobs(choice: &Map<String, Value>) -> Option<Vec<Value>> {
    let lp = choice.get("logprobs")?.as_object()?;
    if let Some(content) = lp.get("content").and_then(Value::as_array) {
        let tokens: Vec<Value> = content.iter().filter_map(|t| token(t, true)).collect();
        return (!tokens.is_empty()).then_some(tokens);
    }
    let tokens = lp.get("tokens")?.as_array()?;
    let at = |key: &str, i: usize| lp.get(key).and_then(|v| v.get(i));
    let list: Vec<Value> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let mut out = Map::new();
            out.insert("token".into(), Value::String(t.as_str()?.to_string()));
            let logprob = at("token_logprobs", i).filter(|v| v.is_number());
            out.insert("logprob".into(), logprob.cloned().unwrap_or(0.into()));
            if let Some(top) = at("top_logprobs", i).and_then(Value::as_object) {
                let top = top.iter().filter(|(_, lp)| lp.is_number());
                let top = top.map(|(t, lp)| serde_json::json!({"token": t, "logprob": lp}));
                out.insert("top_logprobs".into(), Value::Array(top.collect()));
            }
            Some(Value::Object(out))
        })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// One token of chat's `logprobs.content` with only Ollama's fields (`top_logprobs` kept,
/// one level deep, when `nested`); None when it has no token text.
fn token(t: &Value, nested: bool) -> Option<Value> {
    let mut out = Map::new();
    out.insert(
        "token".into(),
        Value::String(t.get("token")?.as_str()?.to_string()),
    );
    let logprob = t.get("logprob").filter(|v| v.is_number());
    out.insert("logprob".into(), logprob.cloned().unwrap_or(0.into()));
    if let Some(bytes) = t.get("bytes").filter(|b| b.is_array()) {
        out.insert("bytes".into(), bytes.clone());
    }
    let top = t.get("top_logprobs").and_then(Value::as_array);
    if let Some(top) = top.filter(|_| nested) {
        let top = top.iter().filter_map(|t| token(t, false));
        out.insert("top_logprobs".into(), Value::Array(top.collect()));
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn created_at_is_utc_to_the_nanosecond_without_trailing_zeros() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_796_047_331_120_000_000);
        assert_eq!(created_at(t), "2026-11-30T14:02:11.12Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_047_331);
        assert_eq!(created_at(t), "2026-11-30T14:02:11Z");
    }

    #[test]
    fn done_reasons_map_tool_calls_and_nothing_to_stop() {
        assert_eq!(done_reason(Some("stop")), "stop");
        assert_eq!(done_reason(Some("length")), "length");
        assert_eq!(done_reason(Some("tool_calls")), "stop");
        assert_eq!(done_reason(Some("content_filter")), "content_filter");
        assert_eq!(done_reason(None), "stop");
    }

    #[test]
    fn tool_call_arguments_become_an_object_or_empty() {
        let args = |v: Value| tool_call(0, None, "f", Some(&v)).function.arguments;
        assert_eq!(args(json!("{\"a\":1}")), json!({"a": 1}));
        assert_eq!(args(json!({"b": 2})), json!({"b": 2}));
        assert_eq!(args(json!("{\"a\":")), json!({}));
        assert_eq!(args(json!("[1]")), json!({}));
        assert_eq!(tool_call(0, None, "f", None).function.arguments, json!({}));
    }

    #[test]
    fn metrics_split_at_the_first_token_and_never_underflow() {
        let timing = Timing {
            total: Duration::from_millis(5),
            first_token: Duration::from_millis(7),
        };
        let m = Metrics::new(timing, Usage::default());
        assert_eq!((m.prompt_eval_duration, m.eval_duration), (5_000_000, 0));
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }
}
