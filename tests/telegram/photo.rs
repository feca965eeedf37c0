//! The digest as a photo (SPEC §16): `sendPhoto` with the PNG as a multipart upload, then
//! the text as its own message; the text alone when Telegram refuses the photo; a photo
//! retried as the same bytes; the outbox's byte bound. The token stays out of the logs.

use super::*;
use crate::png_check::ihdr;
use crate::support::LogBuf;

/// 07:59:30 in Berlin, digest at 08:00: the digest goes out half a minute into the test.
fn before_eight() -> Options {
    let mut opts = quick();
    opts.clock = Clock::tokio(ts("2026-11-30T06:59:30Z"));
    opts
}

/// A log capture and what keeps it on (see the note in
/// `the_token_is_in_no_log_line_and_old_messages_are_dropped_with_a_log_line` for the
/// second dispatcher).
struct Capture {
    _guard: tracing::subscriber::DefaultGuard,
    _second: tracing::Dispatch,
}

/// The log lines written while the returned [`Capture`] lives.
fn capture() -> (LogBuf, Capture) {
    let second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let buf = LogBuf::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(buf.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (
        buf,
        Capture {
            _guard: guard,
            _second: second,
        },
    )
}

fn logs(buf: &LogBuf) -> String {
    String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
}

fn assert_is_the_digest_photo(p: &fake::Post) {
    assert_eq!(p.bot, format!("bot{TOKEN}"));
    assert_eq!(p.method, "SendPhoto", "{p:?}");
    assert!(
        p.content_type.starts_with("multipart/form-data; boundary="),
        "{}",
        p.content_type
    );
    assert_eq!(p.chat_id, CHAT);
    let photo = p.photo.as_ref().expect("a file part");
    assert_eq!(photo.file_name.as_deref(), Some("digest.png"));
    let (w, h) = ihdr(&photo.bytes);
    assert!(w >= 600 && h > 100, "{w}×{h}");
    let caption = p.caption.as_deref().unwrap_or("");
    assert!(
        caption.starts_with("labrouter · 30 days to 2026-11-30 · "),
        "{caption}"
    );
    assert!(!caption.contains('\n'), "one line: {caption}");
}

#[tokio::test(start_paused = true)]
async fn the_digest_goes_out_as_a_photo_then_its_text_in_that_order() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _lab = Lab::start(&fake, Some(dir.path()), "08:00", before_eight()).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(fake.posts().is_empty());
    let got = fake.wait_delivered(2, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_is_the_digest_photo(&got[0]);
    assert_bot_api_post(&got[1]);
    assert!(
        got[1].text.contains("Mon 30 Nov 08:00 CET"),
        "{}",
        got[1].text
    );
    assert!(got[0].at <= got[1].at);
    // Nothing else: one photo and one text per digest.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(fake.posts().len(), 2, "{:?}", fake.posts());
}

#[tokio::test(start_paused = true)]
async fn a_bot_api_that_refuses_photos_still_gets_the_text_and_the_log_says_why() {
    let (buf, _guard) = capture();
    let fake = FakeTelegram::start().await;
    fake.set(Reply::RefusePhotos);
    let _lab = Lab::start(&fake, None, "08:00", before_eight()).await;
    let got = fake.wait_delivered(1, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 1, "{:?}", fake.posts());
    assert_bot_api_post(&got[0]);
    assert!(got[0].text.contains("a quiet day"), "{}", got[0].text);
    tokio::time::sleep(Duration::from_secs(120)).await;
    let posts = fake.posts();
    let methods: Vec<&str> = posts.iter().map(|p| p.method.as_str()).collect();
    // A 400 is for good: the photo is not tried again, and the text follows it.
    assert_eq!(methods, ["SendPhoto", "SendMessage"]);
    assert_is_the_digest_photo(&posts[0]);
    let logs = logs(&buf);
    assert!(
        logs.contains("telegram refused the message: dropped"),
        "{logs}"
    );
    assert!(logs.contains("what=\"digest photo\""), "{logs}");
    assert!(logs.contains("IMAGE_PROCESS_FAILED"), "{logs}");
    assert!(
        !logs.contains(TOKEN) && !logs.contains("AAE-secret_TOKEN"),
        "the token leaked:\n{logs}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_photo_is_retried_as_the_same_bytes_and_given_up_after_three_tries() {
    // One 500: the photo goes again, the very bytes queued, then the text.
    let fake = FakeTelegram::start().await;
    fake.script(&[Reply::Fail500]);
    let _lab = Lab::start(&fake, None, "08:00", before_eight()).await;
    let got = fake.wait_delivered(2, Duration::from_secs(120)).await;
    assert_eq!(got.len(), 2, "{:?}", fake.posts());
    let posts = fake.posts();
    let methods: Vec<&str> = posts.iter().map(|p| p.method.as_str()).collect();
    assert_eq!(methods, ["SendPhoto", "SendPhoto", "SendMessage"]);
    assert_eq!(posts[0].reply, Reply::Fail500);
    let first = &posts[0].photo.as_ref().unwrap().bytes;
    assert_eq!(first, &posts[1].photo.as_ref().unwrap().bytes);
    drop(_lab);

    // 500s on and on: three tries, then the text alone (it is not held for a day).
    let (buf, _guard) = capture();
    let fake = FakeTelegram::start().await;
    fake.script(&[Reply::Fail500, Reply::Fail500, Reply::Fail500]);
    let _lab = Lab::start(&fake, None, "08:00", before_eight()).await;
    let got = fake.wait_delivered(1, Duration::from_secs(300)).await;
    assert_eq!(got.len(), 1, "{:?}", fake.posts());
    assert_eq!(got[0].method, "SendMessage");
    let methods: Vec<String> = fake.posts().into_iter().map(|p| p.method).collect();
    assert_eq!(
        methods,
        ["SendPhoto", "SendPhoto", "SendPhoto", "SendMessage"]
    );
    let logs = logs(&buf);
    assert!(
        logs.contains("telegram photo not delivered: dropped"),
        "{logs}"
    );
    assert!(!logs.contains(TOKEN), "the token leaked:\n{logs}");
}

#[tokio::test]
async fn the_outbox_holds_a_bounded_number_of_bytes_and_gives_them_back_once_sent() {
    let (outbox, mut rx) = outbox::Outbox::new(16, 100_000);
    let photo = |n: usize| Message::photo("digest photo", vec![7u8; n], "caption");
    assert!(outbox.push(photo(60_000)));
    assert_eq!(outbox.held_bytes(), 60_007);
    // A second photo would pass the bound: dropped, nothing else changes.
    assert!(!outbox.push(photo(60_000)));
    assert_eq!(outbox.held_bytes(), 60_007);
    // Texts still fit beside it.
    assert!(outbox.push(Message::new("alert", "x".repeat(1000))));
    assert_eq!(outbox.held_bytes(), 61_007);
    // The sender takes the photo and is done with it: its bytes come back.
    let sent = rx.recv().await.unwrap();
    assert!(sent.is_photo());
    let again = sent.clone();
    drop(sent);
    assert_eq!(outbox.held_bytes(), 61_007, "a clone still holds them");
    drop(again);
    assert_eq!(outbox.held_bytes(), 1000);
    assert!(outbox.push(photo(60_000)));
    // A caption longer than Telegram's 1,024 characters is cut to it.
    let long = Message::photo("digest photo", vec![1], &"é".repeat(2000));
    match &long.body {
        outbox::Body::Photo { caption, .. } => assert_eq!(caption.chars().count(), 1024),
        outbox::Body::Text(_) => panic!("a photo"),
    }
}
