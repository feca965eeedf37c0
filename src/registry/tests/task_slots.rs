//! Unit tests of each machine's `task_slots` (docs/api.md "Tasks"): from defaults, then the
//! machine; 1 to the machine's `max_concurrency`.

use super::tasks::lines;
use super::{assert_rejected_at, base_with, parse, BASE};
use crate::outcome::MachineId;

#[test]
fn task_slots_come_from_defaults_then_the_machine() {
    let mut v = lines(&["defaults:", "  task_slots: 2"]);
    v.extend(base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    max_concurrency: 3",
            "    task_slots: 3",
        ],
    ));
    let reg = parse(&v).unwrap();
    assert_eq!(reg.machines[MachineId(0)].task_slots, 2, "from defaults");
    assert_eq!(
        reg.machines[MachineId(1)].task_slots,
        3,
        "its own, up to max_concurrency"
    );
}

#[test]
fn task_slots_out_of_range_are_rejected() {
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    task_slots: 0"],
    );
    assert_rejected_at(
        &v,
        6,
        "0",
        &["machine 'local': task_slots: expected a whole number from 1 to the machine's max_concurrency (8), got 0"],
    );
    let v = base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    max_concurrency: 2",
            "    task_slots: 3",
        ],
    );
    assert_rejected_at(
        &v,
        7,
        "3",
        &["machine 'local'", "max_concurrency (2)", "got 3"],
    );
    // Inherited: the defaults' value is pointed at, and the machine named.
    let mut v = lines(&["defaults:", "  task_slots: 4"]);
    v.extend(base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    max_concurrency: 2",
        ],
    ));
    assert_rejected_at(
        &v,
        2,
        "4",
        &[
            "machine 'local': task_slots (from defaults)",
            "max_concurrency (2)",
            "got 4",
        ],
    );
    let mut v = lines(&["defaults:", "  task_slots: 0"]);
    v.extend(lines(BASE));
    assert_rejected_at(&v, 2, "0", &["defaults.task_slots", "1 or more"]);
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    task_slots: many"],
    );
    assert_rejected_at(&v, 6, "many", &["task_slots"]);
}
