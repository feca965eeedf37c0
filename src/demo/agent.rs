//! The evening pipeline's agent (docs/api.md "Tasks"): submits code reviews as tasks over HTTP, as a
//! real agent would, each with a follow-up that runs after it and uses its answer
//! (`"after": [review]`, `{{after.0}}` in its content).

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::tasks::TaskId;

/// Code reviews in the pipeline; each has one follow-up.
pub const REVIEWS: usize = 40;
/// The route the pipeline's tasks are sent to.
pub const ROUTE: &str = "code";

const FILES: [&str; 8] = [
    "src/parser.rs",
    "src/scheduler.py",
    "src/cache.rs",
    "src/auth/session.py",
    "src/net/retry.rs",
    "src/billing.py",
    "src/config.rs",
    "src/export/csv.py",
];

/// The body of review `i`. The tasks accept only the route's first model (`same_model`):
/// a review by the 4B fallback would not do.
fn review(i: usize) -> Value {
    let file = FILES[i % FILES.len()];
    json!({
        "route": ROUTE,
        "accept": "same_model",
        "metadata": {"job": "evening-review", "step": "review", "n": i.to_string()},
        "request": {"model": "auto", "messages": [{"role": "user",
            "content": format!("review {file} (part {}) for bugs and list what to fix", i / FILES.len() + 1)}]},
    })
}

/// The body of review `i`'s follow-up, once the review has an id.
fn follow_up(i: usize, review: &str) -> Value {
    json!({
        "route": ROUTE,
        "accept": "same_model",
        "after": [review],
        "metadata": {"job": "evening-review", "step": "follow-up", "n": i.to_string()},
        "request": {"model": "auto", "messages": [{"role": "user",
            "content": "write a unit test for each finding of this review:\n{{after.0}}"}]},
    })
}

/// What the agent's submits came to.
#[derive(Debug, Default)]
pub struct Submitted {
    pub reviews: Vec<TaskId>,
    pub follow_ups: Vec<TaskId>,
    /// Why submits were refused (a follow-up whose review was refused is not sent).
    pub refused: Vec<String>,
}

/// The agent: submits every review and, once it has the review's id, its follow-up; the
/// pairs go at once, so the router's group commit stores them together.
pub async fn submit(client: reqwest::Client, router: String) -> Submitted {
    let url = format!("{router}/v1/tasks");
    let pairs = (0..REVIEWS).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let r = post(&client, &url, &review(i)).await?;
            let f = post(&client, &url, &follow_up(i, r.as_str())).await;
            Ok::<_, String>((r, f))
        }
    });
    let mut out = Submitted::default();
    for pair in join_all(pairs).await {
        match pair {
            Ok((r, f)) => {
                out.reviews.push(r);
                match f {
                    Ok(f) => out.follow_ups.push(f),
                    Err(why) => out.refused.push(why),
                }
            }
            Err(why) => out.refused.push(why),
        }
    }
    out
}

/// One submit: the new task's id, or why there is none.
pub(super) async fn post(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> Result<TaskId, String> {
    let resp = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| format!("router unreachable: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status != reqwest::StatusCode::ACCEPTED {
        let snippet: String = text.chars().take(160).collect();
        return Err(format!("submit answered HTTP {status}: {snippet}"));
    }
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["id"].as_str().and_then(|id| id.parse().ok()))
        .ok_or_else(|| format!("submit answered 202 without a task id: {text}"))
}
