//! What a model can do, in Ollama's words (`capabilities` on `/api/show` and `/api/tags`):
//! decided in [`capabilities`] alone, from what the registry knows of the model and what
//! its machine reports ([`Report`]): the model's registry `kind` first.

use serde_json::Value;

use crate::outcome::{Kind, ModelId};
use crate::registry::{Api, Registry};

#[cfg(test)]
mod tests;

/// What a machine says of one of its models, read from its own answer: an Ollama server's
/// `/api/show` card, or the model's entry in an OpenAI-compatible `/v1/models` list. It
/// holds only what the machine stated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Capability words: an Ollama card's as written; an OpenAI entry's mapped to Ollama's
    /// words (unknown ones dropped).
    words: Vec<String>,
    /// The context length the machine gives.
    pub context: Option<u64>,
}

/// Where OpenAI-compatible servers give a model's context length: vLLM's `max_model_len`,
/// llama-server's `meta.n_ctx_train`, or a `context_length`.
const CONTEXT_AT: [&str; 4] = [
    "/max_model_len",
    "/meta/n_ctx_train",
    "/context_length",
    "/max_context_length",
];

/// The most capability words kept from one answer: a machine's answer may be anything.
const WORDS_MAX: usize = 16;

impl Report {
    /// An Ollama server's `/api/show` card: its `capabilities` as it wrote them (Ollama knows
    /// its models best, and may have words labrouter does not), and its context length.
    pub fn of_card(card: &Value) -> Report {
        let words = card["capabilities"].as_array().map_or(&[][..], |w| w);
        let words = words.iter().filter_map(Value::as_str);
        let context = card["model_info"].as_object().and_then(|info| {
            info.iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .and_then(|(_, v)| v.as_u64())
        });
        Report {
            words: words
                .filter(|w| w.len() <= 32)
                .take(WORDS_MAX)
                .map(str::to_string)
                .collect(),
            context,
        }
    }

    /// The entry for `backend` in an OpenAI-compatible `/v1/models` list, None when the list
    /// has no such entry. Servers that say what a model does say it in a `capabilities` list
    /// (Infinity), a `type` (LM Studio: `llm`, `vlm`, `embeddings`) or a `task`; llama-server
    /// and vLLM say nothing of it.
    pub fn of_list(list: &Value, backend: &str) -> Option<Report> {
        let bare = |n: &str| n.strip_suffix(":latest").unwrap_or(n).to_string();
        let entry = list["data"]
            .as_array()?
            .iter()
            .find(|m| m["id"].as_str().map(bare) == Some(bare(backend)))?;
        let stated = ["capabilities", "type", "task", "tasks"]
            .iter()
            .flat_map(|key| match &entry[*key] {
                Value::String(s) => vec![s.as_str()],
                Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            });
        let mut words: Vec<String> = Vec::new();
        for word in stated.take(WORDS_MAX).flat_map(ollama_words) {
            if !words.iter().any(|w| w == word) {
                words.push(word.to_string());
            }
        }
        let context = CONTEXT_AT
            .into_iter()
            .find_map(|at| entry.pointer(at).and_then(Value::as_u64));
        Some(Report { words, context })
    }

    fn says(&self, word: &str) -> bool {
        self.words.iter().any(|w| w == word)
    }
}

/// A word an OpenAI-compatible server uses for what a model does, in Ollama's words.
fn ollama_words(word: &str) -> &'static [&'static str] {
    match word.to_ascii_lowercase().as_str() {
        "completion" | "chat" | "generate" | "text-generation" | "llm" => &["completion"],
        "vlm" => &["completion", "vision"],
        "embedding" | "embeddings" | "embed" | "text-embedding" => &["embedding"],
        "tools" | "tool_use" | "function_calling" => &["tools"],
        "vision" | "multimodal" => &["vision"],
        "thinking" | "reasoning" => &["thinking"],
        "insert" => &["insert"],
        _ => &[],
    }
}

/// What `model` can do, in Ollama's words. A model on an Ollama server: what the server's
/// card says, as it says it. Otherwise its registry `kind` decides: an `embed` model
/// embeds; an image, audio or rerank model does none of Ollama's work; a `chat` model (the
/// kind of every model written without one) chats — `completion` and `tools` (labrouter
/// passes tools to any chat model), `vision` when a route that takes images holds it —
/// unless its machine states it only embeds, or, when the machine says nothing, its
/// backend name does (`embed` in it).
pub fn capabilities<'a>(
    model: ModelId,
    reg: &Registry,
    report: Option<&'a Report>,
) -> Vec<&'a str> {
    let m = &reg.models[model];
    let said = report.map_or(&[][..], |r| &r.words[..]);
    if reg.machines[m.machine].api == Api::Ollama && !said.is_empty() {
        return said.iter().map(String::as_str).collect();
    }
    let (embeds, chats) = match m.kind {
        Kind::Embed => (true, false),
        Kind::Image | Kind::Transcribe | Kind::Speech | Kind::Rerank => (false, false),
        Kind::Chat => match report {
            Some(r) if r.says("embedding") || r.says("completion") => {
                (r.says("embedding"), r.says("completion"))
            }
            _ => {
                let embeds = m.backend.to_ascii_lowercase().contains("embed");
                (embeds, !embeds)
            }
        },
    };
    let mut out: Vec<&str> = Vec::new();
    if chats {
        out.extend(["completion", "tools"]);
        let extra = said.iter().map(String::as_str);
        out.extend(extra.filter(|w| matches!(*w, "vision" | "thinking" | "insert")));
        let images = reg
            .routes
            .iter()
            .any(|r| r.images && r.chain.contains(&model));
        if images && !out.contains(&"vision") {
            out.push("vision");
        }
    }
    if embeds {
        out.push("embedding");
    }
    out
}

/// What `auto` can do: it routes chat by keyword and never embeds (embeddings must name
/// their model); `vision` when a route takes images, since an image sends it there.
pub fn auto_capabilities(reg: &Registry) -> Vec<&'static str> {
    let mut out = vec!["completion", "tools"];
    if reg.routes.iter().any(|r| r.images) {
        out.push("vision");
    }
    out
}
