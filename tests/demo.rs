//! `labrouter demo` runs to completion with 0 failed requests and 0 failed tasks, and tells
//! the whole story. The demo waits only on tokio's clock, so the paused clock plays its
//! ~33 s at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use labrouter::demo::{run, Options, Summary};

async fn play() -> (Summary, String) {
    let mut out = Vec::new();
    let summary = run(&Options::default(), &mut out).await.expect("demo ran");
    (summary, String::from_utf8(out).expect("utf-8 narration"))
}

/// The narration lines that contain every one of `words`, in order of appearance.
fn lines_with<'a>(text: &'a str, words: &[&str]) -> Vec<&'a str> {
    text.lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .collect()
}

/// The position of the first line containing every one of `words`; panics with the whole
/// narration when there is none.
fn at(text: &str, words: &[&str]) -> usize {
    text.lines()
        .position(|l| words.iter().all(|w| l.contains(w)))
        .unwrap_or_else(|| panic!("no line with {words:?} in:\n{text}"))
}

#[tokio::test(start_paused = true)]
async fn the_demo_runs_to_completion_with_0_failed_tasks() {
    let (s, text) = play().await;
    assert_eq!(s.failed, 0, "{text}");
    assert_eq!(s.served, s.sent, "{text}");
    assert!(s.all_served());
    assert!(
        s.sent > 300,
        "a steady stream for the whole story: {}",
        s.sent
    );
    assert!(s.rerouted > 0, "{text}");
    assert!(
        s.elapsed.as_secs_f64() < 60.0,
        "under a minute: {:?}",
        s.elapsed
    );
    assert!(!text.contains("FAILED"), "{text}");
    assert!(!text.contains('\r'), "no progress line unless asked for");
    // The evening pipeline: 40 reviews and their 40 follow-ups, every one finished.
    let t = &s.tasks;
    assert_eq!(
        (t.planned, t.submitted, t.follow_ups),
        (80, 80, 40),
        "{text}"
    );
    assert_eq!((t.finished, t.failed), (80, 0), "{text}");
    assert_eq!(t.follow_ups_ran, 40, "{text}");
    assert_eq!(
        t.waited, 40,
        "every review waited out the outage (the follow-ups were blocked on them): {text}"
    );
    // The tasks lived in a temporary directory, gone when the demo ends.
    let stored = lines_with(&text, &["  tasks: stored in "])[0];
    let dir = stored
        .split_once("stored in ")
        .and_then(|(_, rest)| rest.split_once(" (removed at the end)"))
        .map(|(dir, _)| dir)
        .expect("the header names the state directory");
    assert!(dir.contains("labrouter-demo-"), "{dir}");
    assert!(!std::path::Path::new(dir).exists(), "{dir} is left behind");
}

#[tokio::test(start_paused = true)]
async fn the_narration_tells_each_event_of_the_story_in_order() {
    let (s, text) = play().await;
    // The GPU box goes away: refused, tripped, skipped (its work served by the CPU box).
    let away = at(&text, &["story: gpu-box goes away"]);
    let refused = at(
        &text,
        &["reroute: code", "coder-gpu@gpu-box (connection refused)"],
    );
    let trip = at(
        &text,
        &["gpu-box OPEN after 3 failures in a row, last: connection refused. Skipped with no network for 4s"],
    );
    assert!(lines_with(&text, &["gpu-box OPEN after 3 failures"])[0]
        .contains("code now served by coder-cpu@ubuntu-box, vision by vision-cpu@ubuntu-box"));
    let skipped = at(
        &text,
        &[
            "reroute: code",
            "coder-gpu@gpu-box (breaker open, skipped without a connection)",
        ],
    );
    assert!(away < refused && refused < trip && trip < skipped, "{text}");
    // Its first probe finds it still away: backoff. After it is back, a probe closes it.
    let probe = at(&text, &["gpu-box HALF-OPEN: cooldown of 4s passed"]);
    let still_away = at(
        &text,
        &["gpu-box OPEN again, probe failed: connection refused; cooldown backs off to 8s"],
    );
    let back = at(&text, &["story: gpu-box is back"]);
    let closed = at(&text, &["gpu-box CLOSED: probe succeeded"]);
    assert!(
        skipped < probe && probe < still_away && still_away < back && back < closed,
        "{text}"
    );
    // The hard freeze: hung requests fall back, the breaker trips, a probe closes it.
    let freeze = at(&text, &["story: gpu-box hard-freezes"]);
    let hung = at(
        &text,
        &["reroute:", "gpu-box (no answer, liveness check failed)"],
    );
    let hung_trip = at(
        &text,
        &["gpu-box OPEN after 3 failures in a row, last: timeout after 1s (liveness check failed)"],
    );
    let power_cycled = at(&text, &["story: gpu-box is power-cycled"]);
    let hung_closed = lines_with(&text, &["gpu-box CLOSED: probe succeeded"]);
    assert_eq!(hung_closed.len(), 2, "{text}");
    assert!(
        closed < freeze && freeze < hung && hung < hung_trip && hung_trip < power_cycled,
        "{text}"
    );
    // While the GPU box is away, the CPU box fills its disk: HTTP 500s, a trip, summaries
    // served by the small model, and no machine that runs the coder model is up.
    let disk = at(&text, &["story: ubuntu-box fills its disk"]);
    let http500 = at(
        &text,
        &["ubuntu-box OPEN after 3 failures in a row, last: HTTP 500"],
    );
    assert!(lines_with(&text, &["ubuntu-box OPEN after 3 failures"])[0]
        .contains("summarize now served by small@local"));
    let cleaned = at(&text, &["story: ubuntu-box: disk cleaned up"]);
    let cpu_probe = at(&text, &["ubuntu-box HALF-OPEN"]);
    let cpu_closed = at(&text, &["ubuntu-box CLOSED: probe succeeded"]);
    assert!(
        still_away < disk && disk < http500 && http500 < cleaned && cleaned < back,
        "{text}"
    );
    assert!(cleaned < cpu_probe && cpu_probe < cpu_closed, "{text}");
    // Interactive code requests degrade to the small model meanwhile.
    let degraded = at(&text, &["reroute: code", "served by small@local"]);
    assert!(disk < degraded && degraded < cpu_closed, "{text}");
    // The pipeline arrives then: its tasks wait, sending nothing, and fail none.
    let submitted = at(&text, &["story: an agent submits its evening pipeline"]);
    let stored = at(
        &text,
        &["tasks: 80 submitted and stored: 40 reviews ready, 40 follow-ups blocked"],
    );
    let waiting = at(
        &text,
        &[
            "tasks: 40 waiting (every target of route 'code' they accept is held back",
            "40 follow-ups blocked on them, 0 failed",
        ],
    );
    let says = at(
        &text,
        &["is waiting: every target it accepts is held back: coder-gpu@gpu-box open"],
    );
    assert!(
        http500 < submitted && submitted < stored && stored < waiting && waiting < says,
        "{text}"
    );
    assert!(says < cleaned, "they wait while the disk is full: {text}");
    // The CPU box is back: the tasks run and finish, follow-ups with their review's answer.
    let running = at(
        &text,
        &[
            "tasks: running again (coder-cpu@ubuntu-box is back)",
            "0 failed",
        ],
    );
    let finished = at(
        &text,
        &[
            "tasks: all 80 finished: 80 succeeded (40 had waited out the outage; 40 follow-ups ran with their review's answer), 0 failed",
        ],
    );
    assert!(cpu_closed < running && running < finished, "{text}");
    // And the summary.
    let end = at(&text, &["Summary after"]);
    assert!(
        cpu_closed < end && finished < end && power_cycled < end,
        "{text}"
    );
    assert!(
        text.contains(&format!("labrouter saved {} wasted attempts", s.saved())),
        "{text}"
    );
    assert!(text.contains("failed           0"), "{text}");
    for line in [
        "submitted       80   (40 reviews + 40 follow-ups, each after its review)",
        "waited          40   (ready while every machine they accept was held back by its breaker)",
        "finished        80",
        "follow-ups ran  40",
        &format!(
            "sent to dead  {:>4}   (failed tries in their attempt lists",
            s.tasks.sent_to_down
        ),
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    assert_eq!(
        lines_with(&text, &["failed           0"]).len(),
        3,
        "0 requests, 0 pipeline tasks and 0 pictures failed: {text}"
    );
    assert!(
        text.trim_end().ends_with(&format!(
            "0 of {} requests and 0 of 86 tasks failed.",
            s.sent
        )),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_pictures_are_drawn_by_the_cpu_box_while_the_gpu_box_is_away_then_posted() {
    let (s, text) = play().await;
    let away = at(&text, &["story: gpu-box goes away"]);
    let trip = at(
        &text,
        &["gpu-box OPEN after 3 failures in a row, last: connection refused"],
    );
    assert!(
        lines_with(&text, &["gpu-box OPEN after 3 failures"])[0]
            .contains("draw by sdxl-cpu@ubuntu-box"),
        "{text}"
    );
    let asked = at(
        &text,
        &["story: an agent asks for tonight's pictures: 3 image generations"],
    );
    let submitted = at(
        &text,
        &["images: 3 pictures submitted to route 'draw', 3 posts blocked until their picture is drawn"],
    );
    let done = at(
        &text,
        &[
            "images: all 3 drawn by sdxl-cpu@ubuntu-box (",
            "a picture) and 3 posts ran after their picture, 0 failed",
        ],
    );
    let back = at(&text, &["story: gpu-box is back"]);
    assert!(
        away < trip && trip < asked && asked < submitted && submitted < done && done < back,
        "{text}"
    );
    let header = at(&text, &["  pictures: at 4.5s an agent asks for 3 image generations on route 'draw' (a picture takes 200ms on gpu-box, 1s on ubuntu-box)"]);
    assert!(header < away, "{text}");
    // Every picture drawn by the CPU box (the GPU box was away), each posted after it.
    let p = &s.images;
    assert_eq!(p.drawn_by, vec!["sdxl-cpu@ubuntu-box"; 3], "{text}");
    assert_eq!((p.planned, p.posted, p.failed), (6, 3, 0), "{text}");
    for line in [
        "drawn            3   (by sdxl-cpu@ubuntu-box)",
        "posted           3   (each after its picture, which has no text to put in)",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn dead_machines_get_far_fewer_attempts_than_a_retrying_client_would_send() {
    let (s, text) = play().await;
    let gpu = &s.machines[0];
    let cpu = &s.machines[1];
    let local = &s.machines[2];
    assert_eq!(
        (gpu.name.as_str(), cpu.name.as_str()),
        ("gpu-box", "ubuntu-box")
    );
    assert_eq!(
        (gpu.trips, gpu.failed_probes, gpu.recoveries),
        (2, 1, 2),
        "{text}"
    );
    assert_eq!(
        (cpu.trips, cpu.failed_probes, cpu.recoveries),
        (1, 0, 1),
        "{text}"
    );
    assert_eq!(
        (
            local.trips,
            local.tasks_while_down,
            local.attempts_while_down
        ),
        (0, 0, 0)
    );
    for m in [gpu, cpu] {
        assert!(m.tasks_while_down > 5, "{m:?}");
        assert!(
            m.attempts_while_down >= 3,
            "it takes 3 failures to trip: {m:?}"
        );
        assert!(
            m.attempts_while_down * 3 < m.retry3_attempts(),
            "far below a retry-3 client: {m:?}\n{text}"
        );
    }
    // A refused connection reaches nothing; hung and HTTP 500 requests do reach the machine.
    assert!(gpu.reached_while_down < gpu.attempts_while_down, "{gpu:?}");
    assert_eq!(cpu.reached_while_down, cpu.attempts_while_down, "{cpu:?}");
    assert!(s.saved() > 100, "{text}");
    // The 40 waiting tasks sent the down machines nothing beyond a probe per cooldown
    // (at most one per machine in the window), where a queue retrying each 3 times would
    // have sent 120.
    assert_eq!(s.tasks.waited, 40, "{text}");
    assert!(s.tasks.sent_to_down <= 2, "{:?}\n{text}", s.tasks);
}

#[tokio::test(start_paused = true)]
async fn a_speed_out_of_range_is_refused_before_anything_starts() {
    for speed in [0.0, 100.0, f64::NAN] {
        let mut out = Vec::new();
        let err = run(
            &Options {
                speed,
                progress: false,
            },
            &mut out,
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("--speed"), "{err}");
        assert!(out.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn twice_the_speed_tells_the_same_story_in_half_the_time() {
    let mut out = Vec::new();
    let opts = Options {
        speed: 2.0,
        progress: true,
    };
    let s = run(&opts, &mut out).await.expect("demo ran");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(s.failed, 0, "{text}");
    assert_eq!((s.tasks.finished, s.tasks.failed), (80, 0), "{text}");
    assert!(s.tasks.waited > 0, "{text}");
    assert!(s.elapsed.as_secs_f64() < 20.0, "{:?}", s.elapsed);
    assert!(
        text.contains("gpu-box HALF-OPEN: cooldown of 2s passed"),
        "{text}"
    );
    assert!(
        text.contains("\r\x1b[K"),
        "the progress line is drawn when asked for"
    );
}
