//! The bot, the chat and the redactor: the only place that talks to Telegram. One attempt
//! at one message (a text with `sendMessage`, a photo with `sendPhoto` as multipart), its
//! error sorted into wait-as-asked, worth-another-try and refused-for-good, redacted.

use teloxide::payloads::{SendMessageSetters, SendPhotoSetters};
use teloxide::requests::Requester;
use teloxide::types::{ChatId, InputFile, ParseMode};
use teloxide::{ApiError, Bot, RequestError};

use super::message::Body;
use crate::telegram::redact::Redactor;

/// Why one send did not go through; texts are already redacted.
#[derive(Clone, Debug, PartialEq)]
pub enum SendError {
    /// Telegram's flood control: wait this long, then the same message again.
    RetryAfter(std::time::Duration),
    /// Network trouble, a 5xx, an unparsable answer: worth another try.
    Transient(String),
    /// Telegram refused the message or the bot for good (bad token, unknown chat).
    Permanent(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::RetryAfter(d) => write!(f, "Telegram asked to retry after {}s", d.as_secs()),
            SendError::Transient(e) | SendError::Permanent(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SendError {}

#[derive(Clone)]
pub struct Client {
    bot: Bot,
    chat: ChatId,
    redactor: Redactor,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Bot's own Debug prints the token.
        write!(f, "Client(chat {}, token <redacted>)", self.chat)
    }
}

impl Client {
    pub fn new(bot: Bot, chat: i64, redactor: Redactor) -> Client {
        Client {
            bot,
            chat: ChatId(chat),
            redactor,
        }
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// One attempt at one text message (HTML).
    pub async fn send(&self, text: &str) -> Result<(), SendError> {
        let sent = self
            .bot
            .send_message(self.chat, text)
            .parse_mode(ParseMode::Html)
            .await;
        sent.map(|_| ()).map_err(|e| self.classify(e))
    }

    /// One attempt at one photo: the PNG as a multipart upload with a plain caption. The
    /// bytes are shared, not copied or rendered again, on every attempt.
    pub async fn send_photo(&self, png: &bytes::Bytes, caption: &str) -> Result<(), SendError> {
        let file = InputFile::memory(png.clone()).file_name("digest.png");
        let sent = self.bot.send_photo(self.chat, file).caption(caption).await;
        sent.map(|_| ()).map_err(|e| self.classify(e))
    }

    /// One attempt at whatever `body` is.
    pub async fn send_body(&self, body: &Body) -> Result<(), SendError> {
        match body {
            Body::Text(text) => self.send(text).await,
            Body::Photo { png, caption } => self.send_photo(png, caption).await,
        }
    }

    fn classify(&self, e: RequestError) -> SendError {
        let text = self.redactor.error(&e);
        match e {
            RequestError::RetryAfter(s) => SendError::RetryAfter(s.duration()),
            RequestError::Network(_) | RequestError::InvalidJson { .. } | RequestError::Io(_) => {
                SendError::Transient(text)
            }
            // An unrecognised description is often a 5xx from Telegram or a proxy.
            RequestError::Api(ApiError::Unknown(_)) => SendError::Transient(text),
            RequestError::Api(_) | RequestError::MigrateToChatId(_) => SendError::Permanent(text),
        }
    }
}
