//! Target 5: `replay` on generated traces (SPEC §9) and on raw text.

use arbitrary::Unstructured;
use labrouter::breaker::FailureKind;
use labrouter::replay::replay;

use super::harness::{nasty, one_in, pick, show};

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
        let odd = one_in(u, 5)?;
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

fn event(u: &mut Unstructured<'_>, clock: &mut u64) -> R<String> {
    let mut fields = Vec::new();
    if !one_in(u, 30)? {
        let at = match u.int_in_range(0..=19)? {
            0 => odd_number(u)?,
            1 => {
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
    if !one_in(u, 30)? {
        let m = *pick(
            u,
            &["\"gpu\"", "\"cpu\"", "\"gpu\"", "\"\"", "\"ünï\"", "5"],
        )?;
        fields.push(format!("\"machine\": {m}"));
    }
    let ev = *pick(
        u,
        &[
            "request", "request", "request", "success", "failure", "failure", "cancel", "explode",
            "REQUEST",
        ],
    )?;
    if !one_in(u, 30)? {
        fields.push(format!("\"event\": {}", quoted(ev)));
    }
    if ev == "failure" || one_in(u, 20)? {
        let reason = if one_in(u, 10)? {
            quoted(&nasty(u)?)
        } else {
            quoted(pick(u, &FailureKind::ALL)?.as_str())
        };
        fields.push(format!("\"reason\": {reason}"));
        if one_in(u, 3)? {
            let ra = match u.int_in_range(0..=2)? {
                0 => odd_number(u)?,
                1 => u.arbitrary::<u64>()?.to_string(),
                _ => u.int_in_range(0..=100_000u32)?.to_string(),
            };
            fields.push(format!("\"retry_after_ms\": {ra}"));
        }
    }
    if one_in(u, 40)? {
        fields.push(format!("{}: 1", quoted(&nasty(u)?)));
    }
    if one_in(u, 30)? {
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
    let n = u.int_in_range(0..=40)?;
    let events = (0..n)
        .map(|_| event(u, &mut clock))
        .collect::<R<Vec<_>>>()?;
    let mut parts = Vec::new();
    if u.int_in_range(0..=4)? > 0 {
        parts.push(format!("\"breaker\": {}", policy(u)?));
    }
    if !one_in(u, 40)? {
        parts.push(format!("\"events\": [{}]", events.join(",\n ")));
    }
    if one_in(u, 40)? {
        parts.push("\"extra\": 1".into());
    }
    let mut t = format!("{{{}}}", parts.join(", "));
    if one_in(u, 10)? && !t.is_empty() {
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
