//! Asking a machine what it is and what it serves, for `labrouter machine add` and
//! `labrouter check --live`: a few GETs, bounded in time ([`ASK_WITHIN`] for the whole
//! asking), in size ([`MAX_ANSWER`]) and in count ([`MAX_MODELS`] names of at most
//! [`MAX_NAME`] characters), never redirected and never through a proxy.

use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::StatusCode;
use serde_json::Value;

use crate::outcome::words;
use crate::registry::{Api, Machine};

#[cfg(test)]
mod tests;

/// The longest one machine is asked (all its GETs together).
pub const ASK_WITHIN: Duration = Duration::from_secs(5);

/// The largest answer read from a machine; a larger one is refused, not read.
pub const MAX_ANSWER: usize = 4 << 20;

/// The most models a machine may list (a home lab's machine holds tens).
pub const MAX_MODELS: usize = 500;

/// The longest model name a machine may list, in characters.
pub const MAX_NAME: usize = 200;

/// What a machine said it is and serves.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// Ollama when `GET /api/version` answered (or `--api ollama` said so).
    pub api: Api,
    /// Ollama's version, when it said one.
    pub version: Option<String>,
    pub models: Vec<Listed>,
}

/// One model a machine lists.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The name the machine knows it by (its backend name).
    pub name: String,
    /// It makes only embeddings (Ollama's `capabilities: ["embedding"]`).
    pub embed_only: bool,
}

/// Why a GET got no usable answer.
#[derive(Debug)]
enum Fail {
    /// Nothing answered in HTTP: no connection, a cut, no answer in time.
    Down(String),
    /// An HTTP answer that cannot be used: too large.
    Bad(String),
}

/// A client for asking machines, with the bearer key of one machine (if any).
pub struct Asker {
    client: reqwest::Client,
    auth: Option<HeaderValue>,
}

impl Asker {
    /// A client that sends the key in the environment variable `key_env` (if set).
    pub fn new(key_env: Option<&str>) -> Result<Asker, String> {
        let key = key_env.and_then(|var| std::env::var(var).ok());
        Asker::with_key(key)
    }

    /// A client that sends `key` (if any, and not empty) as a bearer token.
    fn with_key(key: Option<String>) -> Result<Asker, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(ASK_WITHIN)
            .user_agent(concat!("labrouter/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        let auth = key
            .filter(|key| !key.is_empty())
            .and_then(|key| HeaderValue::from_str(&format!("Bearer {key}")).ok())
            .map(|mut v| {
                v.set_sensitive(true);
                v
            });
        Ok(Asker { client, auth })
    }

    /// What the machine at `root` (the URL without `/v1`) is and serves: Ollama when
    /// `GET /api/version` answers with a version, unless `api` says which; then its list
    /// (`/api/tags` for Ollama, `/v1/models` otherwise). At most [`ASK_WITHIN`].
    pub async fn identify(&self, root: &str, api: Option<Api>) -> Result<Found, String> {
        within(async {
            let version = match api {
                Some(Api::OpenAi) => None,
                _ => self.version(root).await?,
            };
            let api = api.unwrap_or(match version {
                Some(_) => Api::Ollama,
                None => Api::OpenAi,
            });
            let models = self.list(root, api).await?;
            Ok(Found {
                api,
                version,
                models,
            })
        })
        .await
    }

    /// The models a registry machine lists, as its `api` lists them. At most [`ASK_WITHIN`].
    pub async fn models(&self, machine: &Machine) -> Result<Vec<Listed>, String> {
        let root = machine.url.strip_suffix("/v1").unwrap_or(&machine.url);
        match machine.api {
            Api::Ollama => within(self.list(root, Api::Ollama)).await,
            Api::OpenAi => {
                let url = format!("{}/models", machine.url);
                within(self.list_at(&url, "GET /models", Api::OpenAi)).await
            }
        }
    }

    /// Ollama's version from `GET /api/version`; `None` when it answered something else
    /// (not Ollama); an error when nothing answered.
    async fn version(&self, root: &str) -> Result<Option<String>, String> {
        match self.get(&format!("{root}/api/version")).await {
            Ok((status, body)) if status.is_success() => {
                let v: Option<Value> = serde_json::from_slice(&body).ok();
                Ok(v.as_ref()
                    .and_then(|v| v["version"].as_str())
                    .filter(|v| !v.is_empty() && v.len() <= 64)
                    .map(crate::text::bounded))
            }
            Ok(_) | Err(Fail::Bad(_)) => Ok(None),
            Err(Fail::Down(why)) => Err(why),
        }
    }

    /// The list at `root` as `api` serves it.
    async fn list(&self, root: &str, api: Api) -> Result<Vec<Listed>, String> {
        match api {
            Api::Ollama => {
                self.list_at(&format!("{root}/api/tags"), "GET /api/tags", api)
                    .await
            }
            Api::OpenAi => {
                self.list_at(&format!("{root}/v1/models"), "GET /v1/models", api)
                    .await
            }
        }
    }

    /// The models listed at `url` (`what` names it in errors), in `api`'s list shape.
    async fn list_at(&self, url: &str, what: &str, api: Api) -> Result<Vec<Listed>, String> {
        let (status, body) = self.get(url).await.map_err(|f| match f {
            Fail::Down(why) => why,
            Fail::Bad(why) => format!("{what}: {why}"),
        })?;
        if !status.is_success() {
            let hint = match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    " (it wants a key: --api-key-env VAR, with the key in VAR)"
                }
                _ => "",
            };
            return Err(format!("{what} answered HTTP {}{hint}", status.as_u16()));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|_| format!("{what} answered with something that is not JSON"))?;
        parse_list(&v, api).map_err(|why| format!("{what}: {why}"))
    }

    /// One GET: its status and its body, at most [`MAX_ANSWER`] bytes.
    async fn get(&self, url: &str) -> Result<(StatusCode, Vec<u8>), Fail> {
        let mut req = self.client.get(url);
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        let mut resp = req.send().await.map_err(|e| Fail::Down(unreached(&e)))?;
        let status = resp.status();
        let too_large = || Fail::Bad(format!("answer larger than {}", size_words(MAX_ANSWER)));
        if resp.content_length().is_some_and(|n| n > MAX_ANSWER as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| Fail::Down(format!("answer cut: {}", root_cause(&e))))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }
}

/// `fut`, or "no answer within 5s" once [`ASK_WITHIN`] passed.
async fn within<T>(fut: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::time::timeout(ASK_WITHIN, fut)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}", words(ASK_WITHIN))))
}

/// The models of a list answer: Ollama's `{"models": [{"name": ...}]}` or OpenAI's
/// `{"data": [{"id": ...}]}`; names checked and bounded, duplicates dropped.
pub fn parse_list(v: &Value, api: Api) -> Result<Vec<Listed>, String> {
    let (field, key) = match api {
        Api::Ollama => ("models", "name"),
        Api::OpenAi => ("data", "id"),
    };
    let entries = v[field]
        .as_array()
        .ok_or_else(|| format!("expected JSON with a \"{field}\" list"))?;
    if entries.len() > MAX_MODELS {
        return Err(format!(
            "lists {} models, more than the {MAX_MODELS} this reads",
            entries.len()
        ));
    }
    let mut out: Vec<Listed> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let name = e[key]
            .as_str()
            .or_else(|| e["model"].as_str())
            .ok_or_else(|| format!("{field}[{i}] has no \"{key}\""))?;
        if name.trim().is_empty()
            || name.chars().count() > MAX_NAME
            || name.chars().any(char::is_control)
        {
            return Err(format!(
                "{field}[{i}]: a model name that is empty, longer than {MAX_NAME} characters or holds control characters"
            ));
        }
        let caps = e["capabilities"].as_array();
        let embed_only = caps.is_some_and(|c| !c.is_empty() && c.iter().all(|c| c == "embedding"));
        if !out.iter().any(|l| l.name == name) {
            out.push(Listed {
                name: name.to_owned(),
                embed_only,
            });
        }
    }
    Ok(out)
}

/// Why a request reached no answer, in a few words (never the URL or a key).
fn unreached(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("no answer within {}", words(ASK_WITHIN));
    }
    if e.is_connect() {
        return format!("cannot connect: {}", root_cause(e));
    }
    format!("no answer: {}", root_cause(e))
}

/// The innermost cause of `e` (hyper's and the OS's words, without reqwest's URL).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    crate::text::bounded(&cur.to_string())
}

/// `4 MiB` for 4 << 20 bytes.
fn size_words(bytes: usize) -> String {
    format!("{} MiB", bytes >> 20)
}
