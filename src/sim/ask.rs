//! What a work request asks of its answer beyond plain text: a tool call, a tool result to
//! echo, thinking, JSON, a usage chunk. Read the same way from OpenAI (chat, completions,
//! Responses) and Ollama requests, so tests can watch each field travel through labrouter's
//! translation. Never fails: a field of the wrong shape is simply not asked for.

use serde_json::{Map, Value};

/// The tool a request's answer calls: its name and its arguments object.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ToolCall {
    pub(super) name: String,
    /// Every name in the tool's `parameters.required`, set to "sim".
    pub(super) arguments: Map<String, Value>,
}

impl ToolCall {
    /// The arguments as OpenAI sends them: a JSON text.
    pub(super) fn arguments_text(&self) -> String {
        Value::Object(self.arguments.clone()).to_string()
    }
}

/// What one work request asks for; `Ask::default()` is a plain text answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Ask {
    /// Answer with a call to this tool instead of text.
    pub(super) tool: Option<ToolCall>,
    /// The last message was a tool's result: answer `tool said: <it>`.
    pub(super) tool_result: Option<String>,
    /// Answer with thinking too.
    pub(super) think: bool,
    /// Answer with a JSON text.
    pub(super) json: bool,
    /// An OpenAI stream ends with a finish chunk and a usage chunk.
    pub(super) usage: bool,
}

impl Ask {
    /// Read from an OpenAI chat (`chat` true) or completions request.
    pub(super) fn openai(request: &Value, chat: bool) -> Ask {
        let thinking = request
            .pointer("/chat_template_kwargs/enable_thinking")
            .and_then(Value::as_bool)
            == Some(true);
        let effort = request
            .get("reasoning_effort")
            .is_some_and(|v| !v.is_null());
        Ask {
            tool: chat.then(|| tool_call(request)).flatten(),
            tool_result: chat.then(|| tool_result(request)).flatten(),
            think: chat && (thinking || effort),
            json: request.get("response_format").is_some_and(|v| !v.is_null()),
            usage: request
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true),
        }
    }

    /// Read from a Responses API request: a call to the first tool offered unless the last
    /// input item is a tool's output (then that output echoed), JSON when `text.format`
    /// asks for it.
    pub(super) fn responses(request: &Value) -> Ask {
        let output = last_input(request)
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"));
        let format = request.pointer("/text/format/type").and_then(Value::as_str);
        Ask {
            tool: output.is_none().then(|| offered_tool(request)).flatten(),
            tool_result: output.map(|o| as_text(o.get("output"))),
            think: false,
            json: matches!(format, Some("json_object" | "json_schema")),
            usage: false,
        }
    }

    /// Read from an Ollama chat (`chat` true) or generate request.
    pub(super) fn ollama(request: &Value, chat: bool) -> Ask {
        let think = match request.get("think") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(level)) => !level.is_empty(),
            _ => false,
        };
        let json = match request.get("format") {
            Some(Value::String(f)) => f == "json",
            Some(Value::Object(_)) => true,
            _ => false,
        };
        Ask {
            tool: chat.then(|| tool_call(request)).flatten(),
            tool_result: chat.then(|| tool_result(request)).flatten(),
            think,
            json,
            usage: false,
        }
    }

    /// The text of the answer when it is one fixed text rather than the usual one: JSON
    /// first, then a tool's result echoed.
    pub(super) fn fixed_text(&self, name: &str) -> Option<String> {
        if self.json {
            return Some(json_text(name));
        }
        self.tool_result.as_ref().map(|r| format!("tool said: {r}"))
    }
}

/// The JSON answer: `{"ok":true,"from":"NAME"}`, keys in that order.
fn json_text(name: &str) -> String {
    format!(r#"{{"ok":true,"from":{}}}"#, Value::from(name))
}

/// The thinking an answer carries when asked.
pub(super) fn thinking(name: &str) -> String {
    format!("thinking from {name}")
}

/// The request's last message, if it has one.
fn last_message(request: &Value) -> Option<&Value> {
    request.get("messages")?.as_array()?.last()
}

/// Whether the last message is a tool's result.
fn last_is_tool(request: &Value) -> bool {
    last_message(request)
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("tool")
}

/// The last item of a Responses request's `input`, when it is a list of items (a text
/// input is a user's message).
fn last_input(request: &Value) -> Option<&Value> {
    request.get("input")?.as_array()?.last()
}

/// A call to the first tool, when the request offers tools and its last message is not a
/// tool's result; `None` also when that tool has no name.
fn tool_call(request: &Value) -> Option<ToolCall> {
    if last_is_tool(request) {
        return None;
    }
    offered_tool(request)
}

/// A call to the first tool the request offers, nested as chat offers it
/// (`{"type":"function","function":{"name",...}}`) or flat as the Responses API does
/// (`{"type":"function","name",...}`); `None` when it has no name.
fn offered_tool(request: &Value) -> Option<ToolCall> {
    let tool = request.get("tools")?.as_array()?.first()?;
    let function = tool.get("function").unwrap_or(tool);
    let name = function.get("name")?.as_str()?.to_owned();
    let arguments = function
        .pointer("/parameters/required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|k| (k.to_owned(), Value::from("sim")))
        .collect();
    Some(ToolCall { name, arguments })
}

/// The content of the last message when it is a tool's result (text as is, anything else as
/// its JSON text).
fn tool_result(request: &Value) -> Option<String> {
    if !last_is_tool(request) {
        return None;
    }
    Some(as_text(
        last_message(request).and_then(|m| m.get("content")),
    ))
}

/// A tool's result as text: a text as is, anything else as its JSON text, nothing as "".
fn as_text(result: Option<&Value>) -> String {
    match result {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// `s` split near its middle, on a character boundary: a tool call's arguments streamed in
/// two fragments, as servers stream them.
pub(super) fn halves(s: &str) -> (&str, &str) {
    let mid = (s.len() / 2..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s.split_at_checked(mid).unwrap_or((s, ""))
}
