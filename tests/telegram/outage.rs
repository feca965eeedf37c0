//! Telegram down, hung, failing or rate-limiting; and the token kept out of every log line.

use tokio::time::Instant;

use super::*;
use crate::support::LogBuf as Buf;

// Paused clock: a request that waited on the hung send would let tokio's clock run on to
// that send's timeout (3 s), so a routed request's paused-time duration shows any wait on
// Telegram exactly.
#[tokio::test(start_paused = true)]
async fn a_hung_telegram_adds_no_latency_to_routing_and_the_alert_arrives_once_it_recovers() {
    let fake = FakeTelegram::start().await;
    fake.set(Reply::Hang);
    let send_timeout = Duration::from_secs(3);
    let mut opts = quick();
    opts.send_timeout = send_timeout;
    let lab = Lab::start(&fake, None, "08:00", opts).await;
    lab.trip_gpu().await;
    // The sender is stuck in a request Telegram never answers (for 3s, then again).
    let until = Instant::now() + Duration::from_secs(5);
    while fake.posts().is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fake.posts().len(), 1);
    let mut slowest = Duration::ZERO;
    for _ in 0..30 {
        let t = Instant::now();
        assert_eq!(lab.chat("code").await.status(), 200);
        slowest = slowest.max(t.elapsed());
    }
    assert!(
        slowest < Duration::from_millis(1000),
        "a routed request took {slowest:?} while Telegram hung"
    );
    // All 30 were routed inside that first hung send: it has neither timed out nor been
    // retried.
    let hung = fake.posts();
    assert_eq!(hung.len(), 1, "{hung:?}");
    assert!(
        hung[0].at.elapsed() < send_timeout,
        "the requests ran {:?} into the hung send",
        hung[0].at.elapsed()
    );
    assert!(fake.delivered().is_empty());
    fake.set(Reply::Ok);
    let got = fake.wait_delivered(1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1, "{:?}", fake.posts());
    assert!(got[0].text.contains("<b>gpu-box</b> is down"));
}

#[tokio::test(start_paused = true)]
async fn telegram_500s_are_retried_with_growing_backoff_until_it_recovers() {
    let fake = FakeTelegram::start().await;
    fake.script(&[
        Reply::Fail500,
        Reply::Fail500,
        Reply::Fail500,
        Reply::Fail500,
    ]);
    let lab = Lab::start(&fake, None, "08:00", quick()).await;
    lab.trip_gpu().await;
    // Routing goes on meanwhile.
    for _ in 0..5 {
        assert_eq!(lab.chat("code").await.status(), 200);
    }
    let got = fake.wait_delivered(1, Duration::from_secs(600)).await;
    assert_eq!(got.len(), 1);
    let posts = fake.posts();
    assert_eq!(posts.len(), 5);
    // teloxide waits 10s after a 5xx; our backoff adds 50-100%, 100-200%, ... of 100ms.
    let gaps: Vec<Duration> = posts.windows(2).map(|w| w[1].at - w[0].at).collect();
    for g in &gaps {
        assert!(*g >= Duration::from_secs(10), "{gaps:?}");
    }
    assert!(gaps[3] > gaps[0], "{gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn a_429_retry_after_from_telegram_is_honoured() {
    let fake = FakeTelegram::start().await;
    fake.script(&[Reply::RateLimited(3)]);
    let lab = Lab::start(&fake, None, "08:00", quick()).await;
    assert!(lab.tg.outbox().push(Message::new("alert", "hello".into())));
    let got = fake.wait_delivered(1, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 1);
    let posts = fake.posts();
    assert_eq!(posts.len(), 2);
    let gap = posts[1].at - posts[0].at;
    assert!(
        gap >= Duration::from_secs(3) && gap < Duration::from_millis(3500),
        "retried after {gap:?}"
    );
}

#[test]
fn backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half() {
    let (base, max) = (Duration::from_secs(2), Duration::from_secs(60));
    assert_eq!(outbox::backoff(1, base, max, 0.0), Duration::from_secs(1));
    assert_eq!(
        outbox::backoff(1, base, max, 0.999_999),
        Duration::from_micros(1_999_999)
    );
    assert_eq!(outbox::backoff(3, base, max, 0.0), Duration::from_secs(4));
    assert_eq!(outbox::backoff(30, base, max, 0.0), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn the_token_is_in_no_log_line_and_old_messages_are_dropped_with_a_log_line() {
    // tracing caches one interest per callsite for the whole process, and while exactly one
    // dispatcher is registered it takes it from the registering thread's default: a test on
    // another thread (no subscriber) reaching an outbox log line first would silence it for
    // this one too (tokio-rs/tracing#3611). A second live dispatcher makes tracing ask every
    // registered dispatcher, this capture included.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let buf = Buf::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(buf.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A whole router whose Telegram answers 500, then 429, then ok.
    let fake = FakeTelegram::start().await;
    // The proxy page echoes the path: teloxide passes such a body on in its error as is.
    fake.script(&[Reply::Fail500, Reply::ProxyEcho, Reply::RateLimited(1)]);
    let lab = Lab::start(&fake, None, "08:00", quick()).await;
    lab.trip_gpu().await;
    assert_eq!(
        fake.wait_delivered(1, Duration::from_secs(120)).await.len(),
        1
    );

    // A Bot API address where nothing listens: reqwest's errors name the URL, token and all.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut config = lab.svc.fleet().registry.telegram.clone().unwrap();
    config.api_url = Some(format!("http://127.0.0.1:{port}"));
    let settings = Settings::with_token(&config, TOKEN).unwrap();
    let client = settings.client(Duration::from_secs(2)).unwrap();
    let err = client.send("x").await.unwrap_err();
    assert!(!err.to_string().contains(TOKEN), "{err}");
    let policy = Retries {
        max_age: Duration::from_secs(60),
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(10),
        capacity: 4,
        max_bytes: 1 << 20,
    };
    assert!(!outbox::deliver(&client, &Message::new("alert", "x".into()), &policy).await);
    tracing::info!(settings = ?settings, client = ?client, "debug output of the telegram pieces");

    let logs = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("telegram send failed"), "{logs}");
    assert!(
        logs.contains("no upstream for POST /bot<redacted>/SendMessage"),
        "the echoed path was logged, redacted: {logs}"
    );
    assert!(
        logs.contains("telegram rate limit: waiting as asked"),
        "{logs}"
    );
    assert!(logs.contains("older than a day: dropped unsent"), "{logs}");
    assert!(
        !logs.contains(TOKEN) && !logs.contains("AAE-secret_TOKEN"),
        "the token leaked:\n{logs}"
    );
}
