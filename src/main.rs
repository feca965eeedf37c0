//! The labrouter binary: parse the command line, start logging, call the library.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;
use labrouter::registry::Registry;
use labrouter::Service;

mod cli;

use cli::{Cli, Command, LogFormat};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo narrates what the logs would say; RUST_LOG still turns them on.
    let quiet = matches!(cli.command, Command::Demo { .. });
    init_tracing(cli.log_format, if quiet { "error" } else { "info" });
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("labrouter: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("labrouter: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal (and never with NO_COLOR): not in journald.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[allow(clippy::print_stdout)] // the CLI's printing
async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { config } => serve(&config).await,
        Command::Status { url, json } => labrouter::status::print(&url, json).await,
        Command::Check { file } => match Registry::load(&file) {
            Ok(reg) => {
                println!(
                    "{}: ok: {} machines, {} models, {} routes (version {})",
                    file.display(),
                    reg.machines.len(),
                    reg.models.len(),
                    reg.routes.len(),
                    reg.version
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Route {
            text,
            config,
            model,
            image,
        } => {
            let reg = Registry::load(&config)?;
            let router = labrouter::route::Router::new(&reg);
            let decision = match router.decide(&reg, None, model.as_deref(), &text, image) {
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
        Command::Replay { trace } => {
            let text = std::fs::read_to_string(&trace)
                .with_context(|| format!("cannot read {}", trace.display()))?;
            match labrouter::replay::replay(&text) {
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
        Command::Sim { listen, name } => {
            let sim = labrouter::sim::Sim::start_on(&name, listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            tracing::info!(url = %sim.base_url(), %name, "simulated machine serving; Ctrl-C stops it");
            shutdown_signal().await;
            sim.shutdown();
            Ok(ExitCode::SUCCESS)
        }
        Command::Digest {
            print,
            send,
            config,
        } => {
            let reg = Registry::load(&config)?;
            if print {
                let parts =
                    labrouter::telegram::render_offline(&reg, jiff::Timestamp::now()).await?;
                let text: Vec<String> = parts
                    .iter()
                    .map(|p| labrouter::telegram::text::plain(p))
                    .collect();
                println!("{}", text.join("\n\n"));
            }
            if send {
                let n = labrouter::telegram::send_offline(&reg).await?;
                eprintln!("digest sent ({n} message{})", if n == 1 { "" } else { "s" });
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo { speed, no_progress } => {
            use std::io::IsTerminal;
            let mut out = std::io::stdout();
            let opts = labrouter::demo::Options {
                speed,
                progress: !no_progress && out.is_terminal(),
            };
            let summary = labrouter::demo::run(&opts, &mut out).await?;
            Ok(match summary.failed {
                0 => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            })
        }
    }
}

/// `labrouter serve`: the service with memory, reloads, health checks and a bounded drain.
async fn serve(config: &std::path::Path) -> anyhow::Result<ExitCode> {
    let svc = Arc::new(Service::open(config)?);
    let (listen, grace) = {
        let lab = svc.lab();
        (
            lab.registry.server.listen,
            lab.registry.server.shutdown_grace,
        )
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    {
        let lab = svc.lab();
        tracing::info!(
            %listen,
            machines = lab.registry.machines.len(),
            routes = lab.registry.routes.len(),
            config = %config.display(),
            "labrouter serving"
        );
    }
    tokio::spawn(labrouter::health::run(Arc::clone(&svc)));
    tokio::spawn(labrouter::service::prune_daily(Arc::clone(&svc)));
    // Alerts and the daily digest, when the registry has a telegram: block; off the request path.
    let _telegram = labrouter::telegram::spawn(&svc);
    #[cfg(unix)]
    tokio::spawn(reload_on_sighup(Arc::clone(&svc)));
    // Kept alive for as long as we serve; a failure to watch is not fatal (SIGHUP works).
    let _watcher = labrouter::watch::spawn(Arc::clone(&svc), config)
        .map_err(
            |e| tracing::warn!(error = %e, "not watching the registry file; reload with SIGHUP"),
        )
        .ok();
    labrouter::sdnotify::notify("READY=1");
    let stopping = async {
        shutdown_signal().await;
        labrouter::sdnotify::notify("STOPPING=1");
        tracing::info!("shutting down: no new connections; letting requests in flight finish");
    };
    labrouter::serve(listener, Arc::clone(&svc), stopping, grace).await?;
    if let Some(store) = svc.store() {
        store.flush(std::time::Duration::from_secs(5));
    }
    tracing::info!("labrouter stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
async fn reload_on_sighup(svc: Arc<Service>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the registry");
        let svc = Arc::clone(&svc);
        // Errors are logged and ledgered by reload.
        let _ = tokio::task::spawn_blocking(move || svc.reload()).await;
    }
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
