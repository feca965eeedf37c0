//! Telegram (README "Telegram"): alerts, pages, the digest and its schedule, the outbox under a
//! failing Telegram, and the token kept out of logs. A fake Bot API server on 127.0.0.1
//! records what teloxide posts (texts, and the digest's photo as a multipart upload); real
//! routers route to simulated machines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "telegram/fake.rs"]
mod fake;
#[path = "support/png.rs"]
mod png_check;
#[path = "e2e/support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use fake::{FakeTelegram, Reply};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::store::{self, Msg, Store};
use labrouter::telegram::alerts::{self, Alert, Alerts, Change};
use labrouter::telegram::digest::{self, Host, Input, MachineNow, Row, Sample};
use labrouter::telegram::outbox::{self, Message, Retries};
use labrouter::telegram::text::plain;
use labrouter::telegram::{schedule, Clock, Options, Running, Settings, LAST_DIGEST};
use labrouter::Service;
use support::header;

/// Shaped like a real token (a 35+ character secret), so teloxide's own URL scrubbing is
/// exercised too.
const TOKEN: &str = "123456789:AAE-secret_TOKEN-value-0123456789abcd";
const CHAT: i64 = 4242;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn berlin() -> TimeZone {
    TimeZone::get("Europe/Berlin").unwrap()
}

#[path = "telegram/digest.rs"]
mod digest_tests;
#[path = "telegram/lab.rs"]
mod lab;
#[path = "telegram/live.rs"]
mod live;
#[path = "telegram/outage.rs"]
mod outage;
#[path = "telegram/photo.rs"]
mod photo;
#[path = "telegram/rules.rs"]
mod rules;

use lab::*;
