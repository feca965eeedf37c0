//! A lone task's walk decided, rule by rule, on a plain task and a fixed wall time.

use std::time::{Duration, SystemTime};

use super::*;
use crate::outcome::{AttemptOutcome, Endpoint};
use crate::task::{Accept, AttemptRecord, TaskResult};
use crate::tasks::queue::Queue;
use crate::tasks::submit::NewTask;

const WALL: Duration = Duration::from_secs(1_800_000_000);

fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + WALL
}

fn task(max_attempts: u32) -> Task {
    let new = NewTask {
        endpoint: Endpoint::Chat,
        request: bytes::Bytes::from_static(b"{}"),
        route: None,
        accept: Accept::Chain,
        after: Vec::new(),
        deadline: wall() + Duration::from_secs(3600),
        priority: 0,
        max_attempts,
        callback: None,
        metadata: Default::default(),
    };
    Queue::new_task("key-a", new, None, wall())
}

fn tried(sent: bool, charged: bool, by_breaker: bool) -> Tried {
    Tried {
        records: vec![AttemptRecord {
            at: "2027-01-15T08:00:00Z".into(),
            target: "m@box".into(),
            outcome: if sent {
                AttemptOutcome::Failed
            } else {
                AttemptOutcome::Skipped
            },
            reason: None,
            detail: None,
            charged: false,
        }],
        sent,
        charged,
        by_breaker,
        soonest: Some(Duration::from_secs(30)),
        held: "m@box open".into(),
        ..Tried::default()
    }
}

#[test]
fn a_served_walk_ends_the_task_succeeded_with_its_result() {
    let mut t = task(3);
    let body = br#"{"choices":[{"message":{"content":"done"}}]}"#;
    let end = WalkEnd::Served(TaskResult::new(200, "m@box".into(), body), Tried::default());
    assert_eq!(walked(&mut t, end, wall()), Next::End);
    assert_eq!(t.status, TaskStatus::Succeeded);
    assert!(t.result.is_some() && t.error.is_none() && t.finished_ms.is_some());
}

#[test]
fn held_back_by_breakers_the_task_waits_costs_no_attempt_and_polls_within_the_bound() {
    let mut t = task(3);
    let next = walked(&mut t, WalkEnd::Unserved(tried(false, false, true)), wall());
    assert_eq!(next, Next::Again(WAIT_POLL));
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Waiting, 0));
    assert_eq!(t.attempts.len(), 1);
    // A cooldown known to end sooner is when it is looked at again.
    let mut soon = tried(false, false, true);
    soon.soonest = Some(Duration::from_secs(1));
    let mut u = task(3);
    assert_eq!(
        walked(&mut u, WalkEnd::Unserved(soon), wall()),
        Next::Again(Duration::from_secs(1))
    );
    // Waiting again adds no record.
    walked(&mut t, WalkEnd::Unserved(tried(false, false, true)), wall());
    assert_eq!(t.attempts.len(), 1);
}

#[test]
fn held_back_only_by_slots_the_task_stays_queued() {
    let mut t = task(3);
    let next = walked(
        &mut t,
        WalkEnd::Unserved(tried(false, false, false)),
        wall(),
    );
    assert_eq!(next, Next::Busy);
    assert_eq!(t.status, TaskStatus::Queued);
}

#[test]
fn a_charged_failure_uses_an_attempt_backs_off_and_the_last_one_fails_the_task() {
    let mut t = task(2);
    let next = walked(&mut t, WalkEnd::Unserved(tried(true, true, false)), wall());
    assert_eq!(next, Next::Again(Duration::from_secs(1)));
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Queued, 1));
    let next = walked(&mut t, WalkEnd::Unserved(tried(true, true, false)), wall());
    assert_eq!(next, Next::End);
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Failed, 2));
    assert_eq!(t.error.unwrap().code, TaskCode::AttemptsExhausted);
}

#[test]
fn a_machine_that_failed_like_a_down_one_costs_no_attempt() {
    let mut t = task(1);
    let next = walked(&mut t, WalkEnd::Unserved(tried(true, false, false)), wall());
    assert_eq!(next, Next::Again(Duration::from_secs(1)));
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Waiting, 0));
}

#[test]
fn a_task_past_its_deadline_expires_and_one_before_it_does_not() {
    let mut t = task(3);
    assert!(!expire_if_due(&mut t, wall()));
    assert!(expire_if_due(&mut t, wall() + Duration::from_secs(3600)));
    assert_eq!(t.status, TaskStatus::Expired);
    let mut t = task(3);
    let mut late = tried(true, false, false);
    late.expired = true;
    assert_eq!(walked(&mut t, WalkEnd::Unserved(late), wall()), Next::End);
    assert_eq!(t.status, TaskStatus::Expired);
}
