//! What waits in the outbox: a text or a photo, when it was queued, and its share of the
//! outbox's byte budget, given back when the message leaves the queue (sent or dropped).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::time::Instant;

/// Telegram's limit on a photo's caption, in characters.
pub const CAPTION_MAX: usize = 1024;

/// What is sent.
#[derive(Clone, Debug)]
pub enum Body {
    /// HTML parse mode text, already under the length limit.
    Text(String),
    /// A PNG, rendered once: every retry sends these same bytes. The caption is plain text.
    Photo { png: bytes::Bytes, caption: String },
}

impl Body {
    /// The bytes it holds in memory while it waits.
    pub fn size(&self) -> usize {
        match self {
            Body::Text(t) => t.len(),
            Body::Photo { png, caption } => png.len() + caption.len(),
        }
    }
}

/// One message waiting to go out.
#[derive(Clone, Debug)]
pub struct Message {
    pub body: Body,
    /// What it is, for log lines (`alert`, `page`, `digest`, `digest photo`).
    pub what: &'static str,
    /// When it was queued (tokio's clock: the age check follows paused-clock tests).
    pub queued: Instant,
    /// A `meta` entry the store writes once this message is delivered (the digest's last
    /// send time).
    pub remember: Option<(String, String)>,
    /// Its bytes in the outbox's budget while queued; shared by clones, given back when the
    /// last one is gone.
    pub(super) held: Option<Arc<Held>>,
}

impl Message {
    /// A text message.
    pub fn new(what: &'static str, text: String) -> Message {
        Message {
            body: Body::Text(text),
            what,
            queued: Instant::now(),
            remember: None,
            held: None,
        }
    }

    /// A photo with its caption (cut to Telegram's 1,024 characters).
    pub fn photo(what: &'static str, png: Vec<u8>, caption: &str) -> Message {
        let caption = caption.chars().take(CAPTION_MAX).collect();
        Message {
            body: Body::Photo {
                png: bytes::Bytes::from(png),
                caption,
            },
            ..Message::new(what, String::new())
        }
    }

    /// The text, for a text message.
    pub fn text(&self) -> Option<&str> {
        match &self.body {
            Body::Text(t) => Some(t),
            Body::Photo { .. } => None,
        }
    }

    pub fn is_photo(&self) -> bool {
        matches!(self.body, Body::Photo { .. })
    }
}

/// Bytes taken from a budget, given back on drop.
#[derive(Debug)]
pub(super) struct Held {
    budget: Arc<AtomicUsize>,
    bytes: usize,
}

impl Held {
    /// Takes `bytes` from `budget` (bytes in use) when the total stays within `max`.
    pub(super) fn take(budget: &Arc<AtomicUsize>, bytes: usize, max: usize) -> Option<Held> {
        budget
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= max)
            })
            .ok()
            .map(|_| Held {
                budget: Arc::clone(budget),
                bytes,
            })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}
