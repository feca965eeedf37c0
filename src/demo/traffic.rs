//! The demo's interactive agents: a few workers sending a steady mix of requests to the
//! router, each told honestly as served (a complete answer) or failed (anything else).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::outcome::{MachineId, ModelId};
use crate::registry::Registry;

/// The kinds of request, each named like the route its prompt is routed to by keywords.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Code,
    Vision,
    Summarize,
    Chat,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Code, Kind::Vision, Kind::Summarize, Kind::Chat];

    pub fn route(self) -> &'static str {
        match self {
            Kind::Code => "code",
            Kind::Vision => "vision",
            Kind::Summarize => "summarize",
            Kind::Chat => "chat",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The order requests come in, round and round: GPU work most, then the CPU box's summaries,
/// then small talk for the local model.
const MIX: [Kind; 8] = [
    Kind::Code,
    Kind::Vision,
    Kind::Summarize,
    Kind::Code,
    Kind::Chat,
    Kind::Vision,
    Kind::Code,
    Kind::Summarize,
];

const CODE: [&str; 3] = [
    "refactor this rust function to take a slice",
    "find the bug in this python script",
    "write a unit test for the config parser",
];
const VISION: [&str; 2] = [
    "what is on this screenshot?",
    "read the serial number in this photo",
];
const SUMMARIZE: [&str; 2] = [
    "summarize last night's backup log",
    "write a tldr of the meeting notes",
];
const CHAT: [&str; 2] = [
    "what should I cook tonight?",
    "suggest a name for the new NAS",
];

/// A 1×1 PNG: vision requests carry an image part, as a real client's would.
const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// The API a request speaks: agents speak OpenAI's; Home Assistant's small talk and half of
/// the editor's code requests speak Ollama's (docs/api.md "The Ollama endpoints"), to the same router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    OpenAi,
    Ollama,
}

/// The body of request `n`, the API it speaks, and whether it streams.
fn body(kind: Kind, n: u64) -> (Value, Api, bool) {
    let pick = |list: &[&'static str]| list[(n / MIX.len() as u64) as usize % list.len()];
    let (content, api, stream) = match kind {
        // Streamed code in turns: OpenAI's SSE, then Ollama's NDJSON (like Continue).
        Kind::Code if n.is_multiple_of(2) => {
            let api = if (n / 2).is_multiple_of(2) {
                Api::OpenAi
            } else {
                Api::Ollama
            };
            (json!(pick(&CODE)), api, true)
        }
        Kind::Code => (json!(pick(&CODE)), Api::OpenAi, false),
        Kind::Vision => (
            json!([{"type": "text", "text": pick(&VISION)},
                   {"type": "image_url", "image_url": {"url": PIXEL}}]),
            Api::OpenAi,
            false,
        ),
        Kind::Summarize => (json!(pick(&SUMMARIZE)), Api::OpenAi, !n.is_multiple_of(2)),
        // Home Assistant's assistant: Ollama's API, streamed.
        Kind::Chat => (json!(pick(&CHAT)), Api::Ollama, true),
    };
    let body = json!({"model": "auto", "stream": stream,
                      "messages": [{"role": "user", "content": content}]});
    (body, api, stream)
}

/// Whether an answer was complete: a whole completion, or a stream that said it was done
/// and never broke.
fn complete(api: Api, stream: bool, bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    match (api, stream) {
        (Api::OpenAi, true) => text.contains("data: [DONE]") && !text.contains("\"error\""),
        (Api::OpenAi, false) => serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|v| v["choices"].as_array().map(|c| !c.is_empty()))
            .unwrap_or(false),
        (Api::Ollama, true) => text
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .is_some_and(|v| v["done"] == true && v.get("error").is_none()),
        (Api::Ollama, false) => serde_json::from_slice::<Value>(bytes)
            .ok()
            .is_some_and(|v| v["message"].is_object()),
    }
}

/// What became of one request.
#[derive(Debug)]
pub struct Done {
    pub n: u64,
    pub kind: Kind,
    pub outcome: Result<Served, String>,
}

#[derive(Debug)]
pub struct Served {
    /// `model@machine` that answered.
    pub target: String,
    /// `x-labrouter-skipped`: the targets passed over, with why.
    pub skipped: String,
    /// Served by a target other than its route's first.
    pub rerouted: bool,
}

/// What the workers share with the story: counters and the story's "this machine is down".
#[derive(Debug)]
pub struct Traffic {
    client: reqwest::Client,
    /// The router's base URL.
    router: String,
    sent: AtomicU64,
    /// Per kind: the machine and `model@machine` its route tries first.
    first: [(MachineId, String); 4],
    /// Per machine: the story has it broken now.
    pub down: Vec<AtomicBool>,
    /// Per machine: requests whose route tries it first, sent while it was down.
    pub tasks_while_down: Vec<AtomicU64>,
}

impl Traffic {
    pub fn new(reg: &Registry, router: &str) -> reqwest::Result<Traffic> {
        let first = Kind::ALL.map(|k| {
            let route = reg.routes.iter().find(|r| r.name == k.route());
            let model = route
                .and_then(|r| r.chain.first().copied())
                .unwrap_or(ModelId(0));
            (reg.models[model].machine, reg.target_name(model))
        });
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120))
            .build()?;
        Ok(Traffic {
            client,
            router: router.to_string(),
            sent: AtomicU64::new(0),
            first,
            down: reg
                .machines
                .iter()
                .map(|_| AtomicBool::new(false))
                .collect(),
            tasks_while_down: reg.machines.iter().map(|_| AtomicU64::new(0)).collect(),
        })
    }

    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The HTTP client the agents share (the pipeline's agent too).
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// The router's base URL.
    pub fn router(&self) -> &str {
        &self.router
    }

    /// Sends request `n` and reads its answer to the end.
    async fn request(&self, n: u64) -> Done {
        let kind = MIX[(n % MIX.len() as u64) as usize];
        let (first_machine, first_target) = &self.first[kind.index()];
        if self.down[first_machine.0].load(Ordering::Relaxed) {
            self.tasks_while_down[first_machine.0].fetch_add(1, Ordering::Relaxed);
        }
        let (body, api, stream) = body(kind, n);
        let outcome = self.send(&body, api, stream, first_target).await;
        Done { n, kind, outcome }
    }

    async fn send(
        &self,
        body: &Value,
        api: Api,
        stream: bool,
        first: &str,
    ) -> Result<Served, String> {
        let path = match api {
            Api::OpenAi => "/v1/chat/completions",
            Api::Ollama => "/api/chat",
        };
        let resp = self
            .client
            .post(format!("{}{path}", self.router))
            .json(body)
            .send()
            .await
            .map_err(|e| format!("router unreachable: {e}"))?;
        let status = resp.status();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let (target, skipped) = (header("x-labrouter-target"), header("x-labrouter-skipped"));
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("HTTP {status}, answer cut: {e}"))?;
        let text = String::from_utf8_lossy(&bytes);
        if status != reqwest::StatusCode::OK {
            let snippet: String = text.chars().take(160).collect();
            return Err(format!("HTTP {status}: {snippet}"));
        }
        let complete = complete(api, stream, &bytes);
        if !complete {
            return Err(format!("HTTP 200 from {target}, but not a complete answer"));
        }
        let rerouted = target != first;
        Ok(Served {
            target,
            skipped,
            rerouted,
        })
    }
}

/// One agent: a request every `every`, starting at `first`, each awaited to its end, until
/// `stop` says so.
pub async fn worker(
    traffic: Arc<Traffic>,
    first: Instant,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    done: mpsc::UnboundedSender<Done>,
) {
    let mut tick = tokio::time::interval_at(first, every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        if *stop.borrow() {
            return;
        }
        let n = traffic.sent.fetch_add(1, Ordering::Relaxed);
        let finished = traffic.request(n).await;
        if done.send(finished).is_err() {
            return;
        }
    }
}
