//! What the demo did, as `run` returns it and as its last lines print it: the interactive
//! requests, the evening pipeline's tasks, and each machine's part in the story.

use std::fmt;
use std::time::Duration;

pub use super::pictures::PictureSummary;

/// What the demo did.
#[derive(Clone, Debug)]
pub struct Summary {
    pub elapsed: Duration,
    /// Interactive requests sent.
    pub sent: u64,
    /// Requests answered 200 with a complete answer.
    pub served: u64,
    /// Served requests answered by a target other than their route's first.
    pub rerouted: u64,
    /// Requests whose final answer was not a complete 200.
    pub requests_failed: u64,
    /// Everything that failed: those requests and the pipeline's tasks that did not
    /// succeed. The exit status is non-zero unless it is 0.
    pub failed: u64,
    /// The evening pipeline.
    pub tasks: TaskSummary,
    /// The evening's pictures.
    pub images: PictureSummary,
    /// In registry order: gpu-box, ubuntu-box, local.
    pub machines: Vec<MachineSummary>,
}

/// The evening pipeline's part in the story (docs/api.md "Tasks" tasks).
#[derive(Clone, Debug, Default)]
pub struct TaskSummary {
    /// Reviews and follow-ups the agent meant to submit.
    pub planned: u64,
    /// Reviews and follow-ups the router accepted and stored.
    pub submitted: u64,
    /// Of those, the follow-ups (`after` a review, `{{after.0}}` in their content).
    pub follow_ups: u64,
    /// Tasks seen ready (not blocked, not running) while every machine they accept was
    /// held back by its breaker: they had a waiting period.
    pub waited: u64,
    /// Tasks that succeeded.
    pub finished: u64,
    /// Tasks of the planned pipeline that did not succeed: refused at submit, failed,
    /// cancelled, expired, or unfinished when the demo ended.
    pub failed: u64,
    /// Failed tries in the tasks' attempt lists: the requests the tasks sent to machines
    /// that were down (probes that found one still down, tries that met a fresh outage).
    pub sent_to_down: u64,
    /// Follow-ups that succeeded: each ran with its review's answer for `{{after.0}}`.
    pub follow_ups_ran: u64,
}

/// One machine's part in the story.
#[derive(Clone, Debug, Default)]
pub struct MachineSummary {
    pub name: String,
    /// closed -> open.
    pub trips: u32,
    /// half-open -> open: a probe found it still down.
    pub failed_probes: u32,
    /// -> closed.
    pub recoveries: u32,
    /// Interactive requests whose route tries this machine first, sent while the story had
    /// it down.
    pub tasks_while_down: u64,
    /// Requests the router sent to it while it was down (its `remote_attempts` over the
    /// outage windows, probes included).
    pub attempts_while_down: u64,
    /// Of those, the ones that reached the machine (a refused connection reaches nothing).
    pub reached_while_down: u64,
}

impl MachineSummary {
    /// What a client retrying each of those requests 3 times on this machine would have sent.
    pub fn retry3_attempts(&self) -> u64 {
        3 * self.tasks_while_down
    }
}

impl Summary {
    /// Attempts at dead machines labrouter did not make, against a retry-3-times client.
    pub fn saved(&self) -> u64 {
        self.machines
            .iter()
            .map(|m| m.retry3_attempts().saturating_sub(m.attempts_while_down))
            .sum()
    }

    /// Every request sent was served and every task of the pipeline succeeded.
    pub fn all_served(&self) -> bool {
        self.failed == 0
            && self.served == self.sent
            && self.tasks.finished == self.tasks.submitted
            && self.images.failed == 0
    }
}

/// One count of the summary: a label, the number, and what it means.
fn row(f: &mut fmt::Formatter<'_>, label: &str, n: u64, note: &str) -> fmt::Result {
    let note = match note.is_empty() {
        true => String::new(),
        false => format!("   ({note})"),
    };
    writeln!(f, "    {label:<14}{n:>4}{note}")
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Summary after {:.1}s", self.elapsed.as_secs_f64())?;
        self.requests(f)?;
        writeln!(f)?;
        self.tasks.pipeline(f)?;
        writeln!(f)?;
        self.images.pictures(f)?;
        writeln!(f)?;
        self.machine_table(f)?;
        writeln!(f)?;
        self.savings(f)
    }
}

impl Summary {
    /// The interactive requests' counts.
    fn requests(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  interactive requests:")?;
        row(f, "sent", self.sent, "")?;
        row(f, "served", self.served, "")?;
        row(
            f,
            "rerouted",
            self.rerouted,
            "served by a later target of their route's chain",
        )?;
        row(f, "failed", self.requests_failed, "")
    }

    /// Each machine's trips, probes and the requests it was sent while down, beside what a
    /// retrying client would have sent.
    fn machine_table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<11} {:>5} {:>13} {:>19} {:>21} {:>15}",
            "machine",
            "trips",
            "failed probes",
            "requests while down",
            "sent to it while down",
            "retry-3 client"
        )?;
        for m in &self.machines {
            writeln!(
                f,
                "  {:<11} {:>5} {:>13} {:>19} {:>21} {:>15}",
                m.name,
                m.trips,
                m.failed_probes,
                m.tasks_while_down,
                m.attempts_while_down,
                m.retry3_attempts()
            )?;
        }
        Ok(())
    }

    /// The closing paragraph: the attempts at dead machines saved, and what failed.
    fn savings(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sum = |g: fn(&MachineSummary) -> u64| self.machines.iter().map(g).sum::<u64>();
        writeln!(
            f,
            "  While machines were down, labrouter sent them {} requests: the failures that tripped",
            sum(|m| m.attempts_while_down)
        )?;
        writeln!(
            f,
            "  each breaker, then one probe per cooldown ({} reached a machine; a refused connection",
            sum(|m| m.reached_while_down)
        )?;
        writeln!(
            f,
            "  reaches nothing). A client retrying each request 3 times would have sent {}.",
            sum(|m| m.retry3_attempts())
        )?;
        write!(
            f,
            "  labrouter saved {} wasted attempts to dead machines; {} of {} requests and {} of {} tasks failed.",
            self.saved(),
            self.requests_failed,
            self.sent,
            self.tasks.failed + self.images.failed,
            self.tasks.planned + self.images.planned
        )
    }
}

impl TaskSummary {
    /// The evening pipeline's counts.
    fn pipeline(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  the evening pipeline (tasks):")?;
        row(
            f,
            "submitted",
            self.submitted,
            &format!(
                "{} reviews + {} follow-ups, each after its review",
                self.submitted - self.follow_ups,
                self.follow_ups
            ),
        )?;
        row(
            f,
            "waited",
            self.waited,
            "ready while every machine they accept was held back by its breaker",
        )?;
        row(f, "finished", self.finished, "")?;
        row(f, "failed", self.failed, "")?;
        row(
            f,
            "sent to dead",
            self.sent_to_down,
            &format!(
                "failed tries in their attempt lists; a queue retrying each waiting task 3 times: {}",
                3 * self.waited
            ),
        )?;
        row(
            f,
            "follow-ups ran",
            self.follow_ups_ran,
            "each with its review's answer in place of {{after.0}}",
        )
    }
}

impl PictureSummary {
    /// The evening's pictures' counts.
    fn pictures(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  the evening's pictures (tasks):")?;
        let mut by = self.drawn_by.clone();
        by.sort();
        by.dedup();
        let by = match by.is_empty() {
            true => String::new(),
            false => format!("by {}", by.join(", ")),
        };
        row(f, "drawn", self.drawn_by.len() as u64, &by)?;
        row(
            f,
            "posted",
            self.posted,
            "each after its picture, which has no text to put in",
        )?;
        row(f, "failed", self.failed, "")
    }
}
