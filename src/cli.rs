//! The command line (docs/api.md "Command line"): the clap definitions here; each subcommand's body in
//! [`run()`] (`cli/run.rs`), which the binary calls once it has parsed and started logging;
//! `check` (and `check --live`) in `cli/check.rs`, `machine add` in `cli/machine.rs`, what
//! both ask a machine in `cli/ask.rs`, `task` in `cli/task.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

mod ask;
mod check;
mod machine;
mod run;
pub mod task;

pub use run::run;

#[derive(Debug, Parser)]
#[command(
    name = "labrouter",
    version,
    about = "Routes AI work across the machines of a home lab, with circuit breakers and fallback chains"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// `--api` of `labrouter sim` and `labrouter machine add`: which API a machine speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimApi {
    Openai,
    Ollama,
}

impl From<SimApi> for crate::registry::Api {
    fn from(api: SimApi) -> Self {
        match api {
            SimApi::Openai => crate::registry::Api::OpenAi,
            SimApi::Ollama => crate::registry::Api::Ollama,
        }
    }
}

/// One name of `labrouter sim --models`: not empty, no spaces.
fn model_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("a model name is empty (names are separated by commas)".into());
    }
    if name.chars().any(char::is_whitespace) {
        return Err(format!("model name {name:?} has a space in it"));
    }
    Ok(name.to_owned())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the OpenAI-compatible API and route requests across the registry's machines.
    Serve {
        /// The registry file.
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
        /// Serve requests on this many threads of their own, each with its own connections
        /// to the machines, as nginx's worker_processes (default: one per core); 0 serves
        /// them on the runtime the background work shares. See the README's Performance.
        #[arg(long, env = "LABROUTER_WORKERS", value_parser = clap::value_parser!(u16).range(0..=1024))]
        workers: Option<u16>,
    },
    /// Validate a registry file without serving; with --live, also ask every machine.
    Check {
        #[arg(default_value = "registry.yaml")]
        file: PathBuf,
        /// Then ask every machine at once (at most 5 s each) whether it answers and lists
        /// each model the registry names on it; exit 1 when one that answered lacks one.
        #[arg(long)]
        live: bool,
    },
    /// Add a machine to registry.yaml, asking it what it is and what it serves.
    Machine {
        #[command(subcommand)]
        command: MachineCommand,
    },
    /// Print a running router's breakers as a table.
    Status {
        /// The router's base URL (bearer key, if needed, from LABROUTER_API_KEY).
        #[arg(long, default_value = "http://127.0.0.1:8080", env = "LABROUTER_URL")]
        url: String,
        /// Print the raw /status JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Submit, show, list and cancel durable tasks on a running router (docs/api.md "Tasks").
    Task {
        /// The router's base URL (bearer key, if needed, from LABROUTER_API_KEY).
        #[arg(
            long,
            global = true,
            default_value = "http://127.0.0.1:8080",
            env = "LABROUTER_URL"
        )]
        url: String,
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Print the route and chain a prompt would take, and why.
    Route {
        /// The prompt text (the last user message).
        text: String,
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
        /// The request's `model` field (default: auto).
        #[arg(long)]
        model: Option<String>,
        /// Pretend the request carries an image part.
        #[arg(long)]
        image: bool,
    },
    /// Run the pure breaker on a recorded event trace and print a JSON receipt.
    Replay {
        /// The trace file (docs/api.md "Command line").
        trace: PathBuf,
    },
    /// Run one simulated machine, OpenAI-compatible or Ollama, on a loopback address (for
    /// trying labrouter without a lab).
    ///
    /// It answers as real servers do: /v1/chat/completions, /v1/completions, /v1/embeddings,
    /// /v1/responses (the Responses API; stateless, as Ollama's), /v1/images/generations,
    /// /edits and /variations (a 4x4 PNG), /v1/audio/transcriptions and /translations (a
    /// fixed transcript), /v1/audio/speech (a short WAV, streamed), /v1/rerank (and
    /// /v1/reranking, /rerank) and /v1/models; with
    /// `--api ollama` also Ollama's /api/chat, /api/generate, /api/embed, /api/tags,
    /// /api/show, /api/ps and /api/version. Its text is "ok from NAME", streamed as
    /// "NAME-0 NAME-1 NAME-2 "; a request offering tools gets a call to the first one.
    Sim {
        #[arg(long, default_value = "127.0.0.1:11434")]
        listen: SocketAddr,
        /// The machine's name, which its answers carry.
        #[arg(long, default_value = "sim")]
        name: String,
        /// The API it speaks: openai, or ollama (Ollama's own /api/... routes too).
        #[arg(long, value_enum, default_value_t = SimApi::Openai)]
        api: SimApi,
        /// The models it lists and answers as, comma-separated (default: sim-model, or
        /// sim-model:latest with --api ollama). On Ollama's routes a name with "embed" is
        /// an embedding model, one with "vl" or "vision" sees images too.
        #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = model_name)]
        models: Vec<String>,
    },
    /// Run a simulated lab on loopback with a scripted outage, narrated as it happens.
    Demo {
        /// Play the story this many times faster (timeouts and cooldowns too): 0.25 to 4.
        #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
        speed: f64,
        /// No live progress line (it is drawn only when stdout is a terminal anyway).
        #[arg(long)]
        no_progress: bool,
    },
    /// The daily Telegram digest, now: print it, send it, or write its picture.
    #[command(group(clap::ArgGroup::new("how").required(true).args(["print", "send", "png"])))]
    Digest {
        /// Render it to stdout as Telegram would show it (no network).
        #[arg(long)]
        print: bool,
        /// Send it to the registry's Telegram chat now (token from telegram.token_env).
        #[arg(long)]
        send: bool,
        /// Write its picture, the last 30 days of trips per machine, to FILE as PNG (no
        /// network; reads the store under server.state_dir).
        #[arg(long, value_name = "FILE")]
        png: Option<PathBuf>,
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
    },
}

/// `labrouter machine ...`: the lab's machines in registry.yaml.
#[derive(Debug, Subcommand)]
pub enum MachineCommand {
    /// Ask a machine what it is (Ollama answers GET /api/version) and what it serves, print
    /// it, and add the machine and one model entry per model to registry.yaml, keeping every
    /// byte already there. Refused, changing nothing (exit 1), when the name exists, the
    /// machine does not answer within 5 s, or the result would not pass `check`.
    Add {
        /// The machine's name in the registry (gpu-box2).
        name: String,
        /// Where it answers: http://HOST:PORT, or its OpenAI base URL ending in /v1.
        url: String,
        /// The API it speaks; without it, Ollama when GET /api/version answers.
        #[arg(long, value_enum)]
        api: Option<SimApi>,
        /// The registry file to add it to.
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
        /// The environment variable holding the machine's bearer key, for a machine that
        /// wants one (the registry stores this name, never the key).
        #[arg(long, value_name = "VAR")]
        api_key_env: Option<String>,
    },
}

/// `labrouter task ...`: what to do with tasks.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Submit a chat task; prints its id and status (with --wait, the answer).
    Submit {
        /// The prompt (one user message).
        text: String,
        /// Force this route (as x-labrouter-route) instead of routing by content.
        #[arg(long)]
        route: Option<String>,
        /// Run only after this task succeeded (repeat for several); `{{after.0}}` in TEXT is
        /// replaced by the first one's answer.
        #[arg(long, value_name = "ID")]
        after: Vec<String>,
        /// -100..100; higher runs first.
        #[arg(long, allow_hyphen_values = true)]
        priority: Option<i32>,
        /// A duration from now (2h) or an RFC 3339 time; unfinished by then, it expires.
        #[arg(long)]
        deadline: Option<String>,
        /// The request's `model`: `auto` routes by content, a route or model name picks it.
        #[arg(long, default_value = "auto")]
        model: String,
        /// Submit at most once: the same key with the same task returns the existing one.
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
        /// Wait until it finished and print the answer (exit status 1 if it did not succeed).
        #[arg(long)]
        wait: bool,
        /// Print the raw task object instead.
        #[arg(long)]
        json: bool,
    },
    /// Show one task: status, route, attempts, what it waits for, its answer or error.
    Show {
        id: String,
        /// Hold the answer until the task finished or this long passed (at most 10m).
        #[arg(long, value_name = "DURATION")]
        wait: Option<String>,
        /// Print the raw task object instead.
        #[arg(long)]
        json: bool,
    },
    /// List tasks, newest first, as a table.
    List {
        /// Only tasks in this status (blocked, queued, waiting, running, succeeded, failed,
        /// cancelled, expired).
        #[arg(long)]
        status: Option<String>,
        /// At most this many (1..1000; the router's default is 100).
        #[arg(long)]
        limit: Option<u32>,
        /// Tasks older than this cursor (a previous page's `next_before`: a number, or a
        /// task id from a router on the shared queue).
        #[arg(long, value_name = "CURSOR")]
        before: Option<String>,
        /// Print the raw page instead.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a task that has not finished (and its follow-ups); prints its new status.
    Cancel {
        id: String,
        /// Print the raw task object instead.
        #[arg(long)]
        json: bool,
    },
    /// Write every task of the registry's queue (`cluster.tasks`: the local SQLite file, or
    /// the shared queue in Redis) to FILE as JSON lines, whole or not at all.
    Export {
        file: PathBuf,
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
    },
    /// Read FILE whole and check every line, then write its tasks into the registry's queue;
    /// any problem (a line, a count, an id already there) changes nothing (exit 1). A local
    /// queue is imported only while no router has it open.
    Import {
        file: PathBuf,
        #[arg(long, short, default_value = "registry.yaml", env = "LABROUTER_CONFIG")]
        config: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command `labrouter <command> <args>` parses to, or clap's error text.
    fn parsed(command: &str, args: &[&str]) -> Result<Command, String> {
        let line = ["labrouter", command]
            .into_iter()
            .chain(args.iter().copied());
        Cli::try_parse_from(line)
            .map(|cli| cli.command)
            .map_err(|e| e.to_string())
    }

    /// The sim's `--api` of one command line, or clap's error text.
    fn sim_api(args: &[&str]) -> Result<SimApi, String> {
        match parsed("sim", args)? {
            Command::Sim { api, .. } => Ok(api),
            other => Err(format!("not sim: {other:?}")),
        }
    }

    /// The sim's `--models` of one command line, or clap's error text.
    fn sim_models(args: &[&str]) -> Result<Vec<String>, String> {
        match parsed("sim", args)? {
            Command::Sim { models, .. } => Ok(models),
            other => Err(format!("not sim: {other:?}")),
        }
    }

    /// `serve`'s `--workers` of one command line, or clap's error text.
    fn serve_workers(args: &[&str]) -> Result<Option<u16>, String> {
        match parsed("serve", args)? {
            Command::Serve { workers, .. } => Ok(workers),
            other => Err(format!("not serve: {other:?}")),
        }
    }

    #[test]
    fn serve_workers_is_one_per_core_by_default_or_a_number_up_to_1024() {
        assert_eq!(serve_workers(&[]), Ok(None));
        assert_eq!(serve_workers(&["--workers", "0"]), Ok(Some(0)));
        assert_eq!(serve_workers(&["--workers", "3"]), Ok(Some(3)));
        assert_eq!(serve_workers(&["--workers", "1024"]), Ok(Some(1024)));
        assert!(super::run::one_per_core() >= 1);
        for bad in ["1025", "many"] {
            let err = serve_workers(&["--workers", bad]).unwrap_err();
            assert!(
                err.contains(&format!("'{bad}'")) && err.contains("--workers"),
                "{err}"
            );
        }
    }

    #[test]
    fn sim_api_is_openai_by_default_or_ollama() {
        assert_eq!(sim_api(&[]), Ok(SimApi::Openai));
        assert_eq!(sim_api(&["--api", "ollama"]), Ok(SimApi::Ollama));
        assert_eq!(
            crate::registry::Api::from(SimApi::Ollama),
            crate::registry::Api::Ollama
        );
        let err = sim_api(&["--api", "vllm"]).unwrap_err();
        assert!(err.contains("invalid value 'vllm'") && err.contains("openai, ollama"));
    }

    #[test]
    fn sim_models_are_a_comma_separated_list_of_names() {
        assert_eq!(sim_models(&[]), Ok(vec![]));
        assert_eq!(
            sim_models(&["--models", "qwen3:8b,nomic-embed-text,llava"]),
            Ok(vec![
                "qwen3:8b".into(),
                "nomic-embed-text".into(),
                "llava".into()
            ])
        );
        for bad in ["a,,b", "", "a, b"] {
            let err = sim_models(&["--models", bad]).unwrap_err();
            assert!(err.contains("--models"), "{bad:?}: {err}");
        }
    }
}
