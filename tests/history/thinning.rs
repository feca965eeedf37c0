//! Counter samples older than three days are thinned to the last of each hour, and a day's
//! counts stay what they were.

use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use labrouter::store::{Counts, Msg, Store};

const MIN: i64 = 60_000;
const DAY: i64 = 86_400_000;

#[test]
fn old_samples_are_thinned_to_the_hour_and_the_days_still_count_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    let start: Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
    let t0 = start.as_millisecond();
    // Five days, a sample every ten minutes, one more request each time.
    let samples = 5 * 24 * 6;
    for i in 0..samples {
        let sent = store.sender().send(Msg::Counters {
            at_ms: t0 + i * 10 * MIN,
            boot_ms: t0,
            machines: vec![Counts {
                machine: "gpu-box".into(),
                remote_attempts: i as u64,
                local_rejections: 0,
                rerouted: 0,
            }],
        });
        assert!(sent.is_ok());
    }
    assert!(store.flush(Duration::from_secs(30)));
    let path = store.path().to_path_buf();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let last = t0 + (samples - 1) * 10 * MIN;
    let old: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM counters WHERE at_ms < ?1",
            [last - 3 * DAY],
            |r| r.get(0),
        )
        .unwrap();
    let recent: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM counters WHERE at_ms >= ?1",
            [last - 3 * DAY],
            |r| r.get(0),
        )
        .unwrap();
    // The first two days were thinned to one sample an hour; the last three kept whole.
    assert_eq!(old, 2 * 24, "one sample per hour older than 3 days");
    assert_eq!(recent, 3 * 24 * 6 + 1);
    let now = Timestamp::from_millisecond(last + MIN).unwrap();
    let h = labrouter::history::read(&path, &[], &TimeZone::UTC, 5, now).unwrap();
    let served: Vec<u64> = h.machines["gpu-box"].iter().map(|d| d.served).collect();
    // Day one counts from zero (0..=143 is 143), each later day 144 more.
    assert_eq!(served, [143, 144, 144, 144, 144]);
}
