//! The demo while it plays: the story's steps on the clock, transitions, finished requests
//! and the pipeline's tasks narrated as they come, and the counts the summary is made of.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;

use super::agent::{self, Submitted};
use super::narrate::{self, Narrator};
use super::pictures::{self, Batch, Pictures};
use super::pipeline::{self, Pipeline};
use super::setup::{self, scaled, Act, Step};
use super::traffic::{Done, Traffic};
use super::{DemoError, MachineSummary, Summary};
use crate::breaker::Phase;
use crate::fleet::Fleet;
use crate::machines::Transitioned;
use crate::outcome::MachineId;
use crate::sim::{Fault, Sim};

/// One machine's counts as the story goes.
#[derive(Debug, Default)]
struct Tally {
    trips: u32,
    failed_probes: u32,
    recoveries: u32,
    /// When it tripped (for "back in service after").
    opened_at: Option<Instant>,
    /// `remote_attempts` and sim work hits when the current outage began.
    base: Option<(u64, u64)>,
    attempts_while_down: u64,
    reached_while_down: u64,
}

/// The demo while it plays.
pub struct Show<'a> {
    speed: f64,
    start: Instant,
    fleet: Arc<Fleet>,
    sims: &'a [Sim; 3],
    traffic: Arc<Traffic>,
    pipeline: Pipeline,
    pictures: Pictures,
    /// The agent's submits, once they are in.
    submitted_tx: mpsc::UnboundedSender<Submitted>,
    submitted_rx: mpsc::UnboundedReceiver<Submitted>,
    /// The pictures' submits, once they are in.
    batch_tx: mpsc::UnboundedSender<Batch>,
    batch_rx: mpsc::UnboundedReceiver<Batch>,
    narrator: Narrator<'a>,
    served: u64,
    rerouted: u64,
    failed: u64,
    tallies: Vec<Tally>,
    /// Kinds of reroute already told since the last transition (route, skipped).
    seen: HashSet<(&'static str, String)>,
}

impl<'a> Show<'a> {
    pub fn new(
        speed: f64,
        start: Instant,
        fleet: Arc<Fleet>,
        sims: &'a [Sim; 3],
        traffic: Arc<Traffic>,
        pipeline: Pipeline,
        narrator: Narrator<'a>,
    ) -> Self {
        let tallies = fleet
            .registry
            .machines
            .iter()
            .map(|_| Tally::default())
            .collect();
        let (submitted_tx, submitted_rx) = mpsc::unbounded_channel();
        let (batch_tx, batch_rx) = mpsc::unbounded_channel();
        let pictures = Pictures::new(pipeline.scheduler());
        Show {
            speed,
            start,
            fleet,
            sims,
            traffic,
            pipeline,
            pictures,
            submitted_tx,
            submitted_rx,
            batch_tx,
            batch_rx,
            narrator,
            served: 0,
            rerouted: 0,
            failed: 0,
            tallies,
            seen: HashSet::new(),
        }
    }

    pub fn narrator(&mut self) -> &mut Narrator<'a> {
        &mut self.narrator
    }

    pub async fn play(
        &mut self,
        transitions: &mut broadcast::Receiver<Transitioned>,
        done: &mut mpsc::UnboundedReceiver<Done>,
        stop: &watch::Sender<bool>,
    ) -> Result<(), DemoError> {
        let mut steps = setup::story().into_iter();
        let mut next = steps.next();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut hub_open = true;
        loop {
            let at = next.as_ref().map(|s| self.start + scaled(s.at, self.speed));
            tokio::select! {
                // Transitions first: a task's Done is sent after the transition it caused.
                biased;
                t = transitions.recv(), if hub_open => match t {
                    Ok(t) => {
                        self.on_transition(&t)?;
                        self.look(transitions).await?;
                    }
                    Err(RecvError::Lagged(n)) => self.narrator.say(&format!("({n} transitions not narrated)"))?,
                    Err(RecvError::Closed) => hub_open = false,
                },
                Some(s) = self.submitted_rx.recv() => self.on_submitted(s, transitions).await?,
                Some(b) = self.batch_rx.recv() => self.on_batch(b, transitions).await?,
                d = done.recv() => match d {
                    Some(d) => self.on_done(d)?,
                    // Every worker has stopped: the story is over.
                    None => break,
                },
                () = tokio::time::sleep_until(at.unwrap_or_else(Instant::now)), if at.is_some() => {
                    if let Some(step) = next.take() {
                        self.on_step(step, stop)?;
                    }
                    next = steps.next();
                }
                _ = tick.tick() => {
                    self.look(transitions).await?;
                    self.draw()?;
                }
            }
        }
        self.settle(transitions).await?;
        while let Ok(t) = transitions.try_recv() {
            self.on_transition(&t)?;
        }
        self.narrator.done()?;
        Ok(())
    }

    /// After the story: the pipeline's and the pictures' last tasks finish (or the grace
    /// ends).
    async fn settle(
        &mut self,
        transitions: &mut broadcast::Receiver<Transitioned>,
    ) -> Result<(), DemoError> {
        let until = Instant::now() + scaled(pipeline::GRACE_S, self.speed);
        while !(self.pipeline.finished() && self.pictures.finished()) && Instant::now() < until {
            if let Ok(s) = self.submitted_rx.try_recv() {
                self.on_submitted(s, transitions).await?;
            }
            if let Ok(b) = self.batch_rx.try_recv() {
                self.on_batch(b, transitions).await?;
            }
            self.look(transitions).await?;
            tokio::time::sleep(pipeline::LOOK_EVERY).await;
        }
        Ok(())
    }

    async fn on_submitted(
        &mut self,
        s: Submitted,
        transitions: &mut broadcast::Receiver<Transitioned>,
    ) -> Result<(), DemoError> {
        for line in self.pipeline.submitted(s) {
            self.narrator.say(&line)?;
        }
        self.look(transitions).await
    }

    async fn on_batch(
        &mut self,
        b: Batch,
        transitions: &mut broadcast::Receiver<Transitioned>,
    ) -> Result<(), DemoError> {
        for line in self.pictures.submitted(b) {
            self.narrator.say(&line)?;
        }
        self.look(transitions).await
    }

    /// Tells what the pipeline and the pictures did since the last look; transitions that came meanwhile
    /// are told first, so a task is never told running before its machine is told back.
    async fn look(
        &mut self,
        transitions: &mut broadcast::Receiver<Transitioned>,
    ) -> Result<(), DemoError> {
        let mut lines = self.pipeline.observe().await;
        lines.extend(self.pictures.observe().await);
        if lines.is_empty() {
            return Ok(());
        }
        while let Ok(t) = transitions.try_recv() {
            self.on_transition(&t)?;
        }
        for line in lines {
            self.narrator.say(&line)?;
        }
        Ok(())
    }

    fn machine(&self, name: &str) -> Option<MachineId> {
        self.fleet.registry.machine_index(name)
    }

    fn on_step(&mut self, step: Step, stop: &watch::Sender<bool>) -> Result<(), DemoError> {
        self.narrator.say(&format!("story: {}", step.line))?;
        match step.act {
            Act::Break(s, fault) => {
                let sim = &self.sims[s];
                if let Some(i) = self.machine(sim.name()) {
                    let attempts = self.fleet.machines.snapshot(i).remote_attempts;
                    self.tallies[i.0].base = Some((attempts, sim.work_hits()));
                    self.traffic.down[i.0].store(true, Ordering::Relaxed);
                }
                sim.set(fault);
            }
            Act::Fix(s) => {
                let sim = &self.sims[s];
                sim.set(Fault::Ok);
                if let Some(i) = self.machine(sim.name()) {
                    self.traffic.down[i.0].store(false, Ordering::Relaxed);
                    let attempts = self.fleet.machines.snapshot(i).remote_attempts;
                    let tally = &mut self.tallies[i.0];
                    if let Some((a, h)) = tally.base.take() {
                        tally.attempts_while_down += attempts.saturating_sub(a);
                        tally.reached_while_down += sim.work_hits().saturating_sub(h);
                    }
                }
            }
            Act::Pipeline => {
                let agent = agent::submit(self.traffic.client(), self.traffic.router().to_string());
                let tx = self.submitted_tx.clone();
                tokio::spawn(async move {
                    let _ = tx.send(agent.await);
                });
            }
            Act::Pictures => {
                let agent =
                    pictures::submit(self.traffic.client(), self.traffic.router().to_string());
                let tx = self.batch_tx.clone();
                tokio::spawn(async move {
                    let _ = tx.send(agent.await);
                });
            }
            Act::End => {
                let _ = stop.send(true);
            }
        }
        Ok(())
    }

    fn on_transition(&mut self, t: &Transitioned) -> Result<(), DemoError> {
        let mut down_for = None;
        if let Some(i) = self.machine(&t.machine) {
            let tally = &mut self.tallies[i.0];
            match (t.transition.from, t.transition.to) {
                (Phase::Closed, Phase::Open) => {
                    tally.trips += 1;
                    tally.opened_at = Some(Instant::now());
                }
                (Phase::HalfOpen, Phase::Open) => tally.failed_probes += 1,
                (_, Phase::Closed) => {
                    tally.recoveries += 1;
                    down_for = tally.opened_at.take().map(|at| at.elapsed());
                }
                _ => {}
            }
        }
        self.seen.clear();
        let line = narrate::transition(t, &self.fleet, down_for);
        self.narrator.say(&line)?;
        Ok(())
    }

    fn on_done(&mut self, d: Done) -> Result<(), DemoError> {
        match &d.outcome {
            Ok(s) => {
                self.served += 1;
                if s.rerouted {
                    self.rerouted += 1;
                    if self.seen.insert((d.kind.route(), s.skipped.clone())) {
                        self.narrator.say(&narrate::reroute(&d, s))?;
                    }
                }
            }
            Err(why) => {
                self.failed += 1;
                self.narrator.say(&format!(
                    "request #{} ({}) FAILED: {why}",
                    d.n,
                    d.kind.route()
                ))?;
            }
        }
        Ok(())
    }

    /// The live line: counts, and the machines whose breaker is not closed. Kept under 80
    /// columns, since `\r` cannot rewrite a line the terminal has wrapped.
    fn draw(&mut self) -> Result<(), DemoError> {
        let fleet = &self.fleet;
        let held: Vec<String> = fleet
            .machines
            .phases()
            .filter(|&(_, phase)| phase != Phase::Closed)
            .map(|(name, phase)| format!("{name} {phase}"))
            .collect();
        let breakers = match held.is_empty() {
            true => "all closed".to_string(),
            false => held.join(", "),
        };
        let tasks = self
            .pipeline
            .progress()
            .map(|t| format!("  {t}"))
            .unwrap_or_default();
        let line = format!(
            "  {:>4.1}s  sent {}  served {}  rerouted {}  failed {}{tasks} | {breakers}",
            self.start.elapsed().as_secs_f64(),
            self.traffic.sent(),
            self.served,
            self.rerouted,
            self.failed,
        );
        let line: String = line.chars().take(79).collect();
        self.narrator.progress(&line)?;
        Ok(())
    }

    pub async fn summary(&self, elapsed: Duration) -> Summary {
        let machines = self
            .fleet
            .registry
            .machines
            .iter()
            .zip(&self.tallies)
            .enumerate()
            .map(|(i, (m, t))| MachineSummary {
                name: m.name.clone(),
                trips: t.trips,
                failed_probes: t.failed_probes,
                recoveries: t.recoveries,
                tasks_while_down: self.traffic.tasks_while_down[i].load(Ordering::Relaxed),
                attempts_while_down: t.attempts_while_down,
                reached_while_down: t.reached_while_down,
            })
            .collect();
        let tasks = self.pipeline.summary().await;
        let images = self.pictures.summary().await;
        Summary {
            elapsed,
            sent: self.traffic.sent(),
            served: self.served,
            rerouted: self.rerouted,
            requests_failed: self.failed,
            failed: self.failed + tasks.failed + images.failed,
            tasks,
            images,
            machines,
        }
    }
}
