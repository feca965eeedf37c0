//! The OpenAI Agents SDK through labrouter (tests/openai_client/agent.py): an Agent with a
//! function tool in its default Responses mode; the sim answers the first model call with
//! a call to the tool and the second, which carries the tool's output, with text.

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::lab::{last_body, texts, Lab};
use crate::script;

/// Runs one scenario of agent.py against the lab.
async fn agent(lab: &Lab, scenario: &str, pause: impl FnMut(&str)) -> Value {
    script::run("agent.py", &[&lab.base_url, scenario], pause).await
}

/// What one run did: its final output, its new items, its model calls.
fn ran(final_output: &str) -> Value {
    json!({
        "final": final_output,
        "items": ["tool_call_item", "tool_call_output_item", "message_output_item"],
        "model_calls": 2,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_a_function_tool_runs_through_labrouter_past_a_failing_gpu_box() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let seen = agent(&lab, "default", |what| panic!("no pause expected: {what}")).await;

    assert_eq!(seen["run"], ran("tool said: 22 C in sim"), "{seen}");
    assert_eq!(seen["streamed"], ran("tool said: 22 C in sim"));
    assert_eq!(
        seen["calls"],
        json!(["sim", "sim"]),
        "the tool ran once per run"
    );
    assert!(
        seen["stream_event_kinds"]
            .as_array()
            .unwrap()
            .contains(&json!("raw_response_event")),
        "{seen}"
    );
    // Four model calls: the GPU box's three failures opened its breaker, the fourth went
    // straight to the CPU box.
    assert_eq!(lab.responses(), (3, 4, 0));
    assert_eq!(lab.work(), (3, 4, 0));
    assert_eq!(lab.state("gpu-box"), "open");
    // The last call carried the whole turn, as the Agents SDK sends it by default.
    let sent = last_body(&lab.cpu);
    assert_eq!(sent["model"], "qwen3-coder:30b-q4");
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(
        texts(&sent),
        [
            "What is the weather in Paris?",
            "get_weather",
            "22 C in sim"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chained_agent_run_continues_on_the_cpu_box_when_the_gpu_box_goes_away_mid_run() {
    let lab = Lab::start().await;
    let seen = agent(&lab, "chained", |what| {
        assert_eq!(what, "the GPU box goes away");
        assert_eq!(
            lab.responses(),
            (1, 0, 0),
            "the tool call came from the GPU box"
        );
        lab.gpu.set(Fault::Refuse);
    })
    .await;

    assert_eq!(seen["run"], ran("tool said: 22 C in sim"), "{seen}");
    assert_eq!(seen["calls"], json!(["sim"]));
    // What the SDK sent: the whole input first, then an id and the tool's output alone.
    assert_eq!(seen["sent"], json!([[false, 1], [true, 1]]), "{seen}");
    assert_eq!(lab.responses(), (1, 1, 0));
    // The SDK sent previous_response_id and the tool's output only; labrouter kept the
    // first turn, so the CPU box received the whole run instead of an id it cannot know.
    let sent = last_body(&lab.cpu);
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    assert_eq!(
        texts(&sent),
        [
            "What is the weather in Paris?",
            "get_weather",
            "22 C in sim"
        ]
    );
    assert_eq!(sent["input"][1]["type"], "function_call");
    assert_eq!(sent["input"][2]["call_id"], sent["input"][1]["call_id"]);
}
