//! Unit tests of each machine's `api` (docs/api.md "The Ollama endpoints"): `openai` by default, or
//! `ollama`.

use super::{assert_rejected_at, base_with, parse};
use crate::outcome::MachineId;
use crate::registry::Api;

#[test]
fn a_machine_speaks_openai_unless_it_says_ollama() {
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    api: ollama"],
    );
    let reg = parse(&v).unwrap();
    assert_eq!(reg.machines[MachineId(0)].api, Api::OpenAi, "the default");
    assert_eq!(reg.machines[MachineId(1)].api, Api::Ollama);
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    api: openai"],
    );
    assert_eq!(parse(&v).unwrap().machines[MachineId(1)].api, Api::OpenAi);
}

#[test]
fn an_unknown_api_is_rejected_where_it_is_written() {
    let v = base_with(5, &["    url: http://127.0.0.1:11434/v1", "    api: vllm"]);
    assert_rejected_at(
        &v,
        6,
        "vllm",
        &["machine 'local': api: expected 'openai' or 'ollama', got 'vllm'"],
    );
}
