//! The labrouter binary: parse the command line, start logging, call the library.

use std::process::ExitCode;

use clap::Parser;
use labrouter::cli::{Cli, Command, LogFormat};

/// mimalloc: the proxy allocates and frees small buffers per request (headers, bodies,
/// futures); glibc's malloc spent ~15% of a proxied request's CPU, and mimalloc saves ~17%
/// of it (README, Performance). Built without transparent huge pages (`no_thp`), which
/// would nearly double the idle RSS.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    match runtime.block_on(labrouter::cli::run(cli.command)) {
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
