//! Durable or refused: a 202 must mean the task is on Redis's disk.

use std::time::Duration;

use labrouter::cluster::tasks::SharedQueue;
use labrouter::cluster::Endpoint;

use crate::pool::{config, MAX_VALUE};
use crate::redis::RedisServer;

async fn connect(url: &str, assume_durable: bool) -> Result<(), String> {
    let endpoint = Endpoint::parse(url, "LABROUTER_REDIS_URL").unwrap();
    let mut c = config(Duration::from_secs(30));
    c.assume_durable = assume_durable;
    SharedQueue::connect(&endpoint, &c, MAX_VALUE)
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_redis_that_does_not_fsync_every_write_is_refused_naming_the_setting() {
    let redis = RedisServer::start().await;
    let mut c = redis.client().await;

    let e = connect(&redis.url(), false).await.unwrap_err();
    assert!(e.contains("appendonly is 'no', not 'yes'"), "{e}");
    assert!(e.contains("appendonly yes"), "says how to fix it: {e}");
    // assume_durable is for a CONFIG that is denied, not one that says no.
    let e = connect(&redis.url(), true).await.unwrap_err();
    assert!(e.contains("appendonly"), "{e}");

    c.ok(&["CONFIG", "SET", "appendonly", "yes"]).await;
    let e = connect(&redis.url(), false).await.unwrap_err();
    assert!(e.contains("appendfsync is 'everysec', not 'always'"), "{e}");

    c.ok(&["CONFIG", "SET", "appendfsync", "always"]).await;
    connect(&redis.url(), false).await.unwrap();
}

#[tokio::test]
async fn a_redis_that_denies_config_is_refused_unless_the_operator_says_it_is_durable() {
    let redis = RedisServer::start().await;
    let mut c = redis.client().await;
    c.ok(&[
        "ACL", "SETUSER", "router", "on", ">hunter2", "~*", "&*", "+@all", "-config",
    ])
    .await;
    let url = redis.url().replace("redis://", "redis://router:hunter2@");

    let e = connect(&url, false).await.unwrap_err();
    assert!(e.contains("refused CONFIG GET appendonly"), "{e}");
    assert!(e.contains("cluster.assume_durable: true"), "{e}");
    assert!(!e.contains("hunter2"), "the password never shows: {e}");
    connect(&url, true).await.unwrap();
}
