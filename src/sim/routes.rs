//! Which route a request is on: OpenAI's work routes, images, audio and rerank included
//! (every sim), Ollama's own work routes
//! (an Ollama sim), the metadata routes that answer whatever the load, or none.

use hyper::Method;

use crate::registry::Api;

/// A route a request can be on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Route {
    /// `/v1/...` work, on every sim.
    OpenAi(OpenAiWork),
    /// `/api/...` work, on an Ollama sim.
    Native(NativeWork),
    /// A metadata route: answers at once unless the machine is frozen or resets.
    Meta(Meta),
    Unknown,
}

/// OpenAI's work routes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum OpenAiWork {
    /// `POST /v1/chat/completions`
    Chat,
    /// `POST /v1/completions`
    Completions,
    /// `POST /v1/embeddings`
    Embeddings,
    /// `POST /v1/responses` (the Responses API, which Ollama serves too)
    Responses,
    /// Images, audio and rerank.
    Media(Media),
}

/// The media work routes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Media {
    /// `POST /v1/images/generations` (JSON)
    Generations,
    /// `POST /v1/images/edits` (an upload)
    Edits,
    /// `POST /v1/images/variations` (an upload)
    Variations,
    /// `POST /v1/audio/transcriptions` (an upload)
    Transcriptions,
    /// `POST /v1/audio/translations` (an upload)
    Translations,
    /// `POST /v1/audio/speech` (JSON; answered with WAV bytes, streamed)
    Speech,
    /// `POST /v1/rerank`, `/v1/reranking`, `/rerank` (JSON)
    Rerank,
}

/// Ollama's own work routes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum NativeWork {
    /// `POST /api/chat`
    Chat,
    /// `POST /api/generate`
    Generate,
    /// `POST /api/embed`
    Embed,
    /// `POST /api/embeddings` (the older single-vector form)
    Embeddings,
}

impl NativeWork {
    /// Whether it makes vectors (and so never streams).
    pub(super) fn embeds(self) -> bool {
        matches!(self, NativeWork::Embed | NativeWork::Embeddings)
    }
}

/// The metadata routes: none of them is work (see [`Sim::work_hits`]).
///
/// [`Sim::work_hits`]: super::Sim::work_hits
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Meta {
    /// `GET /v1/models`, on every sim.
    Models,
    /// `GET|HEAD /api/tags`
    Tags,
    /// `GET /api/ps`
    Ps,
    /// `GET|HEAD /api/version`
    Version,
    /// `POST /api/show`
    Show,
    /// `GET|HEAD /`: "Ollama is running".
    Root,
}

/// The route of `method path` on a sim speaking `api`.
pub(super) fn route(api: Api, method: &Method, path: &str) -> Route {
    let openai = match (method, path) {
        (&Method::POST, "/v1/chat/completions") => Route::OpenAi(OpenAiWork::Chat),
        (&Method::POST, "/v1/completions") => Route::OpenAi(OpenAiWork::Completions),
        (&Method::POST, "/v1/embeddings") => Route::OpenAi(OpenAiWork::Embeddings),
        (&Method::POST, "/v1/responses") => Route::OpenAi(OpenAiWork::Responses),
        (&Method::GET, "/v1/models") => Route::Meta(Meta::Models),
        (&Method::POST, path) => {
            media(path).map_or(Route::Unknown, |m| Route::OpenAi(OpenAiWork::Media(m)))
        }
        _ => Route::Unknown,
    };
    match (openai, api) {
        (Route::Unknown, Api::Ollama) => native(method, path),
        _ => openai,
    }
}

/// The media route a POST to `path` is on, if one.
fn media(path: &str) -> Option<Media> {
    Some(match path {
        "/v1/images/generations" => Media::Generations,
        "/v1/images/edits" => Media::Edits,
        "/v1/images/variations" => Media::Variations,
        "/v1/audio/transcriptions" => Media::Transcriptions,
        "/v1/audio/translations" => Media::Translations,
        "/v1/audio/speech" => Media::Speech,
        "/v1/rerank" | "/v1/reranking" | "/rerank" => Media::Rerank,
        _ => return None,
    })
}

/// The route of `method path` among Ollama's own.
fn native(method: &Method, path: &str) -> Route {
    let get_or_head = method == Method::GET || method == Method::HEAD;
    match (path, method == Method::POST) {
        ("/api/chat", true) => Route::Native(NativeWork::Chat),
        ("/api/generate", true) => Route::Native(NativeWork::Generate),
        ("/api/embed", true) => Route::Native(NativeWork::Embed),
        ("/api/embeddings", true) => Route::Native(NativeWork::Embeddings),
        ("/api/show", true) => Route::Meta(Meta::Show),
        ("/api/tags", false) if get_or_head => Route::Meta(Meta::Tags),
        ("/api/ps", false) if method == Method::GET => Route::Meta(Meta::Ps),
        ("/api/version", false) if get_or_head => Route::Meta(Meta::Version),
        ("/", false) if get_or_head => Route::Meta(Meta::Root),
        _ => Route::Unknown,
    }
}
