//! One task callback, delivered the Standard Webhooks way (docs/api.md "Tasks", "Callbacks").
//!
//! This module knows nothing of tasks beyond a JSON body: the scheduler picks the URL, the
//! `webhook-id` (task id + ":" + status), the clock and when to try again; this module signs,
//! sends one attempt and says in plain words how it went.
//!
//! - [`Secret`] and [`sign()`]: the `whsec_` secret and the `v1,` HMAC-SHA256 signature.
//! - [`body_for`]: the task object as a body of at most [`MAX_BODY`] bytes.
//! - [`client`] and [`deliver`]: one POST, no redirects, no proxy, 10 s at most.
//! - [`Lookup`]: where the client's host names are looked up ([`client_with`] for tests).
//! - [`next_retry`]: the backoff between attempts, and when to give up.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, CONTENT_TYPE};

mod body;
mod resolve;
mod retry;
mod sign;

pub use body::{body_for, MAX_BODY};
pub use resolve::{Lookup, SystemLookup};
pub use retry::{next_retry, FIRST_RETRY, GIVE_UP_AFTER, MAX_STEP};
pub use sign::{sign, Secret, SecretError};

/// The most one attempt may take, connect to last byte read (docs/api.md "Tasks").
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most the TCP (and TLS) connect may take within an attempt.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of the receiver's answer that is read (and thrown away): enough to let a small
/// answer end cleanly so the connection can be reused, never a receiver's whole stream.
pub const ANSWER_READ_MAX: usize = 4 * 1024;

/// How long reading those bytes may take once the status is known: the status decides the
/// attempt, so a receiver that trickles its answer cannot hold the delivery.
const ANSWER_READ_WAIT: Duration = Duration::from_secs(1);

/// The client for callbacks: follows no redirects (a 3xx is a failed attempt, so a receiver
/// cannot bounce a signed body elsewhere), uses no proxy from the environment, and gives up
/// an attempt after [`ATTEMPT_TIMEOUT`] (connect within [`CONNECT_TIMEOUT`]).
///
/// Errs only when the TLS backend cannot be set up; the words never hold a secret.
pub fn client() -> Result<reqwest::Client, String> {
    client_with(Arc::new(SystemLookup))
}

/// [`client`], looking host names up with `lookup` (tests give names of their own).
pub fn client_with(lookup: Arc<dyn Lookup>) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(resolve::Resolver { lookup }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the callback HTTP client: {}", root(&e)))
}

/// One attempt: POSTs `body` to `url` with `content-type: application/json`, `webhook-id`,
/// `webhook-timestamp: now_unix` and, when a secret is given, a `webhook-signature` made
/// now for this attempt's timestamp. `Ok` on any 2xx.
///
/// `Err` holds plain words fit for the task's `callback.last_error`: `HTTP 500`,
/// `redirect refused (HTTP 302)`, `connection refused`, `timed out after 10s`, `address
/// refused: 169.254.169.254 is link-local; ...` (a name that led to an address callbacks
/// never go to, see [`Lookup`]), ... They never
/// hold the secret, the signature, the URL (it may carry a token) or the receiver's text.
/// Use [`client`]: a client that follows redirects would send the signed body on.
pub async fn deliver(
    client: &reqwest::Client,
    url: &reqwest::Url,
    webhook_id: &str,
    body: &[u8],
    secret: Option<&Secret>,
    now_unix: i64,
) -> Result<(), String> {
    // A '.' would let the signed content `{id}.{timestamp}.{body}` be read two ways.
    if webhook_id.is_empty() || webhook_id.contains('.') {
        return Err("the webhook id is empty or holds a '.'".to_owned());
    }
    let id = HeaderValue::from_str(webhook_id)
        .map_err(|_| "the webhook id is not a valid header value".to_owned())?;
    let mut request = client
        .post(url.clone())
        .timeout(ATTEMPT_TIMEOUT)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header("webhook-id", id)
        .header("webhook-timestamp", HeaderValue::from(now_unix))
        .body(body.to_vec());
    if let Some(secret) = secret {
        let signature = sign(secret, webhook_id, now_unix, body);
        // Base64 and "v1," only: always a valid header value.
        let mut value = HeaderValue::from_str(&signature)
            .map_err(|_| "the signature is not a valid header value".to_owned())?;
        value.set_sensitive(true);
        request = request.header("webhook-signature", value);
    }
    let response = request.send().await.map_err(|e| send_error(&e))?;
    let status = response.status();
    let _ = tokio::time::timeout(ANSWER_READ_WAIT, read_a_little(response)).await;
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(format!("redirect refused (HTTP {})", status.as_u16()))
    } else {
        Err(format!("HTTP {}", status.as_u16()))
    }
}

/// Reads at most [`ANSWER_READ_MAX`] bytes of the answer and drops them.
async fn read_a_little(mut response: reqwest::Response) {
    let mut read = 0;
    while read < ANSWER_READ_MAX {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => return,
        }
    }
}

/// A failed send in plain words, without the URL reqwest's own text carries.
fn send_error(e: &reqwest::Error) -> String {
    if let Some(refused) = find::<resolve::Refused>(e) {
        return refused.to_string();
    }
    if e.is_timeout() {
        return if e.is_connect() {
            format!("connect timed out after {}s", CONNECT_TIMEOUT.as_secs())
        } else {
            format!("timed out after {}s", ATTEMPT_TIMEOUT.as_secs())
        };
    }
    if e.is_connect() {
        if io_kind(e) == Some(std::io::ErrorKind::ConnectionRefused) {
            return "connection refused".to_owned();
        }
        return format!("cannot connect: {}", root(e));
    }
    format!("connection failed: {}", root(e))
}

fn io_kind(e: &reqwest::Error) -> Option<std::io::ErrorKind> {
    find::<std::io::Error>(e).map(std::io::Error::kind)
}

/// The first cause of `e` that is a `T`.
fn find<T: std::error::Error + 'static>(e: &reqwest::Error) -> Option<&T> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(t) = s.downcast_ref::<T>() {
            return Some(t);
        }
        source = s.source();
    }
    None
}

/// The innermost cause (it names what happened, not the URL), bounded for a stored field.
/// reqwest's own text is never used: it carries the URL.
fn root(e: &reqwest::Error) -> String {
    let Some(mut last) = std::error::Error::source(e) else {
        return "the request failed".to_owned();
    };
    while let Some(s) = last.source() {
        last = s;
    }
    crate::text::bounded(&last.to_string())
}
