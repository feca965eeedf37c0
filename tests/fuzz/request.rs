//! Target 2: `Parsed::new` on request bodies, and `body_for`'s `model` rewrite.

use arbitrary::Unstructured;
use bytes::Bytes;
use labrouter::request::Parsed;
use labrouter::upstream::Endpoint;
use serde_json::Value;

use super::harness::{accepted, nasty, one_in, pick, show, NASTY};

type R<T> = arbitrary::Result<T>;

/// Whitespace JSON allows between tokens, mostly none.
fn ws(u: &mut Unstructured<'_>, out: &mut String) -> R<()> {
    if one_in(u, 4)? {
        out.push_str(pick(u, &[" ", "\n", "\t", "\r\n  ", "   "])?);
    }
    Ok(())
}

/// A JSON string literal for `v`, escaped in one of the ways JSON allows.
pub fn string(u: &mut Unstructured<'_>, v: &str, out: &mut String) -> R<()> {
    let style = u.int_in_range(0..=3)?;
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            '/' if style == 1 => out.push_str("\\/"),
            c if style == 2 || (style == 3 && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    // Now and then a lone surrogate escape, which JSON text may carry but no string holds.
    if style == 3 && one_in(u, 16)? {
        out.push_str("\\ud800");
    }
    out.push('"');
    Ok(())
}

fn text(u: &mut Unstructured<'_>) -> R<String> {
    Ok(if u.arbitrary()? {
        (*pick(
            u,
            &[
                "write a rust function",
                "what is in this image?",
                "hello",
                "",
                "ünïcode ✓",
                "a\"b\\c",
                "line\nbreak",
                "[DONE]",
            ],
        )?)
        .to_string()
    } else {
        nasty(u)?
    })
}

fn scalar(u: &mut Unstructured<'_>, out: &mut String) -> R<()> {
    match u.int_in_range(0..=5)? {
        0 => {
            let t = text(u)?;
            string(u, &t, out)?;
        }
        1 => out.push_str(pick(u, &["true", "false", "null"])?),
        2 => out.push_str(pick(
            u,
            &[
                "0",
                "-1",
                "1.5",
                "1e309",
                "-0",
                "18446744073709551616",
                "1E-400",
                "123456789012345678901234567890",
            ],
        )?),
        3 => out.push_str(&u.arbitrary::<i64>()?.to_string()),
        4 => out.push_str(&u.arbitrary::<f64>()?.to_string()),
        _ => out.push_str(pick(u, NASTY)?),
    }
    Ok(())
}

/// Any JSON-ish value, up to `depth` levels of nesting.
pub fn value(u: &mut Unstructured<'_>, depth: u32, out: &mut String) -> R<()> {
    match if depth == 0 {
        0
    } else {
        u.int_in_range(0..=4)?
    } {
        0..=2 => scalar(u, out)?,
        3 => {
            out.push('[');
            let n = u.int_in_range(0..=3)?;
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(u, out)?;
                value(u, depth - 1, out)?;
            }
            out.push(']');
        }
        _ => {
            let n = u.int_in_range(0..=3)?;
            let entries = (0..n)
                .map(|_| {
                    let key = (*pick(u, &["a", "type", "text", "model", "role", "content", "k"])?)
                        .to_string();
                    let mut v = String::new();
                    value(u, depth - 1, &mut v)?;
                    Ok((key, v))
                })
                .collect::<R<Vec<_>>>()?;
            object(u, &entries, out)?;
        }
    }
    Ok(())
}

pub fn object(u: &mut Unstructured<'_>, entries: &[(String, String)], out: &mut String) -> R<()> {
    out.push('{');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        ws(u, out)?;
        string(u, k, out)?;
        ws(u, out)?;
        out.push(':');
        ws(u, out)?;
        out.push_str(v);
        ws(u, out)?;
    }
    out.push('}');
    Ok(())
}

fn content(u: &mut Unstructured<'_>, out: &mut String) -> R<()> {
    match u.int_in_range(0..=3)? {
        0 | 1 => {
            let t = text(u)?;
            string(u, &t, out)
        }
        2 => {
            let n = u.int_in_range(0..=3)?;
            let mut parts = Vec::new();
            for _ in 0..n {
                let mut p = String::new();
                if u.arbitrary()? {
                    let t = text(u)?;
                    let mut ts = String::new();
                    string(u, &t, &mut ts)?;
                    object(
                        u,
                        &[("type".into(), "\"text\"".into()), ("text".into(), ts)],
                        &mut p,
                    )?;
                } else {
                    let kind = *pick(
                        u,
                        &[
                            "\"image_url\"",
                            "\"input_image\"",
                            "\"image\"",
                            "\"audio\"",
                            "null",
                            "5",
                        ],
                    )?;
                    object(
                        u,
                        &[
                            ("type".into(), kind.into()),
                            (
                                "image_url".into(),
                                "{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}".into(),
                            ),
                        ],
                        &mut p,
                    )?;
                }
                parts.push(p);
            }
            out.push('[');
            out.push_str(&parts.join(","));
            out.push(']');
            Ok(())
        }
        _ => value(u, 3, out),
    }
}

/// A request body: mostly a JSON object with the keys clients send.
fn body(u: &mut Unstructured<'_>) -> R<Vec<u8>> {
    if one_in(u, 8)? {
        return Ok(u.bytes(u.len())?.to_vec());
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    let keys = [
        "model",
        "messages",
        "prompt",
        "input",
        "stream",
        "temperature",
        "max_tokens",
        "tools",
        "user",
        "Model",
        "modèle",
    ];
    let n = u.int_in_range(0..=7)?;
    for i in 0..n {
        let key = if i == 0 && u.arbitrary()? {
            "messages".to_string()
        } else if one_in(u, 10)? {
            nasty(u)?
        } else {
            (*pick(u, &keys)?).to_string()
        };
        // Duplicate keys now and then: serde rejects them for the fields it reads.
        if entries.iter().any(|(k, _)| *k == key) && !one_in(u, 8)? {
            continue;
        }
        let mut v = String::new();
        match key.as_str() {
            "model" if u.int_in_range(0..=5)? > 0 => {
                let t = if u.arbitrary()? {
                    (*pick(u, &["auto", "code", "gpt-4o", "qwen3:4b", ""])?).to_string()
                } else {
                    nasty(u)?
                };
                string(u, &t, &mut v)?;
            }
            "messages" if u.int_in_range(0..=5)? > 0 => {
                v.push('[');
                let m = u.int_in_range(0..=4)?;
                for i in 0..m {
                    if i > 0 {
                        v.push(',');
                    }
                    let role = *pick(
                        u,
                        &[
                            "\"user\"",
                            "\"system\"",
                            "\"assistant\"",
                            "\"tool\"",
                            "null",
                            "1",
                            "\"USER\"",
                        ],
                    )?;
                    let mut c = String::new();
                    content(u, &mut c)?;
                    let mut fields = vec![
                        ("role".to_string(), role.to_string()),
                        ("content".to_string(), c),
                    ];
                    if one_in(u, 6)? {
                        fields.push(("content".into(), "\"again\"".into()));
                    }
                    if one_in(u, 6)? {
                        fields.swap(0, 1);
                    }
                    object(u, &fields, &mut v)?;
                }
                v.push(']');
            }
            "stream" if u.arbitrary()? => v.push_str(pick(u, &["true", "false"])?),
            "prompt" | "input" if u.arbitrary()? => {
                if u.arbitrary()? {
                    let t = text(u)?;
                    string(u, &t, &mut v)?;
                } else {
                    v.push('[');
                    let m = u.int_in_range(0..=3)?;
                    for i in 0..m {
                        if i > 0 {
                            v.push(',');
                        }
                        scalar(u, &mut v)?;
                    }
                    v.push(']');
                }
            }
            _ => value(u, 4, &mut v)?,
        }
        entries.push((key, v));
    }
    let mut out = String::new();
    if one_in(u, 10)? {
        out.push_str(pick(u, &[" ", "\n", "\u{feff}", "[", "\"x\"", "1"])?);
    }
    match u.int_in_range(0..=15)? {
        // Top-level arrays of values, which no client sends.
        0 => {
            out.push('[');
            let vs: Vec<&str> = entries.iter().map(|(_, v)| v.as_str()).collect();
            out.push_str(&vs.join(","));
            out.push(']');
        }
        _ => object(u, &entries, &mut out)?,
    }
    if one_in(u, 10)? {
        out.push_str(pick(u, &[" ", "\n", "}", "{}", ",", "x"])?);
    }
    let mut bytes = out.into_bytes();
    if one_in(u, 8)? && !bytes.is_empty() {
        let i = u.int_in_range(0..=bytes.len() - 1)?;
        match u.int_in_range(0..=2)? {
            0 => bytes[i] = u.arbitrary()?,
            1 => {
                bytes.remove(i);
            }
            _ => bytes.insert(i, *pick(u, b"{}[]\",:\\ \x00\xff")?),
        }
    }
    Ok(bytes)
}

pub fn backend(u: &mut Unstructured<'_>) -> R<String> {
    Ok(match u.int_in_range(0..=2)? {
        0 => (*pick(
            u,
            &[
                "qwen3:4b",
                "a\"b",
                "back\\slash",
                "\\\"",
                "\u{0}",
                "\u{2028}",
                "名前",
                "",
                "\"}",
                "model\":1,\"x",
            ],
        )?)
        .to_string(),
        1 => nasty(u)?,
        _ => u.arbitrary()?,
    })
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    let endpoint = *pick(
        u,
        &[Endpoint::Chat, Endpoint::Completions, Endpoint::Embeddings],
    )?;
    let body = body(u)?;
    show("body", &String::from_utf8_lossy(&body));
    let Ok(parsed) = Parsed::new(endpoint, Bytes::from(body.clone())) else {
        return Ok(());
    };
    accepted();
    show("model", &parsed.model);
    let original: Option<Value> = serde_json::from_slice(&body).ok();
    if let Some(v) = &original {
        assert!(
            v.is_object(),
            "accepted a body that is not a JSON object: {v}"
        );
        assert_eq!(
            v.get("model").and_then(Value::as_str),
            parsed.model.as_deref()
        );
    }
    for b in [backend(u)?, backend(u)?] {
        show("backend", &b);
        let out = parsed.body_for(&b);
        show("body_for", &String::from_utf8_lossy(&out));
        // Read back as the router reads a body: same request, model rewritten.
        let again = match Parsed::new(endpoint, out.clone()) {
            Ok(p) => p,
            Err(e) => panic!(
                "body_for({b:?}) is not a readable body ({e}): {}",
                String::from_utf8_lossy(&out)
            ),
        };
        assert_eq!(again.model.as_deref(), Some(b.as_str()));
        assert_eq!(again.stream, parsed.stream);
        assert_eq!(again.text, parsed.text);
        assert_eq!(again.has_image, parsed.has_image);
        // And as JSON: every other top-level key unchanged.
        if let Some(Value::Object(before)) = &original {
            let after: Value = match serde_json::from_slice(&out) {
                Ok(v) => v,
                Err(e) => panic!(
                    "body_for({b:?}) is not JSON ({e}): {}",
                    String::from_utf8_lossy(&out)
                ),
            };
            let Value::Object(mut after) = after else {
                panic!("body_for gave a non-object")
            };
            assert_eq!(after.remove("model"), Some(Value::String(b.clone())));
            let mut before = before.clone();
            before.remove("model");
            assert_eq!(after, before, "keys other than model changed");
        }
    }
    Ok(())
}

/// Bodies the generator makes rarely: deep nesting, huge strings, every model spelling.
pub fn extremes() {
    let deep = format!(
        "{{\"messages\": [], \"x\": {}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let long = format!(
        "{{\"model\": \"{}\", \"messages\": []}}",
        "\\u00e9".repeat(100_000)
    );
    for body in [
        deep,
        long,
        "{\"model\":null,\"messages\":[]}".into(),
        " {} ".into(),
    ] {
        for endpoint in [Endpoint::Chat, Endpoint::Completions, Endpoint::Embeddings] {
            if let Ok(p) = Parsed::new(endpoint, Bytes::from(body.clone())) {
                let again =
                    Parsed::new(endpoint, p.body_for("b\"\\")).expect("rewritten body reads");
                assert_eq!(again.model.as_deref(), Some("b\"\\"));
            }
        }
    }
}
