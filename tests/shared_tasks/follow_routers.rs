//! Follow-ups across two router processes on one shared queue, the simulated machine's
//! requests the witness: a follow-up submitted on b of a parent submitted on a reaches the
//! machine only after the parent's answer, with that answer's text in it; a parent that
//! expires cancels its follow-ups down the chain and none of them reaches the machine; a
//! follow-up of a parent that already ended is stored cancelled at submit; one that puts in
//! an image parent's output ends `dependency_unusable` without reaching the machine.

use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::anywhere::finished;
use crate::routers::Lab;

/// POSTs `body` as a task to `router`: the status and the answer.
pub(crate) async fn post(lab: &Lab, router: usize, body: Value) -> (u16, Value) {
    let resp = lab
        .client
        .post(format!("{}/v1/tasks", lab.base(router)))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The child (router, id) succeeded after its parent (router, id): the machine saw two
/// requests, the child's last, with the parent's answer in it.
pub(crate) async fn ran_after_parent(lab: &Lab, child: (usize, &str), parent: (usize, &str)) {
    let done = finished(lab, child.0, child.1).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let parent = finished(lab, parent.0, parent.1).await;
    assert_eq!(parent["status"], "succeeded", "{parent}");
    assert_eq!(
        lab.sim.work_hits(),
        2,
        "the parent's request, then the child's"
    );
    let sent: Value = serde_json::from_slice(&lab.sim.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["messages"][0]["content"], "review: the parent's summary",
        "the last request is the child's, with its parent's answer in it"
    );
}

/// A chat task saying `text`, after `after`, with `extra` fields.
fn chat(text: &str, after: &[&str], extra: Value) -> Value {
    let mut body = json!({
        "request": {"model": "auto", "messages": [{"role": "user", "content": text}]},
        "after": after,
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

fn id(task: &Value) -> &str {
    task["id"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_on_b_reaches_the_machine_after_its_parent_on_a_with_the_parents_text() {
    let mut lab = Lab::start("5s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    lab.sim.set_text(Some("the parent's summary"));
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(1)));
    let (status, parent) = post(&lab, a, chat("summarise", &[], json!({}))).await;
    assert_eq!(status, 202, "{parent}");
    let (status, child) = post(
        &lab,
        b,
        chat("review: {{after.0}}", &[id(&parent)], json!({})),
    )
    .await;
    assert_eq!(status, 202, "{child}");
    assert_eq!(child["status"], "blocked", "{child}");
    assert_eq!(child["after"], json!([id(&parent)]), "{child}");
    lab.until(
        "the parent reaches the machine",
        Duration::from_secs(10),
        async || lab.sim.work_hits() == 1,
    )
    .await;
    let (_, shown) = lab.get(a, &format!("/v1/tasks/{}", id(&child))).await;
    assert_eq!(shown["status"], "blocked", "still: {shown}");
    ran_after_parent(&lab, (a, id(&child)), (b, id(&parent))).await;
    // Parents that succeeded already: queued at once, and run with their text.
    let (status, late) = post(
        &lab,
        b,
        chat("again: {{after.0}}", &[id(&parent)], json!({})),
    )
    .await;
    assert_eq!(
        (status, late["status"].as_str()),
        (202, Some("queued")),
        "{late}"
    );
    let done = finished(&lab, a, id(&late)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let sent: Value = serde_json::from_slice(&lab.sim.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["messages"][0]["content"],
        "again: the parent's summary"
    );
    assert_eq!(lab.sim.work_hits(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_that_expires_cancels_its_follow_ups_on_both_routers_and_none_reaches_the_machine()
{
    let mut lab = Lab::start("5s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    // The parent's answer would come after its deadline.
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let (_, parent) = post(&lab, a, chat("summarise", &[], json!({"deadline": "2s"}))).await;
    let (_, child) = post(
        &lab,
        b,
        chat("review: {{after.0}}", &[id(&parent)], json!({})),
    )
    .await;
    let (_, grandchild) = post(&lab, a, chat("and {{after.0}}", &[id(&child)], json!({}))).await;
    for t in [&child, &grandchild] {
        assert_eq!(t["status"], "blocked", "{t}");
    }
    let ended = finished(&lab, b, id(&parent)).await;
    assert_eq!(ended["status"], "expired", "{ended}");
    for (t, by, how) in [
        (&child, &parent, "expired"),
        (&grandchild, &child, "cancelled"),
    ] {
        let done = finished(&lab, a, id(t)).await;
        assert_eq!(done["status"], "cancelled", "{done}");
        assert_eq!(done["error"]["code"], "dependency_failed", "{done}");
        let said = format!("a task it follows, {}, ended {how}", id(by));
        assert_eq!(done["error"]["message"], said.as_str(), "{done}");
    }
    // A follow-up of the parent now: stored cancelled at once, as the local queue does.
    let (status, late) = post(&lab, b, chat("{{after.0}}", &[id(&parent)], json!({}))).await;
    assert_eq!(status, 202, "{late}");
    assert_eq!(late["status"], "cancelled", "{late}");
    assert_eq!(late["error"]["code"], "dependency_failed", "{late}");
    let said = format!("after[0] {} expired", id(&parent));
    assert!(
        late["error"]["message"].as_str().unwrap().contains(&said),
        "{late}"
    );
    // Only the parent's request ever reached the machine.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(lab.sim.work_hits(), 1, "{}", lab.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_putting_in_an_image_parents_output_ends_unusable_and_never_reaches_the_machine(
) {
    let mut lab = Lab::start("5s", 4).await;
    lab.images = true;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    let draw = json!({"endpoint": "images/generations", "route": "draw",
        "request": {"model": "draw", "prompt": "a fox on a bench", "response_format": "b64_json"}});
    let (status, images) = post(&lab, a, draw).await;
    assert_eq!(status, 202, "{images}");
    let after = [id(&images)];
    let (_, caption) = post(
        &lab,
        b,
        chat("a caption for {{after.0}}", &after, json!({})),
    )
    .await;
    let (_, plain) = post(&lab, b, chat("post them", &after, json!({}))).await;
    let caption = finished(&lab, a, id(&caption)).await;
    assert_eq!(caption["status"], "cancelled", "{caption}");
    assert_eq!(caption["error"]["code"], "dependency_unusable", "{caption}");
    let said = caption["error"]["message"].as_str().unwrap();
    assert!(said.contains("image"), "{caption}");
    let plain = finished(&lab, a, id(&plain)).await;
    assert_eq!(plain["status"], "succeeded", "it puts in nothing: {plain}");
    assert_eq!(lab.sim.hits("/v1/images/generations"), 1);
    assert_eq!(
        lab.sim.hits("/v1/chat/completions"),
        1,
        "the plain follow-up's only"
    );
}
