//! The story's pipeline as tasks (docs/api.md "Tasks"): generate the images, then post
//! them — an `images/generations` task with a chat follow-up that runs after it, and a
//! callback, through a GPU-box outage; and a follow-up that would put an image parent's
//! output into its request, which cannot be done.

use std::time::Duration;

use base64::Engine as _;
use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::callbacks::{id_of, settled, Receiver};
use crate::lab::Lab;

/// Submits an image generation task on route `draw`; `extra` adds submit fields.
async fn draw(lab: &Lab, prompt: &str, extra: Value) -> Value {
    let mut body = json!({"endpoint": "images/generations",
        "request": {"model": "draw", "prompt": prompt, "n": 2, "response_format": "b64_json"}});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let resp = lab.post("/v1/tasks", body).await;
    assert_eq!(resp.status(), 202, "submit");
    resp.json().await.unwrap()
}

async fn finished(lab: &Lab, id: &str) -> Value {
    let resp = lab.get(&format!("/v1/tasks/{id}?wait=10m")).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_image_pipeline_runs_through_a_gpu_box_outage_and_calls_back() {
    let lab = Lab::start_images("").await;
    let hook = Receiver::start(200).await;
    // The GPU box's image server crashes on every request it reads; the CPU box draws,
    // slower (3 s before its answer starts; the first-byte timeout is 5 s).
    lab.gpu.set(Fault::Reset);
    lab.cpu.set(Fault::SlowFirstByte(Duration::from_secs(3)));
    let images = draw(&lab, "a fox on a bench", json!({})).await;
    let post = lab
        .submit(
            "post them to the feed with a short caption",
            json!({"after": [id_of(&images)], "callback": {"url": hook.url}}),
        )
        .await;
    assert_eq!(post["status"], "blocked", "{post}");
    // While the CPU box draws, the post waits for the images.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        lab.cpu.hits("/v1/images/generations"),
        1,
        "the CPU box is drawing"
    );
    assert_eq!(lab.task(&id_of(&post)).await["status"], "blocked");
    assert_eq!(
        lab.local.work_hits(),
        0,
        "nothing is posted before the images exist"
    );

    let done = finished(&lab, &id_of(&post)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let images = finished(&lab, &id_of(&images)).await;
    assert_eq!(images["status"], "succeeded", "{images}");
    assert_eq!(images["result"]["target"], "sdxl-cpu@ubuntu-box");
    let data = images["result"]["body"]["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    let png = base64::engine::general_purpose::STANDARD
        .decode(data[0]["b64_json"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // The wire: the GPU box was tried once, the CPU box drew, then the follow-up's chat
    // reached `local`, with its request as submitted.
    assert_eq!(lab.gpu.hits("/v1/images/generations"), 1);
    assert_eq!(lab.cpu.hits("/v1/images/generations"), 1);
    assert_eq!(lab.local.hits("/v1/chat/completions"), 1);
    assert_eq!(lab.work(), (1, 1, 1));
    let sent: Value = serde_json::from_slice(&lab.local.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["messages"][0]["content"],
        "post them to the feed with a short caption"
    );

    let called = settled(&lab, &id_of(&post), Duration::from_secs(60)).await;
    assert_eq!(called["callback"]["state"], "delivered", "{called}");
    let seen = hook.seen();
    assert_eq!(seen.len(), 1, "one callback, for the follow-up");
    let body = seen[0].json();
    assert_eq!(body["id"], id_of(&post));
    assert_eq!(body["status"], "succeeded");
    assert_eq!(body["after"], json!([id_of(&images)]));
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_that_puts_in_an_image_parents_output_ends_dependency_unusable() {
    let lab = Lab::start_images("").await;
    let images = draw(&lab, "a fox on a bench", json!({})).await;
    let after = json!({"after": [id_of(&images)]});
    let caption = lab
        .submit("write a caption for {{after.0}}", after.clone())
        .await;
    let post = lab.submit("post them to the feed", after).await;

    let caption = finished(&lab, &id_of(&caption)).await;
    assert_eq!(caption["status"], "cancelled", "{caption}");
    assert_eq!(caption["error"]["code"], "dependency_unusable");
    assert!(
        caption["error"]["message"]
            .as_str()
            .unwrap()
            .contains("image"),
        "{caption}"
    );
    let post = finished(&lab, &id_of(&post)).await;
    assert_eq!(
        post["status"], "succeeded",
        "the one that only runs after it runs"
    );
    assert_eq!(lab.gpu.hits("/v1/images/generations"), 1);
    assert_eq!(
        lab.work(),
        (1, 0, 1),
        "the images, then only the post's chat"
    );
    lab.stop().await;
}
