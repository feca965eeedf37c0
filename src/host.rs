//! The orchestrator's own health for `/status` and the digest: host name, uptime, memory,
//! CPU and load, from sysinfo.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use serde::{Deserialize, Deserializer, Serialize};
use sysinfo::System;

/// The host block of `/status`, and what the digest says of the orchestrator.
///
/// `hostname` and `uptime_s` are always on the wire (null when unreadable); the others only
/// when sysinfo has a `System` on this platform. Fields are in key order: the block was
/// written as a sorted JSON map, and stays byte for byte what it was.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Whole-machine CPU use, one decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    pub hostname: Option<String>,
    /// `None`: no `System` (no key); `Some(None)`: no load average here (null).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub load_1m: Option<Option<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    pub uptime_s: Option<u64>,
}

/// A key that is there is `Some`, even when null (absent keys are `None` by `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// One `System`, refreshed at most once a second: CPU usage is a difference between two
/// refreshes, and a refresh reads /proc, which no request should pay for twice a second.
struct Probe {
    system: Option<System>,
    refreshed: Option<Instant>,
}

fn probe() -> &'static Mutex<Probe> {
    static PROBE: OnceLock<Mutex<Probe>> = OnceLock::new();
    // Made by the first `/status` a serving thread answers, kept for the router's life
    // (`crate::heap`).
    PROBE.get_or_init(|| {
        crate::heap::in_default(|| {
            Mutex::new(Probe {
                system: System::new().ok(),
                refreshed: None,
            })
        })
    })
}

/// The host's health now; what sysinfo cannot read on this platform is `None`.
pub fn stats() -> Stats {
    let mut p = probe().lock().unwrap_or_else(|e| e.into_inner());
    let due = p
        .refreshed
        .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
    if due {
        if let Some(sys) = p.system.as_mut() {
            // What a refresh reads is kept in `sys`.
            crate::heap::in_default(|| {
                sys.refresh_memory();
                sys.refresh_cpu_usage();
            });
        }
        p.refreshed = Some(Instant::now());
    }
    let hostname = System::host_name().ok();
    let uptime_s = System::uptime().ok();
    match &p.system {
        Some(sys) => Stats {
            cpu_percent: Some((f64::from(sys.global_cpu_usage()) * 10.0).round() / 10.0),
            hostname,
            load_1m: Some(System::load_average().ok().map(|l| l.one)),
            mem_total_bytes: Some(sys.total_memory()),
            mem_used_bytes: Some(sys.used_memory()),
            uptime_s,
        },
        None => Stats {
            hostname,
            uptime_s,
            ..Stats::default()
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Without a `System` the block has two keys, as it always had; with one, all six,
    /// `load_1m` null when unread.
    #[test]
    fn the_wire_shape_keeps_absent_and_null_apart() {
        let bare = Stats {
            hostname: Some("mini".into()),
            uptime_s: Some(7),
            ..Stats::default()
        };
        let text = serde_json::to_string(&bare).unwrap();
        assert_eq!(text, r#"{"hostname":"mini","uptime_s":7}"#);
        assert_eq!(serde_json::from_str::<Stats>(&text).unwrap(), bare);

        let full = Stats {
            cpu_percent: Some(12.5),
            hostname: None,
            load_1m: Some(None),
            mem_total_bytes: Some(8),
            mem_used_bytes: Some(3),
            uptime_s: None,
        };
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(
            text,
            r#"{"cpu_percent":12.5,"hostname":null,"load_1m":null,"mem_total_bytes":8,"mem_used_bytes":3,"uptime_s":null}"#
        );
        assert_eq!(serde_json::from_str::<Stats>(&text).unwrap(), full);
    }
}
