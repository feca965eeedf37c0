//! Alerts, pages and digests end to end: router, breakers, fake Telegram.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_trip_sends_exactly_one_alert_however_many_requests_are_rejected() {
    let fake = FakeTelegram::start().await;
    let lab = Lab::start(&fake, None, "08:00", quick()).await;
    lab.trip_gpu().await;
    for _ in 0..25 {
        let resp = lab.chat("code").await;
        assert_eq!(resp.status(), 200);
        assert_eq!(
            header(&resp, "x-labrouter-skipped"),
            "coder-gpu@gpu-box=circuit_open"
        );
    }
    assert_eq!(
        fake.wait_delivered(1, Duration::from_secs(5)).await.len(),
        1
    );
    // Nothing more: 30 s of paused time is well past the outbox's retries (100 ms doubling
    // to 1 s) and teloxide's 10 s pause after a 5xx, and still inside the 60 s cooldown,
    // so the breaker stays open and unprobed.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let got = fake.posts();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_bot_api_post(&got[0]);
    let text = &got[0].text;
    eprintln!("--- live trip alert ---\n{}", plain(text));
    assert!(
        text.starts_with("🔴 <b>gpu-box</b> is down: breaker opened"),
        "{text}"
    );
    assert!(
        text.contains("<b>code</b> → coder-cpu@ubuntu-box, small@local"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_page_after_two_failed_cooldowns_and_an_all_clear_when_it_closes() {
    let fake = FakeTelegram::start().await;
    let lab = Lab::start(&fake, None, "08:00", quick()).await;
    lab.trip_gpu().await;
    // Cooldown 60s, probe refused -> open for 120s (one cycle), probe refused again (two).
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(lab.chat("code").await.status(), 200);
    assert_eq!(
        fake.wait_delivered(1, Duration::from_secs(5)).await.len(),
        1
    );
    tokio::time::sleep(Duration::from_secs(121)).await;
    assert_eq!(lab.chat("code").await.status(), 200);
    let got = fake.wait_delivered(2, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 2);
    assert!(
        got[1]
            .text
            .contains("<b>gpu-box</b> is STILL DOWN after 2 cooldowns"),
        "{}",
        got[1].text
    );
    eprintln!("--- live page ---\n{}", plain(&got[1].text));
    // A third failed probe pages no more; then the machine comes back.
    tokio::time::sleep(Duration::from_secs(241)).await;
    assert_eq!(lab.chat("code").await.status(), 200);
    lab.gpu.set(Fault::Ok);
    tokio::time::sleep(Duration::from_secs(481)).await;
    assert_eq!(lab.chat("code").await.status(), 200);
    assert_eq!(lab.state("gpu-box"), "closed");
    let got = fake.wait_delivered(3, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(fake.delivered().len(), 3, "{got:?}");
    assert!(
        got[2].text.starts_with("🟢 <b>gpu-box</b> is back"),
        "{}",
        got[2].text
    );
}

#[tokio::test(start_paused = true)]
async fn a_digest_missed_while_the_router_was_down_goes_out_at_start_and_is_remembered() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let before = ts(MIDDAY);
    // One driven wall clock for both starts: the second start is later than the first.
    let mut opts = quick();
    opts.clock = Clock::tokio(before);
    seed_last_digest(dir.path(), before - jiff::SignedDuration::from_hours(30));
    let lab = Lab::start(&fake, Some(dir.path()), "08:00", opts.clone()).await;
    // The picture, then the text.
    let got = fake.wait_delivered(2, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].method, "SendPhoto");
    assert!(got[1].text.contains("labrouter"), "{}", got[1].text);
    // The send is remembered, so the next start does not send it again.
    assert!(lab.svc.store().unwrap().flush(Duration::from_secs(5)));
    let path = lab.svc.store().unwrap().path().to_path_buf();
    let last: i64 = store::meta(&path, LAST_DIGEST)
        .unwrap()
        .unwrap()
        .parse()
        .unwrap();
    assert!(last >= before.as_millisecond());
    drop(lab);

    let fake2 = FakeTelegram::start().await;
    let _again = Lab::start(&fake2, Some(dir.path()), "08:00", opts).await;
    quiet_minutes().await;
    assert!(fake2.posts().is_empty(), "sent again: {:?}", fake2.posts());
}

#[tokio::test(start_paused = true)]
async fn no_catch_up_when_the_last_digest_is_recent_or_there_never_was_one() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = quick();
    opts.clock = Clock::tokio(ts(MIDDAY));
    seed_last_digest(dir.path(), ts(MIDDAY) - jiff::SignedDuration::from_hours(2));
    let _recent = Lab::start(&fake, Some(dir.path()), "08:00", opts.clone()).await;
    let fresh = tempfile::tempdir().unwrap();
    let _fresh = Lab::start(&fake, Some(fresh.path()), "08:00", opts).await;
    quiet_minutes().await;
    assert!(fake.posts().is_empty(), "{:?}", fake.posts());
}

/// The wall clock of the catch-up tests (13:00 in Berlin): hours from any 08:00 slot, so
/// only a catch-up at start can send a digest in the minutes these tests run.
const MIDDAY: &str = "2026-11-30T12:00:00Z";

/// Paused time well past every interval that could still send something: the start's
/// catch-up decision, the outbox's retries (100 ms doubling to 1 s), teloxide's 10 s pause
/// after a 5xx and the schedule's 60 s tick.
async fn quiet_minutes() {
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
}

#[tokio::test(start_paused = true)]
async fn the_digest_goes_out_at_digest_at_on_a_driven_clock() {
    let fake = FakeTelegram::start().await;
    let mut opts = quick();
    // 07:59:30 in Berlin, digest at 08:00.
    opts.clock = Clock::tokio(ts("2026-11-30T06:59:30Z"));
    let _lab = Lab::start(&fake, None, "08:00", opts).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(fake.posts().is_empty());
    // Each digest is a photo and a text.
    let got = fake.wait_delivered(2, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].method, "SendPhoto");
    assert!(
        got[1].text.contains("Mon 30 Nov 08:00 CET"),
        "{}",
        got[1].text
    );
    assert!(got[1].text.contains("a quiet day"), "{}", got[1].text);
    // And again a day later, once.
    tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
    let got = fake.wait_delivered(4, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 4);
    assert_eq!(got[2].method, "SendPhoto");
    assert!(
        got[3].text.contains("Tue 1 Dec 08:00 CET"),
        "{}",
        got[3].text
    );
}
