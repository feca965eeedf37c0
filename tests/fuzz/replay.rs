//! Target 5: `replay` on generated traces (docs/api.md "Command line") and on raw text.

use arbitrary::Unstructured;
use labrouter::breaker::FailureKind;
use labrouter::replay::replay;

use super::harness::{accepted, nasty, one_in, pick, show};

type R<T> = arbitrary::Result<T>;

fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A number as a trace may write it: whole, fractional, huge, negative, not finite.
fn odd_number(u: &mut Unstructured<'_>) -> R<String> {
    Ok((*pick(
        u,
        &[
            "-1",
            "5.5",
            "5.0",
            "1e3",
            "1e15",
            "9e15",
            "9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "1e20",
            "1e309",
            "-0",
            "0.0",
            "\"5\"",
            "null",
            "true",
            "[]",
            "{}",
            "\"NaN\"",
        ],
    )?)
    .to_string())
}

fn policy(u: &mut Unstructured<'_>) -> R<String> {
    let mut fields = Vec::new();
    let clean = u.arbitrary()?;
    for key in [
        "failure_threshold",
        "cooldown",
        "backoff",
        "max_cooldown",
        "success_threshold",
        "cool_down",
    ] {
        if !u.arbitrary()? {
            continue;
        }
        if clean && key == "cool_down" {
            continue;
        }
        let odd = !clean && one_in(u, 5)?;
        let v = match key {
            _ if odd => {
                if u.arbitrary()? {
                    odd_number(u)?
                } else {
                    quoted(&nasty(u)?)
                }
            }
            "failure_threshold" | "success_threshold" => u.int_in_range(1..=5u32)?.to_string(),
            "backoff" => (*pick(u, &["1.0", "1", "1.5", "2.0", "10", "1e300"])?).to_string(),
            "cooldown" => quoted(pick(u, &["1s", "20s", "60s", "1m30s", "250ms", "1d"])?),
            "max_cooldown" => quoted(pick(u, &["15m", "1h", "2d", "3650d", "20s"])?),
            _ => "1".to_string(),
        };
        fields.push(format!("{}: {v}", quoted(key)));
    }
    Ok(format!("{{{}}}", fields.join(", ")))
}

/// The machines of a trace, with how many of their calls may be outstanding.
const MACHINES: [&str; 3] = ["\"gpu\"", "\"cpu\"", "\"ünï\""];

/// One event. A `clean` trace keeps to valid fields and completes only calls it made, so
/// that most clean traces replay to the end.
fn event(u: &mut Unstructured<'_>, clock: &mut u64, open: &mut [u32; 3], clean: bool) -> R<String> {
    let odd = |u: &mut Unstructured<'_>, n: u32| -> R<bool> { Ok(!clean && one_in(u, n)?) };
    let mut fields = Vec::new();
    if !odd(u, 30)? {
        let at = match u.int_in_range(0..=19)? {
            0 if !clean => odd_number(u)?,
            1 if !clean || one_in(u, 20)? => {
                *clock = u.arbitrary()?;
                clock.to_string()
            }
            _ => {
                *clock = clock.saturating_add(*pick(
                    u,
                    &[0u64, 1, 5, 1000, 20_000, 60_000, 900_000, 86_400_000],
                )?);
                clock.to_string()
            }
        };
        fields.push(format!("\"at_ms\": {at}"));
    }
    let m = u.int_in_range(0..=MACHINES.len() - 1)?;
    if !odd(u, 30)? {
        let name = if odd(u, 10)? {
            *pick(u, &["\"\"", "5", "null"])?
        } else {
            MACHINES[m]
        };
        fields.push(format!("\"machine\": {name}"));
    }
    let ev = if clean {
        if open[m] > 0 && u.arbitrary()? {
            open[m] -= 1;
            *pick(u, &["success", "failure", "failure", "cancel"])?
        } else {
            open[m] += 1;
            "request"
        }
    } else {
        *pick(
            u,
            &[
                "request", "request", "request", "success", "failure", "failure", "cancel",
                "explode", "REQUEST",
            ],
        )?
    };
    if !odd(u, 30)? {
        fields.push(format!("\"event\": {}", quoted(ev)));
    }
    if ev == "failure" || odd(u, 20)? {
        let reason = if odd(u, 10)? {
            quoted(&nasty(u)?)
        } else {
            quoted(pick(u, &FailureKind::ALL)?.as_str())
        };
        fields.push(format!("\"reason\": {reason}"));
        if one_in(u, 3)? {
            let ra = match u.int_in_range(0..=2)? {
                0 if !clean => odd_number(u)?,
                1 => u.arbitrary::<u64>()?.to_string(),
                _ => u.int_in_range(0..=100_000u32)?.to_string(),
            };
            fields.push(format!("\"retry_after_ms\": {ra}"));
        }
    }
    if odd(u, 40)? {
        fields.push(format!("{}: 1", quoted(&nasty(u)?)));
    }
    if odd(u, 30)? {
        // A duplicate key: serde_json's map keeps the last.
        fields.push("\"at_ms\": 0".into());
    }
    Ok(format!("{{{}}}", fields.join(", ")))
}

fn trace(u: &mut Unstructured<'_>) -> R<String> {
    if one_in(u, 10)? {
        return Ok(String::from_utf8_lossy(u.bytes(u.len())?).into_owned());
    }
    let mut clock = 0;
    let mut open = [0; 3];
    let clean = u.arbitrary()?;
    let n = u.int_in_range(0..=40)?;
    let events = (0..n)
        .map(|_| event(u, &mut clock, &mut open, clean))
        .collect::<R<Vec<_>>>()?;
    let mut parts = Vec::new();
    if u.int_in_range(0..=4)? > 0 {
        parts.push(format!("\"breaker\": {}", policy(u)?));
    }
    if clean || !one_in(u, 40)? {
        parts.push(format!("\"events\": [{}]", events.join(",\n ")));
    }
    if !clean && one_in(u, 40)? {
        parts.push("\"extra\": 1".into());
    }
    let mut t = format!("{{{}}}", parts.join(", "));
    if !clean && one_in(u, 10)? && !t.is_empty() {
        let mut i = u.int_in_range(0..=t.len() - 1)?;
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        t.insert_str(i, pick(u, &["{", "}", "[", "]", ",", "\"", "1e309", ":"])?);
    }
    Ok(t)
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    let t = trace(u)?;
    show("trace", &t);
    let first = replay(&t);
    show("result", &first.as_ref().map(|r| r.to_json()));
    if let Ok(receipt) = first {
        accepted();
        let again = replay(&t).expect("the same trace replays again");
        assert_eq!(
            receipt.to_json(),
            again.to_json(),
            "two runs of one trace differ"
        );
        assert_eq!(receipt.sha256.len(), 64);
        let rows: Vec<usize> = receipt.run.transitions.iter().map(|r| r.index).collect();
        assert!(
            rows.windows(2).all(|w| w[0] <= w[1]),
            "transitions out of order"
        );
    }
    Ok(())
}

/// Traces the generator makes rarely: deep nesting, and the largest times a trace may name.
pub fn extremes() {
    let deep = format!(
        "{{\"events\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(replay(&deep).is_err());
    let far = r#"{"breaker": {"cooldown": "3650d", "max_cooldown": "3650d", "failure_threshold": 1},
        "events": [{"at_ms": 9000000000000000, "machine": "m", "event": "request"},
                   {"at_ms": 9000000000000000, "machine": "m", "event": "failure", "reason": "timeout",
                    "retry_after_ms": 18446744073709551615},
                   {"at_ms": 18446744073709551615, "machine": "m", "event": "request"}]}"#;
    if let Ok(r) = replay(far) {
        assert_eq!(r.to_json(), replay(far).expect("again").to_json());
    }
}
