//! What a walk's end does to its task, and how a task ends: its follow-ups cascade, its
//! waiters are told once its last state is on disk.

use super::*;

impl Scheduler {
    /// Ends an unfinished task (cancel, expire, fail, succeed) and cascades to its
    /// follow-ups; returns the commits to wait for before anyone is told.
    pub(super) fn end(
        &self,
        q: &mut Queue,
        id: &TaskId,
        status: TaskStatus,
        err: TaskError,
    ) -> Vec<Told> {
        let mut acks = Vec::new();
        let mut todo = vec![(id.clone(), status, Some(err))];
        while let Some((id, status, err)) = todo.pop() {
            let Some(mut e) = q.take(&id) else {
                continue;
            };
            q.ready.remove(&key(&e));
            if let Some(h) = e.running.take() {
                // Its walk never reports: account for it here (the aborted lease is a
                // Cancel, neutral for the breaker).
                h.abort();
                q.running = q.running.saturating_sub(1);
                if let Some((g, _)) = &e.group {
                    q.probing.remove(&g.to_vec());
                }
            }
            finish_task(&mut e.task, status, err, SystemTime::now());
            acks.push((id.clone(), self.write(e.task.clone(), true)));
            q.ending.insert(id.clone(), e.task.clone());
            for child in q.children.remove(&id).unwrap_or_default() {
                todo.push((
                    child,
                    TaskStatus::Cancelled,
                    Some(error(
                        TaskCode::DependencyFailed,
                        &format!("a task it follows, {id}, ended {status}"),
                    )),
                ));
            }
        }
        acks
    }

    /// Waits for finished tasks' commits, then tells their waiters: a waiter that reads a
    /// finished task back finds it finished in the store.
    pub(super) async fn told(&self, acks: Vec<Told>) {
        for (id, ack) in acks {
            if let Some(ack) = ack {
                let _ = committed(ack).await;
            }
            // Waiters and the callback worker hear of it once it is on disk.
            let ended = lock(&self.queue).ending.remove(&id);
            match ended {
                Some(task) => self.announce(&task),
                None => {
                    let _ = self.finished.send(id);
                }
            }
        }
    }

    /// What a walk's end does to its task.
    pub(super) async fn walked(&self, fleet: &Fleet, id: &TaskId, group: &Group, walked: Walked) {
        let now = SystemTime::now();
        let reg = &fleet.registry;
        let records = |attempts: &[Attempted]| -> Vec<AttemptRecord> {
            attempts
                .iter()
                .map(|a| AttemptRecord {
                    at: crate::clock::rfc3339(now),
                    target: reg.target_name(a.target),
                    outcome: a.outcome().into(),
                    reason: Some(a.reason),
                    detail: a.was_sent().then(|| a.detail.clone()),
                    charged: false,
                })
                .collect()
        };
        let mut acks = Vec::new();
        let mut write = None;
        {
            let mut q = lock(&self.queue);
            let gk = group.to_vec();
            q.probing.remove(&gk);
            // Taken out while it is decided; put back unless it ended.
            let Some(mut e) = q.take(id) else {
                // Ended meanwhile (cancelled, expired): `end` accounted for the walk.
                drop(q);
                self.wake.notify_one();
                return;
            };
            q.running = q.running.saturating_sub(1);
            e.running = None;
            let mut end: Option<(TaskStatus, TaskError)> = None;
            let mut done = false;
            match walked {
                Walked::Served {
                    target,
                    status,
                    body,
                    attempts,
                } => {
                    q.open.insert(gk);
                    push_records(&mut e.task, records(&attempts));
                    let body_json = serde_json::from_slice::<serde_json::Value>(&body)
                        .unwrap_or(serde_json::Value::Null);
                    e.task.result = Some(
                        serde_json::json!({"status": status.as_u16(), "target": reg.target_name(target), "body": body_json})
                            .to_string(),
                    );
                    finish_task(&mut e.task, TaskStatus::Succeeded, None, now);
                    acks.push((id.clone(), self.write(e.task.clone(), true)));
                    q.ending.insert(id.clone(), e.task.clone());
                    for c in q.children.remove(id).unwrap_or_default() {
                        q.parent_succeeded(&c);
                    }
                    done = true;
                }
                Walked::Refused {
                    status,
                    body,
                    attempts,
                    ..
                } => {
                    q.open.insert(gk);
                    push_records(&mut e.task, records(&attempts));
                    let mut err = error(
                        TaskCode::RequestRejected,
                        &format!(
                            "the machine refused the request itself (HTTP {}); see error.upstream",
                            status.as_u16()
                        ),
                    );
                    err.upstream = serde_json::from_slice::<&serde_json::value::RawValue>(&body)
                        .ok()
                        .map(|r| r.to_owned());
                    end = Some((TaskStatus::Failed, err));
                }
                Walked::Parked {
                    attempts,
                    by_slots,
                    soonest,
                } => {
                    let was = e.task.status;
                    e.task.status = if by_slots {
                        TaskStatus::Queued
                    } else {
                        TaskStatus::Waiting
                    };
                    e.task.waiting_for = Some(waiting_for(reg, &attempts, by_slots));
                    if was != TaskStatus::Waiting && !by_slots {
                        push_records(&mut e.task, records(&attempts));
                    }
                    if !by_slots {
                        // The tasks queued behind it accept the same targets: they wait too
                        // (they are not walked until a breaker changes).
                        let why = e.task.waiting_for.clone();
                        for other in q.entries.values_mut() {
                            let same = other
                                .group
                                .as_ref()
                                .is_some_and(|(g, _)| g.as_ref() == group.as_ref());
                            if same && other.task.status == TaskStatus::Queued {
                                other.task.status = TaskStatus::Waiting;
                                other.task.waiting_for.clone_from(&why);
                            }
                        }
                        q.open.remove(&gk);
                        q.parked.insert(gk, soonest.map(crate::clock::from_now));
                    }
                }
                Walked::Failed {
                    attempts,
                    charged,
                    probe_failed,
                    expired,
                } => {
                    let mut recs = records(&attempts);
                    if let Some(last) = recs.last_mut() {
                        last.charged = charged;
                    }
                    push_records(&mut e.task, recs);
                    if charged {
                        e.task.attempts_used += 1;
                    }
                    e.failed_walks += 1;
                    if expired {
                        end = Some((
                            TaskStatus::Expired,
                            error(
                                TaskCode::DeadlineExceeded,
                                "its deadline passed before it finished",
                            ),
                        ));
                    } else if e.task.attempts_used >= e.task.max_attempts {
                        let used = e.task.attempts_used;
                        end = Some((
                            TaskStatus::Failed,
                            error(
                                TaskCode::AttemptsExhausted,
                                &format!("all {used} attempts failed; see attempts"),
                            ),
                        ));
                    } else {
                        let backoff = BACKOFF_FIRST
                            .saturating_mul(1 << e.failed_walks.saturating_sub(1).min(6))
                            .min(BACKOFF_MAX);
                        e.next_walk = Some(crate::clock::from_now(backoff));
                        e.task.status = if charged {
                            TaskStatus::Queued
                        } else {
                            TaskStatus::Waiting
                        };
                        e.task.waiting_for = Some(if charged {
                            format!(
                                "attempt {} of {} failed; the next walk is in {}",
                                e.task.attempts_used,
                                e.task.max_attempts,
                                crate::outcome::words(backoff)
                            )
                        } else {
                            "its machines failed the way down machines do; it waits for them"
                                .to_string()
                        });
                        if !charged {
                            q.open.remove(&gk);
                        }
                        if probe_failed {
                            // The probe role rotates: behind the others of its priority.
                            e.order = q.next_order;
                            q.next_order += 1;
                        }
                        write = Some(e.task.clone());
                    }
                }
            }
            let k = key(&e);
            if !done {
                q.put(e);
            }
            match end {
                Some((status, err)) => acks.extend(self.end(&mut q, id, status, err)),
                None if !done => {
                    q.ready.insert(k);
                }
                None => {}
            }
        }
        if let Some(t) = write {
            self.write(t, false);
        }
        self.told(acks).await;
        self.wake.notify_one();
    }
}

/// Plain words for why a task waits: what held each target back.
fn waiting_for(reg: &crate::registry::Registry, attempts: &[Attempted], by_slots: bool) -> String {
    if by_slots {
        return "every machine it accepts is busy with other tasks or interactive requests".into();
    }
    let parts: Vec<String> = attempts
        .iter()
        .map(|a| a.describe(&reg.target_name(a.target)))
        .collect();
    format!("every target it accepts is held back: {}", parts.join("; "))
}

fn push_records(task: &mut Task, records: Vec<AttemptRecord>) {
    task.attempts.extend(records);
    let over = task.attempts.len().saturating_sub(MAX_RECORDS);
    if over > 0 {
        task.attempts.drain(..over);
    }
}
