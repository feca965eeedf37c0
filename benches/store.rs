//! What remembering costs: the added latency of a breaker transition when the store is on
//! (the request path only queues it), the writer's time per transition, and disk bytes per
//! transition. Run: `cargo bench --bench store`.

// A benchmark measures wall time: std's clock is the point here.
#![allow(clippy::disallowed_types)]
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use labrouter::breaker::Event;
use labrouter::registry::Registry;
use labrouter::Fleet;

const N: usize = 20_000;

fn registry(state_dir: &std::path::Path) -> Registry {
    let yaml = format!(
        "server: {{ listen: 127.0.0.1:0, state_dir: \"{}\" }}\n\
         machines: {{ gpu-box: {{ url: \"http://127.0.0.1:9/v1\" }} }}\n\
         models: {{ m: {{ machine: gpu-box, name: m }} }}\n\
         routes: [{{ name: r, chain: [m] }}]\n",
        state_dir.display()
    );
    Registry::parse(&yaml, "bench.yaml").unwrap()
}

/// N transitions (manual open/close alternating); returns the mean time per step.
fn flip(lab: &Fleet) -> Duration {
    let started = Instant::now();
    for i in 0..N {
        let event = if i % 2 == 0 {
            Event::ForceOpen("bench".into())
        } else {
            Event::ForceClose("bench".into())
        };
        lab.machines.step(labrouter::outcome::MachineId(0), event);
    }
    started.elapsed() / N as u32
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let dir = tempfile::tempdir().unwrap();

    let bare = Fleet::new(registry(dir.path())).unwrap();
    let _ = flip(&bare); // warm up
    let without = flip(&bare);

    let svc = labrouter::Service::remembering(registry(dir.path()), None).unwrap();
    let lab = svc.fleet();
    let store = svc.store().unwrap();
    let db = store.path().to_path_buf();
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal = db.with_extension("db-wal");
    store.flush(Duration::from_secs(60));
    let before = size(&db) + size(&wal);
    let started = Instant::now();
    let with = flip(&lab);
    store.flush(Duration::from_secs(600));
    let written = started.elapsed() / N as u32;
    // Fold the WAL into the main file so the count is what stays on disk.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let after = size(&db) + size(&wal);

    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| breaker step with a transition, no store | {:.2} µs |",
        without.as_secs_f64() * 1e6
    );
    println!(
        "| same, store on (queued to the writer) | {:.2} µs |",
        with.as_secs_f64() * 1e6
    );
    println!(
        "| added latency on the request path | {:.2} µs ({:.2}x) |",
        (with.as_secs_f64() - without.as_secs_f64()) * 1e6,
        with.as_secs_f64() / without.as_secs_f64()
    );
    println!(
        "| writer: time per transition on disk (batched, WAL, synchronous=NORMAL) | {:.2} µs |",
        written.as_secs_f64() * 1e6
    );
    println!(
        "| disk per transition (ledger row + index + verdict upsert) | {:.0} bytes |",
        (after.saturating_sub(before)) as f64 / N as f64
    );
}
