//! Tasks (SPEC §10): durable work that waits out outages, runs its follow-ups, and is never
//! lost.
//!
//! - [`model`] (`crate::task`): the task, its id and the object the API shows.
//! - [`submit`]: a submit body read and checked before anything is stored.
//! - `follow`: `{{after.N}}` and what a parent's answer gives its follow-ups.
//! - `walk`: one walk of a task's chain through the same breakers as any request.
//! - [`scheduler`]: the queue, the slots, waiting and waking; durable through the store.
//! - [`deliver`]: callbacks of finished tasks, retried for up to 24 h, across restarts.

pub mod deliver;
pub mod follow;
pub use crate::task as model;
pub mod scheduler;
pub mod submit;
mod walk;

pub use model::{Accept, Task, TaskId};
pub use scheduler::{Scheduler, SubmitError, Submitted};
