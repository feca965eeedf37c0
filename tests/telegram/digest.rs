//! The digest, pure: counts and wording for a scripted day, a quiet day, a huge lab.

use super::*;

// === the digest (pure) ===

fn row(at: &str, machine: &str, from: &str, to: &str, reason: &str, failures: i64) -> Row {
    Row {
        at_ms: ts(at).as_millisecond(),
        machine: machine.into(),
        from: from.parse().unwrap(),
        to: to.parse().unwrap(),
        reason: reason.into(),
        failures,
    }
}

fn sample(at: &str, boot: &str, machine: &str, local: u64) -> Sample {
    Sample {
        at_ms: ts(at).as_millisecond(),
        boot_ms: ts(boot).as_millisecond(),
        machine: machine.into(),
        remote_attempts: 0,
        local_rejections: local,
        // Twice as many rerouted as rejected: a separate counter, summed the same way.
        rerouted: 2 * local,
    }
}

fn machine(name: &str, state: &str) -> MachineNow {
    MachineNow {
        name: name.into(),
        state: state.parse().unwrap(),
        counters: None,
    }
}

fn host() -> Host {
    Host {
        hostname: Some("mac-mini".into()),
        uptime_s: Some(12 * 86_400 + 3 * 3600),
        mem_used_bytes: Some(9 * 1024 * 1024 * 1024),
        mem_total_bytes: Some(16 * 1024 * 1024 * 1024),
        load_1m: Some(0.42),
    }
}

/// The scripted day: the digest runs at 2026-11-30 08:00 Berlin (07:00Z).
fn scripted_day() -> (Vec<Row>, Vec<Sample>, Vec<MachineNow>) {
    let rows = vec![
        // ubuntu-box: three trips ten days ago, one 26 h ago that closed 23 h ago.
        row(
            "2026-11-20T10:00:00Z",
            "ubuntu-box",
            "closed",
            "open",
            "HTTP 500",
            3,
        ),
        row(
            "2026-11-20T10:05:00Z",
            "ubuntu-box",
            "open",
            "closed",
            "cooldown passed; health check as probe",
            0,
        ),
        row(
            "2026-11-20T11:00:00Z",
            "ubuntu-box",
            "closed",
            "open",
            "HTTP 500",
            3,
        ),
        row(
            "2026-11-20T11:05:00Z",
            "ubuntu-box",
            "half_open",
            "closed",
            "probe succeeded",
            0,
        ),
        row(
            "2026-11-21T11:00:00Z",
            "ubuntu-box",
            "closed",
            "open",
            "HTTP 502",
            3,
        ),
        row(
            "2026-11-21T11:05:00Z",
            "ubuntu-box",
            "half_open",
            "closed",
            "probe succeeded",
            0,
        ),
        row(
            "2026-11-29T05:00:00Z",
            "ubuntu-box",
            "closed",
            "open",
            "connect timeout",
            3,
        ),
        row(
            "2026-11-29T08:00:00Z",
            "ubuntu-box",
            "half_open",
            "closed",
            "probe succeeded",
            0,
        ),
        // gpu-box: refused at 02:00Z, one failed probe, back at 02:03:10; HTTP 500 from
        // 13:00Z to 13:30Z.
        row(
            "2026-11-30T02:00:00Z",
            "gpu-box",
            "closed",
            "open",
            "connection refused",
            3,
        ),
        row(
            "2026-11-30T02:01:00Z",
            "gpu-box",
            "open",
            "half_open",
            "cooldown of 60s passed",
            0,
        ),
        row(
            "2026-11-30T02:01:01Z",
            "gpu-box",
            "half_open",
            "open",
            "probe failed: connection refused",
            3,
        ),
        row(
            "2026-11-30T02:03:01Z",
            "gpu-box",
            "open",
            "half_open",
            "cooldown of 2m passed",
            0,
        ),
        row(
            "2026-11-30T02:03:10Z",
            "gpu-box",
            "half_open",
            "closed",
            "probe succeeded",
            0,
        ),
        row(
            "2026-11-29T13:00:00Z",
            "gpu-box",
            "closed",
            "open",
            "HTTP 500 <Internal & Error>",
            3,
        ),
        row(
            "2026-11-29T13:30:00Z",
            "gpu-box",
            "half_open",
            "closed",
            "probe succeeded",
            0,
        ),
    ];
    let mut rows = rows;
    rows.sort_by_key(|r| r.at_ms);
    let samples = vec![
        // Process A, started long before the window: 100 rejections at the window's start.
        sample(
            "2026-11-29T06:50:00Z",
            "2026-11-01T00:00:00Z",
            "gpu-box",
            100,
        ),
        sample(
            "2026-11-29T12:00:00Z",
            "2026-11-01T00:00:00Z",
            "gpu-box",
            180,
        ),
        // A restart at 13:00Z: process B counts from zero.
        sample("2026-11-29T14:00:00Z", "2026-11-29T13:00:00Z", "gpu-box", 5),
    ];
    let mut gpu = machine("gpu-box", "closed");
    gpu.counters = Some(sample(
        "2026-11-30T07:00:00Z",
        "2026-11-29T13:00:00Z",
        "gpu-box",
        40,
    ));
    let machines = vec![
        gpu,
        machine("ubuntu-box", "closed"),
        machine("local", "closed"),
    ];
    (rows, samples, machines)
}

#[test]
fn the_digest_counts_a_scripted_day() {
    let (rows, samples, machines) = scripted_day();
    let tz = berlin();
    let h = host();
    let input = Input {
        now: ts("2026-11-30T07:00:00Z"),
        tz: &tz,
        rows: &rows,
        samples: &samples,
        month_trips: None,
        machines: &machines,
        host: &h,
        tasks: None,
    };

    let gpu = digest::day(&input, &machines[0]);
    assert_eq!(gpu.trips, 2);
    assert_eq!(
        gpu.reasons,
        vec![
            ("HTTP 500 <Internal & Error>".to_string(), 1),
            ("connection refused".to_string(), 1)
        ]
    );
    assert_eq!(gpu.open_total, Duration::from_secs(30 * 60 + 3 * 60 + 10));
    assert_eq!(gpu.open_longest, Duration::from_secs(30 * 60));
    // 80 in process A, 40 in process B.
    assert_eq!(gpu.rejected, 120);
    assert_eq!(gpu.rerouted, 240);

    let ubuntu = digest::day(&input, &machines[1]);
    assert_eq!(ubuntu.trips, 0, "its trip was 26 h ago");
    assert_eq!(
        ubuntu.open_total,
        Duration::from_secs(3600),
        "clipped to the window"
    );
    assert_eq!(
        digest::most_tripped(&input),
        Some(("ubuntu-box".to_string(), 4))
    );

    let parts = digest::render(&input);
    assert_eq!(parts.len(), 1);
    let text = &parts[0];
    eprintln!(
        "--- rendered digest (HTML) ---\n{text}\n--- as shown ---\n{}",
        plain(text)
    );
    assert!(text.contains("Mon 30 Nov 08:00 CET"), "{text}");
    assert!(
        text.contains("2 trips in the last 24 h on 1 of 3 machines"),
        "{text}"
    );
    assert!(text.contains("<b>gpu-box</b> — closed now"), "{text}");
    assert!(
        text.contains("2 trips: HTTP 500 &lt;Internal &amp; Error&gt;; connection refused"),
        "{text}"
    );
    assert!(text.contains("open 33m in all, longest 30m"), "{text}");
    assert!(
        text.contains("240 requests rerouted, 120 rejected locally"),
        "{text}"
    );
    assert!(text.contains("<b>ubuntu-box</b> — closed now"), "{text}");
    assert!(text.contains("Closed all day: <b>local</b>."), "{text}");
    assert!(
        text.contains("Most trips in 30 days: <b>ubuntu-box</b> (4)."),
        "{text}"
    );
    assert!(
        text.contains("Orchestrator <b>mac-mini</b>: up 12d 3h, memory 9.0/16.0 GiB, load 0.42"),
        "{text}"
    );
}

#[test]
fn a_quiet_day_is_one_line() {
    let tz = berlin();
    let h = host();
    let machines = vec![machine("gpu-box", "closed"), machine("local", "closed")];
    let input = Input {
        now: ts("2026-11-30T07:00:00Z"),
        tz: &tz,
        rows: &[],
        samples: &[],
        month_trips: None,
        machines: &machines,
        host: &h,
        tasks: None,
    };
    let parts = digest::render(&input);
    assert_eq!(parts.len(), 1);
    eprintln!("--- quiet day ---\n{}", plain(&parts[0]));
    assert_eq!(parts[0].lines().count(), 1, "{}", parts[0]);
    assert!(parts[0].contains("a quiet day"));
    assert!(parts[0].contains("all 2 machines closed"));
}

#[test]
fn a_big_digest_splits_under_the_limit_and_escapes_names() {
    let tz = berlin();
    let h = host();
    let names: Vec<String> = (0..300)
        .map(|i| format!("box<{i}>&co-{}", "x".repeat(20)))
        .collect();
    let rows: Vec<Row> = names
        .iter()
        .map(|n| {
            row(
                "2026-11-30T03:00:00Z",
                n,
                "closed",
                "open",
                "connection <refused>",
                3,
            )
        })
        .collect();
    let machines: Vec<MachineNow> = names.iter().map(|n| machine(n, "open")).collect();
    let input = Input {
        now: ts("2026-11-30T07:00:00Z"),
        tz: &tz,
        rows: &rows,
        samples: &[],
        month_trips: None,
        machines: &machines,
        host: &h,
        tasks: None,
    };
    let parts = digest::render(&input);
    assert!(parts.len() > 3, "{} parts", parts.len());
    for p in &parts {
        assert!(p.chars().count() <= 4000);
        assert_eq!(p.matches("<b>").count(), p.matches("</b>").count());
        assert!(
            !p.contains("<refused>") && !p.contains("box<"),
            "unescaped: {p}"
        );
    }
    let all = parts.join("\n");
    for n in &names {
        assert!(all.contains(&format!("<b>{}</b>", labrouter::telegram::text::escape(n))));
    }
}

// === tasks in the digest (pure) ===

use labrouter::outcome::{TaskCode, TaskStatus};
use labrouter::tasks::model::AttemptRecord;
use labrouter::telegram::digest::{FailedTask, Succeeded, Tasks, Waits};

fn record(at: &str, outcome: &str, charged: bool) -> AttemptRecord {
    AttemptRecord {
        at: at.into(),
        target: "small@local".into(),
        outcome: outcome.parse().unwrap(),
        reason: None,
        detail: None,
        charged,
    }
}

fn ms(at: &str) -> i64 {
    ts(at).as_millisecond()
}

/// Submitted at 03:00, first walked at `started`, finished at 03:30:00.5.
fn succeeded(started: &str, attempts: Vec<AttemptRecord>) -> Succeeded {
    Succeeded {
        created_ms: ms("2026-11-30T03:00:00Z"),
        started_ms: Some(ms(started)),
        finished_ms: ms("2026-11-30T03:30:00.5Z"),
        attempts,
    }
}

#[test]
fn a_task_waited_out_an_outage_when_a_walk_held_it_back_or_it_queued_behind_one() {
    let none: &[(i64, i64)] = &[];
    let wait = |t: &Succeeded, down: &[(i64, i64)]| digest::outage_wait(t, down);
    let start = "2026-11-30T03:00:00Z";
    let end = "2026-11-30T03:30:00Z";

    // Served at once, or by a fallback in the walk that finished it: no wait.
    assert_eq!(wait(&succeeded(start, vec![]), none), None);
    let fallback = vec![record(end, "skipped", false), record(end, "failed", false)];
    assert_eq!(wait(&succeeded(start, fallback), none), None);

    // Held back by every target at 03:10 (skipped, or failed the way a down machine
    // fails), served at 03:30: it waited from 03:10 to its finish.
    for outcome in ["skipped", "failed"] {
        let held = vec![
            record("2026-11-30T03:10:00Z", outcome, false),
            record("2026-11-30T03:10:00Z", "skipped", false),
            record(end, "skipped", false),
        ];
        assert_eq!(
            wait(&succeeded(start, held), none),
            Some(Duration::from_millis(20 * 60 * 1000 + 500)),
            "{outcome}"
        );
    }

    // A walk that used an attempt (the machine was up, the request may be at fault), or a
    // restart's interrupted record, is no outage.
    let charged = vec![
        record("2026-11-30T03:10:00Z", "skipped", false),
        record("2026-11-30T03:10:00Z", "failed", true),
    ];
    assert_eq!(wait(&succeeded(start, charged), none), None);
    let interrupted = vec![record("2026-11-30T03:10:00Z", "interrupted", false)];
    assert_eq!(wait(&succeeded(start, interrupted), none), None);

    // Never walked until 03:25, behind a held-back task, while a breaker was open: it
    // waited from its submit. The same queue wait with every breaker closed is busy slots.
    let down = [(ms("2026-11-30T02:50:00Z"), ms("2026-11-30T03:24:59Z"))];
    let queued = succeeded("2026-11-30T03:25:00Z", vec![]);
    assert_eq!(
        wait(&queued, &down),
        Some(Duration::from_millis(30 * 60 * 1000 + 500))
    );
    assert_eq!(wait(&queued, none), None);
    let before = [(ms("2026-11-30T01:00:00Z"), ms("2026-11-30T02:00:00Z"))];
    assert_eq!(
        wait(&queued, &before),
        None,
        "an outage over before it came"
    );
}

fn day_of_tasks() -> Tasks {
    Tasks {
        finished: vec![
            (TaskStatus::Succeeded, 38),
            (TaskStatus::Failed, 4),
            (TaskStatus::Cancelled, 1),
            (TaskStatus::Expired, 3),
        ],
        succeeded: vec![
            // Held back at 03:10, served at 03:30.
            succeeded(
                "2026-11-30T03:00:00Z",
                vec![record("2026-11-30T03:10:00Z", "skipped", false)],
            ),
            // Queued through gpu-box's outage (13:00Z–13:30Z the day before).
            Succeeded {
                created_ms: ms("2026-11-29T13:05:00Z"),
                started_ms: Some(ms("2026-11-29T13:30:00Z")),
                finished_ms: ms("2026-11-29T13:31:00Z"),
                attempts: vec![],
            },
            // Served by a fallback: no wait.
            succeeded(
                "2026-11-30T03:00:00Z",
                vec![record("2026-11-30T03:30:00Z", "skipped", false)],
            ),
        ],
        failed: (0..5)
            .map(|i| FailedTask {
                id: format!("tsk_0000000000aaaaaaaaaaaaaaa{i}"),
                status: if i == 0 {
                    TaskStatus::Expired
                } else {
                    TaskStatus::Failed
                },
                code: Some(if i == 0 {
                    TaskCode::DeadlineExceeded
                } else {
                    TaskCode::AttemptsExhausted
                }),
            })
            .collect(),
        unfinished: 2,
    }
}

#[test]
fn the_digest_says_how_many_tasks_finished_waited_and_which_failed() {
    let (rows, samples, machines) = scripted_day();
    let tz = berlin();
    let h = host();
    let tasks = day_of_tasks();
    let input = Input {
        now: ts("2026-11-30T07:00:00Z"),
        tz: &tz,
        rows: &rows,
        samples: &samples,
        month_trips: None,
        machines: &machines,
        host: &h,
        tasks: Some(&tasks),
    };
    assert_eq!(
        digest::waits(&input),
        Waits {
            waited: 2,
            longest: Duration::from_secs(26 * 60),
        }
    );
    let parts = digest::render(&input);
    assert_eq!(parts.len(), 1);
    let text = &parts[0];
    eprintln!("--- digest with tasks ---\n{}", plain(text));
    assert!(
        text.contains(
            "🗂 <b>Tasks</b>: 46 finished in the last 24 h (38 succeeded, 4 failed, 1 cancelled, 3 expired); 2 not finished yet."
        ),
        "{text}"
    );
    assert!(
        text.contains("• 2 waited out an outage, the longest for 26m"),
        "{text}"
    );
    assert!(
        text.contains(
            "• failed or expired: tsk_0000000000aaaaaaaaaaaaaaa0 (expired, deadline_exceeded); \
             tsk_0000000000aaaaaaaaaaaaaaa1 (failed, attempts_exhausted);"
        ),
        "{text}"
    );
    assert!(
        text.contains("aaaa4 (failed, attempts_exhausted) and 2 more"),
        "{text}"
    );
    // After the machines, before the closing lines.
    let at = |s: &str| text.find(s).unwrap();
    assert!(at("<b>ubuntu-box</b> — closed now") < at("<b>Tasks</b>"));
    assert!(at("<b>Tasks</b>") < at("Closed all day"));
}

#[test]
fn a_quiet_day_with_tasks_adds_them_and_a_store_without_tasks_says_nothing() {
    let tz = berlin();
    let h = host();
    let machines = vec![machine("gpu-box", "closed")];
    let tasks = Tasks {
        finished: vec![(TaskStatus::Succeeded, 3)],
        ..Tasks::default()
    };
    let mut input = Input {
        now: ts("2026-11-30T07:00:00Z"),
        tz: &tz,
        rows: &[],
        samples: &[],
        month_trips: None,
        machines: &machines,
        host: &h,
        tasks: Some(&tasks),
    };
    let text = digest::render(&input).join("\n");
    assert!(text.contains("a quiet day"), "{text}");
    assert!(
        text.ends_with("\n\n🗂 <b>Tasks</b>: 3 finished in the last 24 h (3 succeeded)."),
        "{text}"
    );

    let waiting = Tasks {
        unfinished: 4,
        ..Tasks::default()
    };
    input.tasks = Some(&waiting);
    let text = digest::render(&input).join("\n");
    assert!(
        text.ends_with("🗂 <b>Tasks</b>: none finished in the last 24 h; 4 not finished yet."),
        "{text}"
    );

    for tasks in [None, Some(&Tasks::default())] {
        input.tasks = tasks;
        let parts = digest::render(&input);
        assert_eq!(parts[0].lines().count(), 1, "{}", parts[0]);
        assert!(!parts[0].contains("Tasks"));
    }
}
