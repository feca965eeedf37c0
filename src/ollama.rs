//! Ollama's API in front (SPEC §11): Ollama clients reach the whole lab through the same
//! route decision, chain walk, breakers and classification as OpenAI clients.
//!
//! - [`translate`]: Ollama requests read and turned into OpenAI requests; OpenAI answers
//!   (whole, or SSE chunk by chunk) turned back into Ollama's.

mod front;
pub mod translate;

pub use front::Ollama;

pub use crate::outcome::Call;
