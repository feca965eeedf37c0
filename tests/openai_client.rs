//! Real clients through labrouter to simulated machines whose first one fails: the
//! official `openai` Python SDK's Responses calls (whole, streamed, retrieved, deleted, a
//! conversation across an outage) and the OpenAI Agents SDK running an agent with a
//! function tool in its default Responses mode. Each test asserts what the client read
//! and counts what reached each machine.
//!
//! `scripts/test.sh` installs both SDKs (pinned) into its venv and names its Python in
//! `LABROUTER_TEST_PYTHON`; without them these tests fail, saying how to get them: a test
//! that skipped could not fail. Real time (not the paused clock): the client is another
//! process, and every answer comes at once; nothing waits on a timer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "openai_client/agents.rs"]
mod agents;
#[path = "openai_client/lab.rs"]
mod lab;
#[path = "openai_client/script.rs"]
mod script;
#[path = "openai_client/sdk.rs"]
mod sdk;
#[path = "e2e/support.rs"]
mod support;
