//! OpenAI's `/v1/embeddings` answer: one embedding per input, as floats or as base64 (what
//! the openai SDK asks for unless told otherwise), with usage; an input of another shape is
//! refused naming the field, as OpenAI refuses it.

use base64::Engine as _;
use serde_json::{json, Value};

/// The vector every embedding is (the same as Ollama's routes answer).
const VECTOR: [f64; 3] = [0.1, 0.2, 0.3];

/// A request field that is not what OpenAI accepts: which field, and what is wrong with it.
#[derive(Debug, PartialEq)]
pub(super) struct Invalid {
    pub(super) param: &'static str,
    pub(super) message: String,
}

impl Invalid {
    fn input(message: &str) -> Invalid {
        Invalid {
            param: "input",
            message: format!("'input' {message}"),
        }
    }
}

/// The answer to an embeddings request for `model`, or what is wrong with the request.
pub(super) fn answer(model: &str, request: &Value) -> Result<Value, Invalid> {
    let inputs = inputs(request.get("input"))?;
    let base64 = match request.get("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(other) => {
            return Err(Invalid {
                param: "encoding_format",
                message: format!("'encoding_format' must be 'float' or 'base64', not {other}"),
            })
        }
    };
    let data: Vec<Value> = (0..inputs)
        .map(|i| json!({"object":"embedding","index":i,"embedding":vector(base64)}))
        .collect();
    Ok(json!({"object":"list","data":data,"model":model,
        "usage":{"prompt_tokens":inputs,"total_tokens":inputs}}))
}

/// How many inputs `input` holds: a text, a list of texts, one token list, or a list of
/// token lists; never empty.
fn inputs(input: Option<&Value>) -> Result<usize, Invalid> {
    let tokens = |v: &Value| v.as_array().is_some_and(|t| t.iter().all(Value::is_u64));
    let items = match input {
        None | Some(Value::Null) => return Err(Invalid::input("is required")),
        Some(Value::String(_)) => return Ok(1),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Invalid::input(SHAPE)),
    };
    if items.is_empty() {
        return Err(Invalid::input("must not be empty"));
    }
    if items.iter().all(Value::is_u64) {
        return Ok(1);
    }
    if items.iter().all(Value::is_string) || items.iter().all(tokens) {
        return Ok(items.len());
    }
    Err(Invalid::input(SHAPE))
}

/// What an input must be, said when it is not.
const SHAPE: &str =
    "must be a string, a list of strings, a list of token ids, or a list of token id lists";

/// One embedding: the floats, or base64 of their little-endian f32 bytes.
fn vector(base64: bool) -> Value {
    if !base64 {
        return json!(VECTOR);
    }
    let bytes: Vec<u8> = VECTOR
        .iter()
        .flat_map(|&x| (x as f32).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD
        .encode(bytes)
        .into()
}
