//! The official `openai` Python SDK's Responses calls through labrouter
//! (tests/openai_client/responses.py).

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::lab::{last_body, texts, Lab};
use crate::script;

/// Runs one scenario of responses.py against the lab; `pause` changes the lab when the
/// script asks.
async fn sdk(lab: &Lab, scenario: &str, pause: impl FnMut(&str)) -> Value {
    script::run("responses.py", &[&lab.base_url, scenario], pause).await
}

/// The event types of a plain streamed Response with three text deltas.
fn plain_events() -> Vec<&'static str> {
    let mut types = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    types.extend(["response.output_text.delta"; 3]);
    types.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_creates_streams_retrieves_and_deletes_responses_past_a_failing_gpu_box() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let seen = sdk(&lab, "responses", |what| {
        panic!("no pause expected: {what}")
    })
    .await;

    assert_eq!(seen["plain"], "ok from ubuntu-box", "{seen}");
    assert_eq!(seen["plain_status"], "completed");
    assert_eq!(seen["target"], "coder-cpu@ubuntu-box");
    assert_eq!(seen["skipped"], "coder-gpu@gpu-box=http_5xx");
    let pieces = "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ";
    assert_eq!(seen["stream"]["types"], json!(plain_events()));
    assert_eq!(seen["stream"]["deltas"], pieces);
    assert_eq!(seen["accumulated"], pieces);
    assert_eq!(
        seen["call"],
        json!(["function_call", "get_weather", {"city": "sim"}])
    );
    // Kept by labrouter, whole or assembled from the stream's events; deleted, then gone.
    let id = seen["plain_id"].as_str().unwrap();
    assert_eq!(
        seen["retrieved"],
        json!([id, "ok from ubuntu-box", "completed", "qwen3-coder:30b-q4"])
    );
    assert_eq!(seen["retrieved_stream"], pieces);
    assert_eq!(
        seen["deleted"],
        Value::Null,
        "the SDK's delete returns None"
    );
    let gone = json!([404, "response_not_found"]);
    assert_eq!(seen["after_delete"], gone);
    assert_eq!(seen["delete_again"], gone);
    assert_eq!(seen["unknown"], gone);

    // Four Responses: the GPU box's three failures opened its breaker, so the fourth never
    // left labrouter for it; retrieve and delete reached no machine.
    assert_eq!(lab.responses(), (3, 4, 0));
    assert_eq!(lab.work(), (3, 4, 0));
    assert_eq!(lab.state("gpu-box"), "open");
    let sent = last_body(&lab.cpu);
    assert_eq!(sent["model"], "qwen3-coder:30b-q4");
    assert_eq!(sent["tools"][0]["name"], "get_weather");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_a_stream_cut_before_its_first_event_from_the_next_machine_and_one_cut_after_as_stream_cut(
) {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::CutAfter(0));
    let seen = sdk(&lab, "cut", |what| {
        assert_eq!(what, "cut after events");
        assert_eq!(lab.responses(), (1, 1, 0), "the first stream moved on");
        lab.gpu.set(Fault::CutAfter(2));
    })
    .await;

    let before = &seen["before"];
    assert_eq!(before["types"], json!(plain_events()), "{seen}");
    assert_eq!(before["deltas"], "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ");
    // Two events reached the client, then the machine cut: nothing left to fail over to.
    let after = &seen["after"];
    assert_eq!(
        after["types"],
        json!(["response.created", "response.in_progress", "error"]),
        "{seen}"
    );
    assert_eq!(after["error"][0], "stream_cut");
    assert_eq!(lab.responses(), (2, 1, 0));
    assert_eq!(lab.state("gpu-box"), "closed", "two failures of three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_turn_sdk_conversation_continues_on_the_cpu_box_when_the_gpu_box_goes_away() {
    let lab = Lab::start().await;
    let mut turn_three = None;
    let seen = sdk(&lab, "conversation", |what| match what {
        "the GPU box goes away" => {
            assert_eq!(
                lab.responses(),
                (2, 0, 0),
                "turns one and two on the GPU box"
            );
            lab.gpu.set(Fault::Refuse);
        }
        "turn three answered" => turn_three = Some(last_body(&lab.cpu)),
        other => panic!("unexpected pause: {other}"),
    })
    .await;

    let ids = seen["ids"].as_array().unwrap();
    assert_eq!(
        seen["texts"],
        json!([
            "ok from gpu-box",
            "gpu-box-0 gpu-box-1 gpu-box-2 ",
            "ok from ubuntu-box"
        ]),
        "{seen}"
    );
    assert_eq!(seen["three_previous"], ids[1], "echoed as the SDK sent it");
    assert_eq!(seen["three_kept"], json!(["ok from ubuntu-box", ids[1]]));
    // Turn three's machine received the whole conversation once, oldest first (the
    // streamed turn assembled from its events), and no id it could not know.
    let sent = turn_three.expect("turn three was answered");
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    assert_eq!(sent["model"], "qwen3-coder:30b-q4");
    assert_eq!(
        texts(&sent),
        [
            "question one about code",
            "ok from gpu-box",
            "question two",
            "gpu-box-0 gpu-box-1 gpu-box-2 ",
            "question three"
        ]
    );
    // A fourth turn with `store: false` is continued too, but not kept.
    assert_eq!(seen["four"], "ok from ubuntu-box");
    assert_eq!(seen["four_kept"], json!([404, "response_not_found"]));
    assert_eq!(texts(&last_body(&lab.cpu)).len(), 7);
    // Refused connections reach no machine: the GPU box saw turns one and two only.
    assert_eq!(lab.responses(), (2, 2, 0));
}
