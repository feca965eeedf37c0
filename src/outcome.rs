//! The words for what happened, in one place: why a target did not serve ([`Reason`]), the
//! breaker's phase ([`Phase`]), whose fault it was ([`Fault`]), what the breaker records of
//! it ([`Effect`]), and one failed or skipped target as every view renders it
//! ([`Attempted`]). Headers, error bodies, metrics, the ledger, alerts, the digest, the
//! demo's narration and replay all read these types; none of them spells a reason, a phase
//! or a status by hand.
//!
//! `reason.rs` owns the reasons and the skips, `failure.rs` the failures a breaker counts,
//! `attempted.rs` one target's outcome; this file, what an attempt is sent as ([`Endpoint`],
//! [`Call`], [`Wire`]).

mod attempted;
mod envelope;
mod failure;
pub mod ids;
mod kind;
pub mod phase;
mod reason;
pub mod task;
pub mod words;

pub use attempted::{Attempted, Effect, Fault, Held, Unserved};
pub use envelope::Envelope;
pub use failure::{Failure, FailureKind};
pub use ids::{MachineId, ModelId, RouteId};
pub use kind::Kind;
pub use phase::Phase;
pub use reason::{Reason, Skip, UnknownReason};
pub use task::{AttemptOutcome, Delivery, TaskCode, TaskStatus};
pub use words::words;

/// Which OpenAI endpoint a request is for; decides the path, the kind of model it sends
/// to, and what a valid answer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat = 0,
    Completions = 1,
    Embeddings = 2,
    /// The Responses API (`/v1/responses`).
    Responses = 3,
    ImagesGenerations = 4,
    /// Multipart: an image to edit (and a mask).
    ImagesEdits = 5,
    /// Multipart: an image to vary.
    ImagesVariations = 6,
    /// Multipart: audio to text.
    AudioTranscriptions = 7,
    /// Multipart: audio to English text.
    AudioTranslations = 8,
    /// Text to audio: the answer is audio bytes, streamed through.
    AudioSpeech = 9,
    Rerank = 10,
}

impl Endpoint {
    /// Every endpoint, in the order of their discriminants (a machine's URIs are kept so).
    pub const ALL: [Endpoint; 11] = [
        Endpoint::Chat,
        Endpoint::Completions,
        Endpoint::Embeddings,
        Endpoint::Responses,
        Endpoint::ImagesGenerations,
        Endpoint::ImagesEdits,
        Endpoint::ImagesVariations,
        Endpoint::AudioTranscriptions,
        Endpoint::AudioTranslations,
        Endpoint::AudioSpeech,
        Endpoint::Rerank,
    ];

    /// The kind of model this endpoint sends to.
    pub fn kind(self) -> Kind {
        match self {
            Endpoint::Chat | Endpoint::Completions | Endpoint::Responses => Kind::Chat,
            Endpoint::Embeddings => Kind::Embed,
            Endpoint::ImagesGenerations | Endpoint::ImagesEdits | Endpoint::ImagesVariations => {
                Kind::Image
            }
            Endpoint::AudioTranscriptions | Endpoint::AudioTranslations => Kind::Transcribe,
            Endpoint::AudioSpeech => Kind::Speech,
            Endpoint::Rerank => Kind::Rerank,
        }
    }

    /// Whether its body is multipart/form-data (an upload held whole, so the chain can
    /// send it again).
    pub fn uploads(self) -> bool {
        matches!(
            self,
            Endpoint::ImagesEdits
                | Endpoint::ImagesVariations
                | Endpoint::AudioTranscriptions
                | Endpoint::AudioTranslations
        )
    }

    /// The path a client calls on labrouter: `/v1` and [`Endpoint::path`].
    pub fn client_path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Responses => "/v1/responses",
            Endpoint::ImagesGenerations => "/v1/images/generations",
            Endpoint::ImagesEdits => "/v1/images/edits",
            Endpoint::ImagesVariations => "/v1/images/variations",
            Endpoint::AudioTranscriptions => "/v1/audio/transcriptions",
            Endpoint::AudioTranslations => "/v1/audio/translations",
            Endpoint::AudioSpeech => "/v1/audio/speech",
            Endpoint::Rerank => "/v1/rerank",
        }
    }

    /// The path on a machine, after its URL (which ends in `/v1`).
    pub fn path(self) -> &'static str {
        &self.client_path()["/v1".len()..]
    }
}

/// What an Ollama client called (docs/api.md "The Ollama endpoints").
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

/// What one attempt sends to a machine: an OpenAI endpoint (every machine), or an Ollama
/// call (an Ollama server, natively).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi(Endpoint),
    Ollama(Call),
}

impl From<Endpoint> for Wire {
    fn from(e: Endpoint) -> Wire {
        Wire::OpenAi(e)
    }
}
