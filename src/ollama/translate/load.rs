//! Ollama's load and unload calls: `/api/generate` without a prompt and `/api/chat` without
//! messages ask Ollama to load the model (Home Assistant and Open WebUI send them to warm a
//! model up), and with a `keep_alive` of zero to unload it. Ollama answers them without
//! generating; so does labrouter, in the same shape (`server/routes.go` in Ollama:
//! `done_reason` `"load"` or `"unload"`, an empty `response`, or an assistant `message` with
//! empty content).

use std::time::SystemTime;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::line::{self, Line};
use crate::ollama::Call;

/// What a load call asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Load the model (and keep it for `keep_alive`).
    Load,
    /// Unload it now (`keep_alive` of zero).
    Unload,
}

impl Load {
    /// Ollama's `done_reason` for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Load::Load => "load",
            Load::Unload => "unload",
        }
    }
}

/// The load call `body` makes on `call`, if it is one: a generate whose `prompt` is absent
/// or empty, a chat whose `messages` are absent or empty (as Ollama reads them: a null is
/// absent).
pub(super) fn of(call: Call, body: &Map<String, Value>) -> Option<Load> {
    let present = |key: &str| body.get(key).filter(|v| !v.is_null());
    let empty = match call {
        Call::Generate => present("prompt")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty),
        Call::Chat => present("messages")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty),
        Call::Embed | Call::Embeddings => false,
    };
    if !empty {
        return None;
    }
    Some(if zero(present("keep_alive")) {
        Load::Unload
    } else {
        Load::Load
    })
}

/// Whether `keep_alive` is zero as Ollama reads it: a number of seconds, or a Go duration
/// string (`0`, `0s`, `0m`, `0.0s`, `0h0m`); a negative one means "for ever".
fn zero(keep_alive: Option<&Value>) -> bool {
    match keep_alive {
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => zero_duration(s.trim()),
        _ => false,
    }
}

/// A Go duration string that is zero: `0` alone, or numbers that are all zero, each with a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), with an optional sign.
fn zero_duration(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let number = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let digits = &rest[..number];
        if !digits.bytes().any(|b| b.is_ascii_digit())
            || digits.bytes().any(|b| b.is_ascii_digit() && b != b'0')
        {
            return false;
        }
        rest = &rest[number..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        if !matches!(
            &rest[..unit],
            "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h"
        ) {
            return false;
        }
        rest = &rest[unit..];
    }
    true
}

/// Ollama's answer to a load call on `call` for `model` (the name as the client sent it),
/// made at `now`: one JSON object, no newline.
pub fn loaded(call: Call, model: &str, load: Load, now: SystemTime) -> Bytes {
    let created_at = line::created_at(now);
    let mut out = Line::text(call, model, &created_at, "", None);
    out.done = true;
    out.done_reason = Some(load.as_str());
    Bytes::from(out.to_vec())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn empty_prompts_and_messages_are_load_calls_and_a_zero_keep_alive_unloads() {
        let gen = |v| of(Call::Generate, &body(v));
        let chat = |v| of(Call::Chat, &body(v));
        assert_eq!(gen(json!({"model": "m"})), Some(Load::Load));
        assert_eq!(gen(json!({"model": "m", "prompt": ""})), Some(Load::Load));
        assert_eq!(gen(json!({"model": "m", "prompt": null})), Some(Load::Load));
        assert_eq!(gen(json!({"model": "m", "prompt": "hi"})), None);
        assert_eq!(chat(json!({"model": "m"})), Some(Load::Load));
        assert_eq!(
            chat(json!({"model": "m", "messages": []})),
            Some(Load::Load)
        );
        assert_eq!(
            chat(json!({"model": "m", "messages": [{"role": "user", "content": ""}]})),
            None,
            "a message, even empty, is work"
        );
        for k in [
            json!(0),
            json!(0.0),
            json!("0"),
            json!("0s"),
            json!("0m0s"),
            json!("0.0h"),
        ] {
            assert_eq!(gen(json!({"keep_alive": k})), Some(Load::Unload), "{k}");
            assert_eq!(chat(json!({"keep_alive": k})), Some(Load::Unload), "{k}");
        }
        for k in [
            json!(-1),
            json!("5m"),
            json!("-1s"),
            json!("10"),
            json!("0x"),
            json!(""),
            json!(300),
        ] {
            assert_eq!(gen(json!({"keep_alive": k})), Some(Load::Load), "{k}");
        }
        assert_eq!(of(Call::Embed, &body(json!({"model": "m"}))), None);
    }

    #[test]
    fn the_answer_is_ollamas_shape() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_047_331);
        let g: Value = serde_json::from_slice(&loaded(Call::Generate, "m", Load::Load, t)).unwrap();
        assert_eq!(
            g,
            json!({"model": "m", "created_at": "2026-11-30T14:02:11Z", "response": "",
                   "done": true, "done_reason": "load"})
        );
        let c: Value = serde_json::from_slice(&loaded(Call::Chat, "m", Load::Unload, t)).unwrap();
        assert_eq!(
            c,
            json!({"model": "m", "created_at": "2026-11-30T14:02:11Z",
                   "message": {"role": "assistant", "content": ""},
                   "done": true, "done_reason": "unload"})
        );
    }
}
