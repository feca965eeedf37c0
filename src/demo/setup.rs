//! The demo's lab on paper: its registry (generated for the sims' loopback ports and a
//! temporary task store) and the story's timeline.

use std::path::Path;
use std::time::Duration;

use crate::sim::Fault;

/// Which simulated machine a story step acts on (registry order).
pub const GPU: usize = 0;
pub const CPU: usize = 1;

/// One beat of the story.
pub struct Step {
    /// Story seconds since the start (divided by the speed factor on the clock).
    pub at: f64,
    pub act: Act,
    pub line: &'static str,
}

pub enum Act {
    /// The machine breaks: the fault starts, and so does its outage window.
    Break(usize, Fault),
    /// The machine is fixed: answers normally again; its outage window ends.
    Fix(usize),
    /// An agent submits the evening pipeline of tasks (docs/api.md "Tasks").
    Pipeline,
    /// An agent asks for the evening's pictures: image generations, each posted after.
    Pictures,
    /// Traffic stops; tasks in flight finish.
    End,
}

/// The story: the GPU box goes away for an update; an agent asks for the evening's pictures
/// meanwhile, and the CPU box draws them, slower. While the GPU box is away the CPU box fills
/// its disk, so no machine that runs the coder model is up; an agent submits its evening
/// pipeline right then, and its tasks wait instead of failing. The disk is cleaned up, the
/// GPU box comes back, later hard-freezes and comes back again.
///
/// Timed so that every recovery is seen by a probe: a probe comes one cooldown (4 s) after a
/// trip, and a failed probe doubles the cooldown. The GPU box's update outlasts its first
/// probe (which fails, so the cooldown backs off to 8 s); the CPU box's disk and the freeze
/// end before their probes. The pipeline arrives after both breakers opened and waits about
/// 3 s, until the CPU box's probe finds it back.
pub fn story() -> Vec<Step> {
    vec![
        Step {
            at: 3.0,
            act: Act::Break(GPU, Fault::Refuse),
            line: "gpu-box goes away for an update (its port refuses connections)",
        },
        Step {
            at: 4.5,
            act: Act::Pictures,
            line: "an agent asks for tonight's pictures: 3 image generations on route 'draw', each with a follow-up that posts it once drawn",
        },
        Step {
            at: 9.0,
            act: Act::Break(
                CPU,
                Fault::Status {
                    code: 500,
                    retry_after: None,
                },
            ),
            line: "ubuntu-box fills its disk (answers HTTP 500): no machine that runs the coder model is up",
        },
        Step {
            at: 10.0,
            act: Act::Pipeline,
            line: "an agent submits its evening pipeline: 40 code reviews, each with a follow-up that uses the review's answer",
        },
        Step {
            at: 12.5,
            act: Act::Fix(CPU),
            line: "ubuntu-box: disk cleaned up",
        },
        Step {
            at: 14.0,
            act: Act::Fix(GPU),
            line: "gpu-box is back from its update",
        },
        Step {
            at: 21.0,
            act: Act::Break(GPU, Fault::Hang),
            line: "gpu-box hard-freezes (accepts connections, never answers)",
        },
        Step {
            at: 25.0,
            act: Act::Fix(GPU),
            line: "gpu-box is power-cycled and answers again",
        },
        Step {
            at: 33.0,
            act: Act::End,
            line: "end of the story: traffic stops; requests and tasks in flight finish",
        },
    ]
}

/// A duration in registry syntax, scaled by `speed` (never below 1 ms).
fn ms(secs: f64, speed: f64) -> String {
    let ms = (secs * 1000.0 / speed).round().max(1.0);
    format!("{ms}ms")
}

/// A path as a YAML single-quoted string.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "''"))
}

/// The demo's registry: machines on the sims' URLs (gpu-box, ubuntu-box, local, in that
/// order), short timeouts and cooldowns so the story fits in well under a minute, tasks kept
/// under `state_dir`. The coder model runs on both big machines under one backend name, so a
/// task that accepts only the same model (`accept: same_model`) waits while both are down,
/// where an interactive request degrades to the small local model.
pub fn registry_yaml(urls: [&str; 3], speed: f64, state_dir: &Path) -> String {
    let d = |s: f64| ms(s, speed);
    format!(
        r#"server:
  listen: 127.0.0.1:0
  max_body: 1MiB
  state_dir: {state_dir}
tasks: {{ max_running: 4 }}
defaults:
  timeouts: {{ connect: {connect}, first_byte: {first_byte}, idle: {idle}, total: {total} }}
  breaker: {{ failure_threshold: 3, cooldown: {cooldown}, backoff: 2.0, max_cooldown: {max_cooldown}, success_threshold: 1 }}
  max_concurrency: 8
machines:
  gpu-box: {{ url: "{gpu}", api: ollama }}
  ubuntu-box: {{ url: "{cpu}" }}
  local: {{ url: "{local}" }}
models:
  coder-gpu: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  vision-gpu: {{ machine: gpu-box, name: "qwen2.5vl:7b" }}
  coder-cpu: {{ machine: ubuntu-box, name: "qwen3-coder:30b" }}
  vision-cpu: {{ machine: ubuntu-box, name: "qwen2.5vl:7b" }}
  writer-cpu: {{ machine: ubuntu-box, name: "llama3.1:8b" }}
  small: {{ machine: local, name: "qwen3:4b" }}
  vision-small: {{ machine: local, name: "qwen2.5vl:3b" }}
  sdxl-gpu: {{ machine: gpu-box, name: "sdxl-turbo", kind: image }}
  sdxl-cpu: {{ machine: ubuntu-box, name: "sdxl-turbo", kind: image }}
routes:
  - name: code
    keywords: [code, refactor, function, bug, compile, "unit test", rust, python]
    chain: [coder-gpu, coder-cpu, small]
  - name: vision
    keywords: [image, photo, picture, screenshot, ocr]
    images: true
    chain: [vision-gpu, vision-cpu, vision-small]
  - name: summarize
    keywords: [summarize, summary, tldr]
    chain: [writer-cpu, small]
  - name: chat
    default: true
    chain: [small]
  - name: draw
    chain: [sdxl-gpu, sdxl-cpu]
"#,
        connect = d(0.5),
        first_byte = d(1.0),
        idle = d(2.0),
        total = d(30.0),
        cooldown = d(4.0),
        max_cooldown = d(20.0),
        state_dir = quoted(state_dir),
        gpu = urls[0],
        cpu = urls[1],
        local = urls[2],
    )
}

/// Story seconds on the clock at `speed`.
pub fn scaled(secs: f64, speed: f64) -> Duration {
    Duration::from_secs_f64(secs / speed)
}
