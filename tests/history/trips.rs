//! Trips scripted on the paused clock (two today, one yesterday across midnight, one 31
//! days ago), read back per UTC day over the wire, and again after a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::Value;

use crate::router::{Machines, Router};

const DAY: i64 = 86_400_000;
const HOUR: i64 = 3_600_000;

fn wall() -> i64 {
    labrouter::store::ms(labrouter::clock::wall())
}

fn date(ms: i64) -> String {
    labrouter::clock::rfc3339(labrouter::store::from_ms(ms))[..10].to_string()
}

/// Moves the paused clock (and the router's wall clock with it) to `at` in one jump.
async fn jump_to(at: i64) {
    let now = wall();
    assert!(at > now, "the script runs forward");
    tokio::time::advance(Duration::from_millis((at - now) as u64)).await;
}

/// Three failed calls open gpu-box's breaker; the CPU box serves each instead.
async fn trip(r: &Router, m: &Machines) {
    m.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        assert_eq!(r.chat("code").await.status(), 200);
    }
}

/// After `open`, the GPU box works again and the next call is its probe.
async fn recover(r: &Router, m: &Machines, open: Duration) {
    tokio::time::sleep(open).await;
    m.gpu.set(Fault::Ok);
    assert_eq!(r.chat("code").await.status(), 200);
}

/// Lets the minute's counter sample record what happened.
async fn sampled(r: &Router) {
    tokio::time::sleep(Duration::from_secs(61)).await;
    r.flush();
}

fn day<'a>(h: &'a Value, machine: &str, day: &str) -> &'a Value {
    h["machines"][machine]
        .as_array()
        .unwrap_or_else(|| panic!("no {machine} in {h}"))
        .iter()
        .find(|d| d["day"] == day)
        .unwrap_or_else(|| panic!("no {day} for {machine} in {h}"))
}

/// gpu-box's closed intervals by the ledger, in seconds per UTC day.
async fn open_by_ledger(r: &Router) -> BTreeMap<String, f64> {
    let (_, v) = r.get("/status/events?machine=gpu-box&limit=1000").await;
    let mut rows: Vec<&Value> = v["events"].as_array().unwrap().iter().collect();
    rows.reverse();
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    let mut since: Option<i64> = None;
    for row in rows {
        let at = row["at_ms"].as_i64().unwrap();
        match (since, row["to"] == "closed") {
            (None, false) => since = Some(at),
            (Some(mut from), true) => {
                while from < at {
                    let end = at.min((from / DAY + 1) * DAY);
                    *out.entry(date(from)).or_default() += end - from;
                    from = end;
                }
                since = None;
            }
            _ => {}
        }
    }
    out.into_iter()
        .map(|(d, ms)| (d, ms as f64 / 1000.0))
        .collect()
}

fn near(got: &Value, want: f64) {
    let got = got.as_f64().unwrap();
    assert!(
        (got - want).abs() < 1.0,
        "open_s {got}, expected about {want}"
    );
}

/// The numbers of one day: (trips, served, rerouted, rejected).
fn counts(d: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| d[k].as_u64().unwrap();
    (n("trips"), n("served"), n("rerouted"), n("rejected"))
}

/// An hour's counts with `trips: 0`, to read it as a day.
fn json_with_trips(hour: &Value) -> Value {
    let mut h = hour.clone();
    h["trips"] = 0.into();
    h
}

#[tokio::test(start_paused = true)]
async fn the_history_counts_scripted_trips_per_day_and_survives_a_restart() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = m.yaml(dir.path());
    let r = Router::start(&yaml).await;
    let d0 = (wall() / DAY + 1) * DAY;
    let today = d0 + 31 * DAY;
    // 31 days ago at 10:00: open for a minute.
    jump_to(d0 + 10 * HOUR).await;
    trip(&r, &m).await;
    recover(&r, &m, Duration::from_secs(60)).await;
    sampled(&r).await;
    // Yesterday at 23:58: open for three minutes, past midnight.
    jump_to(today - 2 * 60_000).await;
    trip(&r, &m).await;
    recover(&r, &m, Duration::from_secs(180)).await;
    sampled(&r).await;
    // Today at 10:00 open for five minutes; at 11:00 opened and still open, two calls
    // rejected locally meanwhile (served by the CPU box).
    jump_to(today + 10 * HOUR).await;
    trip(&r, &m).await;
    recover(&r, &m, Duration::from_secs(300)).await;
    sampled(&r).await;
    jump_to(today + 11 * HOUR).await;
    trip(&r, &m).await;
    for _ in 0..2 {
        assert_eq!(r.chat("code").await.status(), 200);
    }
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    sampled(&r).await;
    // The wire: 3 failures and a probe per closed trip, 3 failures for the open one.
    assert_eq!(m.gpu.work_hits(), 15);

    let (status, h) = r.get("/status/history?days=32").await;
    assert_eq!(status, 200, "{h}");
    assert_eq!(h["timezone"], "UTC");
    let days = h["days"].as_array().unwrap();
    assert_eq!(days.len(), 32);
    assert_eq!(days[0], date(d0).as_str());
    assert_eq!(days[31], date(today).as_str());
    let (first, yesterday, now) = (date(d0), date(today - DAY), date(today));
    let ledger = open_by_ledger(&r).await;
    let g = |d: &str| day(&h, "gpu-box", d);
    assert_eq!(counts(g(&first)), (1, 4, 3, 0));
    assert_eq!(counts(g(&yesterday)), (1, 3, 3, 0));
    assert_eq!(counts(g(&now)), (2, 8, 8, 2));
    // Time open: exactly the ledger's, cut at midnight; about what the script held.
    assert_eq!(g(&first)["open_s"].as_f64(), ledger.get(&first).copied());
    assert_eq!(
        g(&yesterday)["open_s"].as_f64(),
        ledger.get(&yesterday).copied()
    );
    near(&g(&first)["open_s"], 60.0);
    near(&g(&yesterday)["open_s"], 120.0);
    near(&g(&now)["open_s"], 60.0 + 300.0 + 30.0 * 60.0 + 61.0);
    // The CPU box served what the GPU box did not; quiet days are all zero.
    assert_eq!(day(&h, "ubuntu-box", &first)["served"], 3);
    assert_eq!(day(&h, "ubuntu-box", &now)["served"], 8);
    let quiet = g(&date(d0 + 15 * DAY));
    assert_eq!(counts(quiet), (0, 0, 0, 0));
    assert_eq!(quiet["open_s"], 0.0);
    assert_eq!(h["machines"].as_object().unwrap().len(), 3);

    // The last 24 h by the hour: 10:00 (a trip and its probe), 11:00 (a trip, two rejected).
    let (_, hourly) = r.get("/status/hourly").await;
    let hours = hourly["hours"].as_array().unwrap();
    assert_eq!(hours[23], format!("{}T11:00:00Z", date(today)).as_str());
    let hour = |i: usize| counts(&json_with_trips(&hourly["machines"]["gpu-box"][i]));
    assert_eq!(hour(22), (0, 4, 3, 0));
    assert_eq!(hour(23), (0, 3, 5, 2));

    // 30 days (the default) begin after the oldest trip.
    let (_, month) = r.get("/status/history").await;
    assert_eq!(month["days"].as_array().unwrap().len(), 30);
    let trips: u64 = month["machines"]["gpu-box"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["trips"].as_u64().unwrap())
        .sum();
    assert_eq!(trips, 3);

    // A restart on the same file: the days are read back the same.
    r.stop().await;
    let r = Router::start(&yaml).await;
    let (_, again) = r.get("/status/history?days=32").await;
    for d in [&first, &yesterday] {
        assert_eq!(day(&again, "gpu-box", d), g(d));
    }
    assert_eq!(counts(day(&again, "gpu-box", &now)), (2, 8, 8, 2));
    let before = g(&now)["open_s"].as_f64().unwrap();
    let after = day(&again, "gpu-box", &now)["open_s"].as_f64().unwrap();
    assert!(
        after >= before && after < before + 1.0,
        "{before} then {after}"
    );
    assert_eq!(m.gpu.work_hits(), 15, "reading the history sends nothing");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn days_outside_one_to_ninety_are_refused_with_what_was_wrong() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let r = Router::start(&m.yaml(dir.path())).await;
    for bad in ["91", "0", "abc", "-1", ""] {
        let (status, v) = r.get(&format!("/status/history?days={bad}")).await;
        assert_eq!(status, 400, "days={bad}: {v}");
        assert_eq!(v["error"]["code"], "invalid_query");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("days must be a whole number from 1 to 90") && msg.contains(bad),
            "{msg}"
        );
    }
    let (status, v) = r.get("/status/history?weeks=2").await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = r.get("/status/history?days=90").await;
    assert_eq!(status, 200);
    assert_eq!(v["days"].as_array().unwrap().len(), 90);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_history_needs_the_same_key_as_status() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("LR_TEST_KEYS_HISTORY", "sekret-h");
    let yaml = m.yaml(dir.path()).replace(
        "  max_body: 64KiB",
        "  max_body: 64KiB\n  api_keys_env: LR_TEST_KEYS_HISTORY",
    );
    let r = Router::start(&yaml).await;
    let client = reqwest::Client::new();
    for path in ["/status", "/status/history?days=7", "/status/hourly"] {
        let url = format!("{}{path}", r.base);
        let refused = client.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        let body = refused.text().await.unwrap();
        assert!(
            body.contains("invalid_api_key") && !body.contains("sekret"),
            "{body}"
        );
        let keyed = client
            .get(&url)
            .bearer_auth("sekret-h")
            .send()
            .await
            .unwrap();
        assert_eq!(keyed.status(), 200, "{path}");
    }
    let (_, hourly) = {
        let resp = client
            .get(format!("{}/status/hourly", r.base))
            .bearer_auth("sekret-h")
            .send()
            .await
            .unwrap();
        (resp.status(), resp.json::<Value>().await.unwrap())
    };
    assert_eq!(hourly["hours"].as_array().unwrap().len(), 24);
    assert_eq!(hourly["machines"]["gpu-box"].as_array().unwrap().len(), 24);
    r.stop().await;
}
