//! Each subcommand's body: what `labrouter <command>` does once its arguments are parsed.
//! CLI glue, so errors are `anyhow` and results are printed here.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::Command;
use crate::registry::{Api, Registry};
use crate::run::RunOptions;
use crate::service::Service;

/// Runs `command`; an error is for the binary to print and exit on.
pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { config, workers } => {
            serve(&config, workers.map_or_else(one_per_core, usize::from)).await
        }
        Command::Status { url, json } => crate::status::print(&url, json).await,
        Command::Task { url, command } => super::task::run(&url, command).await,
        Command::Check { file, live } => super::check::check(&file, live).await,
        Command::Machine { command } => super::machine::run(command).await,
        Command::Route {
            text,
            config,
            model,
            image,
        } => route(&config, &text, model.as_deref(), image),
        Command::Replay { trace } => replay(&trace),
        Command::Sim {
            listen,
            name,
            api,
            models,
        } => sim(listen, &name, api.into(), &models).await,
        Command::Digest {
            print,
            send,
            png,
            config,
        } => digest(&config, print, send, png.as_deref()).await,
        Command::Demo { speed, no_progress } => demo(speed, no_progress).await,
    }
}

/// `labrouter route`: the route, chain and why for a prompt, printed.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
fn route(config: &Path, text: &str, model: Option<&str>, image: bool) -> anyhow::Result<ExitCode> {
    let reg = Registry::load(config)?;
    let router = crate::route::Matcher::new(&reg);
    let decision = match router.decide(&reg, None, model, text, image) {
        Ok(d) => d,
        Err(e) => bail!("{e}"),
    };
    let chain: Vec<String> = decision
        .chain(&reg)
        .iter()
        .map(|&m| reg.target_name(m))
        .collect();
    println!("route: {}", decision.label(&reg));
    println!("chain: {}", chain.join(" -> "));
    println!("why:   {}", decision.why_words());
    Ok(ExitCode::SUCCESS)
}

/// `labrouter replay`: a trace's receipt, printed as JSON.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
fn replay(trace: &Path) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(trace)
        .with_context(|| format!("cannot read {}", trace.display()))?;
    match crate::replay::replay(&text) {
        Ok(receipt) => {
            println!("{}", receipt.to_json());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{}: {e}", trace.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `labrouter sim`: a simulated machine on `listen` until Ctrl-C or SIGTERM, listing
/// `models` (its default one if none).
async fn sim(
    listen: SocketAddr,
    name: &str,
    api: Api,
    models: &[String],
) -> anyhow::Result<ExitCode> {
    let sim = crate::sim::Sim::start_with(name, listen, api)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    if !models.is_empty() {
        sim.set_models(&models.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let models = models.join(",");
    tracing::info!(url = %sim.base_url(), %name, api = api.as_str(), %models, "simulated machine serving; Ctrl-C stops it");
    shutdown_signal().await;
    sim.shutdown();
    Ok(ExitCode::SUCCESS)
}

/// `labrouter digest`: the Telegram digest printed, sent, or its picture written.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
async fn digest(
    config: &Path,
    print: bool,
    send: bool,
    png: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let reg = Registry::load(config)?;
    if let Some(file) = png {
        let photo = crate::telegram::photo::offline(&reg, jiff::Timestamp::now()).await?;
        std::fs::write(file, &photo.png)
            .with_context(|| format!("cannot write the picture to {}", file.display()))?;
        eprintln!(
            "{}: {} bytes ({})",
            file.display(),
            photo.png.len(),
            photo.caption
        );
    }
    if print {
        let parts = crate::telegram::render_offline(&reg, jiff::Timestamp::now()).await?;
        let text: Vec<String> = parts
            .iter()
            .map(|p| crate::telegram::text::plain(p))
            .collect();
        println!("{}", text.join("\n\n"));
    }
    if send {
        let n = crate::telegram::send_offline(&reg).await?;
        eprintln!("digest sent ({n} message{})", if n == 1 { "" } else { "s" });
    }
    Ok(ExitCode::SUCCESS)
}

/// `labrouter demo`: the scripted evening; fails when any request or task failed.
async fn demo(speed: f64, no_progress: bool) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let mut out = std::io::stdout();
    let opts = crate::demo::Options {
        speed,
        progress: !no_progress && out.is_terminal(),
    };
    let summary = crate::demo::run(&opts, &mut out).await?;
    Ok(match summary.failed {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// `serve`'s serving threads when `--workers` is not given: one per core, as nginx's
/// `worker_processes auto` (README "Performance": they proxy more requests than the shared
/// runtime and take durable submits as fast).
pub(super) fn one_per_core() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// `labrouter serve`: binds `server.listen` and runs the whole service until Ctrl-C or
/// SIGTERM, on `workers` serving threads of their own (0: on this runtime).
async fn serve(config: &Path, workers: usize) -> anyhow::Result<ExitCode> {
    // Before the fleet is built: its machines get a connection pool per serving thread.
    crate::upstream::worker_pools(workers);
    let svc = Arc::new(Service::open(config)?);
    svc.share_tasks().await?;
    let listen = svc.fleet().registry.server.listen;
    let listener =
        crate::server::listen(listen).with_context(|| format!("cannot listen on {listen}"))?;
    crate::run(
        svc,
        listener,
        shutdown_signal(),
        RunOptions::service(workers),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
