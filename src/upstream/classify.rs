//! docs/api.md "Breaker classification" in code, its one home: transport errors, status codes,
//! Retry-After, deadlines and answers read into decisions (whose fault, what the breaker records).

use std::time::Duration;

use reqwest::header::HeaderValue;
use serde::de::IgnoredAny;
use serde::Deserialize;

use tokio::time::Instant;

use crate::breaker::{Failure, FailureKind};
use crate::outcome::{words, Attempted, Effect, Fault, ModelId, Reason};
use crate::outcome::{Call, Endpoint, Wire};

/// A non-2xx answer (docs/api.md "Breaker classification"). `Fault::Client` means the machine
/// refused the request itself: its answer goes back to the client as is and the chain stops.
pub fn refusal(
    target: ModelId,
    code: u16,
    retry_after: Option<Duration>,
    deadline: Instant,
) -> Attempted {
    let detail = format!("HTTP {code}");
    match code {
        429 => match retry_after {
            Some(ra) if crate::clock::from_now(ra) <= deadline => Attempted::failed(
                target,
                Reason::RateLimited,
                Fault::Throttled,
                Effect::Throttled(crate::clock::from_now(ra)),
                format!("HTTP 429, retry after {}", words(ra)),
            ),
            _ => Attempted::counted(target, FailureKind::RateLimited, Fault::Throttled, detail),
        }
        .with_retry_after(retry_after),
        401 | 403 => Attempted::failed(
            target,
            Reason::AuthFailed,
            Fault::Unreachable,
            Effect::Paused,
            format!("{detail}: {}", Reason::AuthFailed.describe()),
        ),
        404 => Attempted::failed(
            target,
            Reason::NotFound,
            Fault::BadAnswer,
            Effect::None,
            format!("{detail} ({})", Reason::NotFound.describe()),
        ),
        // A machine that does not serve this endpoint (llama-server without --embeddings
        // answers 501) is not sick: its other endpoints serve on.
        405 | 501 => Attempted::failed(
            target,
            Reason::Unsupported,
            Fault::BadAnswer,
            Effect::None,
            format!("{detail} ({})", Reason::Unsupported.describe()),
        ),
        500..=599 => Attempted::counted(target, FailureKind::Http5xx, Fault::BadAnswer, detail),
        _ => Attempted::failed(
            target,
            Reason::ClientError,
            Fault::Client,
            Effect::None,
            detail,
        ),
    }
}

/// A deadline ran out: the machine's own `total` is its failure, and the chain moves on
/// while the request has time; the request's deadline is nobody's failure and ends the walk.
pub fn past_deadline(
    target: ModelId,
    started: Instant,
    machine_total: bool,
    total: Duration,
) -> Attempted {
    if machine_total {
        let detail = format!(
            "no complete answer within {} (timeouts.total)",
            words(total)
        );
        Attempted::counted(target, FailureKind::Timeout, Fault::TooSlow, detail)
    } else {
        let after = Instant::now() - started;
        Attempted::failed(
            target,
            Reason::Timeout,
            Fault::Deadline,
            Effect::None,
            format!("request deadline reached after {}", words(after)),
        )
    }
}

/// A failed `send`: the request never got response headers. `connect`: the client says
/// the connection was never made; `timeout`: it says the send timed out.
pub fn send_error(
    e: &(dyn std::error::Error + 'static),
    connect: bool,
    timeout: bool,
    connect_timeout: Duration,
) -> Failure {
    let chain = chain_text(e);
    if connect {
        if timeout
            || chain.contains("timed out")
            || io_kind(e) == Some(std::io::ErrorKind::TimedOut)
        {
            return Failure::new(
                FailureKind::ConnectTimeout,
                format!("connect timeout after {}", words(connect_timeout)),
            );
        }
        if io_kind(e) == Some(std::io::ErrorKind::ConnectionRefused) {
            return Failure::new(FailureKind::Refused, "connection refused");
        }
        if chain.contains("dns error") || chain.contains("failed to lookup") {
            return Failure::new(FailureKind::Dns, format!("DNS lookup failed: {}", root(e)));
        }
        if chain.contains("tls") || chain.contains("certificate") || chain.contains("handshake") {
            return Failure::new(FailureKind::Tls, format!("TLS failure: {}", root(e)));
        }
        return Failure::new(FailureKind::Refused, format!("connect failed: {}", root(e)));
    }
    Failure::new(FailureKind::Reset, format!("connection reset: {}", root(e)))
}

/// The kind of the first I/O error among `e`'s causes.
fn io_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut src = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        src = s.source();
    }
    None
}

fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(&s.to_string().to_lowercase());
        out.push(' ');
        src = s.source();
    }
    out
}

/// The innermost cause, which names what happened without the request URL.
pub fn root(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

pub use crate::breaker::RETRY_AFTER_MAX;

/// `Retry-After` as delta-seconds (the form LLM servers send, also with a fraction) or an
/// HTTP date, clamped to [`RETRY_AFTER_MAX`]; nonsense (negative, not finite, unreadable)
/// is `None`, as if the header were absent. Never panics, whatever the machine sent.
pub fn retry_after(v: &HeaderValue) -> Option<Duration> {
    retry_after_str(v.to_str().ok()?)
}

/// [`retry_after`] on the header's text.
pub fn retry_after_str(s: &str) -> Option<Duration> {
    let s = s.trim();
    let max = RETRY_AFTER_MAX;
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(max));
    }
    if let Ok(secs) = s.parse::<f64>() {
        let ok = secs.is_finite() && secs >= 0.0;
        return ok.then(|| Duration::from_secs_f64(secs.min(max.as_secs_f64())));
    }
    let when = jiff::fmt::rfc2822::parse(s).ok()?.timestamp();
    let left = when.duration_since(jiff::Timestamp::now());
    // A date in the past means "now"; one beyond a day is clamped like any other value.
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO).min(max))
}

/// Structs whose one required field makes an answer valid; the rest is skipped unread.
macro_rules! needs {
    ($($name:ident: $field:ident: $ty:ty),* $(,)?) => {$(
        #[derive(Deserialize)]
        struct $name {
            #[allow(dead_code)]
            $field: $ty,
        }
    )*};
}

needs! {
    Completion: choices: Vec<IgnoredAny>,
    Embeddings: data: Vec<IgnoredAny>,
    OllamaChat: message: IgnoredAny,
    OllamaGenerate: response: IgnoredAny,
    OllamaEmbed: embeddings: Vec<IgnoredAny>,
    OllamaEmbedding: embedding: Vec<IgnoredAny>,
    ResponseObject: object: String,
    Ranking: results: Vec<IgnoredAny>,
}

/// A JSON object with an `error` key: what a server answers for a failure it still sends
/// as 2xx.
#[derive(Deserialize)]
struct ErrorKey {
    #[allow(dead_code)]
    error: IgnoredAny,
}

/// A 200 must be a real answer: for OpenAI's API, JSON with `choices` (`data` for
/// embeddings and images, `results` for a ranking, `"object": "response"` for a Response;
/// a transcription or speech is anything but a JSON error); for Ollama's, with `message`
/// (chat), `response` (generate), `embeddings` or `embedding`.
pub fn valid_answer(wire: Wire, body: &[u8]) -> Result<(), String> {
    fn read<T: for<'a> Deserialize<'a>>(body: &[u8]) -> Result<(), serde_json::Error> {
        serde_json::from_slice::<T>(body).map(|_| ())
    }
    let (parsed, field) = match wire {
        Wire::OpenAi(Endpoint::Chat | Endpoint::Completions) => {
            (read::<Completion>(body), "choices")
        }
        Wire::OpenAi(
            Endpoint::Embeddings
            | Endpoint::ImagesGenerations
            | Endpoint::ImagesEdits
            | Endpoint::ImagesVariations,
        ) => (read::<Embeddings>(body), "data"),
        Wire::OpenAi(Endpoint::Rerank) => (read::<Ranking>(body), "results"),
        // Text, SRT, VTT, JSON or audio bytes: judged by the status, and by an `error`
        // key when the body is JSON.
        Wire::OpenAi(
            Endpoint::AudioTranscriptions | Endpoint::AudioTranslations | Endpoint::AudioSpeech,
        ) => {
            return match serde_json::from_slice::<ErrorKey>(body) {
                Ok(_) => Err(format!(
                    "a JSON error sent as a 2xx: {}",
                    crate::text::bounded(&String::from_utf8_lossy(&body[..body.len().min(200)]))
                )),
                Err(_) => Ok(()),
            };
        }
        Wire::OpenAi(Endpoint::Responses) => {
            let object = serde_json::from_slice::<ResponseObject>(body).map(|r| r.object);
            return match object {
                Ok(o) if o == "response" => Ok(()),
                Ok(o) => Err(format!(
                    "expected a Response (\"object\": \"response\"), got \"object\": \"{}\"",
                    crate::text::bounded(&o)
                )),
                Err(e) => Err(format!("expected a Response, JSON with 'object' ({e})")),
            };
        }
        Wire::Ollama(Call::Chat) => (read::<OllamaChat>(body), "message"),
        Wire::Ollama(Call::Generate) => (read::<OllamaGenerate>(body), "response"),
        Wire::Ollama(Call::Embed) => (read::<OllamaEmbed>(body), "embeddings"),
        Wire::Ollama(Call::Embeddings) => (read::<OllamaEmbedding>(body), "embedding"),
    };
    parsed.map_err(|e| format!("expected JSON with '{field}' ({e})"))
}
