//! The export file alone: written whole, read back the same, and every way a file can be
//! wrong named by its line.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::outcome::{Endpoint, TaskStatus};
use crate::store::tasks::Idem;
use crate::task::{Accept, Task, TaskId};

const BOUNDS: Bounds = Bounds {
    line: 4096,
    tasks: 10,
};

fn moved(status: TaskStatus) -> Moved {
    let finished = status.is_finished();
    Moved {
        task: Task {
            seq: 0,
            id: TaskId::new(),
            owner: String::new(),
            status,
            endpoint: Endpoint::Chat,
            route: None,
            accept: Accept::Chain,
            priority: 0,
            after: Vec::new(),
            metadata: BTreeMap::new(),
            created_ms: 1_000,
            started_ms: None,
            finished_ms: finished.then_some(2_000),
            deadline_ms: 9_000,
            attempts_used: 0,
            max_attempts: 3,
            interrupted: 0,
            attempts: Vec::new(),
            waiting_for: None,
            result: None,
            error: None,
            callback: None,
        },
        request: (!finished).then(|| Bytes::from_static(br#"{"model":"auto"}"#)),
        idem: Some(Idem {
            key: format!("{:064x}", id_n()),
            fingerprint: "b".repeat(64),
        }),
    }
}

/// A fresh number per call, for keys that differ.
fn id_n() -> u128 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    u128::from(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// `text` in a file, read back: the error's line and words, or how many tasks.
fn read_text(text: &str) -> Result<usize, (Option<usize>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.jsonl");
    std::fs::write(&path, text).unwrap();
    read(&path, BOUNDS)
        .map(|t| t.len())
        .map_err(|e| (e.line, e.why))
}

#[test]
fn a_file_written_is_read_back_the_same_and_never_left_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    let tasks = vec![moved(TaskStatus::Queued), moved(TaskStatus::Succeeded)];
    write(&path, "local", &tasks).unwrap();
    assert!(!dir.path().join("out.jsonl.tmp").exists());
    assert_eq!(read(&path, BOUNDS).unwrap(), tasks);
    // A directory that is not there: an error naming the file, nothing at FILE.
    let nowhere = dir.path().join("no/such/dir.jsonl");
    let e = write(&nowhere, "local", &tasks).unwrap_err();
    assert!(e.to_string().contains("cannot create"), "{e}");
    assert!(!nowhere.exists());
}

#[test]
fn headers_trailers_and_counts_that_do_not_fit_are_named_by_their_line() {
    let header = r#"{"format":"labrouter-tasks","version":1,"from":"local","count":0}"#;
    let trailer = r#"{"end":"labrouter-tasks","count":0}"#;
    assert_eq!(read_text(&format!("{header}\n{trailer}\n")), Ok(0));
    let e = read_text("").unwrap_err();
    assert!(e.1.contains("the file is empty"), "{e:?}");
    let e = read_text(&format!("{header}\n{trailer}")).unwrap_err();
    assert_eq!(e.0, Some(2));
    assert!(e.1.contains("cut short"), "{e:?}");
    let v2 = header.replace("\"version\":1", "\"version\":2");
    let e = read_text(&format!("{v2}\n{trailer}\n")).unwrap_err();
    assert_eq!(e.0, Some(1));
    assert!(
        e.1.contains("version 2, not 'labrouter-tasks' version 1"),
        "{e:?}"
    );
    let e = read_text(&format!("{trailer}\n{trailer}\n")).unwrap_err();
    assert!(e.1.starts_with("not an export header"), "{e:?}");
    let e = read_text(&format!("{header}\n{trailer}\n{trailer}\n")).unwrap_err();
    assert_eq!(e, (Some(2), "the trailer is not the last line".into()));
    let many = format!("{header}\n{}", "\n".repeat(12));
    let e = read_text(&many).unwrap_err();
    assert!(e.1.contains("more than the 10 tasks"), "{e:?}");
}

#[test]
fn a_task_line_with_a_wrong_value_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.jsonl");
    type Spoil = fn(&mut Moved);
    let cases: [(Spoil, &str); 4] = [
        (
            |m| m.task.finished_ms = None,
            "a task has finished_ms exactly when it finished",
        ),
        (
            |m| m.request = None,
            "an unfinished (queued) task needs its request",
        ),
        (|m| m.task.interrupted = 3, "interrupted 3"),
        (
            |m| {
                if let Some(i) = m.idem.as_mut() {
                    i.key = "KEY".into();
                }
            },
            "idempotency.key is not a SHA-256 digest",
        ),
    ];
    for (i, (spoil, says)) in cases.into_iter().enumerate() {
        let mut m = moved(if i == 0 {
            TaskStatus::Failed
        } else {
            TaskStatus::Queued
        });
        spoil(&mut m);
        write(&path, "local", &[moved(TaskStatus::Queued), m]).unwrap();
        let e = read(&path, BOUNDS).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.why.contains(says), "{e}");
    }
}
