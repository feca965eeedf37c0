//! What `labrouter task` prints, as pure functions of the task objects the router answered:
//! the status line, the `show` summary, the `list` table, the answer text.

use serde::Deserialize;
use serde_json::Value;

use crate::outcome::TaskStatus;

/// The task object of docs/api.md "Tasks", as the CLI reads it (summaries lack `attempts` and
/// `result`). Codes and reasons stay strings: a newer router may know more of them.
#[derive(Clone, Debug, Deserialize)]
pub struct TaskView {
    pub id: String,
    pub status: TaskStatus,
    pub route: Option<String>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub after: Vec<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub deadline: String,
    pub attempts_used: u32,
    pub max_attempts: u32,
    pub waiting_for: Option<String>,
    #[serde(default)]
    pub attempts: Vec<AttemptView>,
    #[serde(default)]
    pub result: Option<Served>,
    pub error: Option<ErrorView>,
    #[serde(default)]
    pub callback: Option<CallbackView>,
}

/// One target's part in one walk.
#[derive(Clone, Debug, Deserialize)]
pub struct AttemptView {
    pub at: String,
    pub target: String,
    pub outcome: String,
    pub reason: Option<String>,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub charged: bool,
}

/// A succeeded task's `result`: which target answered, and its answer.
#[derive(Clone, Debug, Deserialize)]
pub struct Served {
    pub status: u16,
    pub target: String,
    pub body: Value,
}

/// A task's OpenAI-style error.
#[derive(Clone, Debug, Deserialize)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CallbackView {
    pub url: String,
    pub state: String,
    pub attempts: u32,
    pub last_error: Option<String>,
}

/// A page of `GET /v1/tasks`.
#[derive(Clone, Debug, Deserialize)]
pub struct Page {
    pub data: Vec<TaskView>,
    pub next_before: Option<Cursor>,
}

/// Where the next page starts: a number from a router's own queue, a task id from the shared
/// queue (README "Several routers").
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Cursor {
    Seq(i64),
    Id(String),
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cursor::Seq(n) => write!(f, "{n}"),
            Cursor::Id(id) => f.write_str(&crate::text::bounded(id)),
        }
    }
}

/// The text of an answer: chat's first message content (text parts joined), completions'
/// first text; `None` for anything else (embeddings).
pub fn answer_text(body: &Value) -> Option<String> {
    let first = body.get("choices")?.get(0)?;
    if let Some(t) = first.get("text").and_then(Value::as_str) {
        return Some(t.to_string());
    }
    match first.get("message")?.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        _ => None,
    }
}

/// What a succeeded task answered, for a person: its text, or what kind of answer it is.
pub fn result_text(served: &Served) -> String {
    if let Some(t) = answer_text(&served.body) {
        return t;
    }
    match served.body.get("data").and_then(Value::as_array) {
        Some(d) => format!(
            "({} embedding{}; --json shows them)",
            d.len(),
            if d.len() == 1 { "" } else { "s" }
        ),
        None => "(no text in the answer; --json shows it)".to_string(),
    }
}

/// `code: message` of a task's error.
pub fn error_words(e: &ErrorView) -> String {
    format!("{}: {}", e.code, e.message)
}

/// One line: the id, the status and what it is about (what it waits for, who served it,
/// why it ended). `submit`, `cancel` and the progress of `--wait` print it.
pub fn status_line(t: &TaskView) -> String {
    let mut line = format!("{}  {}", t.id, t.status);
    if let Some(about) = about(t) {
        line.push_str(": ");
        line.push_str(&about);
    }
    line
}

/// What a task's status is about, when there is more to say than the status.
fn about(t: &TaskView) -> Option<String> {
    if let Some(e) = &t.error {
        // `cancelled: cancelled by its owner`, not `cancelled: cancelled: ...`.
        return Some(match e.code == t.status.as_str() {
            true => e.message.clone(),
            false => error_words(e),
        });
    }
    if let Some(r) = &t.result {
        return Some(format!("served by {}", r.target));
    }
    if let Some(w) = &t.waiting_for {
        return Some(w.clone());
    }
    (t.status == TaskStatus::Blocked && !t.after.is_empty())
        .then(|| format!("after {}", t.after.join(", ")))
}

/// How many of a task's tries `show` lists (the latest); `--json` has them all.
const TRIES_SHOWN: usize = 8;

/// `labrouter task show`: the whole task for a person.
pub fn summary(t: &TaskView) -> String {
    let mut out = String::new();
    for (k, v) in fields(t) {
        out.push_str(&format!("{k:<10} {v}\n"));
    }
    if !t.attempts.is_empty() {
        out.push_str(&tries(&t.attempts));
    }
    if let Some(r) = &t.result {
        out.push_str("answer:\n");
        out.push_str(result_text(r).trim_end());
        out.push('\n');
    }
    out
}

/// The task's fields as labelled rows, the ones it lacks left out.
fn fields(t: &TaskView) -> Vec<(&'static str, String)> {
    let mut rows: Vec<(&str, String)> =
        vec![("task", t.id.clone()), ("status", t.status.to_string())];
    if let Some(w) = &t.waiting_for {
        rows.push(("waiting", w.clone()));
    }
    rows.push((
        "route",
        format!(
            "{} (priority {})",
            t.route.as_deref().unwrap_or("by content"),
            t.priority
        ),
    ));
    rows.push((
        "attempts",
        format!("{} of {} used", t.attempts_used, t.max_attempts),
    ));
    if !t.after.is_empty() {
        rows.push(("after", t.after.join(", ")));
    }
    rows.push(("created", t.created_at.clone()));
    if let Some(s) = &t.started_at {
        rows.push(("started", s.clone()));
    }
    if let Some(f) = &t.finished_at {
        rows.push(("finished", f.clone()));
    }
    rows.push(("deadline", t.deadline.clone()));
    if let Some(c) = &t.callback {
        rows.push(("callback", callback_words(c)));
    }
    if let Some(r) = &t.result {
        rows.push(("served by", format!("{} (HTTP {})", r.target, r.status)));
    }
    if let Some(e) = &t.error {
        rows.push(("error", error_words(e)));
    }
    rows
}

/// A callback's URL, delivery state, attempts and last error.
fn callback_words(c: &CallbackView) -> String {
    let mut s = format!(
        "{} {} ({} attempt{})",
        c.url,
        c.state,
        c.attempts,
        if c.attempts == 1 { "" } else { "s" }
    );
    if let Some(e) = &c.last_error {
        s.push_str(&format!(": {e}"));
    }
    s
}

/// The latest [`TRIES_SHOWN`] tries, a line each, and how many earlier ones are left out.
fn tries(attempts: &[AttemptView]) -> String {
    let skip = attempts.len().saturating_sub(TRIES_SHOWN);
    let mut out = String::from("tries:\n");
    if skip > 0 {
        out.push_str(&format!("  ({skip} earlier; --json lists them)\n"));
    }
    for a in &attempts[skip..] {
        let mut line = format!("  {}  {}  {}", a.at, a.target, a.outcome);
        if let Some(r) = &a.reason {
            line.push_str(&format!("  {r}"));
        }
        if let Some(d) = &a.detail {
            line.push_str(&format!(" ({d})"));
        }
        if a.charged {
            line.push_str("  [attempt used]");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The last column of `list` keeps at most this many characters.
const ABOUT_MAX: usize = 80;

/// `labrouter task list`: one row per task.
pub fn table(tasks: &[TaskView]) -> String {
    let mut rows = vec![[
        "ID".to_string(),
        "STATUS".into(),
        "ROUTE".into(),
        "ATTEMPTS".into(),
        "CREATED".into(),
        "WAITING FOR / ERROR".into(),
    ]];
    for t in tasks {
        // The row says what holds the task or why it ended, not who served it.
        let about = match (&t.error, &t.waiting_for) {
            (Some(e), _) => Some(error_words(e)),
            (None, Some(w)) => Some(w.clone()),
            (None, None) => (t.status == TaskStatus::Blocked && !t.after.is_empty())
                .then(|| format!("after {}", t.after.join(", "))),
        };
        rows.push([
            t.id.clone(),
            t.status.to_string(),
            t.route.clone().unwrap_or_else(|| "-".into()),
            format!("{}/{}", t.attempts_used, t.max_attempts),
            t.created_at.clone(),
            clip(&about.unwrap_or_else(|| "-".into()), ABOUT_MAX),
        ]);
    }
    crate::text::columns(&rows)
}

/// `s` on one line, cut to `max` characters (with `…` when cut).
fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests;
