//! Ollama's API in front (SPEC §11): Ollama clients reach the whole lab through the same
//! route decision, chain walk, breakers and classification as OpenAI clients.
//!
//! - [`translate`]: Ollama requests read and turned into OpenAI requests; OpenAI answers
//!   (whole, or SSE chunk by chunk) turned back into Ollama's.

pub mod translate;

/// What an Ollama client called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `POST /api/chat`
    Chat,
    /// `POST /api/generate`
    Generate,
    /// `POST /api/embed`
    Embed,
    /// `POST /api/embeddings` (the older single-vector form)
    Embeddings,
}

impl Call {
    /// The path on an Ollama server.
    pub fn path(self) -> &'static str {
        match self {
            Call::Chat => "/api/chat",
            Call::Generate => "/api/generate",
            Call::Embed => "/api/embed",
            Call::Embeddings => "/api/embeddings",
        }
    }

    /// Whether the call makes vectors (it never streams and never changes model).
    pub fn embeds(self) -> bool {
        matches!(self, Call::Embed | Call::Embeddings)
    }
}
