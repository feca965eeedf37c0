//! The orchestrator's own health for `/status` and the digest: host name, uptime, memory,
//! CPU and load, from sysinfo.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use serde_json::{json, Value};
use sysinfo::System;

/// One `System`, refreshed at most once a second: CPU usage is a difference between two
/// refreshes, and a refresh reads /proc, which no request should pay for twice a second.
struct Probe {
    system: Option<System>,
    refreshed: Option<Instant>,
}

fn probe() -> &'static Mutex<Probe> {
    static PROBE: OnceLock<Mutex<Probe>> = OnceLock::new();
    PROBE.get_or_init(|| {
        Mutex::new(Probe {
            system: System::new().ok(),
            refreshed: None,
        })
    })
}

/// The host block of `/status`; fields sysinfo cannot read on this platform are null.
pub fn stats() -> Value {
    let mut p = probe().lock().unwrap_or_else(|e| e.into_inner());
    let due = p
        .refreshed
        .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
    if due {
        if let Some(sys) = p.system.as_mut() {
            sys.refresh_memory();
            sys.refresh_cpu_usage();
        }
        p.refreshed = Some(Instant::now());
    }
    let load = System::load_average().ok();
    match &p.system {
        Some(sys) => json!({
            "hostname": System::host_name().ok(),
            "cpu_percent": (f64::from(sys.global_cpu_usage()) * 10.0).round() / 10.0,
            "mem_used_bytes": sys.used_memory(),
            "mem_total_bytes": sys.total_memory(),
            "uptime_s": System::uptime().ok(),
            "load_1m": load.map(|l| l.one),
        }),
        None => json!({"hostname": System::host_name().ok(), "uptime_s": System::uptime().ok()}),
    }
}
