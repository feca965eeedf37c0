//! Audio: transcripts of an uploaded file (transcriptions and translations; as JSON, text,
//! verbose JSON, SRT or VTT, or streamed as events), and speech: a short valid WAV (8 kHz,
//! 16-bit mono, a 500 Hz square wave) streamed as its header, then one chunk per piece.

use std::convert::Infallible;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use serde_json::{json, Value};

use super::super::feed::Script;
use super::super::Inner;
use super::form::Form;
use super::{refuse, Answer, Refusal};

/// Samples per second of the speech.
const RATE: u32 = 8000;
/// Bytes of one speech chunk: 800 samples of 16 bits, a tenth of a second.
pub(in crate::sim) const CHUNK: usize = 1600;
/// Bytes of a WAV header.
pub(in crate::sim) const HEADER: usize = 44;

/// Text content types.
const PLAIN: &str = "text/plain; charset=utf-8";

/// The answer to a transcription (or, `translate`, a translation) of the uploaded `file`:
/// `said` is the transcript, streamed as `NAME-i ` pieces when the form asks to stream.
pub(super) fn transcript(
    translate: bool,
    form: &Form,
    said: &str,
    inner: &Inner,
) -> Result<Answer, Refusal> {
    match form.files(&["file"]).next() {
        Some(f) if !f.content.is_empty() => {}
        _ => return refuse("file", "'file' is required: a file part named file"),
    }
    if form.text("stream").map(str::trim) == Some("true") {
        let pieces = inner.chunks.load(Ordering::Relaxed);
        return Ok(Answer::Stream(
            events(&inner.name, pieces),
            "text/event-stream",
        ));
    }
    let format = form.text("response_format").map_or("json", str::trim);
    Ok(match format {
        "json" => Answer::Json(json!({"text": said})),
        "text" => Answer::Text(PLAIN, format!("{said}\n")),
        "srt" => Answer::Text(
            PLAIN,
            format!("1\n00:00:00,000 --> 00:00:01,000\n{said}\n\n"),
        ),
        "vtt" => Answer::Text(
            "text/vtt; charset=utf-8",
            format!("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n{said}\n\n"),
        ),
        "verbose_json" => Answer::Json(verbose(translate, said)),
        _ => {
            return refuse(
                "response_format",
                "'response_format' must be json, text, srt, verbose_json or vtt",
            )
        }
    })
}

/// A verbose transcript: the task, the language, one segment a second long.
fn verbose(translate: bool, said: &str) -> Value {
    let task = if translate { "translate" } else { "transcribe" };
    json!({"task": task, "language": "english", "duration": 1.0, "text": said,
        "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": 1.0, "text": said,
            "tokens": [], "temperature": 0.0, "avg_logprob": 0.0,
            "compression_ratio": 1.0, "no_speech_prob": 0.0}]})
}

/// A streamed transcript: a `transcript.text.delta` event per piece, then
/// `transcript.text.done` with the whole text.
fn events(name: &str, pieces: usize) -> Script {
    let whole: String = (0..pieces).map(|i| format!("{name}-{i} ")).collect();
    let done = json!({"type": "transcript.text.done", "text": whole});
    let name = name.to_owned();
    Script {
        head: Vec::new(),
        pieces,
        piece: Box::new(move |i| {
            let delta = json!({"type": "transcript.text.delta", "delta": format!("{name}-{i} ")});
            Bytes::from(format!("data: {delta}\n\n"))
        }),
        tail: vec![Bytes::from(format!("data: {done}\n\n"))],
        last: None,
    }
}

/// The answer to `POST /v1/audio/speech`: `input` is required; whatever format is asked,
/// the sim speaks WAV (`audio/wav`), one chunk per piece after the header.
pub(super) fn speech(request: &Value, inner: &Inner) -> Result<Answer, Refusal> {
    match request.get("input") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        _ => return refuse("input", "'input' is required: a non-empty string"),
    }
    let pieces = inner.chunks.load(Ordering::Relaxed);
    let script = Script {
        head: vec![header(pieces * CHUNK)],
        pieces,
        piece: Box::new(|_| samples(CHUNK)),
        tail: Vec::new(),
        last: None,
    };
    Ok(Answer::Stream(script, "audio/wav"))
}

/// The 44-byte header of a PCM WAV holding `data` bytes of samples.
pub(in crate::sim) fn header(data: usize) -> Bytes {
    let data = u32::try_from(data).unwrap_or(u32::MAX - 36);
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // PCM
    h.extend_from_slice(&1u16.to_le_bytes()); // mono
    h.extend_from_slice(&RATE.to_le_bytes());
    h.extend_from_slice(&(RATE * 2).to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data.to_le_bytes());
    Bytes::from(h)
}

/// `len` bytes of samples: a 500 Hz square wave (16 samples a period), little-endian.
fn samples(len: usize) -> Bytes {
    (0..len / 2)
        .flat_map(|i| if i % 16 < 8 { 8000i16 } else { -8000 }.to_le_bytes())
        .collect()
}

/// A WAV of `n` bytes (never fewer than its header) in 64 KiB frames, never built whole.
pub(super) fn huge_wav(n: usize) -> Body {
    const FRAME: usize = 64 << 10;
    let data = n.saturating_sub(HEADER) & !1;
    let frames = std::iter::once(header(data))
        .chain((0..data.div_ceil(FRAME)).map(move |i| samples(FRAME.min(data - i * FRAME))))
        .map(Ok::<_, Infallible>);
    Body::from_stream(futures_util::stream::iter(frames))
}
