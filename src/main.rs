//! The labrouter binary: parse the command line, start logging, call the library.

use std::process::ExitCode;

use clap::Parser;
use labrouter::cli::{Cli, Command, LogFormat};

/// mimalloc: the proxy allocates and frees small buffers per request (headers, bodies,
/// futures); glibc's malloc spent ~15% of a proxied request's CPU, and mimalloc saves ~17%
/// of it (README, Performance). Built without transparent huge pages (`no_thp`), which
/// would nearly double the idle RSS. Serving threads allocate from heaps of their own
/// (`labrouter::heap`).
#[global_allocator]
static GLOBAL: labrouter::heap::Alloc = labrouter::heap::Alloc;

#[cfg(labrouter_hot_text)]
mod huge_text;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // For the commands that serve, while this is the only thread.
    #[cfg(labrouter_hot_text)]
    let huge =
        matches!(cli.command, Command::Serve { .. } | Command::Demo { .. }).then(huge_text::remap);
    // The demo narrates what the logs would say; RUST_LOG still turns them on.
    let quiet = matches!(cli.command, Command::Demo { .. });
    // Lines still on their way to stderr are written before the process ends.
    let _flush = init_tracing(cli.log_format, if quiet { "error" } else { "info" });
    #[cfg(labrouter_hot_text)]
    if let Some(moved) = huge {
        moved.log();
    }
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

fn init_tracing(format: LogFormat, default: &str) -> log_lines::Flush {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal (and never with NO_COLOR): not in journald.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let (lines, flush) = log_lines::start();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(lines);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    flush
}

/// Log lines reach stderr from a thread of their own, written in batches: a request's
/// access-log line costs its formatting and a hand-over, not a `write` to journald's pipe
/// on the thread serving it. Nothing is dropped: when the writer falls 16,384 lines
/// behind, logging waits for it, as it would for stderr.
mod log_lines {
    use std::io::{self, Write};
    use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
    use std::time::Duration;

    const BEHIND_MAX: usize = 16_384;

    enum Msg {
        Line(Vec<u8>),
        Flush(SyncSender<()>),
    }

    /// Where the subscriber's lines go.
    pub struct Lines(SyncSender<Msg>);

    /// One event's line, handed over whole when the subscriber is done with it.
    pub struct Line {
        buf: Vec<u8>,
        to: SyncSender<Msg>,
    }

    /// Writes what is still queued when dropped (at most a second's wait).
    pub struct Flush(Option<SyncSender<Msg>>);

    pub fn start() -> (Lines, Flush) {
        let (tx, rx) = sync_channel(BEHIND_MAX);
        let spawned = std::thread::Builder::new()
            .name("labrouter-log".into())
            .spawn(move || write_out(&rx));
        match spawned {
            Ok(_) => (Lines(tx.clone()), Flush(Some(tx))),
            // No thread: each line is written where it is made, as before.
            Err(_) => {
                let (direct, _) = sync_channel(0);
                (Lines(direct), Flush(None))
            }
        }
    }

    fn write_out(rx: &Receiver<Msg>) {
        let mut out = io::BufWriter::with_capacity(64 << 10, io::stderr());
        while let Ok(mut msg) = rx.recv() {
            loop {
                match msg {
                    Msg::Line(line) => {
                        let _ = out.write_all(&line);
                    }
                    Msg::Flush(done) => {
                        let _ = out.flush();
                        let _ = done.send(());
                    }
                }
                match rx.try_recv() {
                    Ok(next) => msg = next,
                    Err(_) => break,
                }
            }
            let _ = out.flush();
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
        type Writer = Line;

        fn make_writer(&'a self) -> Line {
            Line {
                buf: Vec::new(),
                to: self.0.clone(),
            }
        }
    }

    impl Write for Line {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.buf.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Drop for Line {
        fn drop(&mut self) {
            if self.buf.is_empty() {
                return;
            }
            let line = std::mem::take(&mut self.buf);
            if let Err(e) = self.to.send(Msg::Line(line)) {
                // The writer is gone: the line goes out here.
                if let Msg::Line(line) = e.0 {
                    let _ = io::stderr().write_all(&line);
                }
            }
        }
    }

    impl Drop for Flush {
        fn drop(&mut self) {
            let Some(tx) = self.0.take() else {
                return;
            };
            let (done, wait) = sync_channel(1);
            if tx.send(Msg::Flush(done)).is_ok() {
                let _ = wait.recv_timeout(Duration::from_secs(1));
            }
        }
    }
}
