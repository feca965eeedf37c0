//! The lean anchor for `scripts/bench.sh`: the smallest hyper proxy that does labrouter's
//! irreducible work for a chat completion, and nothing else — the yardstick labrouter's own
//! overhead is measured against.
//!
//! Per request: read the whole body, find `model` (serde, borrowing), put the upstream's
//! model name in its place, forward on a pooled keep-alive connection, read the whole answer
//! and check that a 200 is a completion (it has `choices`), then answer with it. No routing,
//! no breaker, no metrics, no logs.
//!
//! `cargo run --release --example lean_proxy -- --listen 127.0.0.1:PORT --upstream
//!  127.0.0.1:PORT [--model sim-fast] [--current-thread]`

#![allow(clippy::print_stdout)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::de::IgnoredAny;
use serde::Deserialize;

#[derive(Debug, Parser)]
#[command(about = "The smallest proxy doing labrouter's irreducible work, for benchmarks")]
struct Args {
    /// Loopback address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The machine, host:port on loopback; requests go to its /v1/chat/completions.
    #[arg(long)]
    upstream: SocketAddr,
    /// The model name the upstream is asked for.
    #[arg(long, default_value = "sim-fast")]
    model: String,
    /// Serve on a current-thread runtime instead of a multi-thread one.
    #[arg(long)]
    current_thread: bool,
}

/// What the proxy reads of a request: `model`, borrowed from the body.
#[derive(Deserialize)]
struct Asked<'a> {
    #[serde(borrow)]
    model: &'a str,
}

/// The allocator labrouter's binary uses, so that the two differ only in what they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What it checks of an answer: that it has `choices`.
#[derive(Deserialize)]
struct Completion {
    #[allow(dead_code)]
    choices: IgnoredAny,
}

struct Lean {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: hyper::Uri,
    model: String,
}

type Answer = Response<Full<Bytes>>;

fn status(code: StatusCode, why: &'static str) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from_static(why.as_bytes())));
    *r.status_mut() = code;
    r
}

impl Lean {
    async fn handle(&self, req: Request<Incoming>) -> Answer {
        let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
            return status(StatusCode::BAD_REQUEST, "body");
        };
        let Some(out) = self.rewrite(&body) else {
            return status(StatusCode::BAD_REQUEST, "model");
        };
        let up = Request::post(self.uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(out));
        let Ok(up) = up else {
            return status(StatusCode::INTERNAL_SERVER_ERROR, "request");
        };
        let Ok(answer) = self.client.request(up).await else {
            return status(StatusCode::BAD_GATEWAY, "upstream");
        };
        let (parts, body) = answer.into_parts();
        let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
            return status(StatusCode::BAD_GATEWAY, "upstream body");
        };
        if parts.status == StatusCode::OK && serde_json::from_slice::<Completion>(&bytes).is_err() {
            return status(StatusCode::BAD_GATEWAY, "malformed");
        }
        let mut r = Response::new(Full::new(bytes));
        *r.status_mut() = parts.status;
        if let Some(ct) = parts.headers.get(hyper::header::CONTENT_TYPE) {
            r.headers_mut()
                .insert(hyper::header::CONTENT_TYPE, ct.clone());
        }
        r
    }

    /// The body with `model`'s value replaced by the upstream's name, spliced in place.
    fn rewrite(&self, body: &[u8]) -> Option<Bytes> {
        let asked: Asked = serde_json::from_slice(body).ok()?;
        let start = asked.model.as_ptr() as usize - body.as_ptr() as usize;
        let end = start + asked.model.len();
        let mut out = Vec::with_capacity(body.len() + self.model.len());
        out.extend_from_slice(&body[..start]);
        out.extend_from_slice(self.model.as_bytes());
        out.extend_from_slice(&body[end..]);
        Some(Bytes::from(out))
    }
}

async fn serve(args: Args) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let lean = std::sync::Arc::new(Lean {
        client: Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .build(connector),
        uri: format!("http://{}/v1/chat/completions", args.upstream)
            .parse()
            .map_err(std::io::Error::other)?,
        model: args.model,
    });
    println!(
        "lean_proxy serving http://{} -> {}",
        args.listen, args.upstream
    );
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let lean = std::sync::Arc::clone(&lean);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let lean = std::sync::Arc::clone(&lean);
                async move { Ok::<_, Infallible>(lean.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.listen.ip().is_loopback() || !args.upstream.ip().is_loopback() {
        eprintln!("lean_proxy: loopback addresses only");
        return ExitCode::FAILURE;
    }
    let runtime = if args.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lean_proxy: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lean_proxy: {e}");
            ExitCode::FAILURE
        }
    }
}
