//! The rest of the lab's work: images, audio and rerank, along the same chains, breakers
//! and classification as chat. JSON requests (image generation, speech, rerank) are read
//! like any; uploads (image edits and variations, transcriptions, translations) are held
//! whole — within `server.max_upload`, at most `server.max_uploads_in_flight` at once — so
//! the chain can send them again, each machine with its own `model` and every other byte
//! as it came. Speech answers pass through as bytes, as they come.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::error::{AppError, Code};
use super::inference::{asked_route, read_body, wait_header};
use crate::body::Unread;
use crate::fleet::Fleet;
use crate::multipart::{Scan, Upload};
use crate::outcome::Wire;
use crate::proxy::Front;
use crate::registry::Api;
use crate::request::Parsed;
use crate::route::Ask;
use crate::service::Service;
use crate::upstream::{Endpoint, Framing, Payload};

pub async fn images_generations(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    json(&svc, Endpoint::ImagesGenerations, req).await
}

pub async fn images_edits(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    upload(&svc, Endpoint::ImagesEdits, req).await
}

pub async fn images_variations(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    upload(&svc, Endpoint::ImagesVariations, req).await
}

pub async fn transcriptions(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    upload(&svc, Endpoint::AudioTranscriptions, req).await
}

pub async fn translations(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    upload(&svc, Endpoint::AudioTranslations, req).await
}

pub async fn speech(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    json(&svc, Endpoint::AudioSpeech, req).await
}

pub async fn rerank(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    json(&svc, Endpoint::Rerank, req).await
}

/// Routing by the endpoint's kind: a model it names, or the kind's default route.
fn decide(
    fleet: &Fleet,
    endpoint: Endpoint,
    headers: &HeaderMap,
    model: Option<&str>,
) -> Result<crate::route::Routed, AppError> {
    let ask = Ask {
        kind: endpoint.kind(),
        path: endpoint.client_path(),
        header: asked_route(headers),
        model,
        text: "",
        has_image: false,
    };
    Ok(fleet.matcher.decide_for(&fleet.registry, &ask)?)
}

/// A JSON request to a media endpoint: read, routed by kind, walked.
async fn json(svc: &Service, endpoint: Endpoint, req: Request) -> Result<Response, AppError> {
    let fleet = svc.fleet();
    let (parts, body) = req.into_parts();
    let bytes = read_body(&fleet.registry.server, &parts.headers, body).await?;
    let parsed = Parsed::new(endpoint, bytes)?;
    let wait = wait_header(&parts.headers)?;
    let decision = decide(&fleet, endpoint, &parts.headers, parsed.model.as_deref())?;
    let front = crate::proxy::OpenAi { endpoint, parsed };
    Ok(crate::proxy::forward(fleet, front, decision, wait).await)
}

/// The uploads held at once (`server.max_uploads_in_flight` when first used).
struct Uploads(Arc<Semaphore>);

/// An upload: a slot taken, its body read whole, its parts read, routed by kind, walked;
/// the slot held until the answer has been given.
async fn upload(svc: &Service, endpoint: Endpoint, req: Request) -> Result<Response, AppError> {
    let fleet = svc.fleet();
    let server = &fleet.registry.server;
    let slots = svc.shared(|| Uploads(Arc::new(Semaphore::new(server.max_uploads_in_flight))));
    let wait_for_slot = fleet
        .registry
        .machines
        .iter()
        .map(|m| m.timeouts.first_byte)
        .min();
    let permit = slot(&slots.0, wait_for_slot.unwrap_or(Duration::from_secs(5))).await?;
    let (parts, body) = req.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .cloned()
        .ok_or_else(|| {
            AppError::new(
                Code::InvalidUpload,
                format!(
                    "{} takes multipart/form-data: no content type",
                    endpoint.client_path()
                ),
            )
        })?;
    // The delimiters found as the body comes (a content type that is no multipart is
    // refused once the body is read, as any other malformed upload).
    let mut scan = Scan::new(&content_type).ok();
    let bytes = read_upload(server, &parts.headers, body, scan.as_mut()).await?;
    let upload = match scan {
        Some(scan) => Upload::scanned(&content_type, bytes, scan)?,
        None => Upload::read(&content_type, bytes)?,
    };
    tracing::debug!(parts = upload.parts, model = ?upload.model(), "upload held");
    let wait = wait_header(&parts.headers)?;
    let decision = decide(&fleet, endpoint, &parts.headers, upload.model())?;
    let front = Uploaded { endpoint, upload };
    let resp = crate::proxy::forward(fleet, front, decision, wait).await;
    Ok(holding(resp, permit))
}

/// A slot for an upload, waiting at most `wait`; past it 503 `busy`.
async fn slot(slots: &Arc<Semaphore>, wait: Duration) -> Result<OwnedSemaphorePermit, AppError> {
    match tokio::time::timeout(wait, Arc::clone(slots).acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(AppError::new(
            Code::Busy,
            format!(
                "every upload slot is held (server.max_uploads_in_flight); none freed within {}",
                crate::outcome::words(wait)
            ),
        )),
    }
}

/// The response, its body holding the upload's slot until the client has it all.
fn holding(resp: Response, permit: OwnedSemaphorePermit) -> Response {
    resp.map(|body| Body::new(crate::body::Holding::new(body, permit)))
}

/// An upload's body, read whole within `server.max_upload` (413 naming it), without a
/// silence longer than `server.idle_timeout`, all of it within `server.body_timeout`; each
/// frame fed to `scan` as it comes.
async fn read_upload(
    server: &crate::registry::Server,
    headers: &HeaderMap,
    body: Body,
    mut scan: Option<&mut Scan>,
) -> Result<bytes::Bytes, AppError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let frames = body.into_data_stream().inspect(move |frame| {
        if let (Ok(frame), Some(scan)) = (frame, scan.as_mut()) {
            scan.feed(frame);
        }
    });
    let read = crate::body::collect(
        frames,
        declared,
        server.max_upload,
        Some(server.idle_timeout),
    );
    let too_slow = || {
        AppError::new(
            Code::RequestTimeout,
            format!(
                "the upload did not arrive whole within {} (server.body_timeout)",
                crate::outcome::words(server.body_timeout)
            ),
        )
    };
    match tokio::time::timeout(server.body_timeout, read).await {
        Err(_) => Err(too_slow()),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(Unread::TooLarge)) => Err(AppError::new(
            Code::RequestTooLarge,
            format!(
                "the upload is larger than server.max_upload ({} bytes)",
                server.max_upload
            ),
        )),
        Ok(Err(Unread::Stalled)) => Err(AppError::new(
            Code::RequestTimeout,
            format!(
                "the upload stalled for {} (server.idle_timeout)",
                crate::outcome::words(server.idle_timeout)
            ),
        )),
        Ok(Err(Unread::Broken(e))) => Err(AppError::new(
            Code::UnreadableBody,
            format!("could not read the upload: {e}"),
        )),
    }
}

/// An upload sent along the chain: the held body, its `model` set for each target.
struct Uploaded {
    endpoint: Endpoint,
    upload: Upload,
}

impl Front for Uploaded {
    fn request(&self, backend: &str, _: Api) -> (Wire, Payload) {
        (
            Wire::OpenAi(self.endpoint),
            self.upload.for_backend(backend),
        )
    }

    fn embeds(&self) -> bool {
        false
    }

    fn answer(
        &self,
        _: Wire,
        body: bytes::Bytes,
        _: Instant,
    ) -> Result<(bytes::Bytes, Option<HeaderValue>), String> {
        Ok((body, None))
    }

    fn framing(&self, _: Wire, _: Instant) -> (Framing, Option<HeaderValue>) {
        (Framing::bytes(), None)
    }
}
