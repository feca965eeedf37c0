//! Tasks on the Responses API (docs/api.md "Tasks"): `"endpoint": "responses"`, and a
//! follow-up whose `{{after.0}}` reads its parent Response's output text.

use std::time::Duration;

use serde_json::{json, Value};

use crate::lab::Lab;

#[tokio::test(start_paused = true)]
async fn a_responses_task_and_its_follow_up_read_the_output_text() {
    let lab = Lab::start("").await;
    let parent = json!({"endpoint": "responses", "request": {"model": "code", "input": "write a rust function"}});
    let resp = lab.post("/v1/tasks", parent).await;
    assert_eq!(resp.status(), 202);
    let parent: Value = resp.json().await.unwrap();
    let pid = parent["id"].as_str().unwrap().to_string();
    let child = json!({"endpoint": "responses", "after": [pid],
        "request": {"model": "code", "input": [{"role": "user", "content": "review: {{after.0}}"}]}});
    let resp = lab.post("/v1/tasks", child).await;
    assert_eq!(resp.status(), 202);
    let child: Value = resp.json().await.unwrap();
    let cid = child["id"].as_str().unwrap().to_string();
    lab.settle(Duration::from_millis(100), Duration::from_secs(10))
        .await;

    let done = lab.task(&pid).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["result"]["body"]["object"], "response", "{done}");
    let done = lab.task(&cid).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    // The follow-up reached the machine with its parent's output text in its input.
    let sent: Value = serde_json::from_slice(&lab.gpu.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["input"][0]["content"], "review: ok from gpu-box",
        "{sent}"
    );
    assert_eq!(lab.gpu.hits("/v1/responses"), 2);
    assert_eq!(lab.work(), (2, 0, 0));
}
