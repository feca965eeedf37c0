//! What work a model does — and so which endpoints may send to it. A model that does not
//! say is a chat model that also serves embeddings, as every model was before kinds.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Chat completions, completions, Responses (and embeddings, when no kind was written).
    Chat,
    /// Embeddings.
    Embed,
    /// Image generation, edits and variations.
    Image,
    /// Speech to text: transcriptions and translations.
    Transcribe,
    /// Text to speech.
    Speech,
    /// Reranking documents against a query.
    Rerank,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Chat,
        Kind::Embed,
        Kind::Image,
        Kind::Transcribe,
        Kind::Speech,
        Kind::Rerank,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::Embed => "embed",
            Kind::Image => "image",
            Kind::Transcribe => "transcribe",
            Kind::Speech => "speech",
            Kind::Rerank => "rerank",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a model of this kind serves an endpoint that needs `needed`: its own kind,
    /// and embeddings for a chat model (every model served them before kinds).
    pub fn serves(self, needed: Kind) -> bool {
        self == needed || (self == Kind::Chat && needed == Kind::Embed)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn kinds_parse_back_and_a_chat_model_also_embeds() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
        assert_eq!(Kind::parse("vision"), None);
        assert!(Kind::Chat.serves(Kind::Embed));
        assert!(!Kind::Embed.serves(Kind::Chat));
        assert!(!Kind::Image.serves(Kind::Chat));
    }
}
