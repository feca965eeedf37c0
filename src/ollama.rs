//! Ollama's API in front (docs/api.md "The Ollama endpoints"): Ollama clients reach the whole lab
//! through the same route decision, chain walk, breakers and classification as OpenAI clients.
//!
//! - [`translate`]: Ollama requests read and turned into OpenAI requests; OpenAI answers
//!   (whole, or SSE chunk by chunk) turned back into Ollama's.
//! - [`capabilities()`]: what a model can do, in Ollama's words, from the registry and
//!   what its machine reports ([`Report`]).
//! - [`digest()`]: a name's digest on `/api/tags`, a hash of what the name maps to.
//! - [`resolve`], [`untagged`]: names read as Ollama's clients write them (`:latest`).

mod capabilities;
mod digest;
mod front;
mod names;
pub mod translate;

pub use capabilities::{auto_capabilities, capabilities, Report};
pub use digest::digest;
pub use front::Ollama;
pub use names::{resolve, resolve_any, untagged};

pub use crate::outcome::Call;
