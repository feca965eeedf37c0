//! The queue's decisions, each rule a small exact test on a plain value: no lock, no
//! clock, no store. Time is an `Instant` the test moves; the wall clock a fixed time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::*;
use crate::outcome::{AttemptOutcome, Endpoint, TaskCode, TaskStatus};
use crate::task::{Accept, TaskResult};
use crate::tasks::submit::NewTask;

const WALL: Duration = Duration::from_secs(1_800_000_000);

/// A queue and its clocks.
struct Lab {
    q: Queue,
    now: Instant,
    wall: SystemTime,
}

fn group(models: &[usize]) -> Group {
    models.iter().map(|&m| ModelId(m)).collect()
}

fn new_task(priority: i32, after: Vec<TaskId>, max_attempts: u32) -> NewTask {
    NewTask {
        endpoint: Endpoint::Chat,
        request: bytes::Bytes::from_static(b"{}"),
        route: None,
        accept: Accept::Chain,
        after,
        deadline: SystemTime::UNIX_EPOCH + WALL + Duration::from_secs(3600),
        priority,
        max_attempts,
        callback: None,
        metadata: Default::default(),
    }
}

fn parsed() -> Arc<Parsed> {
    Arc::new(
        Parsed::new(
            Endpoint::Chat,
            bytes::Bytes::from_static(b"{\"messages\":[]}"),
        )
        .unwrap(),
    )
}

fn tried(sent: bool) -> Tried {
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
        by_breaker: !sent,
        held: "m@box open".into(),
        ..Tried::default()
    }
}

fn served() -> WalkEnd {
    let body = br#"{"choices":[{"message":{"content":"done"}}]}"#;
    WalkEnd::Served(TaskResult::new(200, "m@box".into(), body), Tried::default())
}

impl Lab {
    fn new() -> Lab {
        Lab {
            q: Queue::default(),
            now: Instant::now(),
            wall: SystemTime::UNIX_EPOCH + WALL,
        }
    }

    /// Submits a task (ready, or blocked on `after`) and routes it into `g`.
    fn add(&mut self, priority: i32, after: &[&TaskId], g: &Group) -> TaskId {
        let after: Vec<TaskId> = after.iter().map(|&a| a.clone()).collect();
        let task = Queue::new_task("owner", new_task(priority, after, 3), None, self.wall);
        let id = task.id.clone();
        let (effects, unknown) = self
            .q
            .admit(task, &HashMap::new(), None, self.now, self.wall);
        assert!(effects.is_empty() && unknown.is_empty());
        let fx = self
            .q
            .routed(&id, Ok((Arc::clone(g), parsed())), "v1", self.wall);
        assert!(fx.is_empty());
        id
    }

    fn scan_all(&mut self, max_running: u32, free: &dyn Fn(&[ModelId]) -> bool) -> Due {
        let (fx, mut due) = self.q.expire(self.now, self.wall);
        assert!(fx.is_empty(), "{fx:?}");
        let mut cursor = None;
        while let Some(c) = self.q.scan(
            &mut due,
            cursor.as_ref(),
            self.now,
            self.wall,
            max_running,
            "v1",
            free,
        ) {
            cursor = Some(c);
        }
        due
    }

    /// The ids a tick starts, with room for `max_running` walks and every slot free.
    fn starts(&mut self, max_running: u32) -> Vec<TaskId> {
        let due = self.scan_all(max_running, &|_| true);
        due.start.into_iter().map(|s| s.id).collect()
    }

    fn task(&self, id: &TaskId) -> Task {
        self.q
            .get(id, None)
            .flatten()
            .expect("a live or ending task")
    }

    fn walked(&mut self, id: &TaskId, g: &Group, end: WalkEnd) -> Vec<Effect> {
        self.q.walked(id, g, end, self.now, self.wall)
    }
}

/// The tasks written by `effects`, with whether each write waits for its commit.
fn writes(effects: &[Effect]) -> Vec<(Vec<TaskStatus>, bool)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Write { tasks, ack } => Some((tasks.iter().map(|t| t.status).collect(), *ack)),
            _ => None,
        })
        .collect()
}

fn announced(effects: &[Effect]) -> Vec<TaskId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Announce(id) => Some(id.clone()),
            _ => None,
        })
        .collect()
}

// === waiting costs nothing; one probe per group ===

#[test]
fn a_walk_held_back_by_breakers_waits_costs_no_attempt_and_writes_nothing() {
    let mut lab = Lab::new();
    let g = group(&[0, 1]);
    let a = lab.add(0, &[], &g);
    assert_eq!(lab.starts(4), std::slice::from_ref(&a));
    let fx = lab.walked(&a, &g, WalkEnd::Unserved(tried(false)));
    assert!(fx.is_empty(), "no write for a wait: {fx:?}");
    let t = lab.task(&a);
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Waiting, 0));
    assert!(t.waiting_for.unwrap().contains("held back: m@box open"));
    assert_eq!(t.attempts.len(), 1, "the first wait is recorded");
}

#[test]
fn a_parked_group_is_not_walked_until_a_breaker_changes_then_by_one_task() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    let b = lab.add(0, &[], &g);
    assert_eq!(
        lab.starts(4),
        std::slice::from_ref(&a),
        "a group not known to serve: one walk"
    );
    lab.walked(&a, &g, WalkEnd::Unserved(tried(false)));
    assert_eq!(lab.task(&b).status, TaskStatus::Waiting, "b waits with a");
    assert!(lab.starts(4).is_empty(), "parked: nothing is sent");
    lab.q.breaker_changed();
    assert_eq!(
        lab.starts(4),
        std::slice::from_ref(&a),
        "one probe, the head"
    );
    assert!(lab.starts(4).is_empty(), "b waits while a probes");
}

#[test]
fn a_parked_group_walks_again_when_its_soonest_cooldown_ends() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    let mut t = tried(false);
    t.soonest = Some(Duration::from_secs(41));
    lab.walked(&a, &g, WalkEnd::Unserved(t));
    let due = lab.scan_all(4, &|_| true);
    assert!(due.start.is_empty());
    assert_eq!(due.next, Some(lab.now + Duration::from_secs(41)));
    lab.now += Duration::from_secs(41);
    assert_eq!(lab.starts(4), [a]);
}

#[test]
fn held_back_only_by_slots_a_task_stays_queued_and_its_group_is_not_parked() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    let mut t = tried(false);
    t.by_breaker = false;
    lab.walked(&a, &g, WalkEnd::Unserved(t));
    let t = lab.task(&a);
    assert_eq!(t.status, TaskStatus::Queued);
    assert!(t.attempts.is_empty(), "a busy machine is not an outage");
    assert_eq!(lab.starts(4), [a], "not parked");
}

#[test]
fn a_group_that_served_starts_its_tasks_together() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let ids: Vec<TaskId> = (0..4).map(|_| lab.add(0, &[], &g)).collect();
    let first = lab.starts(10);
    assert_eq!(first, [ids[0].clone()]);
    lab.walked(&ids[0], &g, served());
    assert_eq!(lab.starts(10), ids[1..], "open: as slots allow");
}

// === whose fault: attempts, backoff, rotation ===

#[test]
fn a_failure_on_a_machine_that_stayed_up_uses_an_attempt_and_backs_off() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    for (walk, backoff) in [(1u32, 1u64), (2, 2)] {
        assert_eq!(lab.starts(4), std::slice::from_ref(&a));
        let mut t = tried(true);
        t.charged = true;
        let fx = lab.walked(&a, &g, WalkEnd::Unserved(t));
        assert_eq!(writes(&fx), [(vec![TaskStatus::Queued], false)]);
        let task = lab.task(&a);
        assert_eq!(task.attempts_used, walk);
        assert!(
            task.attempts.last().unwrap().charged,
            "the walk's last record"
        );
        let due = lab.scan_all(4, &|_| true);
        assert!(due.start.is_empty(), "not before its backoff");
        assert_eq!(due.next, Some(lab.now + Duration::from_secs(backoff)));
        lab.now += Duration::from_secs(backoff);
    }
}

#[test]
fn a_failure_that_means_the_machine_is_down_uses_no_attempt() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    let fx = lab.walked(&a, &g, WalkEnd::Unserved(tried(true)));
    assert_eq!(writes(&fx), [(vec![TaskStatus::Waiting], false)]);
    let t = lab.task(&a);
    assert_eq!((t.status, t.attempts_used), (TaskStatus::Waiting, 0));
}

#[test]
fn the_backoff_doubles_up_to_a_minute() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    let mut seen = Vec::new();
    for _ in 0..9 {
        assert_eq!(lab.starts(4), std::slice::from_ref(&a));
        lab.walked(&a, &g, WalkEnd::Unserved(tried(true)));
        let next = lab.scan_all(4, &|_| true).next.unwrap();
        seen.push((next - lab.now).as_secs());
        lab.now = next;
    }
    assert_eq!(seen, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
}

#[test]
fn a_task_whose_attempts_are_used_up_fails_with_every_attempt_listed() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    let mut fx = Vec::new();
    for _ in 0..3 {
        lab.starts(4);
        let mut t = tried(true);
        t.charged = true;
        fx = lab.walked(&a, &g, WalkEnd::Unserved(t));
        lab.now += Duration::from_secs(60);
    }
    assert_eq!(writes(&fx), [(vec![TaskStatus::Failed], true)]);
    assert_eq!(announced(&fx), std::slice::from_ref(&a));
    let t = lab.task(&a);
    assert_eq!(t.error.unwrap().code, TaskCode::AttemptsExhausted);
    assert_eq!(t.attempts.len(), 3);
}

#[test]
fn a_task_whose_probe_failed_goes_behind_the_others_of_its_priority() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    let b = lab.add(0, &[], &g);
    assert_eq!(lab.starts(4), std::slice::from_ref(&a));
    let mut t = tried(true);
    t.probe_failed = true;
    lab.walked(&a, &g, WalkEnd::Unserved(t));
    lab.now += Duration::from_secs(1);
    assert_eq!(lab.starts(4), [b], "the probe role rotates");
}

#[test]
fn a_machines_refusal_fails_the_task_at_once() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    let err = error(TaskCode::RequestRejected, "HTTP 400");
    let fx = lab.walked(&a, &g, WalkEnd::Refused(err, tried(true)));
    assert_eq!(writes(&fx), [(vec![TaskStatus::Failed], true)]);
    assert_eq!(lab.task(&a).error.unwrap().code, TaskCode::RequestRejected);
}

// === order and bounds ===

#[test]
fn higher_priority_runs_first_then_the_oldest() {
    let mut lab = Lab::new();
    let (g1, g2, g3) = (group(&[0]), group(&[1]), group(&[2]));
    let old = lab.add(0, &[], &g1);
    let low = lab.add(-5, &[], &g2);
    let high = lab.add(50, &[], &g3);
    assert_eq!(lab.starts(10), [high, old, low]);
}

#[test]
fn max_running_bounds_the_walks_in_flight() {
    let mut lab = Lab::new();
    let ids: Vec<TaskId> = (0..5).map(|i| lab.add(0, &[], &group(&[i]))).collect();
    assert_eq!(lab.starts(2), ids[..2]);
    assert!(lab.starts(2).is_empty(), "two walks under way");
    lab.walked(&ids[0], &group(&[0]), served());
    assert_eq!(lab.starts(2), ids[2..3]);
}

#[test]
fn a_group_without_a_free_slot_waits_queued_and_the_next_group_goes() {
    let mut lab = Lab::new();
    let (busy, idle) = (group(&[0]), group(&[1]));
    let a = lab.add(0, &[], &busy);
    let b = lab.add(0, &[], &idle);
    let due = lab.scan_all(10, &|g: &[ModelId]| g[0] != ModelId(0));
    let started: Vec<TaskId> = due.start.into_iter().map(|s| s.id).collect();
    assert_eq!(started, [b]);
    assert_eq!(lab.task(&a).status, TaskStatus::Queued);
}

#[test]
fn a_long_queue_is_scanned_a_chunk_at_a_time_and_none_is_missed() {
    let mut lab = Lab::new();
    // 300 groups without a free slot: each is looked at once before the one that goes.
    for m in 0..300 {
        lab.add(0, &[], &group(&[m]));
    }
    let last = lab.add(0, &[], &group(&[1000]));
    let mut due = lab.q.expire(lab.now, lab.wall).1;
    let free = |g: &[ModelId]| g[0] == ModelId(1000);
    let first = lab
        .q
        .scan(&mut due, None, lab.now, lab.wall, 10, "v1", &free);
    assert!(first.is_some(), "the first chunk ends with a cursor");
    let mut cursor = first;
    while let Some(c) = lab.q.scan(
        &mut due,
        cursor.as_ref(),
        lab.now,
        lab.wall,
        10,
        "v1",
        &free,
    ) {
        cursor = Some(c);
    }
    let started: Vec<TaskId> = due.start.into_iter().map(|s| s.id).collect();
    assert_eq!(started, [last], "found behind 300 held back");
}

#[test]
fn a_group_held_back_costs_a_tick_one_look_however_many_tasks_wait_in_it() {
    let mut lab = Lab::new();
    let (full, parked) = (group(&[0]), group(&[2]));
    let first = lab.add(0, &[], &parked);
    assert_eq!(lab.starts(1), std::slice::from_ref(&first));
    lab.walked(&first, &parked, WalkEnd::Unserved(tried(false)));
    for _ in 0..300 {
        lab.add(0, &[], &full);
    }
    for _ in 0..300 {
        lab.add(0, &[], &parked);
    }
    let last = lab.add(0, &[], &group(&[1]));
    let mut due = lab.q.expire(lab.now, lab.wall).1;
    let free = |g: &[ModelId]| g[0] != ModelId(0);
    let next = lab
        .q
        .scan(&mut due, None, lab.now, lab.wall, 10, "v1", &free);
    assert!(
        next.is_none(),
        "one chunk: 600 held back are not looked through"
    );
    let started: Vec<TaskId> = due.start.into_iter().map(|s| s.id).collect();
    assert_eq!(started, [last]);
}

#[test]
fn a_task_routed_into_a_parked_group_waits_for_the_same_reason_even_when_no_other_waits() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let first = lab.add(0, &[], &g);
    assert_eq!(lab.starts(1), std::slice::from_ref(&first));
    lab.walked(&first, &g, WalkEnd::Unserved(tried(false)));
    assert!(lab.q.cancel(&first, None, lab.wall).is_some());
    let next = lab.add(0, &[], &g);
    let t = lab.task(&next);
    assert_eq!(t.status, TaskStatus::Waiting);
    assert_eq!(
        t.waiting_for.as_deref(),
        Some("every target it accepts is held back: m@box open")
    );
}

#[test]
fn a_task_routed_under_another_registry_version_is_routed_again() {
    let mut lab = Lab::new();
    let a = lab.add(0, &[], &group(&[0]));
    let due = {
        let mut due = lab.q.expire(lab.now, lab.wall).1;
        lab.q
            .scan(&mut due, None, lab.now, lab.wall, 4, "v2", &|_| true);
        due
    };
    assert_eq!(due.route, [a]);
    assert!(due.start.is_empty());
}

// === deadlines, cancels, a terminal status stands ===

#[test]
fn a_deadline_expires_a_task_and_aborts_its_walk() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    lab.now += Duration::from_secs(3600);
    let (fx, _) = lab.q.expire(lab.now, lab.wall);
    assert!(matches!(&fx[0], Effect::Abort(id) if *id == a));
    assert_eq!(writes(&fx), [(vec![TaskStatus::Expired], true)]);
    assert_eq!(lab.task(&a).error.unwrap().code, TaskCode::DeadlineExceeded);
    assert_eq!(lab.q.running(), 0);
}

#[test]
fn a_walk_that_ends_after_a_cancel_changes_nothing() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    lab.starts(4);
    let fx = lab.q.cancel(&a, Some("owner"), lab.wall).unwrap();
    assert_eq!(writes(&fx), [(vec![TaskStatus::Cancelled], true)]);
    assert!(lab.walked(&a, &g, served()).is_empty(), "the cancel stands");
    assert!(lab
        .walked(&a, &g, WalkEnd::Unserved(tried(false)))
        .is_empty());
    assert!(
        lab.q.mark_running(&a).is_none(),
        "nor is it marked running again"
    );
    assert!(
        lab.q.cancel(&a, None, lab.wall).is_none(),
        "ended: nothing to cancel"
    );
    assert_eq!(lab.task(&a).status, TaskStatus::Cancelled);
}

#[test]
fn another_owner_cannot_cancel_a_task() {
    let mut lab = Lab::new();
    let a = lab.add(0, &[], &group(&[0]));
    assert!(lab.q.cancel(&a, Some("someone else"), lab.wall).is_none());
    assert_eq!(lab.task(&a).status, TaskStatus::Queued);
}

// === follow-ups ===

#[test]
fn a_follow_up_is_ready_once_its_parents_succeeded() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let p = lab.add(0, &[], &g);
    let c = lab.add(0, &[&p], &group(&[1]));
    assert_eq!(lab.task(&c).status, TaskStatus::Blocked);
    assert_eq!(lab.starts(4), std::slice::from_ref(&p));
    let fx = lab.walked(&p, &g, served());
    assert_eq!(writes(&fx), [(vec![TaskStatus::Succeeded], true)]);
    assert_eq!(lab.task(&c).status, TaskStatus::Queued);
    assert_eq!(lab.starts(4), [c]);
}

#[test]
fn a_parents_end_and_its_whole_cascade_are_one_write() {
    let mut lab = Lab::new();
    let p = lab.add(0, &[], &group(&[0]));
    let c = lab.add(0, &[&p], &group(&[1]));
    let gc = lab.add(0, &[&c], &group(&[2]));
    let fx = lab.q.cancel(&p, None, lab.wall).unwrap();
    assert_eq!(
        writes(&fx),
        [(vec![TaskStatus::Cancelled; 3], true)],
        "the end and the cascade commit together"
    );
    for id in [&c, &gc] {
        let err = lab.task(id).error.unwrap();
        assert_eq!(err.code, TaskCode::DependencyFailed);
    }
    assert!(lab.task(&gc).error.unwrap().message.contains(c.as_str()));
}

#[test]
fn a_parent_without_usable_text_cancels_its_follow_up_as_unusable() {
    let mut lab = Lab::new();
    let task = Queue::new_task("owner", new_task(0, vec![], 3), None, lab.wall);
    let id = task.id.clone();
    lab.q.admit(task, &HashMap::new(), None, lab.now, lab.wall);
    let why = "after[0] tsk_x: it has no text".to_string();
    let fx = lab.q.routed(
        &id,
        Err((TaskCode::DependencyUnusable, why)),
        "v1",
        lab.wall,
    );
    assert_eq!(writes(&fx), [(vec![TaskStatus::Cancelled], true)]);
    assert_eq!(
        lab.task(&id).error.unwrap().code,
        TaskCode::DependencyUnusable
    );
}

#[test]
fn a_follow_up_of_a_parent_that_already_failed_is_cancelled_at_admission() {
    let mut lab = Lab::new();
    let parent = TaskId::new();
    let known = HashMap::from([(parent.clone(), TaskStatus::Failed)]);
    let task = Queue::new_task(
        "owner",
        new_task(0, vec![parent.clone()], 3),
        None,
        lab.wall,
    );
    let id = task.id.clone();
    let (fx, unknown) = lab.q.admit(task, &known, None, lab.now, lab.wall);
    assert!(unknown.is_empty());
    assert_eq!(writes(&fx), [(vec![TaskStatus::Cancelled], true)]);
    assert_eq!(
        lab.task(&id).error.unwrap().code,
        TaskCode::DependencyFailed
    );
}

// === restarts and drains ===

#[test]
fn a_task_running_at_a_crash_is_queued_again_once_and_failed_the_second_time() {
    let mut lab = Lab::new();
    let mut once = Queue::new_task("owner", new_task(0, vec![], 3), None, lab.wall);
    once.status = TaskStatus::Running;
    let mut twice = once.clone();
    twice.id = TaskId::new();
    twice.interrupted = 1;
    let fx = lab.q.resume(
        vec![once.clone(), twice.clone()],
        &HashMap::new(),
        lab.now,
        lab.wall,
    );
    assert_eq!(
        writes(&fx),
        [(vec![TaskStatus::Queued, TaskStatus::Failed], true)]
    );
    assert_eq!(announced(&fx), [twice.id.clone()]);
    let t = lab.task(&once.id);
    assert_eq!(t.attempts[0].outcome, AttemptOutcome::Interrupted);
    assert_eq!(t.interrupted, 1);
    assert_eq!(
        lab.task(&twice.id).error.unwrap().code,
        TaskCode::Interrupted
    );
}

#[test]
fn at_a_restart_a_follow_up_of_a_parent_that_did_not_succeed_is_cancelled() {
    let mut lab = Lab::new();
    let (ok, bad) = (TaskId::new(), TaskId::new());
    let waits = Queue::new_task("owner", new_task(0, vec![ok.clone()], 3), None, lab.wall);
    let doomed = Queue::new_task("owner", new_task(0, vec![bad.clone()], 3), None, lab.wall);
    let mut after_doomed = Queue::new_task(
        "owner",
        new_task(0, vec![doomed.id.clone()], 3),
        None,
        lab.wall,
    );
    after_doomed.status = TaskStatus::Blocked;
    let parents = HashMap::from([(ok, TaskStatus::Succeeded), (bad, TaskStatus::Cancelled)]);
    let tasks = vec![waits.clone(), doomed.clone(), after_doomed.clone()];
    let fx = lab.q.resume(tasks, &parents, lab.now, lab.wall);
    assert_eq!(writes(&fx), [(vec![TaskStatus::Cancelled; 2], true)]);
    assert_eq!(lab.task(&waits.id).status, TaskStatus::Queued);
    for id in [&doomed.id, &after_doomed.id] {
        assert_eq!(lab.task(id).error.unwrap().code, TaskCode::DependencyFailed);
    }
}

#[test]
fn at_a_restart_a_follow_up_of_a_task_failed_for_its_interruptions_is_cancelled() {
    let mut lab = Lab::new();
    let mut parent = Queue::new_task("owner", new_task(0, vec![], 3), None, lab.wall);
    parent.status = TaskStatus::Running;
    parent.interrupted = 1;
    let child = Queue::new_task(
        "owner",
        new_task(0, vec![parent.id.clone()], 3),
        None,
        lab.wall,
    );
    let fx = lab.q.resume(
        vec![parent, child.clone()],
        &HashMap::new(),
        lab.now,
        lab.wall,
    );
    assert!(announced(&fx).contains(&child.id));
    assert_eq!(lab.task(&child.id).status, TaskStatus::Cancelled);
}

#[test]
fn a_drain_writes_the_running_back_as_queued_uncounted_and_starts_nothing_more() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    let b = lab.add(0, &[], &group(&[1]));
    assert_eq!(lab.starts(1), std::slice::from_ref(&a));
    lab.q.stop_starting();
    assert!(lab.starts(4).is_empty(), "nothing starts once stopping");
    let fx = lab.q.stop();
    assert!(matches!(&fx[0], Effect::Abort(id) if *id == a));
    assert_eq!(writes(&fx), [(vec![TaskStatus::Queued], true)]);
    let t = lab.task(&a);
    assert_eq!((t.status, t.interrupted), (TaskStatus::Queued, 0));
    assert_eq!(lab.task(&b).status, TaskStatus::Queued);
    assert_eq!(lab.q.running(), 0);
}

// === admission ===

#[test]
fn the_queue_and_each_key_have_room_for_so_many_unfinished_tasks() {
    let mut lab = Lab::new();
    lab.add(0, &[], &group(&[0]));
    lab.add(0, &[], &group(&[0]));
    assert!(lab.q.room("owner", 3, None).is_ok());
    assert!(matches!(
        lab.q.room("owner", 2, None),
        Err(SubmitError::QueueFull { max: 2 })
    ));
    assert!(matches!(
        lab.q.room("owner", 10, Some(2)),
        Err(SubmitError::KeyFull { max: 2 })
    ));
    assert!(lab.q.room("another", 10, Some(2)).is_ok());
    let first = lab.q.oldest_waiting(None);
    assert!(first.is_none(), "none waits yet");
}

#[test]
fn a_finished_task_frees_its_owners_room() {
    let mut lab = Lab::new();
    let g = group(&[0]);
    let a = lab.add(0, &[], &g);
    assert!(lab.q.room("owner", 10, Some(1)).is_err());
    lab.starts(4);
    lab.walked(&a, &g, served());
    assert!(lab.q.room("owner", 10, Some(1)).is_ok());
    assert!(lab.q.is_empty());
    assert!(lab.q.announced(&a).is_some(), "ending until announced");
    assert!(lab.q.get(&a, None).is_none());
}
