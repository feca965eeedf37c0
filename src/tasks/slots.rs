//! Task slots per machine: tasks run on a machine at most `task_slots` at a time, and never
//! take its last interactive slot (a slot in labrouter is not a slot on the GPU: a task
//! must not start while interactive requests wait for the machine).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fleet::Fleet;
use crate::outcome::{MachineId, ModelId};

/// Tasks running per machine, by name (a reload keeps the count of a machine that stays).
#[derive(Debug, Default)]
pub struct Slots {
    running: Mutex<HashMap<String, u32>>,
}

/// A machine's task slots counted across the routers of a pool (`cluster.tasks: shared`),
/// beside this router's own count: taken by a walk's task, given back by the queue when the
/// task takes another machine's, ends, is given back, or its lease lapses.
pub trait PoolSlots: Send + Sync {
    /// Takes one of `machine`'s `max` slots in the pool for the walk's task; false when
    /// they are all taken (or the pool's count cannot be reached: the target is skipped as
    /// busy).
    fn take<'a>(
        &'a self,
        machine: &'a str,
        max: u32,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
}

/// A machine slot held by a running walk; released when dropped.
pub struct Slot {
    slots: Arc<Slots>,
    machine: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut r = lock(&self.slots.running);
        if let Some(n) = r.get_mut(&self.machine) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The bulkhead's room for tasks: one slot always left to interactive requests where
/// `max_concurrency` > 1.
fn room(max: u32) -> u32 {
    if max > 1 {
        max - 1
    } else {
        max
    }
}

impl Slots {
    /// Takes a slot on `machine` if a task may start there now: fewer than `task_slots`
    /// tasks on it, and its bulkhead not full.
    pub fn take(
        self: &Arc<Self>,
        fleet: &Fleet,
        machine: MachineId,
        task_slots: u32,
    ) -> Option<Slot> {
        let name = &fleet.registry.machines[machine].name;
        let (inflight, max) = fleet.machines.load(machine);
        let mut r = lock(&self.running);
        let n = r.entry(name.clone()).or_insert(0);
        if *n >= task_slots || inflight >= room(max) {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: Arc::clone(self),
            machine: name.clone(),
        })
    }

    /// Whether [`Slots::take`] could succeed on a machine of `group` now (no slot taken).
    pub fn any_free(&self, fleet: &Fleet, group: &[ModelId]) -> bool {
        let reg = &fleet.registry;
        let r = lock(&self.running);
        group.iter().any(|&model| {
            let m = reg.models[model].machine;
            let mm = &reg.machines[m];
            let (inflight, max) = fleet.machines.load(m);
            r.get(&mm.name).copied().unwrap_or(0) < mm.task_slots && inflight < room(max)
        })
    }
}
