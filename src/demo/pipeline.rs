//! The demo's evening pipeline (docs/api.md "Tasks") as it plays: the agent's tasks ([`super::agent`])
//! watched as they wait out the outage, run when a machine is back, and finish; and what
//! they came to, for the summary.
//!
//! The watcher reads the task queue directly, as the rest of the demo reads the breakers.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::agent::{Submitted, REVIEWS, ROUTE};
use super::TaskSummary;
use crate::breaker::Phase;
use crate::fleet::Fleet;
use crate::outcome::{MachineId, TaskStatus};
use crate::tasks::{Scheduler, Task, TaskId};

/// How long the demo waits for unfinished tasks after the story ends (story seconds).
pub const GRACE_S: f64 = 5.0;

/// How often the demo looks at the queue while it waits for the last tasks.
pub const LOOK_EVERY: Duration = Duration::from_millis(50);

/// How far the narration has told the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Told {
    Nothing,
    Submitted,
    Waiting,
    Running,
    Finished,
}

/// The pipeline's tasks by status, at one look.
#[derive(Debug, Default)]
struct Look {
    blocked: u64,
    /// Queued or waiting: ready to run.
    ready: u64,
    /// Of those, the ones whose last walk found every target held back.
    waiting: u64,
    running: u64,
    succeeded: u64,
    /// Of those, follow-ups: each ran with its review's answer.
    follow_ups_ran: u64,
    /// Failed, cancelled or expired.
    ended_badly: u64,
    /// A waiting task, for what it says it waits for.
    example: Option<Task>,
}

/// The watcher: what the pipeline did, told as it happens.
pub struct Pipeline {
    scheduler: Arc<Scheduler>,
    fleet: Arc<Fleet>,
    /// The machines the tasks accept (`same_model` of the route's chain), with their targets.
    accepted: Vec<(MachineId, String)>,
    reviews: Vec<TaskId>,
    follow_ups: Vec<TaskId>,
    refused: Vec<String>,
    /// Tasks seen ready while every machine they accept was held back by its breaker.
    waited: HashSet<TaskId>,
    /// Tasks whose bad end was told.
    told_failed: HashSet<TaskId>,
    told: Told,
    /// Tasks succeeded at the last look (for the progress line).
    succeeded: u64,
}

impl Pipeline {
    pub fn new(scheduler: Arc<Scheduler>, fleet: Arc<Fleet>) -> Self {
        let reg = &fleet.registry;
        let chain = reg
            .routes
            .iter()
            .find(|r| r.name == ROUTE)
            .map(|r| r.chain.clone())
            .unwrap_or_default();
        let accepted = chain
            .first()
            .map(|&first| {
                chain
                    .iter()
                    .filter(|&&m| reg.models[m].backend == reg.models[first].backend)
                    .map(|&m| (reg.models[m].machine, reg.target_name(m)))
                    .collect()
            })
            .unwrap_or_default();
        Pipeline {
            scheduler,
            fleet,
            accepted,
            reviews: Vec::new(),
            follow_ups: Vec::new(),
            refused: Vec::new(),
            waited: HashSet::new(),
            told_failed: HashSet::new(),
            told: Told::Nothing,
            succeeded: 0,
        }
    }

    /// The task queue it watches (the pictures' watcher reads it too).
    pub fn scheduler(&self) -> Arc<Scheduler> {
        Arc::clone(&self.scheduler)
    }

    /// The targets the tasks accept, for the header: `a, b`.
    pub fn targets(&self) -> String {
        let names: Vec<&str> = self.accepted.iter().map(|(_, t)| t.as_str()).collect();
        names.join(", ")
    }

    /// `tasks 12/80` for the progress line, once the pipeline is submitted.
    pub fn progress(&self) -> Option<String> {
        (self.told > Told::Nothing).then(|| {
            let n = self.reviews.len() + self.follow_ups.len();
            format!("tasks {}/{n}", self.succeeded)
        })
    }

    /// Whether the agent's submits are in and every task has finished.
    pub fn finished(&self) -> bool {
        self.told == Told::Finished
    }

    fn planned() -> u64 {
        2 * REVIEWS as u64
    }

    fn ids(&self) -> impl Iterator<Item = &TaskId> {
        self.reviews.iter().chain(&self.follow_ups)
    }

    /// Every machine the tasks accept is held back by its breaker.
    fn held(&self) -> bool {
        !self.accepted.is_empty()
            && self
                .accepted
                .iter()
                .all(|&(m, _)| self.fleet.machines.phase(m) != Phase::Closed)
    }

    /// The agent's submits are in: what to say about them.
    pub fn submitted(&mut self, s: Submitted) -> Vec<String> {
        self.reviews = s.reviews;
        self.follow_ups = s.follow_ups;
        self.refused = s.refused;
        self.told = Told::Submitted;
        let mut lines = vec![format!(
            "tasks: {} submitted and stored: {} reviews ready, {} follow-ups blocked until their review succeeds",
            self.reviews.len() + self.follow_ups.len(),
            self.reviews.len(),
            self.follow_ups.len()
        )];
        for why in &self.refused {
            lines.push(format!("tasks: a submit FAILED: {why}"));
        }
        lines
    }

    /// The pipeline's tasks as the queue has them now (finished ones from the store).
    async fn tasks(&self) -> Vec<Task> {
        let mine: HashSet<&TaskId> = self.ids().collect();
        let limit = u32::try_from(mine.len() + 100).unwrap_or(u32::MAX);
        self.scheduler
            .list(None, None, None, limit)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|t| mine.contains(&t.id))
            .collect()
    }

    /// Looks at the queue: notes the tasks that are waiting out the outage, and says what
    /// changed since the last look.
    pub async fn observe(&mut self) -> Vec<String> {
        if self.told == Told::Nothing || self.told == Told::Finished {
            return Vec::new();
        }
        // Held back from before the read to after it: a machine that came back meanwhile
        // may have let a task run (and released its follow-up) before the read saw it.
        let held_before = self.held();
        let tasks = self.tasks().await;
        let held = held_before && self.held();
        let mut lines = Vec::new();
        let look = self.look(tasks, held, &mut lines);
        self.succeeded = look.succeeded;
        let failed = look.ended_badly + self.refused.len() as u64;
        if self.told < Told::Waiting && held && look.waiting > 0 {
            self.told = Told::Waiting;
            lines.extend(self.waiting_lines(&look, failed));
        } else if self.told == Told::Waiting && look.succeeded > 0 {
            self.told = Told::Running;
            lines.push(self.running_line(&look, failed));
        }
        if let Some(line) = self.finished_line(&look, failed) {
            self.told = Told::Finished;
            lines.push(line);
        }
        lines
    }

    /// Counts `tasks` by status; notes the ready ones as having waited when every machine
    /// they accept is `held` back, and tells each failure once, in `lines`.
    fn look(&mut self, tasks: Vec<Task>, held: bool, lines: &mut Vec<String>) -> Look {
        let follow_ups: HashSet<&TaskId> = self.follow_ups.iter().collect();
        let mut look = Look::default();
        for t in tasks {
            match t.status {
                TaskStatus::Blocked => look.blocked += 1,
                TaskStatus::Queued | TaskStatus::Waiting => {
                    look.ready += 1;
                    if held {
                        self.waited.insert(t.id.clone());
                    }
                    if t.status == TaskStatus::Waiting {
                        look.waiting += 1;
                        look.example.get_or_insert(t);
                    }
                }
                TaskStatus::Running => look.running += 1,
                TaskStatus::Succeeded => {
                    look.succeeded += 1;
                    if follow_ups.contains(&t.id) {
                        look.follow_ups_ran += 1;
                    }
                }
                TaskStatus::Failed | TaskStatus::Cancelled | TaskStatus::Expired => {
                    look.ended_badly += 1;
                    if self.told_failed.insert(t.id.clone()) {
                        let why = t.error.as_ref().map_or("no error recorded", |e| &e.message);
                        lines.push(format!("tasks: task {} {} FAILED: {why}", t.id, t.status));
                    }
                }
            }
        }
        look
    }

    /// The tasks wait out the outage: how many, and what one of them says it waits for.
    fn waiting_lines(&self, look: &Look, failed: u64) -> Vec<String> {
        let mut lines = vec![format!(
            "tasks: {} waiting (every target of route '{ROUTE}' they accept is held back: {}), {} follow-ups blocked on them, {failed} failed",
            look.ready,
            self.targets(),
            look.blocked
        )];
        if let Some(t) = &look.example {
            lines.push(format!(
                "  task {} is waiting: {}; the {} others queue behind it, sending nothing",
                t.id,
                t.waiting_for.as_deref().unwrap_or("(no reason given)"),
                look.ready.saturating_sub(1)
            ));
        }
        lines
    }

    /// The tasks run again: which machine is back (or that a probe served), and the counts.
    fn running_line(&self, look: &Look, failed: u64) -> String {
        let back: Vec<&str> = self
            .accepted
            .iter()
            .filter(|&&(m, _)| self.fleet.machines.phase(m) == Phase::Closed)
            .map(|(_, t)| t.as_str())
            .collect();
        let back = match back.is_empty() {
            true => "a probe served".to_string(),
            false => format!("{} is back", back.join(", ")),
        };
        format!(
            "tasks: running again ({back}): {} finished, {} running, {} ready, {} follow-ups blocked, {failed} failed",
            look.succeeded, look.running, look.ready, look.blocked
        )
    }

    /// Every task submitted has ended: how many succeeded, waited and failed; none while
    /// any is unfinished.
    fn finished_line(&self, look: &Look, failed: u64) -> Option<String> {
        let unfinished = look.blocked + look.ready + look.running;
        let known = (self.reviews.len() + self.follow_ups.len()) as u64;
        if self.told < Told::Submitted
            || unfinished != 0
            || look.succeeded + look.ended_badly != known
        {
            return None;
        }
        let verdict = match failed {
            0 => "0 failed".to_string(),
            n => format!("{n} FAILED"),
        };
        Some(format!(
            "tasks: all {known} finished: {} succeeded ({} had waited out the outage; {} follow-ups ran with their review's answer), {verdict}",
            look.succeeded,
            self.waited.len(),
            look.follow_ups_ran
        ))
    }

    /// The pipeline's part of the summary, read from the tasks as they ended.
    pub async fn summary(&self) -> TaskSummary {
        let tasks = self.tasks().await;
        let follow_ups: HashSet<&TaskId> = self.follow_ups.iter().collect();
        let mut s = TaskSummary {
            planned: Self::planned(),
            submitted: (self.reviews.len() + self.follow_ups.len()) as u64,
            follow_ups: self.follow_ups.len() as u64,
            waited: self.waited.len() as u64,
            ..TaskSummary::default()
        };
        for t in &tasks {
            if t.status == TaskStatus::Succeeded {
                s.finished += 1;
                if follow_ups.contains(&t.id) {
                    s.follow_ups_ran += 1;
                }
            }
            s.sent_to_down += t
                .attempts
                .iter()
                .filter(|a| a.outcome == crate::outcome::AttemptOutcome::Failed)
                .count() as u64;
        }
        // Whatever of the planned pipeline did not succeed: refused, failed, cancelled,
        // expired, or still unfinished when the demo ended.
        s.failed = Self::planned().saturating_sub(s.finished);
        s
    }
}
