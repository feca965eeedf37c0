//! README "Several routers", the shared queue's Redis side: `labrouter::cluster::tasks` against a
//! real `redis-server` (one per test, on a free loopback port; `scripts/test.sh` installs it).
//! Each "router" is its own [`SharedQueue`] with its own connection, as two processes have.
//! What it proves:
//!
//! - a Redis that does not fsync every write is refused at start, naming the setting; a
//!   Redis that denies `CONFIG` is refused unless `assume_durable` (`durable`);
//! - two routers submitting one `Idempotency-Key` at once make one task (`submit`);
//! - claims go by priority, then age; a lease that lapses puts the task back with one
//!   `interrupted` attempt, and a second lapse fails it `interrupted` (`lease`);
//! - a task ends once: a finish after another router's finish (or a cancel) is dropped and
//!   the first result stays; its old holder's renew says stop (`lease`, `views`);
//! - get, list and cancel from any router (`views`);
//! - `tasks.max_queued` bounds the pool's unfinished tasks, and finished ones go after
//!   `tasks.keep` with their idempotency keys (`bounds`);
//! - a follow-up is claimed by no router until every parent succeeded; a parent that
//!   fails, expires or is cancelled cancels its follow-ups down the chain in the same script;
//!   one of a parent that already ended is handled at submit (`follow`);
//! - the pool runs at most `tasks.max_running` tasks whichever routers claim them, and a
//!   machine's `task_slots` are counted across routers; a dead router's come back when its
//!   leases lapse (`limits`);
//! - a task past its deadline that no router runs (blocked, queued) expires, its follow-ups
//!   cancelled, while a running one is left to its walk (`deadlines`);
//! - a finished task's callback is held in the pool by the router that ended it, due for any
//!   router after each attempt, and leaves the pool once delivered (`callbacks_pool`);
//! - values another hand left in Redis (garbage JSON, a 2 MB field, wrong types, numbers out
//!   of range) are errors naming the task, never a panic, and never wedge the queue
//!   (`hostile`).
//!
//! And end to end, with real router processes (`tests/support/process.rs`) on the queue
//! (`routers`), one simulated machine's request count as the witness:
//! - a router killed with SIGKILL while it runs most tasks: every task succeeds on the other,
//!   once, with at most one more request per interrupted attempt (`failover`);
//! - one `Idempotency-Key` sent to both routers at once makes one task; a task submitted on
//!   one router is read, listed and cancelled on the other, whose walk then stops (`anywhere`);
//! - a follow-up submitted on b of a parent on a reaches the machine after the parent's
//!   answer, with its text; an expired parent's follow-ups never reach it (`follow_routers`);
//! - `max_running: 1`, or one `task_slot`, across two routers: the slow machine never
//!   answers two tasks at once; a router killed holding the pool's one slot gives it back
//!   when its lease lapses (`limits`);
//! - a callback is sent once, by the router that ended the task, and its delivery is shown
//!   on every router; a router killed while it retries leaves the delivery to another, under
//!   the same `webhook-id`, its attempts counted on (`callback`);
//! - tasks of both routers waiting out their machine's outage cost it the pool's one probe
//!   per cooldown, no attempt, and all succeed after; a spoiled task at the head of the
//!   queue is set aside and the rest run (`waiting`);
//! - Redis wedged (SIGSTOP): submits refused with 503 within `task_timeout`, chat served,
//!   `/status` says the queue is down; after SIGCONT submits are taken again; after a
//!   restart the router connects again, to a durable Redis only; a router refuses to start on
//!   a Redis that is not durable, and starts (chat served) while Redis is down (`outage`).
//!
//! And moving a queue (`moving`): `labrouter task export|import` keep every field of every
//! task local → shared → local; a file that is not whole is refused naming the line, with
//! both queues unchanged; an imported idempotency key replays the imported task; an imported
//! follow-up is linked to its parents as a submit links it (run after them with their text,
//! or cancelled by a parent that failed) and an imported deadline is swept (`moving_follow`).
//!
//! Leases run on Redis's clock (`TIME`), which a paused tokio clock cannot move: the lease
//! tests use 300 ms leases and wait for them with real time, a second at most.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "cluster/redis.rs"]
mod redis;

#[path = "support/process.rs"]
mod process;

#[path = "shared_tasks/anywhere.rs"]
mod anywhere;
#[path = "shared_tasks/bounds.rs"]
mod bounds;
#[path = "shared_tasks/callback.rs"]
mod callback;
#[path = "shared_tasks/callbacks_pool.rs"]
mod callbacks_pool;
#[path = "shared_tasks/deadlines.rs"]
mod deadlines;
#[path = "shared_tasks/durable.rs"]
mod durable;
#[path = "shared_tasks/failover.rs"]
mod failover;
#[path = "shared_tasks/follow.rs"]
mod follow;
#[path = "shared_tasks/follow_routers.rs"]
mod follow_routers;
#[path = "shared_tasks/hostile.rs"]
mod hostile;
#[path = "shared_tasks/lease.rs"]
mod lease;
#[path = "shared_tasks/limits.rs"]
mod limits;
#[path = "shared_tasks/moving.rs"]
mod moving;
#[path = "shared_tasks/moving_file.rs"]
mod moving_file;
#[path = "shared_tasks/moving_follow.rs"]
mod moving_follow;
#[path = "shared_tasks/outage.rs"]
mod outage;
#[path = "shared_tasks/pool.rs"]
mod pool;
#[path = "shared_tasks/routers.rs"]
mod routers;
#[path = "shared_tasks/submit.rs"]
mod submit;
#[path = "shared_tasks/views.rs"]
mod views;
#[path = "shared_tasks/waiting.rs"]
mod waiting;
