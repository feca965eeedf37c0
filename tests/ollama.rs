//! Ollama's API in front (docs/api.md "The Ollama endpoints"), end to end: a real router on 127.0.0.1 with an Ollama
//! server on the GPU box and OpenAI-only servers on the CPU box and local. The wire is the
//! witness: tests count what reached each machine, and on which path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "ollama/cards.rs"]
mod cards;
#[path = "ollama/load.rs"]
mod load;
#[path = "ollama/meta.rs"]
mod meta;
#[path = "ollama/translated.rs"]
mod translated;
#[path = "ollama/version.rs"]
mod version;
#[path = "ollama/work.rs"]
mod work;

use serde_json::Value;

/// Every NDJSON line of a body, parsed; panics on a line that is not JSON.
pub fn lines(body: &str) -> Vec<Value> {
    assert!(
        body.ends_with('\n'),
        "NDJSON ends each line with a newline: {body:?}"
    );
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in {body:?}")))
        .collect()
}

/// The concatenated `message.content` (chat) or `response` (generate) of NDJSON lines.
pub fn text_of(lines: &[Value]) -> String {
    lines
        .iter()
        .filter_map(|l| {
            l["message"]["content"]
                .as_str()
                .or_else(|| l["response"].as_str())
        })
        .collect()
}
