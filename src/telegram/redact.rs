//! Keeping the bot token out of every log line, error and status output (README "Telegram", README
//! "Safety").
//!
//! reqwest and teloxide errors carry the request URL, and Telegram puts the token in the
//! path (`/bot<TOKEN>/SendMessage`). So every string that leaves this module's callers —
//! a log field, an error returned to the CLI — goes through [`Redactor::redact`] first. It
//! replaces the token itself (plain and percent-encoded) and, as a second line of defence,
//! anything that looks like a token in a Bot API path (`bot<digits>:<secret>`).

use std::fmt;

/// What the token is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Knows the token and scrubs it from text. Its Debug output never shows the token.
#[derive(Clone)]
pub struct Redactor {
    /// The token and the spellings it takes in a URL; empty strings are never matched.
    needles: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor(<redacted>)")
    }
}

impl Redactor {
    pub fn new(token: &str) -> Redactor {
        let mut needles = Vec::new();
        if !token.is_empty() {
            needles.push(token.to_string());
            let encoded = token.replace(':', "%3A");
            if encoded != token {
                needles.push(encoded.clone());
                needles.push(encoded.replace("%3A", "%3a"));
            }
        }
        Redactor { needles }
    }

    /// `text` with the token, and anything shaped like a bot token in a URL, replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), REDACTED);
            }
        }
        scrub_token_shapes(&out)
    }

    /// An error and its sources, one `: ` apart, redacted (a reqwest error names its URL
    /// in the top line and the cause below it).
    pub fn error(&self, e: &(dyn std::error::Error + 'static)) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            let next = s.to_string();
            if !text.contains(&next) {
                text.push_str(": ");
                text.push_str(&next);
            }
            source = s.source();
        }
        self.redact(&text)
    }
}

/// Replaces `bot<digits>:<secret>` (and `bot<digits>%3A<secret>`) after a `/`, however the
/// token got there: a token read from a different variable, a second bot.
fn scrub_token_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/bot") {
        let (head, tail) = rest.split_at(at + 4);
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let after = &tail[digits..];
        let sep = if after.starts_with(':') {
            1
        } else if after.len() >= 3 && after[..3].eq_ignore_ascii_case("%3a") {
            3
        } else {
            0
        };
        if digits == 0 || sep == 0 {
            rest = tail;
            continue;
        }
        let secret = after[sep..]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            .count();
        if secret == 0 {
            rest = tail;
            continue;
        }
        out.push_str(REDACTED);
        rest = &after[sep + secret..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_in_every_spelling() {
        let r = Redactor::new("123456:ABC-def_9");
        let line =
            "error sending request for url (http://127.0.0.1:1/bot123456:ABC-def_9/SendMessage): \
                    token=123456%3AABC-def_9";
        let clean = r.redact(line);
        assert!(!clean.contains("ABC-def_9"), "{clean}");
        assert!(clean.contains("/bot<redacted>/SendMessage"), "{clean}");
    }

    #[test]
    fn token_shapes_go_too_and_the_rest_stays() {
        let r = Redactor::new("");
        assert_eq!(
            r.redact("GET /bot42:xyz/getMe and /botany/ and /bot/ ok"),
            "GET /bot<redacted>/getMe and /botany/ and /bot/ ok"
        );
        assert_eq!(format!("{r:?}"), "Redactor(<redacted>)");
    }
}
