//! README "Safety" on connections: a client that sends its request head slowly is cut at
//! `server.header_timeout`, an idle kept-alive connection at `server.idle_timeout`, and at
//! most `server.max_connections` are open at once. Paused clock: exact and instant.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::TestLab;

async fn connect(base: &str) -> TcpStream {
    TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads one `/healthz` answer (its body is `ok`).
async fn read_healthz(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while !out.ends_with(b"ok\n") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the answer: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Reads until the server closes the connection (within 5 minutes of paused time, so a
/// server that never does fails the test instead of hanging it); returns what it sent.
async fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(300), s.read_to_end(&mut out)).await;
    assert!(closed.is_ok(), "the server kept the connection open");
    out
}

/// The reproduction: connections sending a header byte every 5 s held the server until it
/// ran out of file descriptors. Each is now cut at header_timeout (10 s by default).
#[tokio::test(start_paused = true)]
async fn a_slowloris_connection_is_cut_at_the_header_timeout() {
    let t = TestLab::start().await;
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = connect(&t.base).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        slow.push(s);
    }
    let started = Instant::now();
    // Drip a byte every 5 s; the server must hang up before the head is complete.
    let mut s = slow.pop().unwrap();
    let drip = async {
        for b in b"Host: localhost\r\nX-Slow: yes\r\n" {
            if s.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        read_to_close(&mut s).await
    };
    let got = drip.await;
    assert!(got.is_empty(), "no answer to a head that never completed");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited <= Duration::from_secs(16),
        "cut after {waited:?}"
    );
    for mut s in slow {
        assert!(read_to_close(&mut s).await.is_empty());
    }
    // The router still answers.
    let resp = t
        .client
        .get(format!("{}/healthz", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// A kept-alive connection that sends nothing more stays open for idle_timeout (60 s by
/// default), longer than the header bound, then closes.
#[tokio::test(start_paused = true)]
async fn an_idle_kept_alive_connection_closes_at_the_idle_timeout() {
    let t = TestLab::start_custom("  header_timeout: 5s\n  idle_timeout: 30s\n", "").await;
    let mut s = connect(&t.base).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(read_healthz(&mut s).await.starts_with(b"HTTP/1.1 200"));
    let answered = Instant::now();
    // Still usable after twice the header bound.
    tokio::time::sleep(Duration::from_secs(12)).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(
        read_healthz(&mut s).await.starts_with(b"HTTP/1.1 200"),
        "kept alive past the header bound"
    );
    let again = Instant::now();
    assert!(read_to_close(&mut s).await.is_empty());
    let idle = again.elapsed();
    assert!(
        idle >= Duration::from_secs(30) && idle < Duration::from_secs(31),
        "closed after {idle:?} idle"
    );
    assert!(answered.elapsed() >= Duration::from_secs(42));
}

/// At most max_connections are served at once: a third client waits in the accept queue
/// until a slow one is cut, then is answered.
#[tokio::test(start_paused = true)]
async fn connections_past_max_connections_wait_their_turn() {
    let t = TestLab::start_custom("  max_connections: 2\n  header_timeout: 10s\n", "").await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = connect(&t.base).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // Let the server accept both before the third arrives.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let mut third = connect(&t.base).await;
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut third).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9),
        "answered after {waited:?}: before a slot freed"
    );
    drop(held);
}

/// A body that stalls holds a connection as a slow head would: after `server.idle_timeout`
/// of silence it is answered 408, and nothing reaches a machine.
#[tokio::test(start_paused = true)]
async fn a_stalled_request_body_gets_a_408() {
    let t = TestLab::start_custom("  idle_timeout: 20s\n", "").await;
    let mut s = connect(&t.base).await;
    s.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\": ",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut s).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("server.idle_timeout"), "{text}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(20) && waited < Duration::from_secs(21),
        "answered after {waited:?}"
    );
    assert_eq!(t.work(), (0, 0, 0));
}

/// The reproduction: a body dripped a byte every 4 s never stalls for `idle_timeout`, and
/// held its connection (and its handler) for as long as the client liked. A whole body must
/// now arrive within `server.body_timeout` (60 s by default): past it, 408 and the
/// connection closes, and nothing reaches a machine.
#[tokio::test(start_paused = true)]
async fn a_body_dripped_a_byte_at_a_time_gets_a_408_at_the_body_timeout() {
    let t = TestLab::start().await;
    let body =
        serde_json::json!({"model": "small", "messages": [{"role": "user", "content": "hello"}]})
            .to_string();
    let s = connect(&t.base).await;
    let (mut read, mut write) = s.into_split();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    write.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let drip = tokio::spawn(async move {
        for b in body.bytes() {
            if write.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
    });
    let mut answer = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(600), read.read_to_end(&mut answer)).await;
    assert!(closed.is_ok(), "the server kept the connection open");
    let waited = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("server.body_timeout"), "{text}");
    assert!(
        waited >= Duration::from_secs(60) && waited < Duration::from_secs(65),
        "answered after {waited:?}"
    );
    drip.abort();
    assert_eq!(t.work(), (0, 0, 0));
}
