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
