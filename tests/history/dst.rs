//! Days in `telegram.timezone`: Europe/Berlin's 25-hour 2026-10-25, from a seeded store
//! file (ledger, counter samples across a restart, tasks), and a machine the registry no
//! longer names kept under its name.

use std::path::Path;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::{params, Connection};

fn ms(at: &str) -> i64 {
    at.parse::<Timestamp>().unwrap().as_millisecond()
}

fn row(c: &Connection, at: &str, machine: &str, from: &str, to: &str) {
    c.execute(
        "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                             remote_attempted, registry_version, remote_attempts, local_rejections)
         VALUES (?1, ?2, ?3, ?4, 'HTTP 500', 3, NULL, 1, 'test', 0, 0)",
        params![ms(at), machine, from, to],
    )
    .unwrap();
}

fn sample(c: &Connection, at: &str, boot: &str, remote: i64, rejected: i64) {
    c.execute(
        "INSERT INTO counters (at_ms, boot_ms, machine, remote_attempts, local_rejections, rerouted)
         VALUES (?1, ?2, 'gpu-box', ?3, ?4, 0)",
        params![ms(at), ms(boot), remote, rejected],
    )
    .unwrap();
}

fn task(c: &Connection, id: &str, status: &str, finished: &str, attempts: &str, result: &str) {
    c.execute(
        "INSERT INTO tasks (id, owner, status, endpoint, accept, priority, after, metadata, request,
                            created_ms, finished_ms, deadline_ms, attempts_used, max_attempts,
                            interrupted, attempts, result, callback_attempts)
         VALUES (?1, '', ?2, 'chat', 'json', 0, '[]', '{}', X'7B7D', ?3, ?3, ?3, 1, 3, 0, ?4, ?5, 0)",
        params![id, status, ms(finished), attempts, (!result.is_empty()).then_some(result)],
    )
    .unwrap();
}

fn seed(dir: &Path) -> std::path::PathBuf {
    drop(labrouter::store::Store::open(dir).unwrap());
    let path = dir.join(labrouter::store::FILE);
    let c = Connection::open(&path).unwrap();
    // gpu-box: down from 23:00 on the 24th (Berlin, summer time) to 01:00 on the 26th
    // (winter time); a failed probe on the 25th is the same outage, not a new trip.
    row(&c, "2026-10-24T21:00:00Z", "gpu-box", "closed", "open");
    row(&c, "2026-10-25T10:00:00Z", "gpu-box", "open", "half_open");
    row(&c, "2026-10-25T10:00:01Z", "gpu-box", "half_open", "open");
    row(&c, "2026-10-26T00:00:00Z", "gpu-box", "open", "closed");
    // old-box, gone from the registry: 00:30-00:40 on the 25th and 00:30-00:45 on the 26th,
    // Berlin time (the 24th and the 25th in UTC).
    row(&c, "2026-10-24T22:30:00Z", "old-box", "closed", "open");
    row(&c, "2026-10-24T22:40:00Z", "old-box", "open", "closed");
    row(
        &c,
        "2026-10-25T23:30:00Z",
        "old-box",
        "closed",
        "forced_open",
    );
    row(
        &c,
        "2026-10-25T23:45:00Z",
        "old-box",
        "forced_open",
        "closed",
    );
    row(&c, "2026-10-25T12:00:00Z", "(registry)", "a", "b");
    // Counters: 5 then 12 (Berlin 23:30 on the 24th, 00:30 on the 25th); a restart at
    // 06:00 counts from zero: 4, then 10 at 00:30 on the 26th.
    sample(&c, "2026-10-24T21:30:00Z", "2026-10-24T20:00:00Z", 5, 1);
    sample(&c, "2026-10-24T22:30:00Z", "2026-10-24T20:00:00Z", 12, 3);
    sample(&c, "2026-10-25T05:01:00Z", "2026-10-25T05:00:00Z", 4, 0);
    sample(&c, "2026-10-25T23:30:00Z", "2026-10-25T05:00:00Z", 10, 0);
    // Tasks: one served by gpu-box at 23:30 on the 25th, one failed there at 00:10 on
    // the 26th (Berlin).
    let attempts = r#"[{"at":"x","target":"small@ubuntu-box","outcome":"failed","reason":null},
                       {"at":"x","target":"qwen3-coder:30b@gpu-box","outcome":"failed","reason":null}]"#;
    let result = r#"{"status":200,"target":"qwen3-coder:30b@gpu-box","body":{}}"#;
    task(&c, "t1", "succeeded", "2026-10-25T21:30:00Z", "[]", result);
    task(&c, "t2", "failed", "2026-10-25T23:10:00Z", attempts, "");
    task(&c, "t3", "cancelled", "2026-10-25T23:20:00Z", attempts, "");
    path
}

#[test]
fn days_are_cut_in_berlin_across_the_autumn_clock_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = seed(dir.path());
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    let now: Timestamp = "2026-10-26T12:00:00Z".parse().unwrap();
    let h = labrouter::history::read(&path, &["gpu-box".to_string()], &berlin, 3, now).unwrap();
    assert_eq!(h.timezone, "Europe/Berlin");
    assert_eq!(h.days, ["2026-10-24", "2026-10-25", "2026-10-26"]);
    assert_eq!(
        h.machines.keys().collect::<Vec<_>>(),
        ["gpu-box", "old-box"]
    );
    let gpu = &h.machines["gpu-box"];
    let open: Vec<f64> = gpu.iter().map(|d| d.open_s).collect();
    assert_eq!(open, [3600.0, 25.0 * 3600.0, 3600.0]);
    assert_eq!(gpu.iter().map(|d| d.trips).collect::<Vec<_>>(), [1, 0, 0]);
    let served: Vec<u64> = gpu.iter().map(|d| d.served).collect();
    assert_eq!(served, [5, 7 + 4, 6]);
    assert_eq!(
        gpu.iter().map(|d| d.rejected).collect::<Vec<_>>(),
        [1, 2, 0]
    );
    let tasks: Vec<(u64, u64)> = gpu
        .iter()
        .map(|d| (d.tasks_finished, d.tasks_failed))
        .collect();
    assert_eq!(tasks, [(0, 0), (1, 0), (0, 1)]);
    let old = &h.machines["old-box"];
    assert_eq!(old.iter().map(|d| d.trips).collect::<Vec<_>>(), [0, 1, 1]);
    let open: Vec<f64> = old.iter().map(|d| d.open_s).collect();
    assert_eq!(open, [0.0, 600.0, 900.0]);
    assert_eq!(h.flakiest_first(), ["gpu-box", "old-box"]);

    // The same store in UTC puts old-box's trips a day earlier.
    let utc = labrouter::history::read(&path, &[], &TimeZone::UTC, 3, now).unwrap();
    assert_eq!(utc.timezone, "UTC");
    let old = &utc.machines["old-box"];
    assert_eq!(old.iter().map(|d| d.trips).collect::<Vec<_>>(), [1, 1, 0]);
}

#[test]
fn no_store_yet_is_every_day_zero_for_the_registry_machines() {
    let dir = tempfile::tempdir().unwrap();
    let now: Timestamp = "2026-12-06T12:00:00Z".parse().unwrap();
    let names = ["gpu-box".to_string(), "local".to_string()];
    let path = dir.path().join(labrouter::store::FILE);
    let h = labrouter::history::read(&path, &names, &TimeZone::UTC, 30, now).unwrap();
    assert_eq!(h.days.len(), 30);
    assert_eq!(h.machines.len(), 2);
    assert!(h.machines["local"]
        .iter()
        .all(|d| d.trips == 0 && d.open_s == 0.0));
}

/// A flapping machine: 5,000 one-second outages in a day are counted by SQLite and cut
/// as they are read (the read holds per-day sums, never the rows).
#[test]
fn a_day_of_flapping_is_counted_whole() {
    let dir = tempfile::tempdir().unwrap();
    drop(labrouter::store::Store::open(dir.path()).unwrap());
    let path = dir.path().join(labrouter::store::FILE);
    let mut c = Connection::open(&path).unwrap();
    let day = ms("2026-12-05T00:00:00Z");
    let tx = c.transaction().unwrap();
    for i in 0..5000 {
        let at = day + i * 10_000;
        for (at, from, to) in [(at, "closed", "open"), (at + 1000, "open", "closed")] {
            tx.execute(
                "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                                     remote_attempted, registry_version, remote_attempts, local_rejections)
                 VALUES (?1, 'gpu-box', ?2, ?3, 'HTTP 500', 3, NULL, 1, 'test', 0, 0)",
                params![at, from, to],
            )
            .unwrap();
        }
    }
    tx.commit().unwrap();
    let now: Timestamp = "2026-12-06T12:00:00Z".parse().unwrap();
    let names = ["gpu-box".to_string()];
    let h = labrouter::history::read(&path, &names, &TimeZone::UTC, 90, now).unwrap();
    let d = &h.machines["gpu-box"][88];
    assert_eq!(d.day, "2026-12-05");
    assert_eq!((d.trips, d.open_s), (5000, 5000.0));
    assert_eq!(h.machines["gpu-box"][89].trips, 0);
}
