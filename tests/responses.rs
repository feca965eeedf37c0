//! The Responses API through labrouter: along the chain with the same breakers and
//! classification as chat, streamed event by event, and conversations kept so that any
//! machine can continue one. Scripted machines on 127.0.0.1 count what reached them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "responses/conversation.rs"]
mod conversation;
#[path = "responses/fake.rs"]
mod fake;
#[path = "responses/lab.rs"]
mod lab;
#[path = "responses/rules.rs"]
mod rules;
