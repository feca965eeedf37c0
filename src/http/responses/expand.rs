//! A Responses request read as one turn of a conversation, and the conversation labrouter
//! keeps put in front of it: every earlier turn's input and output items once, oldest
//! first, then this turn's input, with no `previous_response_id` — so any machine can
//! continue it. Pure: the store read is the caller's.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::http::error::{AppError, Code};

/// One request to `/v1/responses`, as far as conversations go.
#[derive(Debug)]
pub struct Turn {
    /// The body as the client sent it.
    bytes: Bytes,
    obj: Map<String, Value>,
    /// `previous_response_id`, as sent.
    pub previous: Option<String>,
    /// `store`: `false` asks that the Response not be kept.
    pub store: bool,
    /// This turn's own input items (a string input is one user message item).
    pub input: Value,
}

fn bad(message: impl Into<String>) -> AppError {
    AppError::new(Code::InvalidJson, message)
}

impl Turn {
    pub fn read(bytes: &Bytes) -> Result<Turn, AppError> {
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("request body is not a valid JSON object: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(bad(
                "request body is not a valid JSON object: expected '{' first",
            ));
        };
        let previous = match obj.get("previous_response_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("'previous_response_id' must be a string")),
        };
        let store = match obj.get("store") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("'store' must be true or false")),
        };
        let input = match obj.get("input") {
            Some(Value::String(s)) => json!([{"type": "message", "role": "user", "content": s}]),
            Some(Value::Array(items)) => Value::Array(items.clone()),
            None => Value::Array(Vec::new()),
            Some(_) => return Err(bad("'input' must be a string or a list of input items")),
        };
        Ok(Turn {
            bytes: bytes.clone(),
            obj,
            previous,
            store,
            input,
        })
    }

    /// What to send: the body as it came when `earlier` is `None`; otherwise with the kept
    /// conversation in `input` (each earlier turn's input, then its output items, oldest
    /// first) and no `previous_response_id`. Reasoning items are left out: another model
    /// cannot read them. Over `max_body` the request is refused with 413.
    pub fn body(
        &self,
        earlier: Option<Vec<(String, String)>>,
        max_body: usize,
    ) -> Result<Bytes, AppError> {
        let Some(turns) = earlier else {
            return Ok(self.bytes.clone());
        };
        let mut items = Vec::new();
        for (input, output) in &turns {
            for text in [input, output] {
                if let Ok(Value::Array(got)) = serde_json::from_str::<Value>(text) {
                    items.extend(got.into_iter().filter(|i| i["type"] != "reasoning"));
                }
            }
        }
        items.extend(self.input.as_array().into_iter().flatten().cloned());
        let mut obj = self.obj.clone();
        obj.remove("previous_response_id");
        obj.insert("input".into(), Value::Array(items));
        let out = serde_json::to_vec(&obj).map_err(|e| bad(e.to_string()))?;
        if out.len() > max_body {
            return Err(AppError::new(
                Code::RequestTooLarge,
                format!(
                    "with its conversation expanded, the request is {} bytes, larger than server.max_body ({max_body} bytes)",
                    out.len()
                ),
            ));
        }
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(body: Value) -> Turn {
        Turn::read(&Bytes::from(body.to_string())).unwrap()
    }

    #[test]
    fn a_string_input_is_one_user_message_item() {
        let t = turn(json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}));
        assert_eq!(
            t.input,
            json!([{"type": "message", "role": "user", "content": "hi"}])
        );
        assert_eq!(t.previous.as_deref(), Some("resp_1"));
        assert!(t.store);
        assert!(!turn(json!({"input": "x", "store": false})).store);
    }

    #[test]
    fn a_kept_conversation_goes_in_front_once_oldest_first_without_the_id() {
        let t = turn(
            json!({"model": "m", "input": "third", "previous_response_id": "resp_2", "stream": true}),
        );
        let earlier = vec![
            (
                json!([{"type": "message", "role": "user", "content": "first"}]).to_string(),
                json!([{"type": "reasoning", "id": "rs_1"}, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]}]).to_string(),
            ),
            (
                json!([{"type": "message", "role": "user", "content": "second"}]).to_string(),
                json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two"}]}]).to_string(),
            ),
        ];
        let body: Value = serde_json::from_slice(&t.body(Some(earlier), 1 << 20).unwrap()).unwrap();
        assert!(body.get("previous_response_id").is_none());
        assert_eq!(body["stream"], true, "the rest as sent");
        let texts: Vec<String> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i["content"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| i["content"][0]["text"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(texts, ["first", "one", "second", "two", "third"]);
    }

    #[test]
    fn a_body_not_continued_is_sent_byte_for_byte() {
        let raw = Bytes::from_static(br#"{ "input" : "hi",  "model":"m" }"#);
        let t = Turn::read(&raw).unwrap();
        assert_eq!(t.body(None, 1 << 20).unwrap(), raw);
    }

    #[test]
    fn a_conversation_too_large_once_expanded_is_413_and_bad_fields_400() {
        let t = turn(json!({"input": "x", "previous_response_id": "r"}));
        let big = vec![(
            json!([{"content": "y".repeat(2000)}]).to_string(),
            "[]".to_string(),
        )];
        let e = t.body(Some(big), 1000).unwrap_err();
        assert_eq!(e.code, Code::RequestTooLarge);
        assert!(e.message.contains("server.max_body"), "{e}");
        for body in [
            json!({"input": 3}),
            json!({"input": "x", "store": "no"}),
            json!({"previous_response_id": 1}),
        ] {
            let e = Turn::read(&Bytes::from(body.to_string())).unwrap_err();
            assert_eq!(e.code, Code::InvalidJson, "{body}");
        }
        assert!(Turn::read(&Bytes::from_static(b"[1]")).is_err());
    }
}
