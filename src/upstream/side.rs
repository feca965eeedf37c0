//! The calls to a machine that are not work, never counted by its breaker: Ollama's own
//! metadata (`/api/ps`, `/api/show`), a model's context length from `/v1/models`, the
//! liveness check a slow call makes, and active health checks. Each is bounded by
//! `first_byte` for the whole exchange.

use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::StatusCode;
use bytes::Bytes;

use super::{classify, Upstream};
use crate::body::Unread;
use crate::outcome::words;

impl Upstream {
    /// A small answer from an Ollama server's own API (`/api/ps`, `/api/show`): `body`
    /// POSTed (else a GET), bounded by `first_byte` for the whole exchange and by
    /// `max_upstream_body` in size. Never counted by the breaker: it is not work.
    pub async fn native(
        &self,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(StatusCode, Bytes), String> {
        self.fetch(format!("{}{path}", self.root), body).await
    }

    /// The machine's OpenAI model list, `GET {url}/models`, bounded as [`Upstream::native`].
    pub async fn models(&self) -> Result<(StatusCode, Bytes), String> {
        self.fetch(format!("{}/models", self.url), None).await
    }

    /// [`Upstream::native`] at any URL of the machine.
    async fn fetch(&self, url: String, body: Option<Bytes>) -> Result<(StatusCode, Bytes), String> {
        let req = match body {
            Some(b) => self
                .client
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .body(b),
            None => self.client.get(url),
        };
        let req = match &self.auth {
            Some(auth) => req.header(AUTHORIZATION, auth.clone()),
            None => req,
        };
        let exchange = async {
            let resp = req.send().await.map_err(|e| {
                classify::send_error(&e, e.is_connect(), e.is_timeout(), self.timeouts.connect)
                    .detail
            })?;
            let status = resp.status();
            let declared = resp.content_length();
            let body = crate::body::collect(resp.bytes_stream(), declared, self.max_body, None);
            let body = body.await.map_err(|e| match e {
                Unread::TooLarge => format!("answer larger than {} bytes", self.max_body),
                Unread::Broken(e) => format!("answer cut: {}", classify::root(&e)),
                Unread::Stalled => "answer stalled".to_string(),
            })?;
            Ok((status, body))
        };
        tokio::time::timeout(self.timeouts.first_byte, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {}",
                    words(self.timeouts.first_byte)
                ))
            })
    }

    /// The context length an OpenAI-compatible machine's model list gives for `backend`:
    /// vLLM's `max_model_len`, llama-server's `meta.n_ctx_train`, or a `context_length`.
    pub async fn context_length(&self, backend: &str) -> Option<u64> {
        let (status, body) = self
            .fetch(format!("{}/models", self.url), None)
            .await
            .ok()?;
        if !status.is_success() {
            return None;
        }
        let list: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let entry = list["data"]
            .as_array()?
            .iter()
            .find(|m| m["id"].as_str() == Some(backend))?;
        [
            "/max_model_len",
            "/meta/n_ctx_train",
            "/context_length",
            "/max_context_length",
        ]
        .into_iter()
        .find_map(|at| entry.pointer(at).and_then(serde_json::Value::as_u64))
    }

    /// The liveness check: any HTTP answer to `GET {url}/models` (or `health.path`) means
    /// the machine is alive, only slow. The client's `connect` timeout bounds the connect and
    /// `first_byte` the whole check, so a hung machine costs at most `first_byte` twice.
    pub async fn alive(&self) -> bool {
        let check = self.client.get(self.liveness_url.clone()).send();
        matches!(
            tokio::time::timeout(self.timeouts.first_byte, check).await,
            Ok(Ok(_))
        )
    }

    /// An active health check: `GET {url}{health.path}` must answer 2xx within `first_byte`.
    pub async fn health(&self) -> Result<(), String> {
        let check = self.client.get(self.liveness_url.clone()).send();
        match tokio::time::timeout(self.timeouts.first_byte, check).await {
            Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
            Ok(Ok(resp)) => Err(format!("HTTP {}", resp.status().as_u16())),
            Ok(Err(e)) => {
                Err(
                    classify::send_error(&e, e.is_connect(), e.is_timeout(), self.timeouts.connect)
                        .detail,
                )
            }
            Err(_) => Err(format!(
                "no answer within {}",
                words(self.timeouts.first_byte)
            )),
        }
    }
}
