//! The callback body: the task object, cut to fit [`MAX_BODY`] (docs/api.md "Tasks").

use serde_json::{Map, Value};

/// The most a callback body may hold (docs/api.md "Tasks": 256 KiB).
pub const MAX_BODY: usize = 256 * 1024;

/// What a body keeps when everything else had to go: enough to fetch the task and to know
/// how it ended.
const SUMMARY: [&str; 6] = [
    "id",
    "object",
    "status",
    "created_at",
    "finished_at",
    "truncated",
];

/// The task object serialized as the callback body, never more than [`MAX_BODY`] bytes.
///
/// A task that fits is sent as it is. Otherwise it gets `"truncated": true` (the receiver
/// should fetch the task) and loses, one step at a time until it fits:
/// 1. `result` (set to `null`);
/// 2. `metadata` (set to `{}`) and `attempts` (set to `[]`);
/// 3. `request` (set to `null`);
/// 4. every field but `id`, `object`, `status`, `created_at`, `finished_at`, `truncated`;
/// 5. everything: the body is `{"truncated":true}` (only a task whose id or status alone is
///    huge gets here).
///
/// A value that is not a JSON object and does not fit goes straight to step 5.
pub fn body_for(task: &Value) -> Vec<u8> {
    if let Some(whole) = fitting(task) {
        return whole;
    }
    if let Value::Object(fields) = task {
        let mut cut = fields.clone();
        cut.insert("truncated".to_owned(), Value::Bool(true));
        for step in CUTS {
            step(&mut cut);
            if let Some(body) = fitting(&cut) {
                return body;
            }
        }
    }
    br#"{"truncated":true}"#.to_vec()
}

/// The steps of [`body_for`], in order; each applies to what the ones before it left.
const CUTS: [fn(&mut Task); 4] = [
    |t| set(t, "result", Value::Null),
    |t| {
        set(t, "metadata", Value::Object(Map::new()));
        set(t, "attempts", Value::Array(Vec::new()));
    },
    |t| set(t, "request", Value::Null),
    |t| t.retain(|key, _| SUMMARY.contains(&key.as_str())),
];

type Task = Map<String, Value>;

/// Replaces a field the task has; adds none it lacks.
fn set(task: &mut Task, key: &str, value: Value) {
    if let Some(slot) = task.get_mut(key) {
        *slot = value;
    }
}

/// `value` serialized, if it fits.
fn fitting(value: &impl serde::Serialize) -> Option<Vec<u8>> {
    serde_json::to_vec(value)
        .ok()
        .filter(|body| body.len() <= MAX_BODY)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task() -> Value {
        json!({"id": "tsk_1", "object": "task", "status": "succeeded",
               "created_at": "2026-11-30T14:02:11Z", "finished_at": "2026-11-30T14:03:00Z",
               "metadata": {"job": "nightly"}, "attempts": [{"outcome": "ok"}],
               "request": {"messages": []}, "result": {"body": "short"}, "error": null})
    }

    fn parse(body: &[u8]) -> Value {
        assert!(body.len() <= MAX_BODY, "{} bytes", body.len());
        serde_json::from_slice(body).unwrap()
    }

    #[test]
    fn a_task_that_fits_is_sent_whole_and_not_marked() {
        let t = task();
        assert_eq!(parse(&body_for(&t)), t);
    }

    #[test]
    fn a_large_result_goes_first() {
        let mut t = task();
        t["result"]["body"] = json!("x".repeat(MAX_BODY));
        let got = parse(&body_for(&t));
        assert_eq!(got["truncated"], json!(true));
        assert_eq!(got["result"], Value::Null);
        assert_eq!(
            got["metadata"],
            json!({"job": "nightly"}),
            "kept: it fits now"
        );
        assert_eq!(got["attempts"], json!([{"outcome": "ok"}]));
        assert_eq!(got["status"], json!("succeeded"));
    }

    #[test]
    fn then_metadata_and_attempts_then_the_request_then_all_but_the_summary() {
        let big = || json!("y".repeat(MAX_BODY / 2));
        let mut t = task();
        t["result"] = big();
        t["attempts"] = json!([big(), big()]);
        let got = parse(&body_for(&t));
        assert_eq!(
            (got["metadata"].clone(), got["attempts"].clone()),
            (json!({}), json!([]))
        );
        assert_eq!(got["request"], json!({"messages": []}), "kept: it fits now");

        t["request"] = json!([big(), big()]);
        let got = parse(&body_for(&t));
        assert_eq!(got["request"], Value::Null);
        assert_eq!(got["error"], Value::Null);
        assert!(got.get("error").is_some(), "still there: it fits now");

        t["error"] = json!({"message": "z".repeat(MAX_BODY)});
        let got = parse(&body_for(&t));
        assert_eq!(
            got,
            json!({"id": "tsk_1", "object": "task", "status": "succeeded",
                   "created_at": "2026-11-30T14:02:11Z",
                   "finished_at": "2026-11-30T14:03:00Z", "truncated": true})
        );
    }

    #[test]
    fn nothing_is_ever_larger_than_max_body() {
        let huge = json!({"id": "i".repeat(MAX_BODY * 2), "result": null});
        assert_eq!(parse(&body_for(&huge)), json!({"truncated": true}));
        let not_an_object = json!(["w".repeat(MAX_BODY)]);
        assert_eq!(parse(&body_for(&not_an_object)), json!({"truncated": true}));
        // Right at the edge: exactly MAX_BODY bytes is sent whole.
        let overhead = serde_json::to_vec(&json!({"s": ""})).unwrap().len();
        let edge = json!({"s": "e".repeat(MAX_BODY - overhead)});
        assert_eq!(body_for(&edge).len(), MAX_BODY);
        assert_eq!(parse(&body_for(&edge)), edge);
    }
}
