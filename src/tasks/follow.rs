//! What a parent gives its follow-ups (SPEC §10): its output text, put where a follow-up's
//! request says `{{after.N}}` — in one pass, only inside message content and `prompt`, as
//! an edit of JSON string values (never by splicing text into JSON).

use bytes::Bytes;
use serde_json::Value;

use crate::upstream::Endpoint;

/// A finished parent's text, or why it has none a follow-up could use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Text(String),
    Unusable(String),
}

/// The output text of a parent's answer body: chat, the first choice's message content;
/// completions, its text. Cut off (`finish_reason: length`) or without text is unusable.
pub fn output(endpoint: Endpoint, body: &[u8]) -> Output {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Output::Unusable("its answer is not JSON".into());
    };
    let choice = &v["choices"][0];
    if choice["finish_reason"] == "length" {
        return Output::Unusable("its answer was cut off (finish_reason: length)".into());
    }
    let text = match endpoint {
        Endpoint::Chat => &choice["message"]["content"],
        Endpoint::Completions => &choice["text"],
        Endpoint::Embeddings => return Output::Unusable("embeddings have no text".into()),
    };
    match text.as_str() {
        Some(t) => Output::Text(t.to_string()),
        None => Output::Unusable("its answer has no text".into()),
    }
}

/// `request` with each `{{after.N}}` inside message content (strings and text parts) and
/// `prompt` replaced by `outputs[N]`. Text put in is never scanned again.
pub fn substitute(endpoint: Endpoint, request: &[u8], outputs: &[String]) -> Result<Bytes, String> {
    let mut v: Value =
        serde_json::from_slice(request).map_err(|e| format!("request is not JSON: {e}"))?;
    let mut changed = false;
    match endpoint {
        Endpoint::Chat => {
            if let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) {
                for m in messages {
                    match m.get_mut("content") {
                        Some(Value::String(s)) => changed |= fill(s, outputs),
                        Some(Value::Array(parts)) => {
                            for p in parts {
                                if p.get("type").and_then(Value::as_str) == Some("text") {
                                    if let Some(Value::String(s)) = p.get_mut("text") {
                                        changed |= fill(s, outputs);
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Endpoint::Completions => match v.get_mut("prompt") {
            Some(Value::String(s)) => changed |= fill(s, outputs),
            Some(Value::Array(items)) => {
                for item in items {
                    if let Value::String(s) = item {
                        changed |= fill(s, outputs);
                    }
                }
            }
            _ => {}
        },
        Endpoint::Embeddings => {}
    }
    if !changed {
        return Ok(Bytes::copy_from_slice(request));
    }
    serde_json::to_vec(&v)
        .map(Bytes::from)
        .map_err(|e| format!("cannot write the request: {e}"))
}

/// Replaces `{{after.N}}` in `s` (one pass, left to right); whether anything changed.
fn fill(s: &mut String, outputs: &[String]) -> bool {
    if !s.contains("{{after.") {
        return false;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    let mut changed = false;
    while let Some(i) = rest.find("{{after.") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 8..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n = tail[..digits].parse::<usize>().ok();
        match (
            n.and_then(|n| outputs.get(n)),
            tail[digits..].starts_with("}}"),
        ) {
            (Some(text), true) => {
                out.push_str(text);
                changed = true;
                rest = &tail[digits + 2..];
            }
            _ => {
                out.push_str("{{after.");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    *s = out;
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parents_text_goes_into_content_and_prompt_only() {
        let parent = "say \"hi\"\nthen {{after.0}} — ünïcode ✓".to_string();
        let req = br#"{"model":"{{after.0}}","messages":[{"role":"user","content":"use: {{after.0}}!"},{"role":"user","content":[{"type":"text","text":"[{{after.0}}]"},{"type":"image_url","image_url":{"url":"{{after.0}}"}}]}],"tools":[{"x":"{{after.0}}"}]}"#;
        let out = substitute(Endpoint::Chat, req, std::slice::from_ref(&parent)).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "{{after.0}}");
        assert_eq!(v["messages"][0]["content"], format!("use: {parent}!"));
        assert_eq!(
            v["messages"][1]["content"][0]["text"],
            format!("[{parent}]")
        );
        assert_eq!(
            v["messages"][1]["content"][1]["image_url"]["url"],
            "{{after.0}}"
        );
        assert_eq!(v["tools"][0]["x"], "{{after.0}}");
        // One pass: the parent's own "{{after.0}}" was not replaced again.
        assert!(v["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("then {{after.0}}"));
        let out = substitute(
            Endpoint::Completions,
            br#"{"prompt":["a {{after.1}} b","{{after.0}}{{after.9}}"]}"#,
            &["x".into(), "y".into()],
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["prompt"][0], "a y b");
        assert_eq!(v["prompt"][1], "x{{after.9}}");
    }

    #[test]
    fn outputs_are_read_from_answers() {
        let chat = br#"{"choices":[{"message":{"content":"done"},"finish_reason":"stop"}]}"#;
        assert_eq!(output(Endpoint::Chat, chat), Output::Text("done".into()));
        let cut = br#"{"choices":[{"message":{"content":"do"},"finish_reason":"length"}]}"#;
        assert!(matches!(output(Endpoint::Chat, cut), Output::Unusable(_)));
        let none = br#"{"choices":[{"message":{"content":null}}]}"#;
        assert!(matches!(output(Endpoint::Chat, none), Output::Unusable(_)));
        let text = br#"{"choices":[{"text":"t"}]}"#;
        assert_eq!(
            output(Endpoint::Completions, text),
            Output::Text("t".into())
        );
    }
}
