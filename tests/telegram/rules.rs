//! The schedule and the alert rules, pure: no clock, no network.

use super::*;

// === the schedule (pure) ===

#[test]
fn the_next_digest_is_the_next_local_slot_across_dst() {
    let tz = berlin();
    // 07:59 CET -> 08:00 CET today (07:00Z).
    assert_eq!(
        schedule::next_send(ts("2026-11-30T06:59:00Z"), (8, 0), &tz),
        ts("2026-11-30T07:00:00Z")
    );
    // Exactly at the slot -> tomorrow's.
    assert_eq!(
        schedule::next_send(ts("2026-11-30T07:00:00Z"), (8, 0), &tz),
        ts("2026-12-01T07:00:00Z")
    );
    // Spring forward (29 March 2026): 08:00 is CEST, 06:00Z.
    assert_eq!(
        schedule::next_send(ts("2026-03-29T00:00:00Z"), (8, 0), &tz),
        ts("2026-03-29T06:00:00Z")
    );
    // 02:30 does not exist that night: it moves forward like a clock, to 03:30 CEST.
    assert_eq!(
        schedule::next_send(ts("2026-03-29T00:00:00Z"), (2, 30), &tz),
        ts("2026-03-29T01:30:00Z")
    );
    assert_eq!(
        schedule::previous_send(ts("2026-11-30T06:59:00Z"), (8, 0), &tz),
        ts("2026-11-29T07:00:00Z")
    );
    // A long sleep is cut into ticks.
    let now = ts("2026-11-30T00:00:00Z");
    assert_eq!(
        schedule::sleep_for(now, ts("2026-11-30T07:00:00Z"), Duration::from_secs(60)),
        Duration::from_secs(60)
    );
    assert_eq!(
        schedule::sleep_for(now, ts("2026-11-30T00:00:05Z"), Duration::from_secs(60)),
        Duration::from_secs(5)
    );
}

#[test]
fn a_missed_digest_is_caught_up_only_when_a_slot_passed_over_a_day_ago() {
    let tz = berlin();
    let now = ts("2026-11-30T12:00:00Z");
    // Down since yesterday morning: the 08:00 slot was missed.
    assert!(schedule::catch_up_due(
        Some(ts("2026-11-29T07:00:00Z")),
        now,
        (8, 0),
        &tz
    ));
    // Sent this morning: nothing to catch up.
    assert!(!schedule::catch_up_due(
        Some(ts("2026-11-30T07:00:00Z")),
        now,
        (8, 0),
        &tz
    ));
    // A fresh install waits for its first slot.
    assert!(!schedule::catch_up_due(None, now, (8, 0), &tz));
    // Over 24 h old, but the slot is still ahead: the 25-hour day when clocks fall back.
    let fall_back = ts("2026-10-25T06:30:00Z");
    assert!(!schedule::catch_up_due(
        Some(ts("2026-10-24T06:00:00Z")),
        fall_back,
        (8, 0),
        &tz
    ));
    // A slot minutes after a catch-up is skipped; a day later it is not.
    assert!(!schedule::slot_sends(
        Some(ts("2026-11-30T06:55:00Z")),
        ts("2026-11-30T07:00:00Z")
    ));
    assert!(schedule::slot_sends(
        Some(ts("2026-11-29T07:00:00Z")),
        ts("2026-11-30T07:00:00Z")
    ));
}

// === alerts (pure) ===

fn change(machine: &str, from: &str, to: &str, reason: &str) -> Change {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_764_486_000);
    Change {
        machine: machine.into(),
        from: from.parse().unwrap(),
        to: to.parse().unwrap(),
        reason: reason.into(),
        failures: 3,
        at,
        cooldown_until: Some(at + Duration::from_secs(60)),
    }
}

#[test]
fn one_outage_makes_one_alert_one_page_and_one_all_clear() {
    let mut a = Alerts::new(true, 2);
    assert!(matches!(
        a.on(&change("gpu", "closed", "open", "connection refused")),
        Some(Alert::Opened { .. })
    ));
    assert_eq!(
        a.on(&change("gpu", "open", "half_open", "cooldown passed")),
        None
    );
    assert_eq!(
        a.on(&change("gpu", "half_open", "open", "probe failed")),
        None
    );
    assert_eq!(
        a.on(&change("gpu", "open", "half_open", "cooldown passed")),
        None
    );
    assert!(matches!(
        a.on(&change("gpu", "half_open", "open", "probe failed")),
        Some(Alert::Page { cycles: 2, .. })
    ));
    assert_eq!(
        a.on(&change("gpu", "half_open", "open", "probe failed")),
        None,
        "one page per outage"
    );
    assert!(matches!(
        a.on(&change("gpu", "half_open", "closed", "probe succeeded")),
        Some(Alert::Recovered { .. })
    ));
    // An outage that ends before a page closes quietly.
    assert!(a.on(&change("gpu", "closed", "open", "x")).is_some());
    assert_eq!(
        a.on(&change("gpu", "half_open", "closed", "probe succeeded")),
        None
    );
    // Without alert_on_trip, trips are quiet but auth failures still alert.
    let mut quiet = Alerts::new(false, 2);
    assert_eq!(quiet.on(&change("gpu", "closed", "open", "x")), None);
    assert!(matches!(
        quiet.on(&change("cpu", "closed", "auth_failed", "HTTP 401")),
        Some(Alert::AuthFailed { .. })
    ));
}

#[test]
fn an_alert_names_the_reason_the_cooldown_and_the_fallbacks() {
    let reg = Registry::parse(&registry_yaml_plain(), "t.yaml").unwrap();
    let fbs = alerts::fallbacks(&reg, "gpu-box", |i| reg.machines[i].name == "local");
    let alert = Alert::Opened {
        change: change("gpu-box", "closed", "open", "connection refused"),
        by_hand: false,
    };
    let text = alerts::render(&alert, &fbs, &berlin());
    eprintln!(
        "--- trip alert (HTML) ---\n{text}\n--- as shown ---\n{}",
        plain(&text)
    );
    assert!(
        text.starts_with("🔴 <b>gpu-box</b> is down: breaker opened"),
        "{text}"
    );
    assert!(
        text.contains("Why: connection refused (3 failures in a row)"),
        "{text}"
    );
    assert!(
        text.contains("Next probe in 1m (at 08:01:00 Europe/Berlin)"),
        "{text}"
    );
    assert!(
        text.contains("<b>code</b> → coder-cpu@ubuntu-box, small@local (down too)"),
        "{text}"
    );
    assert!(
        text.contains("<b>vision</b> → nothing: its requests fail until gpu-box is back"),
        "{text}"
    );
    let page = Alert::Page {
        change: change(
            "gpu-box",
            "half_open",
            "open",
            "probe failed: connection refused",
        ),
        since: std::time::UNIX_EPOCH + Duration::from_secs(1_764_485_000),
        cycles: 2,
    };
    eprintln!(
        "--- page ---\n{}",
        plain(&alerts::render(&page, &fbs, &berlin()))
    );
}

fn registry_yaml_plain() -> String {
    "server: { listen: 127.0.0.1:0 }
machines:
  gpu-box: { url: \"http://127.0.0.1:9/v1\" }
  ubuntu-box: { url: \"http://127.0.0.1:9/v1\" }
  local: { url: \"http://127.0.0.1:9/v1\" }
models:
  coder-gpu: { machine: gpu-box, name: a }
  coder-cpu: { machine: ubuntu-box, name: a }
  vision-gpu: { machine: gpu-box, name: v }
  small: { machine: local, name: s }
routes:
  - { name: code, keywords: [code], chain: [coder-gpu, coder-cpu, small] }
  - { name: vision, keywords: [image], chain: [vision-gpu] }
  - { name: chat, default: true, chain: [small] }
"
    .to_string()
}
