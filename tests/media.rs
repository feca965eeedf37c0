//! Images, audio and rerank through labrouter: routed by kind, along the same chains and
//! breakers; uploads held and sent again, byte for byte but for their model; speech passed
//! as bytes. Scripted machines on 127.0.0.1 keep and count what reached them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "media/fake.rs"]
mod fake;
#[path = "media/rules.rs"]
mod rules;
