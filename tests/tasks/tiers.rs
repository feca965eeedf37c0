//! Tasks pick inside a tier as requests do (docs/registry.md "routes:"): one walk for both.

use std::time::Duration;

use serde_json::json;

use crate::lab::Lab;

#[tokio::test(start_paused = true)]
async fn a_task_goes_to_the_warm_twin_of_a_tier() {
    let lab = Lab::start_tiered("").await;
    // The CPU box answers once: it is warm for five minutes; the GPU box has never answered.
    let body = json!({"model": "coder-cpu", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(lab.post("/v1/chat/completions", body).await.status(), 200);
    assert_eq!(lab.work(), (0, 1, 0));

    let task = lab.submit("refactor this rust code", json!({})).await;
    let id = task["id"].as_str().unwrap().to_string();
    lab.settle(Duration::from_millis(100), Duration::from_secs(10))
        .await;
    let done = lab.task(&id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["result"]["target"], "coder-cpu@ubuntu-box", "{done}");
    assert_eq!(
        lab.work(),
        (0, 2, 0),
        "the warm twin, though the GPU box stands first"
    );
}
