//! Fuzzing on stable Rust: random and structure-aware inputs for the parsers that read
//! what others wrote (registry.yaml, request bodies, SSE streams, Retry-After, traces,
//! Ollama's bodies and streams translated both ways, and uploads read as they come).
//!
//! `cargo test --test fuzz` runs a short, fixed-seed pass of every target (CI);
//! `scripts/fuzz.sh SECONDS` runs each target that long in release mode. Environment:
//! `LABROUTER_FUZZ_SECONDS=N` runs each target for N seconds on a fresh seed;
//! `LABROUTER_FUZZ_SEED=S LABROUTER_FUZZ_CASE=I` replays the one input a panic named.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "fuzz/grammar.rs"]
mod grammar;
#[path = "fuzz/harness.rs"]
mod harness;
#[path = "fuzz/multipart.rs"]
mod multipart;
#[path = "fuzz/ollama.rs"]
mod ollama;
#[path = "fuzz/parsers.rs"]
mod parsers;
#[path = "fuzz/registry.rs"]
mod registry;
#[path = "fuzz/replay.rs"]
mod replay;
#[path = "fuzz/request.rs"]
mod request;
#[path = "fuzz/sse.rs"]
mod sse;

use harness::fuzz;

#[test]
fn fuzz_registry() {
    registry::extremes();
    fuzz("registry", 600, registry::target);
}

#[test]
fn fuzz_request() {
    request::extremes();
    fuzz("request", 10_000, request::target);
}

#[test]
fn fuzz_sse_tail() {
    fuzz("sse_tail", 30_000, sse::target);
}

#[test]
fn fuzz_parsers() {
    fuzz("parsers", 30_000, parsers::target);
}

#[test]
fn fuzz_replay() {
    replay::extremes();
    fuzz("replay", 2_000, replay::target);
}

#[test]
fn fuzz_ollama() {
    ollama::extremes();
    fuzz("ollama", 6_000, ollama::target);
}

#[test]
fn fuzz_multipart() {
    fuzz("multipart", 20_000, multipart::target);
}
