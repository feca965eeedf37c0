//! One simulated OpenAI-compatible machine for `scripts/bench.sh`, with a fault fixed at start.
//!
//! `cargo run --release --example bench_sim -- --listen 127.0.0.1:PORT --name NAME
//!  [--fault ok|hang|drip:10ms|slow:200ms|status:503|reset|malformed] [--chunks N]`
//!
//! Serves on loopback only (the sim refuses anything else) in a multi-thread runtime until
//! SIGTERM or Ctrl-C.

#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use labrouter::registry::parse_duration;
use labrouter::sim::{Fault, Sim};

#[derive(Debug, Parser)]
#[command(about = "A simulated OpenAI-compatible machine on loopback, for benchmarks")]
struct Args {
    /// Loopback address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Name the sim puts in its answers.
    #[arg(long, default_value = "sim")]
    name: String,
    /// ok, hang, reset, malformed, drip:DUR, slow:DUR, status:CODE.
    #[arg(long, default_value = "ok", value_parser = fault)]
    fault: Fault,
    /// SSE content chunks per stream before `data: [DONE]`.
    #[arg(long, default_value_t = 3)]
    chunks: usize,
}

fn fault(s: &str) -> Result<Fault, String> {
    let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
    match kind {
        "ok" => Ok(Fault::Ok),
        "hang" => Ok(Fault::Hang),
        "reset" => Ok(Fault::Reset),
        "malformed" => Ok(Fault::Malformed),
        "drip" => parse_duration(arg).map(Fault::Drip),
        "slow" => parse_duration(arg).map(Fault::SlowFirstByte),
        "status" => arg
            .parse::<u16>()
            .map(|code| Fault::Status {
                code,
                retry_after: None,
            })
            .map_err(|e| format!("status:CODE: {e}")),
        _ => Err(format!(
            "unknown fault '{s}': expected ok, hang, reset, malformed, drip:10ms, slow:200ms or status:503"
        )),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_sim: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let sim = match Sim::start_on(&args.name, args.listen).await {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("bench_sim: cannot listen on {}: {e}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        sim.set_chunks(args.chunks);
        sim.set_precise(true);
        sim.set(args.fault.clone());
        println!(
            "bench_sim {} serving {} fault={:?} chunks={}",
            args.name,
            sim.base_url(),
            args.fault,
            args.chunks
        );
        stopped().await;
        sim.shutdown();
        ExitCode::SUCCESS
    })
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
