//! The evening's pictures, as the story has them ("after generating the images, post them"):
//! an agent asks for image generations as tasks on route `draw`, each with a follow-up that
//! posts it once drawn (`after: [image]`, with no `{{after.0}}`: a picture has no text to
//! put in). The GPU box draws in a fraction of a second; while it is away the CPU box draws,
//! slower. Watched from the queue until every one has ended, and counted for the summary.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{json, Value};

use super::agent;
use crate::outcome::TaskStatus;
use crate::tasks::{Scheduler, Task, TaskId};

/// Pictures the agent asks for; each has one follow-up that posts it.
pub const IMAGES: usize = 3;
/// The route the pictures are drawn on.
pub const ROUTE: &str = "draw";
/// Story seconds one picture takes on the GPU box, and on the CPU box.
pub const DRAW_GPU_S: f64 = 0.2;
pub const DRAW_CPU_S: f64 = 1.0;

const SUBJECTS: [&str; IMAGES] = [
    "a fox asleep on a park bench at dusk",
    "the home lab's rack as a watercolour",
    "a lighthouse in fog, seen from the harbour",
];

/// The body of picture `i`'s task.
fn image(i: usize) -> Value {
    json!({
        "endpoint": "images/generations",
        "metadata": {"job": "evening-pictures", "step": "draw", "n": i.to_string()},
        "request": {"model": ROUTE, "prompt": SUBJECTS[i % IMAGES], "n": 1,
            "response_format": "b64_json"},
    })
}

/// The body of the follow-up that posts picture `i` once it is drawn.
fn post(i: usize, image: &str) -> Value {
    json!({
        "route": "chat",
        "after": [image],
        "metadata": {"job": "evening-pictures", "step": "post", "n": i.to_string()},
        "request": {"model": "auto", "messages": [{"role": "user", "content": format!(
            "write a one-line caption to post with tonight's drawing: {}", SUBJECTS[i % IMAGES])}]},
    })
}

/// What the agent's submits came to.
#[derive(Debug, Default)]
pub struct Batch {
    pub images: Vec<TaskId>,
    pub posts: Vec<TaskId>,
    /// Why submits were refused (a post whose picture was refused is not sent).
    pub refused: Vec<String>,
}

/// The agent: asks for every picture and, once it has the picture's id, its post.
pub async fn submit(client: reqwest::Client, router: String) -> Batch {
    let url = format!("{router}/v1/tasks");
    let pairs = (0..IMAGES).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let img = agent::post(&client, &url, &image(i)).await?;
            let p = agent::post(&client, &url, &post(i, img.as_str())).await;
            Ok::<_, String>((img, p))
        }
    });
    let mut out = Batch::default();
    for pair in join_all(pairs).await {
        match pair {
            Ok((img, p)) => {
                out.images.push(img);
                match p {
                    Ok(p) => out.posts.push(p),
                    Err(why) => out.refused.push(why),
                }
            }
            Err(why) => out.refused.push(why),
        }
    }
    out
}

/// The pictures' part in the summary.
#[derive(Clone, Debug, Default)]
pub struct PictureSummary {
    /// Pictures and posts the agent meant to submit.
    pub planned: u64,
    /// Pictures drawn, by the target that drew each (`model@machine`), in order of id.
    pub drawn_by: Vec<String>,
    /// Posts that ran after their picture.
    pub posted: u64,
    /// Of the planned pictures and posts, those that did not succeed.
    pub failed: u64,
}

/// The watcher: says when the pictures are asked for and when every one has ended.
pub struct Pictures {
    scheduler: Arc<Scheduler>,
    batch: Option<Batch>,
    told_done: bool,
}

impl Pictures {
    pub fn new(scheduler: Arc<Scheduler>) -> Self {
        Pictures {
            scheduler,
            batch: None,
            told_done: false,
        }
    }

    /// Every picture and post asked for has ended, and it was told (true before the agent
    /// asked: nothing to wait for).
    pub fn finished(&self) -> bool {
        self.batch.is_none() || self.told_done
    }

    /// The agent's submits are in: what to say about them.
    pub fn submitted(&mut self, b: Batch) -> Vec<String> {
        let mut lines = vec![format!(
            "images: {} pictures submitted to route '{ROUTE}', {} posts blocked until their picture is drawn",
            b.images.len(),
            b.posts.len()
        )];
        for why in &b.refused {
            lines.push(format!("images: a submit FAILED: {why}"));
        }
        self.batch = Some(b);
        lines
    }

    /// The pictures' tasks as the queue has them now.
    async fn tasks(&self) -> (Vec<Task>, Vec<Task>) {
        let Some(b) = &self.batch else {
            return (Vec::new(), Vec::new());
        };
        let limit = u32::try_from(b.images.len() + b.posts.len() + 100).unwrap_or(u32::MAX);
        let all = self
            .scheduler
            .list(None, None, None, limit)
            .await
            .unwrap_or_default();
        let images: HashSet<&TaskId> = b.images.iter().collect();
        let posts: HashSet<&TaskId> = b.posts.iter().collect();
        let (mut i, mut p) = (Vec::new(), Vec::new());
        for t in all {
            if images.contains(&t.id) {
                i.push(t);
            } else if posts.contains(&t.id) {
                p.push(t);
            }
        }
        (i, p)
    }

    /// Looks at the queue: once every picture and post has ended, says how they went.
    pub async fn observe(&mut self) -> Vec<String> {
        let Some(b) = &self.batch else {
            return Vec::new();
        };
        if self.told_done {
            return Vec::new();
        }
        let known = b.images.len() + b.posts.len();
        let (images, posts) = self.tasks().await;
        let ended = |t: &Task| t.finished_ms.is_some();
        if images.len() + posts.len() != known || !images.iter().chain(&posts).all(ended) {
            return Vec::new();
        }
        self.told_done = true;
        vec![done_line(&images, &posts, b.refused.len())]
    }

    /// The pictures' part of the summary.
    pub async fn summary(&self) -> PictureSummary {
        let (images, posts) = self.tasks().await;
        let ok = |t: &&Task| t.status == TaskStatus::Succeeded;
        let drawn_by: Vec<String> = images
            .iter()
            .filter(ok)
            .filter_map(|t| t.result.as_ref().map(|r| r.target.clone()))
            .collect();
        let posted = posts.iter().filter(ok).count() as u64;
        let planned = 2 * IMAGES as u64;
        PictureSummary {
            planned,
            failed: planned.saturating_sub(drawn_by.len() as u64 + posted),
            drawn_by,
            posted,
        }
    }
}

/// Every picture and post has ended: who drew them and how long a picture took, the posts
/// that ran, and what failed.
fn done_line(images: &[Task], posts: &[Task], refused: usize) -> String {
    let mut by: Vec<String> = images
        .iter()
        .filter_map(|t| t.result.as_ref().map(|r| r.target.clone()))
        .collect();
    by.sort();
    by.dedup();
    let took: Vec<i64> = images
        .iter()
        .filter_map(|t| Some(t.finished_ms? - t.started_ms?))
        .collect();
    let mean = took.iter().sum::<i64>() as f64 / took.len().max(1) as f64 / 1000.0;
    let succeeded = |ts: &[Task]| {
        ts.iter()
            .filter(|t| t.status == TaskStatus::Succeeded)
            .count()
    };
    let failed = images.len() + posts.len() - succeeded(images) - succeeded(posts) + refused;
    let verdict = match failed {
        0 => "0 failed".to_string(),
        n => format!("{n} FAILED"),
    };
    format!(
        "images: all {} drawn by {} ({mean:.1}s a picture) and {} posts ran after their picture, {verdict}",
        succeeded(images),
        by.join(", "),
        succeeded(posts)
    )
}
