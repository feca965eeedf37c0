//! Task slots per machine (SPEC §10: fair to interactive work).

use super::*;

/// Tasks running per machine, by name (a reload keeps the count of a machine that stays).
#[derive(Debug, Default)]
pub struct Slots {
    running: Mutex<HashMap<String, u32>>,
}

/// A machine slot held by a running walk; released when dropped.
pub struct Slot<'a> {
    slots: &'a Slots,
    machine: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut r = lock(&self.slots.running);
        if let Some(n) = r.get_mut(&self.machine) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Slots {
    /// Takes a slot on `machine` if a task may start there now: fewer than `task_slots`
    /// tasks on it, and its bulkhead not full — with one slot always left to interactive
    /// requests where `max_concurrency` > 1 (SPEC §10: fair to interactive work).
    pub fn take(&self, fleet: &Fleet, machine: MachineId, task_slots: u32) -> Option<Slot<'_>> {
        let name = &fleet.registry.machines[machine].name;
        let (inflight, max) = fleet.machines.load(machine);
        let room = if max > 1 { max - 1 } else { max };
        let mut r = lock(&self.running);
        let n = r.entry(name.clone()).or_insert(0);
        if *n >= task_slots || inflight >= room {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self,
            machine: name.clone(),
        })
    }

    /// Whether [`Slots::take`] could succeed on any of `machines` now (no slot taken).
    pub(super) fn any_free(&self, fleet: &Fleet, machines: &[MachineId]) -> bool {
        let r = lock(&self.running);
        machines.iter().any(|&m| {
            let mm = &fleet.registry.machines[m];
            let (inflight, max) = fleet.machines.load(m);
            let room = if max > 1 { max - 1 } else { max };
            r.get(&mm.name).copied().unwrap_or(0) < mm.task_slots && inflight < room
        })
    }
}
