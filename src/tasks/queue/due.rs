//! What is due at a tick: tasks past their deadline expire; ready tasks are looked at by
//! priority, then age, and each is routed (once per registry version), started, or left
//! waiting with its group. The scan goes a chunk at a time, so the scheduler can let go of
//! its lock between chunks: a submit never waits for a whole long queue.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::{error, key, Effect, Group, Key, Queue};
use crate::outcome::{Endpoint, ModelId, TaskCode, TaskStatus};
use crate::request::Parsed;
use crate::store::ms;
use crate::tasks::model::{Task, TaskId};

/// Ready tasks looked at per chunk.
const READY_CHUNK: usize = 256;
/// At most this many tasks are routed per tick (each may read its request from the store),
/// so a long queue after a restart does not hold up the tasks already routed.
pub const ROUTE_BATCH: usize = 256;

/// What a tick found to do.
#[derive(Debug, Default)]
pub struct Due {
    /// Tasks to route: not yet routed, or routed under another registry version.
    pub route: Vec<TaskId>,
    /// Tasks that start now (already marked running).
    pub start: Vec<Start>,
    /// When something is next due: a backoff, a cooldown, a deadline.
    pub next: Option<Instant>,
    /// Groups with no free slot this tick.
    full: HashSet<Group>,
}

impl Due {
    fn soon(&mut self, t: Instant) {
        self.next = Some(self.next.map_or(t, |n| n.min(t)));
    }
}

/// Where the next chunk of a scan begins.
#[derive(Clone, Debug)]
pub struct Cursor(Key);

/// A task that starts: one walk of its group.
#[derive(Debug)]
pub struct Start {
    pub id: TaskId,
    pub group: Group,
    pub endpoint: Endpoint,
    pub deadline: Instant,
    /// Its request, ready to send; `None` when the queue did not hold it (read it again).
    pub prepared: Option<Arc<Parsed>>,
    /// On its first start: how long it waited since its submit.
    pub waited: Option<Duration>,
}

impl Queue {
    /// Expires every task past its deadline (a running walk is aborted) and lets parked
    /// groups whose cooldown ended walk again. The [`Due`] a scan then fills.
    pub fn expire(&mut self, now: Instant, wall: SystemTime) -> (Vec<Effect>, Due) {
        let mut due = Due::default();
        let expired: Vec<TaskId> = self
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| id.clone())
            .collect();
        let mut effects = Vec::new();
        for id in expired {
            let err = super::walked::deadline_passed();
            effects.extend(self.end(&id, TaskStatus::Expired, err, wall));
        }
        if let Some((deadline, _)) = self.deadlines.first() {
            due.soon(*deadline);
        }
        self.parked.retain(|_, p| p.until.is_none_or(|u| u > now));
        for until in self.parked.values().filter_map(|p| p.until) {
            due.soon(until);
        }
        (effects, due)
    }

    /// Looks through one chunk of ready tasks after `from`: each is to be routed, starts
    /// (at most `max_running` walks in all; only where `free` says its group has a slot;
    /// one walk at a time for a group not known to serve), or waits. The cursor of the next
    /// chunk, or `None` when the scan is done.
    #[allow(clippy::too_many_arguments)] // one tick's whole context
    pub fn scan(
        &mut self,
        due: &mut Due,
        from: Option<&Cursor>,
        now: Instant,
        wall: SystemTime,
        max_running: u32,
        version: &str,
        free: &dyn Fn(&[ModelId]) -> bool,
    ) -> Option<Cursor> {
        if self.stopping {
            return None;
        }
        let from = from.map_or(Bound::Unbounded, |c| Bound::Excluded(&c.0));
        let mut chosen: Vec<(TaskId, Group)> = Vec::new();
        let mut starting: HashSet<Group> = HashSet::new();
        let (mut last, mut done) = (None, true);
        // Only places that may move are looked through: a parked group, one held to its
        // probe or full this tick waits without costing the tick a look at each task.
        let held = |g: &Group| {
            self.parked.contains_key(g)
                || due.full.contains(g)
                || (!self.open.contains(g) && self.probing.contains(g))
        };
        let mut ready = self.ready.merged(from, |place| match place {
            Some((g, v)) if v == version => !held(g),
            _ => true,
        });
        let mut seen = 0;
        while let Some((place, k)) = ready.next() {
            let running = self.running as usize + chosen.len();
            if running >= max_running as usize || due.route.len() >= ROUTE_BATCH {
                break;
            }
            if seen == READY_CHUNK {
                done = false;
                break;
            }
            seen += 1;
            last = Some(k);
            let Some(e) = self.entries.get(&k.2) else {
                continue;
            };
            if let Some(at) = e.next_walk.filter(|&at| at > now) {
                due.soon(at);
                continue;
            }
            let Some((group, _)) = place.as_ref().filter(|(_, v)| v == version) else {
                due.route.push(k.2.clone());
                continue;
            };
            if !self.open.contains(group) && starting.contains(group) {
                continue;
            }
            if !free(group) {
                due.full.insert(Arc::clone(group));
                ready.drop_group(group);
                continue;
            }
            if !self.open.contains(group) {
                // A group not known to serve is walked by one task at a time.
                starting.insert(Arc::clone(group));
                ready.drop_group(group);
            }
            chosen.push((k.2.clone(), Arc::clone(group)));
        }
        let next = if done {
            None
        } else {
            last.cloned().map(Cursor)
        };
        self.probing.extend(starting);
        for (id, group) in chosen {
            if let Some(s) = self.begin(&id, group, wall) {
                due.start.push(s);
            }
        }
        next
    }

    /// Task `id` starts a walk of `group`: running, out of the ready set.
    fn begin(&mut self, id: &TaskId, group: Group, wall: SystemTime) -> Option<Start> {
        let e = self.entries.get_mut(id)?;
        let k = key(e);
        e.task.status = TaskStatus::Running;
        e.running = true;
        let first = e.task.started_ms.is_none();
        let waited = first.then(|| {
            e.task.started_ms = Some(ms(wall));
            let ms = ms(wall).saturating_sub(e.task.created_ms);
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        });
        let start = Start {
            id: id.clone(),
            group,
            endpoint: e.task.endpoint,
            deadline: e.deadline,
            prepared: e.prepared.clone(),
            waited,
        };
        self.ready.remove(&e.group, &k);
        self.running += 1;
        Some(start)
    }

    /// What routing task `id` reads: the task, and its request if the queue holds it.
    pub fn routing(&self, id: &TaskId) -> Option<(Task, Option<Arc<Parsed>>)> {
        let e = self.entries.get(id)?;
        Some((e.task.clone(), e.prepared.clone()))
    }

    /// Task `id` was routed under registry `version`: into `group`, with its request ready;
    /// or it cannot run (its request cannot be filled in, or has no route): it ends.
    pub fn routed(
        &mut self,
        id: &TaskId,
        routed: Result<(Group, Arc<Parsed>), (TaskCode, String)>,
        version: &str,
        wall: SystemTime,
    ) -> Vec<Effect> {
        let (group, prepared) = match routed {
            Ok(ok) => ok,
            Err((code, why)) => {
                return self.end(id, super::walked::unprepared(code), error(code, &why), wall)
            }
        };
        // Routed into a group that is parked: it waits with the others, for the same reason
        // (it is not walked until a breaker changes).
        let why = self.parked.get(&group).map(|p| p.why.clone());
        let place = Some((group, version.to_string()));
        if let Some(e) = self.entries.get_mut(id) {
            if let (Some(why), TaskStatus::Queued) = (why, e.task.status) {
                e.task.status = TaskStatus::Waiting;
                e.task.waiting_for = Some(why);
            }
            let k = key(e);
            let was = std::mem::replace(&mut e.group, place);
            if self.ready.remove(&was, &k) {
                self.ready.insert(&e.group, k);
            }
            super::hold(&mut self.held, e, Some(prepared));
        }
        Vec::new()
    }
}
