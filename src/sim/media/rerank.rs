//! Rerank (`/v1/rerank`, `/v1/reranking`, `/rerank`, as llama-server, vLLM and Jina answer
//! it): a score per document — the share of the query's words it holds — best first,
//! `top_n` of them, with the documents' texts when `return_documents` asks.

use serde_json::{json, Value};

use super::{refuse, Refusal};

/// The answer to a rerank request for `model`: `query` and `documents` are required.
pub(super) fn answer(model: &str, request: &Value) -> Result<Value, Refusal> {
    let query = match request.get("query") {
        Some(Value::String(q)) if !q.trim().is_empty() => q.as_str(),
        _ => return refuse("query", "'query' is required: a non-empty string"),
    };
    let documents = documents(request.get("documents"))?;
    let top_n = match request.get("top_n") {
        None | Some(Value::Null) => documents.len(),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => return refuse("top_n", "'top_n' must be a whole number of at least 1"),
        },
    };
    let with_text = request.get("return_documents") == Some(&Value::Bool(true));
    let words = words(query);
    let mut scored: Vec<(usize, f64)> = documents
        .iter()
        .enumerate()
        .map(|(i, d)| (i, score(&words, d)))
        .collect();
    // Best first; equal scores keep the documents' order.
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let results: Vec<Value> = scored
        .into_iter()
        .take(top_n)
        .map(|(i, s)| match with_text {
            true => json!({"index": i, "relevance_score": s, "document": {"text": documents[i]}}),
            false => json!({"index": i, "relevance_score": s}),
        })
        .collect();
    let tokens = words.len() + documents.iter().map(|d| words_of(d).count()).sum::<usize>();
    Ok(
        json!({"id": format!("rerank-{}", super::created()), "object": "list",
        "model": model, "results": results,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
}

/// The documents' texts: strings, or objects with a `text`; a non-empty list.
fn documents(value: Option<&Value>) -> Result<Vec<&str>, Refusal> {
    const SHAPE: &str = "'documents' must be a non-empty list of strings or of {\"text\": ...}";
    let Some(Value::Array(items)) = value else {
        return refuse("documents", SHAPE);
    };
    if items.is_empty() {
        return refuse("documents", SHAPE);
    }
    items
        .iter()
        .map(|d| match d {
            Value::String(s) => Ok(s.as_str()),
            _ => match d.get("text") {
                Some(Value::String(s)) => Ok(s.as_str()),
                _ => refuse("documents", SHAPE),
            },
        })
        .collect()
}

/// The lowercase words of a text.
fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The query's distinct words.
fn words(query: &str) -> Vec<String> {
    let mut w: Vec<String> = words_of(query).collect();
    w.sort();
    w.dedup();
    w
}

/// The share of `query`'s words that `document` holds, from 0 to 1.
fn score(query: &[String], document: &str) -> f64 {
    if query.is_empty() {
        return 0.0;
    }
    let doc: Vec<String> = words_of(document).collect();
    let held = query.iter().filter(|w| doc.contains(w)).count();
    held as f64 / query.len() as f64
}
