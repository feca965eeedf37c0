//! Where a callback connects once its host name is looked up: only to the addresses the
//! lookup gave that callbacks may use, and to nothing when there are none. Names are looked
//! up in a table here (never a real lookup of an outside name); every address a test could
//! reach is this machine's.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use labrouter::webhook::{self, deliver, Lookup};

use super::{Answer, Receiver, ID, NOW};

/// Host names and their addresses, as a test wants them.
struct Table(Vec<(&'static str, Vec<IpAddr>)>);

impl Lookup for Table {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let found = self.0.iter().find(|(name, _)| *name == host);
        let answer = found
            .map(|(_, ips)| ips.clone())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in the test's table"));
        Box::pin(async move { answer })
    }
}

fn client_looking_up(name: &'static str, ips: &[&str]) -> reqwest::Client {
    let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
    webhook::client_with(Arc::new(Table(vec![(name, ips)]))).unwrap()
}

/// The receiver's URL with `host` in place of 127.0.0.1.
fn named(r: &Receiver, host: &str) -> reqwest::Url {
    let mut url = r.url.clone();
    url.set_host(Some(host)).unwrap();
    url
}

#[tokio::test]
async fn a_name_that_resolves_to_the_unspecified_address_is_refused_and_nothing_is_sent() {
    // 0.0.0.0 reaches this machine's own services: a name must not lead there.
    let r = Receiver::start(Answer::Status(200)).await;
    let client = client_looking_up("hooks.test", &["0.0.0.0"]);
    let err = deliver(&client, &named(&r, "hooks.test"), ID, b"{}", None, NOW)
        .await
        .unwrap_err();
    assert!(
        err.contains("refused") && err.contains("0.0.0.0 is unspecified"),
        "{err}"
    );
    assert_eq!(r.count(), 0, "nothing reached the receiver");
}

#[tokio::test]
async fn a_name_with_a_refused_and_a_loopback_address_connects_to_the_loopback_one() {
    let r = Receiver::start(Answer::Status(200)).await;
    let client = client_looking_up("hooks.test", &["0.0.0.0", "127.0.0.1"]);
    deliver(&client, &named(&r, "hooks.test"), ID, b"{}", None, NOW)
        .await
        .unwrap();
    assert_eq!(r.count(), 1);
}

#[tokio::test]
async fn localhost_that_resolves_to_loopback_is_delivered() {
    let r = Receiver::start(Answer::Status(200)).await;
    let client = client_looking_up("localhost", &["127.0.0.1"]);
    deliver(&client, &named(&r, "localhost"), ID, b"{}", None, NOW)
        .await
        .unwrap();
    assert_eq!(r.count(), 1);
}

#[tokio::test]
async fn a_name_the_lookup_does_not_know_is_a_failed_attempt_in_plain_words() {
    let r = Receiver::start(Answer::Status(200)).await;
    let client = client_looking_up("hooks.test", &["127.0.0.1"]);
    let err = deliver(&client, &named(&r, "other.test"), ID, b"{}", None, NOW)
        .await
        .unwrap_err();
    assert!(err.starts_with("cannot connect"), "{err}");
    assert!(!err.contains("other.test"), "no URL in the words: {err}");
    assert_eq!(r.count(), 0);
}
