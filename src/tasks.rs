//! Tasks: durable work that waits out outages, runs its follow-ups, and is never lost.
//!
//! - [`model`] (`crate::task`): the task, its id and the object the API shows.
//! - [`submit`]: a submit body read and checked before anything is stored.
//! - [`queue`]: the queue's state and every decision it makes, pure: how a task waits for
//!   a machine is told there.
//! - [`scheduler`]: the queue's shell: the lock, the store, the clocks, the walks.
//! - `walk`: one walk of a task's chain, through the same walk and breakers as any request.
//! - `slots`: task slots per machine.
//! - `follow`: `{{after.N}}` and what a parent's answer gives its follow-ups.
//! - [`pooled`]: the shared queue's shell (`cluster.tasks: shared`): the API on the pool's
//!   queue in Redis, and the worker that claims, walks, renews and ends its tasks.
//! - [`deliver`]: callbacks of finished tasks, retried for up to 24 h, across restarts.
//! - [`moving`]: the export file of `labrouter task export|import`, written whole and read
//!   back checked, every line.

pub mod deliver;
mod follow;
pub use crate::task as model;
pub mod moving;
pub mod pooled;
pub mod queue;
pub mod scheduler;
mod slots;
pub mod submit;
mod walk;

pub use model::{Accept, Task, TaskId};
pub use scheduler::{Scheduler, SubmitError, Submitted};
