//! An Ollama request as the request for a machine that speaks only OpenAI's API.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::{field, level, Request};
use crate::ollama::Call;
use crate::outcome::Endpoint;

#[cfg(test)]
mod tests;

/// `options` carried as they are: the sampling fields OpenAI-compatible servers commonly
/// accept (`top_k` and `min_p` are llama-server's and vLLM's extensions).
pub(super) const NUMERIC_OPTIONS: [&str; 7] = [
    "temperature",
    "top_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "top_k",
    "min_p",
];

impl Request {
    /// The request for a machine that speaks only OpenAI's API: which endpoint, and the body.
    ///
    /// Chat → `/chat/completions`; generate → `/chat/completions` with `system` and `prompt`
    /// as messages (the machine applies its chat template, as Ollama does), or
    /// `/completions` with `prompt` and `suffix` when `raw` is true or `suffix` is set;
    /// embed and embeddings → `/embeddings`.
    ///
    /// Not carried, because an OpenAI server fixes them when it starts the model or has no
    /// such notion: `keep_alive`; `options` other than `temperature`, `top_p`, `seed`,
    /// `stop`, `num_predict` (as `max_tokens`), `frequency_penalty`, `presence_penalty`,
    /// `top_k` and `min_p`: the load-time `num_ctx`, `num_batch`, `num_gpu`, `main_gpu`,
    /// `num_thread`, `numa`, `low_vram`, `use_mmap`, `use_mlock`, `vocab_only`, and the
    /// samplers with no common OpenAI field, `num_keep`, `repeat_penalty`, `repeat_last_n`,
    /// `typical_p`, `mirostat*`, `penalize_newline`; generate's `template` and `context`
    /// (the server owns the template and keeps no context), and its `images` on the
    /// `/completions` path (a prompt is text), as is `think` there (the reasoning switch
    /// lives in the chat template); `thinking` on assistant messages; `truncate` and
    /// `shift` (OpenAI servers have no switch for them: they fail a prompt too long for
    /// the context, as Ollama does with both false).
    pub fn openai(&self, backend: &str) -> (Endpoint, Bytes) {
        let mut out = Map::new();
        out.insert("model".into(), backend.into());
        let endpoint = match self.call {
            Call::Chat => {
                let messages = self.get("messages").and_then(Value::as_array);
                out.insert("messages".into(), chat(messages.map_or(&[][..], |m| m)));
                // OpenAI's API refuses an empty `tools` array, which Ollama takes: leave it out.
                let tools = self
                    .get("tools")
                    .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
                if let Some(tools) = tools {
                    out.insert("tools".into(), tools.clone());
                }
                Endpoint::Chat
            }
            Call::Generate if self.completes() => {
                out.insert("prompt".into(), self.str("prompt").into());
                if !self.str("suffix").is_empty() {
                    out.insert("suffix".into(), self.str("suffix").into());
                }
                Endpoint::Completions
            }
            Call::Generate => {
                let mut messages = Vec::new();
                if !self.str("system").is_empty() {
                    messages.push(json!({"role": "system", "content": self.str("system")}));
                }
                let images = self.get("images").and_then(Value::as_array);
                let content = content(self.str("prompt"), images.map_or(&[][..], |i| i));
                messages.push(json!({"role": "user", "content": content}));
                out.insert("messages".into(), Value::Array(messages));
                Endpoint::Chat
            }
            Call::Embed => {
                out.insert(
                    "input".into(),
                    self.get("input").cloned().unwrap_or(json!("")),
                );
                if let Some(dimensions) = self.get("dimensions") {
                    out.insert("dimensions".into(), dimensions.clone());
                }
                Endpoint::Embeddings
            }
            Call::Embeddings => {
                out.insert("input".into(), self.str("prompt").into());
                Endpoint::Embeddings
            }
        };
        if !self.call.embeds() {
            self.common(endpoint, &mut out);
        }
        (endpoint, Bytes::from(Value::Object(out).to_string()))
    }

    /// Whether a generate goes to `/completions`: `raw` true or a non-empty `suffix`.
    fn completes(&self) -> bool {
        self.get("raw").and_then(Value::as_bool) == Some(true) || !self.str("suffix").is_empty()
    }

    /// A string field of the body, "" when absent.
    fn str(&self, key: &str) -> &str {
        self.get(key).and_then(Value::as_str).unwrap_or_default()
    }

    /// What chat and generate share: `stream`, `options`, `format`, `think`.
    fn common(&self, endpoint: Endpoint, out: &mut Map<String, Value>) {
        out.insert("stream".into(), self.stream.into());
        if self.stream {
            out.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let Some(options) = self.get("options").and_then(Value::as_object) {
            self::options(options, out);
        }
        match self.get("format") {
            Some(Value::String(s)) if s == "json" => {
                out.insert("response_format".into(), json!({"type": "json_object"}));
            }
            Some(schema @ Value::Object(_)) => {
                let format = json!({
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": schema},
                });
                out.insert("response_format".into(), format);
            }
            _ => {}
        }
        // The reasoning switch lives in the chat template: a raw prompt has none.
        if endpoint == Endpoint::Chat {
            if let Some(think) = self.get("think") {
                think_switch(think, out);
            }
        }
        if self.get("logprobs").and_then(Value::as_bool) == Some(true) {
            let top = self
                .get("top_logprobs")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            logprobs(endpoint, top, out);
        }
    }
}

/// `options` as OpenAI fields: the numeric samplers as they are, `stop` always an array,
/// `num_predict` as `max_tokens` unless negative (Ollama's -1 is "no limit").
fn options(options: &Map<String, Value>, out: &mut Map<String, Value>) {
    for key in NUMERIC_OPTIONS {
        if let Some(v) = field(options, key) {
            out.insert(key.into(), v.clone());
        }
    }
    match field(options, "stop") {
        Some(Value::String(s)) => {
            out.insert("stop".into(), json!([s]));
        }
        Some(stop @ Value::Array(_)) => {
            out.insert("stop".into(), stop.clone());
        }
        _ => {}
    }
    if let Some(n) = field(options, "num_predict").filter(|n| n.as_f64() >= Some(0.0)) {
        out.insert("max_tokens".into(), n.clone());
    }
}

/// Ollama's `logprobs: true` and `top_logprobs: n` as the endpoint asks for them: chat's
/// `logprobs` and `top_logprobs`; a text completion's `logprobs: n` (the chosen token's,
/// and `n` alternatives).
fn logprobs(endpoint: Endpoint, top: u64, out: &mut Map<String, Value>) {
    if endpoint == Endpoint::Completions {
        out.insert("logprobs".into(), top.into());
        return;
    }
    out.insert("logprobs".into(), true.into());
    if top > 0 {
        out.insert("top_logprobs".into(), top.into());
    }
}

/// `think` as the switch llama-server, vLLM and SGLang read for Qwen3- and DeepSeek-style
/// templates (`chat_template_kwargs.enable_thinking`), and a level as `reasoning_effort`.
fn think_switch(think: &Value, out: &mut Map<String, Value>) {
    let enable = match (think.as_bool(), level(think)) {
        (Some(on), _) => on,
        (None, Some(level)) => {
            out.insert("reasoning_effort".into(), level.into());
            true
        }
        (None, None) => return,
    };
    out.insert(
        "chat_template_kwargs".into(),
        json!({ "enable_thinking": enable }),
    );
}

/// A chat's tool calls so far, in order, and which a tool message answered. Each answer
/// costs O(1) amortized, so a chat of many calls and tool messages takes linear time.
#[derive(Default)]
struct Calls {
    /// Each call's id (the client's, or made up), and whether it is answered.
    all: Vec<(String, bool)>,
    /// Per function name, its calls that may be unanswered, in order.
    by_name: HashMap<String, VecDeque<usize>>,
    /// Each id's call (the first with that id).
    by_id: HashMap<String, usize>,
    /// Every call before this one is answered.
    open: usize,
    /// Queue entries and calls stepped over by [`Calls::answer`] so far: linear time means
    /// this stays within a small multiple of the calls and answers (a test counts it).
    steps: usize,
}

impl Calls {
    fn push(&mut self, id: String, name: &str) {
        let queue = self.by_name.entry(name.to_string()).or_default();
        queue.push_back(self.all.len());
        self.by_id.entry(id.clone()).or_insert(self.all.len());
        self.all.push((id, false));
    }

    /// The id of the k-th call of the assistant message at index i: the client's `given`
    /// one, unless an earlier call of the chat has it (OpenAI servers pair answers by id,
    /// so ids must be unique), else `call_{i}_{k}`, with a suffix if a client took that.
    fn fresh(&self, given: Option<&str>, i: usize, k: usize) -> String {
        if let Some(id) = given.filter(|id| !id.is_empty() && !self.by_id.contains_key(*id)) {
            return id.to_string();
        }
        let base = format!("call_{i}_{k}");
        if !self.by_id.contains_key(&base) {
            return base;
        }
        // At most `by_id.len()` suffixes are taken: the search ends.
        (1..=self.by_id.len())
            .map(|n| format!("{base}_{n}"))
            .find(|id| !self.by_id.contains_key(id))
            .unwrap_or(base)
    }

    /// A tool message that names the call it answers (`tool_call_id`, Ollama 0.13): that
    /// call, if there is one, is answered.
    fn answered(&mut self, id: &str) {
        if let Some(call) = self.by_id.get(id).and_then(|&k| self.all.get_mut(k)) {
            call.1 = true;
        }
    }

    /// The id a tool message at index `i` answers (see [`chat`]), marked answered.
    fn answer(&mut self, i: usize, name: Option<&str>) -> String {
        let Calls {
            all,
            by_name,
            open,
            steps,
            ..
        } = self;
        let unanswered = |k: &usize| all.get(*k).is_some_and(|c| !c.1);
        let named = name.and_then(|n| by_name.get_mut(n)).and_then(|queue| {
            std::iter::from_fn(|| queue.pop_front())
                .inspect(|_| *steps += 1)
                .find(unanswered)
        });
        let k = named.or_else(|| {
            while all.get(*open).is_some_and(|c| c.1) {
                *open += 1;
                *steps += 1;
            }
            Some(*open).filter(unanswered)
        });
        match k.and_then(|k| all.get_mut(k)) {
            Some((id, answered)) => {
                *answered = true;
                id.clone()
            }
            None => format!("call_{i}"),
        }
    }
}

/// Ollama's chat messages as OpenAI's. Tool calls and tool messages keep the ids a client
/// sends (`id`, `tool_call_id`, since Ollama 0.13; a call's id only while it is unique in
/// the chat, see [`Calls::fresh`]); without them, ids are made up: the k-th
/// call of the assistant message at index i is `call_{i}_{k}`, and each tool message
/// answers the earliest unanswered call named its `tool_name` (any name without one, or
/// when none matches; `call_{i}` of its own index when every call is answered).
fn chat(messages: &[Value]) -> Value {
    let mut calls = Calls::default();
    let out = messages.iter().enumerate();
    Value::Array(out.map(|(i, m)| message(i, m, &mut calls)).collect())
}

/// Message `i`: role and content (with images as parts); an assistant's tool calls with
/// ids and string arguments; a tool message's `tool_call_id`. `thinking` is dropped.
fn message(i: usize, m: &Value, calls: &mut Calls) -> Value {
    let text = |key: &str| m.get(key).and_then(Value::as_str).unwrap_or_default();
    let role = text("role");
    let images = m.get("images").and_then(Value::as_array);
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    out.insert(
        "content".into(),
        content(text("content"), images.map_or(&[][..], |i| i)),
    );
    let asked = m.get("tool_calls").and_then(Value::as_array);
    if let Some(asked) = asked.filter(|a| role == "assistant" && !a.is_empty()) {
        let list = asked.iter().enumerate().map(|(k, call)| {
            let function = call.get("function");
            let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
            let name = name.unwrap_or_default();
            let arguments = match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(args @ Value::Object(_)) => args.to_string(),
                _ => "{}".to_string(),
            };
            let id = calls.fresh(call.get("id").and_then(Value::as_str), i, k);
            calls.push(id.clone(), name);
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        });
        out.insert("tool_calls".into(), Value::Array(list.collect()));
    }
    if role == "tool" {
        let given = text("tool_call_id");
        let id = if given.is_empty() {
            calls.answer(i, m.get("tool_name").and_then(Value::as_str))
        } else {
            calls.answered(given);
            given.to_string()
        };
        out.insert("tool_call_id".into(), id.into());
    }
    Value::Object(out)
}

/// A message's content: the text alone, or with images as OpenAI content parts (the
/// text part first, left out when empty).
fn content(text: &str, images: &[Value]) -> Value {
    if images.is_empty() {
        return text.into();
    }
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    for b64 in images.iter().filter_map(Value::as_str) {
        let url = format!("data:{};base64,{b64}", mime(b64));
        parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
    }
    Value::Array(parts)
}

/// An image's MIME type from the base64 of its magic bytes (PNG when unknown).
fn mime(b64: &str) -> &'static str {
    const MAGIC: [(&str, &str); 4] = [
        ("/9j/", "image/jpeg"),
        ("R0lGOD", "image/gif"),
        ("UklGR", "image/webp"),
        ("iVBOR", "image/png"),
    ];
    MAGIC
        .iter()
        .find(|(prefix, _)| b64.starts_with(prefix))
        .map_or("image/png", |(_, mime)| mime)
}
